//! The schedule of a job queue (`gpuwise schedule`) and a packing of workloads on nodes
//! (`gpuwise pack`): table, Markdown, JSON, or their rows as CSV.

use crate::consolidate::Consolidation;
use crate::place::{Packing, Policy};
use crate::schedule::Schedule;

use gpuwise_render::section::Section;
use gpuwise_render::text::usd;
use gpuwise_render::{Format, RenderOptions};

fn hours(v: Option<f64>) -> String {
    v.map_or("–".into(), |h| format!("{h:.2} h"))
}

fn sections(s: &Schedule) -> Vec<Section> {
    let ratio = if s.lower_bound_cost_usd > 0.0 {
        format!(" ({:.2}× the bound)", s.cost_usd / s.lower_bound_cost_usd)
    } else {
        String::new()
    };
    let mut out = vec![Section {
        title: format!("Schedule ({})", s.policy.name()),
        note: Some(format!("Lower bound: {}.", s.lower_bound)),
        headers: vec!["FIGURE", "VALUE"],
        right: vec![1],
        optional: Vec::new(),
        rows: vec![
            vec!["jobs".into(), s.jobs.to_string()],
            vec![
                "rejected (no pool can hold them)".into(),
                s.rejected.to_string(),
            ],
            vec![
                "deadlines met".into(),
                if s.deadlines > s.deadline_feasible {
                    format!(
                        "{} of {} feasible ({} of {} deadlines cannot be met even starting at once)",
                        s.deadline_met,
                        s.deadline_feasible,
                        s.deadlines - s.deadline_feasible,
                        s.deadlines
                    )
                } else {
                    format!("{} of {} feasible", s.deadline_met, s.deadline_feasible)
                },
            ],
            vec!["mean job completion time".into(), hours(s.mean_jct_h)],
            vec!["p95 job completion time".into(), hours(s.p95_jct_h)],
            vec!["cost".into(), format!("{}{ratio}", usd(s.cost_usd))],
            vec!["lower bound on cost".into(), usd(s.lower_bound_cost_usd)],
            vec!["preemptions".into(), s.preemptions.to_string()],
        ],
    }];
    out.push(Section {
        title: "Pools".into(),
        note: None,
        headers: vec!["POOL", "GPU-HOURS", "UTILIZATION"],
        right: vec![1, 2],
        optional: Vec::new(),
        rows: s
            .gpu_hours_by_pool
            .iter()
            .map(|(p, h)| {
                vec![
                    p.clone(),
                    format!("{h:.1}"),
                    s.utilization_by_pool
                        .get(p)
                        .map_or("– (unlimited)".into(), |u| format!("{:.1} %", u * 100.0)),
                ]
            })
            .collect(),
    });
    out
}

/// Render a schedule (`table`, `json`, `markdown`; `csv`: one row per stretch of a job).
#[must_use]
pub fn schedule(s: &Schedule, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(s),
        Format::Csv => {
            let mut out = String::from("job_id,pool,start_s,end_s,gpus\n");
            for a in &s.assignments {
                out.push_str(&format!(
                    "{},{},{},{},{}\n",
                    gpuwise_render::escape::csv(&a.job_id),
                    gpuwise_render::escape::csv(&a.pool),
                    a.start_s,
                    a.end_s,
                    a.gpus
                ));
            }
            out
        }
        _ => gpuwise_render::sections_text(
            "Schedule",
            &sections(s),
            format,
            &RenderOptions::default(),
        ),
    }
}

fn packing_sections(p: &Packing) -> Vec<Section> {
    let load = p.load.map_or("the list as given".into(), |l| {
        format!("{:.0} %", l * 100.0)
    });
    let mut rows = vec![
        vec!["nodes".into(), p.nodes.to_string()],
        vec!["GPUs".into(), p.cluster_gpus.to_string()],
        vec![
            "workloads arrived".into(),
            format!("{} ({:.1} % of the GPUs)", p.pods, p.arrived_pct),
        ],
        vec!["placed".into(), p.placed_pods.to_string()],
        vec!["found no room".into(), p.failed_pods.to_string()],
        vec![
            "allocation ratio".into(),
            format!("{:.2} %", p.allocation_ratio_pct),
        ],
        vec![
            "unallocated GPUs".into(),
            format!("{:.1}", p.unallocated_gpus),
        ],
        vec![
            "fragmented GPU capacity".into(),
            format!(
                "{:.2} % of the GPUs ({:.1} GPUs, {:.1} % of the idle capacity)",
                p.fragmentation_pct, p.fragmented_gpus, p.fragmentation_of_idle_pct
            ),
        ],
    ];
    if !p.unchecked.is_empty() {
        rows.push(vec!["not checked".into(), p.unchecked.join(", ")]);
    }
    let mut out = vec![Section {
        title: format!("Packing ({})", p.policy.name()),
        note: Some(if p.policy == Policy::Mig {
            format!(
                "Load: {load}; seed {}. MIG: GPU capacity counted in compute slices (sevenths); \
                 fragmentation: free slices on GPUs where none of the {} profiles asked for fits.",
                p.seed, p.typical_shapes
            )
        } else {
            format!(
                "Load: {load}; seed {}. Fragmentation: idle GPU capacity the typical workload \
                 ({} most frequent shapes) cannot use.",
                p.seed, p.typical_shapes
            )
        }),
        headers: vec!["FIGURE", "VALUE"],
        right: vec![1],
        optional: Vec::new(),
        rows,
    }];
    let steps: Vec<&crate::place::CurvePoint> = p
        .curve
        .iter()
        .filter(|c| c.arrived_pct > 0 && c.arrived_pct % 10 == 0)
        .collect();
    if steps.len() > 1 {
        out.push(Section {
            title: "As the load grew".into(),
            note: Some(
                "GPUs asked for so far (percent of the cluster's), and what was placed and \
                 fragmented then."
                    .into(),
            ),
            headers: vec!["ASKED", "ALLOCATED", "FRAGMENTED"],
            right: vec![0, 1, 2],
            optional: Vec::new(),
            rows: steps
                .iter()
                .map(|c| {
                    vec![
                        format!("{} %", c.arrived_pct),
                        format!("{:.2} %", c.allocation_ratio_pct),
                        format!("{:.2} %", c.fragmentation_pct),
                    ]
                })
                .collect(),
        });
    }
    if !p.failed_by_kind.is_empty() {
        out.push(Section {
            title: "Workloads without room, by kind".into(),
            note: None,
            headers: vec!["KIND", "WORKLOADS"],
            right: vec![1],
            optional: Vec::new(),
            rows: p
                .failed_by_kind
                .iter()
                .map(|(k, n)| vec![k.clone(), n.to_string()])
                .collect(),
        });
    }
    out
}

/// Render a packing (`table`, `markdown`: the figures; `json`: all; `csv`: one row per
/// workload).
#[must_use]
pub fn packing(p: &Packing, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(p),
        Format::Csv => {
            let mut out = String::from("pod,node,gpus\n");
            for x in &p.placements {
                let gpus: Vec<String> = x.gpus.iter().map(u32::to_string).collect();
                out.push_str(&format!(
                    "{},{},{}\n",
                    gpuwise_render::escape::csv(&x.pod),
                    gpuwise_render::escape::csv(x.node.as_deref().unwrap_or("")),
                    gpus.join("|")
                ));
            }
            out
        }
        _ => gpuwise_render::sections_text(
            "Packing",
            &packing_sections(p),
            format,
            &RenderOptions::default(),
        ),
    }
}

fn consolidation_sections(c: &Consolidation) -> Vec<Section> {
    let money = |v: Option<f64>| v.map_or("– (no price)".into(), usd);
    let mut rows: Vec<Vec<String>> = c
        .models
        .iter()
        .map(|m| {
            vec![
                m.model.clone(),
                m.devices.to_string(),
                m.gpus_needed.to_string(),
                m.lower_bound.to_string(),
                m.freed.to_string(),
                money(m.freed_usd_per_month),
            ]
        })
        .collect();
    rows.push(vec![
        "all".into(),
        c.devices.to_string(),
        c.gpus_needed.to_string(),
        c.lower_bound.to_string(),
        c.freed.to_string(),
        money(c.freed_usd_per_month),
    ]);
    vec![Section {
        title: "Consolidation".into(),
        note: Some(format!(
            "Each GPU's peak memory and p95 utilization as one workload, packed first-fit \
             decreasing onto GPUs of its model filled to {:.0} %. Bound: no packing needs \
             fewer GPUs (Martello–Toth L2 on memory and on utilization). Dollars: freed GPUs × \
             the model's lowest price × 730 h.",
            (1.0 - c.headroom) * 100.0
        )),
        headers: vec![
            "MODEL",
            "GPUS HELD",
            "GPUS NEEDED",
            "LOWER BOUND",
            "FREED",
            "FREED / MONTH",
        ],
        right: vec![1, 2, 3, 4, 5],
        optional: Vec::new(),
        rows,
    }]
}

/// Render a consolidation (`table`, `markdown`: per model; `json`: all; `csv`: one row per
/// device).
#[must_use]
pub fn consolidation(c: &Consolidation, format: Format) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(c),
        Format::Csv => {
            let mut out = String::from("device,model,gpu,memory_share,compute_share\n");
            for m in &c.moves {
                out.push_str(&format!(
                    "{},{},{},{:.4},{:.4}\n",
                    gpuwise_render::escape::csv(&m.device),
                    gpuwise_render::escape::csv(&m.model),
                    m.gpu,
                    m.memory,
                    m.compute
                ));
            }
            out
        }
        _ => gpuwise_render::sections_text(
            "Consolidation",
            &consolidation_sections(c),
            format,
            &RenderOptions::default(),
        ),
    }
}
