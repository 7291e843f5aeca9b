//! The ledger's outputs: allocation, reconciliation and the policy check, as sections (table,
//! Markdown), CSV of the main table, or JSON (each its own `schema`).

use crate::allocate::{Allocation, Mode};
use crate::check::Outcome;
use crate::reconcile::Reconciliation;

use gpuwise_render::section::Section;
use gpuwise_render::text::{hours, usd};
use gpuwise_render::{Format, RenderOptions};

fn opt_usd(v: Option<f64>) -> String {
    gpuwise_render::text::opt(v, usd)
}

/// A format a ledger command does not print.
#[derive(Debug, thiserror::Error)]
#[error("{command} prints {expected}")]
pub struct Unsupported {
    command: &'static str,
    expected: &'static str,
}

fn mode_words(a: &Allocation) -> String {
    match a.policy.mode {
        Mode::Showback => "showback".to_owned(),
        Mode::Chargeback => format!(
            "chargeback, idle{} to {}",
            if a.policy.shared_teams.is_empty() {
                String::new()
            } else {
                format!(" and shared ({})", a.policy.shared_teams.join(", "))
            },
            match &a.policy.idle {
                crate::allocate::Distribute::Owner => "the owner".to_owned(),
                crate::allocate::Distribute::Proportional => {
                    "teams by busy GPU-hours".to_owned()
                }
                crate::allocate::Distribute::Even => "teams evenly".to_owned(),
                crate::allocate::Distribute::Platform(b) => b.clone(),
            }
        ),
    }
}

fn forecast_section(a: &Allocation, f: &crate::allocate::Forecast) -> Section {
    Section {
        title: format!(
            "{}: month to date {} after {:.0} of {:.0} hours ({:.0} with telemetry); forecast {} (linear), {} (hour of week)",
            f.month,
            usd(f.fleet.month_to_date_usd),
            f.elapsed_hours,
            f.month_hours,
            f.observed_hours,
            opt_usd(f.fleet.forecast_linear_usd),
            opt_usd(f.fleet.forecast_hour_of_week_usd),
        ),
        note: Some(format!("As of {}.", a.as_of)),
        headers: vec!["TEAM", "MONTH TO DATE", "LINEAR", "HOUR OF WEEK"],
        right: vec![1, 2, 3],
        optional: Vec::new(),
        rows: f
            .teams
            .iter()
            .map(|t| {
                vec![
                    t.team.clone(),
                    usd(t.month_to_date_usd),
                    opt_usd(t.forecast_linear_usd),
                    opt_usd(t.forecast_hour_of_week_usd),
                ]
            })
            .collect(),
    }
}

fn allocation_sections(a: &Allocation) -> Vec<Section> {
    let mut out = Vec::new();
    let mode = mode_words(a);
    for m in &a.months {
        out.push(Section {
            title: format!(
                "{}{}: {} charged ({mode})",
                m.month,
                if m.complete { "" } else { " (to date)" },
                usd(m.teams.iter().map(|t| t.charged_usd).sum())
            ),
            note: Some(format!(
                "BUSY GPU-H weighs each hour by utilization; IDLE GPU-H counts the hours in idle \
                 episodes: they measure different things and need not add up to GPU-H.{}",
                if m.fleet.unpriced_gpu_hours > 0.0 {
                    format!(
                        " {} GPU-hours of unpriced devices are counted in hours, not dollars.",
                        hours(m.fleet.unpriced_gpu_hours)
                    )
                } else {
                    String::new()
                }
            )),
            headers: vec![
                "TEAM",
                "GPU-H",
                "BUSY GPU-H",
                "IDLE GPU-H",
                "COST",
                "IDLE $",
                "MOVED OUT",
                "MOVED IN",
                "CHARGED",
                "$/BUSY GPU-H",
                "$/1M TOKENS",
                "$/JOB",
            ],
            right: (1..12).collect(),
            optional: vec![11, 10, 6, 7, 9, 3, 2],
            rows: m
                .teams
                .iter()
                .map(|t| {
                    let moved = |v: f64| match a.policy.mode {
                        Mode::Showback => "–".to_owned(),
                        Mode::Chargeback => usd(v),
                    };
                    vec![
                        t.team.clone(),
                        hours(t.sums.gpu_hours),
                        hours(t.sums.busy_gpu_hours),
                        hours(t.sums.idle_gpu_hours),
                        usd(t.sums.cost_usd),
                        usd(t.sums.idle_cost_usd),
                        moved(t.moved_out_usd),
                        moved(t.moved_in_usd),
                        usd(t.charged_usd),
                        opt_usd(t.usd_per_busy_gpu_hour),
                        opt_usd(t.usd_per_million_tokens),
                        opt_usd(t.usd_per_job),
                    ]
                })
                .collect(),
        });
    }
    if let Some(f) = &a.forecast {
        out.push(forecast_section(a, f));
    }
    out
}

/// Render an allocation (`table`, `json`, `csv` of every month's team rows, `markdown`).
///
/// # Errors
/// [`Unsupported`] for HTML.
pub fn allocation(
    a: &Allocation,
    format: Format,
    opts: &RenderOptions,
) -> Result<String, Unsupported> {
    Ok(match format {
        Format::Json => gpuwise_render::json::pretty(a),
        Format::Csv => {
            let sections = allocation_sections(a);
            let mut headers = vec!["MONTH"];
            let mut rows = Vec::new();
            let months = sections.iter().zip(&a.months);
            for (s, m) in months {
                if headers.len() == 1 {
                    headers.extend(s.headers.iter());
                }
                for r in &s.rows {
                    let mut row = vec![m.month.clone()];
                    row.extend(r.iter().cloned());
                    rows.push(row);
                }
            }
            gpuwise_render::grid::render(&headers, &[], &[], &rows, Format::Csv)
        }
        Format::Html => {
            return Err(Unsupported {
                command: "allocate",
                expected: "table, json, csv, markdown or focus",
            });
        }
        _ => gpuwise_render::sections_text(
            "GPU cost allocation",
            &allocation_sections(a),
            format,
            opts,
        ),
    })
}

fn finding_sections(r: &Reconciliation) -> Vec<Section> {
    let mut out = Vec::new();
    let name = |n: &Option<String>, i: &Option<String>| {
        n.clone()
            .or_else(|| i.clone())
            .unwrap_or_else(|| "–".into())
    };
    out.push(Section {
        title: format!(
            "Unmonitored: {} billed resource(s) without telemetry",
            r.unmonitored.len()
        ),
        note: None,
        headers: vec!["RESOURCE", "TYPE", "TEAM", "GPU-H", "BILLED"],
        right: vec![3, 4],
        optional: Vec::new(),
        rows: r
            .unmonitored
            .iter()
            .map(|u| {
                vec![
                    name(&u.resource_name, &u.resource_id),
                    u.instance_type.clone(),
                    u.team.clone(),
                    hours(u.billed_gpu_hours),
                    usd(u.billed_cost_usd),
                ]
            })
            .collect(),
    });
    out.push(Section {
        title: format!(
            "Unbilled: {} host(s) reporting without bill rows",
            r.unbilled.len()
        ),
        note: None,
        headers: vec!["HOST", "GPU-H SEEN"],
        right: vec![1],
        optional: Vec::new(),
        rows: r
            .unbilled
            .iter()
            .map(|u| vec![u.host.clone(), hours(u.observed_gpu_hours)])
            .collect(),
    });
    out.push(Section {
        title: format!(
            "Billed, not reporting: {} host(s), {}",
            r.billed_not_reporting.len(),
            usd(r.billed_not_reporting.iter().map(|g| g.gap_cost_usd).sum())
        ),
        note: Some(format!(
            "A gap counts when billed − reported GPU-hours exceed the larger of {} h and {} % of the billed hours.",
            r.settings.gap_hours, r.settings.gap_share_pct
        )),
        headers: vec!["RESOURCE", "HOST", "BILLED GPU-H", "SEEN GPU-H", "GAP GPU-H", "GAP $"],
        right: vec![2, 3, 4, 5],
        optional: Vec::new(),
        rows: r
            .billed_not_reporting
            .iter()
            .map(|g| {
                vec![
                    name(&g.resource_name, &g.resource_id),
                    g.host.clone(),
                    hours(g.billed_gpu_hours),
                    hours(g.observed_gpu_hours),
                    hours(g.gap_hours),
                    usd(g.gap_cost_usd),
                ]
            })
            .collect(),
    });
    out.push(Section {
        title: "Cost by team (bill tags)".to_owned(),
        note: None,
        headers: vec!["TEAM", "GPU-H", "BILLED", "IDLE $", "UNMONITORED $"],
        right: vec![1, 2, 3, 4],
        optional: Vec::new(),
        rows: r
            .teams
            .iter()
            .map(|t| {
                vec![
                    t.team.clone(),
                    hours(t.billed_gpu_hours),
                    usd(t.billed_cost_usd),
                    opt_usd(t.idle_cost_usd),
                    usd(t.unmonitored_cost_usd),
                ]
            })
            .collect(),
    });
    out
}

fn reconcile_sections(r: &Reconciliation) -> Vec<Section> {
    let window = r.window.as_ref().map_or_else(
        || "no GPU charges".to_owned(),
        |[s, e]| format!("{s} – {e}"),
    );
    let mut out = vec![Section {
        title: format!(
            "Bill vs telemetry: {} billed for {} GPU-hours; telemetry saw {} GPU-hours ({window})",
            usd(r.billed_cost_usd),
            hours(r.billed_gpu_hours),
            hours(r.observed_gpu_hours)
        ),
        note: Some(format!(
            "Joined on {}; teams from tag `{}`. {} rows read: {} GPU compute, {} other usage, {} not usage, {} duplicates dropped, {} overlapping charges, {} skipped.{}{}",
            r.join,
            r.team_tag,
            r.rows.read,
            r.rows.gpu_compute,
            r.rows.not_gpu_compute,
            r.rows.not_usage,
            r.rows.duplicates_dropped,
            r.rows.overlapping_charges,
            r.rows.skipped.values().map(|s| s.count).sum::<u64>(),
            if r.rows.not_gpu_instance_types.is_empty() {
                String::new()
            } else {
                format!(
                    " Taken as not GPU machines (not in the catalog): {}.",
                    r.rows
                        .not_gpu_instance_types
                        .iter()
                        .map(|(t, n)| format!("{t} ×{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            r.warnings
                .iter()
                .map(|w| format!(" Warning: {w}."))
                .collect::<String>()
        )),
        headers: vec![
            "INSTANCE TYPE",
            "GPUS",
            "FROM",
            "RESOURCES",
            "GPU-H",
            "BILLED",
            "EFFECTIVE $/GPU-H",
            "LIST $/GPU-H",
            "CATALOG $/GPU-H",
        ],
        right: vec![1, 3, 4, 5, 6, 7, 8],
        optional: vec![8, 7, 3, 2],
        rows: r
            .instance_types
            .iter()
            .map(|t| {
                vec![
                    t.instance_type.clone(),
                    format!("{}", t.gpus_per_instance),
                    t.gpus_from.to_owned(),
                    t.resources.to_string(),
                    hours(t.billed_gpu_hours),
                    usd(t.billed_cost_usd),
                    opt_usd(t.effective_usd_per_gpu_hour),
                    opt_usd(t.list_usd_per_gpu_hour),
                    opt_usd(t.catalog_usd_per_gpu_hour),
                ]
            })
            .collect(),
    }];
    out.extend(finding_sections(r));
    for (k, s) in &r.rows.skipped {
        out.push(Section {
            title: format!("Skipped rows: {k} ({})", s.count),
            note: None,
            headers: vec!["FIRST"],
            right: vec![],
            optional: Vec::new(),
            rows: vec![vec![s.example.clone()]],
        });
    }
    out
}

/// Render a reconciliation (`table`, `json`, `csv` of the matched and unmatched resources,
/// `markdown`).
///
/// # Errors
/// [`Unsupported`] for HTML.
pub fn reconciliation(
    r: &Reconciliation,
    format: Format,
    opts: &RenderOptions,
) -> Result<String, Unsupported> {
    Ok(match format {
        Format::Json => gpuwise_render::json::pretty(r),
        Format::Csv => {
            let mut rows = Vec::new();
            for m in &r.matched {
                let gap = r.billed_not_reporting.iter().any(|g| {
                    g.host == m.host
                        && g.resource_name == m.resource_name
                        && g.resource_id == m.resource_id
                });
                rows.push(vec![
                    if gap {
                        "billed_not_reporting"
                    } else {
                        "matched"
                    }
                    .to_owned(),
                    m.resource_id.clone().unwrap_or_default(),
                    m.resource_name.clone().unwrap_or_default(),
                    m.host.clone(),
                    m.team.clone(),
                    format!("{:.6}", m.billed_gpu_hours),
                    format!("{:.6}", m.observed_gpu_hours),
                    format!("{:.6}", m.billed_cost_usd),
                ]);
            }
            for u in &r.unmonitored {
                rows.push(vec![
                    "unmonitored".to_owned(),
                    u.resource_id.clone().unwrap_or_default(),
                    u.resource_name.clone().unwrap_or_default(),
                    String::new(),
                    u.team.clone(),
                    format!("{:.6}", u.billed_gpu_hours),
                    String::new(),
                    format!("{:.6}", u.billed_cost_usd),
                ]);
            }
            for u in &r.unbilled {
                rows.push(vec![
                    "unbilled".to_owned(),
                    String::new(),
                    String::new(),
                    u.host.clone(),
                    String::new(),
                    String::new(),
                    format!("{:.6}", u.observed_gpu_hours),
                    String::new(),
                ]);
            }
            gpuwise_render::grid::render(
                &[
                    "STATUS",
                    "RESOURCE ID",
                    "RESOURCE NAME",
                    "HOST",
                    "TEAM",
                    "BILLED GPU-H",
                    "OBSERVED GPU-H",
                    "BILLED USD",
                ],
                &[],
                &[],
                &rows,
                Format::Csv,
            )
        }
        Format::Html => {
            return Err(Unsupported {
                command: "reconcile",
                expected: "table, json, csv or markdown",
            });
        }
        _ => gpuwise_render::sections_text(
            "Bill reconciliation",
            &reconcile_sections(r),
            format,
            opts,
        ),
    })
}

/// Lines of one rule shown in a log before the rest are counted.
const LOG_PER_RULE: usize = 5;

/// Subjects named on a grouped line before the rest are counted.
const LOG_NAMES: usize = 3;

/// A policy check for a log (CI output, a file): the headline, then one line per violation,
/// `RULE: message` with each subject by its display name, violations of a rule that say the
/// same of several subjects on one line (`stale_telemetry: 52 devices last reported … : a, b,
/// c and 49 more`), at most five lines per rule with the rest counted (the JSON has every
/// one), then what could not be decided. Nothing is wrapped or cut inside a word.
#[must_use]
pub fn check_log(o: &Outcome) -> String {
    use crate::check::Violation;
    let mut out = gpuwise_render::escape::terminal(&crate::notify::headline(o));
    out.push('\n');
    // Per rule, in order of first appearance: groups of violations saying the same after
    // their subject's name (a message that does not start with it is its own group).
    type Groups<'a> = Vec<(Option<&'a str>, Vec<&'a Violation>)>;
    let mut by_rule: Vec<(&str, Groups<'_>)> = Vec::new();
    for v in &o.violations {
        // Only devices (`host/uuid`) are grouped: a team's finding is its own line.
        let same = v
            .subject
            .contains('/')
            .then(|| v.message.strip_prefix(v.name.as_str()))
            .flatten();
        let groups = match by_rule.iter_mut().find(|(r, _)| *r == v.rule) {
            Some((_, g)) => g,
            None => {
                by_rule.push((v.rule, Vec::new()));
                &mut by_rule.last_mut().expect("just pushed").1
            }
        };
        match groups
            .iter_mut()
            .find(|(m, _)| same.is_some() && *m == same)
        {
            Some((_, g)) => g.push(v),
            None => groups.push((same, vec![v])),
        }
    }
    for (rule, groups) in by_rule {
        for (same, vs) in groups.iter().take(LOG_PER_RULE) {
            let line = match vs.as_slice() {
                [v] if v.message.starts_with(&v.name) => format!("{rule}: {}", v.message),
                [v] => format!("{rule} {}: {}", v.name, v.message),
                many => {
                    let mut names: Vec<&str> = many.iter().map(|v| v.name.as_str()).collect();
                    names.sort_unstable();
                    names.truncate(LOG_NAMES);
                    let more = many.len().saturating_sub(LOG_NAMES);
                    format!(
                        "{rule}: {} devices{}: {}{}",
                        many.len(),
                        same.unwrap_or_default(),
                        names.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    )
                }
            };
            out.push_str(&gpuwise_render::escape::terminal(&line));
            out.push('\n');
        }
        if groups.len() > LOG_PER_RULE {
            let rest: usize = groups[LOG_PER_RULE..].iter().map(|(_, g)| g.len()).sum();
            out.push_str(&format!(
                "{rule}: … and {rest} more (--format json lists every one)\n"
            ));
        }
    }
    for n in &o.not_evaluated {
        out.push_str(&gpuwise_render::escape::terminal(&format!(
            "not evaluated: {} ({})",
            n.rule, n.reason
        )));
        out.push('\n');
    }
    out
}

/// Render a policy check (`table`, `json`, `markdown`).
///
/// # Errors
/// [`Unsupported`] for CSV and HTML.
pub fn check(o: &Outcome, format: Format, opts: &RenderOptions) -> Result<String, Unsupported> {
    let sections = vec![Section {
        title: crate::notify::headline(o),
        note: (!o.not_evaluated.is_empty()).then(|| {
            o.not_evaluated
                .iter()
                .map(|n| format!("Not evaluated: {} ({}).", n.rule, n.reason))
                .collect::<Vec<_>>()
                .join(" ")
        }),
        headers: vec!["RULE", "SUBJECT", "VALUE", "LIMIT", "WHAT"],
        right: vec![2, 3],
        optional: Vec::new(),
        rows: o
            .violations
            .iter()
            .map(|v| {
                vec![
                    v.rule.to_owned(),
                    v.name.clone(),
                    format!("{:.2}", v.value),
                    format!("{:.2}", v.limit),
                    v.message.clone(),
                ]
            })
            .collect(),
    }];
    Ok(match format {
        Format::Json => gpuwise_render::json::pretty(o),
        Format::Table | Format::Markdown => {
            gpuwise_render::sections_text("GPU policy check", &sections, format, opts)
        }
        Format::Csv | Format::Html => {
            return Err(Unsupported {
                command: "check",
                expected: "table, json or markdown",
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::check::{Outcome, Policy, Violation};

    fn stale(name: &str, when: &str) -> Violation {
        Violation {
            rule: "stale_telemetry",
            subject: format!("{name}-uuid"),
            name: name.to_owned(),
            message: format!("{name} last reported {when}"),
            value: 1.0,
            limit: 0.5,
            evidence: std::collections::BTreeMap::new(),
        }
    }

    /// Four devices silent since one time share a line; seven other times are a line each, five
    /// shown and the other two counted; a message not led by its subject stands alone.
    #[test]
    fn a_log_groups_the_same_finding_and_counts_the_rest() {
        let mut violations: Vec<Violation> = ["h/gpu3", "h/gpu1", "h/gpu0", "h/gpu2"]
            .map(|n| stale(n, "T0"))
            .into();
        violations.extend((0..7).map(|i| stale(&format!("g/gpu{i}"), &format!("T{}", i + 1))));
        let mut odd = stale("x/gpu0", "T0");
        odd.message = "a message about x/gpu0".into();
        odd.rule = "long_job";
        violations.push(odd);
        // Two teams saying the same are two lines, never "2 devices".
        for team in ["a", "b"] {
            let mut v = stale(team, "T9");
            v.rule = "budget";
            v.subject = team.to_owned();
            violations.push(v);
        }
        let o = Outcome {
            schema: crate::check::SCHEMA,
            policy: Policy::default(),
            rules_evaluated: vec!["stale_telemetry", "long_job"],
            violations,
            not_evaluated: Vec::new(),
        };
        let log = super::check_log(&o);
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(
            lines[1],
            "stale_telemetry: 4 devices last reported T0: h/gpu0, h/gpu1, h/gpu2 and 1 more"
        );
        assert_eq!(lines[2], "stale_telemetry: g/gpu0 last reported T1");
        assert_eq!(lines[5], "stale_telemetry: g/gpu3 last reported T4");
        assert_eq!(
            lines[6],
            "stale_telemetry: … and 3 more (--format json lists every one)"
        );
        assert_eq!(lines[7], "long_job x/gpu0: a message about x/gpu0");
        assert_eq!(lines[8], "budget: a last reported T9");
        assert_eq!(lines[9], "budget: b last reported T9");
        assert_eq!(lines.len(), 10, "{log}");
    }
}
