//! `gpuwise catalog`: GPU specifications, instances, prices, and the importer that refreshes
//! them.

use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use gpuwise_catalog::{Catalog, GpuSpec, Instance, Pricing};
use gpuwise_catalog_import as catalog_import;
use gpuwise_render::{Format, grid};
use serde::Serialize;

use crate::cli::{CatalogCommand, ImportArgs, InstancesArgs, PriceArgs};
use crate::printer;

use crate::clock::now_ms;
use crate::output::emit;

fn format(s: &str) -> anyhow::Result<Format> {
    let f = Format::parse(s).map_err(|e| anyhow!("--format: {e}"))?;
    if f == Format::Html {
        bail!("--format: html is for reports; use table, json, csv or markdown");
    }
    Ok(f)
}

fn json<T: Serialize>(v: &T) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    Ok(s)
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.digits$}"))
}

/// Warn (stderr) about prices older than the staleness limit among `rows`.
fn warn_stale(rows: &[&Instance], days: u32) -> anyhow::Result<()> {
    let now = now_ms()?;
    let mut old: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in rows {
        if let Ok(d) = r.as_of.parse::<jiff::civil::Date>() {
            let t = jiff::tz::TimeZone::UTC
                .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))?
                .as_millisecond();
            if (now - t) / gpuwise_core::DAY_MS > i64::from(days) {
                *old.entry(r.as_of.as_str()).or_default() += 1;
            }
        }
    }
    for (date, n) in old {
        // Said once a day: it stays true until the catalog is refreshed.
        if crate::notice::first_today(&format!("stale_price {date} {days}")) {
            printer::warn(&format!(
                "{n} price(s) as of {date} are older than {days} days: refresh with `{} catalog import` (docs/catalog.md; said once a day)",
                printer::me()
            ));
        }
    }
    Ok(())
}

pub(crate) fn run(cmd: &CatalogCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CatalogCommand::Gpus(a) => {
            let c = crate::inputs::catalog(&a.source)?;
            let f = format(&a.format)?;
            let out = if f == Format::Json {
                json(&c.gpus)?
            } else {
                let rows: Vec<Vec<String>> = c
                    .gpus
                    .iter()
                    .map(|g| {
                        let t = &g.dense_tflops;
                        vec![
                            g.name.clone(),
                            g.vendor.clone(),
                            g.architecture.clone(),
                            format!("{}", g.memory_gb),
                            num(g.memory_bandwidth_gb_s, 0),
                            num(t.fp32, 1),
                            num(t.tf32, 1),
                            num(t.bf16.or(t.fp16), 1),
                            num(t.fp8, 1),
                            num(t.int8, 1),
                            num(g.tdp_w, 0),
                            g.mig_profiles
                                .iter()
                                .map(|p| p.name.as_str())
                                .filter(|n| !n.contains('+'))
                                .collect::<Vec<_>>()
                                .join(" "),
                        ]
                    })
                    .collect();
                let mut s = grid::render(
                    &[
                        "GPU",
                        "VENDOR",
                        "ARCH",
                        "MEM GB",
                        "GB/S",
                        "FP32",
                        "TF32",
                        "BF16/FP16",
                        "FP8",
                        "INT8",
                        "TDP W",
                        "MIG PROFILES",
                    ],
                    &[3, 4, 5, 6, 7, 8, 9, 10],
                    // Narrow terminals keep the name, memory, bandwidth and tensor TFLOPS.
                    &[11, 6, 9, 1, 5, 10, 2],
                    &rows,
                    f,
                );
                if f == Format::Table {
                    s.push_str("\nDense TFLOPS (no sparsity). Sources: `--format json` gives each GPU's source and date.\n");
                    // Figures that are a bound, not the GPU's own datasheet's, say so.
                    for caveat in c.gpus.iter().filter_map(GpuSpec::compute_caveat) {
                        s.push_str(&format!("{caveat}.\n"));
                    }
                    s = gpuwise_render::fit_text(&s);
                }
                s
            };
            emit(&out, None)?;
        }
        CatalogCommand::Instances(a) => instances(a)?,
        CatalogCommand::Price(a) => price(a)?,
        CatalogCommand::Import(a) => import(a)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn gpu_filter(c: &Catalog, want: &str) -> anyhow::Result<Vec<String>> {
    let hits: Vec<String> = c
        .lookup(want)
        .map_err(|e| anyhow!("{e} (see `{} catalog gpus`)", printer::me()))?
        .iter()
        .map(|g| g.name.clone())
        .collect();
    Ok(hits)
}

fn instances(a: &InstancesArgs) -> anyhow::Result<()> {
    let c = crate::inputs::catalog(&a.query.source)?;
    let f = format(&a.query.format)?;
    let gpus = a.gpu.as_deref().map(|g| gpu_filter(&c, g)).transpose()?;
    c.check_place(a.cloud.as_deref(), a.region.as_deref())
        .map_err(|e| anyhow!(e))?;
    let pricing = a
        .pricing
        .as_deref()
        .map(Pricing::parse)
        .transpose()
        .map_err(|e| anyhow!("--pricing: {e}"))?;
    let mut rows: Vec<&Instance> = c
        .instances
        .iter()
        .filter(|i| gpus.as_ref().is_none_or(|g| g.contains(&i.gpu)))
        .filter(|i| a.cloud.as_ref().is_none_or(|c| *c == i.cloud))
        .filter(|i| a.region.as_ref().is_none_or(|r| *r == i.region))
        .filter(|i| pricing.is_none_or(|p| i.price(p).is_some()))
        .collect();
    let key = pricing.unwrap_or(Pricing::OnDemand);
    rows.sort_by(|x, y| {
        let px = x.per_gpu(key).unwrap_or(f64::INFINITY);
        let py = y.per_gpu(key).unwrap_or(f64::INFINITY);
        px.total_cmp(&py)
            .then_with(|| x.cloud.cmp(&y.cloud))
            .then_with(|| x.instance_type.cmp(&y.instance_type))
    });
    let out = if f == Format::Json {
        json(&rows)?
    } else {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|i| {
                vec![
                    i.cloud.clone(),
                    i.instance_type.clone(),
                    i.region.clone(),
                    i.gpu.clone(),
                    format!("{}", i.gpu_count),
                    listed(i, Pricing::OnDemand, f == Format::Csv),
                    listed(i, Pricing::Spot, f == Format::Csv),
                    listed(i, Pricing::Commit1y, f == Format::Csv),
                    listed(i, Pricing::Commit3y, f == Format::Csv),
                    num(i.per_gpu(key), 4),
                    i.as_of.clone(),
                    i.suspect
                        .iter()
                        .map(|x| format!("{}:{}", x.pricing, x.reason))
                        .collect::<Vec<_>>()
                        // A terminal may wrap between flags; CSV keeps one token.
                        .join(if f == Format::Csv { ";" } else { "; " }),
                ]
            })
            .collect();
        let per = format!("$/GPU-H {}", key.as_str().to_uppercase());
        grid::render(
            &[
                "CLOUD",
                "INSTANCE",
                "REGION",
                "GPU",
                "GPUS",
                "ON-DEMAND $/H",
                "SPOT $/H",
                "1Y $/H",
                "3Y $/H",
                per.as_str(),
                "AS OF",
                "SUSPECT",
            ],
            &[4, 5, 6, 7, 8, 9],
            &[11, 10, 8, 7, 2],
            &table,
            f,
        )
    };
    emit(&out, None)?;
    let suspect = rows.iter().filter(|i| !i.suspect.is_empty()).count();
    if suspect > 0 && f != Format::Json {
        printer::warn(&format!(
            "{suspect} row(s) carry a price marked `?`: the importer found it doubtful (a spot price not below on-demand, a bigger GPU cheaper than its smaller variant, or far below other clouds); it is listed but never quoted — confirm it with `[[confirm]]` in an --overlay (docs/catalog.md)"
        ));
    }
    warn_stale(&rows, a.query.source.stale_price_days.unwrap_or(180))
}

/// A listed price, marked `?` when suspect (the SUSPECT column says why).
fn listed(i: &Instance, p: Pricing, csv: bool) -> String {
    let v = num(i.listed_price(p), 4);
    if i.suspect_reason(p).is_some() && !csv {
        format!("{v}?")
    } else {
        v
    }
}

/// One row of `catalog price`.
#[derive(Serialize)]
struct PriceRow<'a> {
    gpu: &'a str,
    cloud: &'a str,
    instance_type: &'a str,
    region: &'a str,
    pricing: Pricing,
    gpu_count: f64,
    usd_per_instance_hour: Option<f64>,
    usd_per_gpu_hour: f64,
    usd_per_dense_bf16_pflop_hour: Option<f64>,
    usd_per_tb_s_hour: Option<f64>,
    as_of: &'a str,
    source: &'a str,
}

fn price(a: &PriceArgs) -> anyhow::Result<()> {
    let c = crate::inputs::catalog(&a.query.source)?;
    let f = format(&a.query.format)?;
    let names = gpu_filter(&c, &a.gpu)?;
    if names.len() > 1 {
        bail!("`{}` matches {}: name one", a.gpu, names.join(", "));
    }
    let spec = c
        .resolve(&names[0])
        .ok_or_else(|| anyhow!("`{}` is not a GPU in the catalog", a.gpu))?;
    let pricing = a
        .pricing
        .as_deref()
        .map(Pricing::parse)
        .transpose()
        .map_err(|e| anyhow!("--pricing: {e}"))?;
    let options = c.cheapest_options(&spec.name, pricing);
    let bf16 = spec.dense_tflops.bf16.or(spec.dense_tflops.fp16);
    let rows: Vec<PriceRow<'_>> = options
        .iter()
        .map(|(p, i, v)| PriceRow {
            gpu: &spec.name,
            cloud: &i.cloud,
            instance_type: &i.instance_type,
            region: &i.region,
            pricing: *p,
            gpu_count: i.gpu_count,
            usd_per_instance_hour: i.price(*p),
            usd_per_gpu_hour: *v,
            usd_per_dense_bf16_pflop_hour: bf16.map(|t| v / (t / 1000.0)),
            usd_per_tb_s_hour: spec.memory_bandwidth_gb_s.map(|b| v / (b / 1000.0)),
            as_of: &i.as_of,
            source: &i.source,
        })
        .collect();
    let out = if f == Format::Json {
        json(&rows)?
    } else {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.cloud.to_owned(),
                    r.pricing.as_str().to_owned(),
                    r.instance_type.to_owned(),
                    r.region.to_owned(),
                    format!("{}", r.gpu_count),
                    format!("{:.4}", r.usd_per_gpu_hour),
                    num(r.usd_per_dense_bf16_pflop_hour, 3),
                    num(r.usd_per_tb_s_hour, 3),
                    r.as_of.to_owned(),
                ]
            })
            .collect();
        let mut s = grid::render(
            &[
                "CLOUD",
                "PRICING",
                "INSTANCE",
                "REGION",
                "GPUS",
                "$/GPU-H",
                "$/BF16-PFLOP-H",
                "$/TB/S-H",
                "AS OF",
            ],
            &[4, 5, 6, 7],
            &[8, 7, 3],
            &table,
            f,
        );
        if f == Format::Table {
            s.push_str(&format!(
                "\n{}: {} GB, {} GB/s, {} dense BF16 TFLOPS. $/BF16-PFLOP-h divides by dense peak, not achieved throughput.\n",
                spec.name,
                spec.memory_gb,
                num(spec.memory_bandwidth_gb_s, 0),
                num(bf16, 1)
            ));
            if let Some(caveat) = spec.compute_caveat() {
                s.push_str(&format!("{caveat}.\n"));
            }
            s = gpuwise_render::fit_text(&s);
        }
        s
    };
    emit(&out, None)?;
    let used: Vec<&Instance> = options.iter().map(|(_, i, _)| *i).collect();
    if used.is_empty() {
        printer::warn(&format!("no instance in the catalog offers {}", spec.name));
    }
    warn_stale(&used, a.query.source.stale_price_days.unwrap_or(180))
}

fn import(a: &ImportArgs) -> anyhow::Result<()> {
    let check_date = |d: &str| {
        d.parse::<jiff::civil::Date>()
            .map(|_| ())
            .map_err(|_| anyhow!("`{d}` is not a date (YYYY-MM-DD)"))
    };
    check_date(&a.as_of)?;
    if let Some(d) = &a.aws_as_of {
        check_date(d)?;
    }
    if a.skypilot.is_empty() && a.aws_vantage.is_none() {
        bail!("nothing to import: give --skypilot DIR and/or --aws-vantage FILE");
    }
    let catalog = Catalog::builtin();
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    for dir in &a.skypilot {
        let (r, s) = catalog_import::skypilot(dir, &a.as_of, &a.skypilot_source)
            .with_context(|| format!("importing `{}`", dir.display()))?;
        rows.extend(r);
        summaries.extend(s);
    }
    if let Some(path) = &a.aws_vantage {
        let as_of = a.aws_as_of.as_deref().unwrap_or(&a.as_of);
        let (r, s) = catalog_import::aws_vantage(path, as_of, &a.aws_source, &catalog)?;
        rows.extend(r);
        summaries.push(s);
    }
    let mut rows = catalog_import::collapse(rows);
    let suspects = catalog_import::flag_suspects(&mut rows, &catalog);
    let mut out = String::from(gpuwise_catalog::INSTANCES_HEADER);
    out.push('\n');
    for r in &rows {
        out.push_str(&r.to_csv());
        out.push('\n');
    }
    emit(&out, a.out.as_ref())?;
    for s in &summaries {
        let skipped: u64 = s.skipped.values().sum();
        printer::info(&format!(
            "{} ({}): {} rows read, {} kept, {} skipped",
            s.file, s.cloud, s.rows, s.kept, skipped
        ));
        for (why, n) in &s.skipped {
            printer::info(&format!("    {n:>7}  skipped: {why}"));
        }
        for (what, n) in &s.notes {
            printer::info(&format!("    {n:>7}  fixed: {what}"));
        }
    }
    printer::info(&format!(
        "{} instance rows (one per cloud, instance type, region)",
        rows.len()
    ));
    for (why, n) in &suspects {
        printer::info(&format!(
            "    {n:>7}  prices flagged suspect: {why} (listed, not quoted; confirm in an overlay)"
        ));
    }
    Ok(())
}
