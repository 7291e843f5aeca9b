//! Messy fleets: the same device reaching the report more than once (a file named twice, a
//! copy, a rotated log, HA collectors, link loops), stray files beside the logs. Every
//! device-hour counts once, nothing hangs, and what happened is in the warnings.

use std::fmt::Write as _;
use std::path::Path;

use crate::common::{f, report_json, run};

const HEADER: &str = "timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]";
const UUID: &str = "GPU-5fd7a1c2-0000-4000-8000-00000000abcd";

/// One GPU sampled every 30 s from `start_s` (seconds after 2026-01-05 10:00 UTC) to `end_s`
/// inclusive, 60 % busy; `uuid` or only an index.
fn log(start_s: i64, end_s: i64, with_uuid: bool) -> String {
    let mut s = if with_uuid {
        format!("{HEADER}\n")
    } else {
        HEADER.replace(" uuid,", "") + "\n"
    };
    let mut t = start_s;
    while t <= end_s {
        let dt = jiff::Timestamp::from_second(1_767_607_200 + t)
            .expect("ts")
            .strftime("%Y/%m/%d %H:%M:%S.000");
        let id = if with_uuid {
            format!("{UUID}, ")
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{dt}, NVIDIA A100-SXM4-80GB, {id}0, 60 %, 20000 MiB, 81920 MiB, 300.00 W"
        );
        t += 30;
    }
    s
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn kinds(r: &serde_json::Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// One device and exactly `hours` GPU-hours in the report of `dir`.
fn one_gpu(dir: &Path, hours: f64) -> serde_json::Value {
    let r = report_json(&[&s(dir)]);
    assert_eq!(r["fleet"]["devices"], 1, "{}", r["devices"]);
    let got = f(&r["fleet"]["gpu_hours"]);
    assert!((got - hours).abs() < 1e-12, "{got} GPU-hours, not {hours}");
    r
}

#[test]
fn a_file_named_twice_or_through_a_link_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = dir.path().join("logs/node.csv");
    write(&node, &log(0, 3600, true));
    std::os::unix::fs::symlink(&node, dir.path().join("logs/alias.csv")).expect("link");
    let r = report_json(&[&s(&node), &s(&node), &s(&dir.path().join("logs"))]);
    assert!(
        (f(&r["fleet"]["gpu_hours"]) - 1.0).abs() < 1e-12,
        "{}",
        r["fleet"]
    );
    assert_eq!(r["ingest"]["inputs"].as_array().map(Vec::len), Some(1));
}

#[test]
fn link_loops_end_and_count_nothing_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = dir.path().join("logs");
    write(&logs.join("a/node.csv"), &log(0, 3600, true));
    std::fs::create_dir_all(logs.join("b")).expect("mkdir");
    std::os::unix::fs::symlink(".", logs.join("self")).expect("link");
    std::os::unix::fs::symlink("../b", logs.join("a/to-b")).expect("link");
    std::os::unix::fs::symlink("../a", logs.join("b/to-a")).expect("link");
    one_gpu(&logs, 1.0);
}

#[test]
fn a_copy_under_another_name_is_the_same_gpu_counted_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = log(0, 3600, true);
    write(&dir.path().join("node.csv"), &text);
    write(&dir.path().join("node-copy.csv"), &text);
    let r = one_gpu(dir.path(), 1.0);
    let k = kinds(&r);
    assert!(k.contains(&"overlap".to_owned()), "{k:?}");
    assert!(k.contains(&"same_gpu_several_hosts".to_owned()), "{k:?}");
    assert_eq!(r["ingest"]["overlap"]["devices"], 1);
    assert!((f(&r["ingest"]["overlap"]["hours_covered_twice"]) - 1.0).abs() < 1e-9);
}

#[test]
fn rotated_logs_are_one_device_and_one_timeline() {
    // No UUID: the host comes from the file name, and `node.csv.1` is `node`'s older log.
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("node.csv.1"), &log(0, 3600, false));
    write(&dir.path().join("node.csv"), &log(3630, 7200, false));
    let r = one_gpu(dir.path(), 2.0);
    assert_eq!(r["devices"][0]["id"], "node/gpu0");
    assert!(!kinds(&r).contains(&"overlap".to_owned()));
}

#[test]
fn ha_collectors_of_one_gpu_count_each_hour_once() {
    // Two collectors sample the same GPU 15 s apart for the same hour: the device holds the
    // first collector's hour, and the second adds only its last 15 s.
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        &dir.path().join("collector-a/node.csv"),
        &log(0, 3600, true),
    );
    write(
        &dir.path().join("collector-b/node.csv"),
        &log(15, 3615, true),
    );
    let r = one_gpu(dir.path(), 3615.0 / 3600.0);
    assert!(
        (f(&r["ingest"]["overlap"]["hours_covered_twice"]) - (3600.0 - 15.0) / 3600.0).abs() < 1e-9
    );
    assert!(f(&r["ingest"]["overlap"]["samples_dropped"]) >= 120.0);
    // --strict refuses the overlap, naming both files.
    let o = run(&["report", &s(dir.path()), "--strict", "--no-progress"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("collector-a/node.csv"), "{}", o.stderr);
    assert!(o.stderr.contains("collector-b/node.csv"), "{}", o.stderr);
}

#[test]
fn stray_files_in_a_directory_are_skipped_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("node.csv"), &log(0, 3600, true));
    write(
        &dir.path().join("README.md"),
        "# GPU logs\n\nCollected by cron.\n",
    );
    write(&dir.path().join("notes.txt"), "");
    let r = report_json(&[&s(dir.path())]);
    assert!((f(&r["fleet"]["gpu_hours"]) - 1.0).abs() < 1e-12);
    let w = r["warnings"].to_string();
    assert!(w.contains("not_telemetry"), "{w}");
    assert!(w.contains("README.md"), "{w}");
    assert!(w.contains("notes.txt"), "{w}");
    // --strict: an error. Named explicitly: an error too.
    let o = run(&["report", &s(dir.path()), "--strict", "--no-progress"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("README.md"), "{}", o.stderr);
    let o = run(&["report", &s(&dir.path().join("README.md")), "--no-progress"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("cannot tell the format"), "{}", o.stderr);
}

#[test]
fn duplicate_scrape_directories_count_once() {
    // DCGM scrapes, one file per scrape, and a full copy of the directory (a backup left
    // beside it): every scrape is covered by the original already.
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..121 {
        let t = jiff::Timestamp::from_second(1_767_607_200 + i * 30).expect("ts");
        let name = format!("{}.prom", t.strftime("%Y-%m-%dT%H:%M:%SZ"));
        let text = format!(
            "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{UUID}\",Hostname=\"node\"}} 60\nDCGM_FI_DEV_FB_USED{{gpu=\"0\",UUID=\"{UUID}\",Hostname=\"node\"}} 20000\n"
        );
        write(&dir.path().join("scrapes").join(&name), &text);
        write(&dir.path().join("scrapes-backup").join(&name), &text);
    }
    let r = one_gpu(dir.path(), 1.0);
    assert_eq!(r["ingest"]["overlap"]["samples_dropped"], 121);
}

#[test]
fn ha_scrape_collectors_interleave_and_count_once() {
    // Two collectors each scraping one GPU every 60 s into a file per scrape, 30 s apart: the
    // device is covered once, sampled twice as often (the second collector's scrapes fall
    // between the first's, so nothing is dropped), and the re-read keeps memory small.
    let dir = tempfile::tempdir().expect("tempdir");
    for (collector, offset) in [("a", 0), ("b", 30)] {
        for i in 0..121 {
            let t = jiff::Timestamp::from_second(1_767_607_200 + i * 60 + offset).expect("ts");
            let name = format!("{}.prom", t.strftime("%Y-%m-%dT%H:%M:%SZ"));
            let text =
                format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{UUID}\",Hostname=\"node\"}} 60\n");
            write(&dir.path().join(collector).join(&name), &text);
        }
    }
    let r = one_gpu(dir.path(), 2.0 + 30.0 / 3600.0);
    assert_eq!(r["ingest"]["samples"], 242);
    assert_eq!(r["ingest"]["overlap"]["samples_dropped"], 0);
    assert_eq!(r["devices"][0]["samples"], 242);
}

#[test]
fn serve_counts_a_messy_fleet_once_as_it_grows() {
    // Two HA collectors of one GPU, 15 s apart, both still writing; a copy of one; a README.
    // The server's report equals `report` on the same files, before and after they grow.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("collector-a/node.csv");
    let b = dir.path().join("collector-b/node.csv");
    write(&a, &log(0, 3600, true));
    write(&b, &log(15, 3615, true));
    write(&dir.path().join("copy/node.csv"), &log(0, 1800, true));
    write(
        &dir.path().join("README.md"),
        "# GPU logs\n\nCollected by two collectors.\n",
    );
    let served = crate::serve::Served::start(&[&s(dir.path()), "--refresh", "1s"], &[]);
    let cli = || {
        let o = run(&[
            "report",
            &s(dir.path()),
            "--format",
            "json",
            "--no-progress",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        o.stdout
    };
    assert_eq!(served.get("/api/report").1, cli());
    let grow = |path: &Path, from: i64, to: i64| {
        let more = log(from, to, true);
        let body = more.split_once('\n').expect("header").1;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("append");
        std::io::Write::write_all(&mut f, body.as_bytes()).expect("write");
    };
    let (_, health) = served.get("/healthz");
    let before: serde_json::Value = serde_json::from_str(&health).expect("JSON");
    grow(&a, 3630, 7200);
    grow(&b, 3645, 7215);
    let want = cli();
    let start = std::time::Instant::now();
    let mut got = served.get("/api/report").1;
    while got != want && start.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(300));
        got = served.get("/api/report").1;
    }
    assert_eq!(got, want);
    let r: serde_json::Value = serde_json::from_str(&got).expect("JSON");
    assert_eq!(r["fleet"]["devices"], 1);
    assert!(
        (f(&r["fleet"]["gpu_hours"]) - 7215.0 / 3600.0).abs() < 1e-9,
        "{}",
        r["fleet"]
    );
    let (_, health) = served.get("/healthz");
    let after: serde_json::Value = serde_json::from_str(&health).expect("JSON");
    assert_eq!(after["reads"]["grown"], 2, "{before} → {after}");
}
