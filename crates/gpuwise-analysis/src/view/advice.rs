//! The advice (`gpuwise advise`, and the advice sections of `report --advise`).

use gpuwise_advise::{Action, Advice, Level};

use gpuwise_render::section::Section;
use gpuwise_render::text::usd;
use gpuwise_render::{Format, RenderOptions};

/// The action's targets by their display names (the report's), the first and a count.
fn targets(a: &Action) -> String {
    match a.target_names.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} +{} more", rest.len()),
    }
}

pub fn level(l: Level) -> &'static str {
    match l {
        Level::High => "high",
        Level::Medium => "medium",
        Level::Low => "low",
    }
}

/// Titled tables of the advice: summary, ranked actions, then each action's evidence,
/// assumptions and steps (the first `top`).
pub(crate) fn sections(a: &Advice, top: usize) -> Vec<Section> {
    let mut out = Vec::new();
    let share = if a.current_monthly_usd > 0.0 {
        100.0 * a.total_monthly_savings_usd / a.current_monthly_usd
    } else {
        0.0
    };
    out.push(Section {
        title: format!(
            "Advice: the combined plan saves {}/month of {}/month ({share:.0} %)",
            usd(a.total_monthly_savings_usd),
            usd(a.current_monthly_usd)
        ),
        note: Some(format!(
            "Monthly = cost in the {:.1}-hour window × {:.0} ÷ {:.1}. Actions that touch the same GPU-hours are priced together, never added.{}{}",
            a.window_hours,
            a.month_hours,
            a.window_hours,
            if a.unpriced.is_empty() {
                String::new()
            } else {
                format!(" {} device(s) without a price get no advice.", a.unpriced.len())
            },
            a.notes.iter().map(|n| format!(" Note: {n}.")).collect::<String>()
        )),
        headers: vec!["#", "ACTION", "TARGETS", "NOW $/MO", "ALONE SAVES", "IN PLAN", "CONFIDENCE"],
        right: vec![3, 4, 5],
        optional: vec![5, 3, 6],
        rows: a
            .actions
            .iter()
            .enumerate()
            .map(|(i, x)| {
                vec![
                    (i + 1).to_string(),
                    x.kind.as_str().to_owned(),
                    targets(x),
                    usd(x.current_monthly_usd),
                    usd(x.monthly_savings_usd),
                    if x.in_plan {
                        usd(x.plan_savings_usd)
                    } else {
                        "–".to_owned()
                    },
                    level(x.confidence.level).to_owned(),
                ]
            })
            .collect(),
    });
    for (i, x) in a.actions.iter().enumerate().take(top) {
        let mut rows = vec![vec![
            "saves".to_owned(),
            format!(
                "{}/month alone ({} → {}){}",
                usd(x.monthly_savings_usd),
                usd(x.current_monthly_usd),
                usd(x.projected_monthly_usd),
                if x.in_plan {
                    format!("; {}/month in the combined plan", usd(x.plan_savings_usd))
                } else {
                    "; not in the combined plan (another action saves more on these GPU-hours)"
                        .to_owned()
                }
            ),
        ]];
        rows.push(vec![
            "confidence".to_owned(),
            format!("{}: {}", level(x.confidence.level), x.confidence.reason),
        ]);
        for e in &x.evidence {
            rows.push(vec!["evidence".to_owned(), e.clone()]);
        }
        for e in &x.assumptions {
            rows.push(vec!["assumes".to_owned(), e.clone()]);
        }
        for e in &x.how {
            rows.push(vec!["how".to_owned(), e.clone()]);
        }
        out.push(Section {
            title: format!("#{} {} — {}", i + 1, x.kind.as_str(), targets(x)),
            note: None,
            headers: vec!["", ""],
            right: vec![],
            optional: Vec::new(),
            rows,
        });
    }
    out
}

/// Render the advice alone.
#[must_use]
pub fn render(a: &Advice, format: Format, opts: &RenderOptions) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(a),
        _ => {
            gpuwise_render::sections_text("GPU fleet advice", &sections(a, opts.top), format, opts)
        }
    }
}
