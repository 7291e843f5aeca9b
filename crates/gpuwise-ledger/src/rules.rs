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
//!   least the held-idle memory, for longer than the limit (`for:`);
//! - `[budget]` over `/metrics` of a server given the same policy (`serve --policy`): each
//!   team's month to date against its budget, and the forecast against it while not yet over;
//! - `[long_jobs]` over `/metrics`: a device's longest run of mostly-busy hours (the profile's
//!   own `longest_busy_run`, as `check` reads it) above the limit at or above the hourly price
//!   (a device without a price never fires: `check` cannot decide it either).
//!
//! What `/metrics` and DCGM do not carry is left out and said, never approximated: the spot
//! share (no pricing model per device), devices hinted `notebook` in a workloads file (only
//! pod globs become a selector).
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
        rules.extend(idle_rules(idle.max_share_pct));
    }
    if let Some(stale) = &policy.stale {
        rules.push(stale_rule(stale.max_age_hours));
    }
    if let Some(nb) = &policy.notebooks {
        match notebook_rule(nb, s) {
            Some(r) => rules.push(r),
            None => left_out.push((
                "notebook_held_idle",
                "no `pods` globs: devices hinted `notebook` in a workloads file are no selector Prometheus knows",
            )),
        }
    }
    if let Some(lj) = &policy.long_jobs {
        rules.push(long_job_rule(lj.max_hours, lj.min_usd_per_hour));
    }
    if policy
        .budget
        .as_ref()
        .is_some_and(|b| !b.monthly_usd.is_empty())
    {
        rules.extend(budget_rules());
    }
    if policy.spot.is_some() {
        left_out.push((
            "spot_share",
            "/metrics has no pricing model per device: run `gpuwise check` for the spot share",
        ));
    }
    Emitted {
        yaml: render(&rules, &left_out),
        left_out,
    }
}

fn alert(name: &str, rule: &'static str, expr: String, summary: String) -> Rule {
    Rule {
        kind: "alert",
        name: name.into(),
        expr,
        for_s: None,
        labels: vec![("rule", rule.into())],
        summary,
    }
}

fn idle_rules(max_share_pct: f64) -> [Rule; 2] {
    [
        Rule {
            kind: "record",
            name: "gpuwise:team_idle_share:percent".into(),
            expr: "100 * sum by (team) (gpuwise_device_idle_seconds) / sum by (team) (gpuwise_device_gpu_seconds)".into(),
            for_s: None,
            labels: Vec::new(),
            summary: String::new(),
        },
        alert(
            "GpuwiseIdleShare",
            "idle_share",
            format!("gpuwise:team_idle_share:percent > {}", num(max_share_pct)),
            format!(
                "Team {{{{ $labels.team }}}}: {{{{ $value | printf \"%.1f\" }}}} % of its GPU time idle (policy: at most {} %)",
                num(max_share_pct)
            ),
        ),
    ]
}

fn stale_rule(max_age_hours: f64) -> Rule {
    alert(
        "GpuwiseStaleTelemetry",
        "stale_telemetry",
        format!(
            "time() - gpuwise_device_last_sample_timestamp_seconds > {}",
            num(max_age_hours * 3600.0)
        ),
        format!(
            "{{{{ $labels.device }}}} last reported {{{{ $value | humanizeDuration }}}} ago (policy: at most {} h)",
            num(max_age_hours)
        ),
    )
}

/// Held-idle notebooks over DCGM, when the policy names notebook pods.
fn notebook_rule(nb: &crate::check::NotebookRule, s: &RuleSettings) -> Option<Rule> {
    if nb.pods.is_empty() {
        return None;
    }
    let pods = nb
        .pods
        .iter()
        .map(|g| glob_regex(g))
        .collect::<Vec<_>>()
        .join("|");
    let sel = format!("{{pod=~\"{pods}\"}}");
    let mut r = alert(
        "GpuwiseNotebookHeldIdle",
        "notebook_held_idle",
        format!(
            "(DCGM_FI_DEV_GPU_UTIL{sel} < {}) and (DCGM_FI_DEV_FB_USED{sel} >= {})",
            num(s.idle_threshold_pct),
            num(s.held_idle_mib)
        ),
        format!(
            "Notebook {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} holds GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} idle for over {} h",
            num(nb.max_held_idle_hours)
        ),
    );
    r.for_s = Some(nb.max_held_idle_hours * 3600.0);
    Some(r)
}

fn long_job_rule(max_hours: f64, min_usd_per_hour: f64) -> Rule {
    alert(
        "GpuwiseLongJob",
        "long_job",
        format!(
            "gpuwise_device_longest_busy_run_seconds > {} and gpuwise_device_usd_per_hour >= {}",
            num(max_hours * 3600.0),
            num(min_usd_per_hour)
        ),
        format!(
            "{{{{ $labels.device }}}} has run {{{{ $value | humanizeDuration }}}} without a break (policy: at most {} h at ${}/h or more)",
            num(max_hours),
            num(min_usd_per_hour)
        ),
    )
}

fn budget_rules() -> [Rule; 2] {
    let over = "gpuwise_team_month_to_date_usd > on (team, month) gpuwise_team_budget_usd";
    [
        alert(
            "GpuwiseBudget",
            "budget",
            over.into(),
            "Team {{ $labels.team }} has spent ${{ $value | printf \"%.0f\" }} in {{ $labels.month }}, over its budget".into(),
        ),
        alert(
            "GpuwiseBudgetForecast",
            "budget_forecast",
            format!(
                "(gpuwise_team_month_forecast_usd > on (team, month) gpuwise_team_budget_usd) unless on (team, month) ({over})"
            ),
            "Team {{ $labels.team }} is forecast to end {{ $labels.month }} at ${{ $value | printf \"%.0f\" }}, over its budget".into(),
        ),
    ]
}

fn render(rules: &[Rule], left_out: &[(&'static str, &'static str)]) -> String {
    let mut y = String::from(
        "# Prometheus rules from a gpuwise policy (`gpuwise check --emit-rules`, docs/policy.md).\n\
         # idle share, stale telemetry, long jobs and budgets read `gpuwise serve`'s /metrics (budgets:\n\
         # serve --policy with this policy); held-idle notebooks read DCGM.\n",
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
        assert_eq!(out, ["spot_share"]);
        assert!(e.yaml.contains(
            "gpuwise_device_longest_busy_run_seconds > 259200 and gpuwise_device_usd_per_hour >= 0\n"
        ));
        assert!(e.yaml.contains("alert: GpuwiseBudget\n"));
        assert!(e.yaml.contains("unless on (team, month)"));
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
