//! `gpuwise simulate spot` end to end: a tiny trace worked by hand, the paper's traces, and
//! bad input.

use crate::common::{data, f, run, run_wide, shared};

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["simulate", "spot"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = run(&all);
    assert_eq!(o.code, 0, "{all:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

#[test]
fn a_tiny_trace_checked_by_hand() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Hourly ticks: spot for 3 h, gone 2 h, back for good.
    let t = dir.path().join("t.json");
    std::fs::write(
        &t,
        r#"{"metadata":{"gap_seconds":3600},"data":[1,1,1,0,0,1,1,1,1,1,1,1,1,1,1,1]}"#,
    )
    .expect("trace");
    let s = json(&[
        "--trace",
        &t.display().to_string(),
        "--work-hours",
        "5",
        "--deadline-hours",
        "10",
        "--changeover",
        "30m",
        "--starts",
        "1",
        "--seed",
        "0",
        "--spot-price",
        "1",
        "--on-demand-price",
        "3",
        "--policy",
        "spot_only",
        "--policy",
        "on_demand",
    ]);
    assert_eq!(s["schema"], "gpuwise.spot/v1");
    assert_eq!(s["traces"][0]["ticks"], 16);
    let start = s["starts_per_trace"].as_u64().expect("n");
    assert_eq!(start, 1);
    let p = |name: &str| {
        s["policies"]
            .as_array()
            .expect("policies")
            .iter()
            .find(|p| p["policy"] == name)
            .expect("policy")
            .clone()
    };
    // On demand: 0.5 h changeover + 5 h of work, billed 5.5 h at $3.
    let od = p("on_demand");
    assert_eq!(f(&od["on_demand_billed_hours_mean"]), 5.5);
    assert_eq!(f(&od["cost_usd_mean"]), 16.5);
    // Spot only, from a start the seed picks (the window of 10 ticks fits 7 starts, 0–6): its
    // work is 5 h on spot, and it never spends on demand.
    let so = p("spot_only");
    assert_eq!(f(&so["spot_work_hours_mean"]), 5.0);
    assert_eq!(f(&so["on_demand_billed_hours_mean"]), 0.0);
    assert!(f(&so["cost_usd_mean"]) < 16.5);
}

#[test]
fn the_papers_traces_in_the_cli_match_the_library() {
    let Some(data) = shared() else { return };
    let dir = data.join("spot/skypilot-spot-traces/availability/1-node/aws-10-26-2022");
    let glob = format!("{}/*.json", dir.display());
    let s = json(&[
        "--trace",
        &glob,
        "--trace-hours",
        "13d",
        "--work-hours",
        "48",
        "--deadline-hours",
        "60",
        "--changeover",
        "12m",
        "--starts",
        "300",
        "--seed",
        "0",
        "--policy",
        "greedy",
        "--policy",
        "uniform_progress",
    ]);
    assert_eq!(s["traces"].as_array().expect("traces").len(), 8);
    // The paper's window: 13 days of 600 s ticks.
    assert!(
        s["traces"]
            .as_array()
            .expect("traces")
            .iter()
            .all(|t| t["ticks"] == 1872)
    );
    for (p, paper_on_demand) in s["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .zip([30.8, 25.1])
    {
        assert!(
            (f(&p["on_demand_work_hours_mean"]) - paper_on_demand).abs() <= 0.5,
            "{p}"
        );
        assert_eq!(p["runs"], 2400);
        assert_eq!(f(&p["deadline_met_share"]), 1.0);
        let total = f(&p["spot_work_hours_mean"]) + f(&p["on_demand_work_hours_mean"]);
        assert!((total - 48.0).abs() < 1e-6, "{p}");
    }
}

/// `--checkpoint-interval auto` tunes checkpoints for spot; the on-demand baseline is never
/// preempted and pays for none: 48 h of work and a 12 min changeover at $3.06 is $147.49 (it was
/// billed $159, inflating the saving). A policy whose runs do not all meet the deadline shows
/// its cost marked as not comparable.
#[test]
fn the_on_demand_baseline_pays_no_spot_checkpoints() {
    let Some(data) = shared() else { return };
    let trace = data.join(
        "spot/skypilot-spot-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json",
    );
    let args = [
        "--trace",
        &trace.display().to_string(),
        "--work-hours",
        "48",
        "--deadline-hours",
        "60",
        "--changeover",
        "12m",
        "--checkpoint-interval",
        "auto",
        "--checkpoint-cost",
        "5m",
        "--on-demand-price",
        "3.06",
        "--spot-price",
        "0.92",
        "--starts",
        "30",
        "--policy",
        "on_demand",
        "--policy",
        "spot_only",
    ]
    .map(str::to_owned);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = json(&refs);
    let od = &s["policies"][0];
    assert_eq!(od["policy"], "on_demand");
    assert!((f(&od["cost_usd_mean"]) - 48.2 * 3.06).abs() < 1e-6, "{od}");
    let spot_only = &s["policies"][1];
    let mut all = vec!["simulate", "spot"];
    all.extend_from_slice(&refs);
    let o = run_wide(&all);
    assert_eq!(o.code, 0, "{}", o.stderr);
    if f(&spot_only["deadline_met_share"]) < 1.0 {
        assert!(o.stdout.contains("not a cost to compare"), "{}", o.stdout);
    }
}

#[test]
fn bad_traces_and_jobs_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    };
    let no_gap = write("a.json", r#"{"data":[1,1,1]}"#);
    let short = write(
        "b.json",
        r#"{"metadata":{"gap_seconds":3600},"data":[1,1,1]}"#,
    );
    let cases: [(Vec<&str>, &str); 9] = [
        (
            vec!["--trace", &short, "--work-hours", "1", "--gpu", "A100"],
            "--gpu: `A100` could be A100-SXM4-40GB",
        ),
        (
            vec!["--trace", &short, "--work-hours", "1", "--zones", &short],
            "a zone group needs two traces or more",
        ),
        (
            vec![
                "--trace",
                &short,
                "--work-hours",
                "1",
                "--policy",
                "multi_zone",
            ],
            "the multi_zone policy needs zone groups",
        ),
        (
            vec!["--trace", &short, "--work-hours", "1", "--changeover=-5m"],
            "--changeover",
        ),
        (
            vec!["--trace", &no_gap, "--work-hours", "1"],
            "a.json: has no metadata.gap_seconds",
        ),
        (
            vec![
                "--trace",
                &short,
                "--work-hours",
                "2",
                "--deadline-hours",
                "10",
            ],
            "b.json: 3.0 h of trace is shorter than the job's window of 10.0 h",
        ),
        (
            vec!["--trace", &short, "--work-hours=-2"],
            "--work-hours must be positive",
        ),
        (
            vec![
                "--trace",
                &short,
                "--work-hours",
                "2",
                "--deadline-hours",
                "1",
            ],
            "--deadline-hours must be at least --work-hours",
        ),
        (
            vec!["--trace", &short, "--work-hours", "1", "--policy", "yolo"],
            "`yolo` is not a policy",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["simulate", "spot"];
        all.extend_from_slice(&args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{args:?}");
        assert!(o.stderr.contains(want), "{args:?}: {}", o.stderr);
    }
}

/// Numbers no trace or job holds are errors naming the file, line and bound, never a panic or
/// an allocation of the whole machine (a `gap_seconds` of 1e308, a time of 1e300 s or 1e20 ms
/// panicked or aborted; `--starts 1000000000` took 22.9 GB).
#[test]
fn implausible_trace_numbers_and_flags_are_errors() {
    let trace = |name: &str| data(&format!("bad/spot/{name}"));
    let cases: [(&str, &str, &[&str], &str); 8] = [
        (
            "gap-huge.json",
            "auto",
            &[],
            "gap-huge.json: metadata.gap_seconds must be a number of seconds from 1 to 86400",
        ),
        (
            "time-huge.csv",
            "csv",
            &[],
            "time-huge.csv: line 4: time `1e300` s is beyond 1e10 s",
        ),
        (
            "events-huge.csv",
            "events",
            &[],
            "events-huge.csv: line 3: time `100000000000000000000` ms is beyond 1e10 s",
        ),
        (
            "span-huge.csv",
            "csv",
            &[],
            "span-huge.csv: spans 150000000 ticks of 60 s; at most 10000000 are read",
        ),
        (
            "time-huge.csv",
            "csv",
            &["--starts", "1000000000"],
            "--starts must be from 1 to 10000",
        ),
        (
            "time-huge.csv",
            "csv",
            &["--nodes", "4000000000"],
            "--nodes must be from 1 to 100000",
        ),
        (
            "time-huge.csv",
            "csv",
            &["--deadline-hours", "1e300"],
            "--deadline-hours must be positive and at most 87600",
        ),
        (
            "time-huge.csv",
            "csv",
            &["--trace-hours", "nan"],
            "--trace-hours must be longer than zero (got NaN)",
        ),
    ];
    for (file, format, extra, want) in cases {
        let path = trace(file);
        let mut args = vec![
            "simulate",
            "spot",
            "--trace",
            &path,
            "--trace-format",
            format,
            "--work-hours",
            "1",
            "--on-demand-price",
            "3",
            "--spot-price",
            "1",
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert_eq!(o.code, 2, "{file} {extra:?}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{file} {extra:?}: {}", o.stderr);
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    }
}

#[test]
fn zones_let_multi_zone_run_on_either_zone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, data: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!(r#"{{"metadata":{{"gap_seconds":3600}},"data":[{data}]}}"#),
        )
        .expect("write");
        p.display().to_string()
    };
    // Zone a has capacity for the first 5 h, zone b after: together, spot all along.
    let a = write("a.json", "1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0");
    let b = write("b.json", "0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1");
    let s = json(&[
        "--trace",
        &a,
        "--zones",
        &format!("{a},{b}"),
        "--work-hours",
        "8",
        "--deadline-hours",
        "12",
        "--changeover",
        "30m",
        "--starts",
        "1",
        "--seed",
        "0",
    ]);
    let z = &s["zones"][0];
    assert_eq!(z["files"].as_array().expect("files").len(), 2);
    assert_eq!(f(&z["availability_mean"]), 1.0);
    let p = &z["policy"];
    assert_eq!(p["policy"], "multi_zone");
    assert_eq!(f(&p["on_demand_billed_hours_mean"]), 0.0, "{p}");
    assert_eq!(f(&p["spot_work_hours_mean"]), 8.0);
    // The pooled list has it too, beside the single-trace policies.
    let names: Vec<&str> = s["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .map(|p| p["policy"].as_str().expect("name"))
        .collect();
    assert!(
        names.contains(&"multi_zone") && names.contains(&"omniscient"),
        "{names:?}"
    );
}

#[test]
fn commit_sizes_the_planted_baseline() {
    // Three GPUs, 10 hours of 1-minute samples: GPU 0 busy every hour, GPU 1 in the first 7,
    // GPU 2 in the first 3; idle (0 %) otherwise.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut csv = String::from(
        "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], memory.total [MiB], memory.used [MiB], power.draw [W], enforced.power.limit [W]\n",
    );
    let start = jiff::Timestamp::from_second(1_767_571_200).expect("ts");
    for m in 0..=600 {
        let t = start + jiff::SignedDuration::from_mins(m);
        let stamp = t.strftime("%Y/%m/%d %H:%M:%S%.3f");
        for (g, busy_hours) in [(0, 10), (1, 7), (2, 3)] {
            let util = if m / 60 < busy_hours { 80 } else { 0 };
            csv.push_str(&format!(
                "{stamp}, NVIDIA A100-SXM4-80GB, 00000000:0{g}:00.0, GPU-0000000{g}-0000-4000-8000-000000000000, {g}, {util} %, 3 %, 81920 MiB, 2048 MiB, 250.00 W, 400.00 W\n"
            ));
        }
    }
    let file = dir.path().join("node.csv");
    std::fs::write(&file, csv).expect("write");
    let o = run(&[
        "simulate",
        "commit",
        &file.display().to_string(),
        "--on-demand-price",
        "4",
        "--commit-1y-price",
        "2.5",
        "--commit-3y-price",
        "1.6",
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(s["schema"], "gpuwise.commit/v1");
    assert_eq!(s["window_hours"], 10);
    assert_eq!(s["peak_gpus"], 3);
    // 1y break-even 62.5 %: the 2nd GPU (busy 70 % of hours) yes, the 3rd (30 %) no.
    // 3y break-even 40 %: the same two.
    for (term, k) in [("1y", 2), ("3y", 2)] {
        let t = s["terms"]
            .as_array()
            .expect("terms")
            .iter()
            .find(|t| t["term"] == term)
            .expect("term");
        assert_eq!(t["optimum_committed_gpus"], k, "{t}");
    }
    // All on demand: (10 + 7 + 3) GPU-hours × $4 over 10 hours, scaled to 730 hours.
    assert!((f(&s["on_demand_monthly_usd"]) - 20.0 * 4.0 * 73.0).abs() < 1e-6);
}

#[test]
fn commit_refuses_what_it_cannot_price_or_read() {
    let log = crate::common::data("smi/two-gpus.csv");
    for (args, want) in [
        (
            vec![],
            "give --gpu NAME (catalog prices) or --on-demand-price",
        ),
        (
            vec![
                "--on-demand-price",
                "4",
                "--commit-1y-price",
                "2",
                "--spot-share",
                "120",
            ],
            "--spot-share must be within 0–100",
        ),
        (
            vec![
                "--on-demand-price",
                "4",
                "--commit-1y-price",
                "2",
                "--interruptible-label",
                "batch",
            ],
            "--interruptible-label must be KEY=VALUE",
        ),
        (
            vec!["--on-demand-price", "4", "--commit-1y-price=-2"],
            "`-2` is not a price in USD above zero",
        ),
        (
            vec!["--on-demand-price", "4", "--spot-share", "50"],
            "needs a spot price",
        ),
    ] {
        let mut all = vec!["simulate", "commit", log.as_str(), "--no-progress"];
        all.extend_from_slice(&args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{args:?}");
        assert!(o.stderr.contains(want), "{args:?}: {}", o.stderr);
    }
}

/// nvidia-smi CSV of `gpus` (model, busy hours) sampled every minute for 10 hours from
/// 2026-01-05, without any row in `outage` (minutes).
fn smi_fleet(gpus: &[(&str, u32)], outage: std::ops::Range<i64>) -> String {
    let mut csv = String::from(
        "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], memory.total [MiB], memory.used [MiB], power.draw [W], enforced.power.limit [W]\n",
    );
    let start = jiff::Timestamp::from_second(1_767_571_200).expect("ts");
    for m in (0..=600).filter(|m| !outage.contains(m)) {
        let stamp = (start + jiff::SignedDuration::from_mins(m)).strftime("%Y/%m/%d %H:%M:%S%.3f");
        for (g, (model, busy_hours)) in gpus.iter().enumerate() {
            let util = if m / 60 < i64::from(*busy_hours) {
                80
            } else {
                0
            };
            csv.push_str(&format!(
                "{stamp}, {model}, 00000000:0{g}:00.0, GPU-0000000{g}-0000-4000-8000-000000000000, {g}, {util} %, 3 %, 81920 MiB, 2048 MiB, 250.00 W, 400.00 W\n"
            ));
        }
    }
    csv
}

/// Hours without telemetry are not hours without demand: two GPUs busy whenever they were
/// seen, with the whole fleet silent for hours 3–5, are busy in every observed hour, and the
/// 75 % break-even commits both (padding the three silent hours with zeros made them busy
/// 70 % of the time: one GPU). The study states its coverage.
#[test]
fn commit_sizes_on_observed_hours_and_states_the_coverage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a100 = "NVIDIA A100-SXM4-80GB";
    let file = dir.path().join("node.csv");
    std::fs::write(
        &file,
        smi_fleet(&[(a100, 10), (a100, 10), (a100, 3)], 180..360),
    )
    .expect("write");
    let o = run(&[
        "simulate",
        "commit",
        &file.display().to_string(),
        "--on-demand-price",
        "4",
        "--commit-1y-price",
        "3",
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(s["window_hours"], 7, "hours 0–2 and 6–9 observed");
    assert_eq!(s["span_hours"], 10);
    assert!(
        (f(&s["coverage_pct"]) - 70.0).abs() < 1e-9,
        "{}",
        s["coverage_pct"]
    );
    assert_eq!(
        s["terms"][0]["optimum_committed_gpus"], 2,
        "{}",
        s["terms"][0]
    );
}

/// `--gpu` sizes that model's devices (a mixed fleet's L4s are not A100s), at its catalog
/// prices; given prices, a mixed fleet is warned about; a model the fleet lacks is an error.
#[test]
fn commit_gpu_selects_that_models_devices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a100, l4) = ("NVIDIA A100-SXM4-80GB", "NVIDIA L4");
    let file = dir.path().join("node.csv");
    std::fs::write(
        &file,
        smi_fleet(&[(a100, 10), (a100, 10), (l4, 10), (l4, 10)], 0..0),
    )
    .expect("write");
    let path = file.display().to_string();
    let o = run(&[
        "simulate",
        "commit",
        &path,
        "--gpu",
        "A100-SXM4-80GB",
        "--cloud",
        "aws",
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(s["peak_gpus"], 2, "the two A100s, not the L4s");
    assert!(!o.stderr.contains("GPU models"), "{}", o.stderr);
    let o = run(&[
        "simulate",
        "commit",
        &path,
        "--on-demand-price",
        "4",
        "--commit-1y-price",
        "3",
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("2 GPU models"), "{}", o.stderr);
    let o = run(&[
        "simulate",
        "commit",
        &path,
        "--gpu",
        "H100-SXM5-80GB",
        "--cloud",
        "aws",
        "--no-progress",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("no such device") && o.stderr.contains("A100-SXM4-80GB"),
        "{}",
        o.stderr
    );
}
