//! Posting a message to a webhook (`check --notify`, `jobs --notify`): only to https, or plain
//! http on loopback; credentials and the secret path never in a message; a timeout and
//! bounded retries; `--dry-run` prints the body instead.

use std::time::Duration;

use anyhow::anyhow;
use gpuwise_ledger::notify::Style;

use crate::cli::NotifyArgs;
use crate::{duration, printer};

/// The URL without credentials, path or query (what messages may show: a webhook's secret is
/// its path, and a value that is not a URL at all — a Slack bot token pasted by mistake — is
/// never echoed).
pub(crate) fn redacted(url: &str) -> String {
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

/// Where and how to post, checked before any work is done.
pub(crate) struct Target<'a> {
    url: &'a str,
    /// The body's shape.
    pub(crate) style: Style,
    dry_run: bool,
    timeout: Duration,
    retries: u32,
}

impl<'a> Target<'a> {
    /// The target `--notify` names (`None` without one); a URL that will not be posted to, a
    /// style or a timeout that is not one, is an error now, before the fleet is read.
    pub(crate) fn of(args: &'a NotifyArgs) -> anyhow::Result<Option<Self>> {
        let Some(url) = args.notify.as_deref() else {
            anyhow::ensure!(
                !args.dry_run,
                "--dry-run shows what --notify would post: give --notify URL"
            );
            return Ok(None);
        };
        let url = notify_url(url)?;
        let style: Style = args
            .notify_format
            .parse()
            .map_err(|e| anyhow!("--notify-format: {e}"))?;
        let timeout = duration::parse_positive_ms("notify-timeout", &args.notify_timeout)
            .map_err(|e| anyhow!(e))?;
        Ok(Some(Self {
            url,
            style,
            dry_run: args.dry_run,
            timeout: Duration::from_millis(timeout),
            retries: args.notify_retries,
        }))
    }

    /// Post `body` (or, with `--dry-run`, print it).
    pub(crate) fn send(&self, body: &serde_json::Value) -> anyhow::Result<()> {
        if self.dry_run {
            printer::info(&format!("would POST to {}:", redacted(self.url)));
            eprintln_json(body);
            return Ok(());
        }
        post(self.url, body, self.timeout, self.retries)?;
        printer::info(&format!("notified {}", redacted(self.url)));
        Ok(())
    }
}

/// The dry-run body, on stderr (stdout carries the check itself).
#[allow(clippy::print_stderr)]
fn eprintln_json(v: &serde_json::Value) {
    eprintln!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}
