//! Terminal tables, each section under a bold title, laid out to the terminal's width (no token
//! broken; columns left out by priority, else rows as blocks).

use crate::RenderOptions;
use crate::escape::terminal;

/// Titled sections for a terminal.
pub fn render_sections(sections: &[crate::section::Section], opts: &RenderOptions) -> String {
    let mut out = String::new();
    for s in sections {
        if opts.color {
            out.push_str(&format!("\x1b[1m{}\x1b[0m\n", terminal(&s.title)));
        } else {
            out.push_str(&terminal(&s.title));
            out.push('\n');
        }
        // No rows, no header: a section that found nothing says so in its title alone (every
        // rule passing printed an empty RULE SUBJECT VALUE header).
        let header = !s.rows.is_empty() && s.headers.iter().any(|h| !h.is_empty());
        let grid = crate::layout::Grid {
            headers: &s.headers,
            right: &s.right,
            optional: &s.optional,
            rows: &s.rows,
        };
        out.push_str(&crate::layout::render(&grid, header, opts.color));
        if let Some(n) = &s.note {
            out.push_str("  ");
            out.push_str(&terminal(n));
            out.push('\n');
        }
        out.push('\n');
    }
    // Titles and notes wider than the terminal wrap between words.
    crate::layout::fit_text(&out)
}
