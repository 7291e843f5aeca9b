//! Planted truth: `gpuwise generate` writes a fleet and what a correct report must find; the
//! report must find it (GPU-hours, idle and held-idle hours, mean utilization within 1 %,
//! every class, the data-starved bottleneck, the idle nights in words), in every format.

use crate::common::{close, f, report_json, run};

fn check(format: &str, compress: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("fleet");
    let out_s = out.display().to_string();
    let g = run(&[
        "generate",
        "--out",
        &out_s,
        "--gpus",
        "26",
        "--days",
        "7",
        "--interval",
        "2m",
        "--format",
        format,
        "--seed",
        "7",
        "--compress",
        compress,
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("truth.json")).expect("truth"))
            .expect("json");
    // Read the data files (truth.json is not telemetry).
    let files: Vec<String> = std::fs::read_dir(&out)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| !p.ends_with("truth.json"))
        .map(|p| p.display().to_string())
        .collect();
    let mut args: Vec<&str> = files.iter().map(String::as_str).collect();
    args.extend_from_slice(&["--top", "100"]);
    let r = report_json(&args);
    let devices = truth["devices"].as_array().expect("devices");
    assert_eq!(
        r["fleet"]["devices"],
        devices.len(),
        "{format}: device count"
    );
    let mut sum_hours = 0.0;
    let mut sum_idle = 0.0;
    for t in devices {
        let id = t["id"].as_str().expect("id");
        let d = crate::common::device(&r, id);
        for (tk, rk) in [
            ("gpu_hours", "gpu_hours"),
            ("idle_hours", "idle_hours"),
            ("held_idle_hours", "held_idle_hours"),
            ("mean_utilization_pct", "mean_utilization_pct"),
        ] {
            assert!(
                close(f(&t[tk]), f(&d[rk]), 0.01),
                "{format} {id} {tk}: truth {} report {}",
                t[tk],
                d[rk]
            );
        }
        assert_eq!(
            d["class"], t["expected_class"],
            "{format} {id} ({}): {}",
            t["scenario"], d["class_reason"]
        );
        if let Some(b) = t["expected_bottleneck"].as_str() {
            assert_eq!(
                d["bottleneck"]["kind"], b,
                "{format} {id}: {}",
                d["bottleneck"]["evidence"]
            );
        }
        if t["scenario"] == "idle_nights_weekends" {
            assert_eq!(
                d["idle_pattern"], "idle 19:00–08:00 on weekdays and all weekend",
                "{format} {id}"
            );
        }
        if t["scenario"] == "saturated" || t["scenario"] == "healthy_training" {
            assert!(
                d["idle_pattern"].is_null(),
                "{format} {id} has no idle windows"
            );
        }
        sum_hours += f(&t["gpu_hours"]);
        sum_idle += f(&t["idle_hours"]);
    }
    assert!(close(f(&r["fleet"]["gpu_hours"]), sum_hours, 0.01));
    assert!(close(f(&r["fleet"]["idle_gpu_hours"]), sum_idle, 0.01));
    assert_eq!(r["ingest"]["skipped"], 0, "{format}: {:?}", r["warnings"]);
}

#[test]
fn planted_truth_nvidia_smi_gzip() {
    check("nvidia-smi", "gzip");
}

#[test]
fn planted_truth_dcgm_zstd() {
    check("dcgm", "zstd");
}

#[test]
fn planted_truth_dmon() {
    check("dmon", "none");
}

#[test]
fn planted_truth_mixed_formats() {
    check("mixed", "none");
}

#[test]
fn generator_is_deterministic() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    for d in [&a, &b] {
        let o = run(&[
            "generate",
            "--out",
            &d.path().display().to_string(),
            "--gpus",
            "5",
            "--days",
            "1",
            "--interval",
            "5m",
            "--seed",
            "3",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    for name in ["train-a100-1.prom", "truth.json"] {
        let x = std::fs::read(a.path().join(name)).expect("file");
        let y = std::fs::read(b.path().join(name)).expect("file");
        assert!(x == y, "{name} differs between runs with the same seed");
    }
}

#[test]
fn dcgm_series_order_reads_like_scrape_order() {
    // The same scrapes, once in the exporter's order (by scrape) and once regrouped by series
    // (as `promtool tsdb dump` prints them): the reports must agree.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("fleet");
    let g = run(&[
        "generate",
        "--out",
        &out.display().to_string(),
        "--gpus",
        "8",
        "--days",
        "2",
        "--interval",
        "5m",
        "--format",
        "dcgm",
        "--seed",
        "5",
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    let by_scrape = out.join("train-a100-1.prom");
    let text = std::fs::read_to_string(&by_scrape).expect("file");
    let mut series: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let key = line.rsplitn(3, ' ').nth(2).unwrap_or(line);
        series.entry(key).or_default().push(line);
    }
    let regrouped: String = series
        .values()
        .flatten()
        .map(|l| format!("{l}\n"))
        .collect();
    let by_series = dir.path().join("train-a100-1.series.prom");
    std::fs::write(&by_series, regrouped).expect("write");
    let a = report_json(&[&by_scrape.display().to_string()]);
    let b = report_json(&[&by_series.display().to_string()]);
    assert!(
        a["devices"] == b["devices"],
        "devices differ between scrape and series order"
    );
    assert!(
        a["fleet"] == b["fleet"],
        "fleet differs between scrape and series order"
    );
    assert_eq!(b["ingest"]["samples"], 8 * (2 * 288 + 1));
}
