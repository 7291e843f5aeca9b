//! `gpuwise demo`: a deterministic synthetic week of a 52-GPU fleet, reported on.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_analysis::Analysis;
use gpuwise_render::{Format, RenderOptions};
use gpuwise_synth::{Fleet, FleetOptions};

use crate::cli::{AdviseOpts, AnalysisArgs, DemoArgs, ReadArgs};
use crate::config::Config;
use crate::fleet::Asks;
use crate::printer;

/// The demo's price file: the dmon host's logs name no GPU model, so a rule prices it.
const PRICES: &str = r#"# Prices for the demo fleet. Rules are tried in order; the first match wins; devices no rule
# matches get the catalog price of their GPU model (see `gpuwise catalog price`).
[[rule]]
host = "dev-t4-*"
usd_per_gpu_hour = 0.526
instance = "aws g4dn.xlarge"
pricing = "on-demand"
note = "dmon logs name no GPU model: priced as T4 (instances.vantage.sh, us-east-1, 2026-01-21)"
"#;

const TEAMS: &str = r#"# Teams for the demo fleet: pods win over namespaces, which win over hosts.
[namespaces]
"research" = "research"
"ml-serving" = "serving"
"notebooks" = "research"

[hosts]
"train-h100-*" = "research"
"serve-l4-*" = "serving"
"nb-a10g-*" = "research"
"dev-*" = "platform"
"#;

pub(crate) fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let format = Format::parse(&args.format).map_err(|e| anyhow!("--format: {e}"))?;
    let fleet = Fleet::new(FleetOptions {
        gpus: 52,
        days: 7,
        interval_ms: 120_000,
        seed: args.seed,
        start_ms: crate::synthetic::DEFAULT_START_MS,
        format: None,
    });
    let data = args.out.join("data");
    if data.exists() {
        fs_err::remove_dir_all(&data)?;
    }
    printer::info(&format!(
        "writing a week of a {}-GPU fleet to {} …",
        fleet.devices.len(),
        data.display()
    ));
    crate::synthetic::write_fleet(&fleet, &data, "none")?;
    crate::synthetic::write_truth(&fleet, &args.out.join("truth.json"))?;
    let prices = args.out.join("prices.toml");
    let teams = args.out.join("teams.toml");
    crate::output::write(&prices, PRICES.as_bytes())?;
    crate::output::write(&teams, TEAMS.as_bytes())?;
    let mut analysis = AnalysisArgs {
        prices: Some(prices),
        teams: Some(teams),
        group_by: Some("team".into()),
        ..AnalysisArgs::default()
    };
    // The demo says once how old its catalog prices are, instead of warning about them.
    analysis.catalog.stale_price_days = Some(u32::MAX);
    let asks = Asks {
        advise: Some(&AdviseOpts::default()),
        ..Asks::default()
    };
    let settings =
        crate::fleet::resolve(&ReadArgs::default(), &analysis, &Config::default(), &asks)?;
    let now = settings.now_ms;
    let read = settings.read;
    let analysis = Analysis::new(settings.analysis);
    let (mut rep, profiles, _) = crate::fleet::from_files(
        &[data.display().to_string()],
        &read,
        &analysis,
        now,
        true,
        crate::fleet::Keep::Profiles,
    )?;
    let plain = rep.clone();
    let advice = analysis.advice(&rep, &profiles);
    Analysis::with_advice_kpis(&mut rep, &advice);
    let summary = format!(
        "Advice: {} actions; the combined plan saves {} of {} a month (details: {} advise {} --prices {}, or the HTML report)",
        advice.actions.len(),
        gpuwise_render::usd(advice.total_monthly_savings_usd),
        gpuwise_render::usd(advice.current_monthly_usd),
        printer::me(),
        data.display(),
        args.out.join("prices.toml").display()
    );
    let doc = gpuwise_analysis::view::Document {
        report: &rep,
        advice: Some(&advice),
    };
    let html = args.out.join("report.html");
    let json = args.out.join("report.json");
    crate::output::write(
        &html,
        gpuwise_analysis::view::render(&doc, Format::Html, &RenderOptions::default()).as_bytes(),
    )?;
    crate::output::write(
        &json,
        gpuwise_analysis::view::render(&doc, Format::Json, &RenderOptions::default()).as_bytes(),
    )?;
    let color = printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    crate::output::emit(
        &gpuwise_analysis::view::render(
            &gpuwise_analysis::view::Document::report(&plain),
            format,
            &RenderOptions { top: 15, color },
        ),
        None,
    )?;
    printer::info(&summary);
    if let Some(as_of) = catalog_dates(&rep) {
        printer::info(&format!(
            "Prices: the built-in catalog's, as of {as_of} (a demo; for your fleet refresh them with `{} catalog import` or pass --prices)",
            printer::me()
        ));
    }
    printer::info(&format!("HTML report: {}", html.display()));
    printer::info(&format!(
        "JSON report: {}   planted truth: {}",
        json.display(),
        args.out.join("truth.json").display()
    ));
    next_steps(&data, &args.out);
    Ok(ExitCode::SUCCESS)
}

/// What to run next on the demo's data: the report, the allocation, the live dashboard.
fn next_steps(data: &std::path::Path, out: &std::path::Path) {
    let files = format!(
        "{} --prices {} --teams {}",
        data.display(),
        out.join("prices.toml").display(),
        out.join("teams.toml").display()
    );
    let me = printer::me();
    printer::info(&format!(
        "Run it yourself: {me} report {files} --group-by team"
    ));
    printer::info(&format!(
        "Who spent what: {me} allocate {files} --mode chargeback"
    ));
    printer::info(&format!(
        "Live dashboard: {me} serve {files}   (http://127.0.0.1:8080/)"
    ));
}

/// The as-of dates of the catalog prices the demo's devices used.
fn catalog_dates(rep: &gpuwise_core::report::Report) -> Option<String> {
    let dates: std::collections::BTreeSet<&str> = rep
        .devices
        .iter()
        .filter_map(|d| d.price_source.as_deref())
        .filter_map(|s| s.rsplit_once(", ").map(|(_, d)| d.trim_end_matches(')')))
        .filter(|d| d.len() == 10 && d.as_bytes()[4] == b'-')
        .collect();
    (!dates.is_empty()).then(|| dates.into_iter().collect::<Vec<_>>().join(", "))
}
