//! Output that cannot be turned against its reader: hostile labels stay text in every format,
//! and a report that cannot be written whole leaves the previous one as it was.

use std::path::Path;

use crate::common::{cmd, run};

/// A DCGM scrape series whose labels carry a formula, HTML and terminal escapes.
fn hostile_scrapes(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for i in 0..31 {
        let t = jiff::Timestamp::from_second(1_767_607_200 + i * 60).expect("ts");
        let name = format!("{}.prom", t.strftime("%Y-%m-%dT%H:%M:%SZ"));
        let labels = "gpu=\"0\",UUID=\"GPU-0a0a0a0a-0000-4000-8000-00000000beef\",Hostname=\"node\u{1b}[2J\u{1b}]0;pwned\u{7}\",namespace=\"<script>alert(1)</script>\",pod=\"=HYPERLINK(\\\"http://evil\\\",\\\"x\\\")\"";
        let text =
            format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} 40\nDCGM_FI_DEV_FB_USED{{{labels}}} 2000\n");
        std::fs::write(dir.join(name), text).expect("write");
    }
}

#[test]
fn hostile_labels_stay_text_in_every_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("scrapes");
    hostile_scrapes(&data);
    let d = data.display().to_string();
    for (format, group) in [
        ("csv", "label:pod"),
        ("table", "namespace"),
        ("markdown", "namespace"),
        ("html", "namespace"),
        ("table", "label:pod"),
    ] {
        let o = run(&[
            "report",
            &d,
            "--format",
            format,
            "--group-by",
            group,
            "--no-progress",
        ]);
        assert_eq!(o.code, 0, "{format}: {}", o.stderr);
        assert!(
            !o.stdout.contains('\u{1b}'),
            "{format}: an escape reached stdout"
        );
        assert!(
            !o.stderr.contains('\u{1b}'),
            "{format}: an escape reached stderr"
        );
        assert!(
            !o.stdout.contains('\u{7}'),
            "{format}: a bell reached stdout"
        );
        match format {
            "csv" => {
                // The pod cell starts with a quote mark, never with `=`.
                assert!(o.stdout.contains(",\"'=HYPERLINK("), "{}", o.stdout);
                assert!(!o.stdout.contains(",=HYPERLINK") && !o.stdout.contains(",\"=HYPERLINK"));
            }
            "markdown" | "html" => {
                assert!(!o.stdout.contains("<script>"), "{format}: raw HTML");
                assert!(o.stdout.contains("&lt;script&gt;"), "{format}");
            }
            _ => assert!(o.stdout.contains("\\u{1b}[2J") || o.stdout.contains("<script>")),
        }
    }
}

#[test]
fn a_report_that_cannot_be_written_whole_leaves_the_previous_one() {
    // A file-size limit stands in for a full disk: the write fails part-way (EFBIG; SIGXFSZ
    // is caught by the binary, no `trap` needed).
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("scrapes");
    hostile_scrapes(&data);
    let out = dir.path().join("report.html");
    std::fs::write(&out, "previous report").expect("write");
    let bin = cmd().get_program().to_owned();
    let script = format!(
        "ulimit -f 8; exec '{}' report '{}' --format html -o '{}' --no-progress",
        bin.to_string_lossy(),
        data.display(),
        out.display()
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &script])
        .env("GPUWISE_NOW", crate::common::NOW)
        .output()
        .expect("bash runs");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&out).expect("read"),
        "previous report"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    // Without the limit it is replaced whole.
    let o = run(&[
        "report",
        &data.display().to_string(),
        "--format",
        "html",
        "-o",
        &out.display().to_string(),
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        std::fs::read_to_string(&out)
            .expect("read")
            .contains("</html>")
    );
}

#[test]
fn hostile_labels_stay_text_in_the_ledger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("scrapes");
    hostile_scrapes(&data);
    let d = data.display().to_string();
    // The pod label names the team: the hostile text becomes a team name.
    let teams = dir.path().join("teams.toml");
    std::fs::write(&teams, "labels = [\"pod\"]\n").expect("teams");
    let t = teams.display().to_string();
    let prices = dir.path().join("prices.toml");
    std::fs::write(&prices, "[[rule]]\nusd_per_gpu_hour = 2.0\n").expect("prices");
    let p = prices.display().to_string();
    for format in ["table", "csv", "markdown", "focus"] {
        let o = run(&[
            "allocate",
            &d,
            "--teams",
            &t,
            "--prices",
            &p,
            "--format",
            format,
            "--no-progress",
        ]);
        assert_eq!(o.code, 0, "{format}: {}", o.stderr);
        assert!(
            !o.stdout.contains('\u{1b}') && !o.stderr.contains('\u{1b}'),
            "{format}"
        );
        assert!(
            o.stdout.contains("HYPERLINK"),
            "{format}: the team is shown"
        );
        if matches!(format, "csv" | "focus") {
            assert!(
                !o.stdout.contains(",=HYPERLINK") && !o.stdout.contains(",\"=HYPERLINK"),
                "{format}: a formula cell: {}",
                o.stdout
            );
        }
    }
}
