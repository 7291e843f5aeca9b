//! `gpuwise check`: the policy's rules over the report and the allocation; exit 1 on a
//! violation; `--notify` posts the outcome (Slack-compatible or generic JSON) with a timeout
//! and bounded retries.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use gpuwise_ledger::check::{self, Outcome, Policy};
use gpuwise_ledger::notify::{self, Style};
use gpuwise_render::{Format, RenderOptions};

use crate::cli::CheckArgs;
use crate::config::{Config, output_format};
use crate::fleet::Asks;
use crate::output::emit;
use crate::{duration, printer};

/// The URL without credentials, path or query (what messages may show: a webhook's secret is
/// its path, and a value that is not a URL at all — a Slack bot token pasted by mistake — is
/// never echoed).
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".to_owned();
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    format!("{scheme}://{host}/…")
}

/// A notification URL gpuwise will post to: https (a webhook URL is a credential, and the
/// outcome names teams and costs), or plain http to a loopback address (a local relay).
fn notify_url(url: &str) -> anyhow::Result<&str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        anyhow::bail!("--notify: {} is not an http(s) URL", redacted(url));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let name = host
        .strip_prefix('[')
        .and_then(|h| h.split_once(']').map(|(ip, _)| ip))
        .unwrap_or_else(|| host.rsplit_once(':').map_or(host, |(n, _)| n));
    let loopback = name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => anyhow::bail!(
            "--notify {}: plain http would send the webhook's secret path and the outcome in \
             clear; use https (plain http only to a loopback relay)",
            redacted(url)
        ),
        _ => anyhow::bail!("--notify: {} is not an http(s) URL", redacted(url)),
    }
}

/// POST `body` to `url`: a 2xx is done; 429, 5xx and transport errors are retried up to
/// `retries` times (1 s, 2 s, 4 s… apart); any other status fails at once, a redirect
/// included (it is not followed: the body would go to another origin as an empty GET).
fn post(
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
    retries: u32,
) -> anyhow::Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let text = body.to_string();
    let mut last = String::new();
    let mut attempts = 0;
    for attempt in 0..=retries {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1 << (attempt - 1).min(5)));
        }
        attempts += 1;
        match agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(text.as_bytes())
        {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) => {
                let code = resp.status().as_u16();
                last = if resp.status().is_redirection() {
                    format!(
                        "HTTP {code}, a redirect (not followed: point --notify at the final URL)"
                    )
                } else {
                    format!("HTTP {code}")
                };
                if code != 429 && code < 500 {
                    break;
                }
            }
            Err(e) => last = e.to_string().replace(url, &redacted(url)),
        }
    }
    Err(anyhow!(
        "notification to {} failed after {attempts} attempt(s): {last}",
        redacted(url)
    ))
}

fn notify_if_asked(args: &CheckArgs, o: &Outcome) -> anyhow::Result<()> {
    let Some(url) = args.notify.as_deref() else {
        anyhow::ensure!(
            !args.dry_run,
            "--dry-run shows what --notify would post: give --notify URL"
        );
        return Ok(());
    };
    let url = notify_url(url)?;
    let style: Style = args
        .notify_format
        .parse()
        .map_err(|e| anyhow!("--notify-format: {e}"))?;
    if o.violations.is_empty() && !args.notify_always {
        return Ok(());
    }
    let body = notify::message(o, style);
    if args.dry_run {
        printer::info(&format!("would POST to {}:", redacted(url)));
        eprintln_json(&body);
        return Ok(());
    }
    let timeout = duration::parse_positive_ms("notify-timeout", &args.notify_timeout)
        .map_err(|e| anyhow!(e))?;
    post(
        url,
        &body,
        Duration::from_millis(timeout),
        args.notify_retries,
    )?;
    printer::info(&format!("notified {}", redacted(url)));
    Ok(())
}

/// The dry-run body, on stderr (stdout carries the check itself).
#[allow(clippy::print_stderr)]
fn eprintln_json(v: &serde_json::Value) {
    eprintln!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// `--emit-rules`: the policy as a Prometheus rule file, with the profile's thresholds the
/// rules share with `check`; the rules Prometheus cannot hold said on stderr.
fn emit_rules(args: &CheckArgs, cfg: &Config, policy: &Policy) -> anyhow::Result<ExitCode> {
    let profile =
        crate::fleet::profile_settings(&args.fleet.analysis, cfg, crate::clock::now_ms()?)?;
    let e = gpuwise_ledger::rules::prometheus_rules(
        policy,
        &gpuwise_ledger::rules::RuleSettings {
            idle_threshold_pct: f64::from(profile.idle_threshold_pct),
            held_idle_mib: f64::from(profile.held_idle_min_mib),
        },
    );
    for (rule, why) in &e.left_out {
        printer::warn(&format!("{rule} is not in the rules: {why}"));
    }
    emit(&e.yaml, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        matches!(format, Format::Table | Format::Json | Format::Markdown),
        "--format: check prints table, json or markdown"
    );
    let path = args.policy.clone().or_else(|| cfg.policy.clone()).ok_or_else(|| {
        anyhow!("no policy: give --policy FILE (or `policy = \"FILE\"` in the config file; docs/policy.md)")
    })?;
    let policy = Policy::from_toml(&fs_err::read_to_string(&path)?, &path.display().to_string())?;
    if args.emit_rules {
        return emit_rules(args, &cfg, &policy);
    }
    // A URL that will not be posted to is said before the fleet is read.
    if let Some(url) = args.notify.as_deref() {
        notify_url(url)?;
    }
    let asks = Asks {
        workloads: args.workloads.as_deref(),
        alloc: Some(&args.alloc),
        ..Asks::default()
    };
    let fleet = crate::fleet::read(&args.fleet, &cfg, &asks, !args.out.no_progress)?;
    let allocation = fleet.allocation()?;
    check::known_teams(
        &policy,
        &allocation,
        &fleet.analysis.settings().teams.named_teams(),
        &path.display().to_string(),
    )?;
    let o = check::evaluate(
        &policy,
        &fleet.report,
        &fleet.profiles,
        &allocation,
        fleet.now_ms,
    );
    let terminal =
        args.out.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let color = terminal && printer::color_allowed(true);
    // Piped into a CI log (no terminal, no COLUMNS): one violation a line, not a table whose
    // last column is squeezed to a few characters and breaks ids mid-token.
    let text = if format == Format::Table && !terminal && std::env::var_os("COLUMNS").is_none() {
        gpuwise_ledger::view::check_log(&o)
    } else {
        gpuwise_ledger::view::check(&o, format, &RenderOptions { top: 0, color })?
    };
    emit(&text, args.out.output.as_ref())?;
    notify_if_asked(args, &o)?;
    if !o.not_evaluated.is_empty() {
        printer::warn(&format!(
            "{} rule(s) could not be decided{}",
            o.not_evaluated.len(),
            if args.fleet.read.strict {
                " (--strict: exit 1)"
            } else {
                " (--strict makes that exit 1)"
            }
        ));
    }
    Ok(
        if o.violations.is_empty() && (o.not_evaluated.is_empty() || !args.fleet.read.strict) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}
