//! The recorder without a GPU: a test sampler with planted readings drives the real loop,
//! writer, rotation and compression; what was written is read back by gpuwise's own readers.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use gpuwise_record::writer::Log;
use gpuwise_record::{
    GpuReading, Mig, Owner, ProcessReading, Rotation, SampleError, Sampler, Settings, logs, record,
};

/// Two whole GPUs (one 80 % busy, one idle) and a GPU split into one MIG instance, with one
/// process in a pod; every `fail_every`-th tick fails as a whole.
struct Planted {
    ticks: u64,
    fail_every: Option<u64>,
}

impl Sampler for Planted {
    fn sample(&mut self) -> Result<(Vec<GpuReading>, Vec<ProcessReading>), SampleError> {
        self.ticks += 1;
        if self
            .fail_every
            .is_some_and(|k| self.ticks.is_multiple_of(k))
        {
            return Err(SampleError::Nvml("GPU is lost".into()));
        }
        let gpu = |i: u32, util: u32| GpuReading {
            index: Some(i),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            bus_id: Some(format!("00000000:{:02X}:00.0", 0x10 + i)),
            uuid: format!("GPU-0000000{i}"),
            util_gpu_pct: Some(util),
            util_mem_pct: Some(util / 2),
            mem_used_mib: Some(1000 + u64::from(util) * 100),
            mem_total_mib: Some(81_559),
            power_w: Some(100.0 + f64::from(util) * 5.0),
            power_limit_w: Some(700.0),
            sm_clock_mhz: Some(1980),
            temperature_c: Some(40),
            pcie_tx_kbps: Some(10),
            pcie_rx_kbps: Some(20),
            mig: None,
        };
        let mig = GpuReading {
            mig: Some(Mig {
                uuid: "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into(),
                profile: Some("3g.40gb".into()),
            }),
            util_gpu_pct: None,
            util_mem_pct: None,
            mem_used_mib: Some(5000),
            mem_total_mib: Some(40_192),
            power_w: None,
            power_limit_w: None,
            ..gpu(2, 0)
        };
        let proc_ = ProcessReading {
            gpu_uuid: "GPU-00000000".into(),
            mig_uuid: None,
            pid: 4242,
            name: Some("python, the trainer".into()),
            used_mib: Some(9000),
            owner: Owner {
                container_id: None,
                pod_uid: Some("6b8e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b".into()),
                cgroup: Some("/kubepods/pod6b8e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b".into()),
            },
        };
        Ok((vec![gpu(0, 80), gpu(1, 0), mig], vec![proc_]))
    }

    fn describe(&self) -> String {
        "planted".into()
    }
}

fn settings(out: &Path, rotation: Rotation) -> Settings {
    Settings {
        out: out.to_owned(),
        host: "node-a".into(),
        interval: Duration::from_millis(20),
        flush: Duration::from_millis(60),
        duration: Some(Duration::from_millis(600)),
        rotation,
        processes: true,
    }
}

const NO_ROTATION: Rotation = Rotation {
    max_bytes: u64::MAX,
    max_age_ms: i64::MAX,
};

fn gunzip(path: &Path) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("open"))
        .read_to_string(&mut s)
        .expect("gunzip");
    s
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn what_is_recorded_reads_back_as_planted() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("logs");
    let (_tx, rx) = mpsc::channel();
    let mut s = Planted {
        ticks: 0,
        fail_every: Some(7),
    };
    let sum = record(&mut s, &settings(&out, NO_ROTATION), &rx, None).expect("record");
    assert!(sum.ticks >= 20, "{sum:?}");
    assert_eq!(sum.failed_ticks, sum.ticks / 7);
    assert_eq!(sum.last_error.as_deref(), Some("NVML: GPU is lost"));
    let good = sum.ticks - sum.failed_ticks;
    assert_eq!(sum.gpu_rows, good * 3);
    assert_eq!(sum.process_rows, good);
    assert!(!sum.stopped_by_signal);

    let gpu_log = std::fs::read_to_string(out.join("node-a.csv")).expect("gpu log");
    assert!(gpu_log.starts_with(logs::GPU_HEADER));
    assert_eq!(gpu_log.lines().count() as u64, 1 + sum.gpu_rows);
    let procs = std::fs::read_to_string(out.join("processes/node-a.csv")).expect("process log");
    assert!(procs.starts_with(logs::PROCESS_HEADER));
    assert!(
        procs.contains(",4242,\"python, the trainer\",9000,,6b8e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b,"),
        "{procs}"
    );

    // Read the directory back as `gpuwise report` does: the process log is skipped as not
    // telemetry; three devices, with the planted readings, host from the file name.
    let inputs = gpuwise_sources::expand(&[out.display().to_string()]).expect("expand");
    let opts = gpuwise_sources::ReadOptions::default();
    let got = gpuwise_sources::read_all(&inputs, &opts, &|_| {}).expect("read");
    assert_eq!(got.tally.skipped(), 1, "only the process log is skipped");
    assert_eq!(got.tally.count("not_telemetry"), 1);
    assert_eq!(got.tally.samples, sum.gpu_rows);
    let devices = got.profile.finish(&opts.profile, &jiff::tz::TimeZone::UTC);
    assert_eq!(devices.len(), 3);
    for d in &devices {
        assert_eq!(d.key.host, "node-a");
        assert_eq!(d.stats.samples, good);
        assert_eq!(d.info.model_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        // Recorded "now", in UTC: within a minute of the clock here.
        let now = jiff::Timestamp::now().as_millisecond();
        assert!(
            (now - d.stats.last_ts_ms).abs() < 60_000,
            "{}",
            d.stats.last_ts_ms
        );
    }
    let by = |gpu: &str| {
        devices
            .iter()
            .find(|d| d.key.gpu == gpu && d.key.mig.is_none())
    };
    let busy = by("GPU-00000000").expect("gpu 0");
    let util = busy.stats.util.as_ref().expect("util");
    assert!((util.mean_pct - 80.0).abs() < 1e-9, "{}", util.mean_pct);
    let idle = by("GPU-00000001").expect("gpu 1");
    assert!(idle.stats.util.as_ref().expect("util").max_pct.abs() < 1e-9);
    let mig = devices
        .iter()
        .find(|d| d.key.mig.is_some())
        .expect("mig instance");
    assert_eq!(mig.key.gpu, "GPU-00000002");
    assert_eq!(
        mig.key.mig.as_deref(),
        Some("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
    );
    assert_eq!(mig.info.mig_profile.as_deref(), Some("3g.40gb"));
    // No utilization reading on a MIG instance: unknown, not 0 %.
    assert!(mig.stats.util.is_none());
}

#[test]
fn a_utc_log_reads_the_same_whatever_tz_is_given() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_tx, rx) = mpsc::channel();
    let mut s = Planted {
        ticks: 0,
        fail_every: None,
    };
    let mut set = settings(dir.path(), NO_ROTATION);
    set.duration = Some(Duration::from_millis(100));
    set.processes = false;
    record(&mut s, &set, &rx, None).expect("record");
    let inputs = gpuwise_sources::expand(&[dir.path().display().to_string()]).expect("expand");
    let first = |tz: &str| {
        let opts = gpuwise_sources::ReadOptions {
            tz: jiff::tz::TimeZone::get(tz).expect("tz"),
            ..gpuwise_sources::ReadOptions::default()
        };
        let got = gpuwise_sources::read_all(&inputs, &opts, &|_| {}).expect("read");
        got.profile.finish(&opts.profile, &jiff::tz::TimeZone::UTC)[0]
            .stats
            .first_ts_ms
    };
    assert_eq!(first("UTC"), first("Asia/Kolkata"));
    assert!(!dir.path().join("processes").exists());
}

#[test]
fn rotation_compresses_and_loses_no_row() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_tx, rx) = mpsc::channel();
    let mut s = Planted {
        ticks: 0,
        fail_every: None,
    };
    let rotation = Rotation {
        max_bytes: 2_000,
        max_age_ms: i64::MAX,
    };
    let sum = record(&mut s, &settings(dir.path(), rotation), &rx, None).expect("record");
    assert!(sum.rotated >= 4, "{sum:?}");
    let mut rows = 0;
    let mut rotated = 0;
    for f in files(dir.path()) {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let text = if name == "node-a.csv" {
            std::fs::read_to_string(&f).expect("read")
        } else {
            // node-a.csv-YYYYMMDDHHMMSS.gz, nothing else (no .tmp, no uncompressed leftovers).
            let stamp = name
                .strip_prefix("node-a.csv-")
                .and_then(|r| r.strip_suffix(".gz"))
                .expect("rotated name");
            assert_eq!(stamp.len(), 14, "{name}");
            rotated += 1;
            gunzip(&f)
        };
        assert!(text.starts_with(logs::GPU_HEADER), "{name}");
        assert!(text.ends_with('\n'));
        rows += text.lines().count() - 1;
    }
    assert!(rotated >= 2);
    assert_eq!(rows as u64, sum.gpu_rows);
    // Every file is one host's log: read back together, three devices, every sample once.
    let inputs = gpuwise_sources::expand(&[dir.path().display().to_string()]).expect("expand");
    let opts = gpuwise_sources::ReadOptions::default();
    let got = gpuwise_sources::read_all(&inputs, &opts, &|_| {}).expect("read");
    let devices = got.profile.finish(&opts.profile, &jiff::tz::TimeZone::UTC);
    assert_eq!(devices.len(), 3);
    assert!(devices.iter().all(|d| d.key.host == "node-a"));
    assert_eq!(
        devices.iter().map(|d| d.stats.samples).sum::<u64>(),
        sum.gpu_rows
    );
}

#[test]
fn a_stop_message_ends_the_run_with_everything_flushed() {
    let dir = tempfile::tempdir().expect("tmp");
    let (tx, rx) = mpsc::channel();
    let mut s = Planted {
        ticks: 0,
        fail_every: None,
    };
    let mut set = settings(dir.path(), NO_ROTATION);
    set.duration = None;
    set.flush = Duration::from_secs(3600);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        tx.send(()).expect("send");
    });
    let sum = record(&mut s, &set, &rx, None).expect("record");
    t.join().expect("join");
    assert!(sum.stopped_by_signal);
    let text = std::fs::read_to_string(dir.path().join("node-a.csv")).expect("read");
    assert_eq!(text.lines().count() as u64, 1 + sum.gpu_rows);
}

/// A kill -9 is a process that dies with its buffer unwritten: `forget` the log (no drop, no
/// flush) and only what the last flush wrote is there, in whole lines.
#[test]
fn a_kill_loses_at_most_what_came_after_the_last_flush() {
    let dir = tempfile::tempdir().expect("tmp");
    let (mut log, _) = Log::open(dir.path(), "h", logs::GPU_HEADER, NO_ROTATION, 0).expect("open");
    log.append(b"row 1\nrow 2\n", 0).expect("append");
    log.flush().expect("flush");
    log.append(b"row 3\n", 0).expect("append");
    std::mem::forget(log);
    let text = std::fs::read_to_string(dir.path().join("h.csv")).expect("read");
    assert_eq!(text, format!("{}row 1\nrow 2\n", logs::GPU_HEADER));
}

#[test]
fn opening_after_a_crash_repairs_what_it_left() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    // A torn last line; a rotated file whose compression was cut short (both the file and a
    // half-written .gz.tmp are there).
    std::fs::write(
        d.join("h.csv"),
        format!("{}row 1\nrow 2 was cut he", logs::GPU_HEADER),
    )
    .expect("write");
    std::fs::write(
        d.join("h.csv-20261101000000"),
        format!("{}old\n", logs::GPU_HEADER),
    )
    .expect("write");
    std::fs::write(d.join("h.csv-20261101000000.gz.tmp"), b"\x1f\x8b half").expect("write");
    // Another host's files are not touched.
    std::fs::write(d.join("other.csv-20261101000000"), b"x").expect("write");
    let (mut log, rec) = Log::open(d, "h", logs::GPU_HEADER, NO_ROTATION, 0).expect("open");
    assert_eq!(rec.torn_bytes, "row 2 was cut he".len() as u64);
    assert_eq!(rec.compressed, 1);
    assert!(!rec.other_header);
    log.append(b"row 3\n", 0).expect("append");
    assert_eq!(log.finish().expect("finish"), 0);
    assert_eq!(
        std::fs::read_to_string(d.join("h.csv")).expect("read"),
        format!("{}row 1\nrow 3\n", logs::GPU_HEADER)
    );
    assert_eq!(
        gunzip(&d.join("h.csv-20261101000000.gz")),
        format!("{}old\n", logs::GPU_HEADER)
    );
    let names: Vec<String> = files(d)
        .iter()
        .map(|p| p.file_name().expect("n").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "h.csv",
            "h.csv-20261101000000.gz",
            "other.csv-20261101000000"
        ]
    );
}

#[test]
fn a_log_with_other_columns_is_moved_aside_not_appended_to() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(d.join("h.csv"), "timestamp, uuid, utilization.gpu [%]\nx\n").expect("write");
    let now = 1_795_000_000_000;
    let (log, rec) = Log::open(d, "h", logs::GPU_HEADER, NO_ROTATION, now).expect("open");
    assert!(rec.other_header);
    assert_eq!(log.finish().expect("finish"), 1);
    assert_eq!(
        std::fs::read_to_string(d.join("h.csv")).expect("read"),
        logs::GPU_HEADER
    );
    assert_eq!(
        gunzip(&d.join("h.csv-20261118110640.gz")),
        "timestamp, uuid, utilization.gpu [%]\nx\n"
    );
}

#[test]
fn rotation_by_age() {
    let dir = tempfile::tempdir().expect("tmp");
    let rotation = Rotation {
        max_bytes: u64::MAX,
        max_age_ms: 1000,
    };
    let (mut log, _) = Log::open(dir.path(), "h", logs::GPU_HEADER, rotation, 0).expect("open");
    log.append(b"a\n", 0).expect("append");
    log.append(b"b\n", 999).expect("append");
    log.append(b"c\n", 1000).expect("append");
    log.append(b"d\n", 1500).expect("append");
    assert_eq!(log.finish().expect("finish"), 1);
    assert_eq!(
        gunzip(&dir.path().join("h.csv-19700101000001.gz")),
        format!("{}a\nb\n", logs::GPU_HEADER)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("h.csv")).expect("read"),
        format!("{}c\nd\n", logs::GPU_HEADER)
    );
}

/// The /metrics endpoint serves the latest tick in dcgm-exporter's names, and gpuwise's own
/// DCGM reader reads a scrape of it back as the same devices.
#[test]
fn the_metrics_endpoint_reads_back_as_dcgm() {
    use std::io::Write as _;
    use std::sync::{Arc, RwLock};

    use gpuwise_record::exposition::{Exposition, serve};

    let shared = Arc::new(RwLock::new(Exposition::new("node-a")));
    let addr = serve("127.0.0.1:0".parse().expect("addr"), shared.clone(), None).expect("serve");
    let (tx, rx) = mpsc::channel();
    tx.send(()).expect("send"); // one tick, then stop
    let dir = tempfile::tempdir().expect("tmp");
    let mut set = settings(&dir.path().join("logs"), NO_ROTATION);
    set.duration = None;
    let mut s = Planted {
        ticks: 0,
        fail_every: None,
    };
    let sum = record(&mut s, &set, &rx, Some(&shared)).expect("record");
    assert_eq!(sum.ticks, 1);

    let get = |path: &str| {
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        write!(
            c,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        r
    };
    let resp = get("/metrics");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("application/openmetrics-text"), "{resp}");
    assert!(get("/").starts_with("HTTP/1.1 404"));
    let body = resp.split_once("\r\n\r\n").expect("body").1;
    assert!(body.ends_with("# EOF\n"));

    // Two scrapes of it, 30 s apart (a collection loop stamps each file's name).
    let scrapes = dir.path().join("scrapes");
    std::fs::create_dir(&scrapes).expect("mkdir");
    for stamp in ["2026-11-26T12-00-00Z", "2026-11-26T12-00-30Z"] {
        std::fs::write(scrapes.join(format!("node-a-{stamp}.prom")), body).expect("write");
    }
    let inputs = gpuwise_sources::expand(&[scrapes.display().to_string()]).expect("expand");
    let opts = gpuwise_sources::ReadOptions::default();
    let got = gpuwise_sources::read_all(&inputs, &opts, &|_| {}).expect("read");
    let devices = got.profile.finish(&opts.profile, &jiff::tz::TimeZone::UTC);
    // The MIG instance has memory but no utilization; the DCGM reader keys it by GPU_I_ID.
    assert_eq!(devices.len(), 3, "{devices:#?}");
    let busy = devices
        .iter()
        .find(|d| d.key.gpu == "GPU-00000000")
        .expect("gpu 0");
    assert_eq!(busy.key.host, "node-a");
    assert_eq!(
        busy.info.model_name.as_deref(),
        Some("NVIDIA H100 80GB HBM3")
    );
    assert_eq!(busy.stats.samples, 2);
    let util = busy.stats.util.as_ref().map(|u| u.mean_pct);
    assert_eq!(util, Some(80.0));
    let mig = devices.iter().find(|d| d.key.mig.is_some()).expect("mig");
    assert_eq!(mig.info.mig_profile.as_deref(), Some("3g.40gb"));
}

/// With a token, /metrics answers only requests that carry it (the scheme in any case), as
/// Prometheus' scrape `authorization` sends it; without, a 401.
#[test]
fn a_token_guards_the_metrics_endpoint() {
    use std::io::Write as _;
    use std::sync::{Arc, RwLock};

    use gpuwise_record::exposition::{Exposition, serve};

    let shared = Arc::new(RwLock::new(Exposition::new("node-a")));
    let addr = serve(
        "127.0.0.1:0".parse().expect("addr"),
        shared,
        Some("s3cret".into()),
    )
    .expect("serve");
    let get = |auth: Option<&str>| {
        let mut c = std::net::TcpStream::connect(addr).expect("connect");
        let header = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
        write!(
            c,
            "GET /metrics HTTP/1.1\r\nHost: x\r\n{header}Connection: close\r\n\r\n"
        )
        .expect("send");
        let mut r = String::new();
        c.read_to_string(&mut r).expect("read");
        r
    };
    assert!(get(None).starts_with("HTTP/1.1 401"));
    assert!(get(Some("Bearer wrong")).starts_with("HTTP/1.1 401"));
    assert!(get(Some("Basic s3cret")).starts_with("HTTP/1.1 401"));
    assert!(get(Some("Bearer s3cret")).starts_with("HTTP/1.1 200"));
    assert!(get(Some("bearer s3cret")).starts_with("HTTP/1.1 200"));
}
