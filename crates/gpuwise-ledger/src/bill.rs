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

/// One charge of a GPU resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// Inclusive.
    pub start_ms: EpochMs,
    /// Exclusive.
    pub end_ms: EpochMs,
    /// Instance-hours.
    pub hours: f64,
    /// GPUs per instance.
    pub gpus: f64,
    /// Billed.
    pub billed: f64,
    /// Effective (amortized), when given.
    pub effective: Option<f64>,
    /// At list price, when given.
    pub list: Option<f64>,
    /// Spot (`PricingCategory = Dynamic`).
    pub spot: bool,
    /// Index of the price id in the resource's [`Resource::skus`] (interned: a resource has a
    /// handful of price ids over thousands of hourly rows).
    sku: Option<u32>,
}

impl Charge {
    /// GPU-hours.
    #[must_use]
    pub fn gpu_hours(&self) -> f64 {
        self.hours * self.gpus
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
        self.charges.extend(later.charges.into_iter().map(|mut c| {
            c.sku = c.sku.and_then(|i| skus.get(i as usize).copied().flatten());
            c
        }));
    }

    /// Sort the charges by period and drop identical ones; how many were dropped.
    fn fold_duplicates(&mut self) -> u64 {
        self.charges.sort_by(|a, b| {
            (a.start_ms, a.end_ms, &a.sku)
                .cmp(&(b.start_ms, b.end_ms, &b.sku))
                .then(a.billed.total_cmp(&b.billed))
        });
        let before = self.charges.len();
        self.charges.dedup();
        (before - self.charges.len()) as u64
    }

    /// Σ GPU-hours.
    #[must_use]
    pub fn gpu_hours(&self) -> f64 {
        self.charges.iter().map(Charge::gpu_hours).sum()
    }

    /// Σ billed.
    #[must_use]
    pub fn billed(&self) -> f64 {
        self.charges.iter().map(|c| c.billed).sum()
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
    gpus: BTreeMap<String, f64>,
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
        let mut gpus = BTreeMap::new();
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

/// Folds rows into a [`Bill`].
pub struct BillBuilder<'a> {
    /// Shared by the builders of one bill's parts ([`BillBuilder::fork`]).
    types: std::sync::Arc<Types>,
    join: &'a JoinKey,
    team_tag: &'a str,
    bill: Bill,
    currencies: BTreeMap<String, u64>,
}

impl<'a> BillBuilder<'a> {
    /// A builder joining on `join`, reading teams from tag `team_tag`.
    #[must_use]
    pub fn new(catalog: &Catalog, join: &'a JoinKey, team_tag: &'a str) -> Self {
        Self {
            types: std::sync::Arc::new(Types::new(catalog)),
            join,
            team_tag,
            bill: Bill::default(),
            currencies: BTreeMap::new(),
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
                self.bill.not_gpu_rows += 1;
                if let Some(t) = t {
                    match self.bill.not_gpu_types.get_mut(t) {
                        Some(n) => *n += 1,
                        None => {
                            self.bill.not_gpu_types.insert(t.to_owned(), 1);
                        }
                    }
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

    /// Count a row's currency (upper case), without a copy for one seen before.
    fn count_currency(&mut self, c: &str) {
        if c.bytes().any(|b| b.is_ascii_lowercase()) {
            *self.currencies.entry(c.to_ascii_uppercase()).or_default() += 1;
        } else if let Some(n) = self.currencies.get_mut(c) {
            *n += 1;
        } else {
            self.currencies.insert(c.to_owned(), 1);
        }
    }

    /// Take one row.
    pub fn add(&mut self, row: BillRow<'_>) {
        self.bill.rows += 1;
        self.count_currency(row.currency);
        if !row.charge_category.eq_ignore_ascii_case("usage") {
            self.bill.not_usage_rows += 1;
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
        #[allow(clippy::cast_precision_loss)]
        let period = (row.end_ms - row.start_ms) as f64 / gpuwise_core::HOUR_MS as f64;
        let hours = row.quantity_hours.unwrap_or(period);
        // One instance cannot run longer than the period it is charged for (a hair over for
        // rounding), nor for no time at all. (Other resources can: two IP addresses bill two
        // hours an hour.)
        if !(hours > 0.0 && hours <= period * 1.001) {
            self.bill.skips.add("implausible_quantity", || {
                format!(
                    "line {}: {hours} hours of {itype} in a charge period of {} h",
                    row.line,
                    (period * 100.0).round() / 100.0
                )
            });
            return;
        }
        self.bill.gpu_rows += 1;
        let w = self.bill.window.get_or_insert((row.start_ms, row.end_ms));
        *w = (w.0.min(row.start_ms), w.1.max(row.end_ms));
        // One lookup for a resource seen before (the key copied only for a new one).
        let r = match self.bill.resources.get_mut(key) {
            Some(r) => r,
            None => self
                .bill
                .resources
                .entry(key.to_owned())
                .or_insert_with(|| Resource {
                    instance_type: itype.to_owned(),
                    gpus_from: from,
                    ..Resource::default()
                }),
        };
        // The latest row that names them wins (copied only when it changes: this runs per row).
        set(&mut r.resource_id, row.resource_id);
        set(&mut r.resource_name, row.resource_name);
        set(&mut r.region, row.region);
        // A tag value that cannot name a team (blank, or `(untagged)` itself) is no tag.
        if let Some(t) = row.tag(self.team_tag)
            && gpuwise_core::teams::usable_team(t).is_ok()
        {
            set(&mut r.team, Some(t));
        }
        let sku = row.sku_price_id.map(|id| {
            let i = r.skus.iter().position(|s| *s == id).unwrap_or_else(|| {
                r.skus.push(id.to_owned());
                r.skus.len() - 1
            });
            u32::try_from(i).unwrap_or(u32::MAX)
        });
        r.charges.push(Charge {
            start_ms: row.start_ms,
            end_ms: row.end_ms,
            hours,
            gpus,
            billed: row.billed_cost,
            effective: row.effective_cost,
            list: row.list_cost,
            spot: row
                .pricing_category
                .is_some_and(|p| p.eq_ignore_ascii_case("dynamic")),
            sku,
        });
        if r.charges.len() >= r.compact_at {
            self.bill.duplicates += r.fold_duplicates();
            r.compact_at = (2 * r.charges.len()).max(1024);
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
            currencies: BTreeMap::new(),
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
        for (key, r) in l.resources {
            match b.resources.entry(key) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(r);
                }
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut().append(r),
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
        for r in self.bill.resources.values_mut() {
            self.bill.duplicates += r.fold_duplicates();
            let mut reach = EpochMs::MIN;
            for c in &r.charges {
                if c.start_ms < reach {
                    self.bill.overlapping += 1;
                }
                reach = reach.max(c.end_ms);
            }
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
            let t0 = format!("2026-01-01T{:02}:00:00Z", hour % 24);
            let t1 = format!("2026-01-01T{:02}:59:59Z", hour % 24);
            match kind {
                // A GPU hour; teams change over time; a quoted cell with a comma and a newline.
                0..=5 => format!(
                    "32.77,USD,Usage,{t0},{t1},1,Hours,host-{host},i-{host},sku-{},\"{{\"\"team\"\":\"\"t{}\"\"}}\",p4d.24xlarge,\"us-east-1\"\n",
                    hour % 2,
                    (host + hour / 7) % 3
                ),
                6 => format!("0.01,USD,Usage,{t0},{t1},1,GB-Hours,vol-{host},,,,,\n"),
                7 => format!("1,USD,Tax,{t0},{t1},,,,,,,,\"a,\nb\"\n"),
                8 => format!("abc,USD,Usage,{t0},{t1},1,Hours,host-{host},,,,p4d.24xlarge,\n"),
                9 => "1,USD,Usage\n".to_owned(),
                // The first row again: a duplicate.
                _ => "32.77,USD,Usage,2026-01-01T00:00:00Z,2026-01-01T00:59:59Z,1,Hours,host-0,i-0,sku-0,\"{\"\"team\"\":\"\"t0\"\"}\",p4d.24xlarge,\"us-east-1\"\n".to_owned(),
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

    /// The same row a hundred thousand times (a 10 MB gzip held 17.3 million and took 1.5 GB):
    /// folded as it streams, the resource never holds more than the fold threshold of charges,
    /// and the bill keeps one with the rest counted as duplicates.
    #[test]
    fn identical_rows_are_folded_as_they_stream() {
        let catalog = Catalog::builtin();
        let join = JoinKey::Id;
        let mut b = BillBuilder::new(&catalog, &join, "team");
        let row = BillRow {
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
        };
        for _ in 0..100_000 {
            b.add(row.clone());
            assert!(b.bill.resources["i-1"].charges.len() <= 1024);
        }
        let bill = b.finish().expect("one currency");
        assert_eq!(bill.resources["i-1"].charges.len(), 1);
        assert_eq!(bill.duplicates, 99_999);
        assert_eq!(bill.gpu_rows, 100_000);
    }
}
