//! Helpers: run the binary, find the shared data, read JSON reports.

use std::path::{Path, PathBuf};
use std::process::Command;

/// "Now" for every test run, so staleness and future-timestamp checks are reproducible.
pub(crate) const NOW: &str = "2026-12-01T00:00:00Z";

pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn data(rel: &str) -> String {
    repo().join("tests/data").join(rel).display().to_string()
}

pub(crate) fn cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuwise"));
    c.env("GPUWISE_NOW", NOW)
        .env("NO_COLOR", "1")
        .env_remove("GPUWISE_CONFIG")
        .env_remove("GPUWISE_TZ")
        .env_remove("GPUWISE_FORMAT")
        .env_remove("GPUWISE_STORE");
    c.env_remove("GPUWISE_PRICES").env_remove("GPUWISE_TEAMS");
    c.env_remove("GPUWISE_POLICY")
        .env_remove("GPUWISE_NOTIFY_URL")
        .env_remove("GPUWISE_ALLOCATION_MODE")
        // Layouts follow the terminal width when COLUMNS is set: tests fix it per call.
        .env_remove("COLUMNS")
        // Notices said once a day are said on every run: nowhere to record the day.
        .env("XDG_STATE_HOME", "/dev/null/gpuwise-tests");
    c
}

pub(crate) fn run(args: &[&str]) -> Out {
    run_in(args, &repo())
}

/// `run` on a terminal wide enough that no line wraps: for tests that read prose, not layout.
pub(crate) fn run_wide(args: &[&str]) -> Out {
    output(cmd().env("COLUMNS", "1000").args(args).current_dir(repo()))
}

pub(crate) fn run_in(args: &[&str], dir: &Path) -> Out {
    output(cmd().args(args).current_dir(dir))
}

fn output(c: &mut Command) -> Out {
    let o = c.output().expect("the gpuwise binary runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `gpuwise report ARGS --format json`, which must succeed.
pub(crate) fn report_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json", "--no-progress"]);
    let o = run(&all);
    assert_eq!(o.code, 0, "gpuwise {all:?} failed: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("report JSON parses")
}

/// The shared reference data: `$GPUWISE_SHARED_DATA`, else `../shared/data` beside the
/// repository. Missing: a failure under CI (`CI=true`), a printed skip elsewhere.
pub(crate) fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUWISE_SHARED_DATA")
        .map_or_else(|| repo().join("../shared/data"), PathBuf::from);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "shared data not found at {} (set GPUWISE_SHARED_DATA); CI must have it",
            dir.display()
        );
    }
    eprintln!(
        "skipping: shared data not found at {} (set GPUWISE_SHARED_DATA)",
        dir.display()
    );
    None
}

pub(crate) fn device<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|x| x["id"] == id))
        .unwrap_or_else(|| panic!("device {id} in report"))
}

pub(crate) fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-9
}

/// splitmix64: the test's own generator.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..hi`.
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % u64::try_from((hi - lo).max(1)).unwrap_or(1)) as i64
    }
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
}
