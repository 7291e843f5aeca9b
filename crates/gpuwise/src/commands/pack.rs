//! `gpuwise pack`: nodes and workloads → placements by a policy → rendered.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_pack::cluster;
use gpuwise_pack::place::{self, Policy, Protocol};
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
    let (Some(workloads), Some(nodes)) = (&a.workloads, &a.nodes) else {
        anyhow::bail!("give WORKLOADS and --nodes, or --consolidate REPORT_JSON");
    };
    let policy: Policy = a.policy.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    let nodes = read(nodes, cluster::parse_nodes)?;
    let pods = read(workloads, cluster::parse_pods)?;
    let protocol = Protocol {
        load: a.load,
        seed: a.seed,
        shuffle: a.shuffle,
        ..Protocol::default()
    };
    let p = place::run(&nodes, &pods, policy, &protocol)?;
    if p.failed_pods > 0 {
        printer::warn(&format!(
            "{} of {} workload(s) found no node with room",
            p.failed_pods, p.pods
        ));
    }
    emit(
        &gpuwise_render::pack::packing(&p, format),
        a.output.as_ref(),
    )?;
    Ok(ExitCode::SUCCESS)
}
