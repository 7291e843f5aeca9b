//! The review as the meeting reads it: the headline, the fleet per period, the movers, new
//! waste, the actions and what they realized, then every group's trend; a table, Markdown,
//! an HTML page with charts, or JSON (`gpuwise.review/v1`).

use gpuwise_render::section::Section;
use gpuwise_render::{Format, RenderOptions, usd};

use crate::review::{Figures, Review, Trend};

fn money(v: Option<f64>) -> String {
    v.map_or_else(|| "unknown".to_owned(), usd)
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.1} %"))
}

fn signed(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 0.0 => format!("+{}", usd(x)),
        Some(x) => format!("−{}", usd(-x)),
        None => "unknown".to_owned(),
    }
}

/// One sentence: the reviewed period's spend and waste against the one before, and the
/// actions' realized saving.
#[must_use]
pub fn headline(r: &Review) -> String {
    let last = r.fleet.last().cloned().flatten();
    let prev = r
        .fleet
        .len()
        .checked_sub(2)
        .and_then(|i| r.fleet[i].clone());
    let Some(now) = last else {
        return format!("{}: the store holds no telemetry for it.", r.period);
    };
    let change = match (now.spend_usd, prev.as_ref().and_then(|p| p.spend_usd)) {
        (Some(a), Some(b)) if b > 0.0 => {
            format!(" ({:+.1} % on the period before)", 100.0 * (a - b) / b)
        }
        _ => String::new(),
    };
    let measured = r
        .actions
        .iter()
        .filter(|a| a.realized_monthly_usd.is_some() && a.action.state != "rejected")
        .count();
    let actions = if measured == 0 {
        format!(
            "No action measured yet ({} in the journal).",
            r.actions.len()
        )
    } else {
        format!(
            "{measured} action(s) realized {} a month of the {} they predicted.",
            usd(r.realized_monthly_usd),
            usd(r.predicted_monthly_usd)
        )
    };
    format!(
        "{}: {} spent on {:.0} GPU-hours{change}; {} of them idle ({}), utilization {}. {actions}",
        r.period,
        money(now.spend_usd),
        now.gpu_hours,
        pct(now.idle_share_pct),
        money(now.idle_cost_usd),
        pct(now.utilization_pct),
    )
}

fn figure_row(label: String, days: f64, f: Option<&Figures>) -> Vec<String> {
    match f {
        None => vec![
            label,
            "no data".to_owned(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
        Some(f) => vec![
            label,
            format!("{days:.1}"),
            money(f.spend_usd),
            format!("{:.0}", f.gpu_hours),
            pct(f.utilization_pct),
            pct(f.idle_share_pct),
            money(f.idle_cost_usd),
            money(f.held_idle_cost_usd),
            money(f.cost_per_busy_gpu_hour_usd),
        ],
    }
}

const FIG_HEADERS: [&str; 9] = [
    "PERIOD",
    "DAYS",
    "SPEND",
    "GPU-H",
    "UTIL",
    "IDLE",
    "IDLE $",
    "HELD-IDLE $",
    "$/BUSY GPU-H",
];

fn trend_rows(ts: &[&Trend], labels: &[String]) -> Vec<Vec<String>> {
    ts.iter()
        .map(|t| {
            let now = t.periods.last().cloned().flatten();
            let mut row = vec![format!("{}: {}", t.dimension, t.key)];
            for (i, _) in labels.iter().enumerate() {
                row.push(money(t.periods[i].as_ref().and_then(|f| f.spend_usd)));
            }
            row.push(signed(t.change_usd));
            row.push(pct(now.as_ref().and_then(|f| f.utilization_pct)));
            row.push(pct(now.as_ref().and_then(|f| f.idle_share_pct)));
            let mut flags = Vec::new();
            if t.below_utilization_target {
                flags.push("util below target");
            }
            if t.above_idle_target {
                flags.push("idle above target");
            }
            row.push(flags.join(", "));
            row
        })
        .collect()
}

fn trend_headers(n: usize) -> Vec<&'static str> {
    // Period columns are named by position (the labels are in the fleet table above).
    const P: [&str; 13] = [
        "P-12", "P-11", "P-10", "P-9", "P-8", "P-7", "P-6", "P-5", "P-4", "P-3", "P-2", "P-1",
        "THIS",
    ];
    let mut h = vec!["GROUP"];
    h.extend_from_slice(&P[P.len() - n.min(P.len())..]);
    h.extend_from_slice(&["CHANGE", "UTIL", "IDLE", "AGAINST TARGETS"]);
    h
}

/// The review's sections, in the order every format shows them.
#[must_use]
pub fn sections(r: &Review, top: usize) -> Vec<Section> {
    let labels: Vec<String> = r.periods.iter().map(|p| p.label.clone()).collect();
    let n = labels.len().min(13);
    let right_trend: Vec<usize> = (1..=n + 3).collect();
    let mut out = vec![Section {
        title: "Fleet by period".into(),
        note: Some(format!(
            "targets: utilization above {} %, idle below {} % of GPU-hours",
            r.targets.utilization_pct, r.targets.idle_share_pct
        )),
        headers: FIG_HEADERS.to_vec(),
        right: (1..9).collect(),
        optional: vec![7, 8],
        rows: r
            .periods
            .iter()
            .zip(&r.fleet)
            .map(|(p, f)| figure_row(p.label.clone(), p.days_with_data, f.as_ref()))
            .collect(),
    }];
    let movers: Vec<&Trend> = r.movers.iter().take(top.max(1)).collect();
    if !movers.is_empty() {
        out.push(Section {
            title: "Biggest movers".into(),
            note: Some("spend this period against the one before, by team and group".into()),
            headers: trend_headers(n),
            right: right_trend.clone(),
            optional: (1..n).collect(),
            rows: trend_rows(&movers, &labels[labels.len() - n..]),
        });
    }
    if !r.new_waste.is_empty() {
        out.push(Section {
            title: "New waste".into(),
            note: Some("idle at least half the time this period, not the period before".into()),
            headers: vec!["DEVICE", "TEAM", "IDLE $", "IDLE NOW", "IDLE BEFORE"],
            right: vec![2, 3, 4],
            optional: vec![1],
            rows: r
                .new_waste
                .iter()
                .take(top.max(1))
                .map(|w| {
                    vec![
                        w.name.clone(),
                        w.team.clone().unwrap_or_default(),
                        usd(w.idle_cost_usd),
                        pct(Some(w.idle_share_pct)),
                        w.previous_idle_share_pct
                            .map_or_else(|| "absent".to_owned(), |p| pct(Some(p))),
                    ]
                })
                .collect(),
        });
    }
    out.extend(actions_section(r));
    out.extend(jobs_section(r));
    out.extend(forecast_section(r));
    for dim in [
        "team", "group", "workload", "gpu", "pricing", "cloud", "region",
    ] {
        let ts: Vec<&Trend> = r.trends.iter().filter(|t| t.dimension == dim).collect();
        if ts.is_empty() {
            continue;
        }
        out.push(Section {
            title: format!("By {dim}"),
            note: None,
            headers: trend_headers(n),
            right: right_trend.clone(),
            optional: (1..n).collect(),
            rows: trend_rows(&ts, &labels[labels.len() - n..]),
        });
    }
    out
}

/// The actions and what they realized.
fn actions_section(r: &Review) -> Option<Section> {
    (!r.actions.is_empty()).then(|| Section {
            title: "Actions: predicted and realized".into(),
            note: Some(
                "per month; realized = the targets' cost per month before minus after, each over its window's hours".into(),
            ),
            headers: vec!["ID", "KIND", "STATE", "PREDICTED", "REALIZED", "OUTCOME", "CONFIDENCE", "DETECTED"],
            right: vec![3, 4],
            optional: vec![7, 6],
            rows: r
                .actions
                .iter()
                .map(|a| {
                    vec![
                        a.action.id.clone(),
                        a.action.kind.clone(),
                        a.action.state.clone(),
                        usd(a.predicted_monthly_usd),
                        money(a.realized_monthly_usd),
                        a.outcome.to_owned(),
                        a.confidence.to_owned(),
                        a.detected.clone().unwrap_or_default(),
                    ]
                })
                .collect(),
        })
}

/// Jobs and runs: per group, the cost per successful run in each period, then this period's
/// unit costs and queue share.
fn jobs_section(r: &Review) -> Option<Section> {
    if r.jobs.is_empty() {
        return None;
    }
    let n = r.periods.len().min(13);
    let mut headers = vec!["GROUP"];
    headers.extend_from_slice(&trend_headers(n)[1..=n]);
    headers.extend_from_slice(&["RUNS", "OK", "$/RUN", "$/1K REQ", "QUEUE"]);
    let rows = r
        .jobs
        .iter()
        .map(|t| {
            let mut row = vec![format!("{}: {}", t.dimension, t.key)];
            let skip = t.periods.len().saturating_sub(n);
            for f in &t.periods[skip..] {
                row.push(money(
                    f.as_ref().and_then(|f| f.cost_per_successful_run_usd),
                ));
            }
            let now = t.periods.last().cloned().flatten().unwrap_or_default();
            row.push(now.runs.to_string());
            row.push(now.succeeded.to_string());
            row.push(money(now.cost_per_run_usd));
            row.push(money(now.cost_per_1k_requests_usd));
            row.push(pct(now.queue_share_pct));
            row
        })
        .collect();
    Some(Section {
        title: "Jobs and runs".into(),
        note: Some(
            "per period: cost per successful run (the failed runs' cost counted against the successes); this period: runs, successes, cost per run, per 1,000 requests, queue wait's share of wait plus run".into(),
        ),
        headers,
        right: (1..=n + 5).collect(),
        optional: (1..n).collect(),
        rows,
    })
}

/// The month-end forecast against budgets, where there is one.
fn forecast_section(r: &Review) -> Option<Section> {
    let f = r.forecast.as_ref()?;
    let rows: Vec<Vec<String>> = f["budgets"]
        .as_array()
        .map(|b| {
            b.iter()
                .map(|x| {
                    vec![
                        x["team"].as_str().unwrap_or("?").to_owned(),
                        money(x["budget_usd"].as_f64()),
                        money(x["to_date_usd"].as_f64()),
                        money(x["forecast_usd"].as_f64()),
                        pct(x["forecast_pct_of_budget"].as_f64()),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Section {
        title: "Month-end forecast against budget".into(),
        note: f["note"].as_str().map(str::to_owned),
        headers: vec!["TEAM", "BUDGET", "TO DATE", "FORECAST", "OF BUDGET"],
        right: vec![1, 2, 3, 4],
        optional: Vec::new(),
        rows,
    })
}

/// The spend per period as bars (idle part in orange), for the HTML page.
fn chart(r: &Review) -> String {
    let rows: Vec<(String, f64, f64, String)> = r
        .periods
        .iter()
        .zip(&r.fleet)
        .map(|(p, f)| {
            let spend = f.as_ref().and_then(|f| f.spend_usd);
            let idle = f.as_ref().and_then(|f| f.idle_cost_usd);
            (
                p.label.clone(),
                spend.unwrap_or(0.0),
                idle.unwrap_or(0.0),
                money(spend),
            )
        })
        .collect();
    gpuwise_render::svg::cost_bars(&rows, "Spend per period, idle part")
}

/// The review in `format`.
#[must_use]
pub fn render(r: &Review, format: Format, opts: &RenderOptions) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(r),
        Format::Html => gpuwise_render::html::page(
            &format!("GPU cost review {}", r.period),
            &r.periods
                .iter()
                .map(|p| p.label.as_str())
                .collect::<Vec<_>>()
                .join(" · "),
            &headline(r),
            &[chart(r)],
            &sections(r, usize::MAX),
        ),
        _ => {
            let mut out = headline(r);
            out.push_str("\n\n");
            out.push_str(&gpuwise_render::sections_text(
                &format!("GPU cost review {}", r.period),
                &sections(r, opts.top),
                format,
                opts,
            ));
            out
        }
    }
}
