//! One self-contained HTML file: inline CSS and SVG, no scripts, no network.

use std::fmt::Write as _;

use gpuwise_advise::Advice;
use gpuwise_core::report::Report;

use crate::Document;
use crate::section::Section;
use crate::sections::report_sections;
use crate::svg::{self, esc};
use crate::text::{pct, usd};

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1000px;color:#1d2733;padding:0 16px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}\
.sub{color:#5a6877}.notice{background:#fff4e5;border:1px solid #f0c36d;border-radius:6px;padding:6px 10px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}.card{border:1px solid #dde3ea;border-radius:8px;padding:10px 14px;min-width:150px}\
.card b{display:block;font-size:20px}.card span{color:#5a6877;font-size:12px}table{border-collapse:collapse;width:100%;font-size:13px}\
th,td{border-bottom:1px solid #eef1f4;padding:4px 6px;text-align:left;vertical-align:top}th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}\
svg{width:100%;height:auto;margin:8px 0}svg .t{font-size:14px;font-weight:600;fill:#1d2733}svg .a{font-size:11px;fill:#5a6877}svg .g{stroke:#e5e9ee}\
.note{color:#5a6877;font-size:12px}.headline{font-size:18px;font-weight:600;margin:12px 0}\
.card.action{border-color:#7fb77e;background:#f3faf2}.scroll{overflow-x:auto;max-width:100%}\
th.n{text-align:right}td:not(:last-child){white-space:nowrap}details{margin:6px 0}summary{cursor:pointer;font-weight:600}\
@media (max-width:600px){body{margin:12px auto;padding:0 8px}.card{min-width:120px}}";

/// Render the HTML report.
#[must_use]
pub fn render(doc: &Document<'_>) -> String {
    let r = doc.report;
    let f = &r.fleet;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>gpuwise report</title><style>{CSS}</style></head><body>"
    );
    let window = match (&r.window.start, &r.window.end) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        _ => "no data".to_owned(),
    };
    let _ = write!(
        h,
        "<h1>GPU fleet report</h1><div class=\"sub\">{} · {} devices · time zone {} · schema {}</div>",
        esc(&window),
        f.devices,
        esc(&r.window.timezone),
        r.schema
    );
    if !f.price_fallbacks.is_empty() {
        let _ = write!(
            h,
            "<p class=\"notice\" id=\"price-fallbacks\">Prices: {}</p>",
            esc(&crate::sections::price_fallbacks(r))
        );
    }
    headline(&mut h, r, doc.advice);
    h.push_str("<div class=\"cards\">");
    if let Some(a) = doc.advice {
        for x in a.actions.iter().filter(|x| x.in_plan).take(3) {
            let names = match x.target_names.as_slice() {
                [] => String::new(),
                [one] => one.clone(),
                [first, rest @ ..] => format!("{first} +{} more", rest.len()),
            };
            let _ = write!(
                h,
                "<div class=\"card action\"><b>{}/mo</b><span>{} · {}</span></div>",
                esc(&usd(x.plan_savings_usd)),
                esc(x.kind.as_str()),
                esc(&names)
            );
        }
    }
    for (label, value) in [
        ("GPU-hours", format!("{:.0}", f.gpu_hours)),
        (
            "cost",
            crate::text::group_usd(f.cost_usd, f.unpriced_devices, f.devices),
        ),
        ("mean utilization", pct(f.mean_utilization_pct)),
        ("idle GPU-hours", format!("{:.0}", f.idle_gpu_hours)),
        ("idle cost", usd(f.idle_cost_usd)),
        ("held-idle cost", usd(f.held_idle_cost_usd)),
        (
            "cost per busy GPU-hour",
            f.kpis.cost_per_busy_gpu_hour_usd.map_or("–".into(), usd),
        ),
    ] {
        let _ = write!(
            h,
            "<div class=\"card\"><b>{}</b><span>{}</span></div>",
            esc(&value),
            esc(label)
        );
    }
    h.push_str("</div>");

    h.push_str("<h2>Fleet utilization over time</h2>");
    let points: Vec<(i64, Option<f64>, f64)> = r
        .timeline
        .iter()
        .map(|p| {
            (
                p.start_ms,
                p.mean_utilization_pct,
                if p.device_hours > 0.0 {
                    100.0 * p.idle_hours / p.device_hours
                } else {
                    0.0
                },
            )
        })
        .collect();
    h.push_str(&svg::timeline(
        &points,
        "Fleet mean utilization per hour (UTC)",
    ));
    h.push_str("<h2>Hour-of-week pattern</h2>");
    let bins: Vec<(Option<f64>, Option<f64>, f64)> = r
        .hour_of_week
        .iter()
        .map(|b| (b.mean_utilization_pct, b.idle_share_pct, b.device_hours))
        .collect();
    h.push_str(&svg::heatmap(&bins, &r.window.timezone));
    h.push_str("<h2>Cost and waste by group</h2>");
    let groups: Vec<(String, f64, f64, String)> = r
        .groups
        .iter()
        .map(|g| {
            let text = if g.unpriced_devices >= g.devices {
                "unpriced".to_owned()
            } else {
                format!(
                    "{} (idle {}){}",
                    usd(g.cost_usd),
                    usd(g.idle_cost_usd),
                    if g.unpriced_devices > 0 {
                        format!(" + {} unpriced", g.unpriced_devices)
                    } else {
                        String::new()
                    }
                )
            };
            (g.key.clone(), g.cost_usd, g.idle_cost_usd, text)
        })
        .collect();
    h.push_str(&svg::cost_bars(
        &groups,
        &format!("Cost by {}", r.settings.group_by),
    ));
    h.push_str("<h2>Utilization distribution per device</h2>");
    let rows: Vec<(String, [f64; 5])> = r
        .devices
        .iter()
        .take(80)
        .map(|d| (d.name.clone(), d.utilization_bands_hours))
        .collect();
    h.push_str(&svg::bands(&rows));
    if r.devices.len() > 80 {
        let _ = write!(
            h,
            "<p class=\"note\">First 80 of {} devices (most wasteful first).</p>",
            r.devices.len()
        );
    }

    if let Some(a) = doc.advice {
        let mut advice = crate::advice::sections(a, usize::MAX).into_iter();
        if let Some(summary) = advice.next() {
            table(&mut h, &summary);
        }
        h.push_str("<h2>Each action: evidence, assumptions, steps</h2>");
        for s in advice {
            let _ = write!(h, "<details><summary>{}</summary>", esc(&s.title));
            table_body(&mut h, &s);
            h.push_str("</details>");
        }
    }
    for s in report_sections(r, usize::MAX) {
        table(&mut h, &s);
    }
    h.push_str("<h2>Where the dollars come from</h2><div class=\"scroll\"><table><tr><th>DEVICE</th><th class=\"n\">GPU-H</th><th class=\"n\">$/GPU-H</th><th>PRICE SOURCE</th></tr>");
    for d in &r.devices {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&d.name),
            d.gpu_hours,
            d.usd_per_gpu_hour.map_or("–".into(), |p| format!("{p:.4}")),
            esc(d.price_source.as_deref().unwrap_or("unpriced"))
        );
    }
    h.push_str("</table></div><p class=\"note\">Generated by gpuwise. Every dollar figure is GPU-hours × the price named in its row.</p></body></html>\n");
    h
}

/// The answer first: what the combined plan saves (with `--advise`), else what idle time costs.
fn headline(h: &mut String, r: &Report, advice: Option<&Advice>) {
    let f = &r.fleet;
    let text = match advice {
        Some(a) if a.current_monthly_usd > 0.0 => format!(
            "The combined plan saves {}/month of {}/month ({:.0} %) — {} actions below",
            usd(a.total_monthly_savings_usd),
            usd(a.current_monthly_usd),
            100.0 * a.total_monthly_savings_usd / a.current_monthly_usd,
            a.actions.iter().filter(|x| x.in_plan).count()
        ),
        _ => format!(
            "Idle GPU-hours cost {} of {}{}",
            usd(f.idle_cost_usd),
            usd(f.cost_usd),
            f.kpis
                .waste_share_pct
                .map_or(String::new(), |p| format!(" ({p:.0} %)"))
        ),
    };
    let _ = write!(
        h,
        "<p class=\"headline\" id=\"headline\">{}</p>",
        esc(&text)
    );
}

/// A section as a titled table that scrolls sideways on a narrow screen.
fn table(h: &mut String, s: &Section) {
    let _ = write!(h, "<h2>{}</h2>", esc(&s.title));
    table_body(h, s);
}

fn table_body(h: &mut String, s: &Section) {
    h.push_str("<div class=\"scroll\"><table>");
    if s.headers.iter().any(|x| !x.is_empty()) {
        h.push_str("<tr>");
        for (i, x) in s.headers.iter().enumerate() {
            let class = if s.right.contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(h, "<th{class}>{}</th>", esc(x));
        }
        h.push_str("</tr>");
    }
    for row in &s.rows {
        h.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if s.right.contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(h, "<td{class}>{}</td>", esc(c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
    if let Some(n) = &s.note {
        let _ = write!(h, "<p class=\"note\">{}</p>", esc(n));
    }
}
