//! # The message `check --notify` posts
//!
//! Two bodies: Slack-compatible (`text` for notifications and clients without blocks, `blocks`
//! with a header and one section per violation; Slack caps a message at 50 blocks, so the
//! rest are summarised in one line) and generic (the `gpuwise.check/v1` outcome itself). The
//! posting (timeout, retries) is the binary's; this is only the body.

use serde_json::{Value, json};

use crate::check::Outcome;

/// Which body to post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Slack incoming webhook (`text` + `blocks`).
    Slack,
    /// The check's own JSON.
    Generic,
}

/// `--notify-format` that is neither.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a notification format: use slack or generic")]
pub struct StyleError(String);

impl std::str::FromStr for Style {
    type Err = StyleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "slack" => Ok(Self::Slack),
            "generic" | "json" => Ok(Self::Generic),
            _ => Err(StyleError(s.to_owned())),
        }
    }
}

/// Slack allows 50 blocks; two go to the header and the tail line.
const MAX_VIOLATION_BLOCKS: usize = 47;

/// The summary line.
#[must_use]
pub fn headline(o: &Outcome) -> String {
    let undecided = if o.not_evaluated.is_empty() {
        String::new()
    } else {
        format!("; {} could not be decided", o.not_evaluated.len())
    };
    if o.violations.is_empty() && o.not_evaluated.is_empty() {
        format!(
            "gpuwise check: all {} rule(s) pass",
            o.rules_evaluated.len()
        )
    } else if o.violations.is_empty() {
        format!(
            "gpuwise check: no violation of {} rule(s){undecided}",
            o.rules_evaluated.len()
        )
    } else {
        format!(
            "gpuwise check: {} violation(s) of {} rule(s){undecided}",
            o.violations.len(),
            o.rules_evaluated.len()
        )
    }
}

/// The body to post.
#[must_use]
pub fn message(o: &Outcome, style: Style) -> Value {
    match style {
        Style::Generic => serde_json::to_value(o).unwrap_or(Value::Null),
        Style::Slack => {
            let head = headline(o);
            let mut text = head.clone();
            for v in &o.violations {
                text.push_str(&format!("\n• [{}] {}", v.rule, slack_escape(&v.message)));
            }
            let mut blocks = vec![json!({
                "type": "header",
                "text": {"type": "plain_text", "text": head}
            })];
            for v in o.violations.iter().take(MAX_VIOLATION_BLOCKS) {
                blocks.push(json!({
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": format!("*{}* — {}", slack_escape(v.rule), slack_escape(&v.message))}
                }));
            }
            if o.violations.len() > MAX_VIOLATION_BLOCKS {
                blocks.push(json!({
                    "type": "context",
                    "elements": [{"type": "mrkdwn", "text": format!("… and {} more", o.violations.len() - MAX_VIOLATION_BLOCKS)}]
                }));
            }
            json!({"text": text, "blocks": blocks})
        }
    }
}

/// Slack's three control characters in mrkdwn (labels can be hostile).
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Policy, Violation};

    fn outcome(n: usize) -> Outcome {
        Outcome {
            schema: crate::check::SCHEMA,
            policy: Policy::default(),
            rules_evaluated: vec!["budget"],
            violations: (0..n)
                .map(|i| Violation {
                    rule: "budget",
                    subject: format!("t{i}"),
                    message: format!("<!channel> t{i} over"),
                    value: 2.0,
                    limit: 1.0,
                    evidence: Default::default(),
                })
                .collect(),
            not_evaluated: vec![],
        }
    }

    #[test]
    fn slack_bodies_stay_within_fifty_blocks_and_escape_mentions() {
        let m = message(&outcome(60), Style::Slack);
        let blocks = m["blocks"].as_array().expect("blocks");
        assert_eq!(blocks.len(), 49);
        assert!(
            blocks[1]["text"]["text"]
                .as_str()
                .expect("text")
                .contains("&lt;!channel&gt;")
        );
        assert!(
            m["text"]
                .as_str()
                .expect("text")
                .starts_with("gpuwise check: 60 violation(s)")
        );
        let g = message(&outcome(1), Style::Generic);
        assert_eq!(g["schema"], "gpuwise.check/v1");
        assert_eq!(headline(&outcome(0)), "gpuwise check: all 1 rule(s) pass");
    }
}
