//! Terminal tables (comfy-table), each section under a bold title; fits 100 columns.

use comfy_table::presets::NOTHING;
use comfy_table::{Attribute, Cell, CellAlignment, ContentArrangement, Table};

use crate::RenderOptions;
use crate::escape::terminal;

/// Titled sections for a terminal.
pub(crate) fn render_sections(
    sections: &[crate::section::Section],
    opts: &RenderOptions,
) -> String {
    let mut out = String::new();
    for s in sections {
        if opts.color {
            out.push_str(&format!("\x1b[1m{}\x1b[0m\n", terminal(&s.title)));
        } else {
            out.push_str(&terminal(&s.title));
            out.push('\n');
        }
        let mut t = Table::new();
        t.load_style(NOTHING)
            .set_content_arrangement(ContentArrangement::Dynamic);
        // No rows, no header: a section that found nothing says so in its title alone (every
        // rule passing printed an empty RULE SUBJECT VALUE header).
        if !s.rows.is_empty() && s.headers.iter().any(|h| !h.is_empty()) {
            t.set_header(s.headers.iter().map(|h| {
                let c = Cell::new(h);
                if opts.color {
                    c.add_attribute(Attribute::Dim)
                } else {
                    c
                }
            }));
        }
        for row in &s.rows {
            t.add_row(row.iter().enumerate().map(|(i, v)| {
                let c = Cell::new(terminal(v));
                if s.right.contains(&i) {
                    c.set_alignment(CellAlignment::Right)
                } else {
                    c
                }
            }));
        }
        crate::fit(&mut t, &s.rows);
        for line in t.to_string().lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if let Some(n) = &s.note {
            out.push_str("  ");
            out.push_str(&terminal(n));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}
