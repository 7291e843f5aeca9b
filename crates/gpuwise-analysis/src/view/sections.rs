//! The report as titled tables ([`Section`]s), which `table`, `markdown` and `html` print.

use gpuwise_core::diagnose::{BottleneckKind, Class};
use gpuwise_core::report::Report;

use gpuwise_render::section::Section;
use gpuwise_render::text::{gib, group_usd, hours, pct, usd, usd_or_unpriced};

use super::model;

/// The price fallbacks in one line: `2 devices: not offered in us-west1; cheapest gcp region
/// used`.
pub(crate) fn price_fallbacks(r: &Report) -> String {
    r.fleet
        .price_fallbacks
        .iter()
        .map(|p| format!("{} device(s): {}", p.devices, p.note))
        .collect::<Vec<_>>()
        .join("; ")
}

fn bottleneck_name(k: BottleneckKind) -> &'static str {
    match k {
        BottleneckKind::InputBound => "input_bound",
        BottleneckKind::MemoryBound => "memory_bound",
        BottleneckKind::ComputeBound => "compute_bound",
        BottleneckKind::LaunchBound => "launch_bound",
        BottleneckKind::Unknown => "unknown",
    }
}

/// The report's sections, in reading order.
pub(crate) fn report_sections(r: &Report, top: usize) -> Vec<Section> {
    let mut out = Vec::new();
    fleet(r, &mut out);
    by_class(r, &mut out);
    devices(r, top, &mut out);
    by_group(r, &mut out);
    idle_windows(r, top, &mut out);
    bottlenecks(r, top, &mut out);
    warnings(r, &mut out);
    settings(r, &mut out);
    out
}

/// The fleet in one table: window, devices, hours, utilization and dollars.
fn fleet(r: &Report, out: &mut Vec<Section>) {
    let f = &r.fleet;
    let window = match (&r.window.start, &r.window.end) {
        (Some(a), Some(b)) => format!("{a} → {b}"),
        _ => "no data".to_owned(),
    };
    let idle_share = f
        .kpis
        .idle_share_pct
        .map_or(String::new(), |p| format!(" ({p:.0}% of GPU-hours)"));
    let waste_share = f
        .kpis
        .waste_share_pct
        .map_or(String::new(), |p| format!(" ({p:.0}% of cost)"));
    let mut fleet_rows = vec![vec![
        "Window".into(),
        format!("{window} ({})", r.window.timezone),
    ]];
    if !f.price_fallbacks.is_empty() {
        fleet_rows.push(vec!["Prices".into(), price_fallbacks(r)]);
    }
    out.push(Section {
        title: "Fleet".into(),
        note: None,
        headers: vec!["", ""],
        right: vec![],
        optional: Vec::new(),
        rows: vec![
            vec![
                "Devices".into(),
                format!(
                    "{}{}",
                    f.devices,
                    if f.unpriced_devices > 0 {
                        format!(" ({} unpriced)", f.unpriced_devices)
                    } else {
                        String::new()
                    }
                ),
            ],
            vec!["GPU-hours".into(), hours(f.gpu_hours)],
            vec!["Mean utilization".into(), pct(f.mean_utilization_pct)],
            vec![
                "Cost".into(),
                group_usd(f.cost_usd, f.unpriced_devices, f.devices),
            ],
            vec![
                "Idle GPU-hours".into(),
                format!("{}{idle_share}", hours(f.idle_gpu_hours)),
            ],
            vec![
                "Idle cost".into(),
                format!("{}{waste_share}", usd_or_unpriced(f.idle_cost_usd)),
            ],
            vec![
                "Held-idle cost".into(),
                format!(
                    "{} ({} GPU-hours idle with memory allocated)",
                    usd_or_unpriced(f.held_idle_cost_usd),
                    hours(f.held_idle_gpu_hours)
                ),
            ],
            vec![
                "Cost per busy GPU-hour".into(),
                f.kpis.cost_per_busy_gpu_hour_usd.map_or_else(
                    || "–".into(),
                    |v| {
                        format!(
                            "{} (vs {} per GPU-hour paid)",
                            usd(v),
                            f.kpis.cost_per_gpu_hour_usd.map_or_else(|| "–".into(), usd)
                        )
                    },
                ),
            ],
        ]
        .into_iter()
        .fold(fleet_rows, |mut all, row| {
            all.push(row);
            all
        }),
    });
}

/// GPU-hours per class.
fn by_class(r: &Report, out: &mut Vec<Section>) {
    let f = &r.fleet;
    let mut class_rows = Vec::new();
    for c in Class::ALL {
        let name = c.as_str();
        let n = f.devices_by_class.get(name).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        let h = f.gpu_hours_by_class.get(name).copied().unwrap_or(0.0);
        let share = if f.gpu_hours > 0.0 {
            100.0 * h / f.gpu_hours
        } else {
            0.0
        };
        class_rows.push(vec![
            name.to_owned(),
            n.to_string(),
            hours(h),
            format!("{share:.0}%"),
        ]);
    }
    out.push(Section {
        title: "GPU-hours by class".into(),
        note: None,
        headers: vec!["CLASS", "DEVICES", "GPU-H", "SHARE"],
        right: vec![1, 2, 3],
        optional: Vec::new(),
        rows: class_rows,
    });
}

/// The most wasteful devices (`top` of them).
fn devices(r: &Report, top: usize, out: &mut Vec<Section>) {
    let shown = r.devices.len().min(top);
    let note = (r.devices.len() > shown).then(|| {
        format!(
            "{} more devices: --top N, or --format csv|json for all",
            r.devices.len() - shown
        )
    });
    out.push(Section {
        title: "Devices by waste".into(),
        note,
        headers: vec![
            "DEVICE", "MODEL", "CLASS", "UTIL", "P95", "MEM GiB", "IDLE H", "COST", "IDLE $",
        ],
        right: vec![3, 4, 5, 6, 7, 8],
        optional: vec![4, 5, 1],
        rows: r
            .devices
            .iter()
            .take(shown)
            .map(|d| {
                vec![
                    d.name.clone(),
                    model(d),
                    d.class.as_str().to_owned(),
                    pct(d.mean_utilization_pct),
                    pct(d.p95_utilization_pct),
                    format!(
                        "{}/{}",
                        gib(d.peak_memory_used_mib),
                        gib(d.memory_total_mib).trim_end_matches(".0")
                    ),
                    hours(d.idle_hours),
                    usd_or_unpriced(d.cost_usd),
                    d.idle_cost_usd.map_or_else(|| "–".into(), usd),
                ]
            })
            .collect(),
    });
}

/// One row per group of `--group-by`.
fn by_group(r: &Report, out: &mut Vec<Section>) {
    out.push(Section {
        title: format!("By {}", r.settings.group_by),
        note: None,
        headers: vec![
            "GROUP", "DEVICES", "GPU-H", "UTIL", "IDLE H", "COST", "IDLE $",
        ],
        right: vec![1, 2, 3, 4, 5, 6],
        optional: vec![1, 3],
        rows: r
            .groups
            .iter()
            .map(|g| {
                vec![
                    g.key.clone(),
                    g.devices.to_string(),
                    hours(g.gpu_hours),
                    pct(g.mean_utilization_pct),
                    hours(g.idle_gpu_hours),
                    group_usd(g.cost_usd, g.unpriced_devices, g.devices),
                    group_usd(g.idle_cost_usd, g.unpriced_devices, g.devices),
                ]
            })
            .collect(),
    });
}

/// Recurring idle windows of devices that are not idle throughout.
fn idle_windows(r: &Report, top: usize, out: &mut Vec<Section>) {
    let patterns: Vec<Vec<String>> = r
        .devices
        .iter()
        .filter_map(|d| d.idle_pattern.as_ref().map(|p| (d, p)))
        .filter(|(d, _)| !matches!(d.class, Class::Idle))
        .take(top)
        .map(|(d, p)| vec![d.name.clone(), p.clone(), usd_or_unpriced(d.idle_cost_usd)])
        .collect();
    if !patterns.is_empty() {
        out.push(Section {
            title: "Recurring idle windows".into(),
            note: Some(format!(
                "hour-of-week bins idle ≥ {:.0}% of the time, in {}",
                r.settings.diagnose.recurring_idle_share_pct, r.window.timezone
            )),
            headers: vec!["DEVICE", "PATTERN", "IDLE $"],
            right: vec![2],
            optional: Vec::new(),
            rows: patterns,
        });
    }
}

/// Bottleneck hints that are not unknown.
fn bottlenecks(r: &Report, top: usize, out: &mut Vec<Section>) {
    let bottlenecks: Vec<Vec<String>> = r
        .devices
        .iter()
        .filter(|d| d.bottleneck.kind != BottleneckKind::Unknown)
        .take(top)
        .map(|d| {
            vec![
                d.name.clone(),
                bottleneck_name(d.bottleneck.kind).to_owned(),
                d.bottleneck.evidence.clone(),
            ]
        })
        .collect();
    if !bottlenecks.is_empty() {
        out.push(Section {
            title: "Bottlenecks".into(),
            note: None,
            headers: vec!["DEVICE", "HINT", "EVIDENCE"],
            right: vec![],
            optional: Vec::new(),
            rows: bottlenecks,
        });
    }
}

/// Warnings about the data and the figures.
fn warnings(r: &Report, out: &mut Vec<Section>) {
    if !r.warnings.is_empty() {
        out.push(Section {
            title: "Warnings".into(),
            note: None,
            headers: vec!["KIND", "COUNT", "MESSAGE"],
            right: vec![1],
            optional: Vec::new(),
            rows: r
                .warnings
                .iter()
                .map(|w| vec![w.kind.clone(), w.count.to_string(), w.message.clone()])
                .collect(),
        });
    }
}

/// The settings the figures depend on, and what was read.
fn settings(r: &Report, out: &mut Vec<Section>) {
    let s = &r.settings;
    out.push(Section {
        title: "Settings".into(),
        note: None,
        headers: vec!["", ""],
        right: vec![],
        optional: Vec::new(),
        rows: vec![
            vec!["Idle".into(), format!("utilization < {}% for ≥ {}; held when ≥ {} MiB used", s.idle_threshold_pct, gpuwise_core::duration::human((s.min_idle_episode_min * 60_000.0).round() as u64), s.held_idle_min_mib)],
            vec![
                "Classes".into(),
                format!(
                    "idle ≥ {:.0}% of time; underutilized < {:.0}%; saturated > {:.0}% mean utilization",
                    s.diagnose.idle_share_pct, s.diagnose.underutilized_below_pct, s.diagnose.saturated_above_pct
                ),
            ],
            vec!["Gaps".into(), format!("a gap longer than {:.0} s is no data", s.max_gap_s)],
            vec!["Read".into(), match &r.ingest.pulled {
                Some(p) => format!(
                    "{} ({}): {} requests, {} series, {} points, {} bytes{}",
                    r.ingest.inputs.join(", "),
                    p.mode,
                    p.requests,
                    p.series,
                    p.samples,
                    p.bytes,
                    p.raw_samples_in_window.map_or(String::new(), |n| format!(
                        "; {n} raw utilization samples in the window"
                    ))
                ),
                None => format!("{} input(s), {} lines, {} samples, {} skipped", r.ingest.inputs.len(), r.ingest.lines, r.ingest.samples, r.ingest.skipped),
            }],
        ],
    });
}
