//! # gpuwise-catalog-import: the catalog's instance table from public price catalogs
//!
//! An edge of its own (it reads files; the catalog stays pure), used by `gpuwise catalog
//! import`. Importers that build the catalog's instance table from public price catalogs:
//! SkyPilot-format catalogs (one folder per cloud with a `vms.csv`) and the AWS GPU table
//! derived from instances.vantage.sh.
//!
//! Quirks handled, each counted in the import summary:
//! - columns are found by header name (the clouds' files order them differently);
//! - `GpuInfo` is a Python literal (`{'Gpus': [{'Name': 'A100', 'MemoryInfo': {'SizeInMiB':
//!   40960}}]}`), parsed by `python_literal` (a small Python-literal reader); a memory size below 1024 is taken as GB;
//! - GCP lists a GPU VM as a host row (no accelerator) plus accelerator rows (no instance
//!   type) per zone: a2/a3/a4/g2 hosts are joined with the accelerator row of their family and
//!   count in the same zone (a2-highgpu-1g = host + 1 × A100); attachable GPUs (T4, V100, …)
//!   become `gpu-only` rows, priced without their host VM;
//! - sentinel prices (`0.0`, `700.0`) are not prices;
//! - GPU names are mapped to catalog GPUs with the form factor and memory the instance
//!   implies (Azure NC H100 v5 is H100 NVL; `pcie` in a name is PCIe; else SXM);
//!   accelerators outside the catalog are skipped and counted;
//! - AWS prints `gpu_memory` as a total for some types (p4d: `320 GB` for 8 GPUs) and per GPU
//!   for others (g5.12xlarge: `24 GB` for 4): the per-GPU size is whichever the GPU model has;
//! - duplicate rows and zones of one region collapse into one row per (cloud, instance,
//!   region) with the lowest price of each kind.

use std::collections::BTreeMap;
use std::path::Path;

use gpuwise_catalog::{Catalog, Instance, Pricing};

/// Why a catalog cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Cannot open or read a file.
    #[error("cannot read `{}`", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file that is not the catalog it should be.
    #[error("`{file}`: {message}")]
    Format {
        /// The file.
        file: String,
        /// What is wrong, and how to fix it.
        message: String,
    },
}

/// What an import read and kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSummary {
    /// File read.
    pub file: String,
    /// Cloud.
    pub cloud: String,
    /// Data rows read.
    pub rows: u64,
    /// Instance rows produced (before collapsing zones and duplicates).
    pub kept: u64,
    /// Rows skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Quirks fixed in kept rows, by kind.
    pub notes: BTreeMap<String, u64>,
}

impl FileSummary {
    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.to_owned()).or_default() += 1;
    }

    fn note(&mut self, what: &str) {
        *self.notes.entry(what.to_owned()).or_default() += 1;
    }
}

/// A Python literal value (the subset catalogs use).
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    /// `{...}`
    Dict(Vec<(String, PyValue)>),
    /// `[...]`
    List(Vec<PyValue>),
    /// `'...'` or `"..."`
    Str(String),
    /// A number.
    Num(f64),
    /// `True`, `False`, `None`.
    Other,
}

impl PyValue {
    fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Parse a Python literal (dicts, lists, strings, numbers, `True`/`False`/`None`).
///
/// Written by hand: no maintained Rust crate parses Python literals, and the subset is tiny.
fn python_literal(s: &str) -> Result<PyValue, String> {
    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    fn value(b: &[u8], i: &mut usize, depth: usize) -> Result<PyValue, String> {
        if depth > 32 {
            return Err("nested too deeply".into());
        }
        ws(b, i);
        match b.get(*i) {
            Some(b'{') => {
                *i += 1;
                let mut items = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b'}') {
                        *i += 1;
                        return Ok(PyValue::Dict(items));
                    }
                    let PyValue::Str(k) = value(b, i, depth + 1)? else {
                        return Err("a dict key that is not a string".into());
                    };
                    ws(b, i);
                    if b.get(*i) != Some(&b':') {
                        return Err(format!("expected `:` at {}", *i));
                    }
                    *i += 1;
                    items.push((k, value(b, i, depth + 1)?));
                    ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {}
                        _ => return Err(format!("expected `,` or `}}` at {}", *i)),
                    }
                }
            }
            Some(b'[') => {
                *i += 1;
                let mut items = Vec::new();
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b']') {
                        *i += 1;
                        return Ok(PyValue::List(items));
                    }
                    items.push(value(b, i, depth + 1)?);
                    ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b']') => {}
                        _ => return Err(format!("expected `,` or `]` at {}", *i)),
                    }
                }
            }
            Some(q @ (b'\'' | b'"')) => {
                let q = *q;
                *i += 1;
                let start = *i;
                while *i < b.len() && b[*i] != q {
                    if b[*i] == b'\\' {
                        *i += 1;
                    }
                    *i += 1;
                }
                if *i >= b.len() {
                    return Err("unterminated string".into());
                }
                let s = String::from_utf8_lossy(&b[start..*i]).into_owned();
                *i += 1;
                Ok(PyValue::Str(s))
            }
            Some(_) => {
                let start = *i;
                while *i < b.len()
                    && !matches!(b[*i], b',' | b'}' | b']' | b':')
                    && !b[*i].is_ascii_whitespace()
                {
                    *i += 1;
                }
                let tok = std::str::from_utf8(&b[start..*i]).map_err(|_| "not UTF-8")?;
                match tok {
                    "True" | "False" | "None" => Ok(PyValue::Other),
                    t => t
                        .parse()
                        .map(PyValue::Num)
                        .map_err(|_| format!("`{t}` is not a value")),
                }
            }
            None => Err("unexpected end".into()),
        }
    }
    let b = s.as_bytes();
    let mut i = 0;
    let v = value(b, &mut i, 0)?;
    ws(b, &mut i);
    if i != b.len() {
        return Err(format!("trailing text at {i}"));
    }
    Ok(v)
}

/// GPU memory (MiB per GPU) from a `GpuInfo` literal; a size below 1024 is read as GB.
fn gpu_info_mib(info: &str, summary: &mut FileSummary) -> Option<f64> {
    // Some clouds put the accelerator's name there instead of a dict: no memory information.
    if !info.trim_start().starts_with('{') {
        return None;
    }
    let v = match python_literal(info) {
        Ok(v) => v,
        Err(_) => {
            summary.note("unparsable GpuInfo: memory unknown");
            return None;
        }
    };
    let first = match v.get("Gpus") {
        Some(PyValue::List(l)) => l.first()?.clone(),
        _ => return None,
    };
    let PyValue::Num(mib) = first.get("MemoryInfo")?.get("SizeInMiB")? else {
        return None;
    };
    if *mib > 0.0 && *mib < 1024.0 {
        summary.note("GpuInfo memory in GB, not MiB: converted");
        return Some(mib * 1024.0);
    }
    Some(*mib)
}

/// Map a catalog's accelerator name to a catalog GPU, using the instance name and memory for
/// the form factor. `None`: not a GPU the catalog carries.
#[must_use]
pub fn map_gpu(
    cloud: &str,
    instance: &str,
    accelerator: &str,
    mem_mib: Option<f64>,
) -> Option<&'static str> {
    let a = accelerator
        .trim()
        .trim_start_matches("NVIDIA ")
        .trim_end_matches(" Blackwell")
        .to_ascii_uppercase();
    let inst = instance.to_ascii_lowercase();
    let pcie = inst.contains("pcie");
    let mem = mem_mib.unwrap_or(0.0);
    Some(match a.as_str() {
        "T4" => "T4",
        "L4" => "L4",
        "A10G" => "A10G",
        "A10" => "A10",
        "A30" => "A30",
        "L40S" => "L40S",
        // Lambda's `A6000` and Vast's `RTXA6000`; Lambda's `RTX6000` is the Turing Quadro
        // RTX 6000, another card, left out.
        "A6000" | "RTXA6000" | "RTX A6000" => "RTX-A6000",
        "H200" => "H200-SXM-141GB",
        "B200" => "B200",
        "MI300X" => "MI300X",
        "V100-32GB" => "V100-SXM2-32GB",
        "V100" => {
            if mem >= 30_000.0 || inst.starts_with("p3dn") {
                "V100-SXM2-32GB"
            } else if cloud == "azure" && inst.starts_with("standard_nc") {
                "V100-PCIE-16GB"
            } else {
                "V100-SXM2-16GB"
            }
        }
        "A100" | "A100-80GB" => {
            let big = a == "A100-80GB"
                || mem >= 70_000.0
                || inst.contains("80gb")
                || inst.starts_with("p4de");
            let pcie = pcie || (cloud == "azure" && inst.starts_with("standard_nc"));
            match (big, pcie) {
                (true, true) => "A100-PCIE-80GB",
                (true, false) => "A100-SXM4-80GB",
                (false, true) => "A100-PCIE-40GB",
                (false, false) => "A100-SXM4-40GB",
            }
        }
        "H100" | "H100-MEGA" => {
            if mem >= 90_000.0
                || inst.contains("nvl")
                || (cloud == "azure" && inst.starts_with("standard_nc"))
            {
                "H100-NVL-94GB"
            } else if pcie {
                "H100-PCIE-80GB"
            } else {
                "H100-SXM5-80GB"
            }
        }
        _ => return None,
    })
}

fn get(r: &csv::StringRecord, c: Option<usize>) -> Option<&str> {
    c.and_then(|c| r.get(c))
}

fn price(v: Option<&str>) -> Option<f64> {
    let p: f64 = v?.trim().parse().ok()?;
    // 0.0 and 700.0 are SkyPilot's "no price" sentinels.
    (p.is_finite() && p > 0.0 && p != 700.0).then_some(p)
}

fn num(v: Option<&str>) -> Option<f64> {
    v?.trim().parse().ok().filter(|x: &f64| x.is_finite())
}

/// `Denmark, DK, EU` → `Denmark/DK/EU` (no commas in the catalog file).
fn clean_region(r: &str) -> String {
    r.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

struct Table {
    headers: Vec<String>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    fn read(path: &Path) -> Result<Self, ImportError> {
        let io = |e: csv::Error| ImportError::Format {
            file: path.display().to_string(),
            message: format!("not a CSV file: {e}"),
        };
        let file = fs_err::File::open(path).map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut r = csv::ReaderBuilder::new().flexible(true).from_reader(file);
        let headers = r.headers().map_err(io)?.iter().map(str::to_owned).collect();
        let rows = r.records().collect::<Result<Vec<_>, _>>().map_err(io)?;
        Ok(Self { headers, rows })
    }

    fn col(&self, name: &str, path: &Path) -> Result<usize, ImportError> {
        self.headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| ImportError::Format {
                file: path.display().to_string(),
                message: format!("no `{name}` column (columns: {})", self.headers.join(", ")),
            })
    }

    fn opt_col(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }
}

/// GCP GPU host families: name prefix → (accelerator, GPUs by the instance's last part).
fn gcp_family(instance: &str) -> Option<(&'static str, u32)> {
    let base = instance.strip_suffix("-nolssd").unwrap_or(instance);
    let (family, size) = base.rsplit_once('-')?;
    let g = |s: &str| s.strip_suffix('g').and_then(|n| n.parse::<u32>().ok());
    Some(match family {
        "a2-highgpu" | "a2-megagpu" => ("A100", g(size)?),
        "a2-ultragpu" => ("A100-80GB", g(size)?),
        "a3-highgpu" | "a3-edgegpu" => ("H100", g(size)?),
        "a3-megagpu" => ("H100-MEGA", g(size)?),
        "a3-ultragpu" => ("H200", g(size)?),
        "a4-highgpu" => ("B200", g(size)?),
        "g2-standard" => (
            "L4",
            match size.parse::<u32>().ok()? {
                4 | 8 | 12 | 16 | 32 => 1,
                24 => 2,
                48 => 4,
                96 => 8,
                _ => return None,
            },
        ),
        _ => return None,
    })
}

/// GCP accelerator rows: (zone, accelerator, count) → (on-demand, spot).
type AccelKey = (String, String, u32);
type AccelPrice = (Option<f64>, Option<f64>);

/// The columns of a SkyPilot `vms.csv`.
struct VmColumns {
    instance_type: usize,
    accelerator: usize,
    count: usize,
    price: usize,
    region: usize,
    spot: Option<usize>,
    zone: Option<usize>,
    vcpus: Option<usize>,
    memory: Option<usize>,
    gpu_info: Option<usize>,
}

impl VmColumns {
    fn of(t: &Table, path: &Path) -> Result<Self, ImportError> {
        Ok(Self {
            instance_type: t.col("InstanceType", path)?,
            accelerator: t.col("AcceleratorName", path)?,
            count: t.col("AcceleratorCount", path)?,
            price: t.col("Price", path)?,
            region: t.col("Region", path)?,
            spot: t.opt_col("SpotPrice"),
            zone: t.opt_col("AvailabilityZone"),
            vcpus: t.opt_col("vCPUs"),
            memory: t.opt_col("MemoryGiB"),
            gpu_info: t.opt_col("GpuInfo"),
        })
    }
}

/// A GPU offer read from one row, before its GPU is looked up in the catalog.
struct Offer {
    name: String,
    count: f64,
    on_demand: Option<f64>,
    spot: Option<f64>,
    instance_type: String,
    /// GPU memory from `GpuInfo`, to tell memory variants apart.
    mem_mib: Option<f64>,
    /// A GCP host joined to an accelerator row whose spot price is not below its on-demand
    /// price: the source row is broken, so both joined prices are doubtful.
    source_suspect: bool,
}

/// Import one SkyPilot-format cloud folder's `vms.csv`.
fn skypilot_cloud(
    cloud: &str,
    path: &Path,
    as_of: &str,
    source: &str,
) -> Result<(Vec<Instance>, FileSummary), ImportError> {
    let t = Table::read(path)?;
    let mut s = FileSummary {
        file: path.display().to_string(),
        cloud: cloud.to_owned(),
        ..FileSummary::default()
    };
    let c = VmColumns::of(&t, path)?;
    let accel = if cloud == "gcp" {
        gcp_accelerators(&t, &c)
    } else {
        BTreeMap::new()
    };
    let mut out = Vec::new();
    for r in &t.rows {
        s.rows += 1;
        let offer = if cloud == "gcp" {
            gcp_offer(r, &c, &accel, &mut s)
        } else {
            plain_offer(r, &c, &mut s)
        };
        let Some(o) = offer else { continue };
        let Some(gpu) = map_gpu(cloud, &o.instance_type, &o.name, o.mem_mib) else {
            s.skip(&format!("accelerator `{}` is not in the catalog", o.name));
            continue;
        };
        if o.count <= 0.0 {
            s.skip("no GPU count");
            continue;
        }
        if o.on_demand.is_none() && o.spot.is_none() {
            s.skip("no price (sentinel 0.0 / 700.0, or empty)");
            continue;
        }
        let (vcpus, memory_gib) = if o.instance_type.starts_with("gpu-only") {
            (None, None)
        } else {
            (num(get(r, c.vcpus)), num(get(r, c.memory)))
        };
        s.kept += 1;
        let mut row = Instance {
            cloud: cloud.to_owned(),
            instance_type: o.instance_type,
            region: clean_region(r.get(c.region).unwrap_or("")),
            gpu: gpu.to_owned(),
            gpu_count: o.count,
            vcpus,
            memory_gib,
            on_demand_usd_per_hour: o.on_demand,
            spot_usd_per_hour: o.spot,
            commit_1y_usd_per_hour: None,
            commit_3y_usd_per_hour: None,
            as_of: as_of.to_owned(),
            source: source.to_owned(),
            suspect: Vec::new(),
        };
        if o.source_suspect {
            for p in [Pricing::OnDemand, Pricing::Spot] {
                row.mark_suspect(p, "source_spot_not_below_on_demand");
            }
        }
        out.push(row);
    }
    Ok((out, s))
}

/// GCP accelerator rows (no instance type) by (zone, name, count), for the host join.
fn gcp_accelerators(t: &Table, c: &VmColumns) -> BTreeMap<AccelKey, AccelPrice> {
    let mut accel = BTreeMap::new();
    for r in &t.rows {
        if r.get(c.instance_type).unwrap_or("").is_empty() {
            let name = r.get(c.accelerator).unwrap_or("").to_owned();
            let count = num(r.get(c.count)).unwrap_or(0.0);
            let zone = get(r, c.zone).unwrap_or("").to_owned();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            accel.insert(
                (zone, name, count as u32),
                (price(r.get(c.price)), price(get(r, c.spot))),
            );
        }
    }
    accel
}

/// A row of any cloud but GCP: its accelerator, count and prices as they stand.
fn plain_offer(r: &csv::StringRecord, c: &VmColumns, s: &mut FileSummary) -> Option<Offer> {
    let acc = r.get(c.accelerator).unwrap_or("").trim();
    // Read (and note a bad `GpuInfo`) for every row, as the summary counts them.
    let mem_mib = get(r, c.gpu_info).and_then(|i| gpu_info_mib(i, s));
    if acc.is_empty() {
        s.skip("not a GPU instance");
        return None;
    }
    Some(Offer {
        name: acc.to_owned(),
        count: num(r.get(c.count)).unwrap_or(0.0),
        on_demand: price(r.get(c.price)),
        spot: price(get(r, c.spot)),
        instance_type: r.get(c.instance_type).unwrap_or("").trim().to_owned(),
        mem_mib,
        source_suspect: false,
    })
}

/// A GCP row: an attachable accelerator as a GPU-only offer, or a GPU host joined to its
/// accelerator row in the same zone (host price + accelerator price).
fn gcp_offer(
    r: &csv::StringRecord,
    c: &VmColumns,
    accel: &BTreeMap<AccelKey, AccelPrice>,
    s: &mut FileSummary,
) -> Option<Offer> {
    let itype = r.get(c.instance_type).unwrap_or("").trim();
    let acc = r.get(c.accelerator).unwrap_or("").trim();
    let mem_mib = get(r, c.gpu_info).and_then(|i| gpu_info_mib(i, s));
    if itype.is_empty() {
        // An accelerator row: an attachable GPU becomes a GPU-only offer; the others only
        // count joined to their host.
        if acc.is_empty() || !matches!(acc, "T4" | "V100" | "P100" | "P4" | "K80") {
            s.skip("GCP accelerator row used only in host joins");
            return None;
        }
        let count = num(r.get(c.count)).unwrap_or(0.0);
        return Some(Offer {
            name: acc.to_owned(),
            count,
            on_demand: price(r.get(c.price)),
            spot: price(get(r, c.spot)),
            instance_type: format!("gpu-only-{count}x{acc}"),
            mem_mib,
            source_suspect: false,
        });
    }
    let Some((fam_acc, n)) = gcp_family(itype) else {
        s.skip("not a GPU instance");
        return None;
    };
    let zone = get(r, c.zone).unwrap_or("").to_owned();
    let Some((a_od, a_spot)) = accel.get(&(zone, fam_acc.to_owned(), n)).copied() else {
        s.skip("GCP host without an accelerator row in its zone");
        return None;
    };
    let source_suspect = matches!((a_od, a_spot), (Some(o), Some(sp)) if sp >= o);
    if source_suspect {
        s.note("GCP accelerator row with spot ≥ on-demand: the joined prices are flagged suspect");
    }
    let join = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
    Some(Offer {
        name: fam_acc.to_owned(),
        count: f64::from(n),
        on_demand: join(price(r.get(c.price)), a_od),
        spot: join(price(get(r, c.spot)), a_spot),
        instance_type: itype.to_owned(),
        mem_mib: None,
        source_suspect,
    })
}

/// How far below the other clouds a price may lie before it is doubtful: under a quarter of
/// the median of the other clouds' medians for the same GPU (at least two other clouds). Only
/// the low side: a high price per GPU is usually a big host (a 64-vCPU T4 box), and a quote
/// that is too high is never picked as the cheapest.
pub const FAR_BELOW_OTHER_CLOUDS: f64 = 0.25;

/// Flag doubtful prices after import (see `docs/catalog.md`), so that quotes leave them out
/// until an overlay confirms them: a spot price not below the on-demand price; an on-demand
/// price per GPU below that of a smaller-memory variant of the same GPU in the same cloud,
/// region and GPU count (A100 80 GB cheaper than A100 40 GB); an on-demand price per GPU far
/// below the same GPU's on other clouds. Returns how many prices each rule flagged.
pub fn flag_suspects(rows: &mut [Instance], catalog: &Catalog) -> BTreeMap<&'static str, usize> {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut flag = |row: &mut Instance, p: Pricing, why: &'static str| {
        if row.listed_price(p).is_some() && row.suspect_reason(p).is_none() {
            row.mark_suspect(p, why);
            *counts.entry(why).or_default() += 1;
        }
    };
    for r in rows.iter_mut() {
        if let (Some(od), Some(sp)) = (r.on_demand_usd_per_hour, r.spot_usd_per_hour)
            && sp >= od
        {
            flag(r, Pricing::Spot, "spot_not_below_on_demand");
        }
    }
    // Per GPU on-demand price of each row, with the GPU's family and memory.
    let od = |r: &Instance| r.listed_price(Pricing::OnDemand).map(|p| p / r.gpu_count);
    let family_of = |gpu: &str| -> Option<(String, f64)> {
        let spec = catalog.resolve(gpu)?;
        // The family is the name without its memory suffix (`A100-SXM4-40GB` → `A100-SXM4`).
        let fam = spec
            .name
            .rsplit_once('-')
            .filter(|(_, m)| m.ends_with("GB"))
            .map_or(spec.name.as_str(), |(f, _)| f)
            .to_owned();
        Some((fam, spec.memory_gb))
    };
    // (cloud, region, family, GPU count) → (memory GB, $/GPU-h) of each row.
    type Place = (String, String, String, String);
    let mut smaller: BTreeMap<Place, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows.iter() {
        if let (Some(p), Some((fam, mem))) = (od(r), family_of(&r.gpu)) {
            smaller
                .entry((
                    r.cloud.clone(),
                    r.region.clone(),
                    fam,
                    format!("{}", r.gpu_count),
                ))
                .or_default()
                .push((mem, p));
        }
    }
    for r in rows.iter_mut() {
        let (Some(p), Some((fam, mem))) = (od(r), family_of(&r.gpu)) else {
            continue;
        };
        let key = (
            r.cloud.clone(),
            r.region.clone(),
            fam,
            format!("{}", r.gpu_count),
        );
        if smaller
            .get(&key)
            .is_some_and(|v| v.iter().any(|(m, q)| *m < mem && *q > p))
        {
            flag(r, Pricing::OnDemand, "cheaper_than_smaller_memory_variant");
        }
    }
    let mut by_cloud: BTreeMap<&str, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    let snapshot: Vec<(String, String, Option<f64>)> = rows
        .iter()
        .map(|r| (r.gpu.clone(), r.cloud.clone(), od(r)))
        .collect();
    for (gpu, cloud, p) in &snapshot {
        if let Some(p) = p {
            by_cloud
                .entry(gpu.as_str())
                .or_default()
                .entry(cloud.as_str())
                .or_default()
                .push(*p);
        }
    }
    let median = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut medians: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (gpu, clouds) in &by_cloud {
        for (cloud, prices) in clouds {
            let mut v = prices.clone();
            medians.insert(((*gpu).to_owned(), (*cloud).to_owned()), median(&mut v));
        }
    }
    for r in rows.iter_mut() {
        let Some(p) = od(r) else { continue };
        let mut others: Vec<f64> = medians
            .iter()
            .filter(|((g, c), _)| *g == r.gpu && *c != r.cloud)
            .map(|(_, m)| *m)
            .collect();
        if others.len() >= 2 && p < FAR_BELOW_OTHER_CLOUDS * median(&mut others) {
            flag(r, Pricing::OnDemand, "far_below_other_clouds");
        }
    }
    counts
}

/// Import a SkyPilot-format catalog folder: every `<cloud>/vms.csv` below it.
pub fn skypilot(
    dir: &Path,
    as_of: &str,
    source: &str,
) -> Result<(Vec<Instance>, Vec<FileSummary>), ImportError> {
    let mut rows = Vec::new();
    let mut summaries = Vec::new();
    let mut clouds: Vec<_> = fs_err::read_dir(dir)
        .map_err(|source| ImportError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("vms.csv").is_file())
        .collect();
    clouds.sort();
    if clouds.is_empty() {
        return Err(ImportError::Format {
            file: dir.display().to_string(),
            message: "no `<cloud>/vms.csv` below it: point --skypilot at a SkyPilot catalog folder (e.g. catalogs/v8)".into(),
        });
    }
    for c in clouds {
        let cloud = c
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let (r, s) = skypilot_cloud(&cloud, &c.join("vms.csv"), as_of, source)?;
        rows.extend(r);
        summaries.push(s);
    }
    Ok((rows, summaries))
}

/// Import the AWS GPU table (`instance_type,family,gpu_model,gpu_count,gpu_memory,vcpu,memory,
/// generation,region,on_demand_usd_per_hr,reserved_1yr_standard_no_upfront_usd_per_hr,
/// spot_min_usd_per_hr`).
pub fn aws_vantage(
    path: &Path,
    as_of: &str,
    source: &str,
    catalog: &Catalog,
) -> Result<(Vec<Instance>, FileSummary), ImportError> {
    let t = Table::read(path)?;
    let mut s = FileSummary {
        file: path.display().to_string(),
        cloud: "aws".into(),
        ..FileSummary::default()
    };
    let col = |n: &str| t.col(n, path);
    let (c_type, c_model, c_count, c_gmem, c_vcpu, c_mem, c_region, c_od) = (
        col("instance_type")?,
        col("gpu_model")?,
        col("gpu_count")?,
        col("gpu_memory")?,
        col("vcpu")?,
        col("memory")?,
        col("region")?,
        col("on_demand_usd_per_hr")?,
    );
    let c_1y = t.opt_col("reserved_1yr_standard_no_upfront_usd_per_hr");
    let c_3y = t.opt_col("reserved_3yr_standard_no_upfront_usd_per_hr");
    let c_spot = t.opt_col("spot_min_usd_per_hr");
    let mut out = Vec::new();
    for r in &t.rows {
        s.rows += 1;
        let itype = r.get(c_type).unwrap_or("").trim();
        let model = r.get(c_model).unwrap_or("").trim();
        let count = num(r.get(c_count)).unwrap_or(0.0);
        let first_num = |v: &str| {
            v.split_whitespace()
                .next()
                .and_then(|x| x.parse::<f64>().ok())
        };
        let gmem = r.get(c_gmem).and_then(first_num);
        // Per-GPU memory: the total divided by the count, or the figure itself, whichever is a
        // memory size the mapped GPU has.
        let gpu = [gmem.map(|m| m / count.max(1.0)), gmem]
            .into_iter()
            .flatten()
            .find_map(|gb| {
                let g = map_gpu("aws", itype, model, Some(gb * 1024.0))?;
                let spec = catalog.resolve(g)?;
                ((spec.memory_gb - gb).abs() <= spec.memory_gb * 0.1).then_some(g)
            });
        let gpu = gpu.or_else(|| map_gpu("aws", itype, model, None).filter(|_| gmem.is_none()));
        let Some(gpu) = gpu else {
            s.skip(&format!("GPU `{model}` is not in the catalog"));
            continue;
        };
        let od = price(r.get(c_od));
        if od.is_none() {
            s.skip("no on-demand price");
            continue;
        }
        s.kept += 1;
        out.push(Instance {
            cloud: "aws".into(),
            instance_type: itype.to_owned(),
            region: clean_region(r.get(c_region).unwrap_or("")),
            gpu: gpu.to_owned(),
            gpu_count: count,
            vcpus: num(r.get(c_vcpu)),
            memory_gib: r.get(c_mem).and_then(first_num),
            on_demand_usd_per_hour: od,
            spot_usd_per_hour: price(c_spot.and_then(|c| r.get(c))),
            commit_1y_usd_per_hour: price(c_1y.and_then(|c| r.get(c))),
            commit_3y_usd_per_hour: price(c_3y.and_then(|c| r.get(c))),
            as_of: as_of.to_owned(),
            source: source.to_owned(),
            suspect: Vec::new(),
        });
    }
    Ok((out, s))
}

/// Collapse zones and duplicates: one row per (cloud, instance type, region, GPU), the lowest
/// price of each kind; sorted.
#[must_use]
pub fn collapse(rows: Vec<Instance>) -> Vec<Instance> {
    let mut by: BTreeMap<(String, String, String, String), Instance> = BTreeMap::new();
    let min = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    for r in rows {
        let key = (
            r.cloud.clone(),
            r.instance_type.clone(),
            r.region.clone(),
            r.gpu.clone(),
        );
        match by.get_mut(&key) {
            Some(e) => {
                e.on_demand_usd_per_hour = min(e.on_demand_usd_per_hour, r.on_demand_usd_per_hour);
                e.spot_usd_per_hour = min(e.spot_usd_per_hour, r.spot_usd_per_hour);
                e.commit_1y_usd_per_hour = min(e.commit_1y_usd_per_hour, r.commit_1y_usd_per_hour);
                e.commit_3y_usd_per_hour = min(e.commit_3y_usd_per_hour, r.commit_3y_usd_per_hour);
            }
            None => {
                by.insert(key, r);
            }
        }
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals() {
        let v = python_literal("{'Gpus': [{'Name': 'A100', 'Count': 8.0, 'MemoryInfo': {'SizeInMiB': 40960}}], 'TotalGpuMemoryInMiB': 40960, 'x': None}").expect("parses");
        assert_eq!(
            v.get("Gpus")
                .and_then(|g| if let PyValue::List(l) = g {
                    l.first()
                } else {
                    None
                })
                .and_then(|g| g.get("Name")),
            Some(&PyValue::Str("A100".into()))
        );
        for bad in ["{'a': }", "{'a' 1}", "[1, 2", "{'a': 'b}", "{1: 2}", "{} x"] {
            assert!(python_literal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_in_gb_is_converted() {
        let mut s = FileSummary::default();
        assert_eq!(
            gpu_info_mib("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 80}}]}", &mut s),
            Some(81_920.0)
        );
        assert_eq!(s.notes.values().sum::<u64>(), 1);
        assert_eq!(
            gpu_info_mib("A100-80GB", &mut s),
            None,
            "a bare name carries no memory"
        );
        assert_eq!(
            gpu_info_mib("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]}", &mut s),
            Some(40_960.0)
        );
    }

    #[test]
    fn gpu_mapping_by_form_factor() {
        assert_eq!(
            map_gpu("azure", "Standard_NC40ads_H100_v5", "H100", None),
            Some("H100-NVL-94GB")
        );
        assert_eq!(
            map_gpu("azure", "Standard_ND96isr_H100_v5", "H100", None),
            Some("H100-SXM5-80GB")
        );
        assert_eq!(
            map_gpu("lambda", "gpu_1x_h100_pcie", "H100", None),
            Some("H100-PCIE-80GB")
        );
        assert_eq!(
            map_gpu("azure", "Standard_NC24ads_A100_v4", "A100-80GB", None),
            Some("A100-PCIE-80GB")
        );
        assert_eq!(
            map_gpu("aws", "p4d.24xlarge", "NVIDIA A100", Some(40_960.0)),
            Some("A100-SXM4-40GB")
        );
        assert_eq!(
            map_gpu("aws", "p4de.24xlarge", "NVIDIA A100", Some(81_920.0)),
            Some("A100-SXM4-80GB")
        );
        assert_eq!(
            map_gpu("aws", "p3.2xlarge", "NVIDIA V100", Some(16_384.0)),
            Some("V100-SXM2-16GB")
        );
        assert_eq!(
            map_gpu("aws", "p6-b200.48xlarge", "NVIDIA B200 Blackwell", None),
            Some("B200")
        );
        assert_eq!(map_gpu("vast", "1x-RTX_5090", "RTX5090", None), None);
        assert_eq!(
            map_gpu("lambda", "gpu_1x_a6000", "A6000", None),
            Some("RTX-A6000")
        );
        assert_eq!(
            map_gpu("vast", "2x-RTX_A6000-32-65536", "RTXA6000", None),
            Some("RTX-A6000")
        );
        // Lambda's `RTX6000` is the Turing Quadro RTX 6000: not the same card.
        assert_eq!(map_gpu("lambda", "gpu_1x_rtx6000", "RTX6000", None), None);
        assert_eq!(map_gpu("aws", "g6f.large", "NVIDIA L40", None), None);
    }

    #[test]
    fn gcp_families() {
        assert_eq!(gcp_family("a2-highgpu-1g"), Some(("A100", 1)));
        assert_eq!(gcp_family("a2-ultragpu-8g"), Some(("A100-80GB", 8)));
        assert_eq!(gcp_family("a3-ultragpu-8g-nolssd"), Some(("H200", 8)));
        assert_eq!(gcp_family("g2-standard-48"), Some(("L4", 4)));
        assert_eq!(gcp_family("n1-standard-8"), None);
    }

    #[test]
    fn sentinels_are_not_prices() {
        assert_eq!(price(Some("0.0")), None);
        assert_eq!(price(Some("700.0")), None);
        assert_eq!(price(Some("")), None);
        assert_eq!(price(Some("3.673")), Some(3.673));
    }

    fn row(cloud: &str, itype: &str, gpu: &str, od: f64, spot: Option<f64>) -> Instance {
        Instance {
            cloud: cloud.into(),
            instance_type: itype.into(),
            region: "r1".into(),
            gpu: gpu.into(),
            gpu_count: 1.0,
            vcpus: None,
            memory_gib: None,
            on_demand_usd_per_hour: Some(od),
            spot_usd_per_hour: spot,
            commit_1y_usd_per_hour: None,
            commit_3y_usd_per_hour: None,
            as_of: "2026-01-01".into(),
            source: "test".into(),
            suspect: Vec::new(),
        }
    }

    #[test]
    fn doubtful_prices_are_flagged() {
        let catalog = Catalog::builtin();
        let mut rows = vec![
            // The 80 GB variant cheaper than the 40 GB one in the same place: doubtful.
            row("gcp", "big", "A100-SXM4-80GB", 2.9, Some(1.0)),
            row("gcp", "small", "A100-SXM4-40GB", 3.7, Some(1.2)),
            // Spot at on-demand: doubtful spot.
            row("azure", "h200", "H200-SXM-141GB", 10.0, Some(10.0)),
            // Far below three other clouds.
            row("aws", "l4", "L4", 0.8, None),
            row("gcp", "l4", "L4", 0.7, None),
            row("azure", "l4", "L4", 0.9, None),
            row("vast", "l4", "L4", 0.1, None),
        ];
        let counts = flag_suspects(&mut rows, &catalog);
        assert_eq!(
            rows[0].suspect_reason(Pricing::OnDemand),
            Some("cheaper_than_smaller_memory_variant")
        );
        assert_eq!(rows[0].price(Pricing::OnDemand), None);
        assert_eq!(rows[0].price(Pricing::Spot), Some(1.0));
        assert!(rows[1].suspect.is_empty());
        assert_eq!(
            rows[2].suspect_reason(Pricing::Spot),
            Some("spot_not_below_on_demand")
        );
        assert_eq!(rows[2].price(Pricing::OnDemand), Some(10.0));
        assert_eq!(
            rows[6].suspect_reason(Pricing::OnDemand),
            Some("far_below_other_clouds")
        );
        assert!(rows[3..6].iter().all(|r| r.suspect.is_empty()));
        assert_eq!(counts.values().sum::<usize>(), 3);
        // Written and read back, the flags stay.
        let text = format!(
            "{}\n{}\n",
            gpuwise_catalog::INSTANCES_HEADER,
            rows[0].to_csv()
        );
        let back = gpuwise_catalog::parse_instances(&text, "t").expect("parses");
        assert_eq!(back[0], rows[0]);
    }
}
