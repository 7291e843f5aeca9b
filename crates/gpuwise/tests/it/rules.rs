//! `gpuwise check --emit-rules`: the policy as Prometheus rules, checked by `promtool check
//! rules`, behaving as written on series with known answers (`promtool test rules`), and giving
//! `check`'s own verdicts when a real Prometheus evaluates them over a real `gpuwise serve`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::run;
use crate::prometheus::{query, scraping_with, tools};
use crate::serve::{Served, fleet};

fn emit(policy: &str, dir: &std::path::Path) -> String {
    let path = dir.join("policy.toml");
    std::fs::write(&path, policy).expect("policy");
    let o = run(&[
        "check",
        "--emit-rules",
        "--policy",
        &path.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.stdout
}

const POLICY: &str = "[idle]\nmax_share_pct = 30\n[notebooks]\nmax_held_idle_hours = 4\npods = [\"jupyter-*\"]\n[stale]\nmax_age_hours = 2\n[budget]\nmonthly_usd = { a = 1000, b = 1000, c = 1000 }\n[spot]\nmin_share_pct = 20\n[long_jobs]\nmax_hours = 72\nmin_usd_per_hour = 10\n";

#[test]
fn emitted_rules_pass_promtool_and_fire_on_known_series() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let rules = emit(POLICY, tmp.path());
    // What cannot be a Prometheus rule is said, in the file and on stderr.
    assert!(rules.contains("# not here: spot_share: "), "{rules}");
    let file = tmp.path().join("rules.yml");
    std::fs::write(&file, &rules).expect("rules");
    let o = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("SUCCESS: 7 rules found"));
    // Known answers (tests/data/rules/promtool-tests.yml says which): idle shares, budgets,
    // long jobs and stale devices over /metrics, held-idle notebooks over DCGM.
    let test = std::fs::read_to_string(crate::common::data("rules/promtool-tests.yml"))
        .expect("the cases")
        .replace("RULES_FILE", &file.display().to_string());
    let tests = tmp.path().join("tests.yml");
    std::fs::write(&tests, test).expect("tests");
    let o = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&tests)
        .output()
        .expect("promtool");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Idle share per team from `check --format json` with the limit at 0 (every team reported
/// with its share).
fn check_shares(
    logs: &str,
    teams: &str,
    dir: &std::path::Path,
    limit: f64,
) -> BTreeMap<String, f64> {
    let policy = dir.join(format!("idle-{limit}.toml"));
    std::fs::write(&policy, format!("[idle]\nmax_share_pct = {limit}\n")).expect("policy");
    check_at(crate::common::NOW, logs, teams, &policy)
        .into_iter()
        .filter(|((rule, _), _)| rule == "idle_share")
        .map(|((_, team), v)| (team, v["value"].as_f64().expect("share")))
        .collect()
}

#[test]
fn prometheus_evaluating_the_rules_over_serve_agrees_with_check() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let logs = fleet(tmp.path(), "40", "2");
    let teams = tmp.path().join("teams.toml");
    std::fs::write(
        &teams,
        "[hosts]\n\"nb-*\" = \"notebooks\"\n\"serve-*\" = \"serving\"\n\"train-*\" = \"research\"\n",
    )
    .expect("teams");
    let teams = teams.display().to_string();
    // Every team's share, then a limit between them: some teams over it, some not.
    let all = check_shares(&logs, &teams, tmp.path(), 0.0);
    assert_eq!(all.len(), 3, "{all:?}");
    let mut shares: Vec<f64> = all.values().copied().collect();
    shares.sort_by(f64::total_cmp);
    let limit = ((shares[0] + shares[1]) / 2.0 * 10.0).round() / 10.0;
    let over = check_shares(&logs, &teams, tmp.path(), limit);
    assert!(
        !over.is_empty() && over.len() < all.len(),
        "{limit}: {over:?} of {all:?}"
    );
    let rules = emit(&format!("[idle]\nmax_share_pct = {limit}\n"), tmp.path());
    let served = Served::start(&[&logs, "--teams", &teams], &[]);
    let target = served.base.trim_start_matches("http://").to_owned();
    let prom = scraping_with(&tmp.path().join("prom"), &target, &rules);
    let firing = |p: u16| -> BTreeMap<String, f64> {
        let Some(v) = query(
            p,
            "ALERTS{alertname=\"GpuwiseIdleShare\",alertstate=\"firing\"}",
        ) else {
            return BTreeMap::new();
        };
        v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let team = r["metric"]["team"].as_str()?.to_owned();
                let share = query(
                    p,
                    &format!("gpuwise:team_idle_share:percent{{team=\"{team}\"}}"),
                )?["data"]["result"][0]["value"][1]
                    .as_str()?
                    .parse()
                    .ok()?;
                Some((team, share))
            })
            .collect()
    };
    let t0 = Instant::now();
    let mut got = BTreeMap::new();
    while t0.elapsed() < Duration::from_secs(60) {
        got = firing(prom.port);
        if got.len() == over.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        over.keys().collect::<Vec<_>>(),
        "the teams Prometheus alerts on are the teams check names (limit {limit} %)"
    );
    for (team, share) in &got {
        assert!(
            (share - over[team]).abs() < 0.05,
            "{team}: {share} in Prometheus, {} in check",
            over[team]
        );
    }
}

/// A command at `now` (the data, `check` and `serve` must share one clock).
pub(crate) fn at(now: &str, args: &[&str]) -> crate::common::Out {
    let o = crate::common::cmd()
        .env("GPUWISE_NOW", now)
        .args(args)
        .output()
        .expect("gpuwise runs");
    crate::common::Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `check --format json` at `now`: (rule, subject) → the violation.
fn check_at(
    now: &str,
    logs: &str,
    teams: &str,
    policy: &std::path::Path,
) -> BTreeMap<(String, String), serde_json::Value> {
    let o = at(
        now,
        &[
            "check",
            logs,
            "--teams",
            teams,
            "--policy",
            &policy.display().to_string(),
            "--format",
            "json",
        ],
    );
    assert!(o.code == 0 || o.code == 1, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .map(|x| {
            (
                (
                    x["rule"].as_str().expect("rule").to_owned(),
                    x["subject"].as_str().expect("team").to_owned(),
                ),
                x.clone(),
            )
        })
        .collect()
}

#[test]
fn budgets_alert_in_prometheus_as_check_says() {
    if !tools() {
        return;
    }
    // Mid-month, so the month to date has data and a forecast.
    const NOW: &str = "2026-11-20T00:00:00Z";
    let tmp = tempfile::tempdir().expect("tempdir");
    let logs = fleet_at(tmp.path(), NOW, "40", "3", "11", &[]);
    std::fs::remove_file(tmp.path().join("fleet/truth.json")).expect("truth");
    let teams = tmp.path().join("teams.toml");
    std::fs::write(&teams, "[hosts]\n\"nb-*\" = \"notebooks\"\n\"serve-*\" = \"serving\"\n\"train-*\" = \"research\"\n").expect("teams");
    let teams = teams.display().to_string();
    // A cent each: every team over, with its month to date and forecast in the evidence.
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[budget]\nmonthly_usd = { notebooks = 0.01, serving = 0.01, research = 0.01 }\n",
    )
    .expect("policy");
    let all = check_at(NOW, &logs, &teams, &policy);
    let figure = |team: &str, k: &str| {
        all[&("budget".to_owned(), team.to_owned())]["evidence"][k]
            .as_f64()
            .expect(k)
    };
    // research over its budget; serving under it but forecast over; notebooks well under.
    let (r, s, n) = (
        figure("research", "month_to_date_usd") / 2.0,
        (figure("serving", "month_to_date_usd") + figure("serving", "forecast_usd")) / 2.0,
        figure("notebooks", "forecast_usd") * 2.0,
    );
    assert!(figure("serving", "forecast_usd") > figure("serving", "month_to_date_usd") * 1.05);
    std::fs::write(
        &policy,
        format!("[budget]\nmonthly_usd = {{ research = {r:.2}, serving = {s:.2}, notebooks = {n:.2} }}\n"),
    )
    .expect("policy");
    let want: Vec<(String, String)> = check_at(NOW, &logs, &teams, &policy).into_keys().collect();
    assert_eq!(
        want,
        [
            ("budget".to_owned(), "research".to_owned()),
            ("budget_forecast".to_owned(), "serving".to_owned())
        ]
    );
    let rules = emit(
        &std::fs::read_to_string(&policy).expect("policy"),
        tmp.path(),
    );
    let policy = policy.display().to_string();
    let served = Served::start(
        &[&logs, "--teams", &teams, "--policy", &policy],
        &[("GPUWISE_NOW", NOW)],
    );
    let target = served.base.trim_start_matches("http://").to_owned();
    let prom = scraping_with(&tmp.path().join("prom"), &target, &rules);
    let firing = |p: u16| -> Vec<(String, String)> {
        let Some(v) = query(p, "ALERTS{alertstate=\"firing\"}") else {
            return Vec::new();
        };
        let mut got: Vec<(String, String)> = v["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                Some((
                    a["metric"]["rule"].as_str()?.to_owned(),
                    a["metric"]["team"].as_str()?.to_owned(),
                ))
            })
            .collect();
        got.sort();
        got
    };
    let t0 = Instant::now();
    let mut got = Vec::new();
    while t0.elapsed() < Duration::from_secs(60) && got != want {
        std::thread::sleep(Duration::from_millis(500));
        got = firing(prom.port);
    }
    assert_eq!(got, want, "Prometheus alerts on the budgets check names");
}

#[test]
fn long_jobs_alert_in_prometheus_as_check_says() {
    if !tools() {
        return;
    }
    const NOW: &str = "2026-11-20T00:00:00Z";
    let tmp = tempfile::tempdir().expect("tempdir");
    let logs = fleet_at(tmp.path(), NOW, "40", "4", "11", &[]);
    let teams = tmp.path().join("teams.toml");
    std::fs::write(&teams, "[hosts]\n\"*\" = \"all\"\n").expect("teams");
    let teams = teams.display().to_string();
    // Every priced device's longest busy run (a limit of 0 h names them all), then a limit
    // between the runs: some devices over it, some not.
    let policy = tmp.path().join("policy.toml");
    std::fs::write(&policy, "[long_jobs]\nmax_hours = 0\n").expect("policy");
    let runs: Vec<f64> = check_at(NOW, &logs, &teams, &policy)
        .values()
        .map(|v| &v["evidence"])
        .map(|e| e["cost_usd"].as_f64().expect("cost") / e["usd_per_hour"].as_f64().expect("rate"))
        .collect();
    let mut distinct = runs.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| (*a - *b).abs() < 0.5);
    assert!(distinct.len() >= 2, "{runs:?}");
    let mid = distinct.len() / 2;
    let limit = ((distinct[mid - 1] + distinct[mid]) / 2.0).floor();
    std::fs::write(
        &policy,
        format!("[long_jobs]\nmax_hours = {limit}\nmin_usd_per_hour = 0.5\n"),
    )
    .expect("policy");
    let want: Vec<String> = check_at(NOW, &logs, &teams, &policy)
        .into_keys()
        .map(|(_, d)| d)
        .collect();
    assert!(
        !want.is_empty() && want.len() < runs.len(),
        "{limit}: {want:?}"
    );
    let rules = emit(
        &std::fs::read_to_string(&policy).expect("policy"),
        tmp.path(),
    );
    let served = Served::start(&[&logs, "--teams", &teams], &[("GPUWISE_NOW", NOW)]);
    let target = served.base.trim_start_matches("http://").to_owned();
    let prom = scraping_with(&tmp.path().join("prom"), &target, &rules);
    let got = firing_until(prom.port, "GpuwiseLongJob", "device", &want);
    assert_eq!(
        got, want,
        "Prometheus alerts on the devices check names (limit {limit} h)"
    );
}

#[test]
fn stale_telemetry_alerts_in_prometheus_as_check_says() {
    if !tools() {
        return;
    }
    // Prometheus' time() is the real clock: the data ends now, and one host stopped 3 h ago.
    let now = jiff::Timestamp::now();
    let start = now
        .checked_sub(jiff::SignedDuration::from_hours(24))
        .expect("a day ago");
    let now_text = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let tmp = tempfile::tempdir().expect("tempdir");
    let start_text = start.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let logs = std::path::PathBuf::from(fleet_at(
        tmp.path(),
        &now_text,
        "16",
        "1",
        "3",
        &["--start", &start_text],
    ));
    let cutoff = now
        .checked_sub(jiff::SignedDuration::from_hours(3))
        .expect("3 h ago")
        .strftime("%Y/%m/%d %H:%M:%S")
        .to_string();
    let mut hosts: Vec<_> = std::fs::read_dir(&logs)
        .expect("fleet")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    hosts.sort();
    assert!(hosts.len() >= 2, "{hosts:?}");
    let stopped = &hosts[0];
    let text = std::fs::read_to_string(stopped).expect("log");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("timestamp") || l[..19] < *cutoff)
        .collect();
    std::fs::write(stopped, kept.join("\n") + "\n").expect("truncate");
    let policy = tmp.path().join("policy.toml");
    std::fs::write(&policy, "[stale]\nmax_age_hours = 2\n").expect("policy");
    let teams = tmp.path().join("teams.toml");
    std::fs::write(&teams, "[hosts]\n\"*\" = \"all\"\n").expect("teams");
    let (logs, teams) = (logs.display().to_string(), teams.display().to_string());
    let want: Vec<String> = check_at(&now_text, &logs, &teams, &policy)
        .into_keys()
        .map(|(_, d)| d)
        .collect();
    let host = stopped
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    assert!(
        !want.is_empty() && want.iter().all(|d| d.starts_with(&format!("{host}/"))),
        "{want:?}"
    );
    let rules = emit(
        &std::fs::read_to_string(&policy).expect("policy"),
        tmp.path(),
    );
    let served = Served::start(&[&logs, "--teams", &teams], &[("GPUWISE_NOW", &now_text)]);
    let target = served.base.trim_start_matches("http://").to_owned();
    let prom = scraping_with(&tmp.path().join("prom"), &target, &rules);
    let got = firing_until(prom.port, "GpuwiseStaleTelemetry", "device", &want);
    assert_eq!(
        got, want,
        "Prometheus alerts on the devices check finds stale"
    );
}

/// The `label` values of the firing `alert`s, sorted, once they equal `want` or a minute passed.
fn firing_until(port: u16, alert: &str, label: &str, want: &[String]) -> Vec<String> {
    let t0 = Instant::now();
    let mut got: Vec<String> = Vec::new();
    while t0.elapsed() < Duration::from_secs(60) && got != want {
        std::thread::sleep(Duration::from_millis(500));
        got = query(
            port,
            &format!("ALERTS{{alertname=\"{alert}\",alertstate=\"firing\"}}"),
        )
        .map(|v| {
            let mut d: Vec<String> = v["data"]["result"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["metric"][label].as_str().map(str::to_owned))
                .collect();
            d.sort();
            d
        })
        .unwrap_or_default();
    }
    got
}

/// A generated fleet (nvidia-smi, 5-minute samples) in `dir/fleet`, written at `now`; `extra`
/// adds flags (`--start`). Returns the folder.
pub(crate) fn fleet_at(
    dir: &std::path::Path,
    now: &str,
    gpus: &str,
    days: &str,
    seed: &str,
    extra: &[&str],
) -> String {
    let logs = dir.join("fleet").display().to_string();
    let mut args = vec![
        "generate",
        "--out",
        &logs,
        "--gpus",
        gpus,
        "--days",
        days,
        "--interval",
        "5m",
        "--format",
        "nvidia-smi",
        "--seed",
        seed,
    ];
    args.extend_from_slice(extra);
    let g = at(now, &args);
    assert_eq!(g.code, 0, "{}", g.stderr);
    logs
}
