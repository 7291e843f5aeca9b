//! # gpuwise's allocation as FOCUS 1.2 rows
//!
//! One row per device, owner and UTC day, in the 57 FOCUS 1.2 columns (spec order) followed by
//! `x_` columns, so the allocation loads beside a cloud bill in any FOCUS tool. Costs are the
//! showback cost of the device-hours (GPU-hours × $ per GPU-hour paid: `BilledCost`,
//! `EffectiveCost`). `ListCost` is at the public list price — the catalog's on-demand price of
//! the GPU in the run's price context, which the caller supplies — so a spot, committed or
//! negotiated price shows its discount; `ContractedCost` is the price paid for on-demand and
//! spot rows and the list price for committed rows (FOCUS: contracted is before commitment
//! discounts). Where no list price is known `ListUnitPrice` is null and `ListCost` (which FOCUS
//! does not let be null) is the cost paid, with `x_ListPriceKnown` false. The `x_` columns carry what
//! FOCUS has no column for: team, GPU-hours busy and idle, idle cost, mean utilization and the
//! price's source. A device without a price has no row (FOCUS costs cannot be null, and gpuwise
//! never writes an unknown cost as $0); the count is returned. The rows are values; the render
//! crate writes them as CSV with the same escaping as every other CSV (hostile labels).

use std::collections::BTreeMap;

use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use gpuwise_core::sample::EpochMs;
use gpuwise_core::teams::TeamMap;
use gpuwise_core::{DAY_MS, HOUR_MS};

use crate::reconcile::UNTAGGED;

/// FOCUS 1.2 columns, in the specification's order (FOCUS_Spec v1.2 `specification/columns`).
pub const FOCUS_1_2: [&str; 57] = [
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "CapacityReservationId",
    "CapacityReservationStatus",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "CommitmentDiscountUnit",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingCurrency",
    "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "SubAccountType",
    "Tags",
];

/// The `x_` columns after the FOCUS ones.
pub const EXTENSIONS: [&str; 8] = [
    "x_Team",
    "x_GpuHours",
    "x_BusyGpuHours",
    "x_IdleGpuHours",
    "x_IdleCost",
    "x_GpuUtilization",
    "x_PriceSource",
    "x_ListPriceKnown",
];

#[derive(Default)]
struct Day {
    gpu_hours: f64,
    busy: f64,
    idle: f64,
    util_hours: f64,
}

fn ts(ms: EpochMs) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| ms.to_string(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

fn month_bounds(ms: EpochMs) -> (EpochMs, EpochMs) {
    let utc = |d: jiff::civil::Date| {
        jiff::tz::TimeZone::UTC
            .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
            .map_or(ms, jiff::Timestamp::as_millisecond)
    };
    let Ok(t) = jiff::Timestamp::from_millisecond(ms) else {
        return (ms, ms);
    };
    let dt = jiff::tz::TimeZone::UTC.to_datetime(t);
    let Ok(first) = jiff::civil::Date::new(dt.year(), dt.month(), 1) else {
        return (ms, ms);
    };
    let next = first
        .checked_add(jiff::Span::new().months(1))
        .unwrap_or(first);
    (utc(first), utc(next))
}

/// FOCUS `PricingCategory` of gpuwise's pricing model.
fn pricing_category(p: Option<&str>) -> &'static str {
    match p {
        Some("spot") => "Dynamic",
        Some("on-demand") => "Standard",
        Some("1y" | "3y") => "Committed",
        _ => "",
    }
}

/// The allocation as FOCUS 1.2 rows.
#[derive(Clone, Debug)]
pub struct FocusRows {
    /// The CSV: the header verbatim (FOCUS column ids, [`FOCUS_1_2`] then [`EXTENSIONS`]),
    /// then one record per device, team and day (an empty cell is null), each cell escaped as
    /// every CSV gpuwise writes is (formula cells neutralised, control characters as text,
    /// RFC 4180 quotes), each line ending in a newline. Records are rendered as each device is
    /// added, so a fleet's rows are held only as their text.
    pub csv: String,
    /// Records in `csv`.
    pub rows: usize,
    /// Devices left out for want of a price.
    pub unpriced_devices: usize,
}

/// The allocation as FOCUS 1.2 rows (see the module documentation). `list_price` is the public
/// list price per GPU-hour of a device's GPU, if known.
#[must_use]
pub fn focus_rows(
    profiles: &[DeviceProfile],
    report: &Report,
    teams: &TeamMap,
    list_price: &dyn Fn(&gpuwise_core::report::DeviceRow) -> Option<f64>,
) -> FocusRows {
    let rows: BTreeMap<&str, &gpuwise_core::report::DeviceRow> =
        report.devices.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut out = FocusRows::new();
    for p in profiles {
        if let Some(row) = rows.get(p.key.to_string().as_str()) {
            out.add(p, row, teams, list_price(row));
        }
    }
    out
}

/// The public list price per GPU-hour of a device's GPU: the catalog's on-demand price in the
/// run's price context (cloud, region).
#[must_use]
pub fn list_price(
    prices: &gpuwise_core::price::PriceBook,
    row: &gpuwise_core::report::DeviceRow,
) -> Option<f64> {
    let ctx = prices.context();
    let gpu = row.model.as_deref()?;
    prices
        .catalog()
        .gpu_hour_price(&gpuwise_catalog::PriceQuery {
            gpu,
            cloud: ctx.cloud.as_deref(),
            region: ctx.region.as_deref(),
            pricing: gpuwise_catalog::Pricing::OnDemand,
        })
        .filter(|q| q.pricing == gpuwise_catalog::Pricing::OnDemand)
        .map(|q| q.usd_per_gpu_hour)
}

impl Default for FocusRows {
    fn default() -> Self {
        Self::new()
    }
}

impl FocusRows {
    /// No rows yet: the header alone.
    #[must_use]
    pub fn new() -> Self {
        let mut csv = FOCUS_1_2
            .iter()
            .chain(EXTENSIONS.iter())
            .copied()
            .collect::<Vec<_>>()
            .join(",");
        csv.push('\n');
        FocusRows {
            csv,
            rows: 0,
            unpriced_devices: 0,
        }
    }

    /// One device's rows, per team and UTC day, from its profile and report row (its share
    /// of a GPU and price); `list` is its GPU's public list price per GPU-hour, if known. A
    /// device without a price has no rows (a FOCUS cost cannot be unknown), and is counted.
    pub fn add(
        &mut self,
        p: &DeviceProfile,
        row: &gpuwise_core::report::DeviceRow,
        teams: &TeamMap,
        list: Option<f64>,
    ) {
        let (Some(share), Some(price)) = (row.gpu_share, row.usd_per_gpu_hour) else {
            self.unpriced_devices += 1;
            return;
        };
        let mut days: BTreeMap<(EpochMs, &str), Day> = BTreeMap::new();
        for h in &p.stats.hourly {
            let team = teams
                .owner(&p.key, &p.info, Some(h.start_ms))
                .unwrap_or(UNTAGGED);
            let d = days
                .entry((h.start_ms.div_euclid(DAY_MS) * DAY_MS, team))
                .or_default();
            d.gpu_hours += h.covered_hours * share;
            #[allow(clippy::cast_precision_loss)]
            let busy = h.util_weighted as f64 / 10_000.0 / HOUR_MS as f64;
            d.busy += busy * share;
            d.idle += h.idle_hours * share;
            d.util_hours += h.util_hours * share;
        }
        // The list price of the whole GPU, times the device's share like the price paid.
        for ((day, team), d) in days {
            for (i, cell) in focus_row(row, day, team, &d, price, list)
                .iter()
                .enumerate()
            {
                if i > 0 {
                    self.csv.push(',');
                }
                self.csv.push_str(&gpuwise_render::escape::csv(cell));
            }
            self.csv.push('\n');
            self.rows += 1;
        }
    }
}

fn focus_row(
    row: &gpuwise_core::report::DeviceRow,
    day: EpochMs,
    team: &str,
    d: &Day,
    price: f64,
    list: Option<f64>,
) -> Vec<String> {
    let cost = d.gpu_hours * price;
    let committed = matches!(row.pricing, Some("1y" | "3y"));
    // Contracted is before commitment discounts: the list price for committed rows (where it
    // is known), the price paid otherwise.
    let contracted = if committed {
        list.unwrap_or(price)
    } else {
        price
    };
    let (bp_start, bp_end) = month_bounds(day);
    let tags = serde_json::json!({
        "team": team,
        "host": row.host,
        "namespace": row.namespace,
        "pod": row.pod,
    });
    let model = row.model.as_deref().unwrap_or("GPU");
    let mut v: BTreeMap<&str, String> = BTreeMap::new();
    v.insert("BilledCost", format!("{cost:.6}"));
    v.insert("EffectiveCost", format!("{cost:.6}"));
    v.insert(
        "ListCost",
        format!("{:.6}", list.map_or(cost, |l| d.gpu_hours * l)),
    );
    v.insert("ContractedCost", format!("{:.6}", d.gpu_hours * contracted));
    if let Some(l) = list {
        v.insert("ListUnitPrice", format!("{l:.6}"));
    }
    v.insert("ContractedUnitPrice", format!("{contracted:.6}"));
    v.insert("x_ListPriceKnown", list.is_some().to_string());
    v.insert("BillingAccountId", "gpuwise".into());
    // Not nullable in FOCUS 1.2: the kind of account these rows are charged to.
    v.insert("BillingAccountType", "Internal allocation".into());
    v.insert("BillingCurrency", "USD".into());
    v.insert("BillingPeriodStart", ts(bp_start));
    v.insert("BillingPeriodEnd", ts(bp_end));
    v.insert("ChargePeriodStart", ts(day));
    v.insert("ChargePeriodEnd", ts(day + DAY_MS));
    v.insert("ChargeCategory", "Usage".into());
    v.insert("ChargeFrequency", "Usage-Based".into());
    v.insert(
        "ChargeDescription",
        format!("{model} GPU-hours of {} allocated to {team}", row.name),
    );
    v.insert("ConsumedQuantity", format!("{:.6}", d.gpu_hours));
    v.insert("ConsumedUnit", "GPU-Hours".into());
    v.insert("PricingQuantity", format!("{:.6}", d.gpu_hours));
    v.insert("PricingUnit", "GPU-Hours".into());
    v.insert("PricingCategory", pricing_category(row.pricing).into());
    v.insert("InvoiceIssuerName", "gpuwise".into());
    v.insert("ProviderName", "gpuwise".into());
    v.insert("PublisherName", "gpuwise".into());
    v.insert("ResourceId", row.id.clone());
    v.insert("ResourceName", row.name.clone());
    v.insert(
        "ResourceType",
        if row.mig_instance.is_some() {
            "MIG instance"
        } else {
            "GPU"
        }
        .into(),
    );
    v.insert("ServiceCategory", "AI and Machine Learning".into());
    v.insert("ServiceName", "GPU compute".into());
    v.insert(
        "ServiceSubcategory",
        "Other (AI and Machine Learning)".into(),
    );
    v.insert("Tags", tags.to_string());
    v.insert("x_Team", team.to_owned());
    v.insert("x_GpuHours", format!("{:.6}", d.gpu_hours));
    v.insert("x_BusyGpuHours", format!("{:.6}", d.busy));
    v.insert("x_IdleGpuHours", format!("{:.6}", d.idle));
    v.insert("x_IdleCost", format!("{:.6}", d.idle * price));
    if d.util_hours > 0.0 {
        v.insert(
            "x_GpuUtilization",
            format!("{:.3}", d.busy / d.util_hours * 100.0),
        );
    }
    v.insert(
        "x_PriceSource",
        row.price_source.clone().unwrap_or_default(),
    );
    FOCUS_1_2
        .iter()
        .chain(EXTENSIONS.iter())
        .map(|c| v.remove(c).unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_list_is_the_spec_s() {
        let mut sorted = FOCUS_1_2.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 57);
        assert_eq!(pricing_category(Some("spot")), "Dynamic");
        assert_eq!(pricing_category(None), "");
    }
}
