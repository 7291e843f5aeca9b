//! A FOCUS 1.2 bill for a synthetic fleet, with planted disagreements.
//!
//! Every host of the fleet is billed hour by hour over the fleet's window as one instance with
//! as many GPUs as the host has devices (`SkuPriceDetails` names the instance type and GPU
//! count), tagged with the team of its first device's namespace, except where the plan says
//! otherwise: hosts left out (unbilled), resources billed that no telemetry reports
//! (unmonitored), and hosts billed for hours after their telemetry ends (billed, not
//! reporting). Storage and tax rows are mixed in, as in real exports; reconciliation must
//! leave them out.

use std::io::{self, Write};

use crate::fleet::Fleet;

/// What to plant.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BillPlan {
    /// Hosts left out of the bill.
    pub unbilled: Vec<String>,
    /// Resources billed that no telemetry reports: (name, GPUs, hours from the window start).
    pub unmonitored: Vec<(String, u32, u32)>,
    /// Hosts billed for extra hours after the window: (host, hours).
    pub overbilled: Vec<(String, u32)>,
    /// Price of one GPU-hour.
    pub usd_per_gpu_hour: f64,
}

impl BillPlan {
    /// The plan `gpuwise generate --bill` uses: the last host unbilled, the first billed for
    /// 24 hours after its telemetry ends, and an 8-GPU resource `ghost-gpu-1` billed for 48
    /// hours without telemetry; $2.50 per GPU-hour.
    #[must_use]
    pub fn planted(fleet: &Fleet) -> Self {
        let hosts = fleet.hosts();
        let first = hosts.first().map(|h| h.0.clone());
        let last = hosts
            .last()
            .map(|h| h.0.clone())
            .filter(|l| Some(l) != first.as_ref());
        Self {
            unbilled: last.into_iter().collect(),
            unmonitored: vec![("ghost-gpu-1".to_owned(), 8, 48)],
            overbilled: first.map(|f| (f, 24)).into_iter().collect(),
            usd_per_gpu_hour: 2.5,
        }
    }
}

const HEADER: &str = "BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,ConsumedQuantity,ConsumedUnit,EffectiveCost,ListCost,PricingCategory,ResourceId,ResourceName,ResourceType,ServiceCategory,SkuPriceDetails,Tags,InvoiceId";

fn ts(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| ms.to_string(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

fn csv(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

struct Row<'a> {
    start: i64,
    name: &'a str,
    id: String,
    gpus: u32,
    team: &'a str,
}

fn gpu_row(w: &mut impl Write, r: &Row<'_>, price: f64) -> io::Result<()> {
    let cost = price * f64::from(r.gpus);
    let details = format!(
        "{{\"InstanceType\":\"synth.{}gpu\",\"GpuCount\":{}}}",
        r.gpus, r.gpus
    );
    let tags = format!("{{\"team\":\"{}\",\"env\":\"prod\"}}", r.team);
    writeln!(
        w,
        "{cost:.4},USD,Usage,{},{},1,Hours,{:.4},{:.4},Standard,{},{},instance,Compute,{},{},INV-1",
        ts(r.start),
        ts(r.start + gpuwise_core::HOUR_MS),
        cost * 0.7,
        cost,
        csv(&r.id),
        csv(r.name),
        csv(&details),
        csv(&tags),
    )
}

/// Write the bill.
///
/// # Errors
/// Write errors.
pub fn focus_bill(w: &mut impl Write, fleet: &Fleet, plan: &BillPlan) -> io::Result<()> {
    writeln!(w, "{HEADER}")?;
    let start = fleet.options.start_ms;
    let hours = i64::from(fleet.options.days) * 24;
    let at = |h: i64| start + h * gpuwise_core::HOUR_MS;
    for (n, (host, _, devices)) in fleet.hosts().iter().enumerate() {
        if plan.unbilled.contains(host) {
            continue;
        }
        let extra = plan
            .overbilled
            .iter()
            .find(|(h, _)| h == host)
            .map_or(0, |(_, x)| i64::from(*x));
        let team = fleet.devices[devices[0]].namespace;
        let gpus = u32::try_from(devices.len()).unwrap_or(u32::MAX);
        for h in 0..hours + extra {
            let row = Row {
                start: at(h),
                name: host,
                id: format!("i-{n:08x}"),
                gpus,
                team,
            };
            gpu_row(w, &row, plan.usd_per_gpu_hour)?;
        }
        // The instance's disk: usage, but not GPU compute.
        writeln!(
            w,
            "1.2000,USD,Usage,{},{},30,GB-Months,1.2,1.2,Standard,vol-{n:08x},{},volume,Storage,,,INV-1",
            ts(start),
            ts(at(hours)),
            csv(host)
        )?;
    }
    for (k, (name, gpus, h)) in plan.unmonitored.iter().enumerate() {
        for i in 0..i64::from(*h) {
            let row = Row {
                start: at(i),
                name,
                id: format!("i-unmon{k:04x}"),
                gpus: *gpus,
                team: "shadow-it",
            };
            gpu_row(w, &row, plan.usd_per_gpu_hour)?;
        }
    }
    writeln!(
        w,
        "42.0000,USD,Tax,{},{},,,42,42,,,,,,,,INV-1",
        ts(start),
        ts(at(hours))
    )
}
