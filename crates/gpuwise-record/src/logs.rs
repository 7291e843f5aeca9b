//! The two logs `gpuwise record` writes, as text.
//!
//! - GPUs: the nvidia-smi `--query-gpu=… --format=csv,nounits` layout that `gpuwise report`
//!   reads (`, ` between fields, units in the header, `[N/A]` for a reading the driver did not
//!   give), with the timestamp in UTC and marked so (`2026/11/26 11:04:17.123Z`), two MIG
//!   columns (`mig.uuid`, `mig.profile`: a MIG instance is a device of its own) and PCIe
//!   throughput (`pcie.tx`, `pcie.rx`, KB/s), which nvidia-smi's query has no field for.
//! - Processes: one row per process holding GPU memory, with its owner (container, pod) from
//!   its cgroup; ordinary CSV (quoted where needed, since process names may hold commas).

use std::fmt::Write as _;

use crate::reading::{GpuReading, ProcessReading, Snapshot};

/// The header of the GPU log (with its newline).
pub const GPU_HEADER: &str = "timestamp, name, pci.bus_id, uuid, index, mig.uuid, mig.profile, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB], power.draw [W], power.limit [W], clocks.current.sm [MHz], temperature.gpu, pcie.tx [KB/s], pcie.rx [KB/s]\n";

/// The header of the process log (with its newline).
pub const PROCESS_HEADER: &str =
    "timestamp,gpu_uuid,mig_uuid,pid,process_name,used_memory_mib,container_id,pod_uid,cgroup\n";

const NA: &str = "[N/A]";

/// `2026/11/26 11:04:17.123Z`: nvidia-smi's layout, in UTC, with the `Z` that says so.
#[must_use]
pub fn smi_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| NA.to_owned(),
        |t| t.strftime("%Y/%m/%d %H:%M:%S%.3fZ").to_string(),
    )
}

/// A text field of the GPU log: nvidia-smi never quotes, so a comma or line break (never seen
/// in what NVML returns) would split the row; such characters are written as spaces.
fn text(out: &mut String, v: Option<&str>) {
    match v {
        Some(s) if !s.trim().is_empty() => out.extend(
            s.chars()
                .map(|c| if c == ',' || c.is_control() { ' ' } else { c }),
        ),
        _ => out.push_str(NA),
    }
}

fn num<T: std::fmt::Display>(out: &mut String, v: Option<T>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str(NA),
    }
}

fn watts(out: &mut String, v: Option<f64>) {
    match v {
        Some(v) if v.is_finite() => {
            let _ = write!(out, "{v:.2}");
        }
        _ => out.push_str(NA),
    }
}

/// One row of the GPU log per reading, appended to `out`.
pub fn gpu_rows(snap: &Snapshot, out: &mut String) {
    let ts = smi_time(snap.at_ms);
    for g in &snap.gpus {
        gpu_row(&ts, g, out);
    }
}

fn gpu_row(ts: &str, g: &GpuReading, out: &mut String) {
    out.push_str(ts);
    let sep = |out: &mut String| out.push_str(", ");
    sep(out);
    text(out, g.name.as_deref());
    sep(out);
    text(out, g.bus_id.as_deref());
    sep(out);
    text(out, Some(&g.uuid));
    sep(out);
    num(out, g.index);
    sep(out);
    text(out, g.mig.as_ref().map(|m| m.uuid.as_str()));
    sep(out);
    text(out, g.mig.as_ref().and_then(|m| m.profile.as_deref()));
    for v in [g.util_gpu_pct, g.util_mem_pct] {
        sep(out);
        num(out, v);
    }
    for v in [g.mem_used_mib, g.mem_total_mib] {
        sep(out);
        num(out, v);
    }
    for v in [g.power_w, g.power_limit_w] {
        sep(out);
        watts(out, v);
    }
    for v in [
        g.sm_clock_mhz,
        g.temperature_c,
        g.pcie_tx_kbps,
        g.pcie_rx_kbps,
    ] {
        sep(out);
        num(out, v);
    }
    out.push('\n');
}

/// The process rows of a tick, appended to `out`.
pub fn process_rows(snap: &Snapshot, out: &mut Vec<u8>) {
    let ts = jiff::Timestamp::from_millisecond(snap.at_ms)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    for p in &snap.processes {
        let _ = w.write_record(process_record(&ts, p));
    }
    let _ = w.flush();
}

fn process_record(ts: &str, p: &ProcessReading) -> [String; 9] {
    let opt = |v: Option<&str>| v.unwrap_or("").to_owned();
    [
        ts.to_owned(),
        p.gpu_uuid.clone(),
        opt(p.mig_uuid.as_deref()),
        p.pid.to_string(),
        opt(p.name.as_deref()),
        p.used_mib.map(|v| v.to_string()).unwrap_or_default(),
        opt(p.owner.container_id.as_deref()),
        opt(p.owner.pod_uid.as_deref()),
        opt(p.owner.cgroup.as_deref()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::{Mig, Owner};

    #[test]
    fn gpu_rows_are_nvidia_smi_rows() {
        let snap = Snapshot {
            at_ms: 1_795_000_000_123,
            gpus: vec![
                GpuReading {
                    index: Some(0),
                    name: Some("NVIDIA H100 80GB HBM3".into()),
                    bus_id: Some("00000000:1A:00.0".into()),
                    uuid: "GPU-1".into(),
                    util_gpu_pct: Some(97),
                    util_mem_pct: Some(41),
                    mem_used_mib: Some(70_000),
                    mem_total_mib: Some(81_559),
                    power_w: Some(612.345),
                    power_limit_w: Some(700.0),
                    sm_clock_mhz: Some(1980),
                    temperature_c: Some(61),
                    pcie_tx_kbps: Some(1200),
                    pcie_rx_kbps: None,
                    mig: None,
                },
                GpuReading {
                    uuid: "GPU-2".into(),
                    name: Some("odd, name\n".into()),
                    mig: Some(Mig {
                        uuid: "MIG-9".into(),
                        profile: Some("3g.40gb".into()),
                    }),
                    ..GpuReading::default()
                },
            ],
            processes: Vec::new(),
        };
        let mut out = String::new();
        gpu_rows(&snap, &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "2026/11/18 11:06:40.123Z, NVIDIA H100 80GB HBM3, 00000000:1A:00.0, GPU-1, 0, [N/A], [N/A], 97, 41, 70000, 81559, 612.35, 700.00, 1980, 61, 1200, [N/A]"
        );
        assert!(lines[1].starts_with(
            "2026/11/18 11:06:40.123Z, odd  name , [N/A], GPU-2, [N/A], MIG-9, 3g.40gb, [N/A]"
        ));
        // Every row has as many fields as the header.
        let n = GPU_HEADER.split(", ").count();
        assert!(lines.iter().all(|l| l.split(", ").count() == n));
    }

    #[test]
    fn process_rows_quote_what_needs_it() {
        let snap = Snapshot {
            at_ms: 1_795_000_000_000,
            gpus: Vec::new(),
            processes: vec![ProcessReading {
                gpu_uuid: "GPU-1".into(),
                mig_uuid: None,
                pid: 42,
                name: Some("py,thon".into()),
                used_mib: Some(1024),
                owner: Owner {
                    container_id: None,
                    pod_uid: Some("u".into()),
                    cgroup: Some("/kubepods".into()),
                },
            }],
        };
        let mut out = Vec::new();
        process_rows(&snap, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "2026-11-18T11:06:40Z,GPU-1,,42,\"py,thon\",1024,,u,/kubepods\n"
        );
    }
}
