//! A plain grid of strings in any text format: the shape `catalog` tables share.

use comfy_table::presets::NOTHING;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};

use crate::Format;

/// Render `headers` and `rows` as a table, CSV or Markdown. `right` lists the columns aligned
/// right. JSON is not a grid: callers serialize their own typed rows.
#[must_use]
pub fn render(headers: &[&str], right: &[usize], rows: &[Vec<String>], format: Format) -> String {
    match format {
        Format::Csv => {
            let mut out = headers.join(",");
            out.push('\n');
            for r in rows {
                let cells: Vec<String> = r.iter().map(|v| crate::escape::csv(v)).collect();
                out.push_str(&cells.join(","));
                out.push('\n');
            }
            out
        }
        Format::Markdown => {
            let mut out = format!(
                "| {} |\n|{}|\n",
                headers.join(" | "),
                headers
                    .iter()
                    .enumerate()
                    .map(|(i, _)| if right.contains(&i) { "---:" } else { "---" })
                    .collect::<Vec<_>>()
                    .join("|")
            );
            for r in rows {
                out.push_str(&format!(
                    "| {} |\n",
                    r.iter()
                        .map(|c| crate::escape::markdown(c))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
            }
            out
        }
        _ => {
            let mut t = Table::new();
            t.load_style(NOTHING)
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(120);
            t.set_header(headers.iter().map(Cell::new));
            for r in rows {
                t.add_row(r.iter().enumerate().map(|(i, v)| {
                    let c = Cell::new(crate::escape::terminal(v));
                    if right.contains(&i) {
                        c.set_alignment(CellAlignment::Right)
                    } else {
                        c
                    }
                }));
            }
            let mut out: String = t
                .to_string()
                .lines()
                .map(|l| format!("{}\n", l.trim_end()))
                .collect();
            if rows.is_empty() {
                out.push_str("(no rows)\n");
            }
            out
        }
    }
}
