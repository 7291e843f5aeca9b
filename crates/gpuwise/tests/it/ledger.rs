//! The ledger on planted truth: a generated fleet and its FOCUS bill with planted
//! disagreements (reconciliation must find exactly those, from CSV, gzip and Parquet alike),
//! allocation by team against the generator's own per-device truth (with a device moving team
//! on a date), chargeback totals, the forecast's formula, unit costs, the FOCUS 1.2 export,
//! policy checks and the notifier against a receiver on loopback; the real FOCUS sample.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::common::{close, data, f, run, shared};

struct Fleet {
    _dir: tempfile::TempDir,
    root: PathBuf,
    telemetry: PathBuf,
    truth: serde_json::Value,
}

impl Fleet {
    fn p(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }

    fn telemetry(&self) -> String {
        self.telemetry.display().to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.root.join(name), text).expect("write");
        self.p(name)
    }

    /// Σ of a truth field over the devices `pick` selects.
    fn sum(&self, field: &str, pick: impl Fn(&serde_json::Value) -> bool) -> f64 {
        self.truth["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .filter(|d| pick(d))
            .map(|d| f(&d[field]))
            .sum()
    }
}

/// GPUs of the test fleet: every host template, notebooks included.
const GPUS: usize = 40;

/// A 40-GPU, 7-day DCGM fleet (labels carry namespaces and pods) with its bill.
fn fleet() -> Fleet {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let telemetry = root.join("fleet");
    let g = run(&[
        "generate",
        "--out",
        &telemetry.display().to_string(),
        "--gpus",
        &GPUS.to_string(),
        "--days",
        "7",
        "--interval",
        "2m",
        "--format",
        "dcgm",
        "--seed",
        "11",
        "--bill",
        &root.join("bill.csv").display().to_string(),
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    let truth: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(telemetry.join("truth.json")).expect("truth"),
    )
    .expect("json");
    std::fs::remove_file(telemetry.join("truth.json")).expect("rm truth");
    Fleet {
        _dir: dir,
        root,
        telemetry,
        truth,
    }
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--format", "json", "--no-progress"]);
    let o = run(&all);
    assert_eq!(o.code, 0, "gpuwise {all:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

fn names(v: &serde_json::Value, key: &str) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x[key].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn reconcile_finds_exactly_the_planted_disagreements_in_csv_gzip_and_parquet() {
    let fl = fleet();
    let plan: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fl.root.join("bill.csv.truth.json")).expect("plan"),
    )
    .expect("json");
    let r = json(&["reconcile", "--bill", &fl.p("bill.csv"), &fl.telemetry()]);
    assert_eq!(r["schema"], "gpuwise.reconcile/v1");
    // Unmonitored: exactly the planted resource, at GPUs × hours.
    let ghost = &plan["unmonitored"][0];
    assert_eq!(
        names(&r["unmonitored"], "resource_name"),
        vec![ghost[0].as_str().expect("name")]
    );
    let ghost_h = f(&ghost[1]) * f(&ghost[2]);
    assert!(close(
        f(&r["unmonitored"][0]["billed_gpu_hours"]),
        ghost_h,
        1e-9
    ));
    assert!(close(
        f(&r["unmonitored"][0]["billed_cost_usd"]),
        ghost_h * 2.5,
        1e-9
    ));
    // Unbilled: exactly the planted host, with the GPU-hours the generator says it ran.
    let unbilled = plan["unbilled"][0].as_str().expect("host");
    assert_eq!(names(&r["unbilled"], "host"), vec![unbilled]);
    let seen = fl.sum("gpu_hours", |d| d["host"] == unbilled);
    assert!(
        close(f(&r["unbilled"][0]["observed_gpu_hours"]), seen, 1e-3),
        "{seen}"
    );
    // Billed, not reporting: exactly the over-billed host; the gap is the extra hours × GPUs
    // (less than a sample interval more: the last sample stands for nothing).
    let (host, extra) = (
        plan["overbilled"][0][0].as_str().expect("host"),
        f(&plan["overbilled"][0][1]),
    );
    let gpus = fl.sum("gpu_hours", |d| d["host"] == host) / (7.0 * 24.0);
    assert_eq!(names(&r["billed_not_reporting"], "host"), vec![host]);
    let gap = &r["billed_not_reporting"][0];
    assert!(
        (f(&gap["gap_hours"]) - extra * gpus.round()).abs() < 0.5,
        "{gap}"
    );
    assert!(close(
        f(&gap["gap_cost_usd"]),
        f(&gap["gap_hours"]) * 2.5,
        1e-9
    ));
    // Everything else is matched, and nothing else is flagged.
    let hosts: std::collections::BTreeSet<String> = fl.truth["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| d["host"].as_str().expect("host").to_owned())
        .filter(|h| h != unbilled)
        .collect();
    let matched: std::collections::BTreeSet<String> =
        names(&r["matched"], "host").into_iter().collect();
    assert_eq!(matched, hosts);
    // The storage and tax rows are not GPU compute.
    assert_eq!(r["rows"]["not_usage"], 1);
    assert_eq!(r["rows"]["skipped"], serde_json::json!({}));
    // Teams from the bill's tags; the ghost's team is unmonitored, so its idle cost unknown.
    let shadow = r["teams"]
        .as_array()
        .expect("teams")
        .iter()
        .find(|t| t["team"] == "shadow-it")
        .expect("shadow-it");
    assert!(shadow["idle_cost_usd"].is_null());
    // The same bill gzip-compressed and as Parquet reconciles identically.
    let text = std::fs::read(fl.root.join("bill.csv")).expect("bill");
    let gz = fl.root.join("bill.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("gz"),
        flate2::Compression::fast(),
    );
    enc.write_all(&text).expect("gzip");
    enc.finish().expect("gzip");
    let pq = fl.root.join("bill.parquet");
    csv_to_parquet(&fl.root.join("bill.csv"), &pq);
    for other in [&gz, &pq] {
        let o = json(&[
            "reconcile",
            "--bill",
            &other.display().to_string(),
            &fl.telemetry(),
        ]);
        assert_eq!(o, r, "{} differs from the CSV", other.display());
    }
}

/// The bill as Parquet: costs as DOUBLE, period starts as TIMESTAMP(MILLIS), the rest UTF8, in
/// three row groups (which `reconcile` reads in parallel and joins in order).
fn csv_to_parquet(src: &Path, dst: &Path) {
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::sync::Arc;
    let mut r = csv::Reader::from_path(src).expect("csv");
    let head: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(str::to_owned)
        .collect();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    let kind = |h: &str| match h {
        "BilledCost" | "EffectiveCost" | "ListCost" => "DOUBLE",
        "ChargePeriodStart" => "INT64",
        _ => "BYTE_ARRAY",
    };
    let fields: Vec<String> = head
        .iter()
        .map(|h| match kind(h) {
            "DOUBLE" => format!("OPTIONAL DOUBLE {h};"),
            "INT64" => format!("OPTIONAL INT64 {h} (TIMESTAMP(MILLIS,true));"),
            _ => format!("OPTIONAL BYTE_ARRAY {h} (UTF8);"),
        })
        .collect();
    let schema = Arc::new(
        parquet::schema::parser::parse_message_type(&format!(
            "message focus {{ {} }}",
            fields.join(" ")
        ))
        .expect("schema"),
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build(),
    );
    let file = std::fs::File::create(dst).expect("parquet");
    let mut w = SerializedFileWriter::new(file, schema, props).expect("writer");
    for group in rows.chunks(rows.len().div_ceil(3).max(1)) {
        write_group(&mut w, group, &head, kind);
    }
    w.close().expect("close");
}

fn write_group(
    w: &mut parquet::file::writer::SerializedFileWriter<std::fs::File>,
    rows: &[csv::StringRecord],
    head: &[String],
    kind: impl Fn(&str) -> &'static str,
) {
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    let mut rg = w.next_row_group().expect("row group");
    let mut i = 0;
    while let Some(mut col) = rg.next_column().expect("column") {
        let cells: Vec<&str> = rows.iter().map(|r| r.get(i).unwrap_or("")).collect();
        let def: Vec<i16> = cells.iter().map(|c| i16::from(!c.is_empty())).collect();
        let present = cells.iter().filter(|c| !c.is_empty());
        match kind(&head[i]) {
            "DOUBLE" => {
                let v: Vec<f64> = present.map(|c| c.parse().expect("number")).collect();
                col.typed::<DoubleType>()
                    .write_batch(&v, Some(&def), None)
                    .expect("write");
            }
            "INT64" => {
                let v: Vec<i64> = present
                    .map(|c| c.parse::<jiff::Timestamp>().expect("time").as_millisecond())
                    .collect();
                col.typed::<Int64Type>()
                    .write_batch(&v, Some(&def), None)
                    .expect("write");
            }
            _ => {
                let v: Vec<ByteArray> = present.map(|c| ByteArray::from(*c)).collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&v, Some(&def), None)
                    .expect("write");
            }
        }
        col.close().expect("close");
        i += 1;
    }
    rg.close().expect("row group");
}

fn bad_bill(name: &str) -> String {
    data(&format!("bad/bills/{name}"))
}

/// `reconcile --bill bad/bills/NAME` on a small log must fail (exit 2) with `ok(stderr)`.
fn refused(name: &str, ok: impl Fn(&str) -> bool) {
    let o = run(&[
        "reconcile",
        "--bill",
        &bad_bill(name),
        &data("smi/two-gpus.csv"),
    ]);
    assert_eq!(o.code, 2, "{name}");
    assert!(ok(&o.stderr), "{name}: {}", o.stderr);
}

/// `reconcile --bill bad/bills/NAME --join id` on a small log, as JSON.
fn reconciled(name: &str) -> serde_json::Value {
    json(&[
        "reconcile",
        "--bill",
        &bad_bill(name),
        "--join",
        "id",
        &data("smi/two-gpus.csv"),
    ])
}

#[test]
fn bad_bills_are_clear_errors_or_counted_skips() {
    refused("missing-columns.csv", |e| {
        e.contains("missing-columns.csv: not a FOCUS bill: missing column(s) BillingCurrency, ChargePeriodEnd")
    });
    // A corrupt Parquet file (the fuzzer's: it made the row reader panic; the column reader
    // now rejects it earlier) is an error naming it, never a panic trace.
    refused("corrupt.parquet", |e| {
        e.contains("corrupt.parquet: not a readable Parquet file") && !e.contains("panicked")
    });
    refused("mixed-currency.csv", |e| {
        e.contains("mixes currencies (EUR: 1 rows, USD: 2 rows)")
    });
    let r = reconciled("overlap.csv");
    assert_eq!(r["rows"]["duplicates_dropped"], 1);
    assert_eq!(r["rows"]["overlapping_charges"], 1);
    // Two distinct hours plus the overlapping one are billed: 3 × 8 GPUs.
    assert!(close(f(&r["billed_gpu_hours"]), 24.0, 1e-9), "{r}");
    let r = reconciled("unknown-type.csv");
    let skipped = &r["rows"]["skipped"];
    assert_eq!(skipped["unknown_instance_type"]["count"], 1, "{r}");
    assert!(
        skipped["unknown_instance_type"]["example"]
            .as_str()
            .expect("example")
            .contains("`g5.96xlarge`")
    );
    assert_eq!(r["rows"]["not_gpu_instance_types"]["c5.xlarge"], 1);
    assert_eq!(r["instance_types"][0]["instance_type"], "p4d.24xlarge");
    assert_eq!(r["instance_types"][0]["gpus_from"], "catalog");
    assert_eq!(f(&r["instance_types"][0]["gpus_per_instance"]), 8.0);
    let r = reconciled("bad-cells.csv");
    let skipped = &r["rows"]["skipped"];
    for (reason, line) in [("bad_number", 2), ("bad_timestamp", 3), ("bad_tags", 4)] {
        assert_eq!(skipped[reason]["count"], 1, "{reason}: {r}");
        assert!(
            skipped[reason]["example"]
                .as_str()
                .expect("example")
                .starts_with(&format!("line {line}:"))
        );
    }
    assert_eq!(r["rows"]["gpu_compute"], 1, "the good row is kept");
}

/// Values no bill can hold are counted skips naming line and field, never figures: a cost of
/// 1e308, GPU counts 1e9, 8.5, −8, `eight` and 0 (for a type the catalog knows with 8), hours
/// −1, 0 and 1e15 in a one-hour period, an end in 9999, a ragged row. What is left is the two
/// good rows, to the cent; a null count falls back to the catalog; a CPU type's 0 GPUs is no
/// GPU compute.
#[test]
fn implausible_bill_values_are_counted_skips_never_figures() {
    let r = reconciled("implausible.csv");
    let skipped = &r["rows"]["skipped"];
    for (reason, count, first_line) in [
        ("bad_gpu_count", 5, 8),
        ("implausible_cost", 1, 3),
        ("implausible_quantity", 3, 10),
        ("implausible_timestamp", 1, 13),
        ("wrong_column_count", 1, 14),
    ] {
        assert_eq!(skipped[reason]["count"], count, "{reason}: {r}");
        let example = skipped[reason]["example"].as_str().expect("example");
        assert!(
            example.starts_with(&format!("line {first_line}:")),
            "{example}"
        );
    }
    assert_eq!(r["rows"]["read"], 14);
    assert_eq!(r["rows"]["gpu_compute"], 2);
    assert_eq!(r["rows"]["not_gpu_compute"], 1);
    assert!(close(f(&r["billed_cost_usd"]), 65.54, 1e-9), "{r}");
    assert!(close(f(&r["billed_gpu_hours"]), 16.0, 1e-9), "{r}");
    // A `;`-separated export reads as its comma twin; two BilledCost columns and a bill whose
    // every row is skipped are errors naming the file.
    let mut semi = reconciled("semicolon.csv");
    let mut comma = reconciled("unknown-type.csv");
    for v in [&mut semi, &mut comma] {
        v["rows"]["skipped"]["unknown_instance_type"]["example"].take();
    }
    assert_eq!(semi, comma);
    refused("duplicate-column.csv", |e| {
        e.contains("duplicate-column.csv: column BilledCost appears twice (columns 1 and 6)")
    });
    // An endless stream is refused at once, not read forever (it aborted allocating).
    let o = run(&[
        "reconcile",
        "--bill",
        "/dev/zero",
        &data("smi/two-gpus.csv"),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("/dev/zero: line 1: the header is longer than 1048576 bytes"),
        "{}",
        o.stderr
    );
    refused("all-skipped.csv", |e| {
        e.contains("all-skipped.csv: no bill row could be read; all 2 were skipped")
            && e.contains("bad_number, e.g. line 2")
    });
}

/// Pandas' and pyarrow's defaults, written by DuckDB: timestamps in nanoseconds and `Tags` as
/// a struct read like the CSV twin (they made every row "not a timestamp" and dropped every
/// tag). A gzip bill with bytes after its member is read, with a warning; a record over 1 MiB
/// is a counted skip, the rest kept.
#[test]
fn bills_in_other_tools_shapes_read_like_their_csv() {
    let telemetry = data("smi/two-gpus.csv");
    let read = |bill: &str| json(&["reconcile", "--bill", bill, "--join", "id", &telemetry]);
    let pq = read(&data("bills/nanos-struct.parquet"));
    assert_eq!(pq, read(&data("bills/nanos-struct.csv")));
    assert_eq!(pq["teams"][0]["team"], "vision", "{pq}");
    assert_eq!(pq["rows"]["gpu_compute"], 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let gz = dir.path().join("bill.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(
        &mut enc,
        &std::fs::read(bad_bill("unknown-type.csv")).expect("bill"),
    )
    .expect("gzip");
    let mut bytes = enc.finish().expect("gzip");
    bytes.extend_from_slice(&[0; 512]);
    std::fs::write(&gz, bytes).expect("write");
    let o = run(&[
        "reconcile",
        "--bill",
        &gz.display().to_string(),
        "--join",
        "id",
        &telemetry,
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("bytes after the last gzip member are not gzip; ignored"),
        "{}",
        o.stderr
    );
    let long = dir.path().join("long.csv");
    let mut text = std::fs::read_to_string(bad_bill("unknown-type.csv")).expect("bill");
    text.push_str(&format!(
        "1,USD,Usage,2026-01-05T10:00:00Z,2026-01-05T11:00:00Z,1,Hours,i-9,\"{}\",\n",
        "x".repeat(2 << 20)
    ));
    std::fs::write(&long, text).expect("write");
    let r = read(&long.display().to_string());
    assert_eq!(r["rows"]["skipped"]["record_too_long"]["count"], 1, "{r}");
    assert_eq!(
        r["rows"]["skipped"]["record_too_long"]["example"],
        "line 5: a row longer than 1048576 bytes"
    );
    assert_eq!(r["rows"]["gpu_compute"], 1);
}

/// `generate --out fleet --gpus 16` in `dir` over `days` at `interval`, with `extra` flags.
fn small_fleet(dir: &Path, days: &str, interval: &str, extra: &[&str]) {
    let mut args = vec![
        "generate",
        "--out",
        "fleet",
        "--gpus",
        "16",
        "--days",
        days,
        "--interval",
        interval,
    ];
    args.extend_from_slice(extra);
    let o = crate::common::run_in(&args, dir);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// The README's example runs as printed: `generate --out fleet --gpus 16 --days 2 --interval 1m
/// --format dcgm --bill bill.csv` writes about 115 MB, and `reconcile --bill bill.csv fleet` finds the three
/// planted disagreements (one of each kind).
#[test]
fn the_readme_reconcile_example_runs_as_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    small_fleet(
        dir.path(),
        "2",
        "1m",
        &["--format", "dcgm", "--bill", "bill.csv"],
    );
    let bytes: u64 = std::fs::read_dir(dir.path().join("fleet"))
        .expect("fleet")
        .map(|e| e.expect("entry").metadata().expect("meta").len())
        .sum();
    let mb = bytes as f64 / 1e6;
    assert!(
        (110.0..120.0).contains(&mb),
        "{mb} MB (the README says 115 MB)"
    );
    let o = crate::common::run_in(
        &[
            "reconcile",
            "--bill",
            "bill.csv",
            "fleet",
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    for kind in ["unmonitored", "unbilled", "billed_not_reporting"] {
        assert_eq!(r[kind].as_array().map(Vec::len), Some(1), "{kind}: {r}");
    }
}

#[test]
fn the_real_focus_sample_parses_and_its_gpu_rows_are_found() {
    let Some(shared) = shared() else { return };
    let sample = shared.join("focus/FOCUS-1.0_focus_sample.csv");
    // Independently: the rows whose description names a g5.4xlarge (the catalog's only GPU
    // type in the sample), and their billed cost.
    let mut rd = csv::Reader::from_path(&sample).expect("sample");
    let head = rd.headers().expect("header").clone();
    let col = |n: &str| head.iter().position(|h| h == n).expect("column");
    let (desc, cost) = (col("ChargeDescription"), col("BilledCost"));
    let (mut rows, mut gpu_rows, mut billed) = (0, 0, 0.0);
    for rec in rd.records() {
        let rec = rec.expect("row");
        rows += 1;
        if rec[desc].contains("g5.4xlarge") {
            gpu_rows += 1;
            billed += rec[cost].parse::<f64>().expect("cost");
        }
    }
    let r = json(&[
        "reconcile",
        "--bill",
        &sample.display().to_string(),
        "--join",
        "id",
        &data("smi/two-gpus.csv"),
    ]);
    assert_eq!(r["rows"]["read"], rows);
    assert_eq!(r["rows"]["skipped"], serde_json::json!({}));
    assert_eq!(r["rows"]["gpu_compute"], gpu_rows);
    assert!(close(f(&r["billed_cost_usd"]), billed, 1e-9));
    // A g5.4xlarge has one A10G: GPU-hours are the instance-hours.
    assert_eq!(r["instance_types"][0]["instance_type"], "g5.4xlarge");
    assert_eq!(f(&r["instance_types"][0]["gpus_per_instance"]), 1.0);
    // No telemetry of those instances: all unmonitored; g3 (M60) is not in the catalog.
    assert_eq!(r["unmonitored"].as_array().expect("array").len(), gpu_rows);
    assert_eq!(r["rows"]["not_gpu_instance_types"]["g3.4xlarge"], 2);
    // Joined by name (the default), its GPU rows have no ResourceName: the warning says they
    // were skipped and that `--join id` would take them (it said "the bill has no GPU compute
    // rows").
    let r = json(&[
        "reconcile",
        "--bill",
        &sample.display().to_string(),
        &data("smi/two-gpus.csv"),
    ]);
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "the bill's {gpu_rows} GPU compute row(s) have no value to join on"
        )) && warnings.contains("carry a value for `--join id`"),
        "{warnings}"
    );
    assert!(
        !warnings.contains("the bill has no GPU compute rows"),
        "{warnings}"
    );
}

const TEAMS: &str = r#"
[namespaces]
"research" = "research"
"ml-serving" = "serving"
"notebooks" = "notebooks"

[[assign]]
host = "train-h100-1"
team = "vision"
from = "2026-01-08"
"#;

fn prices(fl: &Fleet) -> String {
    fl.write(
        "prices.toml",
        "[[rule]]\nusd_per_gpu_hour = 2.0\npricing = \"on-demand\"\n",
    )
}

#[test]
fn allocation_books_each_device_hour_to_its_owner_at_that_hour() {
    let fl = fleet();
    let teams = fl.write("teams.toml", TEAMS);
    let prices = prices(&fl);
    let units = fl.write(
        "units.csv",
        "team,period,tokens\nserving,2026-01,5000000000\n",
    );
    let a = json(&[
        "allocate",
        &fl.telemetry(),
        "--teams",
        &teams,
        "--prices",
        &prices,
        "--units",
        &units,
    ]);
    assert_eq!(a["schema"], "gpuwise.allocation/v1");
    let month = &a["months"][0];
    assert_eq!(month["month"], "2026-01");
    let team = |t: &str| {
        month["teams"]
            .as_array()
            .expect("teams")
            .iter()
            .find(|x| x["team"] == t)
            .unwrap_or_else(|| panic!("team {t}: {month}"))
            .clone()
    };
    let ns = |n: &'static str| move |d: &serde_json::Value| d["namespace"] == n;
    for (t, n) in [("serving", "ml-serving"), ("notebooks", "notebooks")] {
        let want = fl.sum("gpu_hours", ns(n));
        assert!(close(f(&team(t)["gpu_hours"]), want, 1e-3), "{t}: {want}");
        assert!(close(f(&team(t)["cost_usd"]), 2.0 * want, 1e-3));
        assert!(close(
            f(&team(t)["idle_gpu_hours"]),
            fl.sum("idle_hours", ns(n)),
            1e-3
        ));
    }
    // train-h100-1 belongs to vision from 2026-01-08 00:00: 4 of its 7 days (the fleet starts
    // Monday 2026-01-05); the research namespace keeps the rest.
    let h100 = |d: &serde_json::Value| d["host"] == "train-h100-1";
    let vision = fl.sum("gpu_hours", h100) * 4.0 / 7.0;
    assert!(
        (f(&team("vision")["gpu_hours"]) - vision).abs() < 0.1,
        "{}",
        team("vision")
    );
    let research = fl.sum("gpu_hours", ns("research")) - vision;
    assert!((f(&team("research")["gpu_hours"]) - research).abs() < 0.1);
    // Showback: charged = cost. Unit cost from the counts file.
    let serving = team("serving");
    assert_eq!(serving["charged_usd"], serving["cost_usd"]);
    assert!(close(
        f(&serving["usd_per_million_tokens"]),
        f(&serving["charged_usd"]) / 5000.0,
        1e-9
    ));
    // The forecast: as of the data's end (Monday 2026-01-12), 168 h observed, 480 h left.
    let fc = &a["forecast"];
    assert_eq!(fc["month"], "2026-01");
    let mtd = f(&fc["fleet"]["month_to_date_usd"]);
    assert!(close(mtd, f(&month["fleet"]["cost_usd"]), 1e-9));
    assert!(close(
        f(&fc["fleet"]["forecast_linear_usd"]),
        mtd * (1.0 + 480.0 / 168.0),
        1e-9
    ));
    let how = f(&fc["fleet"]["forecast_hour_of_week_usd"]);
    assert!(how > 3.0 * mtd && how < 4.0 * mtd, "{how} vs {mtd}");
}

/// Two and a half days of an always-on GPU from the 1st: the hour-of-week forecast knows 60 of
/// the week's 168 hours; the others cost the mean hour, so the month-end figure is the linear
/// one (it counted them as $0: $6,587 against $17,786 on 2.5 days of a fleet, and a $10,000
/// budget passed).
#[test]
fn the_hour_of_week_forecast_does_not_count_unseen_hours_as_free() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("gpu-1.csv");
    let mut text = String::from(
        "timestamp, name, pci.bus_id, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n",
    );
    let start = jiff::Timestamp::from_second(1_793_491_200).expect("2026-11-01"); // 2026-11-01T00:00Z
    for m in 0..60 * 60 {
        let t = start + jiff::SignedDuration::from_mins(m);
        text.push_str(&format!(
            "{}, NVIDIA H100 80GB HBM3, 00000000:01:00.0, GPU-1, 80 %, 40000 MiB, 81559 MiB, 500.00 W\n",
            t.strftime("%Y/%m/%d %H:%M:%S.000")
        ));
    }
    std::fs::write(&log, text).expect("write");
    let prices = dir.path().join("prices.toml");
    std::fs::write(
        &prices,
        "[[rule]]\nusd_per_gpu_hour = 2.0\npricing = \"on-demand\"\n",
    )
    .expect("prices");
    let a = json(&[
        "allocate",
        &log.display().to_string(),
        "--prices",
        &prices.display().to_string(),
    ]);
    let fleet = &a["forecast"]["fleet"];
    let (lin, how) = (
        f(&fleet["forecast_linear_usd"]),
        f(&fleet["forecast_hour_of_week_usd"]),
    );
    // 720 hours of November at $2.
    assert!(close(lin, 1440.0, 0.02), "{fleet}");
    assert!(close(how, lin, 0.02), "{fleet}");
}

#[test]
fn chargeback_moves_idle_and_shared_cost_and_keeps_the_total() {
    let fl = fleet();
    let teams = fl.write("teams.toml", TEAMS);
    let prices = prices(&fl);
    let base = [
        "allocate",
        &fl.telemetry(),
        "--teams",
        &teams,
        "--prices",
        &prices,
        "--mode",
        "chargeback",
        "--shared-team",
        "notebooks",
    ];
    let teams_of = |policy: &str| {
        let mut args = base.to_vec();
        args.extend_from_slice(&["--idle", policy]);
        json(&args)["months"][0]["teams"]
            .as_array()
            .expect("teams")
            .clone()
    };
    // A misspelt shared team is an error naming the known ones (it was accepted, moving nothing).
    let mut typo = base.to_vec();
    typo[9] = "notebook";
    let o = run(&typo);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "--shared-team names `notebook` that no team file or data knows; the known teams are"
        ) && o.stderr.contains("notebooks"),
        "{}",
        o.stderr
    );
    let prop = teams_of("proportional");
    let total_cost: f64 = prop.iter().map(|t| f(&t["cost_usd"])).sum();
    let total_charged: f64 = prop.iter().map(|t| f(&t["charged_usd"])).sum();
    assert!(close(total_charged, total_cost, 1e-9));
    // Pool: every receiving team's idle cost plus all of the shared team's cost.
    let pool: f64 = prop
        .iter()
        .map(|t| {
            if t["team"] == "notebooks" {
                f(&t["cost_usd"])
            } else {
                f(&t["idle_cost_usd"])
            }
        })
        .sum();
    let busy: f64 = prop
        .iter()
        .filter(|t| t["team"] != "notebooks")
        .map(|t| f(&t["busy_gpu_hours"]))
        .sum();
    for t in &prop {
        if t["team"] == "notebooks" {
            assert_eq!(f(&t["charged_usd"]), 0.0);
            continue;
        }
        let want =
            f(&t["cost_usd"]) - f(&t["idle_cost_usd"]) + pool * f(&t["busy_gpu_hours"]) / busy;
        assert!(close(f(&t["charged_usd"]), want, 1e-9), "{t}");
    }
    let plat = teams_of("platform:platform");
    let p = plat
        .iter()
        .find(|t| t["team"] == "platform")
        .expect("bucket");
    assert!(close(f(&p["charged_usd"]), pool, 1e-9));
}

#[test]
fn the_focus_export_has_the_spec_columns_and_sums_to_the_allocation() {
    let Some(shared) = shared() else { return };
    let fl = fleet();
    let teams = fl.write("teams.toml", TEAMS);
    let prices = prices(&fl);
    let out = fl.p("alloc.csv");
    let o = run(&[
        "allocate",
        &fl.telemetry(),
        "--teams",
        &teams,
        "--prices",
        &prices,
        "--format",
        "focus",
        "-o",
        &out,
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The header: FOCUS 1.2's columns as the spec lists them (shared column list), then x_.
    let spec: Vec<String> =
        csv::Reader::from_path(shared.join("focus/focus_columns_v1.0_v1.1_v1.2.csv"))
            .expect("columns")
            .records()
            .map(|r| r.expect("row"))
            .filter(|r| &r[0] == "1.2")
            .map(|r| r[2].to_owned())
            .collect();
    let mut rd = csv::Reader::from_path(&out).expect("export");
    let head: Vec<String> = rd
        .headers()
        .expect("header")
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(&head[..spec.len()], &spec[..]);
    assert!(head[spec.len()..].iter().all(|h| h.starts_with("x_")));
    // Every column the spec says allows no nulls has a value in every row
    // (`BillingAccountType` was left empty).
    let not_null: Vec<String> =
        csv::Reader::from_path(shared.join("focus/focus_columns_v1.0_v1.1_v1.2.csv"))
            .expect("columns")
            .records()
            .map(|r| r.expect("row"))
            .filter(|r| &r[0] == "1.2" && &r[6] == "False")
            .map(|r| r[2].to_owned())
            .collect();
    assert!(not_null.contains(&"BillingAccountType".to_owned()));
    let mut check = csv::Reader::from_path(&out).expect("export");
    for row in check.records() {
        let row = row.expect("row");
        for c in &not_null {
            let i = head.iter().position(|h| h == c).expect("column");
            assert!(!row[i].is_empty(), "{c} is null in {row:?}");
        }
    }
    // Read back by the FOCUS reader: every row, and the costs sum to the allocation's.
    let mut total = 0.0;
    let mut rows = 0;
    let tally = gpuwise_ledger::focus::read_csv(
        std::io::BufReader::new(std::fs::File::open(&out).expect("open")),
        "alloc.csv",
        &mut |r| {
            rows += 1;
            total += r.billed_cost;
        },
    )
    .expect("reads");
    assert_eq!(tally.version, "1.2");
    assert_eq!(tally.skips.total(), 0);
    // One row per device, team and UTC day: the move to vision falls on a day boundary.
    assert_eq!(rows, GPUS * 7);
    let a = json(&[
        "allocate",
        &fl.telemetry(),
        "--teams",
        &teams,
        "--prices",
        &prices,
    ]);
    assert!(close(total, f(&a["months"][0]["fleet"]["cost_usd"]), 1e-6));
}

#[test]
fn check_lists_violations_with_evidence_and_exits_1() {
    let fl = fleet();
    let teams = fl.write("teams.toml", TEAMS);
    let prices = prices(&fl);
    let policy = fl.write(
        "policy.toml",
        "[budget]\nmonthly_usd = { research = 100, serving = 1000000 }\n\
         [notebooks]\nmax_held_idle_hours = 2\npods = [\"notebooks-*\"]\n\
         [spot]\nmin_share_pct = 20\n\
         [stale]\nmax_age_hours = 24\n",
    );
    let args = [
        "check",
        &fl.telemetry(),
        "--teams",
        &teams,
        "--prices",
        &prices,
        "--policy",
        &policy,
        "--format",
        "json",
        "--no-progress",
    ];
    let o = run(&args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let c: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(c["schema"], "gpuwise.check/v1");
    let of = |rule: &str| -> Vec<serde_json::Value> {
        c["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .filter(|v| v["rule"] == rule)
            .cloned()
            .collect()
    };
    // research is over its $100; serving is far under its budget and its forecast.
    let budget = of("budget");
    assert_eq!(budget.len(), 1);
    assert_eq!(budget[0]["subject"], "research");
    assert!(of("budget_forecast").is_empty());
    // Every notebook device holds memory idle for days; each is listed.
    let held: Vec<String> = fl.truth["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| d["namespace"] == "notebooks" && f(&d["held_idle_hours"]) > 2.0)
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(!held.is_empty(), "the fleet has notebooks");
    let mut flagged = names(
        &serde_json::Value::Array(of("notebook_held_idle")),
        "subject",
    );
    flagged.sort();
    let mut held = held;
    held.sort();
    assert_eq!(flagged, held);
    // All on-demand: 0 % spot.
    let spot = of("spot_share");
    assert_eq!(spot.len(), 1);
    assert_eq!(f(&spot[0]["value"]), 0.0);
    // The data is from January; "now" is December: every device is stale.
    assert_eq!(of("stale_telemetry").len(), GPUS);
    // A policy the fleet meets passes with exit 0; a rule the data cannot decide (prices
    // without a pricing model: spot share unknown) is not evaluated.
    let ok = fl.write(
        "ok.toml",
        "[idle]\nmax_share_pct = 100\n[spot]\nmin_share_pct = 0\n",
    );
    let flat = fl.write("flat.toml", "[[rule]]\nusd_per_gpu_hour = 2.0\n");
    let o = run(&[
        "check",
        &fl.telemetry(),
        "--policy",
        &ok,
        "--prices",
        &flat,
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let c: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(
        c["not_evaluated"][0]["rule"], "spot_share",
        "no price rules: pricing unknown"
    );
    // A bad policy is an error (2), naming the file.
    let bad = fl.write("bad.toml", "[idle]\nmax_share_pct = 140\n");
    let o = run(&["check", &fl.telemetry(), "--policy", &bad]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("bad.toml") && o.stderr.contains("within 0–100"),
        "{}",
        o.stderr
    );
}

/// A receiver on loopback: answers the queued statuses in turn, returns the bodies it got.
pub(crate) fn receiver(statuses: Vec<u16>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "http://user:secret@{}/hooks/T000/B000",
        listener.local_addr().expect("addr")
    );
    let handle = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for status in statuses {
            let (stream, _) = listener.accept().expect("accept");
            let mut r = BufReader::new(stream.try_clone().expect("clone"));
            let mut len = 0;
            loop {
                let mut line = String::new();
                r.read_line(&mut line).expect("header");
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().expect("length");
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).expect("body");
            bodies.push(String::from_utf8(body).expect("utf8"));
            let mut s = stream;
            write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .expect("reply");
        }
        bodies
    });
    (url, handle)
}

#[test]
fn notify_posts_slack_blocks_retries_a_5xx_and_never_shows_the_secret() {
    let fl = fleet();
    let policy = fl.write("policy.toml", "[stale]\nmax_age_hours = 24\n");
    let (url, got) = receiver(vec![503, 200]);
    let o = run(&[
        "check",
        &fl.telemetry(),
        "--policy",
        &policy,
        "--notify",
        &url,
        "--no-progress",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let bodies = got.join().expect("receiver");
    assert_eq!(bodies.len(), 2, "one retry after the 503");
    assert_eq!(bodies[0], bodies[1]);
    let m: serde_json::Value = serde_json::from_str(&bodies[0]).expect("json");
    assert!(
        m["text"]
            .as_str()
            .expect("text")
            .starts_with(&format!("gpuwise check: {GPUS} violation(s)"))
    );
    assert_eq!(m["blocks"][0]["type"], "header");
    assert_eq!(m["blocks"].as_array().expect("blocks").len(), GPUS + 1);
    assert!(
        o.stderr.contains("notified http://127.0.0.1"),
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("secret") && !o.stderr.contains("B000"),
        "{}",
        o.stderr
    );
    // A receiver that refuses (4xx) is not retried and is an error (2) that hides the secret.
    let (url, got) = receiver(vec![403]);
    let o = run(&[
        "check",
        &fl.telemetry(),
        "--policy",
        &policy,
        "--notify",
        &url,
        "--notify-format",
        "generic",
        "--no-progress",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let bodies = got.join().expect("receiver");
    let m: serde_json::Value = serde_json::from_str(&bodies[0]).expect("json");
    assert_eq!(m["schema"], "gpuwise.check/v1");
    assert!(
        o.stderr.contains("HTTP 403") && !o.stderr.contains("secret"),
        "{}",
        o.stderr
    );
    // --dry-run prints the body and posts nothing (no receiver listens).
    let o = run(&[
        "check",
        &fl.telemetry(),
        "--policy",
        &policy,
        "--notify",
        "http://127.0.0.1:9/x",
        "--dry-run",
        "--no-progress",
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("would POST to http://127.0.0.1:9/") && o.stderr.contains("\"blocks\""),
        "{}",
        o.stderr
    );
}

#[test]
fn allocation_and_policy_settings_come_from_the_config_file_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("policy.toml"),
        "[idle]\nmax_share_pct = 100\n",
    )
    .expect("policy");
    std::fs::write(dir.path().join("teams.toml"), "[hosts]\n\"*\" = \"ops\"\n").expect("teams");
    let cfg = dir.path().join("gpuwise.toml");
    std::fs::write(
        &cfg,
        "allocation_mode = \"chargeback\"\nidle_policy = \"platform:infra\"\nshared_teams = [\"ops\"]\npolicy = \"policy.toml\"\nteams = \"teams.toml\"\n",
    )
    .expect("config");
    let c = cfg.display().to_string();
    let telemetry = data("smi/two-gpus.csv");
    let a = json(&["allocate", &telemetry, "--config", &c]);
    assert_eq!(a["policy"]["mode"], "chargeback");
    assert_eq!(
        a["policy"]["idle"],
        serde_json::json!({"to": "platform", "bucket": "infra"})
    );
    assert_eq!(a["policy"]["shared_teams"], serde_json::json!(["ops"]));
    // The flag wins over the file.
    let a = json(&["allocate", &telemetry, "--config", &c, "--mode", "showback"]);
    assert_eq!(a["policy"]["mode"], "showback");
    // check finds its policy in the config (relative to the config file) …
    let o = run(&["check", &telemetry, "--config", &c, "--no-progress"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // … and without one anywhere says how to give it.
    let o = run(&["check", &telemetry, "--no-progress"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("no policy: give --policy FILE"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_parquet_bill_written_by_another_tool_reads_like_its_csv() {
    // tests/data/bills/small.parquet is bad/bills/unknown-type.csv written by DuckDB (typed
    // columns: doubles, timestamps with zone, strings; snappy): a third-party writer's layout.
    let telemetry = data("smi/two-gpus.csv");
    let csv = json(&[
        "reconcile",
        "--bill",
        &bad_bill("unknown-type.csv"),
        "--join",
        "id",
        &telemetry,
    ]);
    let pq = json(&[
        "reconcile",
        "--bill",
        &data("bills/small.parquet"),
        "--join",
        "id",
        &telemetry,
    ]);
    assert_eq!(csv, pq);
}

/// Guardrails never fail open: a budget for a team nobody knows is an error naming the known
/// teams; a team whose hours have no price cannot be held to its budget, nor its device's
/// long run to a minimum price — each is `not_evaluated` with the reason, and `--strict`
/// makes that exit 1. (A budget for a misspelt team passed as "all 1 rule(s) pass", and an
/// unpriced team never breached.)
#[test]
fn guardrails_say_what_they_cannot_decide() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, teams) = two_teams_one_unpriced(dir.path());
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.display().to_string()
    };
    let check = |policy: &str, extra: &[&str]| {
        let mut a = vec![
            "check",
            &data,
            "--teams",
            &teams,
            "--policy",
            policy,
            "--format",
            "json",
            "--no-progress",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };
    // A misspelt team: exit 2, naming it and the teams that exist.
    let typo = write("typo.toml", "[budget]\nmonthly_usd = { reserch = 100 }\n");
    let o = check(&typo, &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("`reserch`") && o.stderr.contains("`lab`, `research`"),
        "{}",
        o.stderr
    );
    // lab's hours are unpriced: its budget and its 30-hour run are not evaluated; research,
    // priced by the catalog, is held to its budget and passes.
    let policy = write(
        "policy.toml",
        "[budget]\nmonthly_usd = { research = 1000000, lab = 1 }\n\
         [long_jobs]\nmax_hours = 24\nmin_usd_per_hour = 0.5\n",
    );
    let o = check(&policy, &[]);
    // research ran 30 h at the A100's catalog price: a long job, decided (exit 1).
    assert_eq!(o.code, 1, "{}", o.stderr);
    let c: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    let undecided: Vec<String> = c["not_evaluated"]
        .as_array()
        .expect("not_evaluated")
        .iter()
        .map(|n| format!("{}: {}", n["rule"], n["reason"]))
        .collect();
    assert_eq!(undecided.len(), 2, "{undecided:?}");
    assert!(
        undecided[0].contains("budget") && undecided[0].contains("lab: 29.9 GPU-hour(s)"),
        "{undecided:?}"
    );
    assert!(
        undecided[1].contains("long_job") && undecided[1].contains("GPU-bbbbbbbb"),
        "{undecided:?}"
    );
    let violations = c["violations"].as_array().expect("violations");
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0]["rule"], "long_job");
    assert!(
        violations[0]["subject"]
            .as_str()
            .is_some_and(|s| s.contains("GPU-aaaaaaaa"))
    );
    assert!(
        o.stderr.contains("2 rule(s) could not be decided"),
        "{}",
        o.stderr
    );
    // A budget alone: research within it, lab undecided — exit 0, and 1 with --strict (a
    // guardrail that cannot see the data fails).
    let budget = write(
        "budget.toml",
        "[budget]\nmonthly_usd = { research = 1000000, lab = 1 }\n",
    );
    let o = check(&budget, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let c: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(c["not_evaluated"][0]["rule"], "budget");
    assert_eq!(check(&budget, &["--strict"]).code, 1);
    // The table says so instead of "all rules pass".
    let o = run(&[
        "check",
        &data,
        "--teams",
        &teams,
        "--policy",
        &budget,
        "--no-progress",
    ]);
    assert!(o.stdout.contains("could not be decided"), "{}", o.stdout);
    assert!(!o.stdout.contains("pass"), "{}", o.stdout);
}

/// 30 hours at 5 minutes of two busy GPUs in `dir`: one catalog A100 (team research), one
/// model no catalog knows (team lab); the telemetry file and the team file.
fn two_teams_one_unpriced(dir: &Path) -> (String, String) {
    let mut lines = String::new();
    for i in 0..360_i64 {
        let ts = 1_767_571_200_000 + i * 300_000;
        for (uuid, model, ns) in [
            (
                "GPU-aaaaaaaa-0000-4000-8000-000000000001",
                "NVIDIA A100-SXM4-80GB",
                "research",
            ),
            (
                "GPU-bbbbbbbb-0000-4000-8000-000000000002",
                "Mystery Accelerator 9000",
                "lab",
            ),
        ] {
            let _ = std::fmt::Write::write_fmt(
                &mut lines,
                format_args!(
                    "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"{uuid}\",modelName=\"{model}\",Hostname=\"node-{ns}\",namespace=\"{ns}\"}} 80 {ts}\n"
                ),
            );
        }
    }
    let data = dir.join("fleet.prom");
    std::fs::write(&data, lines).expect("data");
    let teams = dir.join("teams.toml");
    std::fs::write(
        &teams,
        "[namespaces]\n\"research\" = \"research\"\n\"lab\" = \"lab\"\n",
    )
    .expect("teams");
    (data.display().to_string(), teams.display().to_string())
}

/// Unknown stays unknown: a fleet whose only idle device has no price reports its idle and
/// held-idle cost as unknown (`null`, "unpriced"), not $0.00, while its priced busy device's
/// cost is known.
#[test]
fn idle_cost_of_unpriced_devices_is_unknown_not_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lines = String::new();
    for i in 0..48_i64 {
        let ts = 1_767_571_200_000 + i * 300_000;
        for (uuid, model, util, fb) in [
            (
                "GPU-aaaaaaaa-0000-4000-8000-000000000001",
                "NVIDIA A100-SXM4-80GB",
                90,
                40_000,
            ),
            (
                "GPU-bbbbbbbb-0000-4000-8000-000000000002",
                "Mystery Accelerator 9000",
                0,
                20_000,
            ),
        ] {
            for (m, v) in [("DCGM_FI_DEV_GPU_UTIL", util), ("DCGM_FI_DEV_FB_USED", fb)] {
                let _ = std::fmt::Write::write_fmt(
                    &mut lines,
                    format_args!(
                        "{m}{{gpu=\"0\",UUID=\"{uuid}\",modelName=\"{model}\",Hostname=\"n\"}} {v} {ts}\n"
                    ),
                );
            }
        }
    }
    let data = dir.path().join("fleet.prom");
    std::fs::write(&data, lines).expect("data");
    let data = data.display().to_string();
    let r = json(&["report", &data]);
    let fl = &r["fleet"];
    assert!(f(&fl["idle_gpu_hours"]) > 3.0, "{fl}");
    assert!(fl["idle_cost_usd"].is_null(), "{fl}");
    assert!(fl["held_idle_cost_usd"].is_null(), "{fl}");
    assert!(f(&fl["cost_usd"]) > 0.0, "{fl}");
    let o = run(&["report", &data, "--no-progress"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let idle_line = o
        .stdout
        .lines()
        .find(|l| l.contains("Idle cost"))
        .expect("an idle cost line");
    assert!(
        idle_line.contains("unpriced") && !idle_line.contains("$0"),
        "{idle_line}"
    );
}

/// The FOCUS export keeps list, contracted and effective cost apart: a spot or committed price
/// is not the list price. ListUnitPrice is the catalog's on-demand price of the GPU, ListCost
/// that times the quantity; EffectiveCost the price paid; ContractedCost the price paid for
/// spot and the list price for a commitment (FOCUS: before commitment discounts).
#[test]
fn focus_export_separates_list_contracted_and_effective_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, teams) = two_teams_one_unpriced(dir.path());
    for (pricing, usd) in [("spot", 1.0), ("1y", 2.0)] {
        let prices = dir.path().join(format!("{pricing}.toml"));
        std::fs::write(
            &prices,
            format!("[[rule]]\nhost = \"node-research\"\nusd_per_gpu_hour = {usd}\npricing = \"{pricing}\"\n"),
        )
        .expect("prices");
        let out = dir.path().join(format!("{pricing}.csv"));
        let o = run(&[
            "allocate",
            &data,
            "--teams",
            &teams,
            "--prices",
            &prices.display().to_string(),
            "--format",
            "focus",
            "--output",
            &out.display().to_string(),
            "--no-progress",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let mut rd = csv::Reader::from_path(&out).expect("export");
        let head = rd.headers().expect("header").clone();
        let col = |r: &csv::StringRecord, name: &str| -> String {
            let i = head.iter().position(|h| h == name).expect(name);
            r[i].to_owned()
        };
        let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.expect("row")).collect();
        assert!(!rows.is_empty(), "the priced A100 has rows");
        for r in &rows {
            let num = |name: &str| col(r, name).parse::<f64>().expect(name);
            let qty = num("PricingQuantity");
            let list = num("ListUnitPrice");
            assert!(
                list > usd,
                "{pricing}: list {list} is the on-demand price, above {usd}"
            );
            assert!(close(num("ListCost"), list * qty, 1e-6));
            assert!(close(num("EffectiveCost"), usd * qty, 1e-6));
            assert!(close(num("BilledCost"), usd * qty, 1e-6));
            let contracted = if pricing == "1y" { list } else { usd };
            assert!(
                close(num("ContractedUnitPrice"), contracted, 1e-6),
                "{pricing}"
            );
            assert!(
                close(num("ContractedCost"), contracted * qty, 1e-6),
                "{pricing}"
            );
            assert_eq!(col(r, "x_ListPriceKnown"), "true");
            assert_eq!(
                col(r, "PricingCategory"),
                if pricing == "1y" {
                    "Committed"
                } else {
                    "Dynamic"
                }
            );
        }
    }
}

/// `--notify` never follows a redirect (the body would reach another origin as an empty GET,
/// and "notified" was printed), counts the attempts it made, refuses plain http off loopback
/// (a webhook's path is its secret), and never echoes a value that is not a URL (a Slack bot
/// token pasted by mistake).
#[test]
fn notify_does_not_follow_redirects_or_post_in_clear() {
    let fl = fleet();
    let policy = fl.write("policy.toml", "[stale]\nmax_age_hours = 24\n");
    let check = |url: &str| {
        run(&[
            "check",
            &fl.telemetry(),
            "--policy",
            &policy,
            "--notify",
            url,
            "--notify-retries",
            "2",
            "--no-progress",
        ])
    };
    let (url, got) = receiver(vec![302]);
    let o = check(&url);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("failed after 1 attempt(s)") && o.stderr.contains("redirect"),
        "{}",
        o.stderr
    );
    assert_eq!(
        got.join().expect("receiver").len(),
        1,
        "posted once, not retried"
    );
    for (url, want) in [
        ("http://hooks.example/services/T0/B0/s3cret", "plain http"),
        ("xoxb-1234-s3cret-token", "not a URL"),
        ("ftp://hooks.example/s3cret", "not an http(s) URL"),
    ] {
        let o = check(url);
        assert_eq!(o.code, 2, "{url}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{url}: {}", o.stderr);
        assert!(
            !o.stderr.contains("s3cret"),
            "{url}: the secret was echoed: {}",
            o.stderr
        );
    }
}

/// `check` piped into a CI log prints a line per violation, the same finding for many devices
/// on one line by display name (a table squeezed its WHAT column to 16 characters: 57
/// violations took 390 lines, ids split mid-token); with COLUMNS set it is the table again.
#[test]
fn check_in_a_log_is_one_violation_a_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    small_fleet(dir.path(), "1", "5m", &[]);
    std::fs::write(
        dir.path().join("policy.toml"),
        "[stale]\nmax_age_hours = 0.01\n",
    )
    .expect("policy");
    let args = ["check", "fleet", "--policy", "policy.toml", "--no-progress"];
    let o = crate::common::run_in(&args, dir.path());
    assert_eq!(o.code, 1, "{}", o.stderr);
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let j: serde_json::Value =
        serde_json::from_str(&crate::common::run_in(&json_args, dir.path()).stdout).expect("json");
    let n = j["violations"].as_array().map_or(0, Vec::len);
    assert!(n > 5, "{n}");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("gpuwise check: {n} violation(s) of 1 rule(s)")
    );
    // Every device went silent at the same time: one line says so, names three devices by
    // their display names (as the report shows them, not host/UUID) and counts the rest.
    let names: std::collections::BTreeSet<&str> = j["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names.len(), n);
    assert!(names.iter().all(|m| m.contains("/gpu")), "{names:?}");
    let last = j["violations"][0]["evidence"]["last_seen"]
        .as_str()
        .expect("last_seen");
    let first3: Vec<&str> = names.iter().take(3).copied().collect();
    assert!(
        lines[1].starts_with(&format!(
            "stale_telemetry: {n} devices last reported {last} ("
        )),
        "{}",
        o.stdout
    );
    assert!(
        lines[1].ends_with(&format!("h ago): {} and {} more", first3.join(", "), n - 3)),
        "{}",
        o.stdout
    );
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    let o = crate::common::cmd()
        .args(args)
        .current_dir(dir.path())
        .env("COLUMNS", "200")
        .output()
        .expect("runs");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains(" RULE "), "{table}");
}
