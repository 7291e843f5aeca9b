//! `--prometheus`: a real Prometheus server (Debian's `prometheus` 2.42, installed by
//! `.ci/run`), backfilled with a generated fleet by `promtool`, read by pushdown and by
//! `--raw`, each checked against the file-based report of the same data; the same fleet with
//! missed scrapes; and the same fleet in VictoriaMetrics (Debian's `victoria-metrics`), loaded
//! through its import API. Servers are stopped when the test ends, passes or fails.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{close, f, run};

/// The server, killed on drop.
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Prometheus and promtool, or a skip (a failure under CI).
pub(crate) fn tools() -> bool {
    if have("prometheus") && have("promtool") {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "prometheus and promtool must be installed in CI (.ci/run installs Debian's `prometheus`)"
    );
    eprintln!("skipping: prometheus/promtool not installed (apt-get install prometheus)");
    false
}

pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// Prometheus serving the OpenMetrics file `om`, backfilled by promtool into `dir/tsdb`.
pub(crate) fn backfilled(om: &Path, dir: &Path) -> Server {
    let data = dir.join("tsdb");
    std::fs::create_dir_all(&data).expect("tsdb dir");
    let backfill = Command::new("promtool")
        .args([
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=168h",
        ])
        .arg(om)
        .arg(&data)
        .output()
        .expect("promtool runs");
    assert!(
        backfill.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&backfill.stderr)
    );
    start(&data)
}

fn start(data: &Path) -> Server {
    start_with(data, "global:\n  scrape_interval: 1m\n")
}

/// Prometheus on a free port with the store in `data` and `config` as its configuration,
/// once it is ready.
pub(crate) fn start_with(data: &Path, config_text: &str) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    std::fs::create_dir_all(data).expect("store dir");
    let config = data.join("prometheus.yml");
    std::fs::write(&config, config_text).expect("config");
    let child = Command::new("prometheus")
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg("--storage.tsdb.retention.time=100y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!("--config.file={}", config.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    let server = Server { child, port };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if http_get(port, "/-/ready").is_some_and(|r| r.contains("200 OK")) {
            return server;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("prometheus did not become ready on port {port} within 60 s");
}

/// A week of 12 generated GPUs, backfilled into a running Prometheus, and the same fleet
/// as DCGM files.
struct Fixture {
    _dir: tempfile::TempDir,
    files: std::path::PathBuf,
    /// Kept to the end of the test: dropping it stops Prometheus.
    _server: Server,
    url: String,
}

const WINDOW: [&str; 4] = [
    "--start",
    "2026-01-05T00:00:00Z",
    "--end",
    "2026-01-12T00:00:00Z",
];

/// When every fourth GPU (by its UUID) has no `DCGM_FI_PROF_GR_ENGINE_ACTIVE`: 40 minutes on
/// 2026-01-07 from 10:00, while its `DCGM_FI_DEV_GPU_UTIL` goes on (what a profiling session
/// that takes DCGM's profiling module away leaves).
const NO_GR: (i64, i64) = (1_767_780_000_000, 1_767_782_400_000);

/// Drop whole scrapes (every metric of a GPU at one time) from an exposition file in place: one
/// in 29 per GPU, never two in a row — what a collector that now and then misses a scrape
/// leaves — and every fourth GPU's GR samples over [`NO_GR`]. The same rules on the files and
/// on what a store is fed keep them the same data.
fn miss_scrapes(path: &Path, ts_in_seconds: bool, interval_ms: i64) {
    use std::io::{BufRead, Write};
    let tmp = path.with_extension("tmp");
    {
        let input = std::io::BufReader::new(std::fs::File::open(path).expect("open"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp).expect("create"));
        for line in input.lines() {
            let line = line.expect("line");
            let drop = !line.starts_with('#')
                && line.split_once("UUID=\"").is_some_and(|(_, rest)| {
                    let uuid = rest.split('"').next().unwrap_or("");
                    let ts: f64 = line
                        .rsplit(' ')
                        .next()
                        .and_then(|t| t.parse().ok())
                        .expect("a timestamp");
                    let ts_ms = if ts_in_seconds { ts * 1000.0 } else { ts } as i64;
                    let salt: i64 = uuid.bytes().map(i64::from).sum();
                    (ts_ms / interval_ms + salt) % 29 == 0
                        || (salt % 4 == 0
                            && line.starts_with("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
                            && (NO_GR.0..NO_GR.1).contains(&ts_ms))
                });
            if !drop {
                writeln!(out, "{line}").expect("write");
            }
        }
    }
    std::fs::rename(&tmp, path).expect("rename");
}

/// A week of 12 generated GPUs at 2 minutes under `dir`, as OpenMetrics (`om/`, for a store)
/// and as DCGM files (`files/`); with `missed`, every GPU misses one scrape in 29 in both.
fn generate(dir: &Path, missed: bool) -> (std::path::PathBuf, std::path::PathBuf) {
    let om = dir.join("om");
    let files = dir.join("files");
    let gen_args = |out: &Path, format: &str| {
        let o = run(&[
            "generate",
            "--out",
            &out.display().to_string(),
            "--gpus",
            "12",
            "--days",
            "7",
            "--interval",
            "2m",
            "--seed",
            "7",
            "--format",
            format,
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    };
    gen_args(&om, "openmetrics");
    gen_args(&files, "dcgm");
    if missed {
        miss_scrapes(&om.join("fleet.om.txt"), true, 120_000);
        for e in std::fs::read_dir(&files)
            .expect("files")
            .filter_map(Result::ok)
        {
            if e.path().extension().is_some_and(|x| x == "prom") {
                miss_scrapes(&e.path(), false, 120_000);
            }
        }
    }
    (om, files)
}

impl Fixture {
    fn new() -> Self {
        Self::with(false)
    }

    /// The fleet; with `missed`, every GPU misses one scrape in 29 (files and store alike).
    fn with(missed: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (om, files) = generate(dir.path(), missed);
        let server = backfilled(&om.join("fleet.om.txt"), dir.path());
        let url = format!("http://127.0.0.1:{}", server.port);
        Self {
            _dir: dir,
            files,
            _server: server,
            url,
        }
    }

    /// `report --prometheus` over the window, as JSON.
    fn report(&self, extra: &[&str]) -> serde_json::Value {
        store_report(&self.url, extra)
    }

    /// `report` over the DCGM files, as JSON.
    fn files_report(&self, extra: &[&str]) -> serde_json::Value {
        files_report(&self.files, extra)
    }
}

/// `report --prometheus URL` over [`WINDOW`] by the pushdown (or `--raw` when `extra` has it),
/// as JSON.
fn store_report(url: &str, extra: &[&str]) -> serde_json::Value {
    let mut a = vec!["report", "--prometheus", url];
    if !extra.contains(&"--raw") {
        a.extend_from_slice(&["--path", "pushdown"]);
    }
    a.extend_from_slice(&WINDOW);
    a.extend_from_slice(&["--format", "json", "--no-progress"]);
    a.extend_from_slice(extra);
    let o = run(&a);
    assert_eq!(o.code, 0, "{a:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

/// `report` over the DCGM files in `dir`, as JSON.
pub(crate) fn files_report(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let file_inputs: Vec<String> = std::fs::read_dir(dir)
        .expect("files")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| !p.ends_with("truth.json"))
        .map(|p| p.display().to_string())
        .collect();
    let mut fa = vec!["report"];
    fa.extend(file_inputs.iter().map(String::as_str));
    fa.extend_from_slice(&["--format", "json", "--no-progress"]);
    fa.extend_from_slice(extra);
    let o = run(&fa);
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

type Devices = std::collections::BTreeMap<String, serde_json::Value>;

/// Every device of a store's report against the file report's: GPU-hours and mean utilization
/// within `rel`, idle and held-idle hours within 1 % (or one sample, 2 minutes, for devices with
/// little idle: a window's last interval, which the file reader counts only when a sample
/// follows it), the same class.
fn like_the_files(name: &str, got: &Devices, want: &Devices, rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}: every device");
    for (id, w) in want {
        let g = &got[id];
        // A device the pushdown read raw ends its window at its last sample, a pushed one at
        // the window's end: one interval (2 minutes) apart at most.
        let edge = |k: &str| {
            let h = 2.0 / 60.0;
            if k == "gpu_hours" {
                h
            } else {
                100.0 * h / f(&w["gpu_hours"]).max(1e-9)
            }
        };
        for k in ["gpu_hours", "mean_utilization_pct"] {
            assert!(
                close(f(&g[k]), f(&w[k]), rel) || (f(&g[k]) - f(&w[k])).abs() <= edge(k) + 1e-9,
                "{name} {id} {k}: {} vs {}",
                g[k],
                w[k]
            );
        }
        for k in ["idle_hours", "held_idle_hours"] {
            let (gi, wi) = (f(&g[k]), f(&w[k]));
            assert!(
                (gi - wi).abs() <= (0.01 * wi).max(2.0 / 60.0),
                "{name} {id} {k}: {gi} vs {wi}"
            );
        }
        assert_eq!(g["class"], w["class"], "{name} {id}");
        assert_eq!(
            g["utilization_source"], w["utilization_source"],
            "{name} {id}"
        );
    }
}

pub(crate) fn by_id(
    r: &serde_json::Value,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    r["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| (d["id"].as_str().expect("id").to_owned(), d.clone()))
        .collect()
}

#[test]
fn pushdown_and_raw_match_the_files() {
    if !tools() {
        return;
    }
    let fx = Fixture::new();
    let pushed = fx.report(&[]);
    let raw = fx.report(&["--raw"]);
    let from_files = fx.files_report(&[]);
    let want = by_id(&from_files);
    assert_eq!(want.len(), 12);
    // The raw samples are the window's, `--start` ≤ t < `--end`, as the files read with
    // `--until` at the window's end (the sample at the end opens the next window).
    let want_raw = by_id(&fx.files_report(&["--until", WINDOW[3]]));
    for (name, got, want) in [
        ("pushdown", by_id(&pushed), &want),
        ("raw", by_id(&raw), &want_raw),
    ] {
        like_the_files(name, &got, want, 0.001);
        // The first and last samples, as the files have them.
        for (id, w) in want {
            for k in ["first_seen", "last_seen"] {
                assert_eq!(got[id][k], w[k], "{name} {id} {k}");
            }
        }
    }
    // Over the sample budget, the same devices come back from 16 shards.
    let sharded = by_id(&fx.report(&["--sample-budget", "1000"]));
    let whole = by_id(&pushed);
    assert_eq!(sharded.len(), whole.len());
    for (id, d) in &whole {
        assert_eq!(sharded[id]["gpu_hours"], d["gpu_hours"], "{id}");
        assert_eq!(sharded[id]["idle_hours"], d["idle_hours"], "{id}");
    }
    thresholds_and_bands_agree(&fx);
    // The pushdown says what it pulled, and it is a small share of what --raw pulled.
    let pp = &pushed["ingest"]["pulled"];
    let rp = &raw["ingest"]["pulled"];
    assert_eq!(pp["mode"], "pushdown");
    assert_eq!(rp["mode"], "raw");
    assert!(f(&pp["samples"]) < 0.05 * f(&rp["samples"]), "{pp} vs {rp}");
    assert!(
        close(f(&pp["raw_samples_in_window"]), f(&rp["samples"]), 0.01),
        "{pp} vs {rp}"
    );

    auto_takes_the_cheaper_path(&fx);
    the_history_store_joins_prometheus(&fx, &raw);
    serve_asks_the_store(&fx, &pushed);
    secrets_selector_and_errors(fx);
}

/// `rollup --prometheus` folds four days of the store's raw samples into a history store;
/// `report --store --prometheus` over the week takes those days from it and the rest raw from
/// Prometheus: the devices are the whole week's raw report's.
fn the_history_store_joins_prometheus(fx: &Fixture, raw: &serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().display().to_string();
    let o = run(&[
        "rollup",
        "--prometheus",
        &fx.url,
        "--start",
        "2026-01-05T00:00:00Z",
        "--end",
        "2026-01-09T00:00:00Z",
        "--store",
        &store,
        "-f",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rolled: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(rolled["store_days"], 4, "{rolled}");
    let mut a = vec!["report", "--store", &store, "--prometheus", &fx.url];
    a.extend_from_slice(&WINDOW);
    a.extend_from_slice(&["--format", "json", "--no-progress"]);
    let o = run(&a);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let joined: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(joined["devices"], raw["devices"]);
    let formats = joined["ingest"]["formats"].to_string();
    assert!(
        formats.contains("gpuwise-store") && formats.contains("prometheus (raw)"),
        "{formats}"
    );
}

/// Without `--path`, the cost model picks: the week of 12 GPUs is pushed down, one hour of it
/// pulled raw, and the report says which path ran and why.
fn auto_takes_the_cheaper_path(fx: &Fixture) {
    let auto = |window: &[&str]| {
        let mut a = vec!["report", "--prometheus", &fx.url];
        a.extend_from_slice(window);
        a.extend_from_slice(&["--format", "json", "--no-progress"]);
        let o = run(&a);
        assert_eq!(o.code, 0, "{a:?}: {}", o.stderr);
        assert!(o.stderr.contains("the cheaper path"), "{}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
        r["ingest"]["pulled"].clone()
    };
    let week = auto(&WINDOW);
    assert_eq!(week["mode"], "pushdown", "{week}");
    assert!(
        week["why"]
            .as_str()
            .is_some_and(|w| w.contains("the cheaper path")),
        "{week}"
    );
    let hour = auto(&[
        "--start",
        "2026-01-06T10:00:00Z",
        "--end",
        "2026-01-06T11:00:00Z",
    ]);
    assert_eq!(hour["mode"], "raw", "{hour}");
}

/// A collector that misses scrapes and GPUs that lose their profiling metric for a while: the
/// scrape interval is still found (the median interval, not the span over the count, which a
/// missed scrape in 29 stretched from 120 s to 124 s and took every subquery off the samples'
/// grid), the devices without GR for a while are read point by point from both metrics, and
/// the pushdown matches the files, over the whole week and over a window that starts and ends
/// inside hours (whose first and last hours once counted points outside the window: idle
/// hours 0.05 % to several % high, the more the shorter the window).
#[test]
fn missed_scrapes_and_profiling_gaps_keep_the_figures() {
    if !tools() {
        return;
    }
    let fx = Fixture::with(true);
    let pushed = by_id(&fx.report(&[]));
    let want = by_id(&fx.files_report(&[]));
    assert_eq!(pushed.len(), want.len());
    for (id, w) in &want {
        assert_eq!(pushed[id]["sampling_interval_s"], 120.0, "{id}");
        assert!(
            f(&w["samples"]) < 7.0 * 24.0 * 30.0,
            "{id}: scrapes were missed"
        );
    }
    like_the_files("missed scrapes", &pushed, &want, 0.001);
    inside_hours(&fx.url, &fx.files);
}

/// A window that starts and ends inside hours, from the store at `url` and from the files.
fn inside_hours(url: &str, files: &Path) {
    let (start, end) = ("2026-01-06T07:23:10Z", "2026-01-07T13:41:50Z");
    let mut a = vec![
        "report",
        "--prometheus",
        url,
        "--path",
        "pushdown",
        "--start",
        start,
        "--end",
        end,
    ];
    a.extend_from_slice(&["--format", "json", "--no-progress"]);
    let o = run(&a);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let part = by_id(&serde_json::from_str(&o.stdout).expect("JSON"));
    // The pushdown gives each point its interval, the last point's included (13:40 to
    // 13:42); the file reader counts the intervals between the samples it reads, so it reads
    // up to the sample that closes that interval (`--until` is exclusive).
    let want = by_id(&files_report(
        files,
        &["--since", start, "--until", "2026-01-07T13:42:01Z"],
    ));
    like_the_files("inside hours", &part, &want, 0.001);
    let idle: f64 = want.values().map(|d| f(&d["idle_hours"])).sum();
    assert!(idle > 1.0, "the window has idle time to compare: {idle}");
}

/// `serve --prometheus` answers a window with what `report --prometheus` finds for it; a store
/// that does not answer is a 502 that says so.
fn serve_asks_the_store(fx: &Fixture, pushed: &serde_json::Value) {
    let s = crate::serve::Served::start(&["--prometheus", &fx.url], &[]);
    let (code, body) = s.get(&format!(
        "/api/report?start={}&end={}",
        WINDOW[1], WINDOW[3]
    ));
    assert_eq!(code, 200, "{body}");
    let served: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(served["fleet"], pushed["fleet"]);
    assert_eq!(served["devices"], pushed["devices"]);
    assert_eq!(served["window"], pushed["window"]);
    let (code, metrics) = s.get(&format!("/metrics?start={}&end={}", WINDOW[1], WINDOW[3]));
    assert_eq!(code, 200);
    assert!(metrics.ends_with("# EOF\n"));
    let dead = crate::serve::Served::start(&["--prometheus", "http://127.0.0.1:9"], &[]);
    let (code, body) = dead.get("/api/report?last=1d");
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("error"), "{body}");
}

/// The utilization bands are one definition on both paths; an idle threshold other than the
/// first band edge is its own query, so idle time and the bottleneck evidence built on the
/// time below it agree with the files.
fn thresholds_and_bands_agree(fx: &Fixture) {
    let pushed30 = by_id(&fx.report(&["--idle-threshold", "30"]));
    let files30 = by_id(&fx.files_report(&["--idle-threshold", "30"]));
    for (id, w) in &files30 {
        let g = &pushed30[id];
        let bands = |d: &serde_json::Value| -> Vec<f64> {
            d["utilization_bands_hours"]
                .as_array()
                .expect("bands")
                .iter()
                .map(f)
                .collect()
        };
        for (gb, wb) in bands(g).iter().zip(bands(w)) {
            assert!(
                (gb - wb).abs() <= (0.01 * wb).max(2.0 / 60.0),
                "{id} bands: {g} vs {w}"
            );
        }
        let (gi, wi) = (f(&g["idle_hours"]), f(&w["idle_hours"]));
        assert!(
            (gi - wi).abs() <= (0.01 * wi).max(2.0 / 60.0),
            "{id} idle@30: {gi} vs {wi}"
        );
        assert_eq!(g["bottleneck"]["kind"], w["bottleneck"]["kind"], "{id}");
    }
}

/// A password in the URL never printed; a selector narrows; PromQL errors name the query; an
/// unreachable store says so.
fn secrets_selector_and_errors(fx: Fixture) {
    let url = fx.url.clone();
    let window = WINDOW;
    // A password in the URL is used and never printed: not in JSON, HTML, tables or stderr.
    let secret_url = url.replace("http://", "http://gpu-admin:hunter2-secret@");
    for format in ["json", "html", "table", "markdown", "csv"] {
        let mut a = vec!["report", "--prometheus", &secret_url];
        a.extend_from_slice(&window);
        a.extend_from_slice(&["--format", format, "--no-progress"]);
        let o = run(&a);
        assert_eq!(o.code, 0, "{format}: {}", o.stderr);
        assert!(
            !o.stdout.contains("hunter2") && !o.stderr.contains("hunter2"),
            "{format}: the password leaked"
        );
    }
    // A selector narrows the fleet.
    let first = fx.report(&["--selector", "{gpu=\"0\"}"]);
    let n = first["devices"].as_array().expect("devices").len();
    assert_eq!(n, 2, "GPU 0 of each of the two hosts");
    // PromQL errors name the query; a selector that matches nothing says so.
    let mut a = vec!["report", "--prometheus", &url];
    a.extend_from_slice(&window);
    a.extend_from_slice(&["--selector", "{namespace=~\"(\"}", "--no-progress"]);
    let o = run(&a);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("bad_data") && o.stderr.contains("count_over_time"),
        "{}",
        o.stderr
    );
    let mut a = vec!["report", "--prometheus", &url];
    a.extend_from_slice(&window);
    a.extend_from_slice(&["--selector", "{namespace=\"nobody\"}", "--no-progress"]);
    let o = run(&a);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("matching {namespace=\"nobody\"}"),
        "{}",
        o.stderr
    );
    // Unreachable: the server is gone.
    drop(fx);
    let mut a = vec![
        "report",
        "--prometheus",
        &url,
        "--retries",
        "0",
        "--no-progress",
    ];
    a.extend_from_slice(&window);
    let o = run(&a);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("cannot reach"), "{}", o.stderr);
}

/// VictoriaMetrics (Debian's `victoria-metrics`, installed by `.ci/run`), or a skip (a
/// failure under CI). It answers `-version`, not `--version`.
pub(crate) fn victoria_metrics() -> bool {
    let ok = Command::new("victoria-metrics")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "victoria-metrics must be installed in CI (.ci/run installs Debian's `victoria-metrics`)"
    );
    eprintln!("skipping: victoria-metrics not installed (apt-get install victoria-metrics)");
    false
}

/// POST a file to a loopback server; the status line.
pub(crate) fn http_post_file(port: u16, path: &str, file: &Path) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let len = std::fs::metadata(file).expect("file").len();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    )
    .expect("headers");
    std::io::copy(&mut std::fs::File::open(file).expect("open"), &mut s).expect("body");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    out.lines().next().unwrap_or_default().to_owned()
}

/// The same fleet in VictoriaMetrics, loaded through its import API: pushdown and `--raw`
/// give the file path's figures (MetricsQL leaves a range open at its start and moves a range
/// query's start to a multiple of its step; the pushdown's queries are written to mean the
/// same thing to both engines).
#[test]
fn victoria_metrics_gives_the_file_figures() {
    if !victoria_metrics() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // The messy fleet: missed scrapes and GPUs without GR for a while.
    let (om, files) = generate(dir.path(), true);
    let (_server, port) = start_vm(dir.path(), &om.join("fleet.om.txt"), 12);
    let url = format!("http://127.0.0.1:{port}");
    let report = |extra: &[&str]| by_id(&store_report(&url, extra));
    let want = by_id(&files_report(&files, &[]));
    assert_eq!(want.len(), 12);
    for (name, got) in [("pushdown", report(&[])), ("raw", report(&["--raw"]))] {
        for (id, g) in &got {
            assert_eq!(g["sampling_interval_s"], 120.0, "{name} {id}");
        }
        like_the_files(name, &got, &want, 0.001);
    }
    inside_hours(&url, &files);
}

/// VictoriaMetrics on a free loopback port with `om` imported, searchable for `series` GPUs;
/// stopped when the returned server is dropped.
pub(crate) fn start_vm(dir: &Path, om: &Path, gpus: usize) -> (Server, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let child = Command::new("victoria-metrics")
        .arg(format!("-storageDataPath={}", dir.join("vm").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .args([
            "-retentionPeriod=100y",
            "-search.latencyOffset=0s",
            "-loggerLevel=ERROR",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("victoria-metrics starts");
    let server = Server { child, port };
    let t0 = Instant::now();
    while !http_get(port, "/health").is_some_and(|r| r.contains("OK")) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "victoria-metrics is not up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = http_post_file(port, "/api/v1/import/prometheus", om);
    assert!(status.contains(" 204"), "import: {status}");
    let _ = http_get(port, "/internal/force_flush");
    // Every GPU searchable.
    let probe = "/api/v1/query?query=count(count_over_time(DCGM_FI_DEV_GPU_UTIL%5B3650d%5D))";
    let want = format!("\"{gpus}\"");
    while !http_get(port, probe).is_some_and(|r| r.contains(&want)) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the import is not searchable"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    (server, port)
}

/// Prometheus scraping `target` every second, from an empty store in `dir`.
pub(crate) fn scraping(dir: &Path, target: &str) -> Server {
    scraping_with(dir, target, "")
}

/// The same, with `rules` (a rule file's text) evaluated every second.
pub(crate) fn scraping_with(dir: &Path, target: &str, rules: &str) -> Server {
    let rule_files = if rules.is_empty() {
        String::new()
    } else {
        std::fs::create_dir_all(dir).expect("dir");
        let path = dir.join("rules.yml");
        std::fs::write(&path, rules).expect("rules");
        format!("rule_files: ['{}']\n", path.display())
    };
    start_with(
        &dir.join("tsdb"),
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}scrape_configs:\n  - job_name: gpuwise\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
}

/// An instant query's JSON answer.
pub(crate) fn query(port: u16, expr: &str) -> Option<serde_json::Value> {
    let q: String = expr
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let r = http_get(port, &format!("/api/v1/query?query={q}"))?;
    let body = r.split("\r\n\r\n").nth(1)?;
    serde_json::from_str(body).ok()
}
