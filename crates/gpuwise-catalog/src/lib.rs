//! # The catalog: GPU specifications, cloud instances and their prices
//!
//! Built in: `data/gpus.toml` (specifications with sources; dense TFLOPS; MIG profiles) and
//! `data/instances.csv` (instances and prices of AWS, GCP, Azure, Lambda and Vast, made by
//! `gpuwise catalog import`, each row with its as-of date and source). An overlay
//! ([`Overlay`]) adds negotiated prices and private clusters (on-prem TCO).
//!
//! [`Catalog::gpu_hour_price`] is the one way the other stages price a GPU-hour; its fallback
//! chain is documented there and every [`Quote`] says which step answered.

pub mod gpu;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::gpu::normalize;

/// Dense peak TFLOPS (TOPS for int8) by precision; `None` where the GPU has no such unit or
/// no figure is carried.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DenseTflops {
    /// FP32 (non-tensor).
    pub fp32: Option<f64>,
    /// TF32 tensor.
    pub tf32: Option<f64>,
    /// FP16 tensor.
    pub fp16: Option<f64>,
    /// BF16 tensor.
    pub bf16: Option<f64>,
    /// FP8 tensor.
    pub fp8: Option<f64>,
    /// INT8 tensor (TOPS).
    pub int8: Option<f64>,
}

/// A MIG profile.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MigProfile {
    /// `1g.10gb`.
    pub name: String,
    /// Compute slices.
    pub compute_slices: u32,
    /// Memory, GB as named.
    pub memory_gb: f64,
    /// Most instances of this profile on one GPU.
    pub max_instances: u32,
}

/// One GPU product.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Canonical name (`A100-SXM4-80GB`).
    pub name: String,
    /// Names tools and clouds print.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Vendor.
    pub vendor: String,
    /// Architecture.
    pub architecture: String,
    /// Memory, GB as on the datasheet.
    pub memory_gb: f64,
    /// Memory type.
    pub memory_type: Option<String>,
    /// Memory bandwidth.
    pub memory_bandwidth_gb_s: Option<f64>,
    /// Dense TFLOPS.
    #[serde(default)]
    pub dense_tflops: DenseTflops,
    /// Board power.
    pub tdp_w: Option<f64>,
    /// GPU-to-GPU bandwidth per GPU.
    pub interconnect_gb_s: Option<f64>,
    /// What that interconnect is.
    pub interconnect: Option<String>,
    /// MIG profiles (empty: no MIG).
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
    /// Where the figures come from.
    pub source: String,
    /// When they were collected.
    pub as_of: String,
    /// What the compute figures are when they are not the GPU's own datasheet's (a bound taken
    /// from a sibling's); every plan that uses them says so.
    #[serde(default)]
    pub compute_note: Option<String>,
}

impl GpuSpec {
    /// `NAME: note` when the compute figures are a bound rather than the GPU's own datasheet's
    /// (what every output that uses them prints).
    #[must_use]
    pub fn compute_caveat(&self) -> Option<String> {
        self.compute_note
            .as_ref()
            .map(|n| format!("{}: {n}", self.name))
    }

    /// Compute slices of the whole GPU (7 for A100/H100/H200, 4 for A30), if MIG-capable.
    #[must_use]
    pub fn mig_slices(&self) -> Option<u32> {
        self.mig_profiles.iter().map(|p| p.compute_slices).max()
    }
}

/// How an hour is bought.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pricing {
    /// Pay as you go.
    OnDemand,
    /// Interruptible.
    Spot,
    /// One-year commitment (reserved instance, committed use, savings plan).
    #[serde(rename = "1y")]
    Commit1y,
    /// Three-year commitment.
    #[serde(rename = "3y")]
    Commit3y,
}

impl Pricing {
    /// All pricing models.
    pub const ALL: [Pricing; 4] = [
        Pricing::OnDemand,
        Pricing::Spot,
        Pricing::Commit1y,
        Pricing::Commit3y,
    ];

    /// Parse `on-demand`, `spot`, `1y`, `3y` (also through [`std::str::FromStr`]).
    pub fn parse(s: &str) -> Result<Self, ValueError> {
        match s {
            "on-demand" | "ondemand" => Ok(Self::OnDemand),
            "spot" => Ok(Self::Spot),
            "1y" => Ok(Self::Commit1y),
            "3y" => Ok(Self::Commit3y),
            other => Err(ValueError::Pricing(other.to_owned())),
        }
    }

    /// The name `parse` takes.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on-demand",
            Self::Spot => "spot",
            Self::Commit1y => "1y",
            Self::Commit3y => "3y",
        }
    }
}

impl fmt::Display for Pricing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instance type in one region, prices per instance-hour.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Instance {
    /// `aws`, `gcp`, `azure`, `lambda`, `vast`, `onprem`, …
    pub cloud: String,
    /// `p4d.24xlarge`.
    pub instance_type: String,
    /// `us-east-1`.
    pub region: String,
    /// Canonical GPU name.
    pub gpu: String,
    /// GPUs per instance (fractional for partitioned GPUs, e.g. Azure NVads A10 v5).
    pub gpu_count: f64,
    /// vCPUs.
    pub vcpus: Option<f64>,
    /// Memory.
    pub memory_gib: Option<f64>,
    /// On-demand $/h.
    pub on_demand_usd_per_hour: Option<f64>,
    /// Spot $/h.
    pub spot_usd_per_hour: Option<f64>,
    /// 1-year commitment $/h.
    pub commit_1y_usd_per_hour: Option<f64>,
    /// 3-year commitment $/h.
    pub commit_3y_usd_per_hour: Option<f64>,
    /// Date of the prices.
    pub as_of: String,
    /// Where they come from.
    pub source: String,
    /// Prices the importer found doubtful (see [`Suspect`]): listed, never quoted, unless an
    /// overlay confirms them or sets its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suspect: Vec<Suspect>,
}

/// A price of an instance row that `catalog import` found doubtful, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Suspect {
    /// Which of the row's prices.
    pub pricing: Pricing,
    /// Why (a stable code: `spot_not_below_on_demand`, `source_spot_not_below_on_demand`,
    /// `cheaper_than_smaller_memory_variant`, `far_below_other_clouds`).
    pub reason: String,
}

/// The names nearest to what was typed, for "did you mean": case, spaces and punctuation
/// ignored, `o`/`0` and `l`/`1` taken as the same (`H1OO` is H100), and a name's start counted
/// as the name (`h100` is near `H100-SXM5-80GB`, not `A10`). The closest ones (ties kept, at
/// most five), when they are close; else the three least far.
#[must_use]
pub fn nearest_names<'a>(typed: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| match c.to_ascii_lowercase() {
                'o' => '0',
                'l' | 'i' => '1',
                c => c,
            })
            .collect()
    };
    let want = fold(typed);
    let n = want.chars().count();
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .map(|name| {
            let have = fold(name);
            let head: String = have.chars().take(n).collect();
            // In half steps: matching a name's start is half a step from matching it whole.
            let d = (2 * strsim::levenshtein(&want, &have))
                .min(2 * strsim::levenshtein(&want, &head) + usize::from(head != have));
            (d, name)
        })
        .collect();
    scored.sort_unstable();
    scored.dedup_by(|a, b| a.1 == b.1);
    let best = scored.first().map_or(0, |s| s.0);
    if best <= 2 * (n / 3).max(2) {
        scored
            .iter()
            .take_while(|s| s.0 == best)
            .take(5)
            .map(|s| s.1)
            .collect()
    } else {
        scored.iter().take(3).map(|s| s.1).collect()
    }
}

/// The highest price per GPU-hour taken as real: no GPU rents for more (in 2026 the dearest
/// list prices are near $15). Above it a price is a typo or a unit error, not a quote.
pub const MAX_USD_PER_GPU_HOUR: f64 = 1_000.0;

/// Check a price per GPU-hour: finite, above zero (an unknown price is absent, never $0) and
/// at most [`MAX_USD_PER_GPU_HOUR`].
pub fn check_gpu_hour_price(v: f64) -> Result<f64, ValueError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(ValueError::NotAPrice(v));
    }
    if v > MAX_USD_PER_GPU_HOUR {
        return Err(ValueError::ImplausiblePrice(v));
    }
    Ok(v)
}

/// A value a user gave that the catalog cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Not a pricing model.
    #[error("`{0}` is not one of on-demand, spot, 1y, 3y")]
    Pricing(String),
    /// Zero, negative or not a number.
    #[error("a price must be a number above zero (leave an unknown price out): `{0}`")]
    NotAPrice(f64),
    /// Above what any GPU rents for.
    #[error(
        "${0}/GPU-hour is above ${MAX_USD_PER_GPU_HOUR:.0}, more than any GPU rents for (a typo or a unit error?)"
    )]
    ImplausiblePrice(f64),
    /// A cloud the catalog does not have.
    #[error("--cloud: `{cloud}` is not a cloud in the catalog (clouds: {known})")]
    UnknownCloud {
        /// What was given.
        cloud: String,
        /// The clouds there are.
        known: String,
    },
    /// A region the catalog does not have (in the cloud named).
    #[error("--region: `{region}` is not a region{of} in the catalog (regions: {known})")]
    UnknownRegion {
        /// What was given.
        region: String,
        /// ` of CLOUD`, or empty.
        of: String,
        /// The regions there are.
        known: String,
    },
}

impl std::str::FromStr for Pricing {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Header of the instances CSV.
pub const INSTANCES_HEADER: &str = "cloud,instance_type,region,gpu,gpu_count,vcpus,memory_gib,on_demand_usd_per_hour,spot_usd_per_hour,commit_1y_usd_per_hour,commit_3y_usd_per_hour,as_of,source,suspect";

/// Fields of an instances CSV row.
const INSTANCE_FIELDS: usize = 14;

fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| {
        let s = format!("{x:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    })
}

impl Instance {
    /// The price of an instance-hour under `pricing`, for quotes: `None` when unpublished or
    /// suspect.
    #[must_use]
    pub fn price(&self, pricing: Pricing) -> Option<f64> {
        if self.suspect_reason(pricing).is_some() {
            return None;
        }
        self.listed_price(pricing)
    }

    /// Why the `pricing` price is suspect, if it is.
    #[must_use]
    pub fn suspect_reason(&self, pricing: Pricing) -> Option<&str> {
        self.suspect
            .iter()
            .find(|s| s.pricing == pricing)
            .map(|s| s.reason.as_str())
    }

    /// Mark the `pricing` price suspect (once per pricing).
    pub fn mark_suspect(&mut self, pricing: Pricing, reason: &str) {
        if self.listed_price(pricing).is_some() && self.suspect_reason(pricing).is_none() {
            self.suspect.push(Suspect {
                pricing,
                reason: reason.to_owned(),
            });
        }
    }

    /// The price of an instance-hour under `pricing` as the source lists it, suspect or not
    /// (for listings, which say when it is suspect).
    #[must_use]
    pub fn listed_price(&self, pricing: Pricing) -> Option<f64> {
        match pricing {
            Pricing::OnDemand => self.on_demand_usd_per_hour,
            Pricing::Spot => self.spot_usd_per_hour,
            Pricing::Commit1y => self.commit_1y_usd_per_hour,
            Pricing::Commit3y => self.commit_3y_usd_per_hour,
        }
    }

    /// The price of one GPU-hour under `pricing`.
    #[must_use]
    pub fn per_gpu(&self, pricing: Pricing) -> Option<f64> {
        self.price(pricing)
            .filter(|_| self.gpu_count > 0.0)
            .map(|p| p / self.gpu_count)
    }

    /// One CSV row (RFC 4180: a field with a comma, quote or line break is quoted), without
    /// its line end. Suspect flags are `PRICING:REASON` entries joined by `;`.
    #[must_use]
    pub fn to_csv(&self) -> String {
        let suspect = self
            .suspect
            .iter()
            .map(|x| format!("{}:{}", x.pricing, x.reason.replace(';', ",")))
            .collect::<Vec<_>>()
            .join(";");
        let fields = [
            self.cloud.clone(),
            self.instance_type.clone(),
            self.region.clone(),
            self.gpu.clone(),
            opt_num(Some(self.gpu_count)),
            opt_num(self.vcpus),
            opt_num(self.memory_gib),
            opt_num(self.on_demand_usd_per_hour),
            opt_num(self.spot_usd_per_hour),
            opt_num(self.commit_1y_usd_per_hour),
            opt_num(self.commit_3y_usd_per_hour),
            self.as_of.clone(),
            self.source.clone(),
            suspect,
        ];
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        // Writing to memory cannot fail.
        let _ = w.write_record(&fields);
        let bytes = w.into_inner().unwrap_or_default();
        let mut line = String::from_utf8(bytes).unwrap_or_default();
        line.pop();
        line
    }
}

/// Whole instances that rent a number of GPUs ([`Catalog::rentals`]).
#[derive(Clone, Copy, Debug)]
pub struct Rental<'a> {
    /// The pricing model.
    pub pricing: Pricing,
    /// The instance type.
    pub instance: &'a Instance,
    /// How many of it.
    pub machines: u32,
    /// $ per hour of all of them.
    pub usd_per_hour: f64,
}

/// A problem with catalog data.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A bad GPU file.
    #[error("`{origin}`: {message}")]
    Gpus {
        /// File.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A bad instances file line.
    #[error("`{origin}` line {line}: {message}")]
    Instances {
        /// File.
        origin: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A bad overlay.
    #[error("`{origin}`: {message}")]
    Overlay {
        /// File.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// Parse an instances CSV (the format [`Instance::to_csv`] writes).
pub fn parse_instances(text: &str, origin: &str) -> Result<Vec<Instance>, CatalogError> {
    let err = |line: usize, message: String| CatalogError::Instances {
        origin: origin.to_owned(),
        line,
        message,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .comment(Some(b'#'))
        .flexible(true)
        .from_reader(text.as_bytes());
    // The file's line where a record starts: the reader's position is where it began reading,
    // before the blank and comment lines it skips (and its line count leaves comments out).
    let line_at = |p: Option<&csv::Position>| {
        let Some(mut b) = p.and_then(|p| usize::try_from(p.byte()).ok()) else {
            return 0;
        };
        let bytes = text.as_bytes();
        while b < bytes.len() && matches!(bytes[b], b'#' | b'\n' | b'\r') {
            b = bytes[b..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(bytes.len(), |k| b + k + 1);
        }
        bytes[..b.min(bytes.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1
    };
    let line_of = |r: &csv::StringRecord| line_at(r.position());
    let mut records = rdr.records();
    match records.next() {
        Some(Ok(h)) if h.iter().collect::<Vec<_>>().join(",") == INSTANCES_HEADER => {}
        Some(Ok(h)) => {
            return Err(err(
                line_of(&h),
                format!(
                    "expected the header `{INSTANCES_HEADER}`, found `{}`",
                    h.iter().collect::<Vec<_>>().join(",")
                ),
            ));
        }
        Some(Err(e)) => return Err(err(0, format!("not CSV: {e}"))),
        None => return Err(err(0, "empty file".into())),
    }
    let mut out = Vec::new();
    for record in records {
        let record = record.map_err(|e| err(line_at(e.position()), format!("not CSV: {e}")))?;
        // Line numbers are counted only for a message (counting them for every row would scan
        // the file once per row).
        let f: Vec<&str> = record.iter().collect();
        if f.len() != INSTANCE_FIELDS {
            return Err(err(
                line_of(&record),
                format!("expected {INSTANCE_FIELDS} fields, found {}", f.len()),
            ));
        }
        out.push(instance_of(&f).map_err(|m| err(line_of(&record), m))?);
    }
    Ok(out)
}

/// A machine's network bandwidth for traffic between machines (the data-parallel collectives
/// of a training job spread over several), with its source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Network {
    /// Gbit/s per machine, all its NICs together.
    pub gbps: f64,
    /// Where the figure comes from.
    pub source: String,
    /// When it was read.
    pub as_of: String,
}

/// The built-in `data/network.csv`: the inter-machine bandwidth of the multi-GPU instance
/// types whose providers publish it. An instance missing here has no figure (never a guess).
#[must_use]
pub fn network(cloud: &str, instance_type: &str) -> Option<Network> {
    let mut r = csv::Reader::from_reader(include_str!("../data/network.csv").as_bytes());
    r.records().filter_map(Result::ok).find_map(|rec| {
        (rec.get(0) == Some(cloud) && rec.get(1) == Some(instance_type)).then(|| Network {
            gbps: rec.get(2).and_then(|v| v.parse().ok()).unwrap_or(0.0),
            source: rec.get(3).unwrap_or_default().to_owned(),
            as_of: rec.get(4).unwrap_or_default().to_owned(),
        })
    })
}

/// One row of `instances.csv` (14 fields) as an instance; the message says which field is
/// wrong.
fn instance_of(f: &[&str]) -> Result<Instance, String> {
    let mut suspect = Vec::new();
    for entry in f[13].split(';').filter(|e| !e.is_empty()) {
        let (p, reason) = entry
            .split_once(':')
            .ok_or_else(|| format!("`suspect` entry `{entry}` is not PRICING:REASON"))?;
        let pricing = Pricing::parse(p).map_err(|m| format!("`suspect`: {m}"))?;
        suspect.push(Suspect {
            pricing,
            reason: reason.to_owned(),
        });
    }
    let num = |k: usize, name: &str| -> Result<Option<f64>, String> {
        if f[k].is_empty() {
            return Ok(None);
        }
        let v: f64 = f[k]
            .parse()
            .map_err(|_| format!("`{name}` is not a number: `{}`", f[k]))?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!(
                "`{name}` must be a non-negative number: `{}`",
                f[k]
            ));
        }
        Ok(Some(v))
    };
    let gpu_count = num(4, "gpu_count")?.ok_or_else(|| "`gpu_count` is empty".to_owned())?;
    if gpu_count <= 0.0 {
        return Err("`gpu_count` must be above zero".into());
    }
    let price = |k: usize, name: &str| -> Result<Option<f64>, String> {
        match num(k, name)? {
            Some(v) => check_gpu_hour_price(v / gpu_count)
                .map(|_| Some(v))
                .map_err(|m| format!("`{name}`: {m}")),
            None => Ok(None),
        }
    };
    Ok(Instance {
        cloud: f[0].to_owned(),
        instance_type: f[1].to_owned(),
        region: f[2].to_owned(),
        gpu: f[3].to_owned(),
        gpu_count,
        vcpus: num(5, "vcpus")?,
        memory_gib: num(6, "memory_gib")?,
        on_demand_usd_per_hour: price(7, "on_demand_usd_per_hour")?,
        spot_usd_per_hour: price(8, "spot_usd_per_hour")?,
        commit_1y_usd_per_hour: price(9, "commit_1y_usd_per_hour")?,
        commit_3y_usd_per_hour: price(10, "commit_3y_usd_per_hour")?,
        as_of: f[11].to_owned(),
        source: f[12].to_owned(),
        suspect,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuFile {
    gpu: Vec<GpuSpec>,
}

/// A TOML error as one line: where (line and column), what, and the line itself cut to 80
/// characters (the `toml` crate's own message spans several lines and repeats the whole
/// offending line, however long). Here because this is the lowest crate that reads TOML: every
/// file gpuwise reads (catalog, prices, teams, policies, hints, config) reports through it.
#[must_use]
pub fn toml_message(e: &toml::de::Error, text: &str) -> String {
    let what = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else {
        return what;
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let src = text.lines().nth(line - 1).unwrap_or("").trim();
    let shown: String = src.chars().take(80).collect();
    let cut = if src.chars().count() > 80 { "…" } else { "" };
    // A bare TOML date reaches a text field as a table: say how to write it.
    let hint = if what.contains("invalid type: map") && src.contains(|c: char| c.is_ascii_digit()) {
        " (a date or time is written in quotes here: \"2026-01-01\")"
    } else {
        ""
    };
    format!("line {line}, column {column}: {what}{hint} (`{shown}{cut}`)")
}

/// Parse a GPU specification file.
pub fn parse_gpus(text: &str, origin: &str) -> Result<Vec<GpuSpec>, CatalogError> {
    let file: GpuFile = toml::from_str(text).map_err(|e| CatalogError::Gpus {
        origin: origin.to_owned(),
        message: toml_message(&e, text),
    })?;
    let mut seen = BTreeMap::new();
    for g in &file.gpu {
        for name in std::iter::once(&g.name).chain(g.aliases.iter()) {
            if let Some(other) = seen.insert(normalize(name), g.name.clone())
                && other != g.name
            {
                return Err(CatalogError::Gpus {
                    origin: origin.to_owned(),
                    message: format!("name `{name}` of `{}` is also a name of `{other}`", g.name),
                });
            }
        }
    }
    Ok(file.gpu)
}

/// A negotiated price (overlay `[[price]]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NegotiatedPrice {
    /// Cloud.
    pub cloud: String,
    /// Instance type.
    pub instance_type: String,
    /// Region (all regions when absent).
    pub region: Option<String>,
    /// Which price it sets.
    pub pricing: String,
    /// $ per instance-hour.
    pub usd_per_hour: f64,
    /// GPU (required when the instance is not in the catalog).
    pub gpu: Option<String>,
    /// GPUs per instance (required when the instance is not in the catalog).
    pub gpu_count: Option<f64>,
    /// Date of the price.
    pub as_of: String,
    /// Free text.
    pub note: Option<String>,
}

/// A private cluster (overlay `[[cluster]]`): its GPU-hour cost from total cost of ownership.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Name (the instance type of its catalog row, and `cluster = NAME` in price rules).
    pub name: String,
    /// GPU model.
    pub gpu: String,
    /// GPUs in the cluster.
    pub gpus: u32,
    /// Purchase price of the whole cluster (servers, GPUs, network), $.
    pub purchase_usd: f64,
    /// Years over which the purchase is amortized.
    pub amortization_years: f64,
    /// Average power per GPU including its share of the server, W (default: the GPU's TDP).
    pub power_w_per_gpu: Option<f64>,
    /// Electricity price.
    pub usd_per_kwh: f64,
    /// Power usage effectiveness of the data centre (≥ 1).
    pub pue: f64,
    /// Other yearly costs (space, support, staff), $.
    #[serde(default)]
    pub opex_usd_per_year: f64,
    /// Date of these figures.
    pub as_of: String,
}

impl Cluster {
    /// $ per GPU-hour: purchase / (years × 8760 h × GPUs) + power (kW) × PUE × $/kWh + opex /
    /// (8760 h × GPUs). Returns the total and the formula with numbers.
    #[must_use]
    pub fn gpu_hour_cost(&self, tdp_w: Option<f64>) -> Option<(f64, String)> {
        let watts = self.power_w_per_gpu.or(tdp_w)?;
        let gpus = f64::from(self.gpus);
        let capex = self.purchase_usd / (self.amortization_years * 8760.0 * gpus);
        let energy = watts / 1000.0 * self.pue * self.usd_per_kwh;
        let opex = self.opex_usd_per_year / (8760.0 * gpus);
        let total = capex + energy + opex;
        let formula = format!(
            "TCO: ${:.0} / ({} y × 8760 h × {} GPUs) = ${capex:.4} + {watts} W × PUE {} × ${}/kWh = ${energy:.4} + opex ${:.0}/y = ${opex:.4}",
            self.purchase_usd,
            self.amortization_years,
            self.gpus,
            self.pue,
            self.usd_per_kwh,
            self.opex_usd_per_year
        );
        Some((total, formula))
    }
}

/// A catalog overlay: GPUs the catalog lacks, negotiated prices and private clusters.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Overlay {
    /// GPUs of your own (a card the catalog lacks), with the same fields as the catalog's
    /// `gpus.toml`; a `[[cluster]]` or a `[[price]]` with `gpu` prices it.
    #[serde(default, rename = "gpu")]
    pub gpus: Vec<GpuSpec>,
    /// Negotiated prices.
    #[serde(default, rename = "price")]
    pub prices: Vec<NegotiatedPrice>,
    /// Private clusters.
    #[serde(default, rename = "cluster")]
    pub clusters: Vec<Cluster>,
    /// Suspect catalog prices confirmed as real (they are quoted again).
    #[serde(default, rename = "confirm")]
    pub confirms: Vec<Confirm>,
}

/// An overlay `[[confirm]]`: a suspect catalog price checked by a person and taken as real.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Confirm {
    /// Cloud.
    pub cloud: String,
    /// Instance type.
    pub instance_type: String,
    /// Region (all regions when absent).
    pub region: Option<String>,
    /// Which price (all of the row's suspect prices when absent).
    pub pricing: Option<String>,
    /// Who checked it, where, when.
    pub note: Option<String>,
}

impl Overlay {
    /// Parse an overlay file.
    pub fn parse(text: &str, origin: &str) -> Result<Self, CatalogError> {
        toml::from_str(text).map_err(|e| CatalogError::Overlay {
            origin: origin.to_owned(),
            message: toml_message(&e, text),
        })
    }
}

/// Which step of the fallback chain answered a price query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The asked cloud and region.
    CloudRegion,
    /// The asked cloud, cheapest region.
    CloudAnyRegion,
    /// No cloud asked (or it does not offer the GPU): the first reference cloud that does.
    ReferenceCloud,
}

/// A price per GPU-hour, with where it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quote {
    /// $ per GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// Cloud.
    pub cloud: String,
    /// Instance type the price is from.
    pub instance_type: String,
    /// Region.
    pub region: String,
    /// GPUs in that instance.
    pub gpu_count: f64,
    /// Pricing model of the price (may differ from the one asked, see `note`).
    pub pricing: Pricing,
    /// Date of the price.
    pub as_of: String,
    /// Publisher.
    pub source: String,
    /// Fallback step.
    pub step: Step,
    /// What differs from the question, if anything.
    pub note: Option<String>,
}

impl Quote {
    /// One line: `aws p4de.24xlarge us-east-1 on-demand $27.44705/h ÷ 8 GPUs (source, as of)`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {} {} {} (${:.4}/GPU-h; {}, {})",
            self.cloud,
            self.instance_type,
            self.region,
            self.pricing,
            self.usd_per_gpu_hour,
            self.source,
            self.as_of
        );
        if let Some(n) = &self.note {
            s.push_str("; ");
            s.push_str(n);
        }
        s
    }
}

/// A price question.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceQuery<'a> {
    /// Canonical GPU name.
    pub gpu: &'a str,
    /// Cloud, if it matters.
    pub cloud: Option<&'a str>,
    /// Region, if it matters.
    pub region: Option<&'a str>,
    /// Pricing model.
    pub pricing: Pricing,
}

/// Reference clouds (and their reference regions), in the order a price without a cloud is
/// looked up: the hyperscalers' list prices first, GPU clouds after.
pub const REFERENCE_CLOUDS: &[(&str, &str)] = &[
    ("onprem", "onprem"),
    ("aws", "us-east-1"),
    ("gcp", "us-central1"),
    ("azure", "eastus"),
    ("lambda", "us-east-1"),
    ("vast", ""),
];

/// GPU specs and instances.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// GPUs.
    pub gpus: Vec<GpuSpec>,
    /// Instances.
    pub instances: Vec<Instance>,
    names: BTreeMap<String, usize>,
}

impl Catalog {
    /// A catalog from parts.
    #[must_use]
    pub fn new(gpus: Vec<GpuSpec>, instances: Vec<Instance>) -> Self {
        let mut names = BTreeMap::new();
        for (i, g) in gpus.iter().enumerate() {
            for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
                names.insert(normalize(n), i);
            }
        }
        Self {
            gpus,
            instances,
            names,
        }
    }

    /// The built-in catalog.
    ///
    /// # Panics
    /// Never in a released build: the data is compiled in and checked by unit tests.
    #[must_use]
    pub fn builtin() -> Self {
        let gpus = parse_gpus(include_str!("../data/gpus.toml"), "gpus.toml")
            .expect("built-in gpus.toml is valid (unit-tested)");
        let instances = parse_instances(include_str!("../data/instances.csv"), "instances.csv")
            .expect("built-in instances.csv is valid (unit-tested)");
        Self::new(gpus, instances)
    }

    /// Resolve a printed name or canonical name; `None` when unknown (never a guess).
    #[must_use]
    pub fn resolve(&self, name: &str) -> Option<&GpuSpec> {
        self.names.get(&normalize(name)).map(|i| &self.gpus[*i])
    }

    /// The GPUs a name a person typed means: an exact name or alias, a family (`A100`), or the
    /// GPUs whose name or an alias contains every word typed (`a100-80gb`, `h100-sxm`,
    /// `rtx4090`), case-insensitively. A miss is an error with the nearest names.
    pub fn lookup(&self, typed: &str) -> Result<Vec<&GpuSpec>, String> {
        let fam = self.family(typed);
        if !fam.is_empty() {
            return Ok(fam);
        }
        let compact = |s: &str| -> String {
            crate::gpu::normalize(s)
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect()
        };
        let words: Vec<String> = crate::gpu::normalize(typed)
            .split_whitespace()
            .map(compact)
            .filter(|w| !w.is_empty())
            .collect();
        if !words.is_empty() {
            let hits: Vec<&GpuSpec> = self
                .gpus
                .iter()
                .filter(|g| {
                    std::iter::once(&g.name).chain(g.aliases.iter()).any(|n| {
                        let c = compact(n);
                        words.iter().all(|w| c.contains(w.as_str()))
                    })
                })
                .collect();
            if !hits.is_empty() {
                return Ok(hits);
            }
        }
        let shown = nearest_names(typed, self.gpus.iter().map(|g| g.name.as_str()));
        Err(format!(
            "`{typed}` is not a GPU in the catalog; did you mean {}?",
            shown.join(", ")
        ))
    }

    /// Check a cloud and region a user named against the catalog: an unknown one is an error
    /// that lists the valid ones (never a silent fallback to another place).
    pub fn check_place(&self, cloud: Option<&str>, region: Option<&str>) -> Result<(), ValueError> {
        let clouds: std::collections::BTreeSet<&str> =
            self.instances.iter().map(|i| i.cloud.as_str()).collect();
        if let Some(c) = cloud
            && !clouds.contains(c)
        {
            return Err(ValueError::UnknownCloud {
                cloud: c.to_owned(),
                known: clouds.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
        if let Some(r) = region {
            let regions: std::collections::BTreeSet<&str> = self
                .instances
                .iter()
                .filter(|i| cloud.is_none_or(|c| c == i.cloud))
                .map(|i| i.region.as_str())
                .collect();
            if !regions.contains(r) {
                return Err(ValueError::UnknownRegion {
                    region: r.to_owned(),
                    of: cloud.map_or(String::new(), |c| format!(" of {c}")),
                    known: regions.into_iter().collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(())
    }

    /// Every GPU whose canonical name starts with `prefix` after [`normalize`] (`H100` → the
    /// SXM, PCIe and NVL entries), or the one GPU `prefix` names exactly.
    #[must_use]
    pub fn family(&self, prefix: &str) -> Vec<&GpuSpec> {
        if let Some(g) = self.resolve(prefix) {
            return vec![g];
        }
        let w = normalize(prefix);
        if w.is_empty() {
            return Vec::new();
        }
        self.gpus
            .iter()
            .filter(|g| {
                let n = normalize(&g.name);
                n == w || n.starts_with(&format!("{w} "))
            })
            .collect()
    }

    /// One GPU for a name that may be a family (`A100`): the exact entry, else the family's
    /// SXM form factor with the most memory (the data-centre flagship), else its member with
    /// the most memory. The second value says what was assumed, when anything was.
    #[must_use]
    pub fn resolve_loose(&self, name: &str) -> Option<(&GpuSpec, Option<String>)> {
        if let Some(g) = self.resolve(name) {
            return Some((g, None));
        }
        let members = self.family(name);
        let pick = members.iter().copied().max_by(|a, b| {
            let sxm = |g: &GpuSpec| g.name.contains("SXM");
            sxm(a)
                .cmp(&sxm(b))
                .then(a.memory_gb.total_cmp(&b.memory_gb))
                .then_with(|| b.name.cmp(&a.name))
        })?;
        let note = (members.len() > 1).then(|| {
            format!(
                "`{name}` names {} GPUs; assumed {} (the SXM form factor with the most memory)",
                members.len(),
                pick.name
            )
        });
        Some((pick, note))
    }

    /// Apply an overlay: negotiated prices replace (or add) instance prices; confirmations
    /// clear suspect flags; clusters become `onprem` instances priced by their TCO.
    pub fn apply(&mut self, overlay: &Overlay, origin: &str) -> Result<(), CatalogError> {
        let err = |message: String| CatalogError::Overlay {
            origin: origin.to_owned(),
            message,
        };
        // GPUs first: the prices and clusters below may name them.
        for g in &overlay.gpus {
            self.add_gpu(g).map_err(err)?;
        }
        for p in &overlay.prices {
            self.apply_price(p, origin).map_err(err)?;
        }
        for c in &overlay.confirms {
            self.apply_confirm(c).map_err(err)?;
        }
        for c in &overlay.clusters {
            self.apply_cluster(c, origin).map_err(err)?;
        }
        Ok(())
    }

    /// A GPU of the user's own: a name (and aliases) the catalog does not know, and figures a
    /// datasheet could hold (memory, bandwidth, dense TFLOPS, power: finite and positive).
    fn add_gpu(&mut self, g: &GpuSpec) -> Result<(), String> {
        for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
            if let Some(known) = self.resolve(n) {
                return Err(format!(
                    "gpu `{}`: `{n}` is the catalog's `{}` already; give your card a name of its own",
                    g.name, known.name
                ));
            }
        }
        let bad = |what: &str, v: f64, most: f64| -> Result<(), String> {
            if v.is_finite() && v > 0.0 && v <= most {
                Ok(())
            } else {
                Err(format!(
                    "gpu `{}`: `{what}` {v} is not a figure a GPU has (above 0, at most {most})",
                    g.name
                ))
            }
        };
        bad("memory_gb", g.memory_gb, 10_000.0)?;
        let t = &g.dense_tflops;
        let figures = [
            ("memory_bandwidth_gb_s", g.memory_bandwidth_gb_s, 1e6),
            ("tdp_w", g.tdp_w, 1e5),
            ("interconnect_gb_s", g.interconnect_gb_s, 1e6),
            ("dense_tflops.fp32", t.fp32, 1e6),
            ("dense_tflops.tf32", t.tf32, 1e6),
            ("dense_tflops.fp16", t.fp16, 1e6),
            ("dense_tflops.bf16", t.bf16, 1e6),
            ("dense_tflops.fp8", t.fp8, 1e6),
            ("dense_tflops.int8", t.int8, 1e6),
        ];
        for (what, v, most) in figures {
            if let Some(v) = v {
                bad(what, v, most)?;
            }
        }
        let i = self.gpus.len();
        self.gpus.push(g.clone());
        for n in std::iter::once(&g.name).chain(g.aliases.iter()) {
            self.names.insert(normalize(n), i);
        }
        Ok(())
    }

    /// A negotiated price: on the catalog rows it names, or a row of its own.
    fn apply_price(&mut self, p: &NegotiatedPrice, origin: &str) -> Result<(), String> {
        let pricing = Pricing::parse(&p.pricing)
            .map_err(|e| format!("price for `{}`: {e}", p.instance_type))?;
        let per_gpu = self
            .instances
            .iter()
            .find(|i| i.cloud == p.cloud && i.instance_type == p.instance_type)
            .map(|i| i.gpu_count)
            .or(p.gpu_count)
            .filter(|n| *n > 0.0)
            .unwrap_or(1.0);
        check_gpu_hour_price(p.usd_per_hour / per_gpu)
            .map_err(|m| format!("price for `{}`: `usd_per_hour`: {m}", p.instance_type))?;
        let source = format!(
            "{origin} (negotiated{})",
            p.note
                .as_deref()
                .map_or(String::new(), |n| format!(": {n}"))
        );
        let mut hit = false;
        for i in &mut self.instances {
            if i.cloud == p.cloud
                && i.instance_type == p.instance_type
                && p.region.as_ref().is_none_or(|r| *r == i.region)
            {
                hit = true;
                let slot = match pricing {
                    Pricing::OnDemand => &mut i.on_demand_usd_per_hour,
                    Pricing::Spot => &mut i.spot_usd_per_hour,
                    Pricing::Commit1y => &mut i.commit_1y_usd_per_hour,
                    Pricing::Commit3y => &mut i.commit_3y_usd_per_hour,
                };
                *slot = Some(p.usd_per_hour);
                i.suspect.retain(|x| x.pricing != pricing);
                i.as_of.clone_from(&p.as_of);
                i.source.clone_from(&source);
            }
        }
        if !hit {
            let (Some(gpu), Some(count), Some(region)) = (&p.gpu, p.gpu_count, &p.region) else {
                return Err(format!(
                    "`{}` `{}` is not in the catalog: give `gpu`, `gpu_count` and `region` to add it",
                    p.cloud, p.instance_type
                ));
            };
            let spec = self
                .resolve(gpu)
                .ok_or_else(|| format!("unknown GPU `{gpu}`"))?;
            let mut row = Instance {
                cloud: p.cloud.clone(),
                instance_type: p.instance_type.clone(),
                region: region.clone(),
                gpu: spec.name.clone(),
                gpu_count: count,
                vcpus: None,
                memory_gib: None,
                on_demand_usd_per_hour: None,
                spot_usd_per_hour: None,
                commit_1y_usd_per_hour: None,
                commit_3y_usd_per_hour: None,
                as_of: p.as_of.clone(),
                source,
                suspect: Vec::new(),
            };
            match pricing {
                Pricing::OnDemand => row.on_demand_usd_per_hour = Some(p.usd_per_hour),
                Pricing::Spot => row.spot_usd_per_hour = Some(p.usd_per_hour),
                Pricing::Commit1y => row.commit_1y_usd_per_hour = Some(p.usd_per_hour),
                Pricing::Commit3y => row.commit_3y_usd_per_hour = Some(p.usd_per_hour),
            }
            self.instances.push(row);
        }

        Ok(())
    }

    /// A suspect price confirmed as real: quoted again.
    fn apply_confirm(&mut self, c: &Confirm) -> Result<(), String> {
        let pricing = c
            .pricing
            .as_deref()
            .map(Pricing::parse)
            .transpose()
            .map_err(|e| format!("confirm for `{}`: {e}", c.instance_type))?;
        let mut hit = false;
        for i in &mut self.instances {
            if i.cloud == c.cloud
                && i.instance_type == c.instance_type
                && c.region.as_ref().is_none_or(|r| *r == i.region)
            {
                hit = true;
                i.suspect
                    .retain(|x| pricing.is_some_and(|p| p != x.pricing));
            }
        }
        if !hit {
            return Err(format!(
                "confirm: `{}` `{}`{} is not in the catalog",
                c.cloud,
                c.instance_type,
                c.region
                    .as_deref()
                    .map_or(String::new(), |r| format!(" in {r}"))
            ));
        }

        Ok(())
    }

    /// A private cluster: an `onprem` instance at its TCO per GPU-hour.
    fn apply_cluster(&mut self, c: &Cluster, origin: &str) -> Result<(), String> {
        let spec = self
            .resolve(&c.gpu)
            .ok_or_else(|| format!("cluster `{}`: unknown GPU `{}`", c.name, c.gpu))?
            .clone();
        if c.gpus == 0
            || c.amortization_years <= 0.0
            || c.pue < 1.0
            || c.usd_per_kwh < 0.0
            || c.purchase_usd < 0.0
        {
            return Err(format!(
                "cluster `{}`: needs gpus ≥ 1, amortization_years > 0, pue ≥ 1, usd_per_kwh ≥ 0, purchase_usd ≥ 0",
                c.name
            ));
        }
        let (cost, formula) = c.gpu_hour_cost(spec.tdp_w).ok_or_else(|| {
            format!(
                "cluster `{}`: `{}` has no TDP in the catalog: give `power_w_per_gpu`",
                c.name, spec.name
            )
        })?;
        // A cluster whose figures come to nothing (no purchase price, free power, no opex) has
        // no price: never a $0 GPU-hour.
        let cost = check_gpu_hour_price(cost).map_err(|e| {
            format!(
                "cluster `{}`: its total cost of ownership per GPU-hour is not a price ({e}); give its purchase_usd, power and opex",
                c.name
            )
        })?;
        self.instances.push(Instance {
            cloud: "onprem".into(),
            instance_type: c.name.clone(),
            region: "onprem".into(),
            gpu: spec.name.clone(),
            gpu_count: 1.0,
            vcpus: None,
            memory_gib: None,
            on_demand_usd_per_hour: Some(cost),
            spot_usd_per_hour: None,
            commit_1y_usd_per_hour: None,
            commit_3y_usd_per_hour: None,
            as_of: c.as_of.clone(),
            source: format!("{origin} cluster `{}`: {formula}", c.name),
            suspect: Vec::new(),
        });

        Ok(())
    }

    fn cheapest<'a>(
        &'a self,
        gpu: &str,
        cloud: &str,
        region: Option<&str>,
        pricing: Pricing,
    ) -> Option<(&'a Instance, f64)> {
        self.instances
            .iter()
            .filter(|i| {
                i.gpu == gpu
                    && i.cloud == cloud
                    && region.is_none_or(|r| r.is_empty() || i.region == r)
            })
            .filter_map(|i| i.per_gpu(pricing).map(|p| (i, p)))
            .min_by(|a, b| {
                a.1.total_cmp(&b.1)
                    .then_with(|| a.0.instance_type.cmp(&b.0.instance_type))
                    .then_with(|| a.0.region.cmp(&b.0.region))
            })
    }

    /// The price of one GPU-hour, with a documented fallback chain:
    ///
    /// 1. the asked cloud and region, cheapest instance per GPU-hour;
    /// 2. the asked cloud, cheapest region;
    /// 3. when the asked pricing (spot, 1y, 3y) is not published by that cloud: steps 1–2 with
    ///    its on-demand price (said in the quote's `note`);
    /// 4. no cloud asked, or the asked cloud does not offer the GPU: each of
    ///    [`REFERENCE_CLOUDS`] in order (an on-prem cluster from the overlay first), at its
    ///    reference region, then its cheapest region; asked pricing first, then on-demand.
    #[must_use]
    pub fn gpu_hour_price(&self, q: &PriceQuery<'_>) -> Option<Quote> {
        let mut pricings = vec![q.pricing];
        if q.pricing != Pricing::OnDemand {
            pricings.push(Pricing::OnDemand);
        }
        let fell_back = |mut quote: Quote| {
            if quote.pricing != q.pricing {
                let note = format!(
                    "no {} price published for {} on {}; on-demand used",
                    q.pricing, q.gpu, quote.cloud
                );
                quote.note = Some(match quote.note.take() {
                    Some(n) => format!("{note}; {n}"),
                    None => note,
                });
            }
            quote
        };
        if let Some(cloud) = q.cloud {
            for &pricing in &pricings {
                if let Some(quote) = self.in_cloud(q, cloud, pricing) {
                    return Some(fell_back(quote));
                }
            }
        }
        for &pricing in &pricings {
            for (cloud, region) in REFERENCE_CLOUDS {
                let hit = self
                    .cheapest(q.gpu, cloud, Some(region), pricing)
                    .or_else(|| self.cheapest(q.gpu, cloud, None, pricing));
                if let Some(hit) = hit {
                    let note = q
                        .cloud
                        .map(|c| format!("{} not offered on {c}; reference cloud used", q.gpu));
                    return Some(fell_back(Self::quote(
                        hit,
                        pricing,
                        Step::ReferenceCloud,
                        note,
                    )));
                }
            }
        }
        None
    }

    fn quote(
        (i, p): (&Instance, f64),
        pricing: Pricing,
        step: Step,
        note: Option<String>,
    ) -> Quote {
        Quote {
            usd_per_gpu_hour: p,
            cloud: i.cloud.clone(),
            instance_type: i.instance_type.clone(),
            region: i.region.clone(),
            gpu_count: i.gpu_count,
            pricing,
            as_of: i.as_of.clone(),
            source: i.source.clone(),
            step,
            note,
        }
    }

    fn in_cloud(&self, q: &PriceQuery<'_>, cloud: &str, pricing: Pricing) -> Option<Quote> {
        if let Some(region) = q.region
            && let Some(hit) = self.cheapest(q.gpu, cloud, Some(region), pricing)
        {
            return Some(Self::quote(hit, pricing, Step::CloudRegion, None));
        }
        let hit = self.cheapest(q.gpu, cloud, None, pricing)?;
        let note = q
            .region
            .map(|r| format!("not offered in {r}; cheapest {cloud} region used"));
        Some(Self::quote(hit, pricing, Step::CloudAnyRegion, note))
    }

    /// For `catalog price`: per cloud and pricing model, the cheapest instance per GPU-hour.
    #[must_use]
    pub fn cheapest_options(
        &self,
        gpu: &str,
        pricing: Option<Pricing>,
    ) -> Vec<(Pricing, &Instance, f64)> {
        self.cheapest_options_with(gpu, pricing, 0.0)
    }

    /// How to rent `gpus` GPUs of `gpu` as whole instances, the cheapest per cloud and pricing
    /// model: the instance, how many of them, and the $ per hour of all of them. A cloud rents
    /// machines, not fractions of them: one GPU on an 8-GPU-only type costs the whole machine.
    /// `one_machine`: the GPUs must share a machine (tensor or pipeline parallelism).
    #[must_use]
    pub fn rentals(
        &self,
        gpu: &str,
        pricing: Option<Pricing>,
        gpus: u32,
        one_machine: bool,
    ) -> Vec<Rental<'_>> {
        self.rentals_where(gpu, pricing, gpus, one_machine, |_, _| true)
    }

    /// [`Self::rentals`] among the instances `keep` accepts for that many machines (a job
    /// spread over machines needs a known network between them).
    #[must_use]
    pub fn rentals_where(
        &self,
        gpu: &str,
        pricing: Option<Pricing>,
        gpus: u32,
        one_machine: bool,
        keep: impl Fn(&Instance, u32) -> bool,
    ) -> Vec<Rental<'_>> {
        let want = f64::from(gpus.max(1));
        let mut best: BTreeMap<(String, Pricing), Rental<'_>> = BTreeMap::new();
        for i in self
            .instances
            .iter()
            .filter(|i| i.gpu == gpu && i.gpu_count >= 1.0)
        {
            if one_machine && i.gpu_count < want {
                continue;
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let machines = (want / i.gpu_count).ceil().max(1.0) as u32;
            if !keep(i, machines) {
                continue;
            }
            for p in Pricing::ALL {
                if pricing.is_some_and(|w| w != p) {
                    continue;
                }
                let Some(per_machine) = i.price(p) else {
                    continue;
                };
                let r = Rental {
                    pricing: p,
                    instance: i,
                    machines,
                    usd_per_hour: per_machine * f64::from(machines),
                };
                let e = best.entry((i.cloud.clone(), p)).or_insert(r);
                if r.usd_per_hour < e.usd_per_hour {
                    *e = r;
                }
            }
        }
        let mut out: Vec<Rental<'_>> = best.into_values().collect();
        out.sort_by(|a, b| {
            a.usd_per_hour
                .total_cmp(&b.usd_per_hour)
                .then_with(|| a.instance.cloud.cmp(&b.instance.cloud))
        });
        out
    }

    /// [`Self::cheapest_options`] among instances with at least `min_gpus` GPUs (a job split
    /// by tensor parallelism needs its GPUs in one machine).
    #[must_use]
    pub fn cheapest_options_with(
        &self,
        gpu: &str,
        pricing: Option<Pricing>,
        min_gpus: f64,
    ) -> Vec<(Pricing, &Instance, f64)> {
        let mut best: BTreeMap<(String, Pricing), (&Instance, f64)> = BTreeMap::new();
        for i in self
            .instances
            .iter()
            .filter(|i| i.gpu == gpu && i.gpu_count >= min_gpus)
        {
            for p in Pricing::ALL {
                if pricing.is_some_and(|want| want != p) {
                    continue;
                }
                if let Some(v) = i.per_gpu(p) {
                    let e = best.entry((i.cloud.clone(), p)).or_insert((i, v));
                    if v < e.1 {
                        *e = (i, v);
                    }
                }
            }
        }
        let mut out: Vec<(Pricing, &Instance, f64)> =
            best.into_iter().map(|((_, p), (i, v))| (p, i, v)).collect();
        out.sort_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.1.cloud.cmp(&b.1.cloud)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Did you mean" finds what was meant: a letter O for a zero, a dropped letter, a family
    /// without its variant (`--gpu H1OO` suggested A10s; `--model lama-3-8b` listed all 25).
    #[test]
    fn nearest_names_find_what_was_meant() {
        let gpus = [
            "A10",
            "A10G",
            "A100-SXM4-80GB",
            "H100-SXM5-80GB",
            "H100-PCIE-80GB",
            "L4",
        ];
        assert_eq!(
            nearest_names("H1OO", gpus),
            vec!["H100-PCIE-80GB", "H100-SXM5-80GB"]
        );
        assert_eq!(nearest_names("A1OO", gpus), vec!["A100-SXM4-80GB"]);
        assert_eq!(
            nearest_names("lama-3-8b", ["llama-3-8b", "llama-3-70b", "mistral-7b"]),
            vec!["llama-3-8b"]
        );
        assert_eq!(nearest_names("zzzzzzzz", ["a", "b", "c", "d"]).len(), 3);
    }

    #[test]
    fn builtin_parses_and_names_are_unique() {
        let c = Catalog::builtin();
        assert!(c.gpus.len() >= 20);
        assert!(c.instances.len() > 500);
        for i in &c.instances {
            assert!(
                c.resolve(&i.gpu).is_some_and(|g| g.name == i.gpu),
                "{} names a catalog GPU",
                i.gpu
            );
            assert!(
                i.on_demand_usd_per_hour.is_some() || i.spot_usd_per_hour.is_some(),
                "{} has a price",
                i.instance_type
            );
        }
    }

    #[test]
    fn famous_wrong_numbers_are_not_in_the_catalog() {
        let c = Catalog::builtin();
        let a100 = c.resolve("NVIDIA A100-SXM4-80GB").expect("A100");
        assert_eq!(
            a100.dense_tflops.fp32,
            Some(19.5),
            "312 is dense BF16, not FP32"
        );
        assert_eq!(a100.dense_tflops.bf16, Some(312.0));
        let h100 = c.resolve("NVIDIA H100 80GB HBM3").expect("H100");
        assert_eq!(
            h100.dense_tflops.bf16,
            Some(989.4),
            "dense, not the 1979 sparse figure"
        );
        assert_eq!(h100.dense_tflops.fp32, Some(67.0));
        assert_eq!(c.resolve("NVIDIA A10G").expect("A10G").memory_gb, 24.0);
        // The A10G's tensor figures are the A10's, stated as an upper bound.
        let (a10, a10g) = (
            c.resolve("A10").expect("A10"),
            c.resolve("A10G").expect("A10G"),
        );
        assert_eq!(a10g.dense_tflops.bf16, a10.dense_tflops.bf16);
        assert_eq!(a10g.dense_tflops.int8, a10.dense_tflops.int8);
        assert!(
            a10g.compute_note
                .as_deref()
                .is_some_and(|n| n.contains("upper bound"))
        );
        assert!(a10.compute_note.is_none());
        assert!(
            c.instances
                .iter()
                .filter(|i| i.cloud == "aws" && i.instance_type.starts_with("p3"))
                .all(|i| i.gpu.starts_with("V100"))
        );
    }

    #[test]
    fn fallback_chain() {
        let c = Catalog::builtin();
        let q = |cloud, region, pricing| {
            c.gpu_hour_price(&PriceQuery {
                gpu: "T4",
                cloud,
                region,
                pricing,
            })
            .expect("quote")
        };
        let a = q(Some("aws"), Some("us-east-1"), Pricing::OnDemand);
        assert_eq!(
            (a.instance_type.as_str(), a.step),
            ("g4dn.xlarge", Step::CloudRegion)
        );
        assert!((a.usd_per_gpu_hour - 0.526).abs() < 1e-9);
        let b = q(Some("aws"), Some("mars-1"), Pricing::OnDemand);
        assert_eq!(b.step, Step::CloudAnyRegion);
        assert!(b.note.is_some_and(|n| n.contains("mars-1")));
        let r = q(None, None, Pricing::OnDemand);
        assert_eq!(
            (r.cloud.as_str(), r.region.as_str(), r.step),
            ("aws", "us-east-1", Step::ReferenceCloud)
        );
        let s = q(Some("aws"), Some("us-east-1"), Pricing::Spot);
        assert!(
            s.note.is_some_and(|n| n.contains("no spot price")),
            "the AWS snapshot publishes no spot prices"
        );
        assert_eq!(s.pricing, Pricing::OnDemand);
        let g = q(Some("gcp"), None, Pricing::Spot);
        assert_eq!((g.cloud.as_str(), g.pricing), ("gcp", Pricing::Spot));
        let m = c
            .gpu_hour_price(&PriceQuery {
                gpu: "MI300X",
                cloud: Some("aws"),
                region: None,
                pricing: Pricing::OnDemand,
            })
            .expect("quote");
        assert_eq!((m.cloud.as_str(), m.step), ("azure", Step::ReferenceCloud));
        assert!(m.note.is_some_and(|n| n.contains("not offered on aws")));
    }

    /// A card the catalog lacks, added by an overlay and priced by a cluster of it; a name the
    /// catalog knows, or a figure no GPU has, is refused with the card's name.
    #[test]
    fn overlay_gpus_of_your_own() {
        let card = |name: &str, memory: &str| {
            format!(
                r#"
                [[gpu]]
                name = "{name}"
                aliases = ["Lab Card 48"]
                vendor = "Lab"
                architecture = "Ada"
                memory_gb = {memory}
                memory_bandwidth_gb_s = 960
                dense_tflops = {{ bf16 = 180.0, fp16 = 180.0, fp8 = 360.0 }}
                tdp_w = 300
                source = "our datasheet"
                as_of = "2026-11-27"
                [[cluster]]
                name = "lab"
                gpu = "{name}"
                gpus = 8
                purchase_usd = 280_320.0
                amortization_years = 4
                usd_per_kwh = 0.10
                pue = 1.0
                as_of = "2026-11-27"
                "#
            )
        };
        let mut c = Catalog::builtin();
        let known = c.gpus.len();
        let o = Overlay::parse(&card("LAB-CARD-48GB", "48"), "lab.toml").expect("valid");
        c.apply(&o, "lab.toml").expect("applies");
        assert_eq!(c.gpus.len(), known + 1);
        let g = c.resolve("lab card 48").expect("by its alias");
        assert_eq!(g.name, "LAB-CARD-48GB");
        assert_eq!(g.dense_tflops.bf16, Some(180.0));
        // 280,320 / (4 × 8760 × 8) = 1.0, plus 300 W × 1.0 × 0.10 $/kWh = 0.03.
        let q = c
            .gpu_hour_price(&PriceQuery {
                gpu: "LAB-CARD-48GB",
                cloud: None,
                region: None,
                pricing: Pricing::OnDemand,
            })
            .expect("priced by its cluster");
        assert!((q.usd_per_gpu_hour - 1.03).abs() < 1e-9, "{q:?}");
        for (name, memory, says) in [
            (
                "A100-SXM4-80GB",
                "48",
                "is the catalog's `A100-SXM4-80GB` already",
            ),
            (
                "LAB-CARD-0GB",
                "0",
                "`memory_gb` 0 is not a figure a GPU has",
            ),
            (
                "LAB-CARD-NAN",
                "nan",
                "`memory_gb` NaN is not a figure a GPU has",
            ),
        ] {
            let mut c = Catalog::builtin();
            let o = Overlay::parse(&card(name, memory), "lab.toml").expect("parses");
            let e = c.apply(&o, "lab.toml").expect_err(name).to_string();
            assert!(e.contains(says) && e.contains("lab.toml"), "{e}");
        }
    }

    #[test]
    fn overlay_negotiated_prices_and_onprem_tco() {
        let mut c = Catalog::builtin();
        let o = Overlay::parse(
            r#"
            [[price]]
            cloud = "aws"
            instance_type = "p4d.24xlarge"
            region = "us-east-1"
            pricing = "1y"
            usd_per_hour = 12.0
            as_of = "2026-10-01"
            note = "EDP"
            [[cluster]]
            name = "dc1"
            gpu = "A100-SXM4-80GB"
            gpus = 64
            purchase_usd = 2_242_560.0
            amortization_years = 4
            usd_per_kwh = 0.10
            pue = 1.5
            as_of = "2026-11-01"
            "#,
            "overlay.toml",
        )
        .expect("valid");
        c.apply(&o, "overlay.toml").expect("applies");
        let q = c
            .gpu_hour_price(&PriceQuery {
                gpu: "A100-SXM4-40GB",
                cloud: Some("aws"),
                region: Some("us-east-1"),
                pricing: Pricing::Commit1y,
            })
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 1.5).abs() < 1e-12);
        assert!(q.source.contains("negotiated: EDP"));
        // 2,242,560 / (4 × 8760 × 64) = 1.0; 400 W × 1.5 × 0.10 $/kWh = 0.06.
        let p = c
            .gpu_hour_price(&PriceQuery {
                gpu: "A100-SXM4-80GB",
                cloud: None,
                region: None,
                pricing: Pricing::OnDemand,
            })
            .expect("quote");
        assert_eq!(p.cloud, "onprem");
        assert!(
            (p.usd_per_gpu_hour - 1.06).abs() < 1e-9,
            "{}",
            p.usd_per_gpu_hour
        );
        assert!(p.source.contains("TCO"));
    }

    #[test]
    fn instance_rows_round_trip_with_commas_and_quotes() {
        let c = Catalog::builtin();
        let mut row = c.instances[0].clone();
        row.source = "vendor sheet, \"Q3\" edition\nline two".into();
        row.region = "Denmark, DK".into();
        let text = format!("{INSTANCES_HEADER}\n{}\n", row.to_csv());
        let back = parse_instances(&text, "t.csv").expect("parses");
        assert_eq!(back, vec![row]);
        // An unquoted row keeps the plain form the built-in file has.
        let plain = c.instances[1].to_csv();
        assert!(!plain.contains('"'), "{plain}");
        // A row with a field too many names its line.
        let bad = format!(
            "{INSTANCES_HEADER}\n# note\n{},x\n",
            c.instances[1].to_csv()
        );
        let e = parse_instances(&bad, "t.csv")
            .expect_err("15 fields")
            .to_string();
        assert!(
            e.contains("line 3") && e.contains("expected 14 fields"),
            "{e}"
        );
    }

    #[test]
    fn network_figures_name_multi_gpu_instances_with_a_source() {
        let c = Catalog::builtin();
        let text = include_str!("../data/network.csv");
        let mut rows = 0;
        for line in text.lines().skip(1) {
            let mut f = line.splitn(3, ',');
            let (cloud, ty) = (f.next().expect("cloud"), f.next().expect("type"));
            let n = network(cloud, ty).expect("parses");
            assert!(
                n.gbps >= 10.0 && !n.source.is_empty() && n.as_of.len() == 10,
                "{line}"
            );
            assert!(
                c.instances
                    .iter()
                    .any(|i| i.cloud == cloud && i.instance_type == ty && i.gpu_count >= 4.0),
                "{cloud} {ty} is a multi-GPU instance of the catalog"
            );
            rows += 1;
        }
        assert!(rows >= 8);
        assert_eq!(network("aws", "g5.xlarge"), None, "no figure is a guess");
    }

    #[test]
    fn rentals_are_whole_machines_and_the_cheapest_per_cloud() {
        let c = Catalog::builtin();
        for gpu in ["H100-SXM5-80GB", "MI300X", "A100-SXM4-80GB", "L4"] {
            for (n, one) in [(1, false), (3, false), (4, true), (8, true)] {
                for r in c.rentals(gpu, Some(Pricing::OnDemand), n, one) {
                    let i = r.instance;
                    assert_eq!(i.gpu, gpu);
                    assert!(f64::from(r.machines) * i.gpu_count >= f64::from(n));
                    // No fewer machines would hold the GPUs.
                    assert!(f64::from(r.machines - 1) * i.gpu_count < f64::from(n));
                    if one {
                        assert_eq!(r.machines, 1, "{gpu} ×{n} on one machine");
                    }
                    let price = i.price(Pricing::OnDemand).expect("priced");
                    assert!((r.usd_per_hour - price * f64::from(r.machines)).abs() < 1e-9);
                    // Nothing in the same cloud rents them for less.
                    for j in c
                        .instances
                        .iter()
                        .filter(|j| j.gpu == gpu && j.cloud == i.cloud)
                    {
                        if one && j.gpu_count < f64::from(n) {
                            continue;
                        }
                        let Some(p) = j.price(Pricing::OnDemand) else {
                            continue;
                        };
                        let m = (f64::from(n) / j.gpu_count).ceil().max(1.0);
                        assert!(
                            p * m >= r.usd_per_hour - 1e-9,
                            "{} beats {}",
                            j.instance_type,
                            i.instance_type
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_cluster_that_costs_nothing_has_no_price() {
        let mut c = Catalog::builtin();
        let o = Overlay::parse(
            r#"
            [[cluster]]
            name = "donated"
            gpu = "A100-SXM4-80GB"
            gpus = 8
            purchase_usd = 0.0
            amortization_years = 4
            usd_per_kwh = 0.0
            pue = 1.0
            as_of = "2026-11-01"
            "#,
            "overlay.toml",
        )
        .expect("valid");
        let err = c
            .apply(&o, "overlay.toml")
            .expect_err("no $0 GPU-hour")
            .to_string();
        assert!(err.contains("cluster `donated`"), "{err}");
        assert!(c.instances.iter().all(|i| i.cloud != "onprem"));
    }

    #[test]
    fn bad_catalog_files_say_what_is_wrong() {
        for (text, needle) in [
            ("", "empty file"),
            ("cloud,gpu\n", "expected the header"),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,1\n") as &str,
                "line 2: expected 14 fields, found 5",
            ),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,one,,,1,,,,2026-01-01,s,\n"),
                "`gpu_count` is not a number: `one`",
            ),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,1,,,-3,,,,2026-01-01,s,\n"),
                "non-negative",
            ),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,1,,,0,,,,2026-01-01,s,\n"),
                "above zero",
            ),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,1,,,1e308,,,,2026-01-01,s,\n"),
                "more than any GPU rents for",
            ),
            (
                &format!("{INSTANCES_HEADER}\naws,x,r,T4,1,,,1,,,,2026-01-01,s,cheap\n"),
                "is not PRICING:REASON",
            ),
        ] {
            let e = parse_instances(text, "i.csv").expect_err(text).to_string();
            assert!(e.contains(needle), "{e}");
        }
        let e = parse_gpus("[[gpu]]\nname = \"X\"\n", "g.toml")
            .expect_err("missing fields")
            .to_string();
        assert!(e.contains("missing field"), "{e}");
        let dup = "[[gpu]]\nname=\"A\"\naliases=[\"T4\"]\nvendor=\"v\"\narchitecture=\"a\"\nmemory_gb=1\nsource=\"s\"\nas_of=\"d\"\n[[gpu]]\nname=\"T4\"\nvendor=\"v\"\narchitecture=\"a\"\nmemory_gb=1\nsource=\"s\"\nas_of=\"d\"\n";
        assert!(
            parse_gpus(dup, "g.toml")
                .expect_err("dup")
                .to_string()
                .contains("is also a name of")
        );
        let e = Overlay::parse("[[price]]\ncloud = 1", "o.toml")
            .expect_err("bad")
            .to_string();
        assert!(e.contains("o.toml"), "{e}");
        let mut c = Catalog::builtin();
        let o = Overlay::parse("[[price]]\ncloud=\"aws\"\ninstance_type=\"zz.huge\"\npricing=\"spot\"\nusd_per_hour=1\nas_of=\"2026-01-01\"\n", "o.toml").expect("parses");
        assert!(
            c.apply(&o, "o.toml")
                .expect_err("not in catalog")
                .to_string()
                .contains("is not in the catalog")
        );
    }
}
