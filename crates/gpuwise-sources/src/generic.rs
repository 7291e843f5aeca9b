//! Generic CSV exports with a column map (`--map timestamp=ts,device=gpu_id,util=value`).
//!
//! Keys: `timestamp` (required; RFC 3339, epoch seconds or milliseconds, or a naive date-time
//! in `--tz`), `device` (else one device per host), `host`, `model`, `namespace`, `pod`, and the
//! readings `util`, `sm_active`, `sm_occupancy`, `tensor_active`, `dram_active`, `mem_bw_util`
//! (percent 0–100; add `_ratio` to the key for a 0–1 column, e.g. `util_ratio=gr_active`),
//! `mem_used_mib`, `mem_total_mib`, `power_w`, `power_limit_w`. At least one reading is
//! required. The file is read with a real CSV parser (quotes allowed), a block of whole records
//! at a time, and must be in time order per device.

use std::collections::HashMap;
use std::io::BufRead;

use gpuwise_core::profile::{DeviceId, ProfileBuilder};
use gpuwise_core::records::{RecordLimit, record_line};
use gpuwise_core::sample::UtilSource;
use gpuwise_core::{DeviceKey, Sample};

use crate::diag::{IngestError, LayoutError, Tally};
use crate::origin::Origin;
use crate::time::{self, LocalClock};
use crate::value;

/// A reading's target in a [`Sample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    Util,
    SmActive,
    SmOccupancy,
    Tensor,
    Dram,
    MemBw,
    MemUsed,
    MemTotal,
    Power,
    PowerLimit,
}

/// Parsed `--map`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColumnMap {
    entries: Vec<(String, String)>,
}

const ID_KEYS: &[&str] = &["timestamp", "device", "host", "model", "namespace", "pod"];

fn reading(key: &str) -> Option<(Reading, f64)> {
    let (base, scale) = key
        .strip_suffix("_ratio")
        .map_or((key, 1.0), |b| (b, 100.0));
    let r = match base {
        "util" => Reading::Util,
        "sm_active" => Reading::SmActive,
        "sm_occupancy" => Reading::SmOccupancy,
        "tensor_active" => Reading::Tensor,
        "dram_active" => Reading::Dram,
        "mem_bw_util" => Reading::MemBw,
        "mem_used_mib" if scale == 1.0 => Reading::MemUsed,
        "mem_total_mib" if scale == 1.0 => Reading::MemTotal,
        "power_w" if scale == 1.0 => Reading::Power,
        "power_limit_w" if scale == 1.0 => Reading::PowerLimit,
        _ => return None,
    };
    Some((r, scale))
}

impl ColumnMap {
    /// Parse `key=column` pairs (each spec may hold several, comma-separated).
    pub fn parse(specs: &[String]) -> Result<Self, LayoutError> {
        let mut entries = Vec::new();
        for spec in specs {
            for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| LayoutError::MapEntry(pair.to_owned()))?;
                let k = k.trim();
                if !ID_KEYS.contains(&k) && reading(k).is_none() {
                    return Err(LayoutError::MapKey(k.to_owned()));
                }
                entries.push((k.to_owned(), v.trim().to_owned()));
            }
        }
        if !entries.iter().any(|(k, _)| k == "timestamp") {
            return Err(LayoutError::MapNoTimestamp);
        }
        if !entries.iter().any(|(k, _)| reading(k).is_some()) {
            return Err(LayoutError::MapNoReading);
        }
        Ok(Self { entries })
    }
}

/// Bytes of whole records read and parsed at a time.
const BLOCK: usize = 1 << 20;

/// Read a whole generic CSV, a block of whole records at a time (so that a record's line is
/// counted from its block's text, [`record_line`]).
///
/// # Errors
/// [`IngestError::Format`] when the header cannot be read, names no mapped column, or the
/// input cannot be read.
pub fn read<R: BufRead>(
    records: &mut RecordLimit<R>,
    map: &ColumnMap,
    origin: &Origin<'_>,
    clock: &mut LocalClock,
    b: &mut ProfileBuilder,
    t: &mut Tally,
) -> Result<(), IngestError> {
    let file = origin.file;
    let failed = |what: &str, e: &dyn std::fmt::Display| IngestError::Format {
        file: file.to_owned(),
        message: format!("cannot read {what}: {e}"),
    };
    let mut parser = csv::ReaderBuilder::new();
    parser
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All);
    let mut block = Vec::new();
    records
        .fill_header(&mut block)
        .map_err(|e| failed("the CSV header", &e))?;
    let mut headers = csv::StringRecord::new();
    parser
        .from_reader(block.as_slice())
        .read_record(&mut headers)
        .map_err(|e| failed("the CSV header", &e))?;
    let columns = Columns::of(map, &headers, file)?;
    let mut devices: HashMap<(String, String), DeviceId> = HashMap::new();
    let mut record = csv::StringRecord::new();
    loop {
        let first = records.line();
        block.clear();
        if !records
            .fill_block(&mut block, BLOCK)
            .map_err(|e| failed("the file", &e))?
        {
            return Ok(());
        }
        let at =
            |p: Option<&csv::Position>| first - 1 + p.map_or(1, |p| record_line(&block, p, None));
        let mut csv = parser.from_reader(block.as_slice());
        loop {
            match csv.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    t.lines += 1;
                    t.skip(
                        "bad_line",
                        file,
                        at(e.position()),
                        format!("not valid CSV: {e}"),
                    );
                    continue;
                }
            }
            let line = at(record.position());
            t.lines += 1;
            if record.len() != headers.len() {
                t.skip(
                    "wrong_column_count",
                    file,
                    line,
                    format!("expected {} columns, found {}", headers.len(), record.len()),
                );
                continue;
            }
            let Some(mut s) = columns.sample(&record, &headers, clock, file, line, t) else {
                continue;
            };
            t.sanitize(&mut s, file, line);
            let id = columns.device(&record, origin, &mut devices, b);
            // A sample without any reading still shows the device existed (and was billed).
            t.taken(b.push(id, &s), file, line, s.ts_ms);
        }
    }
}

/// Where the mapped columns are: identity columns by key, readings with their scale.
struct Columns<'m> {
    ids: HashMap<&'m str, usize>,
    readings: Vec<(usize, Reading, f64, &'m str)>,
    ts: usize,
}

impl<'m> Columns<'m> {
    fn of(
        map: &'m ColumnMap,
        headers: &csv::StringRecord,
        file: &str,
    ) -> Result<Self, IngestError> {
        let col = |name: &str| -> Result<usize, IngestError> {
            headers
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| IngestError::Format {
                    file: file.to_owned(),
                    message: format!(
                        "--map names column `{name}`, which is not in the header ({})",
                        headers.iter().collect::<Vec<_>>().join(", ")
                    ),
                })
        };
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut readings = Vec::new();
        for (k, c) in &map.entries {
            let i = col(c)?;
            match reading(k) {
                Some((r, scale)) => readings.push((i, r, scale, c.as_str())),
                None => {
                    ids.insert(k.as_str(), i);
                }
            }
        }
        let ts = ids["timestamp"];
        Ok(Self { ids, readings, ts })
    }

    fn get<'r>(&self, record: &'r csv::StringRecord, key: &str) -> Option<&'r str> {
        self.ids.get(key).map(|i| &record[*i])
    }

    /// The record's sample: its time and readings (a bad value is dropped and counted; a bad
    /// timestamp skips the record).
    fn sample(
        &self,
        record: &csv::StringRecord,
        headers: &csv::StringRecord,
        clock: &mut LocalClock,
        file: &str,
        line: u64,
        t: &mut Tally,
    ) -> Option<Sample> {
        let Some((ts, _)) = time::parse_instant(&record[self.ts], clock) else {
            t.skip(
                "bad_timestamp",
                file,
                line,
                format!(
                    "`{}` is not a timestamp: `{}`",
                    headers.get(self.ts).unwrap_or(""),
                    &record[self.ts]
                ),
            );
            return None;
        };
        let mut s = Sample::at(ts);
        for &(i, r, scale, name) in &self.readings {
            let raw = record[i].as_bytes();
            if value::is_missing(raw) {
                continue;
            }
            let Some(v) = value::fast_float(&record[i]) else {
                t.skip(
                    "bad_value",
                    file,
                    line,
                    format!("`{name}` is not a number: `{}` (value dropped)", &record[i]),
                );
                continue;
            };
            #[allow(clippy::cast_possible_truncation)]
            let v = Some((v * scale) as f32);
            match r {
                Reading::Util => s.util_pct = v,
                Reading::SmActive => s.sm_active_pct = v,
                Reading::SmOccupancy => s.sm_occupancy_pct = v,
                Reading::Tensor => s.tensor_active_pct = v,
                Reading::Dram => s.dram_active_pct = v,
                Reading::MemBw => s.mem_bw_util_pct = v,
                Reading::MemUsed => s.mem_used_mib = v,
                Reading::MemTotal => s.mem_total_mib = v,
                Reading::Power => s.power_w = v,
                Reading::PowerLimit => s.power_limit_w = v,
            }
        }
        Some(s)
    }

    /// The record's device (host from `--host`, the `host` column, or the file name; device
    /// from the `device` column), added on first sight; its model and workload labels noted.
    fn device(
        &self,
        record: &csv::StringRecord,
        origin: &Origin<'_>,
        devices: &mut HashMap<(String, String), DeviceId>,
        b: &mut ProfileBuilder,
    ) -> DeviceId {
        let h = origin
            .host
            .map(str::to_owned)
            .or_else(|| {
                self.get(record, "host")
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| origin.stem.to_owned());
        let d = self.get(record, "device").unwrap_or("gpu").to_owned();
        let id = match devices.get(&(h.clone(), d.clone())) {
            Some(id) => *id,
            None => {
                let id = b.device(DeviceKey::new(h.clone(), d.clone()));
                devices.insert((h, d), id);
                b.info_mut(id).util_source = Some(UtilSource::Mapped);
                id
            }
        };
        let info = b.info_mut(id);
        if info.model_name.is_none() {
            info.model_name = self
                .get(record, "model")
                .filter(|m| !m.is_empty())
                .map(str::to_owned);
        }
        for k in ["namespace", "pod"] {
            if let Some(v) = self.get(record, k) {
                info.add_label(k, v, 1);
            }
        }
        id
    }
}
