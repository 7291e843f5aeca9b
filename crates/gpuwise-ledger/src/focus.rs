//! # FinOps FOCUS bills, row by row
//!
//! Reads FOCUS 1.0, 1.1 and 1.2 exports (CSV, or Parquet through the `parquet` crate's row API)
//! into [`BillRow`]s handed to a sink one at a time, so a bill of any size is folded without
//! being held. Both formats become the same text cells first, so one parser decides every value.
//!
//! Real exports bend the spec (docs/formats.md §6.3): `NULL` and `""` for null, timestamps
//! with a space and no zone (`2024-09-27 15:00:00`, read as UTC, which FOCUS prescribes),
//! extra columns without the `x_` prefix, units such as `Hours` or `Hrs`, `;` or tabs between
//! cells (the separator is read off the header). A row whose value cannot be read, or is not
//! plausible (see [`PLAUSIBLE`]), is skipped and counted with its line and field; a file
//! without the columns every reading needs, or with one of them twice, is an error naming them.
//!
//! Memory is bounded whatever the file holds: a CSV record over [`MAX_LINE`] bytes is skipped
//! whole ([`RecordLimit`]), Parquet is decoded [`BATCH`] rows at a time after its metadata
//! says no column chunk exceeds [`MAX_CHUNK`], and a Parquet cell over [`MAX_LINE`] skips its
//! row.

use std::collections::BTreeMap;
use std::io::BufRead;

use gpuwise_core::records::{MAX_LINE, Record, RecordLimit, Split, Splitter, record_line};

use gpuwise_core::sample::EpochMs;
use parquet::record::Field;
use parquet::schema::types::ColumnDescPtr;

/// What a Parquet bill is read from (a file, or bytes in memory), and its error.
pub use parquet::{
    errors::ParquetError,
    file::reader::{ChunkReader, Length},
};

/// The columns without which no row can be read.
pub const REQUIRED: &[&str] = &[
    "BilledCost",
    "BillingCurrency",
    "ChargeCategory",
    "ChargePeriodStart",
    "ChargePeriodEnd",
];

/// Every column the ledger reads (FOCUS names, and the `x_` extensions it knows).
const READ: [&str; 24] = [
    "BilledCost",
    "BillingCurrency",
    "ChargeCategory",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "EffectiveCost",
    "ListCost",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "PricingCategory",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "SkuPriceId",
    "SkuPriceDetails",
    "ChargeDescription",
    "RegionId",
    "ProviderName",
    "Tags",
    "x_InstanceType",
    "x_GpuCount",
];

/// The columns the ledger reads, as indices into [`READ`] (no string compare per cell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    BilledCost,
    BillingCurrency,
    ChargeCategory,
    ChargePeriodStart,
    ChargePeriodEnd,
    EffectiveCost,
    ListCost,
    ConsumedQuantity,
    ConsumedUnit,
    PricingQuantity,
    PricingUnit,
    PricingCategory,
    ResourceId,
    ResourceName,
    ResourceType,
    ServiceCategory,
    SkuPriceId,
    SkuPriceDetails,
    ChargeDescription,
    RegionId,
    ProviderName,
    Tags,
    XInstanceType,
    XGpuCount,
}

impl Col {
    const ALL: [Col; READ.len()] = [
        Col::BilledCost,
        Col::BillingCurrency,
        Col::ChargeCategory,
        Col::ChargePeriodStart,
        Col::ChargePeriodEnd,
        Col::EffectiveCost,
        Col::ListCost,
        Col::ConsumedQuantity,
        Col::ConsumedUnit,
        Col::PricingQuantity,
        Col::PricingUnit,
        Col::PricingCategory,
        Col::ResourceId,
        Col::ResourceName,
        Col::ResourceType,
        Col::ServiceCategory,
        Col::SkuPriceId,
        Col::SkuPriceDetails,
        Col::ChargeDescription,
        Col::RegionId,
        Col::ProviderName,
        Col::Tags,
        Col::XInstanceType,
        Col::XGpuCount,
    ];

    fn name(self) -> &'static str {
        READ[self as usize]
    }
}

impl std::fmt::Display for Col {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The plausible ranges of a bill's values, as the docs state them: a value outside is a
/// counted skip (`implausible_timestamp`, `implausible_cost`, `implausible_quantity`,
/// `bad_gpu_count`), never a figure.
pub const PLAUSIBLE: &str = "timestamps in 2000-01-01..2100-01-01; costs within ±$1e9 a row; \
     a GPU instance's hours above 0 and at most its charge period; GPUs per instance a whole number 0..=128";

/// Earliest plausible charge time (2000-01-01T00:00:00Z).
const EARLIEST_MS: EpochMs = 946_684_800_000;
/// Latest plausible charge time (2100-01-01T00:00:00Z).
const LATEST_MS: EpochMs = 4_102_444_800_000;
/// The largest cost one row may carry.
const MAX_COST: f64 = 1e9;
/// The most GPUs one billed instance has (the largest machines have 8 or 16; racks sold as
/// one instance reach 72).
pub const MAX_GPUS_PER_INSTANCE: f64 = 128.0;
/// Parquet rows decoded at a time.
pub const BATCH: usize = 8192;
/// The largest column chunk (uncompressed) read from a Parquet bill.
pub const MAX_CHUNK: i64 = 1 << 30;

/// A bill that cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum FocusError {
    /// A column the ledger reads appears twice.
    #[error(
        "{origin}: column {column} appears twice (columns {first} and {second}); which one is billed cannot be told"
    )]
    DuplicateColumn {
        /// File.
        origin: String,
        /// FOCUS column name.
        column: &'static str,
        /// 1-based positions.
        first: usize,
        /// 1-based positions.
        second: usize,
    },

    /// Columns every reading needs are absent.
    #[error("{origin}: not a FOCUS bill: missing column(s) {}", .missing.join(", "))]
    MissingColumns {
        /// File.
        origin: String,
        /// FOCUS column names.
        missing: Vec<String>,
    },
    /// The CSV itself is broken (not a cell problem).
    #[error("{origin}: line {line}: {message}")]
    Csv {
        /// File.
        origin: String,
        /// 1-based line.
        line: u64,
        /// What the CSV reader said.
        message: String,
    },
    /// The Parquet file is broken.
    #[error("{origin}: not a readable Parquet file: {message}")]
    Parquet {
        /// File.
        origin: String,
        /// What the Parquet reader said.
        message: String,
    },
}

/// One row of a bill, with the cells the ledger uses read into values. Its text borrows from
/// the reader's cells (a CSV record, a Parquet batch) for as long as the sink holds it: a bill
/// of millions of rows makes no string per cell, only the builder copies what it keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct BillRow<'a> {
    /// 1-based line in a CSV file (header = 1), row number + 1 in Parquet.
    pub line: u64,
    /// `Usage`, `Purchase`, `Tax`, `Credit`, `Adjustment`.
    pub charge_category: &'a str,
    /// ISO 4217, as the bill writes it (compare without case).
    pub currency: &'a str,
    /// Inclusive.
    pub start_ms: EpochMs,
    /// Exclusive.
    pub end_ms: EpochMs,
    /// Invoice basis.
    pub billed_cost: f64,
    /// Amortized cost, when the bill has it.
    pub effective_cost: Option<f64>,
    /// At list price, when the bill has it.
    pub list_cost: Option<f64>,
    /// Hours the row charges for, from a quantity in hours (consumed, else pricing);
    /// `None` when neither quantity is in hours.
    pub quantity_hours: Option<f64>,
    /// `Standard`, `Dynamic` (spot), `Committed`, `Other`.
    pub pricing_category: Option<&'a str>,
    /// Provider's resource id.
    pub resource_id: Option<&'a str>,
    /// Display name of the resource (often the host name).
    pub resource_name: Option<&'a str>,
    /// `instance`, `Virtual machine`, …
    pub resource_type: Option<&'a str>,
    /// `Compute`, `Storage`, …
    pub service_category: Option<&'a str>,
    /// The price id (duplicate detection).
    pub sku_price_id: Option<&'a str>,
    /// Instance type and where it was read (`SkuPriceDetails`, `x_InstanceType`,
    /// `ChargeDescription`).
    pub instance_type: Option<(&'a str, &'static str)>,
    /// GPUs per instance where the bill says (`SkuPriceDetails` `GpuCount`, `x_GpuCount`).
    pub gpu_count: Option<f64>,
    /// Region.
    pub region: Option<&'a str>,
    /// Provider.
    pub provider: Option<&'a str>,
    /// `Tags` (flat JSON object; values as text), sorted by key.
    pub tags: &'a [(String, String)],
    /// Words of the charge description (for instance types the bill names only there).
    pub description: Option<&'a str>,
    /// A number shared by rows whose fields other than their period, costs and hours are the
    /// same, and by no other row of any bill read in this process; `None` where the reader did
    /// not compare them. [`crate::bill::BillBuilder`] decides once what such rows charge and
    /// to whom.
    pub same_as: Option<u64>,
}

impl BillRow<'_> {
    /// The value of tag `key`.
    #[must_use]
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.tags[i].1.as_str())
    }
}

/// Rows skipped, by reason, with the first example of each.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Skips {
    /// reason → (count, first example).
    pub by_reason: BTreeMap<&'static str, (u64, String)>,
}

impl Skips {
    /// Count one.
    pub fn add(&mut self, reason: &'static str, example: impl FnOnce() -> String) {
        self.by_reason
            .entry(reason)
            .and_modify(|e| e.0 += 1)
            .or_insert_with(|| (1, example()));
    }

    /// Add the skips of rows read after these: counts add up, each reason keeps its first
    /// example.
    pub fn absorb(&mut self, later: Skips) {
        for (reason, (n, example)) in later.by_reason {
            self.by_reason.entry(reason).or_insert((0, example)).0 += n;
        }
    }

    /// Rows skipped in all.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.by_reason.values().map(|e| e.0).sum()
    }
}

/// What a read saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadTally {
    /// Data rows.
    pub rows: u64,
    /// FOCUS version the columns fit best (`1.0`, `1.1`, `1.2`).
    pub version: &'static str,
    /// The separator of a CSV bill (`,` `;` tab `|`; `None` for Parquet).
    pub delimiter: Option<u8>,
    /// Rows that could not be read.
    pub skips: Skips,
}

/// The column index of each field the ledger reads.
#[derive(Clone, Debug)]
struct Layout {
    index: [Option<usize>; READ.len()],
}

impl Layout {
    fn new(header: &[String], origin: &str) -> Result<(Self, &'static str), FocusError> {
        let mut index: [Option<usize>; READ.len()] = [None; READ.len()];
        for (i, h) in header.iter().enumerate() {
            let h = h.trim().trim_start_matches('\u{feff}');
            if let Some(c) = READ.iter().position(|n| n.eq_ignore_ascii_case(h)) {
                if let Some(first) = index[c] {
                    return Err(FocusError::DuplicateColumn {
                        origin: origin.to_owned(),
                        column: READ[c],
                        first: first + 1,
                        second: i + 1,
                    });
                }
                index[c] = Some(i);
            }
        }
        let missing: Vec<String> = REQUIRED
            .iter()
            .filter(|c| {
                Col::ALL
                    .iter()
                    .find(|col| col.name() == **c)
                    .is_none_or(|col| index[*col as usize].is_none())
            })
            .map(|c| (*c).to_owned())
            .collect();
        if !missing.is_empty() {
            return Err(FocusError::MissingColumns {
                origin: origin.to_owned(),
                missing,
            });
        }
        let has = |c: &str| header.iter().any(|h| h.trim().eq_ignore_ascii_case(c));
        let version = if has("InvoiceId") || has("PricingCurrency") || has("BillingAccountType") {
            "1.2"
        } else if has("SkuPriceDetails") || has("SkuMeter") || has("ServiceSubcategory") {
            "1.1"
        } else {
            "1.0"
        };
        Ok((Self { index }, version))
    }

    fn cell<'a>(&self, cells: &'a dyn Cells, col: Col) -> Option<Cell<'a>> {
        match cells.at(self.index[col as usize]?)? {
            Cell::Text(t) => non_null(t).map(Cell::Text),
            typed => Some(typed),
        }
    }

    /// A text cell (a number or timestamp in a text column is not read as text: the
    /// Parquet reader types only the number and time columns).
    fn text<'a>(&self, cells: &'a dyn Cells, col: Col) -> Option<&'a str> {
        match self.cell(cells, col)? {
            Cell::Text(t) => Some(t),
            Cell::Num(_) | Cell::Time(_) => None,
        }
    }

    /// Header positions of the columns present.
    fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.index.iter().flatten().copied()
    }
}

/// One cell as a reader holds it: text (a CSV cell, a Parquet string), or a Parquet number or
/// timestamp taken as it is typed (not made text to be parsed again).
#[derive(Clone, Copy, Debug)]
enum Cell<'a> {
    Text(&'a str),
    Num(f64),
    Time(EpochMs),
}

impl Cell<'_> {
    /// The value as a message shows it.
    fn shown(&self) -> String {
        match self {
            Cell::Text(t) => (*t).to_owned(),
            Cell::Num(x) => x.to_string(),
            Cell::Time(ms) => jiff::Timestamp::from_millisecond(*ms)
                .map_or_else(|_| ms.to_string(), |t| t.to_string()),
        }
    }
}

/// One row's cells: a CSV record as read (no copy), or a Parquet row's values.
trait Cells {
    fn at(&self, i: usize) -> Option<Cell<'_>>;
}

impl Cells for csv::StringRecord {
    fn at(&self, i: usize) -> Option<Cell<'_>> {
        self.get(i).map(Cell::Text)
    }
}

impl Cells for Record<'_> {
    fn at(&self, i: usize) -> Option<Cell<'_>> {
        self.get(i).map(Cell::Text)
    }
}

/// A Parquet value of a row: text, bytes known to be UTF-8 (a string column's value, shared
/// with its page: no copy), or a number or timestamp as typed.
#[derive(Clone, Debug, Default)]
enum Value {
    #[default]
    Null,
    Text(String),
    Bytes(parquet::data_type::ByteArray),
    Num(f64),
    Time(EpochMs),
}

impl Value {
    fn cell(&self) -> Option<Cell<'_>> {
        match self {
            Value::Null => None,
            Value::Text(t) => Some(Cell::Text(t)),
            Value::Bytes(b) => std::str::from_utf8(b.data()).ok().map(Cell::Text),
            Value::Num(x) => Some(Cell::Num(*x)),
            Value::Time(ms) => Some(Cell::Time(*ms)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Value::Text(t) => t.len(),
            Value::Bytes(b) => b.data().len(),
            _ => 0,
        }
    }
}

impl Cells for &[Value] {
    fn at(&self, i: usize) -> Option<Cell<'_>> {
        self.get(i)?.cell()
    }
}

/// `NULL`, `null` and empty cells are null.
fn non_null(s: &str) -> Option<&str> {
    // Most cells: no whitespace at either end (ASCII there, so no wide space either).
    if let (Some(first), Some(last)) = (s.bytes().next(), s.bytes().next_back())
        && first.is_ascii_graphic()
        && last.is_ascii_graphic()
    {
        return (!s.eq_ignore_ascii_case("null")).then_some(s);
    }
    let t = s.trim();
    (!t.is_empty() && !t.eq_ignore_ascii_case("null")).then_some(t)
}

/// A FOCUS timestamp: RFC 3339 (`2024-09-01T00:00:00Z`, with or without fraction or offset),
/// or zone-less with `T` or a space (`2024-09-27 15:00:00`), or a bare date; zone-less is UTC.
pub fn parse_time(s: &str) -> Option<EpochMs> {
    if let Some(ms) = utc_seconds(s) {
        return Some(ms);
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    let civil = s.replacen(' ', "T", 1);
    if let Ok(dt) = civil.parse::<jiff::civil::DateTime>() {
        return jiff::tz::TimeZone::UTC
            .to_timestamp(dt)
            .ok()
            .map(jiff::Timestamp::as_millisecond);
    }
    s.parse::<jiff::civil::Date>().ok().and_then(|d| {
        jiff::tz::TimeZone::UTC
            .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
            .ok()
            .map(jiff::Timestamp::as_millisecond)
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ`, the shape nearly every export writes, read without the general
/// parser (it was a tenth of reading a CSV bill): exactly what jiff makes of it, for a valid
/// date and a second below 60; anything else (`None`) goes to jiff.
fn utc_seconds(s: &str) -> Option<EpochMs> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r].iter().try_fold(0i64, |a, &c| {
            c.is_ascii_digit().then(|| a * 10 + i64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=month_days).contains(&d) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse).
    let (yy, mp) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000)
}

fn is_hours(unit: &str) -> bool {
    // Spec units `Hours`/`Hour`; real exports also write `Hrs`, `hour`, `Instance-Hours`.
    let u = unit.trim();
    let ends = |suffix: &str| {
        u.len() >= suffix.len()
            && u.is_char_boundary(u.len() - suffix.len())
            && u[u.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    ["hours", "hour", "hrs", "hr", "h"]
        .iter()
        .any(|w| u.eq_ignore_ascii_case(w))
        || ends("-hours")
        || ends(" hours")
}

/// A skipped row: its reason and an example naming the line and field.
type Skip = (&'static str, String);

/// A number cell: finite, else `bad_number`.
fn number(line: u64, name: Col, v: Cell<'_>) -> Result<f64, Skip> {
    match v {
        Cell::Num(x) => Some(x),
        Cell::Text(t) => t.parse::<f64>().ok(),
        Cell::Time(_) => None,
    }
    .filter(|x| x.is_finite())
    .ok_or_else(|| {
        (
            "bad_number",
            format!("line {line}: {name} `{}` is not a number", v.shown()),
        )
    })
}

/// A cost cell: a number within ±[`MAX_COST`], else `implausible_cost`.
fn cost(line: u64, name: Col, v: Cell<'_>) -> Result<f64, Skip> {
    let x = number(line, name, v)?;
    if x.abs() > MAX_COST {
        return Err((
            "implausible_cost",
            format!(
                "line {line}: {name} {} is beyond ±$1e9 for one row",
                v.shown()
            ),
        ));
    }
    Ok(x)
}

/// A timestamp cell within [`EARLIEST_MS`]..[`LATEST_MS`]: `bad_timestamp` when it is no
/// timestamp, `implausible_timestamp` when it is one out of range (`9999-12-31T23:59:59Z`, an
/// open end some exports write, is one even where it exceeds what a timestamp type holds).
fn timestamp(line: u64, name: Col, v: Cell<'_>) -> Result<EpochMs, Skip> {
    let implausible = || {
        (
            "implausible_timestamp",
            format!("line {line}: {name} `{}` is outside 2000–2099", v.shown()),
        )
    };
    match v {
        Cell::Time(ms) if (EARLIEST_MS..LATEST_MS).contains(&ms) => Ok(ms),
        Cell::Time(_) => Err(implausible()),
        Cell::Num(_) => Err((
            "bad_timestamp",
            format!("line {line}: {name} `{}` is not a timestamp", v.shown()),
        )),
        Cell::Text(t) => text_timestamp(line, name, t),
    }
}

fn text_timestamp(line: u64, name: Col, v: &str) -> Result<EpochMs, Skip> {
    let implausible = || {
        (
            "implausible_timestamp",
            format!("line {line}: {name} `{v}` is outside 2000–2099"),
        )
    };
    let year = v
        .get(..5)
        .filter(|y| y.ends_with('-'))
        .and_then(|y| y[..4].parse::<i32>().ok());
    if year.is_some_and(|y| !(2000..2100).contains(&y)) {
        return Err(implausible());
    }
    let ms = parse_time(v).ok_or_else(|| {
        (
            "bad_timestamp",
            format!("line {line}: {name} `{v}` is not a timestamp"),
        )
    })?;
    if !(EARLIEST_MS..LATEST_MS).contains(&ms) {
        return Err(implausible());
    }
    Ok(ms)
}

/// GPUs per instance as a bill states them: a whole number in 0..=[`MAX_GPUS_PER_INSTANCE`].
fn gpu_count(line: u64, from: &str, v: &serde_json::Value) -> Result<Option<f64>, Skip> {
    let g = match v {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) if non_null(s).is_none() => return Ok(None),
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match g {
        Some(g) if g.fract() == 0.0 && (0.0..=MAX_GPUS_PER_INSTANCE).contains(&g) => Ok(Some(g)),
        _ => Err((
            "bad_gpu_count",
            format!("line {line}: {from} GPU count `{v}` is not a whole number 0–128"),
        )),
    }
}

/// What a reader parsed of the JSON cells (`SkuPriceDetails`, `Tags`) it met, by their text:
/// exports repeat a handful of them over millions of rows (one per price, one per team), and
/// parsing one costs more than the rest of a row. Bounded: emptied when it holds
/// [`Parsed::MAX`] texts of either kind.
#[derive(Default)]
struct Parsed {
    details: Seen<Details>,
    /// `None`: not a flat JSON object.
    tags: Seen<Option<Vec<(String, String)>>>,
}

/// Values by the text they were parsed from: the text hashed once per row, the value then
/// reached by its index.
struct Seen<T> {
    /// Keyed by std's seeded hash: the texts are the bill's, which could be made to collide.
    at: std::collections::HashMap<String, usize>,
    values: Vec<T>,
    /// The last text asked for and its index: rows in a run often repeat a cell (one SKU's
    /// details over thousands of rows), and comparing it costs less than hashing it.
    last: Option<(String, usize)>,
}

impl<T> Default for Seen<T> {
    fn default() -> Self {
        Self {
            at: std::collections::HashMap::new(),
            values: Vec::new(),
            last: None,
        }
    }
}

impl<T> Seen<T> {
    /// The index of `text`'s value, parsed by `parse` the first time (all forgotten once
    /// [`Parsed::MAX`] are held).
    fn index(&mut self, text: &str, parse: impl FnOnce(&str) -> T) -> usize {
        if let Some((last, i)) = &self.last
            && last == text
        {
            return *i;
        }
        let i = self.lookup(text, parse);
        match &mut self.last {
            Some((last, at)) => {
                last.clear();
                last.push_str(text);
                *at = i;
            }
            None => self.last = Some((text.to_owned(), i)),
        }
        i
    }

    fn lookup(&mut self, text: &str, parse: impl FnOnce(&str) -> T) -> usize {
        if let Some(&i) = self.at.get(text) {
            return i;
        }
        if self.values.len() >= Parsed::MAX {
            self.at.clear();
            self.values.clear();
        }
        self.values.push(parse(text));
        self.at.insert(text.to_owned(), self.values.len() - 1);
        self.values.len() - 1
    }
}

/// What `SkuPriceDetails` says of the instance.
#[derive(Clone, Debug, Default)]
struct Details {
    instance_type: Option<String>,
    gpu_count: Option<serde_json::Value>,
}

impl Parsed {
    const MAX: usize = 4096;
}

/// What `SkuPriceDetails` text says.
fn parse_details(v: &str) -> Details {
    let map = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(v).ok();
    let detail = |keys: &[&str]| {
        map.as_ref().and_then(|m| {
            keys.iter()
                .find_map(|k| m.iter().find(|(mk, _)| mk.eq_ignore_ascii_case(k)))
                .map(|(_, v)| v.clone())
        })
    };
    Details {
        instance_type: detail(&["InstanceType", "x_InstanceType"])
            .and_then(|v| v.as_str().map(str::to_owned)),
        gpu_count: detail(&["GpuCount", "x_GpuCount"]),
    }
}

/// What of a row changes from one charge period to the next: its period, costs and hours.
#[derive(Clone, Copy)]
struct Varying {
    start_ms: EpochMs,
    end_ms: EpochMs,
    billed_cost: f64,
    effective_cost: Option<f64>,
    list_cost: Option<f64>,
    quantity_hours: Option<f64>,
}

/// The columns [`varying`] reads: a Parquet row's other cells are the same from one period of
/// a resource to the next, and are parsed once per distinct set of them ([`Fixed`]).
const VARYING: [Col; 9] = [
    Col::ChargePeriodStart,
    Col::ChargePeriodEnd,
    Col::BilledCost,
    Col::ConsumedQuantity,
    Col::ConsumedUnit,
    Col::PricingQuantity,
    Col::PricingUnit,
    Col::EffectiveCost,
    Col::ListCost,
];

/// Parse a row's period, costs and hours (`Err`: the reason and field for the skip count).
fn varying(layout: &Layout, cells: &dyn Cells, line: u64) -> Result<Varying, Skip> {
    let need = |name: Col| {
        layout
            .cell(cells, name)
            .ok_or_else(|| ("missing_value", format!("line {line}: {name} is empty")))
    };
    let optional_cost = |name: Col| {
        layout
            .cell(cells, name)
            .map(|v| cost(line, name, v))
            .transpose()
    };
    let start_ms = timestamp(line, Col::ChargePeriodStart, need(Col::ChargePeriodStart)?)?;
    let end_ms = timestamp(line, Col::ChargePeriodEnd, need(Col::ChargePeriodEnd)?)?;
    if end_ms <= start_ms {
        return Err((
            "bad_period",
            format!("line {line}: ChargePeriodEnd is not after ChargePeriodStart"),
        ));
    }
    let billed_cost = cost(line, Col::BilledCost, need(Col::BilledCost)?)?;
    let quantity = |q: Col, u: Col| -> Result<Option<f64>, Skip> {
        let (Some(v), Some(unit)) = (layout.cell(cells, q), layout.text(cells, u)) else {
            return Ok(None);
        };
        if !is_hours(unit) {
            return Ok(None);
        }
        number(line, q, v).map(Some)
    };
    let quantity_hours = match quantity(Col::ConsumedQuantity, Col::ConsumedUnit)? {
        Some(h) => Some(h),
        None => quantity(Col::PricingQuantity, Col::PricingUnit)?,
    };
    Ok(Varying {
        start_ms,
        end_ms,
        billed_cost,
        effective_cost: optional_cost(Col::EffectiveCost)?,
        list_cost: optional_cost(Col::ListCost)?,
        quantity_hours,
    })
}

/// What a row charges for and to whom: every field of [`BillRow`] but the [`Varying`] ones.
#[derive(Clone, Copy)]
struct Fixed<'a> {
    charge_category: &'a str,
    currency: &'a str,
    pricing_category: Option<&'a str>,
    resource_id: Option<&'a str>,
    resource_name: Option<&'a str>,
    resource_type: Option<&'a str>,
    service_category: Option<&'a str>,
    sku_price_id: Option<&'a str>,
    instance_type: Option<(&'a str, &'static str)>,
    gpu_count: Option<f64>,
    region: Option<&'a str>,
    provider: Option<&'a str>,
    tags: &'a [(String, String)],
    description: Option<&'a str>,
}

/// Parse the cells of a row that are not [`Varying`] (`Err`: the reason and field for the skip
/// count). The JSON cells are parsed once per text, in `parsed`.
fn fixed<'a>(
    layout: &Layout,
    cells: &'a dyn Cells,
    line: u64,
    parsed: &'a mut Parsed,
) -> Result<Fixed<'a>, Skip> {
    let need_text = |name: Col| {
        layout
            .text(cells, name)
            .ok_or_else(|| ("missing_value", format!("line {line}: {name} is empty")))
    };
    let text = |name: Col| layout.text(cells, name);
    let charge_category = need_text(Col::ChargeCategory)?;
    let currency = need_text(Col::BillingCurrency)?;
    // The JSON cells, parsed once per text; the row borrows what they said.
    let details = layout
        .text(cells, Col::SkuPriceDetails)
        .map(|v| parsed.details.index(v, parse_details));
    let tags = layout
        .text(cells, Col::Tags)
        .map(|v| parsed.tags.index(v, parse_tags));
    let parsed: &'a Parsed = parsed;
    let details = details
        .map(|i| parsed.details.values[i].clone_ref())
        .unwrap_or_default();
    let (instance_type, gpu_count) = instance_of(layout, cells, line, details)?;
    let tags: &'a [(String, String)] = match tags {
        None => &[],
        Some(i) => parsed.tags.values[i].as_deref().ok_or_else(|| {
            (
                "bad_tags",
                format!("line {line}: Tags is not a flat JSON object"),
            )
        })?,
    };
    Ok(Fixed {
        charge_category,
        currency,
        pricing_category: text(Col::PricingCategory),
        resource_id: text(Col::ResourceId),
        resource_name: text(Col::ResourceName),
        resource_type: text(Col::ResourceType),
        service_category: text(Col::ServiceCategory),
        sku_price_id: text(Col::SkuPriceId),
        instance_type,
        gpu_count,
        region: text(Col::RegionId),
        provider: text(Col::ProviderName),
        tags,
        description: text(Col::ChargeDescription),
    })
}

impl<'a> Fixed<'a> {
    /// The row of line `line` with these fixed fields and `v`.
    fn row(self, line: u64, v: Varying, same_as: Option<u64>) -> BillRow<'a> {
        BillRow {
            line,
            charge_category: self.charge_category,
            currency: self.currency,
            start_ms: v.start_ms,
            end_ms: v.end_ms,
            billed_cost: v.billed_cost,
            effective_cost: v.effective_cost,
            list_cost: v.list_cost,
            quantity_hours: v.quantity_hours,
            pricing_category: self.pricing_category,
            resource_id: self.resource_id,
            resource_name: self.resource_name,
            resource_type: self.resource_type,
            service_category: self.service_category,
            sku_price_id: self.sku_price_id,
            instance_type: self.instance_type,
            gpu_count: self.gpu_count,
            region: self.region,
            provider: self.provider,
            tags: self.tags,
            description: self.description,
            same_as,
        }
    }

    /// Bytes of text it names (what [`Fixed::to_owned`] copies).
    fn text_len(&self) -> usize {
        let len = |s: Option<&str>| s.map_or(0, str::len);
        self.charge_category.len()
            + self.currency.len()
            + [
                self.pricing_category,
                self.resource_id,
                self.resource_name,
                self.resource_type,
                self.service_category,
                self.sku_price_id,
                self.region,
                self.provider,
                self.description,
                self.instance_type.map(|(t, _)| t),
            ]
            .into_iter()
            .map(len)
            .sum::<usize>()
            + self
                .tags
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }

    /// An owned copy, to be held past the cells it was read from.
    fn to_owned(self) -> FixedOwned {
        let own = |s: Option<&str>| s.map(str::to_owned);
        FixedOwned {
            charge_category: self.charge_category.to_owned(),
            currency: self.currency.to_owned(),
            pricing_category: own(self.pricing_category),
            resource_id: own(self.resource_id),
            resource_name: own(self.resource_name),
            resource_type: own(self.resource_type),
            service_category: own(self.service_category),
            sku_price_id: own(self.sku_price_id),
            instance_type: self.instance_type.map(|(t, from)| (t.to_owned(), from)),
            gpu_count: self.gpu_count,
            region: own(self.region),
            provider: own(self.provider),
            tags: self.tags.to_vec(),
            description: own(self.description),
        }
    }
}

/// [`Fixed`], owned.
struct FixedOwned {
    charge_category: String,
    currency: String,
    pricing_category: Option<String>,
    resource_id: Option<String>,
    resource_name: Option<String>,
    resource_type: Option<String>,
    service_category: Option<String>,
    sku_price_id: Option<String>,
    instance_type: Option<(String, &'static str)>,
    gpu_count: Option<f64>,
    region: Option<String>,
    provider: Option<String>,
    tags: Vec<(String, String)>,
    description: Option<String>,
}

impl FixedOwned {
    fn fixed(&self) -> Fixed<'_> {
        Fixed {
            charge_category: &self.charge_category,
            currency: &self.currency,
            pricing_category: self.pricing_category.as_deref(),
            resource_id: self.resource_id.as_deref(),
            resource_name: self.resource_name.as_deref(),
            resource_type: self.resource_type.as_deref(),
            service_category: self.service_category.as_deref(),
            sku_price_id: self.sku_price_id.as_deref(),
            instance_type: self
                .instance_type
                .as_ref()
                .map(|(t, from)| (t.as_str(), *from)),
            gpu_count: self.gpu_count,
            region: self.region.as_deref(),
            provider: self.provider.as_deref(),
            tags: &self.tags,
            description: self.description.as_deref(),
        }
    }
}

/// Parse one row's cells (`Err`: the reason and field for the skip count): its period, costs
/// and hours first, then the rest.
fn parse_row<'a>(
    layout: &Layout,
    cells: &'a dyn Cells,
    line: u64,
    parsed: &'a mut Parsed,
) -> Result<BillRow<'a>, Skip> {
    let v = varying(layout, cells, line)?;
    Ok(fixed(layout, cells, line, parsed)?.row(line, v, None))
}

/// An instance type with the column it was read from, and GPUs per instance.
type Stated<'a> = (Option<(&'a str, &'static str)>, Option<f64>);

/// The instance type and GPU count a row states: `SkuPriceDetails` (`InstanceType`,
/// `GpuCount`, or their `x_` forms), else the `x_InstanceType` and `x_GpuCount` columns. A GPU
/// count that is stated but not a whole number 0–128 skips the row (`bad_gpu_count`).
fn instance_of<'a>(
    layout: &Layout,
    cells: &'a dyn Cells,
    line: u64,
    details: DetailsRef<'a>,
) -> Result<Stated<'a>, Skip> {
    let instance_type = match details.instance_type {
        Some(t) => Some((t, "SkuPriceDetails")),
        None => layout
            .text(cells, Col::XInstanceType)
            .map(|s| (s, "x_InstanceType")),
    };
    let from_details = match details.gpu_count {
        Some(v) => gpu_count(line, "SkuPriceDetails", v)?,
        None => None,
    };
    let gpus = match from_details {
        Some(g) => Some(g),
        None => match layout.text(cells, Col::XGpuCount) {
            Some(v) => gpu_count(line, "x_GpuCount", &serde_json::Value::String(v.to_owned()))?,
            None => None,
        },
    };
    Ok((instance_type, gpus))
}

/// [`Details`] borrowed.
#[derive(Clone, Copy, Default)]
struct DetailsRef<'a> {
    instance_type: Option<&'a str>,
    gpu_count: Option<&'a serde_json::Value>,
}

impl Details {
    fn clone_ref(&self) -> DetailsRef<'_> {
        DetailsRef {
            instance_type: self.instance_type.as_deref(),
            gpu_count: self.gpu_count.as_ref(),
        }
    }
}

/// A flat JSON object's values as text (`null` values left out), sorted by key; `None` if not
/// an object.
fn parse_tags(v: &str) -> Option<Vec<(String, String)>> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(v).ok()?;
    let tags: BTreeMap<String, String> = map
        .into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some((k, s)),
            other => Some((k, other.to_string())),
        })
        .collect();
    Some(tags.into_iter().collect())
}

fn fold_row(
    layout: &Layout,
    cells: &dyn Cells,
    line: u64,
    tally: &mut ReadTally,
    parsed: &mut Parsed,
    sink: &mut dyn FnMut(BillRow<'_>),
) {
    tally.rows += 1;
    match parse_row(layout, cells, line, parsed) {
        Ok(row) => sink(row),
        Err((reason, example)) => tally.skips.add(reason, || example),
    }
}

/// The separator of a CSV bill, read off its header line (the first that is not empty): `,`
/// unless `;`, a tab or `|` occurs more often there (European spreadsheets write `;`, some
/// tools tabs).
fn sniff_delimiter(head: &[u8]) -> u8 {
    let line = head
        .split(|&b| b == b'\n')
        .find(|l| !l.trim_ascii().is_empty())
        .unwrap_or_default();
    let count = |d: u8| line.iter().filter(|&&b| b == d).count();
    let mut best = (count(b','), b',');
    for d in [b';', b'\t', b'|'] {
        if count(d) > best.0 {
            best = (count(d), d);
        }
    }
    best.1
}

/// Read a FOCUS CSV export (already decompressed), handing each row to `sink`. A record whose
/// cells do not match the header in number is skipped (`wrong_column_count`), one over
/// [`MAX_LINE`] bytes too (`record_too_long`). The same reading as [`CsvBlocks`] in one thread.
///
/// # Errors
/// [`FocusError::MissingColumns`] when the header lacks [`REQUIRED`] columns,
/// [`FocusError::DuplicateColumn`] when it has one twice, [`FocusError::Csv`] when the CSV
/// itself is broken (a header over [`MAX_LINE`] bytes included).
pub fn read_csv(
    reader: impl BufRead,
    origin: &str,
    sink: &mut dyn FnMut(BillRow<'_>),
) -> Result<ReadTally, FocusError> {
    let mut blocks = CsvBlocks::open(reader, origin)?;
    let mut tally = blocks.header().tally();
    while let Some(block) = blocks.next_block(BLOCK)? {
        tally.add(blocks.header().read_block(&block, origin, sink)?);
    }
    tally.add(blocks.finish());
    Ok(tally)
}

/// Bytes of whole records a block of a CSV bill holds (about 20,000 rows of a FOCUS export).
pub const BLOCK: usize = 4 << 20;

/// A CSV bill as blocks of whole records, so that blocks can be read apart — in parallel,
/// each into its own builder — and joined in order: the header is read once
/// ([`CsvBlocks::header`]), then [`CsvBlocks::next_block`] cuts the rest at record ends
/// (quote-aware: a quoted cell may span lines), and [`CsvHeader::read_block`] reads a block.
pub struct CsvBlocks<R> {
    records: RecordLimit<R>,
    header: CsvHeader,
    origin: String,
}

/// What every block of a CSV bill is read against: its columns, their number and separator.
#[derive(Clone, Debug)]
pub struct CsvHeader {
    layout: Layout,
    columns: usize,
    delimiter: u8,
    version: &'static str,
    /// Whether a row's cells are parsed once per distinct text ([`TextMemo`]); off only to
    /// test it against each row parsed alone.
    remember: bool,
}

/// Whole records of a CSV bill, and the line the first starts on.
#[derive(Debug)]
pub struct CsvBlock {
    bytes: Vec<u8>,
    first_line: u64,
}

impl<R: BufRead> CsvBlocks<R> {
    /// Read the header of a CSV bill (its separator read off the header line).
    ///
    /// # Errors
    /// As [`read_csv`]'s, for the header.
    pub fn open(mut reader: R, origin: &str) -> Result<Self, FocusError> {
        let broken = |line: u64, message: String| FocusError::Csv {
            origin: origin.to_owned(),
            line,
            message,
        };
        let head = reader.fill_buf().map_err(|e| broken(1, e.to_string()))?;
        let delimiter = sniff_delimiter(head);
        let mut records = RecordLimit::new(reader, MAX_LINE, delimiter);
        let mut first = Vec::new();
        records
            .fill_header(&mut first)
            .map_err(|e| broken(1, e.to_string()))?;
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .delimiter(delimiter)
            .from_reader(first.as_slice());
        let header: Vec<String> = csv
            .headers()
            .map_err(|e| broken(1, e.to_string()))?
            .iter()
            .map(str::to_owned)
            .collect();
        let (layout, version) = Layout::new(&header, origin)?;
        Ok(Self {
            records,
            origin: origin.to_owned(),
            header: CsvHeader {
                layout,
                columns: header.len(),
                delimiter,
                version,
                remember: true,
            },
        })
    }

    /// What the blocks are read against.
    pub fn header(&self) -> &CsvHeader {
        &self.header
    }

    /// The next block of at least `target` bytes of whole records (less at the end), `None`
    /// at the end.
    ///
    /// # Errors
    /// [`FocusError::Csv`] when the input cannot be read.
    pub fn next_block(&mut self, target: usize) -> Result<Option<CsvBlock>, FocusError> {
        let first_line = self.records.line();
        let mut bytes = Vec::with_capacity(target.saturating_add(target / 8));
        let more = self
            .records
            .fill_block(&mut bytes, target)
            .map_err(|e| FocusError::Csv {
                origin: self.origin.clone(),
                line: first_line,
                message: e.to_string(),
            })?;
        Ok(more.then_some(CsvBlock { bytes, first_line }))
    }

    /// The records dropped for their length (over [`MAX_LINE`] bytes), as rows skipped: the
    /// last part of the tally, once every block is read.
    #[must_use]
    pub fn finish(self) -> ReadTally {
        let mut tally = ReadTally::default();
        for &line in &self.records.dropped {
            tally.rows += 1;
            tally.skips.add("record_too_long", || {
                format!("line {line}: a row longer than {MAX_LINE} bytes")
            });
        }
        tally
    }
}

impl CsvHeader {
    /// An empty tally of this bill (its version and separator).
    #[must_use]
    pub fn tally(&self) -> ReadTally {
        ReadTally {
            version: self.version,
            delimiter: Some(self.delimiter),
            ..ReadTally::default()
        }
    }

    /// Read one block, handing each row to `sink`.
    ///
    /// # Errors
    /// [`FocusError::Csv`] when the CSV is broken (naming `origin` and the line).
    pub fn read_block(
        &self,
        block: &CsvBlock,
        origin: &str,
        sink: &mut dyn FnMut(BillRow<'_>),
    ) -> Result<ReadTally, FocusError> {
        let at = |line: u64| block.first_line + line.saturating_sub(1);
        let mut tally = ReadTally::default();
        let mut parsed = Parsed::default();
        // The common shape split without the `csv` crate; from the first record it is not
        // sure of, the crate reads on (reading the block from its start, the records already
        // folded passed over: a reader started mid-text drops a byte-order mark there).
        let mut split = Splitter::new(&block.bytes, self.delimiter);
        let mut memo = self.remember.then(|| TextMemo::new(&self.layout));
        let mut done = loop {
            match split.split() {
                Split::End => return Ok(tally),
                Split::Record(line, record) => match &mut memo {
                    Some(memo) if record.len() == self.columns => {
                        let layout = &self.layout;
                        memo.fold(layout, &record, at(line), &mut tally, &mut parsed, sink);
                    }
                    _ => {
                        let n = record.len();
                        self.fold_record(&record, n, at(line), &mut tally, &mut parsed, sink);
                    }
                },
                Split::Unsure { records } => break records,
            }
        };
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(self.delimiter)
            .from_reader(block.bytes.as_slice());
        let mut record = csv::StringRecord::new();
        loop {
            match csv.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    return Err(FocusError::Csv {
                        origin: origin.to_owned(),
                        line: at(e
                            .position()
                            .map_or(1, |p| record_line(&block.bytes, p, None))),
                        message: e.to_string(),
                    });
                }
            }
            if done > 0 {
                done -= 1;
                continue;
            }
            let line = at(record
                .position()
                .map_or(1, |p| record_line(&block.bytes, p, None)));
            let n = record.len();
            self.fold_record(&record, n, line, &mut tally, &mut parsed, sink);
        }
        Ok(tally)
    }

    /// Fold one record of `n` cells, skipping it when they are not the header's number.
    fn fold_record(
        &self,
        record: &dyn Cells,
        n: usize,
        line: u64,
        tally: &mut ReadTally,
        parsed: &mut Parsed,
        sink: &mut dyn FnMut(BillRow<'_>),
    ) {
        let m = self.columns;
        if n != m {
            tally.rows += 1;
            tally.skips.add("wrong_column_count", || {
                format!("line {line}: {n} cell(s) where the header has {m}")
            });
            return;
        }
        fold_row(&self.layout, record, line, tally, parsed, sink);
    }
}

impl ReadTally {
    /// Add the tally of the rows after these (a later block or row group).
    pub fn add(&mut self, later: ReadTally) {
        self.rows += later.rows;
        self.skips.absorb(later.skips);
    }
}

/// Read a FOCUS Parquet export, handing each row to `sink`. Maps (`Tags` as
/// `map<string,string>`, as some exports write it) and structs become JSON objects; decimals,
/// timestamps (milli-, micro- and nanoseconds) and dates become the text the CSV path reads.
/// The same reading as [`ParquetBill`] in one thread.
///
/// # Errors
/// [`FocusError::Parquet`] when the file is not Parquet, a page cannot be decoded or a column
/// chunk is over [`MAX_CHUNK`], [`FocusError::MissingColumns`] and
/// [`FocusError::DuplicateColumn`] as for CSV.
pub fn read_parquet<R: parquet::file::reader::ChunkReader + 'static>(
    data: R,
    origin: &str,
    sink: &mut dyn FnMut(BillRow<'_>),
) -> Result<ReadTally, FocusError> {
    let bill = ParquetBill::open(data, origin)?;
    let mut tally = bill.tally();
    for part in 0..bill.parts() {
        tally.add(bill.read_part(part, sink)?);
    }
    Ok(tally)
}

/// The `parquet` crate asserts on some corrupt metadata instead of returning an error
/// (fuzzing found "column start and length should not be negative", parquet 60.1). A corrupt
/// bill must be an error naming the file, never a crash: the decoder runs inside
/// `catch_unwind`, and a panic becomes [`FocusError::Parquet`].
fn guarded<T>(origin: &str, f: impl FnOnce() -> Result<T, FocusError>) -> Result<T, FocusError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".to_owned());
        Err(FocusError::Parquet {
            origin: origin.to_owned(),
            message: format!("the decoder failed on corrupt data ({why})"),
        })
    })
}

/// A FOCUS Parquet bill in parts that can be read apart — in parallel, each into its own
/// builder — and joined in order: one part per row group (its wanted columns decoded
/// [`BATCH`] rows at a time), or one part for the whole file when a column the ledger reads is
/// nested (the row API assembles those, row by row).
pub struct ParquetBill<R: parquet::file::reader::ChunkReader> {
    reader: parquet::file::serialized_reader::SerializedFileReader<R>,
    origin: String,
    header: Vec<String>,
    layout: Layout,
    version: &'static str,
    /// Per column the ledger reads: its header position and its leaf column (`None`: nested).
    wanted: Vec<(usize, Option<usize>)>,
    /// Per header position: a leaf column of nanosecond timestamps (the row API hands those
    /// out as plain integers).
    nanos: Vec<bool>,
    /// Read every row group through the crate's column reader (tests compare the two paths).
    by_values: bool,
}

impl<R: parquet::file::reader::ChunkReader + 'static> ParquetBill<R> {
    /// Read the footer and check the columns and the size of every column chunk.
    ///
    /// # Errors
    /// As [`read_parquet`]'s, for the footer.
    pub fn open(data: R, origin: &str) -> Result<Self, FocusError> {
        guarded(origin, || Self::open_unguarded(data, origin))
    }

    fn broken(&self, message: String) -> FocusError {
        FocusError::Parquet {
            origin: self.origin.clone(),
            message,
        }
    }

    fn open_unguarded(data: R, origin: &str) -> Result<Self, FocusError> {
        use parquet::file::reader::FileReader;
        let broken = |message: String| FocusError::Parquet {
            origin: origin.to_owned(),
            message,
        };
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(data)
            .map_err(|e| broken(e.to_string()))?;
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let header: Vec<String> = schema
            .root_schema()
            .get_fields()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        let (layout, version) = Layout::new(&header, origin)?;
        // Bounded before anything is decoded: a page is at most its column chunk.
        for (g, group) in reader.metadata().row_groups().iter().enumerate() {
            for c in group.columns() {
                if !(0..=MAX_CHUNK).contains(&c.uncompressed_size()) {
                    return Err(broken(format!(
                        "row group {g}, column {}: {} bytes uncompressed, over the {MAX_CHUNK} a column chunk may hold here; write the bill with smaller row groups",
                        c.column_path(),
                        c.uncompressed_size()
                    )));
                }
            }
        }
        // The leaf column of each top-level primitive field: those are read column by column.
        let leaf: BTreeMap<&str, usize> = schema
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.path().parts().len() == 1)
            .map(|(i, c)| (c.name(), i))
            .collect();
        let wanted: Vec<(usize, Option<usize>)> = layout
            .positions()
            .map(|h| (h, leaf.get(header[h].as_str()).copied()))
            .collect();
        let nanos: Vec<bool> = header
            .iter()
            .map(|h| {
                leaf.get(h.as_str())
                    .is_some_and(|&l| is_nanos(&schema.column(l)))
            })
            .collect();
        Ok(Self {
            reader,
            origin: origin.to_owned(),
            header,
            layout,
            version,
            wanted,
            nanos,
            by_values: false,
        })
    }

    /// An empty tally of this bill (its version).
    #[must_use]
    pub fn tally(&self) -> ReadTally {
        ReadTally {
            version: self.version,
            ..ReadTally::default()
        }
    }

    fn nested(&self) -> bool {
        self.wanted.iter().any(|(_, l)| l.is_none())
    }

    /// How many parts the bill is read in.
    #[must_use]
    pub fn parts(&self) -> usize {
        use parquet::file::reader::FileReader;
        if self.nested() {
            1
        } else {
            self.reader.num_row_groups()
        }
    }

    /// Read part `part`, handing each row to `sink`.
    ///
    /// # Errors
    /// [`FocusError::Parquet`] when a page cannot be decoded.
    pub fn read_part(
        &self,
        part: usize,
        sink: &mut dyn FnMut(BillRow<'_>),
    ) -> Result<ReadTally, FocusError> {
        guarded(&self.origin, || {
            if self.nested() {
                self.read_rows(sink)
            } else {
                self.read_group(part, sink)
            }
        })
    }

    /// The whole file through the row API (a wanted column is nested). Nanosecond timestamps
    /// come out of it as plain integers; the leaf's logical type says which.
    fn read_rows(&self, sink: &mut dyn FnMut(BillRow)) -> Result<ReadTally, FocusError> {
        use parquet::file::reader::FileReader;
        let nanos = &self.nanos;
        let mut cells: Vec<Value> = vec![Value::Null; self.header.len()];
        let mut tally = ReadTally::default();
        let mut parsed = Parsed::default();
        let rows = self
            .reader
            .get_row_iter(None)
            .map_err(|e| self.broken(e.to_string()))?;
        for (n, row) in rows.enumerate() {
            let row = row.map_err(|e| self.broken(e.to_string()))?;
            for (i, (_, f)) in row.get_column_iter().enumerate() {
                if let Some(c) = cells.get_mut(i) {
                    *c = match f {
                        parquet::record::Field::Long(v) if nanos[i] => nanos_text(*v),
                        f => field_text(f),
                    }
                    .map_or(Value::Null, Value::Text);
                }
            }
            fold_cells(
                &self.layout,
                &cells.as_slice(),
                long_cell(&self.layout, &cells),
                n as u64 + 2,
                &mut tally,
                &mut parsed,
                sink,
            );
        }
        Ok(tally)
    }

    /// How the column at header position `h` is read.
    fn typed(&self, h: usize) -> Typed {
        Col::ALL
            .iter()
            .find(|c| self.layout.index[**c as usize] == Some(h))
            .map_or(Typed::Text, |c| Typed::of(*c))
    }

    /// Row group `g`, [`BATCH`] rows at a time: as keys into its columns' distinct values
    /// ([`crate::pages`]) where every column it reads is one that module reads, else through
    /// the crate's column reader.
    fn read_group(&self, g: usize, sink: &mut dyn FnMut(BillRow)) -> Result<ReadTally, FocusError> {
        use parquet::file::reader::FileReader;
        let meta = self.reader.metadata();
        // Rows before this group: a row's line is its number + 1 (as if under a header).
        let before: i64 = meta.row_groups()[..g].iter().map(|r| r.num_rows()).sum();
        let line = 1 + u64::try_from(before).unwrap_or(0);
        let group = self
            .reader
            .get_row_group(g)
            .map_err(|e| self.broken(e.to_string()))?;
        let chunks = group.metadata();
        let keyed = self
            .wanted
            .iter()
            .all(|&(_, l)| l.is_some_and(|l| crate::pages::supported(chunks.column(l))));
        if keyed && !self.by_values {
            self.read_keyed(&*group, line, sink)
        } else {
            self.read_values(&*group, line, sink)
        }
    }

    /// The columns the ledger reads of a row group, to be read as keys.
    fn keyed_columns(
        &self,
        group: &dyn parquet::file::reader::RowGroupReader,
    ) -> Result<Vec<Keyed>, FocusError> {
        let schema = group.metadata().schema_descr_ptr();
        let mut columns = Vec::with_capacity(self.wanted.len());
        for &(h, l) in &self.wanted {
            let l = l.unwrap_or_default();
            let pages = group
                .get_column_page_reader(l)
                .map_err(|e| self.broken(e.to_string()))?;
            columns.push(Keyed {
                chunk: crate::pages::Chunk::new(
                    pages,
                    group.metadata().column(l),
                    group.metadata().num_rows(),
                ),
                descr: schema.column(l),
                typed: self.typed(h),
                dictionary: Vec::new(),
                keys: Vec::with_capacity(BATCH),
                raw: Vec::new(),
                plain: Vec::new(),
                long: false,
                long_dictionary: false,
            });
        }
        Ok(columns)
    }

    /// A row group's rows as keys: each column's distinct values converted once; a row's
    /// period and costs, and the rest of its cells, parsed once per distinct set of their keys
    /// ([`Memo`]), and its cells looked up only where that set is new.
    fn read_keyed(
        &self,
        group: &dyn parquet::file::reader::RowGroupReader,
        mut line: u64,
        sink: &mut dyn FnMut(BillRow),
    ) -> Result<ReadTally, FocusError> {
        let mut columns = self.keyed_columns(group)?;
        // Which columns [`varying`] reads (the rest are the row's fixed cells).
        let varies: Vec<bool> = self
            .wanted
            .iter()
            .map(|&(h, _)| {
                VARYING
                    .iter()
                    .any(|c| self.layout.index[*c as usize] == Some(h))
            })
            .collect();
        let fixes: Vec<bool> = varies.iter().map(|v| !v).collect();
        let mut tally = ReadTally::default();
        let mut parsed = Parsed::default();
        let mut periods: Memo<Varying> = Memo::default();
        // Boxed: a slot not yet filled is a few words, not a row's worth of strings.
        let mut charged: Memo<Box<(FixedOwned, u64)>> = Memo::default();
        let (mut vids, mut fids) = (Vec::new(), Vec::new());
        loop {
            let mut n = 0;
            for c in &mut columns {
                n = n.max(c.next(BATCH).map_err(|e| self.broken(e))?);
            }
            if n == 0 {
                break;
            }
            periods.batch(&columns, &varies);
            charged.batch(&columns, &fixes);
            periods.ids(&columns, n, &mut vids);
            charged.ids(&columns, n, &mut fids);
            let long_here = columns.iter().any(|c| c.long);
            // A row's cells, looked up once each (parsing a row reads some cells twice).
            let mut cells: Vec<Option<Cell<'_>>> = vec![None; self.header.len()];
            for r in 0..n {
                line += 1;
                let long = self.wanted.iter().zip(&columns).find_map(|(&(h, _), c)| {
                    (long_here && c.long && c.value(r).is_some_and(|v| v.len() > MAX_LINE))
                        .then_some(h)
                });
                // The row's period and its fixed cells as parsed at an earlier row with the
                // same keys, when there was one.
                let (vid, fid) = (
                    vids.get(r).copied().flatten(),
                    fids.get(r).copied().flatten(),
                );
                let period = vid.and_then(|id| periods.get(id).copied());
                let charge = fid.and_then(|id| charged.get(id));
                if long.is_some() || period.is_none() || charge.is_none() {
                    for (&(h, _), c) in self.wanted.iter().zip(&columns) {
                        cells[h] = c.value(r).and_then(Value::cell);
                    }
                }
                let cells = &cells.as_slice();
                if long.is_some() {
                    let (layout, p) = (&self.layout, &mut parsed);
                    fold_cells(layout, cells, long, line, &mut tally, p, sink);
                    continue;
                }
                let Some(v) = period_or_parse(&self.layout, cells, line, period, &mut tally) else {
                    continue;
                };
                if let (Some(id), None) = (vid, period) {
                    periods.put(id, || v);
                }
                if let Some(known) = charge {
                    let (f, same_as) = &**known;
                    sink(f.fixed().row(line, v, Some(*same_as)));
                    continue;
                }
                let keep = |f: Fixed<'_>| {
                    fid.and_then(|id| charged.keep(id, |n| Box::new((f.to_owned(), n))))
                };
                fold_fixed(
                    &self.layout,
                    cells,
                    line,
                    v,
                    (&mut tally, &mut parsed),
                    keep,
                    sink,
                );
            }
        }
        Ok(tally)
    }

    /// A row group's rows through the crate's column reader, every value decoded.
    fn read_values(
        &self,
        group: &dyn parquet::file::reader::RowGroupReader,
        mut line: u64,
        sink: &mut dyn FnMut(BillRow),
    ) -> Result<ReadTally, FocusError> {
        let schema = group.metadata().schema_descr_ptr();
        let mut columns = Vec::with_capacity(self.wanted.len());
        for &(h, l) in &self.wanted {
            let l = l.unwrap_or_default();
            let col = group
                .get_column_reader(l)
                .map_err(|e| self.broken(e.to_string()))?;
            columns.push((h, col, schema.column(l), self.typed(h)));
        }
        let mut cells: Vec<Value> = vec![Value::Null; self.header.len()];
        let mut tally = ReadTally::default();
        let mut parsed = Parsed::default();
        loop {
            let mut batch: Vec<(usize, Vec<Value>)> = Vec::with_capacity(columns.len());
            for (h, col, descr, typed) in &mut columns {
                batch.push((
                    *h,
                    column_values(col, descr, *typed, BATCH)
                        .map_err(|e| self.broken(e.to_string()))?,
                ));
            }
            let n = batch.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
            if n == 0 {
                break;
            }
            for r in 0..n {
                for (h, values) in &mut batch {
                    cells[*h] = values.get_mut(r).map(std::mem::take).unwrap_or_default();
                }
                line += 1;
                fold_cells(
                    &self.layout,
                    &cells.as_slice(),
                    long_cell(&self.layout, &cells),
                    line,
                    &mut tally,
                    &mut parsed,
                    sink,
                );
            }
        }
        Ok(tally)
    }
}

/// The header position of the first cell the ledger reads that is over [`MAX_LINE`] bytes.
fn long_cell(layout: &Layout, cells: &[Value]) -> Option<usize> {
    layout
        .positions()
        .find(|&h| cells.get(h).is_some_and(|c| c.len() > MAX_LINE))
}

/// Hand on a Parquet row's cells, or skip it when a cell is over [`MAX_LINE`] bytes (`long`:
/// the header position of the first such cell).
fn fold_cells(
    layout: &Layout,
    cells: &dyn Cells,
    long: Option<usize>,
    line: u64,
    tally: &mut ReadTally,
    parsed: &mut Parsed,
    sink: &mut dyn FnMut(BillRow<'_>),
) {
    if let Some(h) = long {
        tally.rows += 1;
        tally.skips.add("cell_too_long", || {
            format!(
                "row {}: a cell of column {} is longer than {MAX_LINE} bytes",
                line - 1,
                h + 1
            )
        });
        return;
    }
    fold_row(layout, cells, line, tally, parsed, sink);
}

/// A row's period and costs (counted as a row): `known`, as remembered for the same cells, or
/// parsed from its cells; `None` when they do not parse, the skip counted.
// Inlined into both readers' row loops, as the code was before it was shared (0.5 % of the
// guard's `reconcile` instructions otherwise).
#[inline]
fn period_or_parse(
    layout: &Layout,
    cells: &dyn Cells,
    line: u64,
    known: Option<Varying>,
    tally: &mut ReadTally,
) -> Option<Varying> {
    tally.rows += 1;
    match known.map_or_else(|| varying(layout, cells, line), Ok) {
        Ok(v) => Some(v),
        Err((reason, example)) => {
            tally.skips.add(reason, || example);
            None
        }
    }
}

/// Hand on a row of period `v` whose fixed cells were not remembered: parsed, and offered to
/// `keep` when they are few enough to remember (it gives the number the rows made from them
/// share, [`BillRow::same_as`], when it kept them), or the skip counted.
#[inline]
fn fold_fixed(
    layout: &Layout,
    cells: &dyn Cells,
    line: u64,
    v: Varying,
    (tally, parsed): (&mut ReadTally, &mut Parsed),
    keep: impl FnOnce(Fixed<'_>) -> Option<u64>,
    sink: &mut dyn FnMut(BillRow<'_>),
) {
    match fixed(layout, cells, line, parsed) {
        Ok(f) => {
            let same_as = (f.text_len() <= MAX_TEXT).then(|| keep(f)).flatten();
            sink(f.row(line, v, same_as));
        }
        Err((reason, example)) => tally.skips.add(reason, || example),
    }
}

/// The most text of fixed cells one memo entry holds (a row's fixed cells of more are parsed
/// each time).
const MAX_TEXT: usize = 1024;

/// The next [`BillRow::same_as`].
static SAME_AS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What some cells of a row group's rows parse to, by their dictionary keys: the fixed cells
/// ([`Fixed`]) of a resource's hourly rows repeat its names, SKU, tags and category, and its
/// periods and costs ([`Varying`]) repeat from one resource to the next. A cache of
/// [`Memo::SLOTS`] entries, each set of keys looked for in [`Memo::WAYS`] slots only, and a new
/// one taking the least recently used of them: a lookup costs at most that many probes
/// whatever the file holds, a set met once (a storage row's own volume id) soon gives way to
/// ones that recur, and a bill whose rows never repeat is read as it would be without it.
struct Memo<T> {
    slots: Vec<Option<Slot<T>>>,
    /// Lookups so far (the clock of "least recently used").
    clock: u64,
    /// Each column's place value in a set's number: the keys of the columns in the set written
    /// as the digits of a mixed-radix number, column `c`'s digit running over its dictionary's
    /// entries and null, so that two sets of keys have one number only if they are the same.
    /// 0 for a column not in the set; empty when the product of the radices passes `u128` (no
    /// memo then).
    place: Vec<u128>,
}

struct Slot<T> {
    id: u128,
    used: u64,
    /// `None`: met once.
    value: Option<T>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            clock: 0,
            place: Vec::new(),
        }
    }
}

impl<T> Memo<T> {
    const SLOTS_BITS: u32 = 13;
    const SLOTS: usize = 1 << Self::SLOTS_BITS;
    const WAYS: usize = 8;

    /// Take the place values of a new batch's columns (`member`: those in the set); their
    /// dictionaries are read with their first page, so they change only then, and what was
    /// remembered under others is forgotten.
    fn batch(&mut self, columns: &[Keyed], member: &[bool]) {
        let mut next = Some(1u128);
        let place: Option<Vec<u128>> = columns
            .iter()
            .zip(member)
            .map(|(c, &m)| {
                if !m {
                    return Some(0);
                }
                let here = next?;
                next = here.checked_mul(c.dictionary.len() as u128 + 1);
                Some(here)
            })
            .collect();
        let place = place.filter(|_| next.is_some()).unwrap_or_default();
        if place != self.place {
            self.slots.clear();
            self.slots.resize_with(Self::SLOTS, || None);
            self.place = place;
        }
    }

    /// The numbers of the batch's `n` rows' sets of keys, column by column, into `ids`: `None`
    /// for a row where a cell of the set is a plain value (no key), all `None` when there is
    /// no memo.
    fn ids(&self, columns: &[Keyed], n: usize, ids: &mut Vec<Option<u128>>) {
        use crate::pages::{NULL, PLAIN};
        ids.clear();
        ids.resize(n, (!self.place.is_empty()).then_some(0));
        // In 64 bits where the numbers fit there (a third of the multiplications).
        let narrow = self.place.iter().all(|&p| p <= u128::from(u32::MAX));
        for (c, &place) in columns.iter().zip(&self.place) {
            if place == 0 {
                continue;
            }
            let null = u32::try_from(c.dictionary.len()).unwrap_or(u32::MAX);
            for (id, &k) in ids.iter_mut().zip(&c.keys) {
                let digit = match k {
                    NULL => null,
                    k if k & PLAIN != 0 => {
                        *id = None;
                        continue;
                    }
                    k => k,
                };
                if let Some(id) = id {
                    *id += if narrow {
                        // Both below 2³²: the product fits 64 bits.
                        #[allow(clippy::cast_possible_truncation)]
                        let p = u64::from(digit) * place as u64;
                        u128::from(p)
                    } else {
                        u128::from(digit) * place
                    };
                }
            }
            // A column shorter than the batch (its chunk ended early) has no key there.
            for id in ids.iter_mut().skip(c.keys.len()) {
                *id = None;
            }
        }
    }

    /// A memo of sets numbered by their text's hash ([`TextMemo`]), not by dictionary keys.
    fn for_text() -> Self {
        let mut memo = Self::default();
        memo.slots.resize_with(Self::SLOTS, || None);
        memo
    }

    /// The first slot number `id` may sit in (Fibonacci hashing of its two halves).
    fn home(id: u128) -> usize {
        #[allow(clippy::cast_possible_truncation)]
        let folded = (id as u64) ^ ((id >> 64) as u64);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - Self::SLOTS_BITS)) as usize
    }

    fn ways(id: u128) -> impl Iterator<Item = usize> {
        let home = Self::home(id);
        (0..Self::WAYS).map(move |w| (home + w) & (Self::SLOTS - 1))
    }

    /// The slot holding `id`, marked used.
    fn find(&mut self, id: u128) -> Option<&mut Slot<T>> {
        self.clock += 1;
        let clock = self.clock;
        let held = |i: &usize| matches!(self.slots.get(*i), Some(Some(s)) if s.id == id);
        let at = Self::ways(id).find(held)?;
        let slot = self.slots.get_mut(at)?.as_mut()?;
        slot.used = clock;
        Some(slot)
    }

    fn get(&mut self, id: u128) -> Option<&T> {
        self.find(id)?.value.as_ref()
    }

    /// [`Memo::put`] for a set of fixed cells, what `make` makes numbered for
    /// [`BillRow::same_as`]: the number, when it was made.
    fn keep(&mut self, id: u128, make: impl FnOnce(u64) -> T) -> Option<u64> {
        let mut kept = None;
        self.put(id, || {
            let n = SAME_AS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            kept = Some(n);
            make(n)
        });
        kept
    }

    /// Remember what `id` makes, the second time it is met without it: the first time only
    /// that it was met (a set met once, a storage row's own volume id, costs no copy).
    fn put(&mut self, id: u128, make: impl FnOnce() -> T) {
        if let Some(slot) = self.find(id) {
            slot.value = Some(make());
            return;
        }
        let used = |i: &usize| match self.slots.get(*i) {
            Some(Some(s)) => s.used,
            _ => 0,
        };
        let at = Self::ways(id).min_by_key(used);
        if let Some(slot) = at.and_then(|at| self.slots.get_mut(at)) {
            *slot = Some(Slot {
                id,
                used: self.clock,
                value: None,
            });
        }
    }
}

/// A set of fixed cells remembered: their text, what they say, and the number the rows made
/// from them share ([`BillRow::same_as`]). Boxed: a slot not yet filled is a few words.
type Charged = Box<(Box<[u8]>, FixedOwned, u64)>;

/// The memos of a CSV block: a row's period and costs ([`Varying`]), and its other cells
/// ([`Fixed`]), parsed once per distinct text of those cells, as the Parquet reader does per
/// distinct set of dictionary keys. A set's number is a hash of its cells' text as written
/// (each run of neighbouring cells in the set with its length), and the text is kept beside
/// what it made and compared on every hit: two texts that hash alike only miss each other,
/// never share an entry.
struct TextMemo {
    /// The header positions of the cells [`varying`] reads, and of the rest the ledger reads,
    /// as runs of neighbours (first and last): a run's cells are keyed by their text as
    /// written ([`Record::written`]), one copy a run rather than one a cell.
    varies: Vec<(usize, usize)>,
    fixes: Vec<(usize, usize)>,
    periods: Memo<(Box<[u8]>, Varying)>,
    charged: Memo<Charged>,
    /// The text of the set being looked up.
    key: Vec<u8>,
}

impl TextMemo {
    fn new(layout: &Layout) -> Self {
        let (mut varies, mut fixes) = (Vec::new(), Vec::new());
        for col in Col::ALL {
            if let Some(h) = layout.index[col as usize] {
                if VARYING.contains(&col) {
                    varies.push(h);
                } else {
                    fixes.push(h);
                }
            }
        }
        Self {
            varies: runs(varies),
            fixes: runs(fixes),
            periods: Memo::for_text(),
            charged: Memo::for_text(),
            key: Vec::new(),
        }
    }

    /// The number of `record`'s cells in the runs of `columns`, their text (each run's length
    /// in four bytes, a record being at most `MAX_LINE`, then the run as written) left in
    /// `key`.
    fn number(key: &mut Vec<u8>, record: &Record<'_>, columns: &[(usize, usize)]) -> u128 {
        use std::hash::Hasher;
        key.clear();
        for &(first, last) in columns {
            let run = record.written(first, last).unwrap_or_default();
            let len = u32::try_from(run.len()).unwrap_or(u32::MAX);
            key.extend_from_slice(&len.to_le_bytes());
            key.extend_from_slice(run);
        }
        let mut hash = rustc_hash::FxHasher::default();
        hash.write(key);
        u128::from(hash.finish())
    }

    /// Fold one record of the header's number of cells, as [`fold_row`] does.
    fn fold(
        &mut self,
        layout: &Layout,
        record: &Record<'_>,
        line: u64,
        tally: &mut ReadTally,
        parsed: &mut Parsed,
        sink: &mut dyn FnMut(BillRow<'_>),
    ) {
        let vid = Self::number(&mut self.key, record, &self.varies);
        let known = match self.periods.get(vid) {
            Some((text, v)) if **text == *self.key => Some(*v),
            _ => None,
        };
        let Some(v) = period_or_parse(layout, record, line, known, tally) else {
            return;
        };
        if known.is_none() {
            let key = &self.key;
            self.periods.put(vid, || (key.as_slice().into(), v));
        }
        let fid = Self::number(&mut self.key, record, &self.fixes);
        if let Some(known) = self.charged.get(fid)
            && *known.0 == *self.key
        {
            sink(known.1.fixed().row(line, v, Some(known.2)));
            return;
        }
        let (key, charged) = (&self.key, &mut self.charged);
        let keep = |f: Fixed<'_>| {
            charged.keep(fid, |n| Box::new((key.as_slice().into(), f.to_owned(), n)))
        };
        fold_fixed(layout, record, line, v, (tally, parsed), keep, sink);
    }
}

/// Header positions, sorted, as runs of neighbours: `[1, 2, 3, 7]` → `[(1, 3), (7, 7)]`.
fn runs(mut positions: Vec<usize>) -> Vec<(usize, usize)> {
    positions.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for h in positions {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == h => *last = h,
            _ => out.push((h, h)),
        }
    }
    out
}

/// A column of a row group read as keys ([`crate::pages`]): its dictionary converted once,
/// the batch's plain values as they come.
struct Keyed {
    chunk: crate::pages::Chunk,
    descr: parquet::schema::types::ColumnDescPtr,
    typed: Typed,
    /// The chunk's dictionary, converted: a string entry as owned text (checked as UTF-8 once).
    dictionary: Vec<Value>,
    keys: Vec<u32>,
    raw: Vec<crate::pages::Raw>,
    plain: Vec<Value>,
    /// Whether a value of this batch may be over [`MAX_LINE`] bytes (a row is then checked).
    long: bool,
    /// Whether a dictionary entry is.
    long_dictionary: bool,
}

impl Keyed {
    /// The next up to `max` rows' keys; the rows read.
    fn next(&mut self, max: usize) -> Result<usize, String> {
        let n = self
            .chunk
            .read(max, &mut self.keys, &mut self.raw)
            .map_err(|e| format!("column {}: {e}", self.descr.name()))?;
        let convert = |v| {
            from_raw(&self.descr, self.typed, v)
                .map_err(|e| format!("column {}: {e}", self.descr.name()))
        };
        if self.dictionary.len() != self.chunk.dictionary.len() {
            self.dictionary = self
                .chunk
                .dictionary
                .iter()
                .map(|v| {
                    convert(v.clone()).map(|v| match v {
                        // Checked as UTF-8 by `from_bytes` already.
                        Value::Bytes(b) => {
                            Value::Text(String::from_utf8_lossy(b.data()).into_owned())
                        }
                        v => v,
                    })
                })
                .collect::<Result<_, _>>()?;
            self.long_dictionary = self.dictionary.iter().any(|v| v.len() > MAX_LINE);
        }
        self.plain = self.raw.drain(..).map(convert).collect::<Result<_, _>>()?;
        let over = |v: &Value| v.len() > MAX_LINE;
        self.long = self.long_dictionary || self.plain.iter().any(over);
        Ok(n)
    }

    /// Row `r`'s value; `None` for a null.
    fn value(&self, r: usize) -> Option<&Value> {
        use crate::pages::{NULL, PLAIN};
        match *self.keys.get(r)? {
            NULL => None,
            k if k & PLAIN != 0 => self.plain.get((k & !PLAIN) as usize),
            k => self.dictionary.get(k as usize),
        }
    }
}

/// A row's cells, by header position.
impl Cells for &[Option<Cell<'_>>] {
    fn at(&self, i: usize) -> Option<Cell<'_>> {
        self.get(i).copied().flatten()
    }
}

/// Whether a leaf column holds timestamps in nanoseconds (pyarrow's and pandas' default),
/// which the crate's conversion leaves as plain integers.
fn is_nanos(descr: &parquet::schema::types::ColumnDescriptor) -> bool {
    matches!(
        descr.logical_type_ref(),
        Some(parquet::basic::LogicalType::Timestamp(t))
            if t.unit == parquet::basic::TimeUnit::NANOS
    )
}

/// Nanoseconds since the epoch as RFC 3339.
fn nanos_text(ns: i64) -> Option<String> {
    jiff::Timestamp::from_nanosecond(i128::from(ns))
        .ok()
        .map(|t| t.to_string())
}

/// How a column the ledger reads is taken from Parquet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Typed {
    /// As the CSV path reads it: text.
    Text,
    /// A cost or quantity: a float column's values as numbers.
    Number,
    /// A charge period: a timestamp column's values as times.
    Time,
}

impl Typed {
    fn of(col: Col) -> Self {
        match col {
            Col::BilledCost
            | Col::EffectiveCost
            | Col::ListCost
            | Col::ConsumedQuantity
            | Col::PricingQuantity => Typed::Number,
            Col::ChargePeriodStart | Col::ChargePeriodEnd => Typed::Time,
            _ => Typed::Text,
        }
    }
}

/// The next up to `max` values of a column; empty at the chunk's end. Strings are kept as the
/// page's bytes (no copy) when they are UTF-8; numbers and timestamps of the columns read as
/// such stay typed; every other value becomes the text a CSV cell would hold.
fn column_values(
    reader: &mut parquet::column::reader::ColumnReader,
    descr: &parquet::schema::types::ColumnDescPtr,
    typed: Typed,
    max: usize,
) -> parquet::errors::Result<Vec<Value>> {
    use parquet::column::reader::ColumnReader as C;
    use parquet::record::Field;
    let max_def = descr.max_def_level();
    macro_rules! values {
        ($reader:expr, $convert:expr) => {{
            let reader = $reader;
            let (mut defs, mut values) = (Vec::with_capacity(max), Vec::with_capacity(max));
            let mut got = 0;
            while got < max {
                let (records, _, _) =
                    reader.read_records(max - got, Some(&mut defs), None, &mut values)?;
                if records == 0 {
                    break;
                }
                got += records;
            }
            let mut values = values.into_iter();
            let mut next = || -> parquet::errors::Result<Value> {
                match values.next() {
                    Some(v) => $convert(descr, v),
                    None => Ok(Value::Null),
                }
            };
            if max_def == 0 {
                (0..got).map(|_| next()).collect()
            } else {
                defs.iter()
                    .map(|&d| {
                        if d == max_def {
                            next()
                        } else {
                            Ok(Value::Null)
                        }
                    })
                    .collect()
            }
        }};
    }
    match reader {
        C::BoolColumnReader(r) => values!(r, |d, v| text(Field::convert_bool(d, v))),
        C::Int32ColumnReader(r) => values!(r, |d, v| from_i32(d, typed, v)),
        C::Int64ColumnReader(r) => values!(r, |d, v| from_i64(d, typed, v)),
        C::Int96ColumnReader(r) => values!(r, |d, v| text(Field::convert_int96(d, v))),
        C::FloatColumnReader(r) => values!(r, |d, v| from_f32(d, typed, v)),
        C::DoubleColumnReader(r) => values!(r, |d, v| from_f64(d, typed, v)),
        C::ByteArrayColumnReader(r) => values!(r, from_bytes),
        C::FixedLenByteArrayColumnReader(r) => {
            values!(r, |d, v: parquet::data_type::FixedLenByteArray| {
                text(Field::convert_byte_array(d, v.into())?)
            })
        }
    }
}

/// A number cell where `number` holds (the column is read as numbers, and the value is one),
/// else the crate's text of the value (`field`).
fn number_or_text(
    number: bool,
    n: f64,
    field: impl FnOnce() -> Field,
) -> parquet::errors::Result<Value> {
    if number {
        Ok(Value::Num(n))
    } else {
        text(field())
    }
}

/// An `INT32` value: a number where the column is read as one and the value is a plain integer
/// (`ConsumedQuantity` written as a whole number; not a date, a time or a decimal), else text.
fn from_i32(d: &ColumnDescPtr, typed: Typed, v: i32) -> parquet::errors::Result<Value> {
    let number = typed == Typed::Number && plain_integer(d.converted_type());
    number_or_text(number, f64::from(v), || Field::convert_int32(d, v))
}

/// A `FLOAT` value: a number where the column is read as one, else text.
fn from_f32(d: &ColumnDescPtr, typed: Typed, v: f32) -> parquet::errors::Result<Value> {
    number_or_text(typed == Typed::Number, f64::from(v), || {
        Field::convert_float(d, v)
    })
}

/// A `DOUBLE` value: a number where the column is read as one, else text.
fn from_f64(d: &ColumnDescPtr, typed: Typed, v: f64) -> parquet::errors::Result<Value> {
    number_or_text(typed == Typed::Number, v, || Field::convert_double(d, v))
}

/// An `INT64` value: a charge period's timestamp (nanoseconds, microseconds, milliseconds)
/// typed, a whole quantity as a number, else text.
fn from_i64(
    d: &parquet::schema::types::ColumnDescPtr,
    typed: Typed,
    v: i64,
) -> parquet::errors::Result<Value> {
    use parquet::basic::ConvertedType;
    let nanos = is_nanos(d);
    let converted = d.converted_type();
    match typed {
        Typed::Time if nanos => time(jiff::Timestamp::from_nanosecond(i128::from(v))),
        Typed::Time if converted == ConvertedType::TIMESTAMP_MICROS => {
            time(jiff::Timestamp::from_microsecond(v))
        }
        Typed::Time if converted == ConvertedType::TIMESTAMP_MILLIS => {
            time(jiff::Timestamp::from_millisecond(v))
        }
        _ if nanos => Ok(nanos_text(v).map_or(Value::Null, Value::Text)),
        Typed::Number if plain_integer(converted) => Ok(Value::Num(whole(v))),
        _ => text(parquet::record::Field::convert_int64(d, v)),
    }
}

/// A `BYTE_ARRAY` value (the most cells): a plain string as the page's bytes when they are
/// UTF-8, else text with the invalid bytes replaced; a decimal and the like through the
/// crate's conversion.
fn from_bytes(
    d: &parquet::schema::types::ColumnDescPtr,
    v: parquet::data_type::ByteArray,
) -> parquet::errors::Result<Value> {
    if d.converted_type() == parquet::basic::ConvertedType::DECIMAL {
        return text(parquet::record::Field::convert_byte_array(d, v)?);
    }
    Ok(if std::str::from_utf8(v.data()).is_ok() {
        Value::Bytes(v)
    } else {
        Value::Text(String::from_utf8_lossy(v.data()).into_owned())
    })
}

/// A value as read by [`crate::pages`], converted as [`column_values`] converts it.
fn from_raw(
    d: &parquet::schema::types::ColumnDescPtr,
    typed: Typed,
    v: crate::pages::Raw,
) -> parquet::errors::Result<Value> {
    use crate::pages::Raw;
    match v {
        Raw::I32(v) => from_i32(d, typed, v),
        Raw::I64(v) => from_i64(d, typed, v),
        Raw::F32(v) => from_f32(d, typed, v),
        Raw::F64(v) => from_f64(d, typed, v),
        Raw::Bytes(v) => from_bytes(d, v),
    }
}

/// A value through the crate's conversion, as the text a CSV cell would hold.
#[allow(clippy::unnecessary_wraps)] // the shape every conversion in `column_values` returns
fn text(f: parquet::record::Field) -> parquet::errors::Result<Value> {
    Ok(field_into_text(f).map_or(Value::Null, Value::Text))
}

/// A timestamp column's value, typed.
#[allow(clippy::unnecessary_wraps)] // likewise
fn time(t: Result<jiff::Timestamp, jiff::Error>) -> parquet::errors::Result<Value> {
    Ok(t.map_or(Value::Null, |t| Value::Time(t.as_millisecond())))
}

/// Whether an integer column's annotation leaves it a plain signed integer (not a date, a
/// time, a decimal or an unsigned 64-bit value, which the text path reads).
fn plain_integer(c: parquet::basic::ConvertedType) -> bool {
    use parquet::basic::ConvertedType as T;
    matches!(
        c,
        T::NONE
            | T::INT_8
            | T::INT_16
            | T::INT_32
            | T::INT_64
            | T::UINT_8
            | T::UINT_16
            | T::UINT_32
    )
}

/// A whole number as a float (a quantity past 2^53 loses its last digits, as the CSV's would).
#[allow(clippy::cast_precision_loss)]
fn whole(v: i64) -> f64 {
    v as f64
}

/// [`field_text`] of a value owned: its string moved, not copied.
fn field_into_text(f: parquet::record::Field) -> Option<String> {
    match f {
        parquet::record::Field::Str(s) => Some(s),
        other => field_text(&other),
    }
}

/// A Parquet value as the text a CSV cell would hold.
fn field_text(f: &parquet::record::Field) -> Option<String> {
    use parquet::record::Field;
    Some(match f {
        Field::Null => return None,
        Field::Str(s) => s.clone(),
        Field::Bytes(b) => String::from_utf8_lossy(b.data()).into_owned(),
        Field::Float(v) => f64::from(*v).to_string(),
        Field::Double(v) => v.to_string(),
        Field::TimestampMillis(ms) => jiff::Timestamp::from_millisecond(*ms).ok()?.to_string(),
        Field::TimestampMicros(us) => jiff::Timestamp::from_microsecond(*us).ok()?.to_string(),
        // `Tags` written as a struct (one field per key): a JSON object.
        Field::Group(row) => {
            let obj: serde_json::Map<String, serde_json::Value> = row
                .get_column_iter()
                .map(|(k, v)| {
                    let v = field_text(v).map_or(serde_json::Value::Null, Into::into);
                    (k.clone(), v)
                })
                .collect();
            serde_json::Value::Object(obj).to_string()
        }
        Field::MapInternal(m) => {
            let obj: serde_json::Map<String, serde_json::Value> = m
                .entries()
                .iter()
                .filter_map(|(k, v)| {
                    let key = field_text(k)?;
                    Some((
                        key,
                        field_text(v).map_or(serde_json::Value::Null, Into::into),
                    ))
                })
                .collect();
            serde_json::Value::Object(obj).to_string()
        }
        // Decimals, integers, dates and booleans print as their plain text.
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the tests look at of a row, owned (a row borrows its reader's cells).
    #[derive(Debug)]
    struct Owned {
        currency: String,
        billed_cost: f64,
        quantity_hours: Option<f64>,
        resource_id: Option<String>,
        instance_type: Option<(String, &'static str)>,
        gpu_count: Option<f64>,
        tags: BTreeMap<String, String>,
    }

    fn own(r: &BillRow<'_>) -> Owned {
        Owned {
            currency: r.currency.to_owned(),
            billed_cost: r.billed_cost,
            quantity_hours: r.quantity_hours,
            resource_id: r.resource_id.map(str::to_owned),
            instance_type: r.instance_type.map(|(t, from)| (t.to_owned(), from)),
            gpu_count: r.gpu_count,
            tags: r.tags.iter().cloned().collect(),
        }
    }

    fn rows(text: &str) -> (Vec<Owned>, ReadTally) {
        let mut out = Vec::new();
        let tally = read_csv(text.as_bytes(), "t.csv", &mut |r| out.push(own(&r))).expect("reads");
        (out, tally)
    }

    const HEAD: &str = "BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,ConsumedQuantity,ConsumedUnit,ResourceId,Tags,SkuPriceDetails\n";

    /// The fast path agrees with jiff on every second of whole days across four centuries,
    /// and leaves to jiff what it does not read (leap seconds, bad dates).
    #[test]
    fn utc_seconds_is_what_jiff_says() {
        let mut t = jiff::Timestamp::from_second(-2_208_988_800).expect("1900");
        let end = jiff::Timestamp::from_second(7_258_118_400).expect("2200");
        while t < end {
            let text = t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            assert_eq!(utc_seconds(&text), Some(t.as_millisecond()), "{text}");
            t = t
                .checked_add(jiff::SignedDuration::from_secs(86_400 * 7 + 3_661))
                .expect("in range");
        }
        for bad in [
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-06-30T23:59:60Z",
            "2024-01-01T00:00:00+",
            "2024-01-01 00:00:00Z",
            "+024-01-01T00:00:00Z",
        ] {
            assert_eq!(utc_seconds(bad), None, "{bad}");
        }
        assert_eq!(
            parse_time("2024-02-29T12:34:56Z"),
            "2024-02-29T12:34:56Z"
                .parse::<jiff::Timestamp>()
                .ok()
                .map(jiff::Timestamp::as_millisecond)
        );
    }

    #[test]
    fn timestamps_in_every_shape_real_exports_use() {
        let want = parse_time("2024-09-27T15:00:00Z").expect("rfc3339");
        for s in [
            "2024-09-27 15:00:00",
            "2024-09-27T15:00:00",
            "2024-09-27T15:00:00.000Z",
            "2024-09-27T17:00:00+02:00",
        ] {
            assert_eq!(parse_time(s), Some(want), "{s}");
        }
        assert_eq!(
            parse_time("2024-09-27"),
            Some(want - 15 * gpuwise_core::HOUR_MS)
        );
        assert_eq!(parse_time("27/09/2024"), None);
    }

    #[test]
    fn nulls_units_tags_and_instance_type_from_sku_details() {
        let (rows, tally) = rows(&format!(
            "{HEAD}3.5,usd,Usage,2024-09-01 00:00:00,2024-09-01 01:00:00,1,Hrs,i-1,\"{{\"\"team\"\":\"\"vision\"\",\"\"n\"\":2,\"\"x\"\":null}}\",\"{{\"\"InstanceType\"\":\"\"p5.48xlarge\"\",\"\"GpuCount\"\":8}}\"\n\
             1,USD,Tax,2024-09-01,2024-10-01,NULL,NULL,NULL,,\n"
        ));
        assert_eq!(tally.rows, 2);
        assert_eq!(tally.skips.total(), 0);
        assert_eq!(tally.version, "1.1");
        let r = &rows[0];
        // As written: the builder compares currencies in upper case.
        assert_eq!(r.currency, "usd");
        assert_eq!(r.quantity_hours, Some(1.0));
        assert_eq!(
            r.instance_type,
            Some(("p5.48xlarge".to_owned(), "SkuPriceDetails"))
        );
        assert_eq!(r.gpu_count, Some(8.0));
        assert_eq!(r.tags.get("team").map(String::as_str), Some("vision"));
        assert_eq!(r.tags.get("n").map(String::as_str), Some("2"));
        assert!(!r.tags.contains_key("x"));
        assert_eq!(rows[1].resource_id, None);
        assert_eq!(rows[1].quantity_hours, None);
    }

    #[test]
    fn bad_cells_are_counted_skips_with_line_and_field() {
        let (rows, tally) = rows(&format!(
            "{HEAD}abc,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,,\n\
             1,USD,Usage,yesterday,2024-09-01T01:00:00Z,1,Hours,i-1,,\n\
             1,USD,Usage,2024-09-01T02:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,,\n\
             1,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,[1],\n\
             1,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,,\n"
        ));
        assert_eq!(rows.len(), 1);
        assert_eq!(tally.skips.total(), 4);
        let ex = |k: &str| tally.skips.by_reason[k].1.clone();
        assert_eq!(ex("bad_number"), "line 2: BilledCost `abc` is not a number");
        assert_eq!(
            ex("bad_timestamp"),
            "line 3: ChargePeriodStart `yesterday` is not a timestamp"
        );
        assert!(ex("bad_period").starts_with("line 4:"));
        assert!(ex("bad_tags").starts_with("line 5:"));
    }

    /// Bad rows planted on known lines, among empty lines (before the header too), a quoted
    /// cell across lines and a row dropped for its length, with `\n` or `\r\n` ends: each
    /// skip names the line its row is on, whether the splitter or the `csv` crate read it
    /// (a quote inside an unquoted cell hands the rest of its block to the crate).
    #[test]
    fn skips_name_the_line_the_row_is_on() {
        let ok = "1,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,,";
        let long = format!("{ok}{}", "x".repeat(MAX_LINE));
        let quoted = "1,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,\"i\n-2\",,";
        let bad_number = "abc,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i-1,,";
        let bad_time = "1,USD,Usage,yesterday,2024-09-01T01:00:00Z,1,Hours,i-1,,";
        let odd_quote = "1,USD,Usage,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,1,Hours,i\"3,,";
        let short = "1,USD";
        for crlf in [false, true] {
            let end = if crlf { "\r\n" } else { "\n" };
            let lines = [
                "",
                HEAD.trim_end(),
                ok,
                "",
                "",
                bad_number,
                &long,
                quoted,
                bad_time,
                "",
                odd_quote,
                "",
                short,
                ok,
            ];
            let text = lines.join(end);
            let (rows, tally) = rows(&text);
            assert_eq!(rows.len(), 4, "crlf {crlf}");
            let ex = |k: &str| tally.skips.by_reason[k].1.clone();
            // Lines counted by hand: the quoted cell takes lines 8 and 9.
            assert!(ex("bad_number").starts_with("line 6:"), "crlf {crlf}");
            assert!(ex("record_too_long").starts_with("line 7:"), "crlf {crlf}");
            assert!(ex("bad_timestamp").starts_with("line 10:"), "crlf {crlf}");
            assert!(
                ex("wrong_column_count").starts_with("line 14:"),
                "crlf {crlf}"
            );
        }
    }

    #[test]
    fn missing_columns_name_the_file_and_columns() {
        let err = read_csv(
            "BilledCost,ChargeCategory\n1,Usage\n".as_bytes(),
            "b.csv",
            &mut |_| {},
        )
        .expect_err("not FOCUS");
        assert_eq!(
            err.to_string(),
            "b.csv: not a FOCUS bill: missing column(s) BillingCurrency, ChargePeriodStart, ChargePeriodEnd"
        );
    }

    type RowGroup<'a, 'b> = parquet::file::writer::SerializedRowGroupWriter<'a, &'b mut Vec<u8>>;

    /// The rows and tally of a one-row-group Parquet file of `schema`, its columns written in
    /// order by `columns`.
    fn parquet_rows(
        schema: &str,
        columns: impl FnOnce(&mut RowGroup<'_, '_>),
    ) -> (Vec<Owned>, ReadTally) {
        let schema = std::sync::Arc::new(
            parquet::schema::parser::parse_message_type(schema).expect("schema"),
        );
        let mut buf = Vec::new();
        let mut w = parquet::file::writer::SerializedFileWriter::new(
            &mut buf,
            schema,
            std::sync::Arc::default(),
        )
        .expect("writer");
        let mut rg = w.next_row_group().expect("group");
        columns(&mut rg);
        rg.close().expect("group");
        w.close().expect("close");
        let mut rows = Vec::new();
        let tally = read_parquet(bytes::Bytes::from(buf), "t.parquet", &mut |r| {
            rows.push(own(&r));
        })
        .expect("reads");
        (rows, tally)
    }

    /// The next column of `rg`, of type `T`, with these values and levels.
    fn column<T: parquet::data_type::DataType>(
        rg: &mut RowGroup<'_, '_>,
        values: &[T::T],
        def: Option<&[i16]>,
        rep: Option<&[i16]>,
    ) {
        let mut c = rg.next_column().expect("column").expect("one more");
        c.typed::<T>().write_batch(values, def, rep).expect("write");
        c.close().expect("close");
    }

    /// The next column of `rg`: strings.
    fn text_column(
        rg: &mut RowGroup<'_, '_>,
        values: &[&str],
        def: Option<&[i16]>,
        rep: Option<&[i16]>,
    ) {
        let v: Vec<parquet::data_type::ByteArray> = values.iter().map(|s| (*s).into()).collect();
        column::<parquet::data_type::ByteArrayType>(rg, &v, def, rep);
    }

    /// Integer quantity columns are read as numbers (as their text would be), and an integer
    /// column that is a date is not: a date for a quantity is a counted skip, as in a CSV.
    #[test]
    fn parquet_integer_quantities_read_as_numbers() {
        use parquet::data_type::{DoubleType, Int32Type, Int64Type};
        let (rows, tally) = parquet_rows(
            "message focus {
              required binary BillingCurrency (UTF8);
              required binary ChargeCategory (UTF8);
              required binary ChargePeriodStart (UTF8);
              required binary ChargePeriodEnd (UTF8);
              required binary ConsumedUnit (UTF8);
              required binary PricingUnit (UTF8);
              optional int64 ConsumedQuantity;
              required int32 PricingQuantity (DATE);
              required double BilledCost;
            }",
            |rg| {
                for col in [
                    ["USD", "USD"],
                    ["Usage", "Usage"],
                    ["2026-01-05T10:00:00Z", "2026-01-05T11:00:00Z"],
                    ["2026-01-05T12:00:00Z", "2026-01-05T12:00:00Z"],
                    ["Hours", "Hours"],
                    ["Hours", "Hours"],
                ] {
                    text_column(rg, &col, None, None);
                }
                // Row 1: two hours consumed; row 2: none given, so the pricing quantity is read.
                column::<Int64Type>(rg, &[2], Some(&[1, 0]), None);
                column::<Int32Type>(rg, &[20_458, 20_458], None, None);
                column::<DoubleType>(rg, &[3.0, 4.0], None, None);
            },
        );
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            (rows[0].quantity_hours, rows[0].billed_cost),
            (Some(2.0), 3.0)
        );
        // A date is no quantity: the row is skipped, naming the column and the date.
        let (n, example) = &tally.skips.by_reason["bad_number"];
        assert_eq!(*n, 1);
        assert!(
            example.contains("PricingQuantity") && example.contains("2026-01-05"),
            "{example}"
        );
    }

    /// A Parquet bill whose `Tags` is a map (as some exports write it) is read through the row
    /// API: two rows, tags `{team: vision}` and none.
    #[test]
    fn parquet_tags_as_a_map() {
        let (rows, tally) = parquet_rows(
            "message focus {
              required binary BilledCost (UTF8);
              required binary BillingCurrency (UTF8);
              required binary ChargeCategory (UTF8);
              required binary ChargePeriodStart (UTF8);
              required binary ChargePeriodEnd (UTF8);
              optional group Tags (MAP) {
                repeated group key_value {
                  required binary key (UTF8);
                  optional binary value (UTF8);
                }
              }
            }",
            |rg| {
                for col in [
                    ["1.5", "2.5"],
                    ["USD", "USD"],
                    ["Usage", "Usage"],
                    ["2026-01-05T10:00:00Z", "2026-01-05T11:00:00Z"],
                    ["2026-01-05T11:00:00Z", "2026-01-05T12:00:00Z"],
                ] {
                    text_column(rg, &col, None, None);
                }
                // Row 1: one entry (key defined at level 2, value at 3); row 2: no map (level 0).
                text_column(rg, &["team"], Some(&[2, 0]), Some(&[0, 0]));
                text_column(rg, &["vision"], Some(&[3, 0]), Some(&[0, 0]));
            },
        );
        assert_eq!(tally.skips.total(), 0, "{tally:?}");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].tags.get("team").map(String::as_str), Some("vision"));
        assert!(rows[1].tags.is_empty());
        assert_eq!(rows[1].billed_cost, 2.5);
    }

    /// One generated bill row: an index into each column's pool (`None`: null).
    type GenRow = (
        Option<usize>,
        usize,
        usize,
        (usize, usize),
        Option<usize>,
        Option<usize>,
        Option<usize>,
        (Option<usize>, Option<usize>, Option<usize>),
    );

    const COST: [f64; 5] = [1.5, 32.7726, 0.0, -3.0, 1e9];
    const CURRENCY: [&str; 3] = ["USD", "usd", "EUR"];
    const CATEGORY: [&str; 3] = ["Usage", "Tax", "usage"];
    const QUANTITY: [f64; 3] = [1.0, 0.5, 2.0];
    const UNIT: [&str; 3] = ["Hours", "Hrs", "GB"];
    const ID: [&str; 4] = ["i-1", "i-2", "i-3", " "];
    const TAGS: [&str; 3] = [r#"{"team":"a"}"#, r#"{"team":"b","x":null}"#, "[1]"];
    const SKU: [&str; 3] = [
        r#"{"InstanceType":"p4d.24xlarge"}"#,
        r#"{"InstanceType":"p5.48xlarge","GpuCount":8}"#,
        "NULL",
    ];
    const PRICING: [&str; 2] = ["Standard", "Dynamic"];

    /// Which pool entry a row takes in a text column.
    type Pick = fn(&GenRow) -> Option<usize>;

    /// Hour `h` of 2026-01-01, in microseconds.
    fn hour(h: usize) -> i64 {
        1_767_225_600_000_000i64 + i64::try_from(h).expect("small") * 3_600_000_000
    }

    /// `rows` as a Parquet bill written with these writer settings: row groups of `group`
    /// rows, pages of about `page` rows, dictionaries (or not) of at most `dict_bytes` bytes
    /// before the writer falls back to plain values, format v1 or v2 pages, the charge period
    /// typed (microseconds) or text.
    fn generated_bill(
        rows: &[GenRow],
        dictionary: bool,
        v2: bool,
        page: usize,
        dict_bytes: usize,
        group: usize,
        typed_time: bool,
    ) -> Vec<u8> {
        use parquet::file::properties::{WriterProperties, WriterVersion};
        let time = if typed_time {
            "optional int64 ChargePeriodStart (TIMESTAMP_MICROS);
             optional int64 ChargePeriodEnd (TIMESTAMP_MICROS);"
        } else {
            "optional binary ChargePeriodStart (UTF8);
             optional binary ChargePeriodEnd (UTF8);"
        };
        let schema = std::sync::Arc::new(
            parquet::schema::parser::parse_message_type(&format!(
                "message focus {{
                  optional double BilledCost;
                  required binary BillingCurrency (UTF8);
                  required binary ChargeCategory (UTF8);
                  {time}
                  optional double ConsumedQuantity;
                  optional binary ConsumedUnit (UTF8);
                  optional binary ResourceId (UTF8);
                  optional binary Tags (UTF8);
                  optional binary SkuPriceDetails (UTF8);
                  optional binary PricingCategory (UTF8);
                }}"
            ))
            .expect("schema"),
        );
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_writer_version(if v2 {
                WriterVersion::PARQUET_2_0
            } else {
                WriterVersion::PARQUET_1_0
            })
            .set_data_page_row_count_limit(page)
            .set_write_batch_size(page)
            .set_dictionary_page_size_limit(dict_bytes)
            .build();
        let mut buf = Vec::new();
        let mut w =
            parquet::file::writer::SerializedFileWriter::new(&mut buf, schema, props.into())
                .expect("writer");
        for part in rows.chunks(group.max(1)) {
            let mut rg = w.next_row_group().expect("group");
            write_group(&mut rg, part, typed_time);
            rg.close().expect("group");
        }
        w.close().expect("close");
        buf
    }

    /// A column of `rows`' values picked by `pick` (`None`: null), with its definition levels.
    fn optional<T>(rows: &[GenRow], pick: impl Fn(&GenRow) -> Option<T>) -> (Vec<T>, Vec<i16>) {
        let mut values = Vec::new();
        let defs = rows
            .iter()
            .map(|r| match pick(r) {
                Some(v) => {
                    values.push(v);
                    1
                }
                None => 0,
            })
            .collect();
        (values, defs)
    }

    /// One row group of generated rows ([`generated_bill`]'s columns, in its schema's order).
    fn write_group(rg: &mut RowGroup<'_, '_>, part: &[GenRow], typed_time: bool) {
        use parquet::data_type::{ByteArrayType, DoubleType, Int64Type};
        let text = |v: &str| parquet::data_type::ByteArray::from(v);
        let (v, d) = optional(part, |r| r.0.map(|i| COST[i]));
        column::<DoubleType>(rg, &v, Some(&d), None);
        let v: Vec<_> = part.iter().map(|r| text(CURRENCY[r.1])).collect();
        column::<ByteArrayType>(rg, &v, None, None);
        let v: Vec<_> = part.iter().map(|r| text(CATEGORY[r.2])).collect();
        column::<ByteArrayType>(rg, &v, None, None);
        // The period: start at hour s, end at s + e − 1 (e = 0: a bad period, ending an hour
        // before it starts; as text, e = 3 is no timestamp at all).
        let start = |r: &GenRow| r.3.0;
        let end = |r: &GenRow| (r.3.0 + r.3.1).saturating_sub(1);
        if typed_time {
            for at in [start, end] {
                let (v, d) = optional(part, |r| Some(hour(at(r))));
                column::<Int64Type>(rg, &v, Some(&d), None);
            }
        } else {
            for (k, at) in [start, end].into_iter().enumerate() {
                let (v, d) = optional(part, |r| {
                    Some(if k == 1 && r.3.1 == 3 {
                        text("yesterday")
                    } else {
                        let t = jiff::Timestamp::from_microsecond(hour(at(r))).expect("time");
                        text(&t.to_string())
                    })
                });
                column::<ByteArrayType>(rg, &v, Some(&d), None);
            }
        }
        let (v, d) = optional(part, |r| r.4.map(|i| QUANTITY[i]));
        column::<DoubleType>(rg, &v, Some(&d), None);
        let pools: [(&[&str], Pick); 5] = [
            (&UNIT, |r| r.5),
            (&ID, |r| r.6),
            (&TAGS, |r| r.7.0),
            (&SKU, |r| r.7.1),
            (&PRICING, |r| r.7.2),
        ];
        for (pool, pick) in pools {
            let (v, d) = optional(part, |r| pick(r).map(|i| text(pool[i % pool.len()])));
            column::<ByteArrayType>(rg, &v, Some(&d), None);
        }
    }

    /// The rows (as their debug text, but for [`BillRow::same_as`]), the tally and the bill
    /// folded from its rows in dollars (as its debug text) of a Parquet bill, read by keys or
    /// through the crate's column reader.
    fn read_way(buf: &[u8], by_values: bool) -> (Vec<String>, String, String) {
        let mut bill =
            ParquetBill::open(bytes::Bytes::from(buf.to_vec()), "t.parquet").expect("opens");
        bill.by_values = by_values;
        let mut parts = 0..bill.parts();
        let (rows, tally, folded) = fold_parts(bill.tally(), |sink| {
            parts.next().map(|part| bill.read_part(part, sink))
        });
        (rows, format!("{tally:?}"), folded)
    }

    /// Parts of a bill read by `read_part` (handed a sink; `None` when none is left), each
    /// into a fork of one bill, joined in order: the rows (as their debug text, but for
    /// [`BillRow::same_as`]), the tally, and the bill folded from the rows in dollars (as its
    /// debug text).
    fn fold_parts(
        mut tally: ReadTally,
        mut read_part: impl FnMut(&mut dyn FnMut(BillRow<'_>)) -> Option<Result<ReadTally, FocusError>>,
    ) -> (Vec<String>, ReadTally, String) {
        let catalog = gpuwise_catalog::Catalog::builtin();
        let join = crate::bill::JoinKey::Id;
        let mut builder = crate::bill::BillBuilder::new(&catalog, &join, "team");
        let mut rows = Vec::new();
        loop {
            let mut fork = builder.fork();
            let mut sink = |r: BillRow<'_>| {
                rows.push(format!(
                    "{:?}",
                    BillRow {
                        same_as: None,
                        ..r.clone()
                    }
                ));
                // One currency, or the bill is only an error.
                if r.currency.eq_ignore_ascii_case("usd") {
                    fork.add(r);
                }
            };
            match read_part(&mut sink) {
                None => break,
                Some(Ok(t)) => tally.add(t),
                Some(Err(e)) => rows.push(format!("error: {e}")),
            }
            builder.merge(fork);
        }
        let folded = match builder.finish() {
            Ok(b) => format!("{b:?}"),
            Err(e) => format!("error: {e}"),
        };
        (rows, tally, folded)
    }

    /// A generated row ([`GenRow`]).
    fn gen_row() -> impl proptest::strategy::Strategy<Value = GenRow> {
        (
            proptest::option::of(0usize..5),
            0usize..3,
            0usize..3,
            (0usize..6, 0usize..4),
            proptest::option::of(0usize..3),
            proptest::option::of(0usize..3),
            proptest::option::of(0usize..4),
            (
                proptest::option::of(0usize..3),
                proptest::option::of(0usize..3),
                proptest::option::of(0usize..2),
            ),
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Read by keys, any bill gives the rows, skips and examples the crate's column reader
        /// gives: dictionaries or plain values, a dictionary that overflows into plain pages
        /// halfway through a chunk, v1 or v2 pages of any size, nulls anywhere, bad cells,
        /// row groups of any size.
        #[test]
        fn keyed_pages_read_what_the_column_reader_reads(
            rows in proptest::collection::vec(gen_row(), 0..300),
            dictionary in proptest::bool::ANY,
            v2 in proptest::bool::ANY,
            page in 1usize..40,
            dict_bytes in proptest::prop_oneof![proptest::strategy::Just(1usize << 20), 8usize..200],
            group in 1usize..200,
            typed_time in proptest::bool::ANY,
        ) {
            let buf = generated_bill(&rows, dictionary, v2, page, dict_bytes, group, typed_time);
            let keyed = read_way(&buf, false);
            let by_values = read_way(&buf, true);
            proptest::prop_assert_eq!(&keyed, &by_values);
        }
    }

    /// `rows` as a CSV bill ([`generated_bill`]'s columns, the period as text).
    fn generated_csv(rows: &[GenRow]) -> String {
        let quoted = |v: &str| format!("\"{}\"", v.replace('"', "\"\""));
        let mut text = String::from(
            "BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,\
             ConsumedQuantity,ConsumedUnit,ResourceId,Tags,SkuPriceDetails,PricingCategory\n",
        );
        for r in rows {
            let time = |h: usize| {
                jiff::Timestamp::from_microsecond(hour(h))
                    .expect("time")
                    .to_string()
            };
            let end = if r.3.1 == 3 {
                "yesterday".to_owned()
            } else {
                time((r.3.0 + r.3.1).saturating_sub(1))
            };
            let pick = |pool: &[&str], i: Option<usize>| {
                i.map(|i| quoted(pool[i % pool.len()])).unwrap_or_default()
            };
            let cells = [
                r.0.map(|i| COST[i].to_string()).unwrap_or_default(),
                CURRENCY[r.1].to_owned(),
                CATEGORY[r.2].to_owned(),
                time(r.3.0),
                end,
                r.4.map(|i| QUANTITY[i].to_string()).unwrap_or_default(),
                pick(&UNIT, r.5),
                pick(&ID, r.6),
                pick(&TAGS, r.7.0),
                pick(&SKU, r.7.1),
                pick(&PRICING, r.7.2),
            ];
            text.push_str(&cells.join(","));
            text.push('\n');
        }
        text
    }

    /// [`read_way`] for a CSV bill read in blocks of about `target` bytes, each row's cells
    /// parsed once per distinct text (`remember`) or each row alone.
    fn read_csv_way(text: &str, target: usize, remember: bool) -> (Vec<String>, String, String) {
        let mut blocks = CsvBlocks::open(text.as_bytes(), "t.csv").expect("opens");
        let mut header = blocks.header().clone();
        header.remember = remember;
        let (rows, mut tally, folded) = fold_parts(header.tally(), |sink| {
            let block = blocks.next_block(target).expect("block")?;
            Some(header.read_block(&block, "t.csv", sink))
        });
        tally.add(blocks.finish());
        (rows, format!("{tally:?}"), folded)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// A CSV bill's rows parsed once per distinct text of their cells give the rows,
        /// skips, examples and bill each row parsed alone gives, in blocks of any size.
        #[test]
        fn csv_rows_remembered_read_what_each_reads_alone(
            palette in proptest::collection::vec(gen_row(), 1..12),
            order in proptest::collection::vec((
                0usize..12,
                proptest::option::of(0usize..3),
                proptest::option::of(0usize..3),
                proptest::option::of(0usize..6),
            ), 0..300),
            target in 1usize..20_000,
        ) {
            // Rows drawn from a few, some with their tags, unit or hour changed: cells that
            // repeat as a bill's do, rows alike but for one of them.
            let rows: Vec<GenRow> = order
                .iter()
                .map(|&(i, tags, unit, start)| {
                    let mut r = palette[i % palette.len()];
                    r.7.0 = tags.or(r.7.0);
                    r.5 = unit.or(r.5);
                    r.3.0 = start.unwrap_or(r.3.0);
                    r
                })
                .collect();
            let text = generated_csv(&rows);
            let remembered = read_csv_way(&text, target, true);
            proptest::prop_assert_eq!(&remembered, &read_csv_way(&text, target, false));
        }
    }

    /// A cell over [`MAX_LINE`] bytes skips its row, counted with the row and column, by keys
    /// and through the column reader alike, whether the long value sits in a dictionary or in
    /// a plain page; the rows around it are read.
    #[test]
    fn a_parquet_cell_over_the_bound_skips_its_row_both_ways() {
        let long = "x".repeat(MAX_LINE + 1);
        for dictionary in [true, false] {
            let schema = std::sync::Arc::new(
                parquet::schema::parser::parse_message_type(
                    "message focus {
                      required binary BilledCost (UTF8);
                      required binary BillingCurrency (UTF8);
                      required binary ChargeCategory (UTF8);
                      required binary ChargePeriodStart (UTF8);
                      required binary ChargePeriodEnd (UTF8);
                      required binary Tags (UTF8);
                    }",
                )
                .expect("schema"),
            );
            let props = parquet::file::properties::WriterProperties::builder()
                .set_dictionary_enabled(dictionary)
                .build();
            let mut buf = Vec::new();
            let mut w =
                parquet::file::writer::SerializedFileWriter::new(&mut buf, schema, props.into())
                    .expect("writer");
            let mut rg = w.next_row_group().expect("group");
            for col in [
                ["1", "2", "3"],
                ["USD", "USD", "USD"],
                ["Usage", "Usage", "Usage"],
                ["2026-01-05T10:00:00Z"; 3],
                ["2026-01-05T11:00:00Z"; 3],
                ["{}", &long, "{}"],
            ] {
                text_column(&mut rg, &col, None, None);
            }
            rg.close().expect("group");
            w.close().expect("close");
            let keyed = read_way(&buf, false);
            assert_eq!(keyed, read_way(&buf, true), "dictionary {dictionary}");
            assert_eq!(keyed.0.len(), 2, "dictionary {dictionary}");
            assert!(
                keyed.1.contains("cell_too_long")
                    && keyed.1.contains("row 2: a cell of column 6 is longer than"),
                "{}",
                keyed.1
            );
        }
    }

    /// The property above compares the two ways only if the keyed one is taken: it is for
    /// every v1 bill (dictionaries, plain values, plain pages after a dictionary that
    /// overflowed) and a v2 bill whose dictionaries hold, not for v2 pages of delta-encoded
    /// values (the v2 writer's choice without a dictionary).
    #[test]
    fn keyed_pages_are_taken_where_they_can_be() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let rows: Vec<GenRow> = (0..200)
            .map(|i| {
                (
                    Some(i % 5),
                    0,
                    0,
                    (i % 6, 1),
                    Some(0),
                    Some(0),
                    Some(i % 4),
                    (Some(0), Some(1), None),
                )
            })
            .collect();
        let keyed = |buf: Vec<u8>| {
            let r = SerializedFileReader::new(bytes::Bytes::from(buf)).expect("reads");
            r.metadata()
                .row_groups()
                .iter()
                .all(|g| g.columns().iter().all(crate::pages::supported))
        };
        let bill = |dictionary, v2, dict_bytes| {
            keyed(generated_bill(
                &rows, dictionary, v2, 7, dict_bytes, 64, true,
            ))
        };
        assert!(bill(true, false, 1 << 20) && bill(true, false, 16) && bill(false, false, 1 << 20));
        assert!(bill(true, true, 1 << 20));
        assert!(!bill(true, true, 16) && !bill(false, true, 1 << 20));
    }
}
