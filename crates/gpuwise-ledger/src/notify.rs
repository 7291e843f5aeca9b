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
            for (i, v) in o.violations.iter().enumerate() {
                let line = format!("\n• [{}] {}", v.rule, slack_escape(&v.message));
                let more = format!("\n… and {} more", o.violations.len() - i);
                if text.chars().count() + line.chars().count() + more.len() > MAX_TEXT_CHARS {
                    text.push_str(&more);
                    break;
                }
                text.push_str(&line);
            }
            let mut blocks = vec![json!({
                "type": "header",
                "text": {"type": "plain_text", "text": head}
            })];
            for v in o.violations.iter().take(MAX_VIOLATION_BLOCKS) {
                blocks.push(json!({
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": clip(&format!("*{}* — {}", slack_escape(v.rule), slack_escape(&v.message)), MAX_SECTION_CHARS)}
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

/// Slack's three control characters in mrkdwn (labels can be hostile), and line breaks and
/// other control characters as spaces (a team named `a\n• [budget] forged` must not forge a
/// violation line).
fn slack_escape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Slack shows at most 40,000 characters of a message's `text`; kept below with room to spare.
const MAX_TEXT_CHARS: usize = 39_000;
/// Slack's limit on a section block's text.
const MAX_SECTION_CHARS: usize = 3_000;

/// `s` cut to at most `max` characters, ending in `…` when cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
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
                    name: format!("t{i}"),
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
        // 600 long violations (72,692 characters before) stay within Slack's 40,000, ending in
        // how many were left out; a line break in a label cannot start a line of its own.
        let mut many = outcome(600);
        for v in &mut many.violations {
            v.message = format!("team a\n• [budget] forged {}", "x".repeat(100));
        }
        let m = message(&many, Style::Slack);
        let text = m["text"].as_str().expect("text");
        assert!(text.chars().count() <= 40_000, "{}", text.len());
        assert!(text.contains("more"), "{}", &text[text.len() - 40..]);
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("• [budget] forged"))
                .count(),
            0
        );
        let shown = text.lines().filter(|l| l.starts_with("• [budget]")).count();
        assert!(
            text.ends_with(&format!("… and {} more", 600 - shown)),
            "{shown}"
        );
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(headline(&outcome(0)), "gpuwise check: all 1 rule(s) pass");
    }
}
