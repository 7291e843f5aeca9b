//! # A bill's GPU compute, folded per resource
//!
//! [`BillBuilder`] takes [`BillRow`]s as a reader yields them and keeps only what
//! reconciliation needs: per billed resource, its GPU instance-hour charges. A row is GPU
//! compute when it is `Usage` and its instance type has GPUs:
//!
//! 1. the instance type comes from `SkuPriceDetails` `InstanceType`, an `x_InstanceType`
//!    column, or a word of `ChargeDescription` that the catalog knows (AWS's FOCUS 1.0 export
//!    names it only there: `$1.624 per On Demand Linux g5.4xlarge Instance Hour`);
//! 2. GPUs per instance come from the bill (`GpuCount` in `SkuPriceDetails`, `x_GpuCount`),
//!    else from the catalog;
//! 3. a type the catalog lacks whose family it knows (`g5.96xlarge` beside `g5.xlarge`) is an
//!    unknown GPU instance type, skipped and counted; a family it does not know (`c5.2xlarge`)
//!    is not GPU compute.
//!
//! Hours per row are its quantity in hours, else its charge period. The same row twice (same
//! resource, period, price id and cost: a file given twice) is dropped and counted; rows of one
//! resource whose periods overlap otherwise are kept (they were billed) and counted.

use std::collections::{BTreeMap, BTreeSet};

use gpuwise_catalog::{Catalog, Pricing};
use gpuwise_core::sample::EpochMs;

use crate::focus::{BillRow, Skips};

/// How bill rows meet telemetry hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinKey {
    /// `ResourceName` (the default: providers put the host name there).
    Name,
    /// `ResourceId`.
    Id,
    /// The value of a tag.
    Tag(String),
}

/// `--join` that is not `name`, `id` or `tag:KEY`.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a join key: use name, id or tag:KEY")]
pub struct JoinKeyError(String);

impl std::str::FromStr for JoinKey {
    type Err = JoinKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "name" | "ResourceName" => Ok(Self::Name),
            "id" | "ResourceId" => Ok(Self::Id),
            _ => match s.strip_prefix("tag:") {
                Some(k) if !k.is_empty() => Ok(Self::Tag(k.to_owned())),
                _ => Err(JoinKeyError(s.to_owned())),
            },
        }
    }
}

impl std::fmt::Display for JoinKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name => f.write_str("name"),
            Self::Id => f.write_str("id"),
            Self::Tag(k) => write!(f, "tag:{k}"),
        }
    }
}

/// A bill that cannot be reconciled as a whole.
#[derive(Debug, thiserror::Error)]
pub enum BillError {
    /// Rows in more than one currency.
    #[error(
        "the bill mixes currencies ({}); reconcile one currency at a time (split the export by BillingCurrency)",
        .0.iter().map(|(c, n)| format!("{c}: {n} rows")).collect::<Vec<_>>().join(", ")
    )]
    MixedCurrencies(Vec<(String, u64)>),
    /// Not in US dollars.
    #[error(
        "the bill is in {0}; gpuwise compares bills with prices in USD and does not convert currencies: export the bill in USD"
    )]
    NotUsd(String),
}

/// Charges of a GPU resource: one row of the bill, or a run of rows back to back on the same
/// terms (the same price, quantity, GPUs, pricing category and price id for periods of the
/// same length, each starting where the one before ended). An on-demand instance billed hourly
/// for a month is one run, not 720 records: a bill is held in memory bounded by its resources
/// and their price changes, not by its rows. Totals are per-period figures × the run's periods.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// Inclusive: the first period's start.
    pub start_ms: EpochMs,
    /// Exclusive: the last period's end.
    pub end_ms: EpochMs,
    /// GPUs per instance.
    pub gpus: f64,
    /// Spot (`PricingCategory = Dynamic`).
    pub spot: bool,
    /// Instance-hours of one period.
    hours: f64,
    /// Billed for one period.
    billed: f64,
    /// Effective (amortized) for one period, when given.
    effective: Option<f64>,
    /// At list price for one period, when given.
    list: Option<f64>,
    /// Index of the price id in the resource's [`Resource::skus`] (interned: a resource has a
    /// handful of price ids over thousands of hourly rows).
    sku: Option<u32>,
    /// Periods (rows of the bill) this charge stands for.
    periods: u32,
}

impl Charge {
    /// Rows of the bill this charge stands for.
    #[must_use]
    pub fn periods(&self) -> u32 {
        self.periods
    }

    /// Instance-hours.
    #[must_use]
    pub fn hours(&self) -> f64 {
        self.hours * f64::from(self.periods)
    }

    /// GPU-hours.
    #[must_use]
    pub fn gpu_hours(&self) -> f64 {
        self.hours() * self.gpus
    }

    /// Billed.
    #[must_use]
    pub fn billed(&self) -> f64 {
        self.billed * f64::from(self.periods)
    }

    /// Effective (amortized), when given.
    #[must_use]
    pub fn effective(&self) -> Option<f64> {
        self.effective.map(|e| e * f64::from(self.periods))
    }

    /// At list price, when given.
    #[must_use]
    pub fn list(&self) -> Option<f64> {
        self.list.map(|l| l * f64::from(self.periods))
    }

    /// One period's length.
    fn period_ms(&self) -> EpochMs {
        (self.end_ms - self.start_ms) / EpochMs::from(self.periods.max(1))
    }

    /// Take `next` into this run when it starts where this ends, on the same terms.
    fn extend(&mut self, next: &Charge) -> bool {
        let same_terms = self.hours == next.hours
            && self.gpus == next.gpus
            && self.billed == next.billed
            && self.effective == next.effective
            && self.list == next.list
            && self.spot == next.spot
            && self.sku == next.sku
            && self.period_ms() == next.period_ms();
        match self.periods.checked_add(next.periods) {
            Some(periods) if same_terms && self.end_ms == next.start_ms => {
                self.end_ms = next.end_ms;
                self.periods = periods;
                true
            }
            _ => false,
        }
    }

    /// The run's periods as charges of one period each.
    fn each_period(&self) -> impl Iterator<Item = Charge> + '_ {
        let len = self.period_ms();
        (0..self.periods).map(move |k| {
            let start_ms = self.start_ms + len * EpochMs::from(k);
            Charge {
                start_ms,
                end_ms: start_ms + len,
                periods: 1,
                ..self.clone()
            }
        })
    }
}

/// The order duplicates are found in: by period, price id and amount.
fn charge_order(a: &Charge, b: &Charge) -> std::cmp::Ordering {
    (a.start_ms, a.end_ms, &a.sku)
        .cmp(&(b.start_ms, b.end_ms, &b.sku))
        .then(a.billed.total_cmp(&b.billed))
}

/// Append `c` to charges in period order, into the last run when it continues it.
fn push_charge(charges: &mut Vec<Charge>, c: Charge) {
    if !charges.last_mut().is_some_and(|last| last.extend(&c)) {
        charges.push(c);
    }
}

/// A billed GPU resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// `ResourceId`.
    pub resource_id: Option<String>,
    /// `ResourceName`.
    pub resource_name: Option<String>,
    /// Instance type.
    pub instance_type: String,
    /// Where the GPU count came from (`bill` or `catalog`).
    pub gpus_from: &'static str,
    /// Region.
    pub region: Option<String>,
    /// The team tag's value (the latest row that has it).
    pub team: Option<String>,
    /// Charges, in period order once finished.
    pub charges: Vec<Charge>,
    /// The price ids its charges name.
    pub skus: Vec<String>,
    /// Charges held when duplicates are next folded away (so a bill of the same rows repeated
    /// millions of times holds each once, not every copy).
    compact_at: usize,
}

impl Resource {
    /// Append the charges and names of `later` (the same resource in rows read after these).
    fn append(&mut self, later: Resource) {
        for (field, new) in [
            (&mut self.resource_id, later.resource_id),
            (&mut self.resource_name, later.resource_name),
            (&mut self.region, later.region),
            (&mut self.team, later.team),
        ] {
            if new.is_some() {
                *field = new;
            }
        }
        let skus: Vec<Option<u32>> = later
            .skus
            .into_iter()
            .map(|id| {
                let i = self.skus.iter().position(|s| *s == id).unwrap_or_else(|| {
                    self.skus.push(id);
                    self.skus.len() - 1
                });
                Some(u32::try_from(i).unwrap_or(u32::MAX))
            })
            .collect();
        for mut c in later.charges {
            c.sku = c.sku.and_then(|i| skus.get(i as usize).copied().flatten());
            push_charge(&mut self.charges, c);
        }
    }

    /// Put the charges in period order, drop identical ones and join runs: how many were
    /// dropped, and how many charges start before an earlier one ends.
    ///
    /// Runs that overlap no other are kept whole. Runs that overlap are cut into their periods,
    /// and those are compared one by one, as rows: a duplicate is a period charged twice on the
    /// same terms, an overlap a period that starts before another ends. Only overlapping runs
    /// are ever cut, so a well-formed bill is never expanded.
    fn fold_duplicates(&mut self) -> (u64, u64) {
        self.charges.sort_by(charge_order);
        let (mut duplicates, mut overlapping) = (0, 0);
        let mut folded: Vec<Charge> = Vec::with_capacity(self.charges.len());
        // Runs that overlap one another (each starts before the ones before it end).
        let mut tangle: Vec<Charge> = Vec::new();
        let mut reach = EpochMs::MIN;
        let mut settle = |tangle: &mut Vec<Charge>, folded: &mut Vec<Charge>| {
            if tangle.len() == 1 {
                push_charge(folded, tangle.pop().expect("one"));
                return;
            }
            let mut periods: Vec<Charge> = tangle
                .drain(..)
                .flat_map(|c| c.each_period().collect::<Vec<_>>())
                .collect();
            periods.sort_by(charge_order);
            let before = periods.len();
            periods.dedup();
            duplicates += (before - periods.len()) as u64;
            let mut reach = EpochMs::MIN;
            for c in periods {
                if c.start_ms < reach {
                    overlapping += 1;
                }
                reach = reach.max(c.end_ms);
                push_charge(folded, c);
            }
        };
        for c in std::mem::take(&mut self.charges) {
            if c.start_ms >= reach && !tangle.is_empty() {
                settle(&mut tangle, &mut folded);
            }
            reach = reach.max(c.end_ms);
            tangle.push(c);
        }
        if !tangle.is_empty() {
            settle(&mut tangle, &mut folded);
        }
        self.charges = folded;
        (duplicates, overlapping)
    }

    /// Σ GPU-hours.
    #[must_use]
    pub fn gpu_hours(&self) -> f64 {
        self.charges.iter().map(Charge::gpu_hours).sum()
    }

    /// Σ billed.
    #[must_use]
    pub fn billed(&self) -> f64 {
        self.charges.iter().map(Charge::billed).sum()
    }
}

/// The folded bill.
#[derive(Clone, Debug, Default)]
pub struct Bill {
    /// Join key → resource.
    pub resources: BTreeMap<String, Resource>,
    /// Rows read.
    pub rows: u64,
    /// GPU compute rows kept.
    pub gpu_rows: u64,
    /// Usage rows that are not GPU compute.
    pub not_gpu_rows: u64,
    /// Instance types named by usage rows that the catalog does not know as GPU machines (nor
    /// their family), with row counts: shown so a missing GPU type is seen, not silently lost.
    pub not_gpu_types: BTreeMap<String, u64>,
    /// Rows that are not `Usage` (tax, credits, purchases, adjustments).
    pub not_usage_rows: u64,
    /// Identical rows dropped.
    pub duplicates: u64,
    /// Charges overlapping another of the same resource.
    pub overlapping: u64,
    /// Rows not read or not joinable, by reason.
    pub skips: Skips,
    /// Currency of the rows.
    pub currency: Option<String>,
    /// Earliest charge start and latest end of GPU charges.
    pub window: Option<(EpochMs, EpochMs)>,
    /// GPU rows skipped for want of the join key that carry another: `--join` value → rows
    /// (`id` for rows with a `ResourceId` but no `ResourceName`), for the hint.
    pub joinable_by: BTreeMap<&'static str, u64>,
}

/// Instance types the catalog knows: GPUs per instance and on-demand $ per GPU-hour by region.
struct Types {
    /// Hashed: looked up once or twice per row. Its keys are the catalog's, so a hostile bill
    /// cannot crowd it (a lookup probes only the catalog's own collisions).
    gpus: rustc_hash::FxHashMap<String, f64>,
    per_gpu: BTreeMap<(String, String), f64>,
    families: BTreeSet<String>,
}

/// `g5` of `g5.4xlarge`, `a2-highgpu` of `a2-highgpu-1g`, `Standard_NC24ads_A100` of
/// `Standard_NC24ads_A100_v4`: the part that names a machine family.
fn family(t: &str) -> String {
    let t = t.to_ascii_lowercase();
    if let Some((f, _)) = t.split_once('.') {
        return f.to_owned();
    }
    match t.rfind(['-', '_']) {
        Some(i) => t[..i].to_owned(),
        None => t,
    }
}

impl Types {
    fn new(catalog: &Catalog) -> Self {
        let mut gpus = rustc_hash::FxHashMap::default();
        let mut per_gpu = BTreeMap::new();
        let mut families = BTreeSet::new();
        for i in &catalog.instances {
            let t = i.instance_type.to_ascii_lowercase();
            families.insert(family(&t));
            if let Some(p) = i.per_gpu(Pricing::OnDemand) {
                per_gpu.insert((t.clone(), i.region.to_ascii_lowercase()), p);
            }
            gpus.insert(t, i.gpu_count);
        }
        Self {
            gpus,
            per_gpu,
            families,
        }
    }
}

/// What a row's instance type says.
enum Kind<'r> {
    Gpu {
        itype: &'r str,
        gpus: f64,
        from: &'static str,
    },
    /// Not GPU compute; the instance type when the row names one.
    NotGpu(Option<&'r str>),
    Unknown(&'r str),
    /// The bill says 0 GPUs for a type the catalog knows with some.
    ZeroGpus {
        itype: &'r str,
        catalog: f64,
    },
}

impl Types {
    /// GPUs per instance of type `t` (any case), without a copy when it is lower case.
    fn gpus_of(&self, t: &str) -> Option<f64> {
        if t.bytes().any(|b| b.is_ascii_uppercase()) {
            self.gpus.get(&t.to_ascii_lowercase()).copied()
        } else {
            self.gpus.get(t).copied()
        }
    }
}

/// Put `v` in `field` unless it holds it already (no copy per row of the same resource).
fn set(field: &mut Option<String>, v: Option<&str>) {
    if let Some(v) = v
        && field.as_deref() != Some(v)
    {
        *field = Some(v.to_owned());
    }
}

/// A word of a charge description shaped like an AWS instance type (`c5.2xlarge`,
/// `m4.10xlarge`): letters and digits, a dot, then a size ending in `large`, `metal` or
/// `xlarge` — only to name what was taken as not GPU compute.
fn instance_word(d: &str) -> Option<&str> {
    d.split_whitespace().find(|w| {
        w.split_once('.').is_some_and(|(fam, size)| {
            !fam.is_empty()
                && fam.chars().all(|c| c.is_ascii_alphanumeric())
                && fam.starts_with(|c: char| c.is_ascii_lowercase())
                && (size.ends_with("large") || size.starts_with("metal"))
        })
    })
}

/// The latest row that names a resource's id, name, region or team wins (copied only when it
/// changes).
fn name(r: &mut Resource, row: &BillRow<'_>, team_tag: &str) {
    set(&mut r.resource_id, row.resource_id);
    set(&mut r.resource_name, row.resource_name);
    set(&mut r.region, row.region);
    // A tag value that cannot name a team (blank, or `(untagged)` itself) is no tag.
    if let Some(t) = row.tag(team_tag)
        && gpuwise_core::teams::usable_team(t).is_ok()
    {
        set(&mut r.team, Some(t));
    }
}

/// Instance-hours a GPU row of `itype` charges: its quantity in hours, else its period;
/// `None` (a counted skip) when that is no time at all or longer than the period.
fn hours_of(bill: &mut Bill, row: &BillRow<'_>, itype: &str) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    let period = (row.end_ms - row.start_ms) as f64 / gpuwise_core::HOUR_MS as f64;
    let hours = row.quantity_hours.unwrap_or(period);
    // One instance cannot run longer than the period it is charged for (a hair over for
    // rounding), nor for no time at all. (Other resources can: two IP addresses bill two
    // hours an hour.)
    if !(hours > 0.0 && hours <= period * 1.001) {
        bill.skips.add("implausible_quantity", || {
            format!(
                "line {}: {hours} hours of {itype} in a charge period of {} h",
                row.line,
                (period * 100.0).round() / 100.0
            )
        });
        return None;
    }
    Some(hours)
}

/// Charge GPU row `row` to `r`: `(instance-hours, GPUs per instance, spot, price id index)`.
fn charge_to(
    bill: &mut Bill,
    r: &mut Resource,
    row: &BillRow<'_>,
    (hours, gpus, spot, sku): (f64, f64, bool, Option<u32>),
) {
    bill.gpu_rows += 1;
    let w = bill.window.get_or_insert((row.start_ms, row.end_ms));
    *w = (w.0.min(row.start_ms), w.1.max(row.end_ms));
    push_charge(
        &mut r.charges,
        Charge {
            start_ms: row.start_ms,
            end_ms: row.end_ms,
            hours,
            gpus,
            billed: row.billed_cost,
            effective: row.effective_cost,
            list: row.list_cost,
            spot,
            sku,
            periods: 1,
        },
    );
    if r.charges.len() >= r.compact_at {
        // Overlaps are counted once, at the end.
        bill.duplicates += r.fold_duplicates().0;
        r.compact_at = (2 * r.charges.len()).max(1024);
    }
}

/// What [`BillBuilder::add`] made of a row's fixed fields, remembered under the row's
/// [`BillRow::same_as`] for the rows that share them.
enum Made {
    NotUsage,
    NotGpu(Option<String>),
    Gpu {
        /// Index into [`BillBuilder::resources`].
        resource: usize,
        itype: String,
        gpus: f64,
        spot: bool,
        /// Index of the price id in the resource's [`Resource::skus`].
        sku: Option<u32>,
    },
}

/// Folds rows into a [`Bill`].
pub struct BillBuilder<'a> {
    /// Shared by the builders of one bill's parts ([`BillBuilder::fork`]).
    types: std::sync::Arc<Types>,
    join: &'a JoinKey,
    team_tag: &'a str,
    bill: Bill,
    /// The bill's resources while it is read, by key, with the [`BillRow::same_as`] of the
    /// row that last named their id, name, region and team; sorted into [`Bill::resources`]
    /// once, at [`BillBuilder::finish`].
    resources: Vec<(String, Resource, Option<u64>)>,
    /// Index into `resources` by key: one hash per row, not a path of string comparisons
    /// down a B-tree of thousands of names. The keys are the bill's: std's keyed hash, which
    /// names crafted to collide cannot slow down.
    index: std::collections::HashMap<String, usize>,
    currencies: BTreeMap<String, u64>,
    /// What rows sharing their fixed fields made, by [`BillRow::same_as`] (the reader's
    /// numbers, not the bill's: hashed without a key). Emptied when it holds [`Self::MADE`].
    made: rustc_hash::FxHashMap<u64, Made>,
}

/// Count a row's currency (upper case), without a copy for one seen before.
fn count_currency(currencies: &mut BTreeMap<String, u64>, c: &str) {
    if c.bytes().any(|b| b.is_ascii_lowercase()) {
        *currencies.entry(c.to_ascii_uppercase()).or_default() += 1;
    } else if let Some(n) = currencies.get_mut(c) {
        *n += 1;
    } else {
        currencies.insert(c.to_owned(), 1);
    }
}

/// Count a usage row that is not GPU compute, with its instance type when it names one.
fn count_not_gpu(bill: &mut Bill, t: Option<&str>) {
    bill.not_gpu_rows += 1;
    if let Some(t) = t {
        match bill.not_gpu_types.get_mut(t) {
            Some(n) => *n += 1,
            None => {
                bill.not_gpu_types.insert(t.to_owned(), 1);
            }
        }
    }
}

impl<'a> BillBuilder<'a> {
    /// The most rows' fixed fields remembered at once.
    const MADE: usize = 1 << 14;

    /// A builder joining on `join`, reading teams from tag `team_tag`.
    #[must_use]
    pub fn new(catalog: &Catalog, join: &'a JoinKey, team_tag: &'a str) -> Self {
        Self {
            types: std::sync::Arc::new(Types::new(catalog)),
            join,
            team_tag,
            bill: Bill::default(),
            resources: Vec::new(),
            index: std::collections::HashMap::new(),
            currencies: BTreeMap::new(),
            made: rustc_hash::FxHashMap::default(),
        }
    }

    fn kind<'r>(&self, row: &BillRow<'r>) -> Kind<'r> {
        let known = |t: &str| self.types.gpus_of(t);
        let named = row.instance_type.or_else(|| {
            row.description.and_then(|d| {
                d.split_whitespace()
                    .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
                    .find(|w| known(w).is_some())
                    .map(|w| (w, "ChargeDescription"))
            })
        });
        match (named, row.gpu_count) {
            (Some((t, _)), Some(0.0)) => match known(t) {
                Some(c) if c > 0.0 => Kind::ZeroGpus {
                    itype: t,
                    catalog: c,
                },
                _ => Kind::NotGpu(Some(t)),
            },
            (None, Some(0.0)) => Kind::NotGpu(None),
            (Some((t, _)), Some(g)) => Kind::Gpu {
                itype: t,
                gpus: g,
                from: "bill",
            },
            (Some((t, _)), None) => match known(t) {
                Some(g) if g > 0.0 => Kind::Gpu {
                    itype: t,
                    gpus: g,
                    from: "catalog",
                },
                Some(_) => Kind::NotGpu(Some(t)),
                None if self.types.families.contains(&family(t)) => Kind::Unknown(t),
                None => Kind::NotGpu(Some(t)),
            },
            (None, Some(g)) => Kind::Gpu {
                itype: "(unnamed)",
                gpus: g,
                from: "bill",
            },
            (None, None) => match row.description.and_then(instance_word) {
                Some(t) if self.types.families.contains(&family(t)) => Kind::Unknown(t),
                t => Kind::NotGpu(t),
            },
        }
    }

    fn key<'r>(&self, row: &BillRow<'r>) -> Option<&'r str> {
        match self.join {
            JoinKey::Name => row.resource_name,
            JoinKey::Id => row.resource_id,
            JoinKey::Tag(k) => row
                .tags
                .binary_search_by(|(t, _)| t.as_str().cmp(k))
                .ok()
                .map(|i| row.tags[i].1.as_str()),
        }
    }

    /// The instance type, GPUs per instance and their source of a GPU compute row; `None`
    /// (counted) for any other.
    fn gpu_compute<'r>(&mut self, row: &BillRow<'r>) -> Option<(&'r str, f64, &'static str)> {
        match self.kind(row) {
            Kind::NotGpu(t) => {
                count_not_gpu(&mut self.bill, t);
                if let Some(id) = row.same_as {
                    self.remember(id, Made::NotGpu(t.map(str::to_owned)));
                }
                None
            }
            Kind::Unknown(t) => {
                self.bill.skips.add("unknown_instance_type", || {
                    format!(
                        "line {}: instance type `{t}` is not in the catalog (its family is); add it with a catalog overlay",
                        row.line
                    )
                });
                None
            }
            Kind::ZeroGpus { itype, catalog } => {
                self.bill.skips.add("bad_gpu_count", || {
                    format!(
                        "line {}: the bill says 0 GPUs for {itype}, which the catalog knows with {catalog}",
                        row.line
                    )
                });
                None
            }
            Kind::Gpu { itype, gpus, from } => Some((itype, gpus, from)),
        }
    }

    #[cfg(test)]
    fn resource_mut(&mut self, key: &str) -> Option<&mut Resource> {
        let at = *self.index.get(key)?;
        self.resources.get_mut(at).map(|(_, r, _)| r)
    }

    fn remember(&mut self, id: u64, made: Made) {
        if self.made.len() >= Self::MADE {
            self.made.clear();
        }
        self.made.insert(id, made);
    }

    /// Take one row.
    pub fn add(&mut self, row: BillRow<'_>) {
        self.bill.rows += 1;
        count_currency(&mut self.currencies, row.currency);
        // A row whose fixed fields an earlier row shared: what that row made of them.
        if let Some(made) = row.same_as.and_then(|id| self.made.get(&id)) {
            match made {
                Made::NotUsage => self.bill.not_usage_rows += 1,
                Made::NotGpu(t) => count_not_gpu(&mut self.bill, t.as_deref()),
                &Made::Gpu {
                    resource,
                    ref itype,
                    gpus,
                    spot,
                    sku,
                } => {
                    let Some(hours) = hours_of(&mut self.bill, &row, itype) else {
                        return;
                    };
                    if let Some((_, r, named_by)) = self.resources.get_mut(resource) {
                        // Named again only when a row of other fixed fields named it since.
                        if *named_by != row.same_as {
                            name(r, &row, self.team_tag);
                            *named_by = row.same_as;
                        }
                        charge_to(&mut self.bill, r, &row, (hours, gpus, spot, sku));
                    }
                }
            }
            return;
        }
        if !row.charge_category.eq_ignore_ascii_case("usage") {
            self.bill.not_usage_rows += 1;
            if let Some(id) = row.same_as {
                self.remember(id, Made::NotUsage);
            }
            return;
        }
        let Some((itype, gpus, from)) = self.gpu_compute(&row) else {
            return;
        };
        let Some(key) = self.key(&row) else {
            let other = [
                ("name", row.resource_name.is_some()),
                ("id", row.resource_id.is_some()),
            ];
            for (flag, has) in other {
                if has && flag != self.join.to_string() {
                    *self.bill.joinable_by.entry(flag).or_default() += 1;
                }
            }
            let join = self.join.to_string();
            self.bill.skips.add("no_join_key", || {
                format!(
                    "line {}: a GPU row ({itype}) without a value to join on ({join})",
                    row.line
                )
            });
            return;
        };
        let Some(hours) = hours_of(&mut self.bill, &row, itype) else {
            return;
        };
        // One lookup for a resource seen before (the key copied only for a new one).
        let at = match self.index.get(key) {
            Some(&at) => at,
            None => {
                let r = Resource {
                    instance_type: itype.to_owned(),
                    gpus_from: from,
                    ..Resource::default()
                };
                self.resources.push((key.to_owned(), r, None));
                self.index.insert(key.to_owned(), self.resources.len() - 1);
                self.resources.len() - 1
            }
        };
        let Some((_, r, named_by)) = self.resources.get_mut(at) else {
            return;
        };
        name(r, &row, self.team_tag);
        *named_by = row.same_as;
        let sku = row.sku_price_id.map(|id| {
            let i = r.skus.iter().position(|s| *s == id).unwrap_or_else(|| {
                r.skus.push(id.to_owned());
                r.skus.len() - 1
            });
            u32::try_from(i).unwrap_or(u32::MAX)
        });
        let spot = row
            .pricing_category
            .is_some_and(|p| p.eq_ignore_ascii_case("dynamic"));
        charge_to(&mut self.bill, r, &row, (hours, gpus, spot, sku));
        if let Some(id) = row.same_as {
            let itype = itype.to_owned();
            let made = Made::Gpu {
                resource: at,
                itype,
                gpus,
                spot,
                sku,
            };
            self.remember(id, made);
        }
    }

    /// An empty builder with the same catalog and keys, for a part of the bill read apart (a
    /// block of a CSV file, a row group of a Parquet file) and joined with [`BillBuilder::merge`].
    #[must_use]
    pub fn fork(&self) -> Self {
        Self {
            types: std::sync::Arc::clone(&self.types),
            join: self.join,
            team_tag: self.team_tag,
            bill: Bill::default(),
            resources: Vec::new(),
            index: std::collections::HashMap::new(),
            currencies: BTreeMap::new(),
            made: rustc_hash::FxHashMap::default(),
        }
    }

    /// Join `later`, a fork that read the rows after all of this one's: the same bill as one
    /// builder taking every row in order (the latest row that names a resource's id, name,
    /// region or team wins; a skip reason keeps its first example; charges are put in order
    /// and their duplicates counted at [`BillBuilder::finish`]).
    pub fn merge(&mut self, later: BillBuilder<'_>) {
        let (b, l) = (&mut self.bill, later.bill);
        b.rows += l.rows;
        b.gpu_rows += l.gpu_rows;
        b.not_gpu_rows += l.not_gpu_rows;
        b.not_usage_rows += l.not_usage_rows;
        b.duplicates += l.duplicates;
        b.overlapping += l.overlapping;
        for (t, n) in l.not_gpu_types {
            *b.not_gpu_types.entry(t).or_default() += n;
        }
        for (k, n) in l.joinable_by {
            *b.joinable_by.entry(k).or_default() += n;
        }
        b.skips.absorb(l.skips);
        b.window = match (b.window, l.window) {
            (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
            (x, y) => x.or(y),
        };
        for (c, n) in later.currencies {
            *self.currencies.entry(c).or_default() += n;
        }
        for (key, r, _) in later.resources {
            match self.index.get(&key) {
                Some(&at) => {
                    if let Some((_, mine, named_by)) = self.resources.get_mut(at) {
                        mine.append(r);
                        // Its naming row is the later builder's, whose numbers are its own.
                        *named_by = None;
                    }
                }
                None => {
                    self.index.insert(key.clone(), self.resources.len());
                    self.resources.push((key, r, None));
                }
            }
        }
    }

    /// Count the rows a reader could not read (they are rows of the bill too).
    pub fn add_read_skips(&mut self, skips: &Skips) {
        self.bill.rows += skips.total();
        self.bill.skips.absorb(skips.clone());
    }

    /// The bill: one currency (USD), charges in order, duplicates dropped.
    ///
    /// # Errors
    /// [`BillError`] for a bill in several currencies or not in USD.
    pub fn finish(mut self) -> Result<Bill, BillError> {
        if self.currencies.len() > 1 {
            return Err(BillError::MixedCurrencies(
                self.currencies.into_iter().collect(),
            ));
        }
        if let Some(c) = self.currencies.keys().next() {
            if c != "USD" {
                return Err(BillError::NotUsd(c.clone()));
            }
            self.bill.currency = Some(c.clone());
        }
        self.bill.resources = self.resources.into_iter().map(|(k, r, _)| (k, r)).collect();
        for r in self.bill.resources.values_mut() {
            let (duplicates, overlapping) = r.fold_duplicates();
            self.bill.duplicates += duplicates;
            self.bill.overlapping += overlapping;
        }
        Ok(self.bill)
    }
}

/// Catalog list prices per GPU-hour for each resource's type and region, looked up once.
#[must_use]
pub fn catalog_prices(catalog: &Catalog, bill: &Bill) -> BTreeMap<String, f64> {
    let types = Types::new(catalog);
    bill.resources
        .iter()
        .filter_map(|(k, r)| {
            let region = r.region.as_deref()?.to_ascii_lowercase();
            types
                .per_gpu
                .get(&(r.instance_type.to_ascii_lowercase(), region))
                .map(|p| (k.clone(), *p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_name_machine_lines() {
        assert_eq!(family("g5.4xlarge"), "g5");
        assert_eq!(family("a2-highgpu-1g"), "a2-highgpu");
        assert_eq!(family("Standard_NC24ads_A100_v4"), "standard_nc24ads_a100");
        assert_eq!(family("gpu"), "gpu");
    }

    #[test]
    fn join_keys_parse_and_print() {
        for s in ["name", "id", "tag:host"] {
            assert_eq!(s.parse::<JoinKey>().expect("parses").to_string(), s);
        }
        assert!("tag:".parse::<JoinKey>().is_err());
        assert!("host".parse::<JoinKey>().is_err());
    }

    /// A bill read in blocks of any size, each into a fork, joined in order, is the bill read
    /// in one piece: rows, skips with their first examples, resources, charges, duplicates.
    #[test]
    fn blocks_read_apart_and_merged_are_the_whole_bill() {
        use crate::focus::{CsvBlocks, read_csv};
        use proptest::prelude::*;
        let catalog = Catalog::builtin();
        let join = JoinKey::Name;
        let head = "BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,\
                    ConsumedQuantity,ConsumedUnit,ResourceName,ResourceId,SkuPriceId,Tags,\
                    x_InstanceType,RegionId\n";
        let row = |i: u32, kind: u32| -> String {
            let (host, hour) = (i % 5, i / 5);
            // Hours wrap after a day: the same host's hour again, a duplicate or an overlap.
            let t0 = format!("2026-01-01T{:02}:00:00Z", hour % 24);
            let t1 = if hour % 24 == 23 {
                "2026-01-02T00:00:00Z".to_owned()
            } else {
                format!("2026-01-01T{:02}:00:00Z", hour % 24 + 1)
            };
            match kind {
                // A GPU hour, back to back with the host's last (runs of one price id join);
                // teams change over time; a quoted cell with a comma and a newline.
                0..=5 => format!(
                    "32.77,USD,Usage,{t0},{t1},1,Hours,host-{host},i-{host},sku-{},\"{{\"\"team\"\":\"\"t{}\"\"}}\",p4d.24xlarge,\"us-east-1\"\n",
                    hour / 4 % 2,
                    (host + hour / 7) % 3
                ),
                6 => format!("0.01,USD,Usage,{t0},{t1},1,GB-Hours,vol-{host},,,,,\n"),
                7 => format!("1,USD,Tax,{t0},{t1},,,,,,,,\"a,\nb\"\n"),
                8 => format!("abc,USD,Usage,{t0},{t1},1,Hours,host-{host},,,,p4d.24xlarge,\n"),
                9 => "1,USD,Usage\n".to_owned(),
                // The first row again: a duplicate.
                _ => "32.77,USD,Usage,2026-01-01T00:00:00Z,2026-01-01T01:00:00Z,1,Hours,host-0,i-0,sku-0,\"{\"\"team\"\":\"\"t0\"\"}\",p4d.24xlarge,\"us-east-1\"\n".to_owned(),
            }
        };
        proptest!(ProptestConfig::with_cases(64), |(kinds in proptest::collection::vec(0u32..12, 0..200), target in 1usize..600)| {
            let mut text = head.to_owned();
            for (i, k) in kinds.iter().enumerate() {
                text.push_str(&row(u32::try_from(i).expect("small"), *k));
            }
            let mut whole = BillBuilder::new(&catalog, &join, "team");
            let t1 = read_csv(text.as_bytes(), "b.csv", &mut |r| whole.add(r)).expect("reads");
            let mut joined = BillBuilder::new(&catalog, &join, "team");
            let mut blocks = CsvBlocks::open(text.as_bytes(), "b.csv").expect("header");
            let header = blocks.header().clone();
            let mut t2 = header.tally();
            while let Some(block) = blocks.next_block(target).expect("block") {
                let mut fork = joined.fork();
                t2.add(header.read_block(&block, "b.csv", &mut |r| fork.add(r)).expect("reads"));
                joined.merge(fork);
            }
            t2.add(blocks.finish());
            prop_assert_eq!(&t1, &t2);
            let (a, b) = (whole.finish().expect("usd"), joined.finish().expect("usd"));
            // The input makes what is compared: GPU rows of every host seen, skips, duplicates.
            let gpu = kinds.iter().filter(|k| **k <= 5 || **k >= 10).count() as u64;
            prop_assert_eq!(a.gpu_rows, gpu);
            prop_assert_eq!(t1.skips.by_reason.get("wrong_column_count").map_or(0, |e| e.0),
                kinds.iter().filter(|k| **k == 9).count() as u64);
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
        });
    }

    /// Rows that say they share their fixed fields ([`BillRow::same_as`]) make the bill they
    /// make when each is decided alone: any rows over two resources (and rows without one),
    /// teams, regions, pricing categories, price ids, GPU, unknown and other instance types,
    /// usage and tax, implausible hours, read whole or in two forks joined.
    #[test]
    fn rows_sharing_fixed_fields_make_what_each_makes_alone() {
        use proptest::prelude::*;
        let catalog = Catalog::builtin();
        let join = JoinKey::Id;
        let teams: Vec<Vec<(String, String)>> = ["a", "b"]
            .iter()
            .map(|t| vec![("team".to_owned(), (*t).to_owned())])
            .chain([Vec::new()])
            .collect();
        let types = [
            Some(("p4d.24xlarge", "x_InstanceType")),
            Some(("g5.96xlarge", "x_InstanceType")),
            Some(("c5.2xlarge", "x_InstanceType")),
            None,
        ];
        type Fixed = (usize, usize, usize, usize, usize, usize, usize);
        let fixed = (
            0usize..3,
            0usize..3,
            0usize..2,
            0usize..2,
            0usize..4,
            0usize..4,
            0usize..2,
        );
        proptest!(ProptestConfig::with_cases(256), |(rows in proptest::collection::vec((fixed, 0i64..30, 0usize..3), 0..200), cut in 0usize..200)| {
            let bill = |shared: bool| {
                let mut numbers: Vec<Fixed> = Vec::new();
                let mut whole = BillBuilder::new(&catalog, &join, "team");
                let mut fork = whole.fork();
                for (i, &(f, start, q)) in rows.iter().enumerate() {
                    let (id, team, region, pricing, itype, category, sku) = f;
                    let n = numbers.iter().position(|x| *x == f).unwrap_or_else(|| {
                        numbers.push(f);
                        numbers.len() - 1
                    });
                    let row = BillRow {
                        line: i as u64 + 2,
                        charge_category: ["Usage", "Tax", "usage", "Usage"][category],
                        start_ms: start * 3_600_000 + 1_767_225_600_000,
                        end_ms: (start + 1) * 3_600_000 + 1_767_225_600_000,
                        quantity_hours: [Some(1.0), None, Some(2.0)][q],
                        resource_id: [Some("i-1"), Some("i-2"), None][id],
                        tags: &teams[team],
                        region: [Some("us-east-1"), Some("eu-west-1")][region],
                        pricing_category: [Some("Standard"), Some("Dynamic")][pricing],
                        instance_type: types[itype],
                        sku_price_id: [Some("s1"), Some("s2")][sku],
                        same_as: shared.then_some(n as u64),
                        ..row()
                    };
                    if i < cut {
                        whole.add(row);
                    } else {
                        fork.add(row);
                    }
                }
                whole.merge(fork);
                format!("{:?}", whole.finish().expect("usd"))
            };
            prop_assert_eq!(bill(true), bill(false));
        });
    }

    /// Charges joined into runs count what the rows would: any rows of one resource (periods
    /// of one or two hours at random starts, two prices, two price ids, arriving in any order
    /// and repeated) give the duplicates, overlaps and totals a brute force over the rows
    /// gives, and the runs, cut into their periods, are the distinct rows in order.
    #[test]
    fn runs_count_what_rows_would() {
        use proptest::prelude::*;
        let catalog = Catalog::builtin();
        let join = JoinKey::Id;
        let skus = ["sku-a", "sku-b"];
        proptest!(ProptestConfig::with_cases(256), |(rows in proptest::collection::vec((0i64..40, 1i64..3, 0usize..2, 0usize..2), 0..300), compact in 0usize..3)| {
            let hour = gpuwise_core::HOUR_MS;
            let mut b = BillBuilder::new(&catalog, &join, "team");
            for (i, &(start, len, price, sku)) in rows.iter().enumerate() {
                b.add(BillRow {
                    line: i as u64 + 2,
                    start_ms: start * hour,
                    end_ms: (start + len) * hour,
                    billed_cost: [32.77, 30.0][price] * len as f64,
                    quantity_hours: Some(len as f64),
                    sku_price_id: Some(skus[sku]),
                    ..row()
                });
                // Folding as it streams (every so many rows) changes nothing.
                if compact > 0 && i % (compact * 7) == 0 {
                    let r = b.resource_mut("i-1").expect("added");
                    b.bill.duplicates += r.fold_duplicates().0;
                }
            }
            let bill = b.finish().expect("usd");
            // Brute force: distinct rows in order; each later copy a duplicate; a row that
            // starts before an earlier one ends an overlap.
            let mut distinct: Vec<(i64, i64, usize, usize)> = rows.iter().map(|&(s, l, p, k)| (s, s + l, k, p)).collect();
            distinct.sort_unstable();
            distinct.dedup();
            let mut reach = i64::MIN;
            let overlapping = distinct.iter().filter(|&&(s, e, _, _)| {
                let o = s < reach;
                reach = reach.max(e);
                o
            }).count() as u64;
            prop_assert_eq!(bill.duplicates, (rows.len() - distinct.len()) as u64);
            prop_assert_eq!(bill.overlapping, overlapping);
            let Some(r) = bill.resources.get("i-1") else {
                prop_assert!(rows.is_empty());
                return Ok(());
            };
            let mut periods: Vec<(i64, i64, usize, usize)> = r.charges.iter().flat_map(Charge::each_period).map(|c| {
                let sku = skus.iter().position(|s| *s == r.skus[c.sku.expect("priced") as usize]).expect("known");
                let price = usize::from(c.billed / c.hours != 32.77);
                (c.start_ms / hour, c.end_ms / hour, sku, price)
            }).collect();
            // In period order (within a period, by the order price ids were first seen).
            prop_assert!(periods.windows(2).all(|w| w[0].0 <= w[1].0));
            periods.sort_unstable();
            prop_assert_eq!(&periods, &distinct);
            let hours: f64 = distinct.iter().map(|&(s, e, _, _)| (e - s) as f64).sum();
            prop_assert!((r.charges.iter().map(Charge::hours).sum::<f64>() - hours).abs() < 1e-9);
            let billed: f64 = distinct.iter().map(|&(s, e, _, p)| [32.77, 30.0][p] * (e - s) as f64).sum();
            prop_assert!((r.billed() - billed).abs() < 1e-6);
            // Back-to-back rows on the same terms are held as one run.
            prop_assert!(r.charges.windows(2).all(|w| !w[0].clone().extend(&w[1])));
        });
    }

    /// A GPU row of instance `i-1` (one p4d.24xlarge hour).
    fn row() -> BillRow<'static> {
        BillRow {
            line: 2,
            charge_category: "Usage",
            currency: "USD",
            start_ms: 1_767_600_000_000,
            end_ms: 1_767_603_600_000,
            billed_cost: 32.77,
            effective_cost: None,
            list_cost: None,
            quantity_hours: Some(1.0),
            pricing_category: None,
            resource_id: Some("i-1"),
            resource_name: None,
            resource_type: None,
            service_category: None,
            sku_price_id: Some("sku"),
            instance_type: Some(("p4d.24xlarge", "x_InstanceType")),
            gpu_count: None,
            region: None,
            provider: None,
            tags: &[],
            description: None,
            same_as: None,
        }
    }

    /// The same row a hundred thousand times (a 10 MB gzip held 17.3 million and took 1.5 GB):
    /// folded as it streams, the resource never holds more than the fold threshold of charges,
    /// and the bill keeps one with the rest counted as duplicates.
    #[test]
    fn identical_rows_are_folded_as_they_stream() {
        let catalog = Catalog::builtin();
        let join = JoinKey::Id;
        let mut b = BillBuilder::new(&catalog, &join, "team");
        let row = row();
        for _ in 0..100_000 {
            b.add(row.clone());
            assert!(b.resource_mut("i-1").expect("added").charges.len() <= 1024);
        }
        let bill = b.finish().expect("one currency");
        assert_eq!(bill.resources["i-1"].charges.len(), 1);
        assert_eq!(bill.duplicates, 99_999);
        assert_eq!(bill.gpu_rows, 100_000);
    }
}
