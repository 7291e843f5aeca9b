//! # Rules: a policy as Prometheus recording and alerting rules
//!
//! `gpuwise check --emit-rules` turns the rules of `policy.toml` that Prometheus can hold
//! into a rule file, so the same guardrails fire in Alertmanager between runs of `check`:
//!
//! - `[idle]` over `gpuwise serve`'s `/metrics` (the same report `check` evaluates): each
//!   team's idle share of its GPU time, recorded, and an alert above the limit;
//! - `[stale]` over `/metrics` too: a device whose last sample is older than the limit
//!   (`gpuwise_device_last_sample_timestamp_seconds`; serve keeps a device that stopped
//!   reporting for the window it retains, so the alert fires as `check` does);
//! - `[notebooks]` over DCGM: a notebook pod's GPU below the idle threshold while holding at
//!   least the held-idle memory, for longer than the limit (`for:`).
//!
//! What `/metrics` and DCGM do not carry is left out and said, never approximated: budgets
//! (no month-to-date spend by team), the spot share (no pricing model), long jobs (the rule
//! reads each hour's majority and the device's price), devices hinted `notebook` in a
//! workloads file (only pod globs become a selector).
//!
//! The text is YAML written here: expressions are literal block scalars (no escaping inside),
//! annotations single-quoted strings. It needs no YAML library for that.

use std::fmt::Write as _;

use crate::check::Policy;

/// The profile's settings the rules must share with `check`.
#[derive(Clone, Copy, Debug)]
pub struct RuleSettings {
    /// Utilization below this is idle, %.
    pub idle_threshold_pct: f64,
    /// Memory in use that makes idle time held, MiB.
    pub held_idle_mib: f64,
}

/// The rule file, and the policy's rules it leaves out with why.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    /// Prometheus rule file (YAML).
    pub yaml: String,
    /// `(rule, why it is not in the file)`.
    pub left_out: Vec<(&'static str, &'static str)>,
}

struct Rule {
    kind: &'static str,
    name: String,
    expr: String,
    for_s: Option<f64>,
    labels: Vec<(&'static str, String)>,
    summary: String,
}

/// A Go duration Prometheus reads (`4h`, `90m`, `45s`).
fn duration(s: f64) -> String {
    let s = s.round().max(0.0) as u64;
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// A number as PromQL and YAML read it (no exponent, no trailing zeros).
fn num(v: f64) -> String {
    let t = format!("{v:.6}");
    t.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A shell glob (`*`, `?`) as an RE2 pattern, inside a PromQL double-quoted string: regex
/// metacharacters escaped, then backslashes and quotes escaped for the string.
fn glob_regex(glob: &str) -> String {
    let mut re = String::new();
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            '.' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '^' | '$' | '|' | '\\' => {
                re.push('\\');
                re.push(c);
            }
            _ => re.push(c),
        }
    }
    re.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A YAML single-quoted string.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The rule file for `policy`.
#[must_use]
pub fn prometheus_rules(policy: &Policy, s: &RuleSettings) -> Emitted {
    let mut rules = Vec::new();
    let mut left_out = Vec::new();
    if let Some(idle) = &policy.idle {
        rules.push(Rule {
            kind: "record",
            name: "gpuwise:team_idle_share:percent".into(),
            expr: "100 * sum by (team) (gpuwise_device_idle_seconds) / sum by (team) (gpuwise_device_gpu_seconds)".into(),
            for_s: None,
            labels: Vec::new(),
            summary: String::new(),
        });
        rules.push(Rule {
            kind: "alert",
            name: "GpuwiseIdleShare".into(),
            expr: format!("gpuwise:team_idle_share:percent > {}", num(idle.max_share_pct)),
            for_s: None,
            labels: vec![("rule", "idle_share".into())],
            summary: format!(
                "Team {{{{ $labels.team }}}}: {{{{ $value | printf \"%.1f\" }}}} % of its GPU time idle (policy: at most {} %)",
                num(idle.max_share_pct)
            ),
        });
    }
    if let Some(stale) = &policy.stale {
        rules.push(Rule {
            kind: "alert",
            name: "GpuwiseStaleTelemetry".into(),
            expr: format!(
                "time() - gpuwise_device_last_sample_timestamp_seconds > {}",
                num(stale.max_age_hours * 3600.0)
            ),
            for_s: None,
            labels: vec![("rule", "stale_telemetry".into())],
            summary: format!(
                "{{{{ $labels.device }}}} last reported {{{{ $value | humanizeDuration }}}} ago (policy: at most {} h)",
                num(stale.max_age_hours)
            ),
        });
    }
    if let Some(nb) = &policy.notebooks {
        if nb.pods.is_empty() {
            left_out.push((
                "notebook_held_idle",
                "no `pods` globs: devices hinted `notebook` in a workloads file are no selector Prometheus knows",
            ));
        } else {
            let pods = nb
                .pods
                .iter()
                .map(|g| glob_regex(g))
                .collect::<Vec<_>>()
                .join("|");
            let sel = format!("{{pod=~\"{pods}\"}}");
            rules.push(Rule {
                kind: "alert",
                name: "GpuwiseNotebookHeldIdle".into(),
                expr: format!(
                    "(DCGM_FI_DEV_GPU_UTIL{sel} < {}) and (DCGM_FI_DEV_FB_USED{sel} >= {})",
                    num(s.idle_threshold_pct),
                    num(s.held_idle_mib)
                ),
                for_s: Some(nb.max_held_idle_hours * 3600.0),
                labels: vec![("rule", "notebook_held_idle".into())],
                summary: format!(
                    "Notebook {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} holds GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} idle for over {} h",
                    num(nb.max_held_idle_hours)
                ),
            });
        }
    }
    if policy.budget.is_some() {
        left_out.push((
            "budget",
            "/metrics has no month-to-date spend by team: run `gpuwise check` for budgets",
        ));
    }
    if policy.spot.is_some() {
        left_out.push((
            "spot_share",
            "/metrics has no pricing model per device: run `gpuwise check` for the spot share",
        ));
    }
    if policy.long_jobs.is_some() {
        left_out.push((
            "long_job",
            "the rule reads whether each hour was mostly busy and the device's price, which no series carries: run `gpuwise check`",
        ));
    }
    Emitted {
        yaml: render(&rules, &left_out),
        left_out,
    }
}

fn render(rules: &[Rule], left_out: &[(&'static str, &'static str)]) -> String {
    let mut y = String::from(
        "# Prometheus rules from a gpuwise policy (`gpuwise check --emit-rules`, docs/policy.md).\n\
         # idle share and stale telemetry read `gpuwise serve`'s /metrics; held-idle notebooks read DCGM.\n",
    );
    for (rule, why) in left_out {
        let _ = writeln!(y, "# not here: {rule}: {why}");
    }
    y.push_str("groups:\n  - name: gpuwise-policy\n    rules:");
    if rules.is_empty() {
        y.push_str(" []\n");
        return y;
    }
    y.push('\n');
    for r in rules {
        let _ = writeln!(y, "      - {}: {}", r.kind, r.name);
        let _ = writeln!(y, "        expr: |\n          {}", r.expr);
        if let Some(f) = r.for_s {
            let _ = writeln!(y, "        for: {}", duration(f));
        }
        if r.kind == "alert" {
            y.push_str("        labels:\n          severity: warning\n");
            for (k, v) in &r.labels {
                let _ = writeln!(y, "          {k}: {}", quoted(v));
            }
            let _ = writeln!(
                y,
                "        annotations:\n          summary: {}",
                quoted(&r.summary)
            );
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: RuleSettings = RuleSettings {
        idle_threshold_pct: 5.0,
        held_idle_mib: 1024.0,
    };

    #[test]
    fn every_rule_is_emitted_or_said_to_be_left_out() {
        let p = Policy::from_toml(
            "[budget]\nmonthly_usd = { a = 1 }\n[idle]\nmax_share_pct = 30\n[notebooks]\nmax_held_idle_hours = 4\npods = [\"jupyter-*\", \"nb.v?\"]\n[long_jobs]\nmax_hours = 72\n[spot]\nmin_share_pct = 20\n[stale]\nmax_age_hours = 2.5\n",
            "p.toml",
        )
        .expect("policy");
        let e = prometheus_rules(&p, &SETTINGS);
        assert!(e.yaml.contains("gpuwise:team_idle_share:percent > 30\n"));
        assert!(e.yaml.contains("> 9000\n"), "{}", e.yaml);
        assert!(e.yaml.contains("for: 4h\n"));
        // Globs as anchored RE2 inside a PromQL string: `.` escaped, `*` and `?` translated.
        assert!(
            e.yaml.contains(r#"{pod=~"jupyter-.*|nb\\.v."}"#),
            "{}",
            e.yaml
        );
        let out: Vec<&str> = e.left_out.iter().map(|(r, _)| *r).collect();
        assert_eq!(out, ["budget", "spot_share", "long_job"]);
        for (rule, _) in &e.left_out {
            assert!(e.yaml.contains(&format!("# not here: {rule}: ")));
        }
    }

    #[test]
    fn durations_and_numbers_prometheus_reads() {
        assert_eq!(duration(4.0 * 3600.0), "4h");
        assert_eq!(duration(1.5 * 3600.0), "90m");
        assert_eq!(duration(45.0), "45s");
        assert_eq!(num(30.0), "30");
        assert_eq!(num(12.5), "12.5");
        assert_eq!(quoted("it's"), "'it''s'");
    }
}
