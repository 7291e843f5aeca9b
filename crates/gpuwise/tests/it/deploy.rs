//! The deployment artefacts under `deploy/` checked by the tools their platforms use
//! (`deploy/check.py`: yamllint, kubernetes-validate, systemd-analyze), against this binary's
//! flags; and the checker itself fails on what it must catch.

use std::path::Path;
use std::process::Command;

use crate::common::repo;

/// Whether the tools are here: under CI they must be (`.ci/run` installs them).
fn tools() -> bool {
    let python = Command::new("python3")
        .args(["-c", "import yaml, yamllint, kubernetes_validate"])
        .status()
        .is_ok_and(|s| s.success());
    let systemd = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if python && systemd {
        return true;
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "deploy checks need python3 with yamllint and kubernetes-validate, and systemd-analyze: .ci/run installs them"
    );
    eprintln!("skipping: yamllint, kubernetes-validate or systemd-analyze is missing");
    false
}

fn check(dir: &Path) -> std::process::Output {
    Command::new("python3")
        .arg(dir.join("check.py"))
        .arg(env!("CARGO_BIN_EXE_gpuwise"))
        .output()
        .expect("python3")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).expect("copy");
        }
    }
}

fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    assert!(text.contains(from), "{} holds {from}", file.display());
    std::fs::write(file, text.replace(from, to)).expect("write");
}

#[test]
fn kubernetes_manifests_and_systemd_units_pass_their_tools() {
    if !tools() {
        return;
    }
    let o = check(&repo().join("deploy"));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{out}{err}");
    assert!(o.status.success(), "{out}{err}");
    for unit in ["gpuwise-record.service", "gpuwise-serve.service"] {
        let score: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{unit}: exposure ")))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{unit}'s score in {out}"));
        assert!(score <= 2.0, "{unit}: {score}");
    }
}

#[test]
fn the_deploy_checker_catches_a_renamed_flag_a_wrong_port_a_bad_policy_and_a_loose_unit() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("deploy");
    copy_dir(&repo().join("deploy"), &dir);
    edit(
        &dir.join("kubernetes/record-daemonset.yaml"),
        "- --flush",
        "- --flush-every",
    );
    edit(
        &dir.join("kubernetes/servicemonitor.yaml"),
        "- port: metrics",
        "- port: prometheus",
    );
    edit(
        &dir.join("kubernetes/serve-config.yaml"),
        "max_share_pct = 30",
        "max_share_pct = 300",
    );
    edit(
        &dir.join("systemd/gpuwise-serve.service"),
        "ExecStart=/usr/local/bin/gpuwise serve",
        "ExecStart=/usr/local/bin/gpuwise serve --watch",
    );
    let o = check(&dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("has no flag --flush-every"), "{err}");
    assert!(err.contains("has no flag --watch"), "{err}");
    assert!(err.contains("endpoint port prometheus is no port"), "{err}");
    assert!(
        err.contains("policy.toml: ") && err.contains("within 0–100, got 300"),
        "{err}"
    );
    // A unit that gives up its sandbox scores above the bar.
    let loose = tmp.path().join("loose");
    copy_dir(&repo().join("deploy"), &loose);
    let unit = loose.join("systemd/gpuwise-serve.service");
    let text = std::fs::read_to_string(&unit).expect("unit");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.starts_with("Protect")
                && !l.starts_with("Restrict")
                && !l.starts_with("SystemCall")
                && !l.starts_with("Capability")
                && !l.starts_with("Private")
                && !l.starts_with("DynamicUser")
                && !l.starts_with("NoNewPrivileges")
        })
        .collect();
    std::fs::write(&unit, kept.join("\n")).expect("write");
    let o = check(&loose);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("gpuwise-serve.service: exposure") && err.contains("is above 2"),
        "{err}"
    );
}
