//! `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]` logs.
//!
//! Columns are found by header name (any order; a trailing ` [unit]` is stripped and aliases
//! such as `gpu_uuid` are folded to the canonical name), or, for `noheader` logs, from
//! `--columns` in query order. Rows are split on commas (nvidia-smi never quotes) and must
//! have as many fields as the header; a line equal to the header (a restarted loop) is skipped
//! silently. Timestamps are `YYYY/MM/DD HH:MM:SS[.mmm]` in the host's local time (`--tz`).

use gpuwise_core::profile::{DeviceId, ProfileBuilder};
use gpuwise_core::sample::UtilSource;
use gpuwise_core::{DeviceKey, EpochMs, Sample};

use crate::diag::Tally;
use crate::time::{LocalClock, LocalKind};
use crate::value::{self, BadValue, Unit};

/// Which column holds what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Number of columns.
    pub columns: usize,
    /// Column names (canonical).
    pub names: Vec<String>,
    /// The header line as printed, to skip repeats.
    pub header: Option<Vec<u8>>,
    ts: Option<usize>,
    name: Option<usize>,
    uuid: Option<usize>,
    bus: Option<usize>,
    index: Option<usize>,
    hostname: Option<usize>,
    values: Vec<(usize, Field)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Util,
    MemUtil,
    MemUsed,
    MemTotal,
    Power,
    PowerLimit,
}

/// Canonical name of a query field or header token: strip ` [unit]`, lower-case, fold aliases.
#[must_use]
pub fn canonical(token: &str) -> String {
    let t = token.trim();
    let t = t
        .split_once(" [")
        .map_or(t, |(a, _)| a)
        .trim()
        .to_ascii_lowercase();
    let alias = match t.as_str() {
        "gpu_name" => "name",
        "gpu_uuid" => "uuid",
        "gpu_bus_id" => "pci.bus_id",
        "gpu_serial" => "serial",
        "clocks.gr" => "clocks.current.graphics",
        "clocks.sm" => "clocks.current.sm",
        "clocks.mem" => "clocks.current.memory",
        "gpu.power.draw.average" => "power.draw.average",
        "gpu.power.draw.instant" => "power.draw.instant",
        "gpu.power.requested_limit" => "power.limit",
        "gpu.power.current_limit" => "enforced.power.limit",
        "clocks_throttle_reasons.active" => "clocks_event_reasons.active",
        other => other,
    };
    alias.to_owned()
}

/// Field names that only an nvidia-smi query prints; used to recognize a header.
const KNOWN: &[&str] = &[
    "timestamp",
    "name",
    "uuid",
    "index",
    "pci.bus_id",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "memory.free",
    "power.draw",
    "temperature.gpu",
    "driver_version",
];

/// Whether a line looks like an nvidia-smi CSV header.
#[must_use]
pub fn looks_like_header(line: &str) -> bool {
    line.split(',')
        .map(canonical)
        .filter(|t| KNOWN.contains(&t.as_str()))
        .count()
        >= 2
}

impl Layout {
    /// Layout from column names (a header line split on commas, or `--columns`).
    pub fn new(names: &[String], header: Option<Vec<u8>>) -> Result<Self, String> {
        let names: Vec<String> = names.iter().map(|n| canonical(n)).collect();
        let find = |want: &str| names.iter().position(|n| n == want);
        let mut l = Layout {
            columns: names.len(),
            ts: find("timestamp"),
            name: find("name"),
            uuid: find("uuid"),
            bus: find("pci.bus_id"),
            index: find("index"),
            hostname: find("hostname"),
            header,
            ..Layout::default()
        };
        for (want, field) in [
            ("utilization.gpu", Field::Util),
            ("utilization.memory", Field::MemUtil),
            ("memory.used", Field::MemUsed),
            ("memory.total", Field::MemTotal),
        ] {
            if let Some(i) = find(want) {
                l.values.push((i, field));
            }
        }
        if let Some(i) = find("power.draw")
            .or_else(|| find("power.draw.average"))
            .or_else(|| find("power.draw.instant"))
        {
            l.values.push((i, Field::Power));
        }
        if let Some(i) = find("enforced.power.limit").or_else(|| find("power.limit")) {
            l.values.push((i, Field::PowerLimit));
        }
        l.names = names;
        if l.ts.is_none() {
            return Err("no `timestamp` column: collect with `--query-gpu=timestamp,…` so samples can be placed in time".into());
        }
        if l.values.is_empty() {
            return Err("none of utilization.gpu, utilization.memory, memory.used, memory.total, power.draw is present: nothing to measure".into());
        }
        Ok(l)
    }
}

/// Per-block reader state: device lookup and the last text of each field, borrowed from the
/// block being read (`'a` covers both the layout and the block).
pub struct SmiReader<'a> {
    layout: &'a Layout,
    file: &'a str,
    host: &'a str,
    force_host: bool,
    clock: LocalClock,
    /// Devices seen in this chunk. Looked up by a linear scan that starts after the last hit,
    /// because logs interleave GPUs in a fixed order.
    devices: Vec<Slot<'a>>,
    naive: crate::time::NaiveParser,
    /// The last timestamp field and what it converted to: the GPUs of one query share it.
    last_ts: Option<(&'a [u8], EpochMs, LocalKind)>,
    last_hit: usize,
    /// Field boundaries of the current line, reused across lines.
    spans: Vec<(usize, usize)>,
}

/// A device of a block: its identity fields, number, and the last text and value of each
/// value column (most columns repeat from row to row: memory total, power limit; a repeat is
/// not parsed again).
struct Slot<'a> {
    host: &'a [u8],
    id: &'a [u8],
    dev: DeviceId,
    last: Vec<Option<(&'a [u8], Option<f32>)>>,
}

impl<'a> SmiReader<'a> {
    /// A reader for one chunk of `file`.
    #[must_use]
    pub fn new(
        layout: &'a Layout,
        file: &'a str,
        host: &'a str,
        force_host: bool,
        clock: LocalClock,
    ) -> Self {
        Self {
            layout,
            file,
            host,
            force_host,
            clock,
            devices: Vec::new(),
            naive: crate::time::NaiveParser::default(),
            last_ts: None,
            last_hit: 0,
            spans: Vec::with_capacity(layout.columns),
        }
    }

    /// Read every line of `data`, numbering them from 1; returns how many lines there were.
    pub fn read(&mut self, data: &'a [u8], b: &mut ProfileBuilder, t: &mut Tally) -> u64 {
        let mut line_no = 0;
        for raw in crate::value::lines(data) {
            line_no += 1;
            let line = value::trim(raw);
            if !line.is_empty() {
                t.lines += 1;
                self.line(line, line_no, b, t);
            }
        }
        line_no
    }

    #[allow(clippy::too_many_lines)]
    fn line(&mut self, line: &'a [u8], line_no: u64, b: &mut ProfileBuilder, t: &mut Tally) {
        let layout = self.layout;
        // Comments, and a header repeated by a restarted loop (checked only when the first byte
        // could start it: data lines start with a digit).
        if line[0] == b'#'
            || layout
                .header
                .as_deref()
                .is_some_and(|h| h.first() == Some(&line[0]) && h == line)
        {
            return;
        }
        value::comma_spans(line, &mut self.spans);
        let field = |i: usize| -> &'a [u8] {
            let (a, z) = self.spans[i];
            value::trim(&line[a..z])
        };
        if self.spans.len() != layout.columns {
            t.skip(
                "wrong_column_count",
                self.file,
                line_no,
                format!(
                    "expected {} columns, found {}",
                    layout.columns,
                    self.spans.len()
                ),
            );
            return;
        }
        let Some(ts_i) = layout.ts else { return };
        let ts_text = field(ts_i);
        let (ts, kind) = if let Some((_, ts, kind)) =
            self.last_ts.filter(|(text, ..)| value::same(text, ts_text))
        {
            (ts, kind)
        } else {
            let Some(local) = self.naive.parse(ts_text) else {
                t.skip(
                    "bad_timestamp",
                    self.file,
                    line_no,
                    format!(
                        "`timestamp` is not YYYY/MM/DD HH:MM:SS[.mmm]: `{}`",
                        String::from_utf8_lossy(ts_text)
                    ),
                );
                return;
            };
            let (ts, kind) = self.clock.to_utc(local);
            self.last_ts = Some((ts_text, ts, kind));
            (ts, kind)
        };
        match kind {
            LocalKind::Unique => {}
            LocalKind::Ambiguous => t.skip("dst_ambiguous", self.file, line_no, "local time repeats at the end of daylight saving: first occurrence assumed (sample kept)"),
            LocalKind::Skipped => t.skip("dst_nonexistent", self.file, line_no, "local time does not exist (daylight-saving gap): read with the earlier offset (sample kept)"),
        }
        // Device identity: uuid, else PCI bus id, else index, else one device per host.
        let id_field = layout
            .uuid
            .or(layout.bus)
            .or(layout.index)
            .map_or(&b""[..], |i| field(i));
        let host_field = match layout.hostname {
            Some(i) if !self.force_host && !value::is_missing(field(i)) => field(i),
            _ => b"",
        };
        let n = self.devices.len();
        let hit = (0..n).map(|k| (self.last_hit + 1 + k) % n).find(|&k| {
            let d = &self.devices[k];
            value::same(d.id, id_field) && value::same(d.host, host_field)
        });
        let slot = if let Some(k) = hit {
            k
        } else {
            let host = if host_field.is_empty() {
                self.host.to_owned()
            } else {
                String::from_utf8_lossy(host_field).into_owned()
            };
            let gpu = match (layout.uuid, layout.bus, layout.index) {
                (Some(i), ..) | (None, Some(i), _) => {
                    String::from_utf8_lossy(field(i)).into_owned()
                }
                (None, None, Some(i)) => format!("gpu{}", String::from_utf8_lossy(field(i))),
                (None, None, None) => "gpu".to_owned(),
            };
            let id = b.device(DeviceKey::new(host, gpu));
            let info = b.info_mut(id);
            info.util_source = Some(UtilSource::NvidiaSmi);
            if let Some(i) = layout.name
                && !value::is_missing(field(i))
            {
                info.model_name = Some(String::from_utf8_lossy(field(i)).into_owned());
            }
            if let Some(i) = layout.index {
                info.index = std::str::from_utf8(field(i))
                    .ok()
                    .and_then(|x| x.parse().ok());
            }
            self.devices.push(Slot {
                host: host_field,
                id: id_field,
                dev: id,
                last: vec![None; layout.values.len()],
            });
            self.devices.len() - 1
        };
        self.last_hit = slot;
        let mut s = Sample::at(ts);
        for (c, &(i, kind)) in layout.values.iter().enumerate() {
            let raw = field(i);
            let cached = &mut self.devices[slot].last[c];
            let parsed = if let Some((_, v)) = cached.filter(|(text, _)| value::same(text, raw)) {
                Ok(v)
            } else {
                let unit = match kind {
                    Field::Util | Field::MemUtil => Unit::Percent,
                    Field::MemUsed | Field::MemTotal => Unit::Mib,
                    Field::Power | Field::PowerLimit => Unit::Watts,
                };
                let r = value::parse(raw, unit);
                if let Ok(v) = r {
                    *cached = Some((raw, v));
                }
                r
            };
            match parsed {
                Ok(v) => {
                    let target = match kind {
                        Field::Util => &mut s.util_pct,
                        Field::MemUtil => &mut s.mem_bw_util_pct,
                        Field::MemUsed => &mut s.mem_used_mib,
                        Field::MemTotal => &mut s.mem_total_mib,
                        Field::Power => &mut s.power_w,
                        Field::PowerLimit => &mut s.power_limit_w,
                    };
                    *target = v;
                }
                Err(e) => {
                    let what = match e {
                        BadValue::NotNumber => "is not a number",
                        BadValue::Unit(_) => "has a unit that does not belong to the column",
                    };
                    t.skip(
                        "bad_value",
                        self.file,
                        line_no,
                        format!(
                            "`{}` {what}: `{}` (value dropped)",
                            layout.names[i],
                            String::from_utf8_lossy(raw)
                        ),
                    );
                }
            }
        }
        t.sanitize(&mut s, self.file, line_no);
        // A sample without any reading still shows the device existed (and was billed).
        // Out-of-order and duplicate samples are counted by the profile and reported there.
        if b.push(self.devices[slot].dev, &s).is_ok() {
            t.samples += 1;
        }
    }
}
