//! `gpuwise pack`: nodes and workloads → placements by a policy → rendered.

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use gpuwise_pack::cluster;
use gpuwise_pack::consolidate::{self, Item};
use gpuwise_pack::mig::{self, MigCatalog};
use gpuwise_pack::place::{Policy, Protocol};
use gpuwise_render::Format;

use crate::cli::PackArgs;
use crate::output::emit;
use crate::printer;

fn read<T>(
    path: &std::path::Path,
    parse: fn(&str, &str) -> Result<cluster::Read<T>, cluster::ClusterError>,
) -> anyhow::Result<Vec<T>> {
    let name = path.display().to_string();
    let list = parse(&fs_err::read_to_string(path)?, &name)?;
    for (why, n) in &list.skipped {
        printer::warn(&format!("{name}: {n} row(s) skipped: {why}"));
    }
    Ok(list.items)
}

pub(crate) fn run(a: &PackArgs) -> anyhow::Result<ExitCode> {
    let format =
        crate::config::output_format(a.format.as_deref(), &crate::config::Config::default())?;
    anyhow::ensure!(
        format != Format::Html,
        "--format: pack prints table, json, markdown or csv"
    );
    if let Some(load) = a.load {
        anyhow::ensure!(
            load.is_finite() && load > 0.0 && load <= 100.0,
            "--load: {load} is not a share above 0 (1.3 = 130 %)"
        );
    }
    if let Some(report) = &a.consolidate {
        anyhow::ensure!(
            (0.0..0.95).contains(&a.headroom),
            "--headroom: {} is not a share from 0 to 0.95",
            a.headroom
        );
        let items = report_items(report)?;
        let c = consolidate::run(&items, a.headroom);
        emit(
            &gpuwise_pack::view::consolidation(&c, format),
            a.output.as_ref(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(workloads), Some(nodes)) = (&a.workloads, &a.nodes) else {
        anyhow::bail!("give WORKLOADS and --nodes, or --consolidate REPORT_JSON");
    };
    let policy: Policy = a.policy.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    if let (Some("node"), Some("workload")) = (kind_of(workloads), kind_of(nodes)) {
        bail!(
            "the files look swapped: `{}` is a node list and `{}` (given to --nodes) a workload list; \
             give the workloads first and the nodes to --nodes",
            workloads.display(),
            nodes.display()
        );
    }
    let nodes = read(nodes, cluster::parse_nodes)?;
    let pods = read(workloads, cluster::parse_pods)?;
    let protocol = Protocol {
        load: a.load,
        seed: a.seed,
        shuffle: a.shuffle,
        ..Protocol::default()
    };
    let mig = mig_catalog(&nodes);
    if policy == Policy::Mig && mig.is_empty() {
        printer::warn(
            "--policy mig: no node's GPU model has MIG profiles in the catalog \
             (A100, H100, H200; `gpuwise catalog gpus`): only whole-GPU and CPU-only workloads can be placed",
        );
    }
    let p = gpuwise_pack::run(&nodes, &pods, policy, &protocol, &mig)?;
    if p.failed_pods > 0 {
        printer::warn(&format!(
            "{} of {} workload(s) found no node with room",
            p.failed_pods, p.pods
        ));
    }
    emit(&gpuwise_pack::view::packing(&p, format), a.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// The MIG profiles of the nodes' GPU models, from the built-in catalog: memory slices are the
/// profile's share of the GPU's memory in eighths. Models the catalog does not know, and the
/// A30 (4 compute slices, other positions), have none.
fn mig_catalog(nodes: &[cluster::Node]) -> MigCatalog {
    let catalog = gpuwise_catalog::Catalog::builtin();
    let mut out = MigCatalog::new();
    for n in nodes.iter().filter(|n| n.gpus > 0) {
        if out.contains_key(&n.model) {
            continue;
        }
        let Some(gpu) = catalog.resolve(&n.model) else {
            continue;
        };
        if gpu.mig_slices() != Some(7) {
            continue;
        }
        let profiles = gpu
            .mig_profiles
            .iter()
            .filter_map(|p| {
                let memory = (8.0 * p.memory_gb / gpu.memory_gb).round().clamp(1.0, 8.0) as u8;
                let compute = u8::try_from(p.compute_slices).ok()?;
                (!mig::starts(compute, memory).is_empty()).then(|| mig::MigProfile {
                    name: p.name.clone(),
                    compute,
                    memory,
                    max_instances: u8::try_from(p.max_instances).unwrap_or(u8::MAX),
                })
            })
            .collect();
        out.insert(n.model.clone(), profiles);
    }
    out
}

/// What a CSV's header says it is: `node` (a GPU model and a GPU count per machine), or
/// `workload` (GPUs or GPU shares asked per pod); `None` when it cannot be told.
fn kind_of(path: &std::path::Path) -> Option<&'static str> {
    let file = std::fs::File::open(path).ok()?;
    let mut head = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(std::io::Read::take(file, 64 * 1024)),
        &mut head,
    )
    .ok()?;
    let cols: Vec<String> = head
        .trim()
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let has = |c: &str| cols.iter().any(|x| x == c);
    if has("gpu_milli") || has("gpu_spec") || (has("num_gpu") && has("cpu_milli") && !has("model"))
    {
        Some("workload")
    } else if has("model") && (has("gpu") || has("gpus")) {
        Some("node")
    } else {
        None
    }
}

/// Each device of a `gpuwise report --format json` as a workload: its peak memory share and
/// p95 utilization. Devices without either figure, and MIG instances (already a slice), are
/// skipped and counted: an unknown share is never taken as zero.
fn report_items(path: &std::path::Path) -> anyhow::Result<Vec<Item>> {
    let name = path.display().to_string();
    let make = "make one with `gpuwise report LOGS --format json -o report.json`";
    anyhow::ensure!(
        !path.is_dir(),
        "--consolidate `{name}` is a directory: it takes a report's JSON ({make})"
    );
    let text = fs_err::read_to_string(path)?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect::<String>();
        if first.contains(',') && !first.trim_start().starts_with('{') {
            anyhow!("--consolidate `{name}` is CSV (`{first}`), not a report's JSON ({make})")
        } else {
            anyhow!("{name}: not JSON: {e} ({make})")
        }
    })?;
    let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    anyhow::ensure!(
        schema.starts_with("gpuwise.report/"),
        "{name}: not a `gpuwise report --format json` (schema `{schema}`)"
    );
    let devices = v
        .get("devices")
        .and_then(|d| d.as_array())
        .ok_or_else(|| anyhow!("{name}: no `devices` list"))?;
    let mut items = Vec::new();
    let mut skipped: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for d in devices {
        let num = |k: &str| d.get(k).and_then(serde_json::Value::as_f64);
        let text = |k: &str| d.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        if d.get("mig_profile").is_some_and(|m| !m.is_null()) {
            *skipped.entry("a MIG instance").or_default() += 1;
            continue;
        }
        let memory = match (num("peak_memory_used_mib"), num("memory_total_mib")) {
            (Some(used), Some(total)) if total > 0.0 => (used / total).clamp(0.0, 1.0),
            _ => {
                *skipped.entry("peak or total memory unknown").or_default() += 1;
                continue;
            }
        };
        let Some(p95) = num("p95_utilization_pct") else {
            *skipped.entry("p95 utilization unknown").or_default() += 1;
            continue;
        };
        let (Some(id), Some(model)) = (text("id"), text("model").or_else(|| text("model_name")))
        else {
            *skipped.entry("no id or model").or_default() += 1;
            continue;
        };
        items.push(Item {
            id,
            model,
            memory,
            compute: (p95 / 100.0).clamp(0.0, 1.0),
            usd_per_gpu_hour: num("usd_per_gpu_hour"),
        });
    }
    for (why, n) in &skipped {
        printer::warn(&format!("{name}: {n} device(s) skipped: {why}"));
    }
    anyhow::ensure!(
        !items.is_empty(),
        "{name}: no device with peak memory and p95 utilization"
    );
    Ok(items)
}
