//! The history store, the review and the actions journal, on a planted fleet: three idle
//! A100s through September (advice: shut each down), marked done on October 10; then one runs
//! four hours a day (its saving appears), one carries on (no saving), one stops reporting
//! (its targets vanished). The store must give the raw report's figures, DuckDB must read the
//! same totals from its Parquet files, and the review must find each planted outcome.

use std::fmt::Write as _;
use std::path::Path;

use crate::common::{cmd, f};

const DAY: i64 = 86_400_000;
/// 2026-09-01T00:00:00Z.
const SEP1: i64 = 1_788_220_800_000;
/// 2026-10-10T00:00:00Z: the actions are done.
const OCT10: i64 = SEP1 + 39 * DAY;
/// 2026-11-01T00:00:00Z.
const NOV1: i64 = SEP1 + 61 * DAY;

fn stamp(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .expect("time")
        .strftime("%Y/%m/%d %H:%M:%S%.3f")
        .to_string()
}

/// Whether device `d` (0 shrinks, 1 carries on, 2 vanishes, 3 moves to device 4, an H100 on
/// its host) reports at `t`.
fn reports(d: usize, t: i64) -> bool {
    if t < OCT10 {
        return d != 4;
    }
    match d {
        0 => (2 * 3_600_000..6 * 3_600_000).contains(&t.rem_euclid(DAY)),
        1 | 4 => true,
        _ => false,
    }
}

/// One nvidia-smi log per host, a sample a minute with a few seconds of jitter, idle (1 %)
/// throughout; returns the samples written.
fn plant(dir: &Path) -> usize {
    let mut rng = crate::common::Rng(38);
    let mut n = 0;
    for host in 0..4usize {
        let mut csv = String::from(
            "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n",
        );
        let mut t = SEP1 + rng.range(0, 60_000);
        while t < NOV1 {
            for d in [host, 4].into_iter().filter(|d| *d == host || host == 3) {
                if reports(d, t) {
                    let model = if d == 4 {
                        "NVIDIA H100 80GB HBM3"
                    } else {
                        "NVIDIA A100-SXM4-80GB"
                    };
                    let _ = writeln!(
                        csv,
                        "{}, 0, GPU-0000000{d}-aaaa-bbbb-cccc-dddddddddddd, {model}, 1 %, 0 MiB, 81920 MiB",
                        stamp(t)
                    );
                    n += 1;
                }
            }
            t += 60_000 + rng.range(-3_000, 3_000);
        }
        std::fs::write(dir.join(format!("node{host}.csv")), csv).expect("write");
    }
    n
}

fn gw(args: &[&str]) -> std::process::Output {
    let o = cmd().args(args).output().expect("gpuwise runs");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_slice(&gw(args).stdout).expect("JSON")
}

/// A planted fleet rolled up: the directory, the logs and the store.
pub(crate) fn planted() -> (tempfile::TempDir, String, String) {
    let tmp = tempfile::tempdir().expect("tmp");
    let (logs, store) = (tmp.path().join("logs"), tmp.path().join("store"));
    std::fs::create_dir_all(&logs).expect("dir");
    let samples = plant(&logs);
    let (logs_s, store_s) = (logs.display().to_string(), store.display().to_string());
    let rolled = json(&[
        "rollup",
        &logs_s,
        "--store",
        &store_s,
        "-f",
        "json",
        "--no-progress",
    ]);
    assert_eq!(rolled["samples"], samples);
    assert_eq!(rolled["store_days"], 61);
    (tmp, logs_s, store_s)
}

const COMMON: [&str; 5] = ["--cloud", "aws", "--format", "json", "--no-progress"];

#[test]
fn whole_hours_from_the_store_are_the_raw_report_and_duckdb_reads_the_same() {
    let (_tmp, logs_s, store_s) = planted();
    let common = COMMON;
    // Whole hours from the store are the raw report's figures; a window that cuts an hour
    // is widened to it, and said.
    let window = [
        "--since",
        "2026-09-03T05:00:00Z",
        "--until",
        "2026-10-17T13:00:00Z",
    ];
    let raw = json(&[&["report", logs_s.as_str()][..], &window, &common].concat());
    let from_store = json(
        &[
            &["report", "--store", store_s.as_str()][..],
            &window,
            &common,
        ]
        .concat(),
    );
    for k in ["gpu_hours", "idle_gpu_hours", "cost_usd", "idle_cost_usd"] {
        assert_eq!(raw["fleet"][k], from_store["fleet"][k], "{k}");
    }
    assert_eq!(raw["devices"], from_store["devices"]);
    let cut = cmd()
        .args([
            "report",
            "--store",
            &store_s,
            "--since",
            "2026-09-03T05:30:00Z",
        ])
        .args(common)
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&cut.stderr).contains("whole hours"));
    duckdb_totals(Path::new(&store_s), &raw_gpu_hours(&logs_s));
    // The allocation from the store is the one from the logs.
    let alloc =
        |src: &[&str]| json(&[&["allocate"][..], src, &window, &common].concat())["months"].clone();
    assert_eq!(alloc(&["--store", &store_s]), alloc(&[&logs_s]));
    // After a retention that dropped the days before September 22 (70 days back from the
    // run's time, 2026-12-01), the store's hours plus the logs for the hours it lacks are the
    // raw report still.
    gw(&[
        "rollup",
        &logs_s,
        "--store",
        &store_s,
        "--retain",
        "70d",
        "--no-progress",
    ]);
    let first = std::fs::read_dir(Path::new(&store_s).join("tiles"))
        .expect("tiles")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .min()
        .expect("a day");
    assert_eq!(first, "day=2026-09-22");
    let both = json(
        &[
            &["report", "--store", store_s.as_str(), logs_s.as_str()][..],
            &window,
            &common,
        ]
        .concat(),
    );
    assert_eq!(both["devices"], raw["devices"]);
    assert!(
        both["ingest"]["formats"]
            .to_string()
            .contains("gpuwise-store")
    );
}

#[test]
fn the_review_finds_the_planted_actions_outcomes() {
    let (tmp, logs_s, store_s) = planted();
    let store = tmp.path().join("store");
    let common = COMMON;
    let raw = json(
        &[
            &["report", logs_s.as_str(), "--until", "2026-10-01"][..],
            &common,
        ]
        .concat(),
    );

    let ids = log_and_mark(&logs_s, &store_s, &store);
    let review = json(&[
        "review", "--store", &store_s, "--month", "2026-10", "--cloud", "aws", "-f", "json",
    ]);
    assert_eq!(review["schema"], "gpuwise.review/v1");
    let outcome = |id: &str| {
        review["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in the review"))
    };
    // The rate before: each device reported all September, so its cost per month is its
    // price × 730 h (less one minute's interval at the edges).
    let price = f(&raw["devices"][0]["usd_per_gpu_hour"]);
    let (shrunk, same, gone, moved) = (
        outcome(&ids[0]),
        outcome(&ids[1]),
        outcome(&ids[2]),
        outcome(&ids[3]),
    );
    for a in [&shrunk, &same, &gone, &moved] {
        assert!(
            (f(&a["before_monthly_usd"]) / (price * 730.0) - 1.0).abs() < 0.01,
            "{a}"
        );
    }
    // Four hours a day of the 24 after October 10 (each day's four-hour run stands for its
    // samples' intervals: 4 h less one minute).
    let kept = (4.0 * 60.0 - 1.0) / (24.0 * 60.0);
    let expect = f(&shrunk["before_monthly_usd"]) * (1.0 - kept);
    assert!(
        (f(&shrunk["realized_monthly_usd"]) / expect - 1.0).abs() < 0.02,
        "{shrunk} (expected {expect})"
    );
    assert_eq!(shrunk["outcome"], "realized");
    assert!(
        f(&same["realized_monthly_usd"]).abs() < 0.01 * price * 730.0,
        "{same}"
    );
    assert_eq!(same["outcome"], "not_realized");
    assert_eq!(gone["outcome"], "targets_vanished");
    assert_eq!(gone["confidence"], "low");
    assert!(
        gone["detected"]
            .as_str()
            .is_some_and(|d| d.contains("no telemetry")),
        "{gone}"
    );
    moved_at_the_h100s_cost(&moved, &logs_s);
    let total = f(&review["realized_monthly_usd"]);
    let parts: f64 = [&shrunk, &same, &gone, &moved]
        .iter()
        .map(|a| f(&a["realized_monthly_usd"]))
        .sum();
    assert!((total - parts).abs() < 1e-6, "{total} vs {parts}");
    // The fleet: October's spend from the store's hours equals the raw report of October.
    let oct = json(
        &[
            &[
                "report",
                logs_s.as_str(),
                "--since",
                "2026-10-01",
                "--until",
                "2026-11-01",
            ][..],
            &common,
        ]
        .concat(),
    );
    let fleet = &review["fleet"].as_array().expect("fleet")[2];
    assert!((f(&fleet["spend_usd"]) - f(&oct["fleet"]["cost_usd"])).abs() < 1e-6);
    assert!((f(&fleet["gpu_hours"]) - f(&oct["fleet"]["gpu_hours"])).abs() < 1e-9);
    // New waste: the H100, idle from the day it appeared.
    let waste = review["new_waste"].as_array().expect("new waste");
    assert_eq!(waste.len(), 1, "{waste:?}");
    assert!(
        waste[0]["device"]
            .as_str()
            .is_some_and(|d| d.contains("GPU-00000004"))
    );
    every_format_renders(&store_s);
}

/// September's advice logged (twice: the second adds nothing), and each device's action
/// marked done on October 10; the actions' ids by device.
pub(crate) fn log_and_mark(logs_s: &str, store_s: &str, store: &Path) -> Vec<String> {
    let log = || {
        gw(&[
            "advise",
            logs_s,
            "--store",
            store_s,
            "--until",
            "2026-10-01",
            "--cloud",
            "aws",
            "--log",
            "--no-progress",
        ])
    };
    log();
    let listed = json(&["actions", "--store", store_s, "-f", "json"]);
    let actions = listed["actions"].as_array().expect("actions");
    let id_of = |d: usize| -> String {
        let gpu = format!("GPU-0000000{d}-aaaa-bbbb-cccc-dddddddddddd");
        actions
            .iter()
            .find(|a| {
                a["targets"].as_array().is_some_and(|t| {
                    t.len() == 1 && t[0].as_str().is_some_and(|x| x.contains(&gpu))
                })
            })
            .unwrap_or_else(|| panic!("an action for device {d} alone in {listed}"))["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let ids: Vec<String> = (0..4).map(id_of).collect();
    for id in &ids {
        gw(&[
            "actions",
            "--store",
            store_s,
            "done",
            &id[..6],
            "--date",
            "2026-10-10",
        ]);
    }
    // Logging the same advice again adds nothing.
    let before = std::fs::read_to_string(store.join("actions.jsonl")).expect("journal");
    log();
    assert_eq!(
        before,
        std::fs::read_to_string(store.join("actions.jsonl")).expect("journal")
    );

    ids
}

/// The work that moved to an H100 on its host costs what the H100 costs after.
fn moved_at_the_h100s_cost(moved: &serde_json::Value, logs_s: &str) {
    let h100 = json(&[&["report", logs_s, "--since", "2026-10-10"][..], &COMMON].concat());
    let h100 = h100["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| {
            d["gpu"]
                .as_str()
                .is_some_and(|g| g.starts_with("GPU-00000004"))
        })
        .map(|d| f(&d["usd_per_gpu_hour"]))
        .expect("the H100");
    let expect = f(&moved["before_monthly_usd"]) - h100 * 730.0;
    assert!(
        (f(&moved["realized_monthly_usd"]) - expect).abs() < 0.01 * h100 * 730.0,
        "{moved} (expected {expect})"
    );
    assert!(
        moved["detected"]
            .as_str()
            .is_some_and(|d| d.contains("H100") && d.contains("moved")),
        "{moved}"
    );
    assert_eq!(moved["confidence"], "medium");
}

/// The review in table, Markdown and HTML names the month and the outcomes.
fn every_format_renders(store_s: &str) {
    for format in ["table", "markdown", "html"] {
        let o = gw(&[
            "review", "--store", store_s, "--month", "2026-10", "--cloud", "aws", "-f", format,
        ]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("2026-10") && text.contains("targets_vanished"),
            "{format}"
        );
    }
}

/// The GPU-hours of the raw logs over the store's whole span, per host.
fn raw_gpu_hours(logs: &str) -> serde_json::Value {
    json(&[
        "report",
        logs,
        "--until",
        "2026-11-01",
        "--format",
        "json",
        "--no-progress",
    ])
}

/// DuckDB reads the store's Parquet files as they are: its per-host GPU-hours (a plain SQL
/// sum over `covered_ms`) are the report's.
fn duckdb_totals(store: &Path, raw: &serde_json::Value) {
    let sql = format!(
        "SELECT host, sum(covered_ms) / 3.6e6 FROM read_parquet('{}/tiles/*/*.parquet', hive_partitioning = true) GROUP BY host ORDER BY host",
        store.display()
    );
    let o = std::process::Command::new("python3")
        .args(["-c", &format!("import duckdb; [print(f'{{h}} {{v!r}}') for h, v in duckdb.sql(\"{sql}\").fetchall()]")])
        .output();
    let o = match o {
        Ok(o) if o.status.success() => o,
        other => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "DuckDB (the Python package) is needed here: .ci/run installs it ({other:?})"
            );
            eprintln!("skipping the DuckDB check: python3 -c 'import duckdb' failed");
            return;
        }
    };
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for line in lines {
        let (host, hours) = line.split_once(' ').expect("host hours");
        let hours: f64 = hours.parse().expect("number");
        let want: f64 = raw["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .filter(|d| d["host"] == host)
            .map(|d| f(&d["gpu_hours"]))
            .sum();
        assert!(
            (hours - want).abs() < 1e-6,
            "{host}: DuckDB {hours} h, report {want} h"
        );
    }
}

/// `serve --store` keeps its completed tiles in the store as it reads, the late ones too: the
/// store then gives the raw report, for the hours read at start and for a day appended later.
#[test]
fn serve_keeps_its_tiles_in_the_store_as_files_grow() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (logs, store) = (tmp.path().join("logs"), tmp.path().join("store"));
    std::fs::create_dir_all(&logs).expect("dir");
    plant(&logs);
    let (logs_s, store_s) = (logs.display().to_string(), store.display().to_string());
    let s = crate::serve::Served::start(
        &[
            &logs_s,
            "--store",
            &store_s,
            "--tile",
            "1h",
            "--retain",
            "70d",
            "--refresh",
            "1s",
        ],
        &[],
    );
    let same = |since: &str, until: &str| {
        let w = ["--since", since, "--until", until];
        let raw = json(&[&["report", logs_s.as_str()][..], &w, &COMMON].concat());
        let kept = json(&[&["report", "--store", store_s.as_str()][..], &w, &COMMON].concat());
        assert_eq!(raw["devices"], kept["devices"], "{since}..{until}");
    };
    same("2026-09-01", "2026-11-01");
    // A day more of one device, appended while the server runs.
    let g = s.generation();
    let mut more = String::new();
    let mut t = NOV1 + 17_000;
    while t < NOV1 + DAY {
        let _ = writeln!(
            more,
            "{}, 0, GPU-00000001-aaaa-bbbb-cccc-dddddddddddd, NVIDIA A100-SXM4-80GB, 1 %, 0 MiB, 81920 MiB",
            stamp(t)
        );
        t += 61_000;
    }
    let path = logs.join("node1.csv");
    let mut text = std::fs::read_to_string(&path).expect("log");
    text.push_str(&more);
    std::fs::write(&path, text).expect("append");
    s.wait_past(g);
    let day = store.join("tiles/day=2026-11-01/part.parquet");
    let start = std::time::Instant::now();
    while !day.exists() {
        assert!(
            start.elapsed().as_secs() < 60,
            "no November tiles in the store"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    same("2026-10-31", "2026-11-02");
}

/// `serve --store` answers a window from before the files it keeps (`--retain`) from the
/// store, joined to the files' part: the API's devices are the raw report's; the default view
/// stays what the files hold.
#[test]
fn serve_reaches_back_into_the_store_for_older_windows() {
    let (_tmp, logs_s, store_s) = planted();
    let s = crate::serve::Served::start(
        &[
            &logs_s,
            "--store",
            &store_s,
            "--tile",
            "1h",
            "--retain",
            "7d",
            "--cloud",
            "aws",
            "--refresh",
            "1h",
        ],
        &[],
    );
    let (from, to) = ("2026-09-05T00:00:00Z", "2026-10-30T00:00:00Z");
    let (code, body) = s.get(&format!("/api/report?start={from}&end={to}"));
    assert_eq!(code, 200, "{body}");
    let api: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let raw = json(
        &[
            &["report", logs_s.as_str(), "--since", from, "--until", to][..],
            &COMMON,
        ]
        .concat(),
    );
    assert_eq!(api["devices"], raw["devices"]);
    let (_, body) = s.get("/api/report");
    let kept: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let first = kept["window"]["start"].as_str().expect("start");
    assert!(
        first >= "2026-10-24",
        "the default view is the files' {first}"
    );
}

/// The bad journals of the corpus (`tests/data/bad/journal/`): each refused with its file and
/// line named, exit 2; a last line cut short by a crash is left out with a warning.
#[test]
fn the_bad_journal_corpus_is_refused_by_line() {
    for (file, want) in [
        (
            "mark-unknown.jsonl",
            "line 2: a mark for action ffffffffffff",
        ),
        ("not-json.jsonl", "line 2: not a JSON object"),
        ("not-an-object.jsonl", "line 1: not a JSON object"),
        ("missing-field.jsonl", "line 1: no `predicted_monthly_usd`"),
        ("unknown-type.jsonl", "line 2: an entry of type `forgotten`"),
        ("bad-date.jsonl", "line 2: `done_ms` is not an integer"),
    ] {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::copy(
            crate::common::data(&format!("bad/journal/{file}")),
            dir.path().join("actions.jsonl"),
        )
        .expect("copy");
        let o = cmd()
            .args(["actions", "--store", &dir.path().display().to_string()])
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains("actions.jsonl") && err.contains(want),
            "{file}: {err}"
        );
    }
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::copy(
        crate::common::data("bad/journal/torn-tail.jsonl"),
        dir.path().join("actions.jsonl"),
    )
    .expect("copy");
    let o = cmd()
        .args([
            "actions",
            "--store",
            &dir.path().display().to_string(),
            "-f",
            "json",
        ])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("line 2 was cut short"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["actions"][0]["state"], "open");
}

/// With job records, the review carries `gpuwise jobs`'s figures per group and period: the
/// month's equal the jobs report over that month; a month without telemetry has none.
#[test]
fn the_review_carries_the_jobs_figures_of_each_period() {
    let p = crate::jobs::planted(9);
    let store = p.path().join("store").display().to_string();
    gw(&["rollup", &p.fleet, "--store", &store, "--no-progress"]);
    let r = json(&[
        "review",
        "--month",
        "2026-10",
        "--history",
        "1",
        "--store",
        &store,
        &p.fleet,
        "--sacct",
        &p.sacct,
        "--cloud",
        "aws",
        "-f",
        "json",
    ]);
    let j = json(&[
        "jobs",
        &p.fleet,
        "--sacct",
        &p.sacct,
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--cloud",
        "aws",
        "--format",
        "json",
        "--no-progress",
    ]);
    let groups = j["groups"]["account"].as_array().expect("accounts");
    assert!(!groups.is_empty());
    for g in groups {
        let t = r["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .find(|t| t["dimension"] == "account" && t["key"] == g["key"])
            .unwrap_or_else(|| panic!("account {} in the review", g["key"]));
        assert!(t["periods"][0].is_null(), "September has no telemetry: {t}");
        let oct = &t["periods"][1];
        for k in [
            "cost_per_run_usd",
            "cost_per_successful_run_usd",
            "queue_share_pct",
            "mean_run_s",
        ] {
            assert_eq!(oct[k], g[k], "{k} of {}", g["key"]);
        }
        assert_eq!(oct["runs"], g["jobs"]);
    }
    let text = String::from_utf8_lossy(
        &gw(&[
            "review", "--month", "2026-10", "--store", &store, &p.fleet, "--sacct", &p.sacct,
            "--cloud", "aws",
        ])
        .stdout,
    )
    .into_owned();
    assert!(text.contains("Jobs and runs"), "{text}");
}

/// Without `--store`, `rollup`, `advise --log`, `actions` and `review` use the user's data
/// directory (`$XDG_DATA_HOME/gpuwise/store`); a command with nothing to read says what it
/// needs.
#[test]
fn the_default_store_is_the_users_and_nothing_to_read_is_said() {
    let data = tempfile::tempdir().expect("tmp");
    let with_home = |args: &[&str]| {
        cmd()
            .env("XDG_DATA_HOME", data.path())
            .args(args)
            .output()
            .expect("runs")
    };
    let logs = crate::common::data("smi/two-gpus.csv");
    let o = with_home(&["rollup", &logs, "-f", "json", "--no-progress"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let dir = data.path().join("gpuwise/store");
    assert_eq!(v["store"], dir.display().to_string());
    assert!(dir.join("tiles").is_dir());
    let o = with_home(&["review", "--month", "2026-01", "-f", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = with_home(&["report"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("INPUT…), --prometheus URL or --store DIR"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
