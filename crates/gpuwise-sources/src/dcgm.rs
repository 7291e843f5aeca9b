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

use std::collections::{BTreeMap, HashMap};

use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::sample::UtilSource;
use gpuwise_core::{DeviceKey, EpochMs, Sample};

use crate::diag::Tally;
use crate::ingest::Origin;
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

#[derive(Clone, Copy, Debug, Default)]
struct Partial {
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
}

/// Parsed `name{labels} value [ts]`.
struct Line<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: &'a str,
    ts: Option<&'a str>,
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
    let value = parts.next().ok_or("no value")?;
    let ts = parts.next();
    if parts.next().is_some() {
        return Err("more than a value and a timestamp after the labels".into());
    }
    Ok(Line {
        name,
        labels,
        value,
        ts,
    })
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

/// Read one whole DCGM file into `b`. `file_ts` is the time of lines without a timestamp.
pub fn read(
    text: &str,
    origin: &Origin<'_>,
    file_ts: Option<EpochMs>,
    b: &mut ProfileBuilder,
    t: &mut Tally,
) {
    let Origin { file, host, stem } = *origin;
    let mut series: HashMap<DeviceKey, BTreeMap<EpochMs, Partial>> = HashMap::new();
    let mut infos: HashMap<DeviceKey, gpuwise_core::DeviceInfo> = HashMap::new();
    let mut missing_time = false;
    for (n, raw) in text.lines().enumerate() {
        let line_no = n as u64 + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        t.lines += 1;
        let parsed = match parse_line(line) {
            Ok(p) => p,
            Err(e) => {
                t.skip("bad_line", file, line_no, format!("not a metric line: {e}"));
                continue;
            }
        };
        let known = metric(parsed.name);
        if known.is_none() && !parsed.name.starts_with("DCGM_") && !parsed.name.starts_with("dcgm_")
        {
            continue;
        }
        let label = |keys: &[&str]| -> Option<&str> {
            keys.iter().find_map(|k| {
                parsed
                    .labels
                    .iter()
                    .find(|(lk, v)| lk == k && !v.is_empty())
                    .map(|(_, v)| v.as_str())
            })
        };
        let Some(uuid) = label(&["UUID", "uuid"])
            .map(str::to_owned)
            .or_else(|| label(&["gpu"]).map(|g| format!("gpu{g}")))
        else {
            t.skip(
                "bad_line",
                file,
                line_no,
                format!("`{}` has neither a `UUID` nor a `gpu` label", parsed.name),
            );
            continue;
        };
        let mig = label(&["GPU_I_ID"]).map(str::to_owned);
        if mig.is_some() && known.is_some_and(|(m, _)| m == Metric::GpuUtil) {
            continue;
        }
        let host_name = host
            .map(str::to_owned)
            .or_else(|| label(&["Hostname", "hostname"]).map(str::to_owned))
            .unwrap_or_else(|| stem.to_owned());
        let key = DeviceKey {
            host: host_name,
            gpu: uuid,
            mig,
        };
        let ts = match parsed.ts {
            Some(raw_ts) => match parse_ts(raw_ts) {
                Some(ts) => ts,
                None => {
                    t.skip(
                        "bad_timestamp",
                        file,
                        line_no,
                        format!("timestamp is not a number: `{raw_ts}`"),
                    );
                    continue;
                }
            },
            None => {
                if let Some(ts) = file_ts {
                    ts
                } else {
                    missing_time = true;
                    continue;
                }
            }
        };
        let info = infos.entry(key.clone()).or_default();
        if info.model_name.is_none() {
            info.model_name = label(&["modelName", "model_name"]).map(str::to_owned);
            info.index = label(&["gpu"]).and_then(|g| g.parse().ok());
            info.mig_profile = label(&["GPU_I_PROFILE"]).map(str::to_owned);
        }
        // Any DCGM metric of a device shows it exists at that time (and is billed), even one
        // gpuwise does not read.
        let p = series.entry(key).or_default().entry(ts).or_default();
        let Some((m, scale)) = known else { continue };
        if is_sentinel(parsed.value) {
            t.skip(
                "dcgm_blank",
                file,
                line_no,
                format!(
                    "`{}` is a DCGM blank sentinel `{}` (not supported / not found)",
                    parsed.name, parsed.value
                ),
            );
            continue;
        }
        let Some(v) = value::fast_float(parsed.value) else {
            t.skip(
                "bad_value",
                file,
                line_no,
                format!(
                    "`{}` value is not a number: `{}`",
                    parsed.name, parsed.value
                ),
            );
            continue;
        };
        #[allow(clippy::cast_possible_truncation)]
        let v = (v * scale) as f32;
        if matches!(m, Metric::GrActive | Metric::GpuUtil | Metric::FbUsed) {
            for (name, keys) in [
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
                    info.add_label(name, v, 1);
                }
            }
            for (k, v) in &parsed.labels {
                if !INFRA_LABELS.contains(k) && !k.starts_with("DCGM_") && !k.starts_with("__") {
                    info.add_label(k, v, 1);
                }
            }
        }
        let slot = match m {
            Metric::GrActive => &mut p.gr,
            Metric::GpuUtil => &mut p.gpu_util,
            Metric::SmActive => &mut p.sm,
            Metric::SmOccupancy => &mut p.occ,
            Metric::Tensor => &mut p.tensor,
            Metric::Dram => &mut p.dram,
            Metric::MemCopy => &mut p.mem_copy,
            Metric::FbUsed => &mut p.used,
            Metric::FbFree => &mut p.free,
            Metric::FbTotal => &mut p.total,
            Metric::FbReserved => &mut p.reserved,
            Metric::Power => &mut p.power,
            Metric::PowerLimit => &mut p.limit,
        };
        *slot = Some(v);
    }
    if missing_time {
        t.skip(
            "no_timestamp",
            file,
            0,
            "lines without a timestamp, and no time in the file name or metadata",
        );
    }
    let mut keys: Vec<DeviceKey> = series.keys().cloned().collect();
    keys.sort();
    for key in keys {
        let points = series.remove(&key).unwrap_or_default();
        let mut info = infos.remove(&key).unwrap_or_default();
        let id = b.device(key);
        let mut source = None;
        for (ts, p) in points {
            let util = match (p.gr, p.gpu_util) {
                (Some(g), _) => {
                    source = Some(
                        source.map_or(UtilSource::DcgmGrEngineActive, |s: UtilSource| {
                            s.min(UtilSource::DcgmGrEngineActive)
                        }),
                    );
                    Some(g)
                }
                (None, Some(u)) => {
                    source = Some(source.map_or(UtilSource::DcgmGpuUtil, |s: UtilSource| {
                        s.min(UtilSource::DcgmGpuUtil)
                    }));
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
            s.sanitize(|inv| {
                t.skip(
                    "invalid_value",
                    file,
                    0,
                    format!("{inv} at {ts} ms (value dropped)"),
                )
            });
            if b.push(id, &s).is_ok() {
                t.samples += 1;
            }
        }
        info.util_source = source;
        b.info_mut(id).merge(&info);
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
        assert_eq!((l.value, l.ts), ("87", Some("1767225600000")));
        assert!(parse_line("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 87").is_err());
        assert!(parse_line("DCGM_FI_DEV_GPU_UTIL{gpu=0} 87").is_err());
        assert!(parse_line("justaname").is_err());
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
