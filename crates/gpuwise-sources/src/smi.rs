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

use crate::diag::{LayoutError, Tally};
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
    /// `mig.uuid` and `mig.profile` (written by `gpuwise record`).
    mig: Option<usize>,
    mig_profile: Option<usize>,
    values: Vec<(usize, Field)>,
    /// `Some(k)` when the timestamp is column 0 and columns `1..k` are identity columns (name,
    /// bus id, uuid, index, serial, hostname) that include the ones a device is looked up by:
    /// then a line whose bytes from the end of the timestamp to column `k` equal those of a
    /// device's last line is that device's, with the same fields (see [`SmiReader`]).
    ident_run: Option<usize>,
}

/// A value column, in the order of `SmiReader::line`'s readings array.
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
    pub fn new(names: &[String], header: Option<Vec<u8>>) -> Result<Self, LayoutError> {
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
            mig: find("mig.uuid"),
            mig_profile: find("mig.profile"),
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
        let ident = |n: &String| {
            [
                "name",
                "pci.bus_id",
                "uuid",
                "index",
                "serial",
                "hostname",
                "mig.uuid",
                "mig.profile",
            ]
            .contains(&n.as_str())
        };
        let k = 1 + names.iter().skip(1).take_while(|n| ident(n)).count();
        let id_col = l.uuid.or(l.bus).or(l.index);
        l.ident_run = (l.ts == Some(0)
            && id_col.is_some_and(|i| i < k)
            && l.hostname.is_none_or(|i| i < k)
            && l.mig.is_none_or(|i| i < k)
            && k < names.len())
        .then_some(k);
        l.names = names;
        if l.ts.is_none() {
            return Err(LayoutError::NoTimestamp);
        }
        if l.values.is_empty() {
            return Err(LayoutError::NothingToMeasure);
        }
        Ok(l)
    }
}

/// Per-block reader state: device lookup and the last text of each field, borrowed from the
/// block being read (`'a` covers both the layout and the block).
///
/// nvidia-smi prints the GPUs of a host in the same order at every tick, and a GPU's identity
/// columns never change. So the next line is first tried as the next GPU's: if its bytes from
/// the end of the timestamp up to the first value column equal those of that GPU's last line,
/// the identity fields (and where they lie) are known without splitting them again or looking
/// the device up. Otherwise the line is split whole and the device looked up by its id.
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
    mig: &'a [u8],
    dev: DeviceId,
    /// The bytes of the device's last line from the comma after the timestamp to the start of
    /// the first value column, and the spans of the identity fields in it (relative to that
    /// comma), when the layout allows the shortcut.
    ident: &'a [u8],
    ident_spans: Vec<(usize, usize)>,
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

    /// Split `line` into `self.spans`; the slot of the device it belongs to when that was
    /// told by the identity shortcut.
    fn split(&mut self, line: &'a [u8]) -> Option<usize> {
        if let Some(k) = self.layout.ident_run
            && !self.devices.is_empty()
        {
            let next = (self.last_hit + 1) % self.devices.len();
            let d = &self.devices[next];
            if let Some(ts_end) = memchr::memchr(b',', line)
                && let Some(rest) = line.get(ts_end..ts_end + d.ident.len())
                && !d.ident.is_empty()
                && value::same(rest, d.ident)
            {
                self.spans.clear();
                self.spans.push((0, ts_end));
                self.spans
                    .extend(d.ident_spans.iter().map(|&(a, z)| (a + ts_end, z + ts_end)));
                debug_assert_eq!(self.spans.len(), k);
                value::comma_spans_from(line, ts_end + d.ident.len(), &mut self.spans);
                return Some(next);
            }
        }
        value::comma_spans(line, &mut self.spans);
        None
    }

    /// Field `i` of the line just split, trimmed.
    fn field(&self, line: &'a [u8], i: usize) -> &'a [u8] {
        let (a, z) = self.spans[i];
        value::trim(&line[a..z])
    }

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
        let predicted = self.split(line);
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
        let Some(ts) = self.timestamp(self.field(line, ts_i), line_no, t) else {
            return;
        };
        let slot = self.device(line, predicted, b);
        let read = self.readings(line, slot, line_no, t);
        let [util, mem_util, mem_used, mem_total, power, power_limit] = read;
        let mut s = Sample {
            util_pct: util,
            mem_bw_util_pct: mem_util,
            mem_used_mib: mem_used,
            mem_total_mib: mem_total,
            power_w: power,
            power_limit_w: power_limit,
            ..Sample::at(ts)
        };
        t.sanitize(&mut s, self.file, line_no);
        // A sample without any reading still shows the device existed (and was billed).
        // Out-of-order and duplicate samples are counted by the profile and reported there.
        t.taken(b.push(self.devices[slot].dev, &s), self.file, line_no, ts);
    }

    /// The line's time in UTC: the previous line's when the text repeats (the GPUs of one query
    /// share it), else parsed; DST folds and gaps are noted, a bad timestamp skips the line.
    fn timestamp(&mut self, ts_text: &'a [u8], line_no: u64, t: &mut Tally) -> Option<EpochMs> {
        let (ts, kind) = match self.last_ts.filter(|(text, ..)| value::same(text, ts_text)) {
            Some((_, ts, kind)) => (ts, kind),
            None => self.parse_timestamp(ts_text, line_no, t)?,
        };
        match kind {
            LocalKind::Unique => {}
            LocalKind::Ambiguous => t.skip("dst_ambiguous", self.file, line_no, "local time repeats at the end of daylight saving: first occurrence assumed (sample kept)"),
            LocalKind::Skipped => t.skip("dst_nonexistent", self.file, line_no, "local time does not exist (daylight-saving gap): read with the earlier offset (sample kept)"),
        }
        Some(ts)
    }

    fn parse_timestamp(
        &mut self,
        ts_text: &'a [u8],
        line_no: u64,
        t: &mut Tally,
    ) -> Option<(EpochMs, LocalKind)> {
        // A trailing `Z` (as `gpuwise record` writes) marks UTC, whatever `--tz` says.
        let utc = ts_text.last() == Some(&b'Z');
        let naive_text = if utc {
            &ts_text[..ts_text.len() - 1]
        } else {
            ts_text
        };
        let Some(local) = self.naive.parse(naive_text) else {
            t.skip(
                "bad_timestamp",
                self.file,
                line_no,
                format!(
                    "`timestamp` is not YYYY/MM/DD HH:MM:SS[.mmm]: `{}`",
                    String::from_utf8_lossy(ts_text)
                ),
            );
            return None;
        };
        let (ts, kind) = if utc {
            (local, LocalKind::Unique)
        } else {
            self.clock.to_utc(local)
        };
        self.last_ts = Some((ts_text, ts, kind));
        Some((ts, kind))
    }

    /// The slot of the line's device: predicted by [`Self::split`], else found by its identity
    /// fields (uuid, else PCI bus id, else index; host and MIG instance), else added.
    fn device(
        &mut self,
        line: &'a [u8],
        predicted: Option<usize>,
        b: &mut ProfileBuilder,
    ) -> usize {
        let layout = self.layout;
        let id_field = layout
            .uuid
            .or(layout.bus)
            .or(layout.index)
            .map_or(&b""[..], |i| self.field(line, i));
        let host_field = match layout.hostname {
            Some(i) if !self.force_host && !value::is_missing(self.field(line, i)) => {
                self.field(line, i)
            }
            _ => b"",
        };
        let mig_field = match layout.mig {
            Some(i) if !value::is_missing(self.field(line, i)) => self.field(line, i),
            _ => b"",
        };
        let n = self.devices.len();
        let hit = predicted.or_else(|| {
            (0..n).map(|k| (self.last_hit + 1 + k) % n).find(|&k| {
                let d = &self.devices[k];
                value::same(d.id, id_field)
                    && value::same(d.host, host_field)
                    && value::same(d.mig, mig_field)
            })
        });
        let slot = match hit {
            Some(k) => k,
            None => self.add_device(line, id_field, host_field, mig_field, b),
        };
        if predicted.is_none()
            && let Some(k) = layout.ident_run
        {
            let from = self.spans[0].1;
            let d = &mut self.devices[slot];
            d.ident = &line[from..self.spans[k].0];
            d.ident_spans.clear();
            d.ident_spans
                .extend(self.spans[1..k].iter().map(|&(a, z)| (a - from, z - from)));
        }
        self.last_hit = slot;
        slot
    }

    /// A device seen for the first time in this block: its key and what the line says of it.
    fn add_device(
        &mut self,
        line: &'a [u8],
        id_field: &'a [u8],
        host_field: &'a [u8],
        mig_field: &'a [u8],
        b: &mut ProfileBuilder,
    ) -> usize {
        let layout = self.layout;
        let host = if host_field.is_empty() {
            self.host.to_owned()
        } else {
            String::from_utf8_lossy(host_field).into_owned()
        };
        let gpu = match (layout.uuid, layout.bus, layout.index) {
            (Some(i), ..) | (None, Some(i), _) => {
                String::from_utf8_lossy(self.field(line, i)).into_owned()
            }
            (None, None, Some(i)) => {
                format!("gpu{}", String::from_utf8_lossy(self.field(line, i)))
            }
            (None, None, None) => "gpu".to_owned(),
        };
        let mut key = DeviceKey::new(host, gpu);
        if !mig_field.is_empty() {
            key.mig = Some(String::from_utf8_lossy(mig_field).into_owned());
        }
        let id = b.device(key);
        let info = b.info_mut(id);
        if !mig_field.is_empty()
            && let Some(i) = layout.mig_profile
            && !value::is_missing(self.field(line, i))
        {
            info.mig_profile = Some(String::from_utf8_lossy(self.field(line, i)).into_owned());
        }
        info.util_source = Some(UtilSource::NvidiaSmi);
        if let Some(i) = layout.name
            && !value::is_missing(self.field(line, i))
        {
            info.model_name = Some(String::from_utf8_lossy(self.field(line, i)).into_owned());
        }
        if let Some(i) = layout.index {
            info.index = std::str::from_utf8(self.field(line, i))
                .ok()
                .and_then(|x| x.parse().ok());
        }
        self.devices.push(Slot {
            host: host_field,
            id: id_field,
            mig: mig_field,
            dev: id,
            ident: b"",
            ident_spans: Vec::new(),
            last: vec![None; layout.values.len()],
        });
        self.devices.len() - 1
    }

    /// The value columns by [`Field`] (an index, not a match per value); a text equal to the
    /// device's last in that column is not parsed again; a bad value is a counted skip.
    fn readings(
        &mut self,
        line: &'a [u8],
        slot: usize,
        line_no: u64,
        t: &mut Tally,
    ) -> [Option<f32>; 6] {
        let layout = self.layout;
        let mut read = [None; 6];
        for (c, &(i, kind)) in layout.values.iter().enumerate() {
            let raw = self.field(line, i);
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
                Ok(v) => read[kind as usize] = v,
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
        read
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;

    use gpuwise_core::settings::ProfileSettings;
    use jiff::tz::TimeZone;

    use super::*;

    /// Rows of three same-named GPUs whose order breaks now and then (a GPU missing from a
    /// tick, two swapped), each with its own utilization: (second, gpu, utilization).
    fn rows() -> Vec<(u32, usize, u32)> {
        let mut out = Vec::new();
        for tick in 0..300u32 {
            let mut order = vec![0, 1, 2];
            if tick % 7 == 3 {
                order.swap(0, 2);
            }
            if tick % 11 == 5 {
                order.remove(1);
            }
            for g in order {
                out.push((tick * 60, g, (tick * 7 + g as u32 * 31) % 101));
            }
        }
        out
    }

    fn layout(header: &str) -> Layout {
        let names: Vec<String> = header.split(',').map(str::to_owned).collect();
        Layout::new(&names, Some(header.as_bytes().to_vec())).expect("layout")
    }

    /// Read `text` whose columns are `header` into device → (samples, mean utilization).
    fn read(header: &str, text: &str) -> (BTreeMap<String, (u64, f64)>, Tally) {
        let layout = layout(header);
        let mut b = ProfileBuilder::new(ProfileSettings::default());
        let mut t = Tally::default();
        SmiReader::new(&layout, "f", "h", false, LocalClock::new(TimeZone::UTC)).read(
            text.as_bytes(),
            &mut b,
            &mut t,
        );
        let stats = b
            .build()
            .finish(&ProfileSettings::default(), &TimeZone::UTC)
            .into_iter()
            .map(|d| {
                let mean = d.stats.util.map_or(f64::NAN, |u| u.mean_pct);
                (d.key.gpu.clone(), (d.stats.samples, mean))
            })
            .collect();
        (stats, t)
    }

    #[test]
    fn utc_marked_timestamps_and_mig_columns() {
        let header = "timestamp, uuid, mig.uuid, mig.profile, utilization.gpu [%]";
        let text = "2026/01/05 10:00:00.000Z, GPU-1, [N/A], [N/A], 50\n\
                    2026/01/05 10:00:00.000Z, GPU-2, MIG-a, 3g.40gb, [N/A]\n\
                    2026/01/05 10:01:00.000ZZ, GPU-1, [N/A], [N/A], 50\n\
                    2026/01/05 10:01:00.000Z, GPU-1, [N/A], [N/A], 50\n\
                    2026/01/05 10:01:00.000Z, GPU-2, MIG-a, 3g.40gb, [N/A]\n";
        let layout = layout(header);
        // A New York clock would move local times by 5 h; `Z` times stay UTC.
        let mut b = ProfileBuilder::new(ProfileSettings::default());
        let mut t = Tally::default();
        let ny = TimeZone::get("America/New_York").expect("tz");
        SmiReader::new(&layout, "f", "h", false, LocalClock::new(ny)).read(
            text.as_bytes(),
            &mut b,
            &mut t,
        );
        assert_eq!(t.count("bad_timestamp"), 1, "a doubled Z is not a time");
        let devices = b
            .build()
            .finish(&ProfileSettings::default(), &TimeZone::UTC);
        assert_eq!(devices.len(), 2);
        let whole = devices.iter().find(|d| d.key.mig.is_none()).expect("GPU-1");
        assert_eq!(whole.stats.first_ts_ms, 1_767_607_200_000);
        let mig = devices.iter().find(|d| d.key.mig.is_some()).expect("MIG");
        assert_eq!(
            (mig.key.gpu.as_str(), mig.key.mig.as_deref()),
            ("GPU-2", Some("MIG-a"))
        );
        assert_eq!(mig.info.mig_profile.as_deref(), Some("3g.40gb"));
        assert!(mig.stats.util.is_none(), "no reading is unknown, not 0 %");
    }

    #[test]
    fn identity_shortcut_gives_what_lookup_gives() {
        let rows = rows();
        // Timestamp first, identity columns next: the shortcut applies.
        let fast_header = "timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB]";
        // A value column between the name and the uuid: the shortcut must not apply (the
        // three GPUs share a name).
        let slow_header = "timestamp, name, utilization.gpu [%], uuid, index, memory.used [MiB]";
        assert!(layout(fast_header).ident_run.is_some());
        assert!(layout(slow_header).ident_run.is_none());
        let (mut fast, mut slow) = (String::new(), String::new());
        for &(sec, g, util) in &rows {
            let ts = jiff::Timestamp::from_second(1_767_571_200 + i64::from(sec))
                .expect("ts")
                .strftime("%Y/%m/%d %H:%M:%S.000");
            let _ = writeln!(fast, "{ts}, NVIDIA L4, GPU-{g:04}, {g}, {util} %, 100 MiB");
            let _ = writeln!(slow, "{ts}, NVIDIA L4, {util} %, GPU-{g:04}, {g}, 100 MiB");
        }
        let (fast_stats, fast_tally) = read(fast_header, &fast);
        let (slow_stats, slow_tally) = read(slow_header, &slow);
        assert_eq!(fast_tally.samples, rows.len() as u64);
        assert_eq!(fast_tally, slow_tally);
        assert_eq!(fast_stats, slow_stats);
        // And both are right: each GPU's samples and time-weighted mean, counted here.
        for g in 0..3 {
            let mine: Vec<&(u32, usize, u32)> = rows.iter().filter(|r| r.1 == g).collect();
            let weighted: f64 = mine
                .windows(2)
                .map(|w| f64::from(w[0].2) * f64::from(w[1].0 - w[0].0))
                .sum();
            let span = f64::from(mine[mine.len() - 1].0 - mine[0].0);
            let (samples, mean) = fast_stats[&format!("GPU-{g:04}")];
            assert_eq!(samples, mine.len() as u64);
            assert!(
                (mean - weighted / span).abs() < 1e-9,
                "{g}: {mean} vs {}",
                weighted / span
            );
        }
    }
}
