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

const POLICY: &str = "[idle]\nmax_share_pct = 30\n[notebooks]\nmax_held_idle_hours = 4\npods = [\"jupyter-*\"]\n[stale]\nmax_age_hours = 2\n[budget]\nmonthly_usd = { research = 1000 }\n";

#[test]
fn emitted_rules_pass_promtool_and_fire_on_known_series() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let rules = emit(POLICY, tmp.path());
    // What cannot be a Prometheus rule is said, in the file and on stderr.
    assert!(rules.contains("# not here: budget: "), "{rules}");
    let file = tmp.path().join("rules.yml");
    std::fs::write(&file, &rules).expect("rules");
    let o = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("SUCCESS: 4 rules found"));
    // Known answers, one minute apart: team a idle 40 % of its GPU time (above 30), team b 20 %;
    // device x last reported at 0 s (stale after 2 h), y at 10,000 s; notebook jupyter-a idle
    // holding 2 GiB for 5 h (past 4 h), jupyter-b for 3 h, a training pod idle all along.
    let labels = |pod: &str| {
        format!("{{gpu=\"0\",UUID=\"GPU-{pod}\",Hostname=\"h\",namespace=\"ml\",pod=\"{pod}\"}}")
    };
    let test = format!(
        r#"rule_files: ['{rules}']
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'gpuwise_device_idle_seconds{{device="a/0",host="a",model="H100",team="a"}}'
        values: '4000x400'
      - series: 'gpuwise_device_gpu_seconds{{device="a/0",host="a",model="H100",team="a"}}'
        values: '10000x400'
      - series: 'gpuwise_device_idle_seconds{{device="b/0",host="b",model="H100",team="b"}}'
        values: '2000x400'
      - series: 'gpuwise_device_gpu_seconds{{device="b/0",host="b",model="H100",team="b"}}'
        values: '10000x400'
      - series: 'gpuwise_device_last_sample_timestamp_seconds{{device="x/0",host="x",model="H100",team="a"}}'
        values: '0x400'
      - series: 'gpuwise_device_last_sample_timestamp_seconds{{device="y/0",host="y",model="H100",team="a"}}'
        values: '10000x400'
      - series: 'DCGM_FI_DEV_GPU_UTIL{nb_a}'
        values: '0x300 80x100'
      - series: 'DCGM_FI_DEV_FB_USED{nb_a}'
        values: '2048x400'
      - series: 'DCGM_FI_DEV_GPU_UTIL{nb_b}'
        values: '0x180 80x220'
      - series: 'DCGM_FI_DEV_FB_USED{nb_b}'
        values: '2048x400'
      - series: 'DCGM_FI_DEV_GPU_UTIL{train}'
        values: '0x400'
      - series: 'DCGM_FI_DEV_FB_USED{train}'
        values: '2048x400'
    promql_expr_test:
      - expr: gpuwise:team_idle_share:percent
        eval_time: 10m
        exp_samples:
          - labels: 'gpuwise:team_idle_share:percent{{team="a"}}'
            value: 40
          - labels: 'gpuwise:team_idle_share:percent{{team="b"}}'
            value: 20
    alert_rule_test:
      - eval_time: 10m
        alertname: GpuwiseIdleShare
        exp_alerts:
          - exp_labels: {{severity: warning, rule: idle_share, team: a}}
            exp_annotations:
              summary: 'Team a: 40.0 % of its GPU time idle (policy: at most 30 %)'
      - eval_time: 3h
        alertname: GpuwiseStaleTelemetry
        exp_alerts:
          - exp_labels: {{severity: warning, rule: stale_telemetry, device: x/0, host: x, model: H100, team: a}}
            exp_annotations:
              summary: 'x/0 last reported 3h 0m 0s ago (policy: at most 2 h)'
      - eval_time: 1h
        alertname: GpuwiseStaleTelemetry
        exp_alerts: []
      - eval_time: 4h30m
        alertname: GpuwiseNotebookHeldIdle
        exp_alerts:
          - exp_labels: {{severity: warning, rule: notebook_held_idle, gpu: "0", UUID: GPU-jupyter-a, Hostname: h, namespace: ml, pod: jupyter-a}}
            exp_annotations:
              summary: 'Notebook ml/jupyter-a holds GPU 0 on h idle for over 4 h'
      - eval_time: 3h50m
        alertname: GpuwiseNotebookHeldIdle
        exp_alerts: []
"#,
        rules = file.display(),
        nb_a = labels("jupyter-a"),
        nb_b = labels("jupyter-b"),
        train = labels("train-x"),
    );
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
    let o = run(&[
        "check",
        logs,
        "--teams",
        teams,
        "--policy",
        &policy.display().to_string(),
        "--format",
        "json",
    ]);
    assert!(o.code == 0 || o.code == 1, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|x| x["rule"] == "idle_share")
        .map(|x| {
            (
                x["subject"].as_str().expect("team").to_owned(),
                x["value"].as_f64().expect("share"),
            )
        })
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
