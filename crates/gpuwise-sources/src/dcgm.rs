//! DCGM exporter scrapes (Prometheus text exposition, also OpenMetrics with `# EOF`).
//!
//! One line is `name{labels} value [timestamp]`. A sample of a device is assembled from all
//! metrics of that device (host, UUID, MIG instance) at one timestamp. Lines without a
//! timestamp take the file's time (a stamp in its name, else its modification time), so a
//! collection loop writes one scrape per file; see `docs/input-formats.md`.
//!
//! Labels: `Hostname` or `hostname`; `UUID` or `uuid`; `gpu`; `modelName` or `model_name`;
//! `GPU_I_ID`/`GPU_I_PROFILE` (a MIG instance is its own device); `exported_pod`, `pod`,
//! `pod_name` (first present wins, `exported_*` being the workload when Prometheus renamed
//! them), same for namespace and container; any other non-infrastructure label is kept for
//! `--group-by label:NAME`.
//!
//! Values: `DEV_*_UTIL` are 0–100, `PROF_*` are ratios 0–1 (multiplied by 100). The DCGM
//! "blank" sentinels (int64 9223372036854775792–795, int32 2147483632–635, float
//! 140737488355328.0–331.0) are dropped by exact match of the printed value, never by a
//! threshold. `DEV_GPU_UTIL` of a MIG instance is ignored (DCGM does not support it there).
//! Timestamps: milliseconds (Prometheus text), or seconds when fractional or below 10^11
//! (OpenMetrics).

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::sample::UtilSource;
use gpuwise_core::{DeviceKey, EpochMs, Sample};

use crate::diag::Tally;
use crate::origin::Origin;
use crate::value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    GrActive,
    GpuUtil,
    SmActive,
    SmOccupancy,
    Tensor,
    Dram,
    MemCopy,
    FbUsed,
    FbFree,
    FbTotal,
    FbReserved,
    Power,
    PowerLimit,
}

fn metric(name: &str) -> Option<(Metric, f64)> {
    Some(match name {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" | "dcgm_fi_prof_gr_engine_active" => {
            (Metric::GrActive, 100.0)
        }
        "DCGM_FI_DEV_GPU_UTIL" | "dcgm_gpu_utilization" => (Metric::GpuUtil, 1.0),
        "DCGM_FI_PROF_SM_ACTIVE" | "DCGM_FI_PROF_SM_UTIL_RATIO" | "dcgm_fi_prof_sm_active" => {
            (Metric::SmActive, 100.0)
        }
        "DCGM_FI_PROF_SM_OCCUPANCY" | "dcgm_fi_prof_sm_occupancy" => (Metric::SmOccupancy, 100.0),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" | "dcgm_fi_prof_pipe_tensor_active" => {
            (Metric::Tensor, 100.0)
        }
        "DCGM_FI_PROF_DRAM_ACTIVE" | "dcgm_fi_prof_dram_active" => (Metric::Dram, 100.0),
        "DCGM_FI_DEV_MEM_COPY_UTIL" | "dcgm_mem_copy_utilization" => (Metric::MemCopy, 1.0),
        "DCGM_FI_DEV_FB_USED" | "dcgm_fb_used" => (Metric::FbUsed, 1.0),
        "DCGM_FI_DEV_FB_FREE" | "dcgm_fb_free" => (Metric::FbFree, 1.0),
        "DCGM_FI_DEV_FB_TOTAL" => (Metric::FbTotal, 1.0),
        "DCGM_FI_DEV_FB_RESERVED" => (Metric::FbReserved, 1.0),
        "DCGM_FI_DEV_POWER_USAGE" | "DCGM_FI_DEV_BOARD_POWER_WATTS" | "dcgm_power_usage" => {
            (Metric::Power, 1.0)
        }
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT" | "DCGM_FI_DEV_POWER_MGMT_LIMIT" => {
            (Metric::PowerLimit, 1.0)
        }
        _ => return None,
    })
}

/// Labels that describe the exporter or the device, not the workload.
const INFRA_LABELS: &[&str] = &[
    "gpu",
    "UUID",
    "uuid",
    "device",
    "modelName",
    "model_name",
    "Hostname",
    "hostname",
    "pci_bus_id",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "instance",
    "job",
    "err_code",
    "err_msg",
    "pod_uid",
    "vgpu",
    "endpoint",
    "service",
    "exported_instance",
    "exported_job",
    "prometheus",
    "exported_container",
    "container",
    "container_name",
    "pod",
    "exported_pod",
    "pod_name",
    "namespace",
    "exported_namespace",
    "pod_namespace",
];

/// The workload labels of a series, by the rules of the module doc: `namespace`, `pod` and
/// `container` (`exported_*` first), then every label that is not infrastructure. `label`
/// looks up the first non-empty of several names; `all` is every label. The file reader and
/// the Prometheus pushdown both use it.
pub fn workload_labels<'a>(
    label: impl Fn(&[&str]) -> Option<String>,
    all: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    for (nice, keys) in [
        (
            "namespace",
            &["exported_namespace", "namespace", "pod_namespace"][..],
        ),
        ("pod", &["exported_pod", "pod", "pod_name"][..]),
        (
            "container",
            &["exported_container", "container", "container_name"][..],
        ),
    ] {
        if let Some(v) = label(keys) {
            labels.push((nice.to_owned(), v));
        }
    }
    for (k, v) in all {
        if !INFRA_LABELS.contains(&k)
            && !k.starts_with("DCGM_")
            && !k.starts_with("__")
            && !v.is_empty()
        {
            labels.push((k.to_owned(), v.to_owned()));
        }
    }
    labels
}

/// Whether a value is one of DCGM's "blank" sentinels (exact match of the printed value).
#[must_use]
pub fn is_sentinel(text: &str) -> bool {
    if let Ok(i) = text.parse::<i64>() {
        return (9_223_372_036_854_775_792..=9_223_372_036_854_775_795).contains(&i)
            || (2_147_483_632..=2_147_483_635).contains(&i);
    }
    text.parse::<f64>().is_ok_and(|f| {
        [
            140_737_488_355_328.0,
            140_737_488_355_329.0,
            140_737_488_355_330.0,
            140_737_488_355_331.0,
        ]
        .contains(&f)
    })
}

#[derive(Clone, Debug, Default)]
struct Partial {
    /// The first line of the sample (what skips about the whole sample name).
    line: u64,
    gr: Option<f32>,
    gpu_util: Option<f32>,
    sm: Option<f32>,
    occ: Option<f32>,
    tensor: Option<f32>,
    dram: Option<f32>,
    mem_copy: Option<f32>,
    used: Option<f32>,
    free: Option<f32>,
    total: Option<f32>,
    reserved: Option<f32>,
    power: Option<f32>,
    limit: Option<f32>,
    /// The job a series of the sample names (see [`JOB_LABELS`]).
    job: Option<std::sync::Arc<str>>,
}

/// Labels that name the job holding a GPU: dcgm-exporter's HPC job mapping (`hpc_job`),
/// Princeton jobstats' exporter (`jobid`), and the generic `slurm_job_id`.
pub const JOB_LABELS: &[&str] = &["hpc_job", "jobid", "slurm_job_id"];

impl Partial {
    /// Where a metric's value goes.
    fn slot(&mut self, m: Metric) -> &mut Option<f32> {
        match m {
            Metric::GrActive => &mut self.gr,
            Metric::GpuUtil => &mut self.gpu_util,
            Metric::SmActive => &mut self.sm,
            Metric::SmOccupancy => &mut self.occ,
            Metric::Tensor => &mut self.tensor,
            Metric::Dram => &mut self.dram,
            Metric::MemCopy => &mut self.mem_copy,
            Metric::FbUsed => &mut self.used,
            Metric::FbFree => &mut self.free,
            Metric::FbTotal => &mut self.total,
            Metric::FbReserved => &mut self.reserved,
            Metric::Power => &mut self.power,
            Metric::PowerLimit => &mut self.limit,
        }
    }
}

/// Parsed `name{labels} value [ts]`.
struct Line<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
}

fn parse_line(line: &str) -> Result<Line<'_>, String> {
    let name_end = line
        .find(['{', ' ', '\t'])
        .ok_or("no value after the metric name")?;
    let name = &line[..name_end];
    if name.is_empty() {
        return Err("empty metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let mut end = None;
        loop {
            // skip separators
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || c.is_whitespace() {
                    chars.next();
                } else {
                    break;
                }
            }
            let Some(&(start, c)) = chars.peek() else {
                break;
            };
            if c == '}' {
                end = Some(start);
                break;
            }
            let eq = body[start..].find('=').ok_or("a label without `=`")? + start;
            let key = body[start..eq].trim();
            let after = &body[eq + 1..];
            if !after.starts_with('"') {
                return Err(format!("label `{key}` has no quoted value"));
            }
            let mut val = String::new();
            let mut escaped = false;
            let mut close = None;
            for (i, ch) in after[1..].char_indices() {
                if escaped {
                    val.push(match ch {
                        'n' => '\n',
                        other => other,
                    });
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == '"' {
                    close = Some(eq + 1 + 1 + i);
                    break;
                } else {
                    val.push(ch);
                }
            }
            let close = close.ok_or_else(|| format!("label `{key}` has an unterminated value"))?;
            labels.push((key, val));
            // advance the iterator past the closing quote
            while let Some(&(i, _)) = chars.peek() {
                if i <= close {
                    chars.next();
                } else {
                    break;
                }
            }
        }
        let end = end.ok_or("labels are not closed with `}`")?;
        rest = &body[end + 1..];
    }
    let mut parts = rest.split_whitespace();
    parts.next().ok_or("no value")?;
    parts.next();
    if parts.next().is_some() {
        return Err("more than a value and a timestamp after the labels".into());
    }
    Ok(Line { name, labels })
}

fn parse_ts(t: &str) -> Option<EpochMs> {
    let v: f64 = t.parse().ok()?;
    if !v.is_finite() {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    Some(if t.contains('.') || v < 1e11 {
        (v * 1000.0).round() as i64
    } else {
        v.round() as i64
    })
}

/// What is known about one series (one label set): its device and what its lines mean.
struct Series {
    /// Index into the reader's devices.
    dev: usize,
    /// A MIG instance (its `DEV_GPU_UTIL` is ignored).
    mig: bool,
    /// Workload labels of this label set, counted once per utilization or memory line.
    labels: Vec<(String, String)>,
    /// Lines of this label set that count its labels.
    counted: u64,
    /// The job this label set names, if any.
    job: Option<std::sync::Arc<str>>,
}

struct Dev {
    id: gpuwise_core::profile::DeviceId,
    info: gpuwise_core::DeviceInfo,
    source: Option<UtilSource>,
    /// Samples being assembled, in time order.
    pending: Vec<(EpochMs, Partial)>,
    /// Latest timestamp already handed to the profile.
    flushed: Option<EpochMs>,
}

/// How a file orders its lines: by scrape (all metrics of one time together, the exporter's
/// and a collection loop's order) or by series (each series' whole history, then the next:
/// `promtool tsdb dump`, backfill files). A file is first read by scrape; a line older than a
/// sample already complete shows it is ordered by series, and it is read again that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Samples are complete once a later timestamp of their device appears: flushed as read,
    /// memory bounded by the number of devices.
    ByScrape,
    /// Samples are complete only at the end of the file: buffered (memory grows with samples).
    BySeries,
}

/// How a read ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// All lines read.
    Done,
    /// Read [`Order::ByScrape`], the file turned out to be ordered by series: read it again
    /// with [`Order::BySeries`] (into a fresh builder).
    ReadAgainBySeries,
}

/// `name{labels} rest` → (`labels` text without braces, `rest`); a line without braces has
/// an empty label text. `None` when the braces do not close.
///
/// The closing brace is the last `}` of the line: what follows it is a number and an optional
/// timestamp, which never contain one, while a quoted label value may. (Quotes are checked
/// when a label set is first parsed.)
fn split_labels(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let open = line
        .iter()
        .position(|c| *c == b'{' || c.is_ascii_whitespace())?;
    if line[open] != b'{' {
        return Some((&line[open..open], &line[open..]));
    }
    let close = memchr::memrchr(b'}', line).filter(|c| *c > open)?;
    Some((&line[open + 1..close], &line[close + 1..]))
}

/// Read a DCGM text stream into `b`. `file_ts` is the time of lines without a timestamp.
///
/// Lines are read one at a time; a series' labels are parsed once, on first sight, and looked
/// up by their text afterwards. In a file ordered by scrape (see [`Order`]), a device's
/// sample is handed to the profile as soon as a later timestamp of that device appears, so
/// memory is bounded by the number of devices; a file ordered by series is buffered.
pub fn read(
    r: &mut dyn std::io::BufRead,
    order: Order,
    origin: &Origin<'_>,
    file_ts: Option<EpochMs>,
    b: &mut ProfileBuilder,
    t: &mut Tally,
) -> std::io::Result<Outcome> {
    let mut reader = Reader {
        origin,
        order,
        file_ts,
        series: FxHashMap::default(),
        index: HashMap::new(),
        devs: Vec::new(),
        missing_time: false,
        since_flush: 0,
        late: 0,
    };
    let file = origin.file;
    let mut buf = Vec::with_capacity(512);
    let mut line_no = 0u64;
    loop {
        match crate::lines::read_line(r, &mut buf, crate::lines::MAX_LINE)? {
            crate::lines::Line::End => break,
            crate::lines::Line::Whole => line_no += 1,
            crate::lines::Line::TooLong => {
                line_no += 1;
                t.lines += 1;
                t.skip(
                    "line_too_long",
                    file,
                    line_no,
                    format!("line longer than {} bytes", crate::lines::MAX_LINE),
                );
                continue;
            }
        }
        let line = value::trim(&buf);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        t.lines += 1;
        if reader.line(line, line_no, b, t) == Step::ReadAgainBySeries {
            return Ok(Outcome::ReadAgainBySeries);
        }
    }
    reader.finish(b, t);
    Ok(Outcome::Done)
}

/// What a line asks of the read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Next,
    /// A sample arrived for a time already handed on: the file is not ordered by scrape.
    ReadAgainBySeries,
}

/// The state of one DCGM read: the label sets seen, their devices, and what was noted.
struct Reader<'o> {
    origin: &'o Origin<'o>,
    order: Order,
    file_ts: Option<EpochMs>,
    series: FxHashMap<Vec<u8>, Series>,
    index: HashMap<DeviceKey, usize>,
    devs: Vec<Dev>,
    missing_time: bool,
    since_flush: u32,
    late: u64,
}

impl Reader<'_> {
    /// One metric line: its series (labels parsed on first sight), its time, the device's
    /// pending sample at that time, and the value in its slot.
    fn line(&mut self, line: &[u8], line_no: u64, b: &mut ProfileBuilder, t: &mut Tally) -> Step {
        let file = self.origin.file;
        // The metric name decides whether the line matters at all.
        let name_end = line
            .iter()
            .position(|c| *c == b'{' || c.is_ascii_whitespace())
            .unwrap_or(line.len());
        let name = std::str::from_utf8(&line[..name_end]).unwrap_or("");
        let known = metric(name);
        if known.is_none() && !name.starts_with("DCGM_") && !name.starts_with("dcgm_") {
            return Step::Next;
        }
        let Some((label_text, rest)) = split_labels(line) else {
            t.skip(
                "bad_line",
                file,
                line_no,
                "not a metric line: labels are not closed with `}`",
            );
            return Step::Next;
        };
        let mut parts = rest
            .split(|c| c.is_ascii_whitespace())
            .filter(|p| !p.is_empty());
        let (Some(value_raw), ts_raw, None) = (parts.next(), parts.next(), parts.next()) else {
            t.skip(
                "bad_line",
                file,
                line_no,
                "not a metric line: expected a value and an optional timestamp after the labels",
            );
            return Step::Next;
        };
        let (dev, is_mig, job) = match self.series.get(label_text) {
            Some(s) => (s.dev, s.mig, s.job.clone()),
            None => match self.new_series(line, label_text, line_no, b, t) {
                Some(x) => x,
                None => return Step::Next,
            },
        };
        if is_mig && known.is_some_and(|(m, _)| m == Metric::GpuUtil) {
            return Step::Next;
        }
        let Some(ts) = self.timestamp(ts_raw, line_no, t) else {
            return Step::Next;
        };
        let d = &mut self.devs[dev];
        if d.flushed.is_some_and(|f| ts <= f) {
            if self.order == Order::ByScrape {
                return Step::ReadAgainBySeries;
            }
            self.late += 1;
            return Step::Next;
        }
        // Any DCGM metric of a device shows it exists at that time (and is billed), even one
        // gpuwise does not read.
        let pos = pending_at(d, ts, line_no);
        let Some((m, scale)) = known else {
            return Step::Next;
        };
        let value_text = std::str::from_utf8(value_raw).unwrap_or("");
        if is_sentinel(value_text) {
            t.skip(
                "dcgm_blank",
                file,
                line_no,
                format!(
                    "`{name}` is a DCGM blank sentinel `{value_text}` (not supported / not found)"
                ),
            );
            return Step::Next;
        }
        let Some(v) = value::parse_f64(value_raw) else {
            t.skip(
                "bad_value",
                file,
                line_no,
                format!("`{name}` value is not a number: `{value_text}`"),
            );
            return Step::Next;
        };
        if matches!(m, Metric::GrActive | Metric::GpuUtil | Metric::FbUsed)
            && let Some(s) = self.series.get_mut(label_text)
        {
            s.counted += 1;
        }
        #[allow(clippy::cast_possible_truncation)]
        let v = (v * scale) as f32;
        let p = &mut self.devs[dev].pending[pos].1;
        *p.slot(m) = Some(v);
        if job.is_some() {
            p.job = job;
        }
        self.since_flush += 1;
        if self.order == Order::ByScrape && self.since_flush >= 1 << 14 {
            self.since_flush = 0;
            for d in &mut self.devs {
                // Everything but the newest timestamp of a device is complete.
                let keep = d.pending.len().saturating_sub(1);
                flush(d, keep, file, b, t);
            }
        }
        Step::Next
    }

    /// A label set seen for the first time: its device (by host, UUID and MIG instance; added
    /// when new), workload labels and job. `None` when the line cannot name a device.
    fn new_series(
        &mut self,
        line: &[u8],
        label_text: &[u8],
        line_no: u64,
        b: &mut ProfileBuilder,
        t: &mut Tally,
    ) -> Option<(usize, bool, Option<std::sync::Arc<str>>)> {
        let Origin { file, host, stem } = *self.origin;
        let Ok(text) = std::str::from_utf8(line) else {
            t.skip("bad_line", file, line_no, "not UTF-8");
            return None;
        };
        let parsed = match parse_line(text) {
            Ok(p) => p,
            Err(e) => {
                t.skip("bad_line", file, line_no, format!("not a metric line: {e}"));
                return None;
            }
        };
        let label = |keys: &[&str]| -> Option<String> {
            keys.iter().find_map(|k| {
                parsed
                    .labels
                    .iter()
                    .find(|(lk, v)| lk == k && !v.is_empty())
                    .map(|(_, v)| v.clone())
            })
        };
        let Some(uuid) =
            label(&["UUID", "uuid"]).or_else(|| label(&["gpu"]).map(|g| format!("gpu{g}")))
        else {
            t.skip(
                "bad_line",
                file,
                line_no,
                format!("`{}` has neither a `UUID` nor a `gpu` label", parsed.name),
            );
            return None;
        };
        let mig = label(&["GPU_I_ID"]);
        let host_name = host
            .map(str::to_owned)
            .or_else(|| label(&["Hostname", "hostname"]))
            .unwrap_or_else(|| stem.to_owned());
        let key = DeviceKey {
            host: host_name,
            gpu: uuid,
            mig: mig.clone(),
        };
        let dev = match self.index.get(&key) {
            Some(d) => *d,
            None => {
                let id = b.device(key.clone());
                // The index is known to a tap while the file is read (the rest of the
                // device's facts join the profile when the file is done).
                b.info_mut(id).index = label(&["gpu"]).and_then(|g| g.parse().ok());
                self.devs.push(Dev {
                    id,
                    info: gpuwise_core::DeviceInfo::default(),
                    source: None,
                    pending: Vec::new(),
                    flushed: None,
                });
                self.index.insert(key, self.devs.len() - 1);
                self.devs.len() - 1
            }
        };
        let info = &mut self.devs[dev].info;
        if info.model_name.is_none() {
            info.model_name = label(&["modelName", "model_name"]);
            info.index = label(&["gpu"]).and_then(|g| g.parse().ok());
            info.mig_profile = label(&["GPU_I_PROFILE"]);
        }
        // The job a series names: a scheduler's job, else the pod dcgm-exporter maps the GPU
        // to (`namespace/pod`).
        let job: Option<std::sync::Arc<str>> = label(JOB_LABELS)
            .or_else(|| {
                let ns = label(&["exported_namespace", "namespace", "pod_namespace"])?;
                let pod = label(&["exported_pod", "pod", "pod_name"])?;
                Some(format!("{ns}/{pod}"))
            })
            .map(Into::into);
        let labels = workload_labels(label, parsed.labels.iter().map(|(k, v)| (*k, v.as_str())));
        self.series.insert(
            label_text.to_vec(),
            Series {
                dev,
                mig: mig.is_some(),
                labels,
                counted: 0,
                job: job.clone(),
            },
        );
        Some((dev, mig.is_some(), job))
    }

    /// The line's timestamp, else the file's time; `None` (noted) when neither is there.
    fn timestamp(&mut self, ts_raw: Option<&[u8]>, line_no: u64, t: &mut Tally) -> Option<EpochMs> {
        match ts_raw {
            Some(raw) => {
                let ts = std::str::from_utf8(raw).ok().and_then(parse_ts);
                if ts.is_none() {
                    t.skip(
                        "bad_timestamp",
                        self.origin.file,
                        line_no,
                        format!(
                            "timestamp is not a number: `{}`",
                            String::from_utf8_lossy(raw)
                        ),
                    );
                }
                ts
            }
            None => {
                if self.file_ts.is_none() {
                    self.missing_time = true;
                }
                self.file_ts
            }
        }
    }

    /// Hand everything still pending to the profile, with the notes and each device's labels
    /// and utilization source.
    fn finish(mut self, b: &mut ProfileBuilder, t: &mut Tally) {
        let file = self.origin.file;
        if self.missing_time {
            t.skip(
                "no_timestamp",
                file,
                0,
                "lines without a timestamp, and no time in the file name or metadata",
            );
        }
        if self.late > 0 {
            t.skip(
                "late_line",
                file,
                0,
                format!(
                    "{} line(s) repeat a sample already complete: dropped",
                    self.late
                ),
            );
        }
        for d in &mut self.devs {
            let n = d.pending.len();
            flush(d, n, file, b, t);
        }
        for s in self.series.values() {
            for (k, v) in &s.labels {
                self.devs[s.dev].info.add_label(k, v, s.counted);
            }
        }
        for d in self.devs {
            let mut info = d.info;
            info.util_source = d.source;
            b.info_mut(d.id).merge(&info);
        }
    }
}

/// The index of the device's pending sample at `ts`, added (in time order) when missing.
fn pending_at(d: &mut Dev, ts: EpochMs, line_no: u64) -> usize {
    let fresh = || {
        (
            ts,
            Partial {
                line: line_no,
                ..Partial::default()
            },
        )
    };
    match d.pending.last() {
        Some((last, _)) if *last == ts => d.pending.len() - 1,
        Some((last, _)) if *last > ts => match d.pending.binary_search_by_key(&ts, |(x, _)| *x) {
            Ok(i) => i,
            Err(i) => {
                d.pending.insert(i, fresh());
                i
            }
        },
        _ => {
            d.pending.push(fresh());
            d.pending.len() - 1
        }
    }
}

/// Hand the first `n` pending samples of a device to the profile.
fn flush(d: &mut Dev, n: usize, file: &str, b: &mut ProfileBuilder, t: &mut Tally) {
    if n == 0 {
        return;
    }
    for (ts, p) in d.pending.drain(..n) {
        let util = match (p.gr, p.gpu_util) {
            (Some(g), _) => {
                d.source = Some(d.source.map_or(UtilSource::DcgmGrEngineActive, |s| {
                    s.min(UtilSource::DcgmGrEngineActive)
                }));
                Some(g)
            }
            (None, Some(u)) => {
                d.source = Some(
                    d.source
                        .map_or(UtilSource::DcgmGpuUtil, |s| s.min(UtilSource::DcgmGpuUtil)),
                );
                Some(u)
            }
            _ => None,
        };
        let total = p.total.or_else(|| match (p.used, p.free) {
            (Some(u), Some(f)) => Some(u + f + p.reserved.unwrap_or(0.0)),
            _ => None,
        });
        let mut s = Sample {
            util_pct: util,
            sm_active_pct: p.sm,
            sm_occupancy_pct: p.occ,
            tensor_active_pct: p.tensor,
            dram_active_pct: p.dram,
            mem_bw_util_pct: p.mem_copy,
            mem_used_mib: p.used,
            mem_total_mib: total,
            power_w: p.power,
            power_limit_w: p.limit,
            ..Sample::at(ts)
        };
        t.sanitize(&mut s, file, p.line);
        t.taken(b.push_tagged(d.id, &s, p.job.as_deref()), file, p.line, ts);
        d.flushed = Some(ts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_with_escapes() {
        let l = parse_line(
            r#"DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",msg="a \"b\", c"} 87 1767225600000"#,
        )
        .expect("valid");
        assert_eq!(l.name, "DCGM_FI_DEV_GPU_UTIL");
        assert_eq!(
            l.labels,
            vec![
                ("gpu", "0".to_owned()),
                ("UUID", "GPU-1".to_owned()),
                ("msg", "a \"b\", c".to_owned())
            ]
        );
        assert!(parse_line("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 87").is_err());
        assert!(parse_line("DCGM_FI_DEV_GPU_UTIL{gpu=0} 87").is_err());
        assert!(parse_line("justaname").is_err());
    }

    #[test]
    fn labels_split_respecting_quotes() {
        let (l, rest) = split_labels(br#"M{a="x}y",b="q\"}"} 1 2"#).expect("closed");
        assert_eq!(l, br#"a="x}y",b="q\"}""#);
        assert_eq!(rest, b" 1 2");
        assert!(split_labels(br#"M{a="x" 1"#).is_none());
        assert!(split_labels(br#"M}{a="x" 1"#).is_none());
        assert_eq!(split_labels(b"M 1").map(|(l, _)| l.len()), Some(0));
    }

    #[test]
    fn sentinels_by_exact_match() {
        assert!(is_sentinel("9223372036854775794"));
        assert!(is_sentinel("2147483632"));
        assert!(is_sentinel("140737488355328.000000"));
        assert!(!is_sentinel("2147483636"));
        assert!(!is_sentinel("55491669881"));
        assert!(!is_sentinel("0.000000"));
    }

    #[test]
    fn timestamps_in_seconds_or_ms() {
        assert_eq!(parse_ts("1767225600"), Some(1_767_225_600_000));
        assert_eq!(parse_ts("1767225600.5"), Some(1_767_225_600_500));
        assert_eq!(parse_ts("1767225600000"), Some(1_767_225_600_000));
        assert_eq!(parse_ts("x"), None);
    }
}
