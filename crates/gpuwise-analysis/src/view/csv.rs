//! CSV: one row per device (RFC 4180 quoting), the columns of `devices[]` in the JSON.

use std::fmt::Write as _;

use gpuwise_core::report::{DeviceRow, Report};

const COLUMNS: &[&str] = &[
    "id",
    "host",
    "gpu",
    "mig_instance",
    "mig_profile",
    "model",
    "model_name",
    "namespace",
    "pod",
    "team",
    "group",
    "first_seen",
    "last_seen",
    "samples",
    "gpu_hours",
    "mean_utilization_pct",
    "p50_utilization_pct",
    "p95_utilization_pct",
    "max_utilization_pct",
    "sm_active_pct",
    "tensor_active_pct",
    "dram_active_pct",
    "peak_memory_used_mib",
    "p95_memory_used_mib",
    "memory_total_mib",
    "power_mean_w",
    "power_limit_w",
    "idle_hours",
    "held_idle_hours",
    "idle_episodes",
    "class",
    "bottleneck",
    "idle_pattern",
    "usd_per_gpu_hour",
    "cost_usd",
    "idle_cost_usd",
    "held_idle_cost_usd",
    "price_source",
];

fn field(out: &mut String, v: &str) {
    out.push_str(&gpuwise_render::escape::csv(v));
}

fn num(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| {
        format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    })
}

fn row(d: &DeviceRow) -> Vec<String> {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    vec![
        d.id.clone(),
        d.host.clone(),
        d.gpu.clone(),
        s(&d.mig_instance),
        s(&d.mig_profile),
        s(&d.model),
        s(&d.model_name),
        s(&d.namespace),
        s(&d.pod),
        s(&d.team),
        d.group.clone(),
        s(&d.first_seen),
        s(&d.last_seen),
        d.samples.to_string(),
        num(Some(d.gpu_hours)),
        num(d.mean_utilization_pct),
        num(d.p50_utilization_pct),
        num(d.p95_utilization_pct),
        num(d.max_utilization_pct),
        num(d.sm_active_pct),
        num(d.tensor_active_pct),
        num(d.dram_active_pct),
        num(d.peak_memory_used_mib),
        num(d.p95_memory_used_mib),
        num(d.memory_total_mib),
        num(d.power_mean_w),
        num(d.power_limit_w),
        num(Some(d.idle_hours)),
        num(Some(d.held_idle_hours)),
        d.idle_episodes.to_string(),
        d.class.as_str().to_owned(),
        serde_json::to_value(d.bottleneck.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        s(&d.idle_pattern),
        num(d.usd_per_gpu_hour),
        num(d.cost_usd),
        num(d.idle_cost_usd),
        num(d.held_idle_cost_usd),
        s(&d.price_source),
    ]
}

/// Devices as CSV with a header line.
#[must_use]
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", COLUMNS.join(","));
    for d in &report.devices {
        for (i, v) in row(d).iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            field(&mut out, v);
        }
        out.push('\n');
    }
    out
}
