//! Simulation results: the spot study (`gpuwise simulate spot`) as tables, Markdown or JSON.

use crate::montecarlo::PolicySummary;
use crate::study::Study;

use gpuwise_render::section::Section;
use gpuwise_render::svg::Axis;
use gpuwise_render::text::{opt, usd};
use gpuwise_render::{Format, RenderOptions};

fn policy_rows(ps: &[PolicySummary]) -> Vec<Vec<String>> {
    ps.iter()
        .map(|p| {
            vec![
                p.policy_name().to_owned(),
                format!("{:.1}%", p.deadline_met_share * 100.0),
                format!("{:.2}", p.spot_work_hours_mean),
                format!("{:.2}", p.on_demand_work_hours_mean),
                format!("{:.2}", p.spot_billed_hours_mean),
                format!("{:.2}", p.on_demand_billed_hours_mean),
                // A mean over runs that did not all finish is not a cost to compare.
                opt(p.cost_usd_mean, |c| {
                    format!(
                        "{}{}",
                        usd(c),
                        if p.deadline_met_share < 1.0 { "*" } else { "" }
                    )
                }),
                opt(p.cost_usd_p95, usd),
                opt(p.completion_hours_p50, |h| format!("{h:.1}")),
                opt(p.completion_hours_p95, |h| format!("{h:.1}")),
                format!("{:.2}", p.preemptions_mean),
                format!("{:.2}", p.lost_work_hours_mean),
            ]
        })
        .collect()
}

const HEADERS: [&str; 12] = [
    "POLICY",
    "MET",
    "SPOT WORK H",
    "OD WORK H",
    "SPOT BILLED H",
    "OD BILLED H",
    "COST",
    "COST P95",
    "DONE P50 H",
    "DONE P95 H",
    "PREEMPTIONS",
    "LOST H",
];

/// What a narrow terminal leaves out first: billed hours, the cost's tail, then the rest of
/// the times; the policy, its deadline share, its work split and its cost stay.
const OPTIONAL: [usize; 6] = [4, 5, 7, 11, 10, 8];

fn checkpoint_section(s: &Study) -> Option<Section> {
    let c = &s.checkpoint;
    (!c.sweep.is_empty() || c.young_daly_minutes.is_some()).then(|| Section {
            title: format!(
                "Checkpoint interval: Young/Daly {} min, best on the traces {} min",
                opt(c.young_daly_minutes, |m| format!("{m:.0}")),
                opt(c.best_minutes_on_trace, |m| format!("{m:.0}"))
            ),
            note: Some(format!(
                "Young/Daly: √(2 × checkpoint cost × mean time between preemptions ({} h)). The sweep runs spot_only at each interval.",
                opt(c.mean_hours_between_preemptions, |h| format!("{h:.2}"))
            )),
            headers: vec!["INTERVAL MIN", "COST", "DONE H (MEAN)", "LOST H (MEAN)"],
            right: vec![0, 1, 2, 3],
            optional: Vec::new(),
            rows: c
                .sweep
                .iter()
                .map(|p| {
                    vec![
                        format!("{:.0}", p.minutes),
                        opt(p.cost_usd_mean, usd),
                        opt(p.completion_hours_mean, |h| format!("{h:.2}")),
                        format!("{:.3}", p.lost_work_hours_mean),
                    ]
                })
                .collect(),
        })
}

fn zones_section(s: &Study) -> Option<Section> {
    (!s.zones.is_empty()).then(|| Section {
        title: "Zone groups (multi_zone: uniform progress on spot in any zone with capacity)"
            .to_owned(),
        note: None,
        headers: vec![
            "ZONES",
            "ANY AVAILABLE",
            "MET",
            "SPOT WORK H",
            "OD WORK H",
            "COST",
        ],
        right: vec![1, 2, 3, 4, 5],
        optional: Vec::new(),
        rows: s
            .zones
            .iter()
            .map(|z| {
                vec![
                    z.files.join(" + "),
                    format!("{:.1}%", z.availability_mean * 100.0),
                    format!("{:.1}%", z.policy.deadline_met_share * 100.0),
                    format!("{:.2}", z.policy.spot_work_hours_mean),
                    format!("{:.2}", z.policy.on_demand_work_hours_mean),
                    opt(z.policy.cost_usd_mean, usd),
                ]
            })
            .collect(),
    })
}

/// What a reader of the policy table must know: costs not to compare, starts with no
/// schedule, an optimum solved in whole ticks.
fn caveats(s: &Study) -> Vec<String> {
    let mut caveats = Vec::new();
    if s.policies
        .iter()
        .any(|p| p.deadline_met_share < 1.0 && p.cost_usd_mean.is_some())
    {
        caveats.push("* not every run met the deadline (or finished): that mean includes runs cut off unfinished and is not a cost to compare with the others".to_owned());
    }
    for p in s.policies.iter().filter(|p| p.infeasible_runs > 0) {
        caveats.push(format!(
            "{}: {} of {} starts have no schedule that meets the deadline; they count as missed and are left out of its means",
            p.policy_name(),
            p.infeasible_runs,
            p.runs
        ));
    }
    let relaxed: Vec<&crate::study::TraceOut> = s
        .traces
        .iter()
        .filter(|t| t.omniscient_relaxed.is_some())
        .collect();
    if let Some(first) = relaxed.first()
        && let Some((changeover, work)) = first.omniscient_relaxed
    {
        caveats.push(format!(
            "omniscient on {} of {} traces is solved in whole ticks ({} s; changeover {changeover:.0} s, work {:.3} h: rounded down, so still a bound below every policy, by at most a tick per launch)",
            relaxed.len(),
            s.traces.len(),
            first.gap_seconds,
            work / 3600.0
        ));
    }
    caveats
}

fn sections(s: &Study) -> Vec<Section> {
    let j = &s.job;
    let mut out = vec![Section {
        title: format!(
            "{} h of work on {} node(s){}, changeover {:.2} h, {}: {} traces × {} starts",
            j.work_hours,
            j.nodes,
            j.deadline_hours.map(|d| format!(", deadline {d} h")).unwrap_or_default(),
            j.changeover_hours,
            j.checkpoint_interval_minutes.map_or_else(
                || "no checkpoint loss (the paper's model)".to_owned(),
                |m| format!("checkpoint every {m:.0} min ({:.1} min each)", j.checkpoint_cost_minutes)
            ),
            s.traces.len(),
            s.starts_per_trace
        ),
        note: Some(match &s.prices {
            Some(p) => format!(
                "Work hours are progress kept (they add up to the work); billed hours include changeovers, checkpoints and lost work, per node. Prices per node-hour: spot {}, on demand {}.",
                usd(p.spot_usd_per_hour),
                usd(p.on_demand_usd_per_hour)
            ),
            None => "Work hours are progress kept (they add up to the work); billed hours include changeovers, checkpoints and lost work, per node. No prices: give --instance or --spot-price and --on-demand-price for dollars.".to_owned(),
        }),
        headers: HEADERS.to_vec(),
        right: (1..12).collect(),
        optional: OPTIONAL.to_vec(),
        rows: policy_rows(&s.policies),
    }];
    let caveats = caveats(s);
    if let Some(note) = out[0].note.as_mut().filter(|_| !caveats.is_empty()) {
        note.push(' ');
        note.push_str(&caveats.join(". "));
        note.push('.');
    }
    let (dir, names) = in_one_folder(s.traces.iter().map(|t| t.file.as_str()));
    out.push(Section {
        title: dir.map_or_else(|| "Traces".to_owned(), |d| format!("Traces in {d}")),
        note: None,
        headers: vec!["TRACE", "GAP S", "TICKS", "AVAILABLE", "PREEMPTIONS/H"],
        right: vec![1, 2, 3, 4],
        optional: Vec::new(),
        rows: s
            .traces
            .iter()
            .zip(&names)
            .map(|(t, name)| {
                vec![
                    (*name).to_owned(),
                    format!("{}", t.gap_seconds),
                    t.ticks.to_string(),
                    format!("{:.1}%", t.availability_mean * 100.0),
                    format!("{:.3}", t.preemptions_per_hour),
                ]
            })
            .collect(),
    });
    out.extend(checkpoint_section(s));
    out.extend(zones_section(s));
    if s.traces.len() > 1 {
        for (t, name) in s.traces.iter().zip(&names) {
            out.push(Section {
                title: format!("On {name}"),
                note: None,
                headers: HEADERS.to_vec(),
                right: (1..12).collect(),
                optional: OPTIONAL.to_vec(),
                rows: policy_rows(&t.policies),
            });
        }
    }
    out
}

/// The folder every file is in, when they share one, and each file's name under it; else no
/// folder and the names as given (a long folder repeated on every row pushed the table past
/// the terminal).
fn in_one_folder<'a>(
    files: impl Iterator<Item = &'a str> + Clone,
) -> (Option<&'a str>, Vec<&'a str>) {
    let folder = |f: &'a str| f.rfind('/').map(|i| &f[..=i]);
    let mut all = files.clone().map(folder);
    let first = all.next().flatten();
    if first.is_some() && all.all(|d| d == first) {
        let cut = first.map_or(0, str::len);
        (first, files.map(|f| &f[cut..]).collect())
    } else {
        (None, files.collect())
    }
}

/// Render a spot study (`table`, `json`, `markdown`; others print the table).
#[must_use]
pub fn spot(s: &Study, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(s),
        Format::Html => spot_html(s),
        _ => gpuwise_render::sections_text(
            "Spot simulation",
            &sections(s),
            format,
            &RenderOptions::default(),
        ),
    }
}

/// The answer first: the cheapest policy that meets the deadline in every run.
fn spot_headline(s: &Study) -> String {
    let by_cost = |p: &&PolicySummary| p.cost_usd_mean.unwrap_or(p.on_demand_billed_hours_mean);
    let best = s
        .policies
        .iter()
        .filter(|p| p.deadline_met_share >= 1.0 && p.policy_name() != "omniscient")
        .min_by(|a, b| by_cost(a).total_cmp(&by_cost(b)));
    let on_demand = s.policies.iter().find(|p| p.policy_name() == "on_demand");
    match (best, on_demand) {
        (Some(b), Some(o)) if b.cost_usd_mean.is_some() => format!(
            "{} meets every deadline at {} a run on average, against {} on demand",
            b.policy_name(),
            opt(b.cost_usd_mean, usd),
            opt(o.cost_usd_mean, usd)
        ),
        (Some(b), _) => format!(
            "{} meets every deadline with {:.1} h of on-demand work on average",
            b.policy_name(),
            b.on_demand_work_hours_mean
        ),
        _ => "no policy meets every deadline on these traces".to_owned(),
    }
}

fn spot_html(s: &Study) -> String {
    let c = &s.checkpoint;
    let y = |p: &crate::study::SweepPoint| p.cost_usd_mean.or(p.completion_hours_mean);
    let points: Vec<(f64, f64)> = c
        .sweep
        .iter()
        .filter_map(|p| y(p).map(|v| (p.minutes, v)))
        .collect();
    let charts = if points.is_empty() {
        Vec::new()
    } else {
        vec![gpuwise_render::svg::curve(
            &points,
            c.best_minutes_on_trace,
            true,
            (
                "Cost of a spot-only run against the checkpoint interval",
                "checkpoint interval, minutes (log scale)",
                if s.prices.is_some() {
                    "mean cost"
                } else {
                    "mean hours to finish"
                },
            ),
            (
                Axis::Number,
                if s.prices.is_some() {
                    Axis::Usd
                } else {
                    Axis::Number
                },
            ),
        )]
    };
    gpuwise_render::html::page(
        "Spot simulation",
        &format!(
            "{} trace(s) × {} starts · schema {}",
            s.traces.len(),
            s.starts_per_trace,
            s.schema
        ),
        &spot_headline(s),
        &charts,
        &sections(s),
    )
}

fn commit_sections(s: &crate::commit::CommitStudy) -> Vec<Section> {
    let mut out = vec![Section {
        title: format!(
            "Commitment: {} h of demand, {:.1} GPUs busy on average, peak {}; all on demand {}/month",
            s.window_hours,
            s.mean_gpus,
            s.peak_gpus,
            usd(s.on_demand_monthly_usd)
        ),
        note: Some(format!(
            "A GPU is busy in an hour it spent mostly out of idle episodes. BEST AT ±20%: the optimum (GPUs:cost) if every hour's demand were 20 % lower or higher; KEPT: the cost of keeping today's optimum then. Prices per GPU-hour: on demand {}{}.{}",
            usd(s.prices.on_demand),
            s.prices
                .spot
                .map(|p| format!(", spot {}", usd(p)))
                .unwrap_or_default(),
            if s.mean_interruptible_gpus > 0.0 || s.spot_share_pct > 0.0 {
                format!(
                    " Interruptible: {:.1} GPUs on average always on spot; {:.0} % of the demand above the commitment on spot.",
                    s.mean_interruptible_gpus, s.spot_share_pct
                )
            } else {
                String::new()
            }
        )),
        headers: vec![
            "TERM",
            "$/GPU-H",
            "BREAK-EVEN",
            "COMMIT GPUS",
            "LAST GPU BUSY",
            "COST/MONTH",
            "SAVES/MONTH",
            "BEST AT −20%",
            "KEPT AT −20%",
            "BEST AT +20%",
            "KEPT AT +20%",
        ],
        right: (1..11).collect(),
        optional: vec![10, 9, 8, 7, 2, 4],
        rows: s
            .terms
            .iter()
            .map(|t| {
                let best = |i: usize| {
                    t.sensitivity.get(i).map_or_else(
                        || "–".to_owned(),
                        |x| {
                            format!(
                                "{}:{}",
                                x.optimum_committed_gpus,
                                usd(x.monthly_cost_at_optimum_usd)
                            )
                        },
                    )
                };
                let kept = |i: usize| {
                    t.sensitivity
                        .get(i)
                        .map_or_else(|| "–".to_owned(), |x| usd(x.monthly_cost_keeping_base_usd))
                };
                vec![
                    t.term.to_owned(),
                    usd(t.usd_per_gpu_hour),
                    format!("{:.0}%", t.break_even_utilization_pct),
                    t.optimum_committed_gpus.to_string(),
                    opt(t.last_gpu_utilization_pct, |p| format!("{p:.0}%")),
                    usd(t.monthly_cost_usd),
                    usd(t.monthly_savings_usd),
                    best(0),
                    kept(0),
                    best(1),
                    kept(1),
                ]
            })
            .collect(),
    }];
    for t in &s.terms {
        out.push(Section {
            title: format!("{} cost curve", t.term),
            note: None,
            headers: vec!["COMMITTED GPUS", "COST/MONTH"],
            right: vec![0, 1],
            optional: Vec::new(),
            rows: t
                .curve
                .iter()
                .map(|p| vec![p.committed_gpus.to_string(), usd(p.monthly_cost_usd)])
                .collect(),
        });
    }
    out
}

/// Render a commitment study (`table`, `json`, `markdown`).
#[must_use]
pub fn commit(s: &crate::commit::CommitStudy, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(s),
        Format::Html => commit_html(s),
        _ => gpuwise_render::sections_text(
            "Commitment",
            &commit_sections(s),
            format,
            &RenderOptions::default(),
        ),
    }
}

fn commit_html(s: &crate::commit::CommitStudy) -> String {
    let best = s
        .terms
        .iter()
        .max_by(|a, b| a.monthly_savings_usd.total_cmp(&b.monthly_savings_usd));
    let headline = best.map_or_else(
        || "no commitment price to size against".to_owned(),
        |t| {
            format!(
                "commit to {} GPUs for {}: {}/month instead of {} ({} saved)",
                t.optimum_committed_gpus,
                t.term,
                usd(t.monthly_cost_usd),
                usd(s.on_demand_monthly_usd),
                usd(t.monthly_savings_usd)
            )
        },
    );
    let charts: Vec<String> = s
        .terms
        .iter()
        .map(|t| {
            let points: Vec<(f64, f64)> = t
                .curve
                .iter()
                .map(|p| (f64::from(p.committed_gpus), p.monthly_cost_usd))
                .collect();
            gpuwise_render::svg::curve(
                &points,
                Some(f64::from(t.optimum_committed_gpus)),
                false,
                (
                    &format!("Monthly cost against GPUs committed for {}", t.term),
                    "GPUs committed",
                    "cost per month",
                ),
                (Axis::Number, Axis::Usd),
            )
        })
        .collect();
    gpuwise_render::html::page(
        "Commitment",
        &format!("{} hours of demand · schema {}", s.window_hours, s.schema),
        &headline,
        &charts,
        &commit_sections(s),
    )
}

fn ms(l: Option<&crate::serving::Latency>, f: impl Fn(&crate::serving::Latency) -> f64) -> String {
    l.map_or("–".into(), |l| format!("{:.0}", f(l)))
}

fn describe(c: &crate::serving::Config) -> String {
    use crate::serving::{Batching, Scaling};
    let scaling = match &c.scaling {
        Scaling::Fixed { replicas } => format!("{replicas} replica(s)"),
        Scaling::Autoscale {
            target,
            min,
            max,
            warm,
            predict_period_s,
            ..
        } => format!(
            "{} {min}–{max} at {:.0} %{}",
            if predict_period_s.is_some() {
                "predictive"
            } else {
                "autoscale"
            },
            target * 100.0,
            if *warm > 0 {
                format!(" + {warm} warm")
            } else {
                String::new()
            }
        ),
        Scaling::Schedule {
            replicas_by_hour, ..
        } => format!(
            "schedule of {}–{} replicas",
            replicas_by_hour.iter().min().unwrap_or(&0),
            replicas_by_hour.iter().max().unwrap_or(&0)
        ),
    };
    let batching = match c.batching {
        Batching::Continuous { max_batch, .. } => format!("continuous ≤ {max_batch}"),
        Batching::PromptsFirst { max_batch, .. } => format!("prompts first ≤ {max_batch}"),
        Batching::Static { max_batch, .. } => format!("static {max_batch}"),
    };
    format!("{} · {scaling} · {batching}", c.gpu)
}

/// The trace, its requests and what became of them.
fn serve_note(r: &crate::serving::ServeReport) -> String {
    let o = &r.outcome;
    let recomputed = if o.recomputed > 0 {
        format!(
            ", {} preempted when the KV cache was full (prefilled again)",
            o.recomputed
        )
    } else {
        String::new()
    };
    format!(
        "{} ({}); {} requests, {} served, {} dropped{recomputed}; {:.0} s",
        r.trace.name, r.trace.format, o.requests, o.served, o.dropped, o.duration_s
    )
}

fn serve_sections(r: &crate::serving::ServeReport) -> Vec<Section> {
    let o = &r.outcome;
    let mut out = vec![Section {
        title: format!("Serving {} on {}", r.model, describe(&o.config)),
        note: Some(serve_note(r)),
        headers: vec!["FIGURE", "VALUE"],
        right: vec![1],
        optional: Vec::new(),
        rows: vec![
            vec!["GPU-hours".into(), format!("{:.2}", o.gpu_hours)],
            vec!["cost".into(), usd(o.cost_usd)],
            vec![
                "SLO attainment".into(),
                o.slo_attainment
                    .map_or("– (no SLO)".into(), |a| format!("{:.2} %", a * 100.0)),
            ],
            vec![
                "perfect autoscaler (GPU-hours of the iterations alone)".into(),
                format!("{:.2}", o.bounds.perfect_autoscaler_gpu_hours),
            ],
            vec![
                "static peak (most replicas, all the time)".into(),
                format!("{:.2}", o.bounds.static_peak_gpu_hours),
            ],
        ],
    }];
    out.push(Section {
        title: "Latency (ms)".into(),
        note: None,
        headers: vec!["", "MEAN", "P50", "P95", "P99"],
        right: vec![1, 2, 3, 4],
        optional: Vec::new(),
        rows: [
            ("time to first token", o.ttft_ms.as_ref()),
            ("time per output token", o.tpot_ms.as_ref()),
            ("end to end", o.e2e_ms.as_ref()),
        ]
        .iter()
        .map(|(name, l)| {
            vec![
                (*name).to_owned(),
                ms(*l, |l| l.mean),
                ms(*l, |l| l.p50),
                ms(*l, |l| l.p95),
                ms(*l, |l| l.p99),
            ]
        })
        .collect(),
    });
    if let Some(front) = &r.front {
        out.push(Section {
            title: "Cost–latency front".into(),
            note: Some("No cheaper configuration has a lower p99 end-to-end latency.".into()),
            headers: vec![
                "CONFIGURATION",
                "COST",
                "GPU-H",
                "SLO",
                "P99 TTFT",
                "P99 E2E",
            ],
            right: vec![1, 2, 3, 4, 5],
            optional: Vec::new(),
            rows: front
                .iter()
                .map(|c| {
                    vec![
                        describe(&c.config),
                        usd(c.cost_usd),
                        format!("{:.2}", c.gpu_hours),
                        c.slo_attainment
                            .map_or("–".into(), |a| format!("{:.1} %", a * 100.0)),
                        c.ttft_p99_ms.map_or("–".into(), |v| format!("{v:.0}")),
                        c.e2e_p99_ms.map_or("–".into(), |v| format!("{v:.0}")),
                    ]
                })
                .collect(),
        });
    }
    if !r.notes.is_empty() {
        out.push(Section {
            title: "Assumptions".into(),
            note: None,
            headers: vec!["NOTE"],
            right: vec![],
            optional: Vec::new(),
            rows: r.notes.iter().map(|n| vec![n.clone()]).collect(),
        });
    }
    out
}

/// Render a serving simulation (`table`, `json`, `markdown`, `html`).
#[must_use]
pub fn serve(r: &crate::serving::ServeReport, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(r),
        Format::Html => serve_html(r),
        _ => gpuwise_render::sections_text(
            "Serving simulation",
            &serve_sections(r),
            format,
            &RenderOptions::default(),
        ),
    }
}

fn serve_html(r: &crate::serving::ServeReport) -> String {
    let o = &r.outcome;
    let headline = format!(
        "{}: {} for {} requests ({:.2} GPU-hours){}",
        describe(&o.config),
        usd(o.cost_usd),
        o.requests,
        o.gpu_hours,
        o.slo_attainment.map_or(String::new(), |a| format!(
            ", {:.2} % within the SLO",
            a * 100.0
        ))
    );
    // A step chart: each count holds until the next change.
    let mut steps: Vec<(f64, f64)> = Vec::with_capacity(o.timeline.len() * 2);
    for p in &o.timeline {
        if let Some(&(_, before)) = steps.last() {
            steps.push((p.t_s, before));
        }
        steps.push((p.t_s, f64::from(p.replicas)));
    }
    let mut charts = vec![gpuwise_render::svg::curve(
        &steps,
        None,
        false,
        ("Replicas over time", "seconds", "replicas"),
        (Axis::Number, Axis::Number),
    )];
    if let Some(front) = &r.front {
        let points: Vec<(f64, f64)> = front
            .iter()
            .filter_map(|c| c.e2e_p99_ms.map(|l| (c.cost_usd, l)))
            .collect();
        charts.push(gpuwise_render::svg::curve(
            &points,
            Some(o.cost_usd),
            false,
            (
                "Cost against p99 end-to-end latency (the front)",
                "cost",
                "p99 ms",
            ),
            (Axis::Usd, Axis::Number),
        ));
    }
    gpuwise_render::html::page(
        "Serving simulation",
        &format!("{} · {} · schema {}", r.model, r.trace.name, r.schema),
        &headline,
        &charts,
        &serve_sections(r),
    )
}
