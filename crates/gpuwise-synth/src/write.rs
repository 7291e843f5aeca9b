//! Writers: samples as the real tools print them.

use std::io::{self, Write};

use gpuwise_core::{EpochMs, Sample};

use crate::fleet::{DeviceSpec, Fleet};

fn civil(ms: EpochMs) -> jiff::civil::DateTime {
    let ts = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    jiff::tz::TimeZone::UTC.to_datetime(ts)
}

fn round_robin(
    fleet: &Fleet,
    devices: &[usize],
    mut row: impl FnMut(usize, &DeviceSpec, &Sample) -> io::Result<()>,
) -> io::Result<()> {
    let mut iters: Vec<_> = devices.iter().map(|d| fleet.samples(*d)).collect();
    loop {
        let mut any = false;
        for (slot, it) in iters.iter_mut().enumerate() {
            if let Some(s) = it.next() {
                any = true;
                let d = devices[slot];
                row(d, &fleet.devices[d], &s)?;
            }
        }
        if !any {
            return Ok(());
        }
    }
}

fn opt(v: Option<f32>) -> f32 {
    v.unwrap_or(0.0)
}

/// The nvidia-smi command line whose output [`nvidia_smi`] reproduces.
pub const NVIDIA_SMI_QUERY: &str = "timestamp,name,pci.bus_id,uuid,index,utilization.gpu,utilization.memory,memory.total,memory.used,power.draw,enforced.power.limit";

/// `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv -l N` for one host, times in UTC.
pub fn nvidia_smi(w: &mut impl Write, fleet: &Fleet, devices: &[usize]) -> io::Result<()> {
    writeln!(
        w,
        "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], memory.total [MiB], memory.used [MiB], power.draw [W], enforced.power.limit [W]"
    )?;
    round_robin(fleet, devices, |_, d, s| {
        let t = civil(s.ts_ms);
        writeln!(
            w,
            "{:04}/{:02}/{:02} {:02}:{:02}:{:02}.{:03}, {}, 00000000:{:02X}:00.0, {}, {}, {:.0} %, {:.0} %, {:.0} MiB, {:.0} MiB, {:.2} W, {:.2} W",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.subsec_nanosecond() / 1_000_000,
            d.model_name,
            0x10 + d.index,
            d.uuid,
            d.index,
            opt(s.util_pct),
            opt(s.mem_bw_util_pct),
            opt(s.mem_total_mib),
            opt(s.mem_used_mib),
            opt(s.power_w),
            opt(s.power_limit_w),
        )
    })
}

const DCGM_FAMILIES: [(&str, &str); 8] = [
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
];

fn dcgm_labels(d: &DeviceSpec) -> String {
    format!(
        "gpu=\"{i}\",UUID=\"{u}\",pci_bus_id=\"00000000:{b:02X}:00.0\",device=\"nvidia{i}\",modelName=\"{m}\",Hostname=\"{h}\",DCGM_FI_DRIVER_VERSION=\"570.172.08\",container=\"main\",namespace=\"{ns}\",pod=\"{pod}\"",
        i = d.index,
        u = d.uuid,
        b = 0x10 + d.index,
        m = d.model_name,
        h = d.host,
        ns = d.namespace,
        pod = d.pod
    )
}

/// The values of [`DCGM_FAMILIES`] for one sample, as dcgm-exporter prints them.
fn dcgm_values(s: &Sample) -> [String; 8] {
    let util = opt(s.util_pct);
    [
        format!("{util:.0}"),
        format!("{:.6}", util / 100.0),
        format!("{:.6}", opt(s.sm_active_pct) / 100.0),
        format!("{:.6}", opt(s.tensor_active_pct) / 100.0),
        format!("{:.6}", opt(s.dram_active_pct) / 100.0),
        format!("{:.0}", opt(s.mem_used_mib)),
        format!("{:.0}", opt(s.mem_total_mib) - opt(s.mem_used_mib)),
        format!("{:.6}", opt(s.power_w)),
    ]
}

/// dcgm-exporter scrapes of one host, every sample timestamped (milliseconds), in time order.
pub fn dcgm(w: &mut impl Write, fleet: &Fleet, devices: &[usize]) -> io::Result<()> {
    for (name, help) in DCGM_FAMILIES {
        writeln!(w, "# HELP {name} {help}\n# TYPE {name} gauge")?;
    }
    round_robin(fleet, devices, |_, d, s| {
        let labels = dcgm_labels(d);
        let ts = s.ts_ms;
        for ((name, _), v) in DCGM_FAMILIES.iter().zip(dcgm_values(s)) {
            writeln!(w, "{name}{{{labels}}} {v} {ts}")?;
        }
        Ok(())
    })
}

/// The whole fleet as one OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`:
/// families one after another (OpenMetrics forbids interleaving them), each device's samples
/// in time order, timestamps in seconds, `# EOF` at the end.
pub fn openmetrics(w: &mut impl Write, fleet: &Fleet) -> io::Result<()> {
    for (k, (name, help)) in DCGM_FAMILIES.iter().enumerate() {
        writeln!(w, "# HELP {name} {help}\n# TYPE {name} gauge")?;
        for (d, spec) in fleet.devices.iter().enumerate() {
            let labels = dcgm_labels(spec);
            for s in fleet.samples(d) {
                let v = &dcgm_values(&s)[k];
                writeln!(
                    w,
                    "{name}{{{labels}}} {v} {}.{:03}",
                    s.ts_ms.div_euclid(1000),
                    s.ts_ms.rem_euclid(1000)
                )?;
            }
        }
    }
    writeln!(w, "# EOF")
}

/// `nvidia-smi dmon -s pum -o DT` for one host (times in UTC, whole seconds).
pub fn dmon(w: &mut impl Write, fleet: &Fleet, devices: &[usize]) -> io::Result<()> {
    writeln!(
        w,
        "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec     fb   bar1"
    )?;
    writeln!(
        w,
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %     MB     MB"
    )?;
    round_robin(fleet, devices, |_, d, s| {
        let t = civil(s.ts_ms);
        writeln!(
            w,
            " {:04}{:02}{:02}   {:02}:{:02}:{:02}  {:>5}  {:>5.0}  {:>5}  {:>5}  {:>5.0}  {:>5.0}  {:>5}  {:>5}  {:>5.0}  {:>5}",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            d.index,
            opt(s.power_w),
            45,
            "-",
            opt(s.util_pct),
            opt(s.mem_bw_util_pct),
            0,
            0,
            opt(s.mem_used_mib),
            5
        )
    })
}

/// Write one host in its format.
pub fn host(w: &mut impl Write, fleet: &Fleet, format: &str, devices: &[usize]) -> io::Result<()> {
    match format {
        "dcgm" => dcgm(w, fleet, devices),
        "dmon" => dmon(w, fleet, devices),
        _ => nvidia_smi(w, fleet, devices),
    }
}

/// File extension of a format.
#[must_use]
pub fn extension(format: &str) -> &'static str {
    match format {
        "dcgm" => "prom",
        "dmon" => "dmon.txt",
        _ => "csv",
    }
}
