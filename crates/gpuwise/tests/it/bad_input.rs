//! The bad-input corpus (`tests/data/bad/`, documented in its README): each file's expected
//! outcome, an error naming the file, or counted skips with the rest of the data kept.

use crate::common::{data, f, report_json, run};

fn skips(r: &serde_json::Value, kind: &str) -> u64 {
    r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(|w| w["kind"] == kind)
        .map(|w| w["count"].as_u64().unwrap_or(0))
        .sum()
}

/// Files with one bad line among 1-minute samples of one GPU: (file, warning kind, count,
/// samples kept, text the warning must contain).
const SKIPS: &[(&str, &str, u64, u64, &str)] = &[
    (
        "truncated-line.csv",
        "wrong_column_count",
        1,
        10,
        "line 7: expected 11 columns, found 4",
    ),
    (
        "wrong-column-count.csv",
        "wrong_column_count",
        1,
        10,
        "line 7: expected 11 columns, found 12",
    ),
    (
        "non-numeric.csv",
        "bad_value",
        1,
        11,
        "`utilization.gpu` is not a number: `abc %`",
    ),
    (
        "nan-inf.csv",
        "invalid_value",
        2,
        12,
        "`utilization` is not a finite number",
    ),
    (
        "out-of-range.csv",
        "invalid_value",
        3,
        13,
        "`utilization` is outside 0–100 %",
    ),
    (
        "out-of-order.csv",
        "out_of_order",
        1,
        10,
        "older than the previous sample",
    ),
    (
        "duplicate-timestamp.csv",
        "duplicate_timestamp",
        1,
        10,
        "repeating the previous timestamp",
    ),
    (
        "mixed-units.csv",
        "bad_value",
        1,
        12,
        "`memory.used` has a unit that does not belong to the column: `20 MHz`",
    ),
    (
        "bad-timestamp.csv",
        "bad_timestamp",
        1,
        10,
        "line 7: `timestamp` is not YYYY/MM/DD HH:MM:SS[.mmm]: `yesterday at noon`",
    ),
    (
        "huge-power.csv",
        "invalid_value",
        1,
        10,
        "line 7: `power` is above 5000, more than any GPU has",
    ),
    (
        "dcgm-far-timestamp.prom",
        "implausible_timestamp",
        1,
        11,
        "line 7: timestamp 9223372036854774784 ms is before 2000 or more than a day in the future",
    ),
    (
        "far-future-line.csv",
        "implausible_timestamp",
        1,
        10,
        "line 7: timestamp 2099-01-05T10:04:30Z is before 2000 or more than a day in the future",
    ),
    (
        "outlier-line.csv",
        "outlier_timestamp",
        1,
        10,
        "line 8: the sample of this device before this one, dated 2026-09-05T10:04:30Z",
    ),
    (
        "outlier-first-line.csv",
        "outlier_timestamp",
        1,
        10,
        "line 3: the sample of this device before this one, dated 2026-09-05T09:59:00Z",
    ),
    (
        "dmon-short-row.txt",
        "wrong_column_count",
        1,
        10,
        "line 6: expected 7 columns, found 5",
    ),
];

#[test]
fn bad_lines_are_counted_skips_and_the_rest_is_kept() {
    for (file, kind, count, samples, text) in SKIPS {
        let r = report_json(&[&data(&format!("bad/{file}"))]);
        assert_eq!(skips(&r, kind), *count, "{file}: {:?}", r["warnings"]);
        let msg = r["warnings"]
            .as_array()
            .expect("w")
            .iter()
            .find(|w| w["kind"] == *kind)
            .expect("warning")["message"]
            .to_string();
        assert!(
            msg.contains(text),
            "{file}: `{msg}` should contain `{text}`"
        );
        assert_eq!(r["ingest"]["samples"], *samples, "{file}: samples kept");
        assert_eq!(r["fleet"]["devices"], 1, "{file}");
    }
}

#[test]
fn an_outlier_never_becomes_the_anchor() {
    // One line from another month (or year) amid a log: the samples after it are kept, and the
    // GPU-hours are those of the ten good minutes (nine intervals), not 0.47 h or months.
    for file in [
        "outlier-line.csv",
        "outlier-first-line.csv",
        "far-future-line.csv",
    ] {
        let r = report_json(&[&data(&format!("bad/{file}"))]);
        assert_eq!(skips(&r, "out_of_order"), 0, "{file}: {:?}", r["warnings"]);
        assert!(
            (f(&r["fleet"]["gpu_hours"]) - 9.0 / 60.0).abs() < 1e-12,
            "{file}: {}",
            r["fleet"]["gpu_hours"]
        );
        assert_eq!(r["window"]["end"], "2026-01-05T10:09:00Z", "{file}");
    }
}

#[test]
fn values_out_of_range_never_become_numbers() {
    // 130 %, -5 % and NaN utilization are dropped, not clamped: the mean stays 50 %.
    for file in ["out-of-range.csv", "nan-inf.csv"] {
        let r = report_json(&[&data(&format!("bad/{file}"))]);
        let d = &r["devices"][0];
        assert!(
            (f(&d["mean_utilization_pct"]) - 50.0).abs() < 1e-9,
            "{file}: {}",
            d["mean_utilization_pct"]
        );
        assert!(
            f(&d["peak_memory_used_mib"]) <= 1000.0,
            "{file}: memory above total dropped"
        );
    }
    // 20 GiB in a MiB column is converted, not misread as 20 MiB.
    let r = report_json(&[&data("bad/mixed-units.csv")]);
    assert!((f(&r["devices"][0]["peak_memory_used_mib"]) - 20_480.0).abs() < 1e-6);
}

#[test]
fn dcgm_malformed_lines_sentinels_and_values() {
    let r = report_json(&[&data("bad/dcgm-malformed.prom")]);
    assert_eq!(skips(&r, "bad_line"), 1);
    assert_eq!(
        skips(&r, "dcgm_blank"),
        1,
        "MEMORY_TEMP is not read; FB_USED's sentinel is dropped by exact match"
    );
    assert_eq!(skips(&r, "bad_value"), 1);
    let d = &r["devices"][0];
    assert_eq!(d["id"], "node-1/GPU-0a0a0a0a-0000-4000-8000-000000000000");
    assert!(
        (f(&d["peak_memory_used_mib"]) - 1000.0).abs() < 1e-9,
        "the sentinel never becomes memory"
    );
}

#[test]
fn dst_fold_is_flagged_and_the_repeat_hour_dropped() {
    let r = report_json(&[
        &data("bad/dst-ambiguous.csv"),
        "--tz",
        "America/New_York",
        "--max-gap",
        "15m",
    ]);
    assert_eq!(
        skips(&r, "dst_ambiguous"),
        12,
        "both passes through 01:00–01:59 are flagged"
    );
    assert_eq!(
        skips(&r, "out_of_order"),
        5,
        "the second pass maps onto the first and goes back in time"
    );
    assert_eq!(skips(&r, "duplicate_timestamp"), 1);
    // Kept: 00:00–01:50 EDT (110 min) and 02:00–02:20 EST (20 min). The dropped repeat hour
    // leaves a 70-minute gap (01:50 EDT → 02:00 EST), which is no data.
    assert!(
        (f(&r["fleet"]["gpu_hours"]) - 130.0 / 60.0).abs() < 1e-9,
        "{}",
        r["fleet"]["gpu_hours"]
    );
    assert_eq!(r["devices"][0]["gaps"], 1);
}

#[test]
fn very_long_line_is_skipped_and_the_rest_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("long.csv");
    let good = std::fs::read_to_string(data("bad/duplicate-timestamp.csv")).expect("fixture");
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines.remove(6); // drop the duplicate: 10 good rows remain
    lines.insert(6, "9".repeat(3 << 20));
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    let r = report_json(&[&path.display().to_string()]);
    assert_eq!(skips(&r, "line_too_long"), 1, "{:?}", r["warnings"]);
    assert!(
        r["warnings"]
            .to_string()
            .contains("long.csv` line 7: record longer than"),
        "{:?}",
        r["warnings"]
    );
    assert_eq!(r["ingest"]["samples"], 10);
}

#[test]
fn long_lines_are_bounded_in_every_reader() {
    // A 3 MiB line in a DCGM scrape and in a generic CSV: skipped and named, the rest kept.
    let dir = tempfile::tempdir().expect("tempdir");
    let prom = dir.path().join("scrape.prom");
    let good = std::fs::read_to_string(data("bad/dcgm-far-timestamp.prom")).expect("fixture");
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines[6] = format!(
        "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{}\"}} 1 1",
        "x".repeat(3 << 20)
    );
    std::fs::write(&prom, lines.join("\n") + "\n").expect("write");
    let r = report_json(&[&prom.display().to_string()]);
    assert_eq!(skips(&r, "line_too_long"), 1, "{:?}", r["warnings"]);
    assert!(
        r["warnings"].to_string().contains("scrape.prom` line 7"),
        "{}",
        r["warnings"]
    );
    assert_eq!(r["ingest"]["samples"], 11);
    let csv = dir.path().join("export.csv");
    let mut text = String::from("ts,gpu,util\n");
    for i in 0..11 {
        text.push_str(&format!("{},g0,50\n", 1_767_607_200 + i * 60));
        if i == 4 {
            text.push_str(&format!(
                "{},g0,{}\n",
                1_767_607_200 + 270,
                "7".repeat(3 << 20)
            ));
        }
    }
    std::fs::write(&csv, text).expect("write");
    let r = report_json(&[
        &csv.display().to_string(),
        "--map",
        "timestamp=ts,device=gpu,util=util",
    ]);
    assert_eq!(skips(&r, "line_too_long"), 1, "{:?}", r["warnings"]);
    assert!(
        r["warnings"].to_string().contains("export.csv` line 7"),
        "{}",
        r["warnings"]
    );
    assert_eq!(r["ingest"]["samples"], 11);
}

/// A generic export of `\r\n` lines, begun and broken by empty lines, with a cell quoted
/// across lines, long enough to be read in several blocks: each skip names the line its row
/// was written on (counted here as the text is written).
#[test]
fn generic_csv_skips_name_the_line_the_row_is_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("export.csv");
    let mut text = String::from("\r\nts,gpu,util,note\r\n");
    let mut line = 3;
    let mut planted = Vec::new();
    for i in 0..60_000u64 {
        let ts = 1_767_607_200 + i * 60;
        match i {
            10 => {
                text.push_str("\r\n\r\n");
                line += 2;
                planted.push(("bad_value", line));
                text.push_str(&format!("{ts},g0,lots,\r\n"));
            }
            20 => {
                text.push_str(&format!("{ts},g0,50,\"two\r\nlines\"\r\n"));
                line += 1;
            }
            // Past the first block of a mebibyte.
            40_000 => {
                text.push_str("\r\n");
                line += 1;
                planted.push(("bad_timestamp", line));
                text.push_str("yesterday,g0,50,\r\n");
            }
            _ => text.push_str(&format!("{ts},g{},50,\r\n", i % 4)),
        }
        line += 1;
    }
    std::fs::write(&csv, text).expect("write");
    let r = report_json(&[
        &csv.display().to_string(),
        "--map",
        "timestamp=ts,device=gpu,util=util",
    ]);
    for (kind, line) in planted {
        assert_eq!(skips(&r, kind), 1, "{kind}: {:?}", r["warnings"]);
        assert!(
            r["warnings"]
                .to_string()
                .contains(&format!("export.csv` line {line}:")),
            "{kind} on line {line}: {}",
            r["warnings"]
        );
    }
    assert_eq!(r["ingest"]["samples"], 59_999);
}

#[test]
fn unreadable_inputs_are_errors_naming_the_file() {
    for (file, text) in [
        ("binary-garbage.bin", "cannot tell the format"),
        ("empty.csv", "empty.csv`: is empty"),
        ("header-only.csv", "no samples in 1 input(s)"),
        // A per-process log (`--query-compute-apps`): looks like nvidia-smi, measures nothing.
        ("compute-apps.csv", "nothing to measure"),
        // Every sample dated 2031: a clock far in the future, not data.
        ("future-timestamps.csv", "implausible_timestamp"),
    ] {
        let o = run(&["report", &data(&format!("bad/{file}")), "--no-progress"]);
        assert_eq!(o.code, 2, "{file}");
        assert!(o.stderr.contains(text), "{file}: {}", o.stderr);
        assert!(
            o.stdout.is_empty(),
            "{file}: no data on stdout after an error"
        );
    }
}

#[test]
fn strict_turns_the_first_skip_into_an_error() {
    let o = run(&[
        "report",
        &data("bad/non-numeric.csv"),
        "--strict",
        "--no-progress",
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("non-numeric.csv` line 7: `utilization.gpu` is not a number"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--strict"), "{}", o.stderr);
}

/// Run the binary with `args` under an address-space limit of `kib` KiB (`ulimit -v`).
fn limited(kib: u64, args: &[&str]) -> std::process::Output {
    let bin = crate::common::cmd().get_program().to_owned();
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "ulimit -v {kib}; exec '{}' {}",
        bin.to_string_lossy(),
        quoted.join(" ")
    );
    std::process::Command::new("bash")
        .args(["-c", &script])
        .env("GPUWISE_NOW", crate::common::NOW)
        .env("NO_COLOR", "1")
        .output()
        .expect("bash runs")
}

/// A bill holding one 1 GiB line (a 30 KB `.zst`) is read under a 400 MB address-space limit:
/// the line is a counted skip (it was allocated whole and aborted before).
#[test]
fn a_one_gib_bill_line_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bill = dir.path().join("bill.csv.zst");
    let file = std::fs::File::create(&bill).expect("create");
    let mut z = zstd::stream::write::Encoder::new(file, 1).expect("zstd");
    let head = "BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd\n";
    std::io::Write::write_all(&mut z, head.as_bytes()).expect("write");
    let chunk = vec![b'7'; 1 << 20];
    for _ in 0..1024 {
        std::io::Write::write_all(&mut z, &chunk).expect("write");
    }
    z.finish().expect("finish");
    let o = limited(
        400_000,
        &[
            "reconcile",
            "--bill",
            &bill.display().to_string(),
            &data("smi/two-gpus.csv"),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1 record_too_long, e.g. line 2: a row longer than 1048576 bytes"),
        "{err}"
    );
}

/// Under any memory limit the binary exits 0, or 2 with a message saying memory ran out:
/// never an abort (exit 134) or Rust's bare "memory allocation of N bytes failed".
#[test]
fn a_memory_limit_is_an_error_never_an_abort() {
    let (mut ran_out, mut passed) = (false, false);
    let mut kib = 8_000u64;
    while kib < 1_000_000 && !passed {
        let o = limited(
            kib,
            &["report", &data("smi/two-gpus.csv"), "--format", "json"],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("memory allocation of") && !err.contains("panicked"),
            "{kib} KiB: {err}"
        );
        let signal = std::os::unix::process::ExitStatusExt::signal(&o.status);
        match (o.status.code(), signal) {
            (Some(0), _) => passed = true,
            (Some(2), _) if err.contains("error: out of memory: an allocation of") => {
                ran_out = true;
            }
            (Some(2), _) if err.contains("error: cannot start worker threads") => {}
            // Too little to load the binary at all: the loader says so, or the process
            // cannot map its first stack page (SIGSEGV before `main`, nothing printed).
            (Some(127), _) => {}
            (None, Some(11)) if err.is_empty() => {}
            other => panic!("{kib} KiB: exit {other:?}: {err}"),
        }
        // Steps of a tenth: the band where allocations fail (between the threads starting and
        // the run passing) is a few MB wide, and a coarser step jumped over it once the binary
        // grew.
        kib = kib * 11 / 10;
    }
    assert!(ran_out && passed, "ran out {ran_out}, passed {passed}");
}

/// Two GPUs whose captures share a masked UUID become one device; the tell is memory no GPU
/// of that model has (140 GiB on an 80 GB H100). The report says so instead of counting one.
#[test]
fn a_device_with_more_memory_than_its_model_is_flagged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("merged.csv");
    let mut text = String::from(
        "timestamp, name, pci.bus_id, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n",
    );
    for m in 0..30 {
        text.push_str(&format!(
            "2026/01/05 10:{m:02}:00.000, NVIDIA H100 80GB HBM3, 00000000:01:00.0, GPU-XXXXXXXX, 50 %, 1000 MiB, 143360 MiB\n"
        ));
    }
    std::fs::write(&log, text).expect("write");
    let r = report_json(&[&log.display().to_string()]);
    assert_eq!(skips(&r, "memory_exceeds_model"), 1, "{:?}", r["warnings"]);
    assert!(
        r["warnings"]
            .to_string()
            .contains("reports 140 GiB, a H100-SXM5-80GB has 80 GB"),
        "{}",
        r["warnings"]
    );
    // The same GPU with its own memory raises nothing.
    let own = dir.path().join("own.csv");
    std::fs::write(
        &own,
        std::fs::read_to_string(&log)
            .expect("read")
            .replace("143360", "81559"),
    )
    .expect("write");
    let r = report_json(&[&own.display().to_string()]);
    assert_eq!(skips(&r, "memory_exceeds_model"), 0, "{:?}", r["warnings"]);
}
