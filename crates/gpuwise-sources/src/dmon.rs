//! `nvidia-smi dmon` logs.
//!
//! The first `#` line names the columns (their order follows `-s`; newer drivers add `jpg`,
//! `ofa`, `ccpm`), the second gives units; both may repeat later in the file. Values are
//! whitespace-separated, `-` is missing. With `-o DT` the rows start with `YYYYMMDD` and
//! `HH:MM:SS` in the host's local time. Without a date and time, `--start` is required and
//! every round of rows (a new round starts when the GPU index does not increase) is
//! `--interval` later than the previous one (dmon's default is 1 s).
//!
//! Mapping: `sm` → utilization (dmon's SM column is NVML's GPU utilization), `mem` →
//! memory-interface busy time, `fb` → memory used (MiB), `pwr` → power (W).

use std::collections::HashMap;

use gpuwise_core::profile::{DeviceId, ProfileBuilder};
use gpuwise_core::sample::UtilSource;
use gpuwise_core::{DeviceKey, EpochMs, Sample};

use crate::diag::{LayoutError, Tally};
use crate::time::{LocalClock, naive_ms};
use crate::value::{self, Unit};

/// Column positions of a dmon log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Columns.
    pub columns: usize,
    date: Option<usize>,
    time: Option<usize>,
    gpu: usize,
    sm: Option<usize>,
    mem: Option<usize>,
    fb: Option<usize>,
    pwr: Option<usize>,
}

impl Layout {
    /// Whether rows carry a date and time.
    #[must_use]
    pub fn timed(&self) -> bool {
        self.date.is_some() && self.time.is_some()
    }

    /// Layout from the first header line (`# gpu pwr …` or `#Date Time gpu …`).
    pub fn from_header(line: &str) -> Result<Self, LayoutError> {
        let names: Vec<String> = line
            .trim_start_matches('#')
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect();
        let find = |w: &str| names.iter().position(|n| n == w);
        let gpu = find("gpu").ok_or(LayoutError::DmonNoGpu)?;
        let l = Layout {
            columns: names.len(),
            date: find("date"),
            time: find("time"),
            gpu,
            sm: find("sm"),
            mem: find("mem"),
            fb: find("fb"),
            pwr: find("pwr"),
        };
        if l.sm.is_none() && l.fb.is_none() && l.pwr.is_none() && l.mem.is_none() {
            return Err(LayoutError::DmonNothingToMeasure);
        }
        Ok(l)
    }
}

/// Reads dmon rows of one file (or chunk).
pub struct DmonReader<'a> {
    layout: &'a Layout,
    file: &'a str,
    host: &'a str,
    clock: LocalClock,
    start_ms: Option<EpochMs>,
    interval_ms: u64,
    round: i64,
    last_gpu: Option<u32>,
    devices: HashMap<u32, DeviceId>,
}

impl<'a> DmonReader<'a> {
    /// A reader. `start_ms`/`interval_ms` place untimed rows.
    #[must_use]
    pub fn new(
        layout: &'a Layout,
        file: &'a str,
        host: &'a str,
        clock: LocalClock,
        start_ms: Option<EpochMs>,
        interval_ms: u64,
    ) -> Self {
        Self {
            layout,
            file,
            host,
            clock,
            start_ms,
            interval_ms,
            round: 0,
            last_gpu: None,
            devices: HashMap::new(),
        }
    }

    /// Read every line of `data`, numbering them from 1; returns how many lines there were.
    pub fn read(&mut self, data: &[u8], b: &mut ProfileBuilder, t: &mut Tally) -> u64 {
        let mut fields: Vec<&[u8]> = Vec::with_capacity(self.layout.columns);
        let mut line_no = 0;
        for raw in crate::value::lines(data) {
            line_no += 1;
            let line = value::trim(raw);
            if !line.is_empty() && line[0] != b'#' {
                t.lines += 1;
                fields.clear();
                fields.extend(
                    line.split(|c| c.is_ascii_whitespace())
                        .filter(|f| !f.is_empty()),
                );
                self.row(&fields, line_no, b, t);
            }
        }
        line_no
    }

    fn row(&mut self, f: &[&[u8]], line_no: u64, b: &mut ProfileBuilder, t: &mut Tally) {
        let l = self.layout;
        if f.len() != l.columns {
            t.skip(
                "wrong_column_count",
                self.file,
                line_no,
                format!("expected {} columns, found {}", l.columns, f.len()),
            );
            return;
        }
        let Some(gpu) = std::str::from_utf8(f[l.gpu])
            .ok()
            .and_then(|g| g.parse::<u32>().ok())
        else {
            t.skip(
                "bad_value",
                self.file,
                line_no,
                format!(
                    "`gpu` is not an index: `{}`",
                    String::from_utf8_lossy(f[l.gpu])
                ),
            );
            return;
        };
        let ts = if let (Some(d), Some(tm)) = (l.date, l.time) {
            match parse_dt(f[d], f[tm]) {
                Some(local) => self.clock.to_utc(local).0,
                None => {
                    t.skip(
                        "bad_timestamp",
                        self.file,
                        line_no,
                        format!(
                            "date/time is not YYYYMMDD HH:MM:SS: `{} {}`",
                            String::from_utf8_lossy(f[d]),
                            String::from_utf8_lossy(f[tm])
                        ),
                    );
                    return;
                }
            }
        } else {
            if self.last_gpu.is_some_and(|last| gpu <= last) {
                self.round += 1;
            }
            self.last_gpu = Some(gpu);
            #[allow(clippy::cast_possible_wrap)]
            let step = self.interval_ms as i64;
            self.start_ms.unwrap_or(0) + self.round * step
        };
        let mut s = Sample::at(ts);
        for (col, slot, unit) in [
            (l.sm, &mut s.util_pct, Unit::Percent),
            (l.mem, &mut s.mem_bw_util_pct, Unit::Percent),
            (l.fb, &mut s.mem_used_mib, Unit::Mib),
            (l.pwr, &mut s.power_w, Unit::Watts),
        ] {
            if let Some(i) = col {
                match value::parse(f[i], unit) {
                    Ok(v) => *slot = v,
                    Err(_) => t.skip(
                        "bad_value",
                        self.file,
                        line_no,
                        format!(
                            "column {} is not a number: `{}` (value dropped)",
                            i + 1,
                            String::from_utf8_lossy(f[i])
                        ),
                    ),
                }
            }
        }
        t.sanitize(&mut s, self.file, line_no);
        let host = self.host;
        let id = *self.devices.entry(gpu).or_insert_with(|| {
            let id = b.device(DeviceKey::new(host, format!("gpu{gpu}")));
            let info = b.info_mut(id);
            info.index = Some(gpu);
            info.util_source = Some(UtilSource::NvidiaSmi);
            id
        });
        // A sample without any reading still shows the device existed (and was billed).
        t.taken(b.push(id, &s), self.file, line_no, s.ts_ms);
    }
}

fn parse_dt(date: &[u8], time: &[u8]) -> Option<i64> {
    if date.len() != 8 || time.len() != 8 || time[2] != b':' || time[5] != b':' {
        return None;
    }
    let n = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u32>().ok();
    naive_ms(
        i64::from(n(&date[0..4])?),
        n(&date[4..6])?,
        n(&date[6..8])?,
        n(&time[0..2])?,
        n(&time[3..5])?,
        n(&time[6..8])?,
        0,
    )
}
