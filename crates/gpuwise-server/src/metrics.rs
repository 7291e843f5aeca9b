//! `/metrics`: the report of everything kept, as OpenMetrics text for a Prometheus (and a
//! Grafana) to scrape. A figure the report does not know (utilization without a reading, cost
//! without a price) is left out, never written as 0. Times are in seconds (Prometheus' base
//! unit): GPU-hours × 3600.

use std::sync::atomic::AtomicU64;

use gpuwise_analysis::Burn;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type F64 = Family<Labels, Gauge<f64, AtomicU64>>;

/// Seconds in an hour: metrics are in base units.
const H: f64 = 3600.0;

fn family(reg: &mut Registry, name: &str, help: &str) -> F64 {
    let f = F64::default();
    reg.register(name, help, f.clone());
    f
}

/// The OpenMetrics text (ending in `# EOF`) of `report` (with each device's longest busy run
/// from its profile) and the budgets' burn, with the data generation.
#[must_use]
pub fn text(
    report: &Report,
    profiles: &[DeviceProfile],
    budgets: &[Burn],
    generation: u64,
) -> String {
    let mut reg = Registry::default();
    fleet_metrics(&mut reg, report, generation);
    device_metrics(&mut reg, report, profiles);
    budget_metrics(&mut reg, budgets);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &reg);
    in_order(&out)
}

/// The series of each family in label order. A family keeps its series in a hash map, so two
/// scrapes of the same data listed them in different orders (every family here is a gauge:
/// its samples have no order of their own).
fn in_order(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_unstable();
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}

fn fleet_metrics(reg: &mut Registry, report: &Report, generation: u64) {
    let fleet = |reg: &mut Registry, name: &str, help: &str, v: Option<f64>| {
        let f = family(reg, name, help);
        if let Some(v) = v {
            f.get_or_create(&Vec::new()).set(v);
        }
    };
    let fl = &report.fleet;
    fleet(
        reg,
        "gpuwise_fleet_gpu_seconds",
        "GPU time observed in the window (GPU-hours × 3600)",
        Some(fl.gpu_hours * H),
    );
    fleet(
        reg,
        "gpuwise_fleet_idle_gpu_seconds",
        "GPU time in idle episodes",
        Some(fl.idle_gpu_hours * H),
    );
    fleet(
        reg,
        "gpuwise_fleet_held_idle_gpu_seconds",
        "Idle GPU time with memory allocated",
        Some(fl.held_idle_gpu_hours * H),
    );
    fleet(
        reg,
        "gpuwise_fleet_cost_usd",
        "Cost of priced devices, USD",
        fl.cost_usd,
    );
    fleet(
        reg,
        "gpuwise_fleet_idle_cost_usd",
        "Cost of idle GPU time, USD",
        fl.idle_cost_usd,
    );
    fleet(
        reg,
        "gpuwise_fleet_utilization_percent",
        "Time-weighted mean utilization of the fleet",
        fl.mean_utilization_pct,
    );
    fleet(
        reg,
        "gpuwise_fleet_devices",
        "Devices with data in the window",
        Some(fl.devices as f64),
    );
    fleet(
        reg,
        "gpuwise_fleet_unpriced_devices",
        "Devices without a price (their cost is unknown, not zero)",
        Some(fl.unpriced_devices as f64),
    );
    #[allow(clippy::cast_precision_loss)]
    fleet(
        reg,
        "gpuwise_data_generation",
        "Counts up each time the server read new data",
        Some(generation as f64),
    );
}

fn device_metrics(reg: &mut Registry, report: &Report, profiles: &[DeviceProfile]) {
    let runs: std::collections::HashMap<String, f64> = profiles
        .iter()
        .filter_map(|p| Some((p.key.to_string(), p.longest_busy_run()?.1 * H)))
        .collect();
    let busy = family(
        reg,
        "gpuwise_device_longest_busy_run_seconds",
        "Longest run of consecutive hours the device was mostly not idle, in seconds (check's long_job)",
    );
    let rate = family(
        reg,
        "gpuwise_device_usd_per_hour",
        "The device's price per hour: its GPU share × $/GPU-hour",
    );
    let observed = family(
        reg,
        "gpuwise_device_gpu_seconds",
        "GPU time observed (a MIG instance counts its share of the GPU)",
    );
    let idle = family(reg, "gpuwise_device_idle_seconds", "Time in idle episodes");
    let idle_cost = family(
        reg,
        "gpuwise_device_idle_cost_usd",
        "Cost of the idle time, USD",
    );
    let cost = family(
        reg,
        "gpuwise_device_cost_usd",
        "Cost of the observed time, USD",
    );
    let util = family(
        reg,
        "gpuwise_device_utilization_percent",
        "Time-weighted mean utilization",
    );
    let last = family(
        reg,
        "gpuwise_device_last_sample_timestamp_seconds",
        "Time of the device's last sample, Unix seconds (stale telemetry: time() minus this)",
    );
    let class = family(
        reg,
        "gpuwise_device_class",
        "1 for the device's class (idle, held_idle, underutilized, healthy, saturated, …)",
    );
    for d in &report.devices {
        let labels: Labels = vec![
            ("device".into(), d.id.clone()),
            ("host".into(), d.host.clone()),
            ("model".into(), d.model.clone().unwrap_or_default()),
            ("team".into(), d.team.clone().unwrap_or_default()),
        ];
        observed.get_or_create(&labels).set(d.gpu_hours * H);
        idle.get_or_create(&labels).set(d.idle_hours * H);
        if let Some(v) = d.idle_cost_usd {
            idle_cost.get_or_create(&labels).set(v);
        }
        if let Some(v) = d.cost_usd {
            cost.get_or_create(&labels).set(v);
        }
        if let Some(v) = d.mean_utilization_pct {
            util.get_or_create(&labels).set(v);
        }
        if let Some(h) = runs.get(&d.id) {
            busy.get_or_create(&labels).set(*h);
        }
        if let (Some(price), Some(share)) = (d.usd_per_gpu_hour, d.gpu_share) {
            rate.get_or_create(&labels).set(price * share);
        }
        if let Some(t) = d
            .last_seen
            .as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        {
            #[allow(clippy::cast_precision_loss)]
            last.get_or_create(&labels)
                .set(t.as_millisecond() as f64 / 1e3);
        }
        let mut with_class = labels;
        with_class.push(("class".into(), d.class.as_str().to_owned()));
        class.get_or_create(&with_class).set(1.0);
    }
}

/// Each budgeted team's month: spend to date, the budget and the forecast the policy holds it
/// to (left out when the forecast is unknown), labelled by team and month — what `check`'s
/// `budget` and `budget_forecast` rules compare.
fn budget_metrics(reg: &mut Registry, budgets: &[Burn]) {
    if budgets.is_empty() {
        return;
    }
    let spent = family(
        reg,
        "gpuwise_team_month_to_date_usd",
        "Charged to the team in the month to date, USD (the allocation's charged_usd)",
    );
    let limit = family(
        reg,
        "gpuwise_team_budget_usd",
        "The team's monthly budget, USD",
    );
    let forecast = family(
        reg,
        "gpuwise_team_month_forecast_usd",
        "The month-end forecast the budget is held to, USD",
    );
    for b in budgets {
        let labels: Labels = vec![
            ("team".into(), b.team.clone()),
            ("month".into(), b.month.clone()),
        ];
        spent.get_or_create(&labels).set(b.month_to_date_usd);
        limit.get_or_create(&labels).set(b.limit_usd);
        if let Some(f) = b.forecast_usd {
            forecast.get_or_create(&labels).set(f);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Series sorted within their family; headers and `# EOF` where they were.
    #[test]
    fn series_in_label_order() {
        let text = "# HELP a x\n# TYPE a gauge\na{d=\"b\"} 2.0\na{d=\"a\"} 1.0\n# HELP c y\n# TYPE c gauge\nc 3.0\n# EOF\n";
        assert_eq!(
            super::in_order(text),
            "# HELP a x\n# TYPE a gauge\na{d=\"a\"} 1.0\na{d=\"b\"} 2.0\n# HELP c y\n# TYPE c gauge\nc 3.0\n# EOF\n"
        );
    }
}
