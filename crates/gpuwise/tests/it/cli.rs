//! The command line as a user meets it: output formats, snapshots, errors, exit codes.

use crate::common::{data, f, repo, report_json, run, run_in};

#[test]
fn two_gpu_log_figures() {
    // GPU 0: 80 % for 30 minutes. GPU 1: 0 % holding 2 GiB for 30 minutes (a held-idle episode).
    let r = report_json(&[&data("smi/two-gpus.csv")]);
    assert_eq!(r["schema"], "gpuwise.report/v1");
    assert!((f(&r["fleet"]["gpu_hours"]) - 1.0).abs() < 1e-9);
    assert!((f(&r["fleet"]["idle_gpu_hours"]) - 0.5).abs() < 1e-9);
    assert!((f(&r["fleet"]["mean_utilization_pct"]) - 40.0).abs() < 1e-9);
    let cost = 0.5 * 3.430_881_25 + 0.5 * 0.526;
    assert!((f(&r["fleet"]["cost_usd"]) - cost).abs() < 1e-9);
    assert!((f(&r["fleet"]["idle_cost_usd"]) - 0.5 * 0.526).abs() < 1e-9);
    assert!((f(&r["fleet"]["held_idle_cost_usd"]) - 0.5 * 0.526).abs() < 1e-9);
    let t4 = &r["devices"][0];
    assert_eq!(t4["model"], "T4");
    assert_eq!(t4["class"], "held_idle");
    assert_eq!(t4["host"], "two-gpus", "host from the file name stem");
    assert!(
        t4["price_source"]
            .as_str()
            .is_some_and(|s| s.starts_with("catalog: aws g4dn.xlarge us-east-1 on-demand")),
        "{}",
        t4["price_source"]
    );
}

fn snapshot_env(args: &[&str]) -> String {
    let o = run_in(args, &repo().join("tests/data"));
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.stdout
}

#[test]
fn table_snapshot() {
    insta::assert_snapshot!(snapshot_env(&[
        "report",
        "smi/two-gpus.csv",
        "--no-progress"
    ]));
}

#[test]
fn markdown_snapshot() {
    insta::assert_snapshot!(snapshot_env(&[
        "report",
        "smi/two-gpus.csv",
        "--format",
        "markdown",
        "--no-progress"
    ]));
}

#[test]
fn csv_snapshot() {
    insta::assert_snapshot!(snapshot_env(&[
        "report",
        "smi/two-gpus.csv",
        "--format",
        "csv",
        "--no-progress"
    ]));
}

#[test]
fn html_is_self_contained_with_charts() {
    let html = snapshot_env(&[
        "report",
        "smi/two-gpus.csv",
        "--format",
        "html",
        "--no-progress",
    ]);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg").count(),
        4,
        "timeline, heatmap, cost by group, distribution"
    );
    for forbidden in ["<script", "http://", "https://", "<link"] {
        let hits: Vec<&str> = html
            .match_indices(forbidden)
            .map(|(i, _)| &html[i..(i + 60).min(html.len())])
            .filter(|s| !s.contains("www.w3.org/2000/svg"))
            .collect();
        assert!(hits.is_empty(), "the report must work offline: {hits:?}");
    }
    assert!(html.contains("Held-idle cost"));
}

#[test]
fn generic_csv_with_a_column_map() {
    let r = report_json(&[
        &data("csv/export.csv"),
        "--map",
        "timestamp=ts,device=gpu_id,host=host,model=model,util=value,mem_used_mib=mem",
    ]);
    assert_eq!(r["fleet"]["devices"], 2);
    let busy = crate::common::device(&r, "exporter-node/gpu-0");
    assert_eq!(busy["model"], "L4");
    assert!((f(&busy["mean_utilization_pct"]) - 85.0).abs() < 1e-9);
    let idle = crate::common::device(&r, "exporter-node/gpu-1");
    assert!((f(&idle["idle_hours"]) - 18.0 / 60.0).abs() < 1e-9);
}

#[test]
fn group_by_model_and_team_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let teams = dir.path().join("teams.toml");
    std::fs::write(&teams, "[hosts]\n\"two-*\" = \"vision\"\n").expect("write");
    let r = report_json(&[
        &data("smi/two-gpus.csv"),
        "--group-by",
        "team",
        "--teams",
        &teams.display().to_string(),
    ]);
    assert_eq!(r["groups"][0]["key"], "vision");
    assert_eq!(r["groups"][0]["devices"], 2);
    let r = report_json(&[&data("smi/two-gpus.csv"), "--group-by", "model"]);
    let keys: Vec<&str> = r["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["key"].as_str())
        .collect();
    assert_eq!(keys, vec!["A100-SXM4-80GB", "T4"]);
}

#[test]
fn price_file_overrides_reference_prices() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prices = dir.path().join("prices.toml");
    std::fs::write(&prices, "[[rule]]\nmodel = \"A100-SXM4-80GB\"\nusd_per_instance_hour = 16.0\ngpus_per_instance = 8\npricing = \"1y\"\n").expect("write");
    let r = report_json(&[
        &data("smi/two-gpus.csv"),
        "--prices",
        &prices.display().to_string(),
    ]);
    let a100 = crate::common::device(&r, "two-gpus/GPU-0a0a0a0a-0000-4000-8000-000000000000");
    assert!((f(&a100["usd_per_gpu_hour"]) - 2.0).abs() < 1e-12);
    assert!(
        a100["price_source"]
            .as_str()
            .is_some_and(|s| s.ends_with("prices.toml rule 1, 1y"))
    );
}

#[test]
fn config_file_and_env_precedence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gpuwise.toml");
    std::fs::write(&cfg, "format = \"csv\"\nidle_threshold_pct = 1.0\n").expect("write");
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        "--config",
        &cfg.display().to_string(),
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("id,host,"), "config picks csv");
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        "--config",
        &cfg.display().to_string(),
        "--format",
        "json",
        "--no-progress",
    ]);
    assert!(
        o.stdout.trim_start().starts_with('{'),
        "the flag wins over the config"
    );
    std::fs::write(&cfg, "colour = \"blue\"\n").expect("write");
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        "--config",
        &cfg.display().to_string(),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("unknown field `colour`"), "{}", o.stderr);
}

#[test]
fn budget_exit_code() {
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        "--max-idle-share",
        "10",
        "--no-progress",
    ]);
    assert_eq!(o.code, 1, "50 % idle is above a 10 % budget");
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        "--max-idle-share",
        "60",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0);
}

#[test]
fn usage_errors() {
    for (args, text) in [
        (
            vec!["report", "no/such/file.csv"],
            "cannot read `no/such/file.csv`",
        ),
        (
            vec!["report", "nothing-*.csv"],
            "`nothing-*.csv` matches no file",
        ),
        (
            vec!["report", "tests/data/smi/two-gpus.csv", "--format", "pdf"],
            "--format: `pdf` is not one of",
        ),
        (
            vec![
                "report",
                "tests/data/smi/two-gpus.csv",
                "--tz",
                "Mars/Olympus",
            ],
            "`Mars/Olympus` is not a known time zone",
        ),
        (
            vec![
                "report",
                "tests/data/smi/two-gpus.csv",
                "--group-by",
                "planet",
            ],
            "--group-by: `planet`",
        ),
        (
            vec![
                "report",
                "tests/data/smi/two-gpus.csv",
                "--min-idle",
                "soon",
            ],
            "--min-idle: `soon` is not a duration",
        ),
        (
            vec![
                "report",
                "tests/data/smi/two-gpus.csv",
                "--map",
                "timestamp=ts",
            ],
            "at least one reading",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.code, 2, "{args:?}");
        assert!(o.stderr.contains(text), "{args:?}: {}", o.stderr);
    }
}

#[test]
fn help_has_examples() {
    let o = run(&["report", "--help"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("Examples:") && o.stdout.contains("--input-format"));
    for cmd in ["allocate", "reconcile", "check", "advise", "record"] {
        let o = run(&[cmd, "--help"]);
        assert_eq!(o.code, 0, "{cmd}");
        assert!(
            o.stdout.contains("Examples:\n  gpuwise "),
            "{cmd}: {}",
            o.stdout
        );
    }
}

#[test]
fn stdin_is_read_with_dash() {
    use std::io::Write as _;
    let mut child = crate::common::cmd()
        .args([
            "report",
            "-",
            "--host",
            "piped",
            "--format",
            "json",
            "--no-progress",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let input = std::fs::read(data("smi/two-gpus.csv")).expect("fixture");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&input)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["devices"][0]["host"], "piped");
}

#[test]
fn unknown_clouds_and_regions_are_errors_listing_the_valid_ones() {
    let smi = crate::common::data("smi/two-gpus.csv");
    for (args, needle) in [
        (
            vec!["catalog", "instances", "--cloud", "oracle"],
            "`oracle` is not a cloud in the catalog (clouds: aws, azure, gcp, lambda, vast)",
        ),
        (
            vec![
                "report",
                smi.as_str(),
                "--cloud",
                "gcp",
                "--region",
                "mars-1",
            ],
            "`mars-1` is not a region of gcp in the catalog (regions: asia-east1,",
        ),
        (
            vec![
                "plan",
                "--model",
                "llama-3.1-8b",
                "--mode",
                "infer",
                "--cloud",
                "oracle",
            ],
            "`oracle` is not a cloud in the catalog",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.code, 2, "{args:?}");
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
    }
}

#[test]
fn printed_hints_run_as_printed() {
    // Started by a path (as `cargo run` does), the demo's hint names that path, not a
    // `gpuwise` that may not be on PATH.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("demo");
    let o = run(&["demo", "--out", &out.display().to_string()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The demo says how old its prices are once, and does not warn about them.
    assert!(!o.stdout.contains("stale_price"), "{}", o.stdout);
    assert_eq!(
        o.stderr
            .matches("Prices: the built-in catalog's, as of")
            .count(),
        1,
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("saves $"), "{}", o.stderr);
    assert!(
        o.stderr
            .lines()
            .any(|l| l.starts_with("Advice:") && l.contains(',')),
        "thousands separators: {}",
        o.stderr
    );
    let bin = env!("CARGO_BIN_EXE_gpuwise");
    let hint = o
        .stderr
        .lines()
        .find(|l| l.starts_with("Run it yourself: "))
        .expect("a hint");
    let cmd = hint.trim_start_matches("Run it yourself: ");
    // The tests run in the repository: the path is shown relative to it.
    let program = cmd.split_whitespace().next().expect("a program");
    assert_eq!(
        std::fs::canonicalize(repo().join(program)).expect("the hint's program exists"),
        std::fs::canonicalize(bin).expect("the binary"),
        "{cmd}"
    );
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let mut all = args.clone();
    all.extend_from_slice(&["--format", "json", "--no-progress"]);
    let again = run(&all);
    assert_eq!(again.code, 0, "the hint runs: {}", again.stderr);
    // So does the allocation hint, and its chargeback sums to the fleet's cost.
    let alloc = o
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("Who spent what: "))
        .expect("an allocation hint");
    let mut all: Vec<&str> = alloc.split_whitespace().skip(1).collect();
    all.extend_from_slice(&["--format", "json", "--no-progress"]);
    let a = run(&all);
    assert_eq!(a.code, 0, "the allocation hint runs: {}", a.stderr);
    let a: serde_json::Value = serde_json::from_str(&a.stdout).expect("json");
    let month = &a["months"][0];
    let charged: f64 = month["teams"]
        .as_array()
        .expect("teams")
        .iter()
        .map(|t| t["charged_usd"].as_f64().expect("charged"))
        .sum();
    let cost = month["fleet"]["cost_usd"].as_f64().expect("cost");
    assert!((charged - cost).abs() < 1e-6 * cost, "{charged} vs {cost}");
}

#[test]
fn unpriced_devices_are_never_zero_dollars() {
    let Some(s) = crate::common::shared() else {
        return;
    };
    let dmon = s.join("fixtures/nvidia-smi/dmon-s-mutc-o-TD__2024__thirdparty.txt");
    let r = report_json(&[&data("smi/two-gpus.csv"), &dmon.display().to_string()]);
    let devices = r["devices"].as_array().expect("devices");
    let unpriced: Vec<_> = devices
        .iter()
        .filter(|d| d["price_source"].is_null())
        .collect();
    assert_eq!(unpriced.len(), 1);
    for k in ["cost_usd", "idle_cost_usd", "held_idle_cost_usd"] {
        assert!(unpriced[0][k].is_null(), "{k}: {}", unpriced[0][k]);
    }
    assert_eq!(r["fleet"]["unpriced_devices"], 1);
    let group = r["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["unpriced_devices"] == 1)
        .expect("the unpriced group");
    assert_eq!(group["devices"], 1);
    // Cost per GPU-hour is over priced hours only.
    let priced_hours: f64 = devices
        .iter()
        .filter(|d| !d["cost_usd"].is_null())
        .map(|d| f(&d["gpu_hours"]))
        .sum();
    let kpi = f(&r["fleet"]["kpis"]["cost_per_gpu_hour_usd"]);
    assert!(
        (kpi - f(&r["fleet"]["cost_usd"]) / priced_hours).abs() < 1e-9,
        "{kpi}"
    );
    // Tables say `unpriced`, never `$0.00`, for that device and its group.
    let o = run(&[
        "report",
        &data("smi/two-gpus.csv"),
        &dmon.display().to_string(),
    ]);
    assert!(o.stdout.contains("unpriced  unpriced"), "{}", o.stdout);
    assert!(o.stdout.contains("(1 unpriced)"), "{}", o.stdout);
}

#[test]
fn big_outputs_are_announced_and_need_yes_on_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = dir.path().join("small");
    let o = run(&[
        "generate",
        "--out",
        &small.display().to_string(),
        "--gpus",
        "4",
        "--days",
        "1",
        "--format",
        "nvidia-smi",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(": about "),
        "the size is said first: {}",
        o.stderr
    );
    // On a terminal (a pseudo-terminal from `script`), 10 GB needs --yes; nothing is written.
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("skipping the terminal half: `script` (util-linux) is not installed");
        return;
    }
    let big = dir.path().join("big");
    let cmd = format!(
        "'{}' generate --out '{}' --gpus 200 --days 7 --format dcgm",
        env!("CARGO_BIN_EXE_gpuwise"),
        big.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("NO_COLOR", "1")
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("about 10.1 GB: pass --yes"), "{text}");
    assert!(!big.exists(), "nothing written");
}

#[test]
fn tables_follow_columns_and_never_break_a_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = dir.path().join("northamerica-northeast1-gpu-node-0042.csv");
    std::fs::copy(data("smi/two-gpus.csv"), &long).expect("copy");
    for columns in ["60", "200"] {
        let o = crate::common::cmd()
            .args(["report", &long.display().to_string(), "--no-progress"])
            .env("COLUMNS", columns)
            .output()
            .expect("runs");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.lines()
                .any(|l| l.contains("northamerica-northeast1-gpu-node-0042/gpu0")),
            "COLUMNS={columns}: the device name is whole on one line:\n{out}"
        );
        // Text with spaces wraps to the width asked: at 200 columns the settings fit on a line.
        let longest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        if columns == "200" {
            assert!(longest > 100, "{longest}");
        }
    }
}

#[test]
fn one_meaning_per_flag_and_help_under_headings() {
    let o = run(&["report", "--help"]);
    for heading in [
        "Prometheus:",
        "Reading inputs:",
        "Catalog and prices:",
        "Grouping:",
        "Thresholds:",
        "Output:",
    ] {
        assert!(o.stdout.contains(heading), "{heading}\n{}", o.stdout);
    }
    // In plan, tokens and the Hugging Face config have their own names; -o and --config mean
    // the output file and the gpuwise config file, as everywhere.
    let o = run(&["plan", "--help"]);
    assert!(o.stdout.contains("--hf-config <PATH>"), "{}", o.stdout);
    assert!(o.stdout.contains("--output-tokens <N>"), "{}", o.stdout);
    assert!(o.stdout.contains("-o, --output <FILE>"), "{}", o.stdout);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("plan.json");
    let o = run(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "L4",
        "--output-tokens",
        "128",
        "--format",
        "json",
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("json");
    assert_eq!(v["setup"]["workload"]["output"], 128);
}

#[test]
fn price_fallbacks_are_stated_at_the_top() {
    let smi = data("smi/two-gpus.csv");
    let o = run(&[
        "report",
        &smi,
        "--cloud",
        "gcp",
        "--region",
        "us-west2",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let top: Vec<&str> = o.stdout.lines().take(4).collect();
    assert!(
        top.iter()
            .any(|l| l.contains("Prices") && l.contains("not offered in us-west2")),
        "{}",
        o.stdout
    );
    let r = report_json(&[&smi, "--cloud", "aws", "--pricing", "spot"]);
    let fb = r["fleet"]["price_fallbacks"].as_array().expect("fallbacks");
    assert_eq!(fb.len(), 2, "{fb:?}");
    assert!(fb.iter().all(|p| {
        p["note"]
            .as_str()
            .is_some_and(|n| n.contains("on-demand used"))
    }));
    let o = run(&[
        "report",
        &smi,
        "--cloud",
        "aws",
        "--pricing",
        "spot",
        "--format",
        "html",
    ]);
    assert!(
        o.stdout.contains("id=\"price-fallbacks\""),
        "html states them too"
    );
}

/// `record` on a machine without an NVIDIA driver stops at once with exit 2, names the library,
/// and leaves nothing behind (no output directory, no empty log).
#[test]
fn record_without_a_driver_exits_2_and_writes_nothing() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is expected to run without an NVIDIA driver"
        );
        eprintln!("skipped: this machine has an NVIDIA driver (bench/record-on-gpu.sh checks it)");
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("logs");
    let started = std::time::Instant::now();
    let o = run(&[
        "record",
        "--out",
        &out.display().to_string(),
        "--duration",
        "10s",
        "--prometheus-listen",
        "0",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("libnvidia-ml.so.1"), "{}", o.stderr);
    assert!(o.stdout.is_empty());
    assert!(!out.exists(), "nothing may be created without a driver");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn record_refuses_bad_settings_before_looking_for_a_driver() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("logs").display().to_string();
    for (args, says) in [
        (
            vec!["--interval", "0s"],
            "--interval: `0s` must be longer than zero",
        ),
        (vec!["--host", "../etc"], "cannot name a file"),
        (vec!["--rotate-mib", "0"], "--rotate-mib must be at least 1"),
        (
            vec!["--prometheus-listen", "localhost"],
            "neither a port nor an address",
        ),
    ] {
        let mut a = vec!["record", "--out", out.as_str()];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.code, 2, "{}", o.stderr);
        assert!(o.stderr.contains(says), "{}", o.stderr);
        assert!(!std::path::Path::new(&out).exists());
    }
}

/// `--help` never prints a credential from the environment: clap shows env values by
/// default, and `check --help` in a CI log would have shown the Slack webhook.
#[test]
fn help_hides_credentials_from_the_environment() {
    for (cmd, var, secret) in [
        (
            "check",
            "GPUWISE_NOTIFY_URL",
            "https://hooks.slack.com/services/T0/B0/s3cretHOOK",
        ),
        (
            "report",
            "GPUWISE_PROMETHEUS",
            "https://admin:s3cretPASS@prom.example",
        ),
        (
            "serve",
            "GPUWISE_PROMETHEUS",
            "https://admin:s3cretPASS@prom.example",
        ),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_gpuwise"))
            .args([cmd, "--help"])
            .env(var, secret)
            .output()
            .expect("runs");
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{cmd}: {text}");
        assert!(text.contains(var), "{cmd}: the variable is still named");
        assert!(
            !text.contains("s3cret"),
            "{cmd} --help printed {var}'s value"
        );
    }
}

/// `record` keeps `serve`'s rule: a /metrics listener others can reach needs a token, refused
/// before the driver is looked for.
#[test]
fn record_refuses_a_tokenless_listener_off_loopback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("logs");
    let o = run(&[
        "record",
        "--out",
        &out.display().to_string(),
        "--prometheus-listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("not a loopback address") && o.stderr.contains("--token-env"),
        "{}",
        o.stderr
    );
    assert!(!out.exists(), "nothing written");
}

/// This session's new knobs refuse bad values by name: `--path`, `GPUWISE_CLOCK_RATE`, and
/// `record --token-env` naming an unset variable.
#[test]
fn new_knobs_refuse_bad_values_by_name() {
    let log = crate::common::data("smi/two-gpus.csv");
    let o = run(&[
        "report",
        "--prometheus",
        "http://127.0.0.1:9",
        "--path",
        "sideways",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("--path") && o.stderr.contains("sideways"),
        "{}",
        o.stderr
    );
    for rate in ["fast", "-1", "0", "NaN"] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_gpuwise"))
            .args(["report", log.as_str(), "--no-progress"])
            .env("GPUWISE_NOW", "2026-01-06T00:00:00Z")
            .env("GPUWISE_CLOCK_RATE", rate)
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{rate}: {err}");
        assert!(err.contains("GPUWISE_CLOCK_RATE"), "{rate}: {err}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(&[
        "record",
        "--out",
        &dir.path().join("logs").display().to_string(),
        "--prometheus-listen",
        "9400",
        "--token-env",
        "GPUWISE_TEST_SURELY_UNSET",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("GPUWISE_TEST_SURELY_UNSET is not set"),
        "{}",
        o.stderr
    );
}

/// A bad value in the config file is reported with the file and its key (it was reported as
/// the flag, `--group-by: tem`, and the file was not named); the flag's own is the flag's.
#[test]
fn a_bad_setting_names_where_it_came_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gpuwise.toml");
    std::fs::write(&cfg, "group_by = \"tem\"\nmax_gap = \"5\"\n").expect("config");
    let c = cfg.display().to_string();
    let log = crate::common::data("smi/two-gpus.csv");
    let o = run(&["report", &log, "--config", &c]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains(&format!("`{c}` max_gap: `5` has no unit")),
        "{}",
        o.stderr
    );
    let o = run(&["report", &log, "--config", &c, "--max-gap", "5m"]);
    assert!(
        o.stderr
            .contains(&format!("`{c}` group_by: `tem` is not one of")),
        "{}",
        o.stderr
    );
    let o = run(&[
        "report",
        &log,
        "--config",
        &c,
        "--max-gap",
        "5m",
        "--group-by",
        "tem",
    ]);
    assert!(
        o.stderr.contains("error: --group-by: `tem`"),
        "{}",
        o.stderr
    );
}

/// A window with no data says the window and the data's span (it said "no samples in 1
/// input(s)"); a bad `--since` is reported as `--since` (it was "--since: --start …").
#[test]
fn an_empty_window_says_where_the_data_is() {
    let log = data("smi/two-gpus.csv");
    let o = run(&["report", &log, "--since", "2027-01-01"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("no samples in 1 input(s) from 2027-01-01T00:00:00Z; the data runs from 2026-01-05T10:00:00Z to 2026-01-05T10:30:00Z"),
        "{}",
        o.stderr
    );
    let o = run(&["report", &log, "--since", "2026-13-01"]);
    assert!(
        o.stderr
            .contains("error: --since: `2026-13-01` is not a time"),
        "{}",
        o.stderr
    );
}

/// Prices past the staleness limit are said the first time each day (table and stderr), not on
/// every run; JSON always carries them; the next day says it again.
#[test]
fn stale_prices_are_said_once_a_day() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet").display().to_string();
    let state = dir.path().join("state");
    let o = crate::common::cmd()
        .args(["generate", "--out", &fleet, "--gpus", "2", "--days", "1"])
        .args(["--interval", "10m", "--start", "2026-11-29"])
        .output()
        .expect("generate");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = |now: &str, args: &[&str]| {
        let o = crate::common::cmd()
            .env("XDG_STATE_HOME", &state)
            .env("GPUWISE_NOW", now)
            .args(args)
            .output()
            .expect("runs");
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let report = ["report", fleet.as_str(), "--no-progress"];
    let day1 = "2026-12-01T09:00:00Z";
    assert!(run(day1, &report).0.contains("stale_price"));
    assert!(
        !run("2026-12-01T18:00:00Z", &report)
            .0
            .contains("stale_price")
    );
    let json = [&report[..], &["--format", "json"]].concat();
    assert!(run(day1, &json).0.contains("\"stale_price\""));
    // Markdown (and HTML, or any --output file) is read later by others: always said.
    let md = [&report[..], &["--format", "markdown"]].concat();
    assert!(run(day1, &md).0.contains("stale_price"));
    assert!(
        run("2026-12-02T09:00:00Z", &report)
            .0
            .contains("stale_price")
    );
    let price = ["catalog", "price", "H100-SXM5-80GB"];
    assert!(run(day1, &price).1.contains("older than 180 days"));
    assert!(!run(day1, &price).1.contains("older than"));
}
