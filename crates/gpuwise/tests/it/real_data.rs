//! Every reader on real outputs of the real tools (`../shared/data`), values checked against
//! the captures by hand.

use std::path::Path;

use crate::common::{device, f, report_json, run, shared};

fn p(dir: &Path, rel: &str) -> String {
    dir.join(rel).display().to_string()
}

#[test]
fn nvidia_smi_captures_idle_then_load() {
    let Some(s) = shared() else { return };
    let nv = |n: &str| p(&s, &format!("fixtures/nvidia-smi/{n}"));
    // Idle at 08:12:38.696 (0 %, 0 MiB, 69.85 W), load at 08:12:53.353 (100 %, 19818 MiB).
    let r = report_json(&[
        &nv("query-gpu-focused__h100-80gb-hbm3__idle.csv"),
        &nv("query-gpu-focused__h100-80gb-hbm3__load.csv"),
        "--host",
        "h100",
    ]);
    let d = device(&r, "h100/GPU-00000000-0000-0000-0000-000000000000");
    assert_eq!(d["model"], "H100-SXM5-80GB");
    assert_eq!(d["samples"], 2);
    assert!(
        (f(&d["gpu_hours"]) * 3_600_000.0 - 14_657.0).abs() < 1e-3,
        "14.657 s between the two rows"
    );
    assert!(
        (f(&d["mean_utilization_pct"])).abs() < 1e-9,
        "the idle row stands for the interval"
    );
    assert!((f(&d["peak_memory_used_mib"]) - 19_818.0).abs() < 1e-9);
    assert!((f(&d["memory_total_mib"]) - 81_559.0).abs() < 1e-9);
    assert!((f(&d["power_mean_w"]) - 69.85).abs() < 1e-6);
    assert!((f(&d["power_limit_w"]) - 700.0).abs() < 1e-9);
}

#[test]
fn nvidia_smi_mig_mode_has_no_utilization() {
    let Some(s) = shared() else { return };
    let nv = |n: &str| p(&s, &format!("fixtures/nvidia-smi/{n}"));
    for gpu in ["h100-mig", "h200-mig"] {
        let r = report_json(&[
            &nv(&format!("query-gpu-focused__{gpu}__idle.csv")),
            &nv(&format!("query-gpu-focused__{gpu}__load.csv")),
            "--host",
            gpu,
        ]);
        let d = &r["devices"][0];
        assert!(
            d["mean_utilization_pct"].is_null(),
            "[N/A] is missing, never 0"
        );
        assert_eq!(d["class"], "unknown");
        assert!(
            d["class_reason"]
                .as_str()
                .is_some_and(|x| x.contains("MIG"))
        );
        assert!(f(&d["peak_memory_used_mib"]) > 0.0);
    }
    let r = report_json(&[
        &nv("query-gpu-focused__h200__idle.csv"),
        &nv("query-gpu-focused__h200__load.csv"),
        "--host",
        "h200",
    ]);
    assert_eq!(r["devices"][0]["model"], "H200-SXM-141GB");
    let r = report_json(&[
        &nv("query-gpu-focused__l40s__idle.csv"),
        &nv("query-gpu-focused__l40s__load.csv"),
        "--host",
        "l40s",
    ]);
    assert_eq!(r["devices"][0]["model"], "L40S");
    assert!(
        (f(&r["devices"][0]["mean_utilization_pct"]) - 100.0).abs() < 1e-9,
        "the L40S idle capture reads 100 %"
    );
}

#[test]
fn nvidia_smi_all_fields_header() {
    let Some(s) = shared() else { return };
    let r = report_json(&[&p(
        &s,
        "fixtures/nvidia-smi/query-gpu-allfields__h100-80gb-hbm3__load.csv",
    )]);
    assert_eq!(r["ingest"]["skipped"], 0, "{:?}", r["warnings"]);
    let d = &r["devices"][0];
    assert_eq!(d["model"], "H100-SXM5-80GB");
    assert!((f(&d["peak_memory_used_mib"]) - 19_818.0).abs() < 1e-9);
}

#[test]
fn nvidia_smi_logs_without_timestamps_are_refused_clearly() {
    let Some(s) = shared() else { return };
    let o = run(&[
        "report",
        &p(
            &s,
            "fixtures/nvidia-smi/loop-noheader-nounits__thirdparty.txt",
        ),
        "--columns",
        "temperature.gpu,utilization.gpu,utilization.memory",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no `timestamp` column"), "{}", o.stderr);
    let o = run(&[
        "report",
        &p(
            &s,
            "fixtures/nvidia-smi/loop-noheader-nounits__thirdparty.txt",
        ),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("cannot tell the format"), "{}", o.stderr);
    let o = run(&[
        "report",
        &p(
            &s,
            "telemetry/prometheus-nvidia_gpu_exporter/unit-test-query.txt",
        ),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no `timestamp` column"), "{}", o.stderr);
}

#[test]
fn dmon_default_untimed_needs_start() {
    let Some(s) = shared() else { return };
    let f1 = p(
        &s,
        "fixtures/nvidia-smi/dmon-default__h100-80gb-hbm3__load.txt",
    );
    let o = run(&["report", &f1]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("dmon -o DT"), "{}", o.stderr);
    let r = report_json(&[&f1, "--start", "2026-07-14 08:00:00"]);
    let d = &r["devices"][0];
    assert_eq!(d["samples"], 5);
    assert!(
        (f(&d["gpu_hours"]) * 3600.0 - 4.0).abs() < 1e-9,
        "5 rows at dmon's 1 s default"
    );
    assert!((f(&d["mean_utilization_pct"]) - 100.0).abs() < 1e-9);
    // MIG: sm and mem are `-`.
    let r = report_json(&[
        &p(&s, "fixtures/nvidia-smi/dmon-default__h100-mig__load.txt"),
        "--start",
        "2026-07-14 08:00:00",
    ]);
    assert!(r["devices"][0]["mean_utilization_pct"].is_null());
}

#[test]
fn dmon_timed_captures() {
    let Some(s) = shared() else { return };
    // -s pucet -o DT (2021): rows 2 s apart, sm 0.
    let r = report_json(&[&p(
        &s,
        "fixtures/nvidia-smi/dmon-s-pucet-o-DT__2021__thirdparty.txt",
    )]);
    let d = &r["devices"][0];
    assert_eq!(d["first_seen"], "2021-01-02T19:12:31Z");
    assert_eq!(r["ingest"]["skipped"], 0, "{:?}", r["warnings"]);
    // -s mutc -o TD (2024), with a blank line: fb in MB → memory used.
    let r = report_json(&[&p(
        &s,
        "fixtures/nvidia-smi/dmon-s-mutc-o-TD__2024__thirdparty.txt",
    )]);
    let d = &r["devices"][0];
    assert_eq!(d["samples"], 6);
    assert!((f(&d["peak_memory_used_mib"]) - 478.0).abs() < 1e-9);
    // 6 %, 0, 3, 13, 0 for 1 s each.
    assert!((f(&d["mean_utilization_pct"]) - 22.0 / 5.0).abs() < 1e-9);
}

#[test]
fn dcgm_scrape_excerpts() {
    let Some(s) = shared() else { return };
    let file = p(
        &s,
        "fixtures/dcgm-exporter/scrape-excerpts-from-public-issues.prom",
    );
    let r = report_json(&[&file]);
    // MIG instances of one H100 are separate devices, with their profile.
    let mig7 = device(
        &r,
        "gsrh100-074/GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77/mig7",
    );
    assert_eq!(mig7["mig_profile"], "1g.10gb");
    assert_eq!(mig7["model"], "H100-SXM5-80GB");
    assert_eq!(mig7["namespace"], "model-playground-stg");
    assert_eq!(
        mig7["pod"],
        "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
    );
    assert!((f(&mig7["gpu_share"]) - 1.0 / 7.0).abs() < 1e-12);
    // Lower-case `hostname` (PR #736) and an A30 MIG slice.
    let a30 = r["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["host"] == "dcgm-exporter-wwwjh" && d["model"] == "A30")
        .expect("A30 device");
    assert_eq!(a30["mig_profile"], "1g.6gb");
    assert!(
        (f(&a30["gpu_share"]) - 0.25).abs() < 1e-12,
        "1g of the A30's 4 slices"
    );
    // The Quadro T2000 is a known GPU no cloud rents: it is named, and left unpriced.
    let t2000 = device(&r, "sheryb/GPU-08533397-8c65-7a0b-003b-c4bd120e67c1");
    assert_eq!(t2000["model"], "Quadro-T2000");
    assert!(t2000["price_source"].is_null());
    assert!(
        r["warnings"]
            .as_array()
            .expect("w")
            .iter()
            .any(|w| { w["kind"] == "unpriced" && w["count"].as_u64().is_some_and(|n| n >= 1) })
    );
}

#[test]
fn dcgm_datadog_t4_scrape() {
    let Some(s) = shared() else { return };
    let r = report_json(&[&p(
        &s,
        "telemetry/dcgm-exporter/datadog-integrations-core__dcgm__tests__fixtures__metrics.txt",
    )]);
    let t4 = r["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["id"] == "424773df46e0/GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e")
        .expect("T4");
    assert_eq!(t4["model"], "T4");
    assert_eq!(t4["utilization_source"], "dcgm_gpu_util");
    assert!(
        (f(&t4["memory_total_mib"]) - 15_109.0).abs() < 1e-9,
        "FB_USED 0 + FB_FREE 15109"
    );
}

#[test]
fn every_fixture_file_is_read_or_refused_without_a_panic() {
    let Some(s) = shared() else { return };
    let mut files = Vec::new();
    for dir in [
        "fixtures/nvidia-smi",
        "fixtures/dcgm-exporter",
        "fixtures/prometheus",
        "telemetry/dcgm-exporter",
        "telemetry/prometheus-nvidia_gpu_exporter",
        "telemetry/nvidia-smi-captures",
    ] {
        for e in std::fs::read_dir(s.join(dir))
            .expect("shared dir")
            .filter_map(Result::ok)
        {
            if e.path().is_file() {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() > 40);
    for file in files {
        let o = run(&[
            "report",
            &file.display().to_string(),
            "--format",
            "json",
            "--no-progress",
            "--start",
            "2026-01-01",
        ]);
        assert!(
            o.code == 0 || o.code == 2,
            "{}: exit {} {}",
            file.display(),
            o.code,
            o.stderr
        );
        assert!(
            !o.stderr.contains("panicked"),
            "{}: {}",
            file.display(),
            o.stderr
        );
        if o.code == 2 {
            assert!(
                o.stderr.starts_with("error: "),
                "{}: {}",
                file.display(),
                o.stderr
            );
        }
    }
}

/// The `query-gpu` CSV sections of the full nvidia-smi captures (idle, then load), joined.
fn capture_csv(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("# ") && line.contains(":: query-gpu (csv") {
            inside = true;
            continue;
        }
        if inside && line.starts_with("####") {
            continue;
        }
        if inside && line.starts_with("# ") && line.contains(" :: ") {
            inside = false;
            continue;
        }
        if inside && !line.starts_with('#') && !line.trim().is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn full_nvidia_smi_captures_of_every_gpu() {
    let Some(s) = shared() else { return };
    let dir = s.join("telemetry/nvidia-smi-captures");
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir)
        .expect("captures")
        .filter_map(Result::ok)
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".txt") {
            continue;
        }
        let csv = capture_csv(&std::fs::read_to_string(e.path()).expect("capture"));
        assert!(
            csv.lines().count() >= 3,
            "{name}: header, idle row, load row"
        );
        let path = tmp.path().join(format!("{name}.csv"));
        std::fs::write(&path, &csv).expect("write");
        let r = report_json(&[&path.display().to_string(), "--host", "capture"]);
        assert_eq!(r["ingest"]["skipped"], 0, "{name}: {:?}", r["warnings"]);
        assert_eq!(r["fleet"]["devices"], 1, "{name}");
        let d = &r["devices"][0];
        assert_eq!(d["samples"], 2, "{name}");
        let expect = if name.contains("h100") {
            Some("H100-SXM5-80GB")
        } else if name.contains("h200") {
            Some("H200-SXM-141GB")
        } else if name.contains("l40s") {
            Some("L40S")
        } else if name.contains("rtx-2080-super") {
            Some("GeForce-RTX-2080-SUPER")
        } else if name.contains("rtx-4080-super") {
            Some("GeForce-RTX-4080-SUPER")
        } else {
            None
        };
        assert_eq!(d["model"].as_str(), expect, "{name}");
        assert!(f(&d["memory_total_mib"]) > 7_000.0, "{name}");
        seen += 1;
    }
    assert!(seen >= 9, "all captures read ({seen})");
}

/// Every GPU name a real capture prints resolves to exactly one catalog entry; a name that
/// does not identify one product stays unknown.
#[test]
fn every_printed_gpu_name_resolves() {
    let Some(s) = shared() else { return };
    let catalog = gpuwise_catalog::Catalog::builtin();
    let mut names = std::collections::BTreeSet::new();
    let mut stack = vec![s.join("fixtures"), s.join("telemetry")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("dir").filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let file = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for (open, close) in [
                ("modelName=\"", "\""),
                ("<product_name>", "<"),
                ("\"Card series\": \"", "\""),
                ("\"Card Series\": \"", "\""),
            ] {
                for part in text.split(open).skip(1) {
                    if let Some(n) = part.split(close).next() {
                        names.insert(n.trim().to_owned());
                    }
                }
            }
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("GPU 0: ") {
                    names.insert(rest.split(" (UUID").next().unwrap_or("").trim().to_owned());
                }
            }
            // The `name` column of nvidia-smi CSV captures.
            if file.starts_with("query-gpu")
                || file.starts_with("unit-test-query")
                || file.contains("gtx770")
            {
                let mut lines = text
                    .lines()
                    .filter(|l| !l.starts_with('$') && !l.starts_with('#'));
                let header: Vec<String> = lines
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|h| h.trim().to_owned())
                    .collect();
                let col = header.iter().position(|h| h == "name");
                for l in lines {
                    let f: Vec<&str> = l.split(',').map(str::trim).collect();
                    match col {
                        Some(c) if f.len() == header.len() => names.insert(f[c].to_owned()),
                        _ => names.insert(f[0].to_owned()), // noheader: `gpu_name` first
                    };
                }
            }
        }
    }
    names.retain(|n| !n.is_empty() && !n.starts_with('['));
    // Not one product: these print a family, or are a test's placeholder.
    let ambiguous = ["Navi 22 [Radeon RX 6700/6700 XT / 6800M]", "Some Other GPU"];
    assert!(names.len() >= 15, "{names:?}");
    for n in &names {
        let hit = catalog.resolve(n);
        if ambiguous.contains(&n.as_str()) {
            assert!(hit.is_none(), "`{n}` must stay unknown, not be guessed");
        } else {
            assert!(
                hit.is_some(),
                "`{n}` printed by a real capture does not resolve"
            );
        }
    }
}

#[test]
fn prometheus_api_response_fixture() {
    let Some(s) = shared() else { return };
    let body = std::fs::read(s.join("fixtures/prometheus/query_range_response__docs-api-md.json"))
        .expect("fixture");
    let r = gpuwise_prom::api::parse(&body).expect("the documented response parses");
    assert_eq!(r.result_type, "matrix");
    assert_eq!(r.series.len(), 2);
    assert_eq!(r.series[1].labels["instance"], "localhost:9091");
    assert_eq!(
        r.series[1].samples,
        vec![
            (1_435_781_430_781, 0.0),
            (1_435_781_445_781, 0.0),
            (1_435_781_460_781, 1.0)
        ]
    );
}
