//! What a label can carry must not act on the reader: one place that makes any text safe for
//! each output. Labels come from the telemetry (pod names, hostnames, custom labels) and are
//! hostile until shown otherwise.
//!
//! - CSV: RFC 4180 quoting, and the OWASP CSV-injection rule: a text cell that begins with `=`,
//!   `+`, `-`, `@`, a tab or a carriage return gets a leading `'`, so a spreadsheet shows it
//!   instead of evaluating it. A cell that is a plain number is left alone (`-5` stays `-5`).
//! - Terminal: control characters (escape sequences, bells, carriage returns) are shown as
//!   `\u{1b}`-style text, never sent to the terminal.
//! - Markdown: `|` and HTML (`<`, `>`, `&`) escaped, line breaks and control characters
//!   removed, so a `<script>` label stays text in any Markdown viewer.
//! - HTML and SVG: [`html`].

use std::fmt::Write as _;

/// Control characters written out as text (`\u{1b}`), for terminal output.
#[must_use]
pub fn terminal(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// One CSV cell: neutralised against formula injection, control characters written out as
/// text (a file printed with `cat` is a terminal too), then quoted as RFC 4180 needs.
#[must_use]
pub fn csv(v: &str) -> String {
    let formula = v.starts_with(['=', '+', '-', '@', '\t', '\r']) && v.parse::<f64>().is_err();
    let v = terminal(&if formula {
        format!("'{v}")
    } else {
        v.to_owned()
    });
    if v.contains([',', '"']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

/// A Markdown table cell or line.
#[must_use]
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Text inside HTML or SVG (element content and quoted attributes).
#[must_use]
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_never_become_formulas() {
        assert_eq!(
            csv("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\""
        );
        assert_eq!(csv("+1+cmd|' /C calc'!A0"), "'+1+cmd|' /C calc'!A0");
        assert_eq!(csv("-2+3"), "'-2+3");
        assert_eq!(csv("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv("\tx"), "'\\u{9}x");
        assert_eq!(csv("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(csv("-5"), "-5");
        assert_eq!(csv("-0.25"), "-0.25");
        assert_eq!(csv("team-a"), "team-a");
        assert_eq!(csv("a,b"), "\"a,b\"");
    }

    #[test]
    fn terminal_text_carries_no_escape_sequences() {
        assert_eq!(terminal("pod\x1b[31mred\x07"), "pod\\u{1b}[31mred\\u{7}");
        assert_eq!(terminal("plain"), "plain");
        assert!(!terminal("\u{9b}2J").chars().any(char::is_control));
    }

    #[test]
    fn markdown_keeps_html_as_text() {
        assert_eq!(
            markdown("<script>alert(1)</script>|x\ny"),
            "&lt;script&gt;alert(1)&lt;/script&gt;\\|x y"
        );
    }

    #[test]
    fn html_escapes_quotes_and_drops_controls() {
        assert_eq!(
            html("<a href='x'>\"&\x1b"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;"
        );
    }
}
