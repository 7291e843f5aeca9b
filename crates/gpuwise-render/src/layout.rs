//! How a table meets a terminal: the one layout every terminal table goes through (report
//! sections, advice, ledgers, simulators, plans, catalogs).
//!
//! The width is `COLUMNS` when set, else the terminal's when standard output is one, else 100
//! columns (pipes, files and snapshots stay stable). A token (a device id, a date, a dollar
//! figure: anything between spaces) is never broken. In order:
//!
//! 1. every column, with text wrapping between words in the columns that have spaces, when
//!    each column's longest token fits;
//! 2. else the columns the table marks optional are left out, the first listed first, until it
//!    fits, and a line under the table names them (`--format json` or `csv` has them all);
//! 3. else a vertical layout: each row's first cell on a line, then `HEADER value` pairs
//!    packed into the width.

use comfy_table::presets::NOTHING;
use comfy_table::{Attribute, Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table};
use unicode_width::UnicodeWidthStr;

/// A table as data: header names, rows of cells, the columns aligned right and the columns
/// that may be left out to fit, least needed first.
pub struct Grid<'a> {
    pub headers: &'a [&'a str],
    pub right: &'a [usize],
    pub optional: &'a [usize],
    pub rows: &'a [Vec<String>],
}

/// Width of the target: `COLUMNS` (at least 20), the terminal's, else 100.
pub fn width() -> usize {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 20)
    {
        return usize::from(w);
    }
    Table::new().width().map_or(100, usize::from)
}

/// Display width of the longest whitespace-separated token.
fn longest_token(s: &str) -> usize {
    s.split_whitespace()
        .map(UnicodeWidthStr::width)
        .max()
        .unwrap_or(0)
}

/// `text` broken between words into lines of at most `width` columns; a token wider than
/// `width` stands alone on its line rather than being cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.width() + 1 + word.width() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Text for a terminal with every line that is wider than the width wrapped between words: a
/// `Key    value` line continues under its value, any other under its first word, two columns
/// in. Lines that fit (tables laid out by [`render`]) are left as they are.
pub fn fit_text(text: &str) -> String {
    fit_text_at(text, width())
}

fn fit_text_at(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        if body.width() <= width || !body.trim().contains(char::is_whitespace) {
            out.push_str(line);
            continue;
        }
        let lead = body.len() - body.trim_start().len();
        // A key and its value: the value starts after the first run of two spaces.
        let value_at = body[lead..]
            .find("  ")
            .map(|k| {
                let rest = &body[lead + k..];
                lead + k + rest.len() - rest.trim_start().len()
            })
            .filter(|&at| width.saturating_sub(body[..at].width()) >= 30);
        let (start, indent) = value_at.map_or((lead, lead + 2), |at| (at, body[..at].width()));
        let first = wrap(
            &body[start..],
            width.saturating_sub(body[..start].width()).max(1),
        );
        out.push_str(&body[..start]);
        out.push_str(first.first().map_or("", String::as_str));
        out.push('\n');
        // The rest rewrapped at the continuation indent.
        let rest = first.get(1..).unwrap_or_default().join(" ");
        for l in wrap(&rest, width.saturating_sub(indent).max(1)) {
            out.push_str(&" ".repeat(indent));
            out.push_str(&l);
            out.push('\n');
        }
        if !line.ends_with('\n') {
            out.pop();
        }
    }
    out
}

/// The grid laid out for a terminal, each line ending in `\n`, without trailing spaces.
pub fn render(g: &Grid<'_>, header: bool, color: bool) -> String {
    render_at(g, header, color, width())
}

/// Cell `i` of a row, empty when the row is short.
fn cell(r: &[String], i: usize) -> &str {
    r.get(i).map_or("", String::as_str)
}

fn render_at(g: &Grid<'_>, header: bool, color: bool, width: usize) -> String {
    let rows: Vec<Vec<String>> = g
        .rows
        .iter()
        .map(|r| r.iter().map(|c| crate::escape::terminal(c)).collect())
        .collect();
    let columns = rows
        .iter()
        .map(Vec::len)
        .chain(header.then_some(g.headers.len()))
        .max()
        .unwrap_or(0);
    // The narrowest each column may be: its longest token plus one space of padding each
    // side; strictly, its header whole too, else a header may wrap between words.
    let narrowest = |whole_header: bool| -> Vec<usize> {
        (0..columns)
            .map(|i| {
                let head = match g.headers.get(i) {
                    Some(h) if header && whole_header => h.width(),
                    Some(h) if header => longest_token(h),
                    _ => 0,
                };
                rows.iter()
                    .map(|r| longest_token(cell(r, i)))
                    .chain([head])
                    .max()
                    .unwrap_or(0)
                    + 2
            })
            .collect()
    };
    // Headers whole, leaving out optional columns as needed; then headers wrapped, which may
    // keep more columns; then the vertical layout.
    let fitted = [true, false].into_iter().find_map(|whole| {
        let min = narrowest(whole);
        let needed = |shown: &[usize]| shown.iter().map(|&i| min[i]).sum::<usize>();
        let mut shown: Vec<usize> = (0..columns).collect();
        let mut dropped = Vec::new();
        for &i in g.optional {
            if needed(&shown) <= width {
                break;
            }
            if let Some(at) = shown.iter().position(|&c| c == i) {
                shown.remove(at);
                dropped.push(i);
            }
        }
        (needed(&shown) <= width).then_some((min, shown, dropped))
    });
    let Some((min, shown, dropped)) = fitted else {
        return vertical(g.headers, &rows, width);
    };
    let mut t = Table::new();
    t.load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX));
    if header {
        t.set_header(shown.iter().map(|&i| {
            let c = Cell::new(g.headers.get(i).copied().unwrap_or(""));
            if color {
                c.add_attribute(Attribute::Dim)
            } else {
                c
            }
        }));
    }
    for r in &rows {
        t.add_row(shown.iter().map(|&i| {
            let c = Cell::new(cell(r, i));
            if g.right.contains(&i) {
                c.set_alignment(CellAlignment::Right)
            } else {
                c
            }
        }));
    }
    // Every column at least as wide as its longest token: text wraps between words only, and
    // a header wider than its column's cells may wrap too.
    for (at, &i) in shown.iter().enumerate() {
        if let Some(c) = t.column_mut(at) {
            c.set_constraint(ColumnConstraint::LowerBoundary(comfy_table::Width::Fixed(
                u16::try_from(min[i]).unwrap_or(u16::MAX),
            )));
        }
    }
    let mut out: String = t.lines().map(|l| format!("{}\n", l.trim_end())).collect();
    if !dropped.is_empty() {
        let names: Vec<&str> = dropped
            .iter()
            .filter_map(|&i| g.headers.get(i).copied())
            .collect();
        let note = format!(
            "left out to fit {width} columns: {}; a wider terminal (COLUMNS) or --format json|csv shows them",
            names.join(", ")
        );
        for line in wrap(&note, width.saturating_sub(2)) {
            out.push_str("  ");
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Each row as a block: its first cell on a line, then `HEADER value` pairs packed into the
/// width after a three-space indent, a value too long for a line wrapped between words.
fn vertical(headers: &[&str], rows: &[Vec<String>], width: usize) -> String {
    const INDENT: &str = "   ";
    let room = width.saturating_sub(INDENT.len()).max(1);
    let mut out = String::new();
    for r in rows {
        let mut cells = r.iter().enumerate();
        if let Some((_, first)) = cells.next() {
            out.push(' ');
            out.push_str(first);
            out.push('\n');
        }
        let mut line = String::new();
        let flush = |line: &mut String, out: &mut String| {
            if !line.is_empty() {
                out.push_str(INDENT);
                out.push_str(line.trim_end());
                out.push('\n');
                line.clear();
            }
        };
        for (i, v) in cells {
            if v.is_empty() {
                continue;
            }
            let pair = match headers.get(i).filter(|h| !h.is_empty()) {
                Some(h) => format!("{h} {v}"),
                None => v.clone(),
            };
            let w = pair.width();
            if !line.is_empty() && line.width() + 3 + w > room {
                flush(&mut line, &mut out);
            }
            if w > room {
                let mut parts = wrap(&pair, room);
                let last = parts.pop().unwrap_or_default();
                for p in parts {
                    line.push_str(&p);
                    flush(&mut line, &mut out);
                }
                line.push_str(&last);
            } else {
                if !line.is_empty() {
                    line.push_str("   ");
                }
                line.push_str(&pair);
            }
        }
        flush(&mut line, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Grid, render_at, wrap};
    use unicode_width::UnicodeWidthStr;

    fn rows() -> Vec<Vec<String>> {
        vec![
            vec![
                "northamerica-northeast1-node-0042/gpu0".into(),
                "A100-SXM4-80GB".into(),
                "35.3%".into(),
                "$1,234".into(),
                "utilization drops below the idle threshold in short stalls".into(),
            ],
            vec![
                "b/gpu1".into(),
                "H100-SXM5-80GB".into(),
                "1.0%".into(),
                "$495".into(),
                "idle".into(),
            ],
        ]
    }

    fn tokens(rows: &[Vec<String>]) -> Vec<String> {
        rows.iter()
            .flatten()
            .flat_map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn fits_every_width_without_breaking_a_token() {
        let rows = rows();
        for optional in [&[][..], &[1, 2][..]] {
            let g = Grid {
                headers: &["DEVICE", "MODEL", "UTIL", "COST", "EVIDENCE"],
                right: &[2, 3],
                optional,
                rows: &rows,
            };
            for width in [200, 100, 80, 60, 45] {
                let out = render_at(&g, true, false, width);
                for line in out.lines() {
                    assert!(line.width() <= width, "{width}: {line:?}\n{out}");
                }
                let printed: Vec<&str> = out.split_whitespace().collect();
                for t in tokens(&rows) {
                    let whole = printed.iter().any(|p| p.contains(t.as_str()));
                    let dropped = out.contains("left out");
                    assert!(whole || dropped, "{width}: token {t} broken:\n{out}");
                }
            }
        }
    }

    #[test]
    fn optional_columns_go_first_then_rows_stand_vertically() {
        let rows = rows();
        let g = Grid {
            headers: &["DEVICE", "MODEL", "UTIL", "COST", "EVIDENCE"],
            right: &[2, 3],
            optional: &[1],
            rows: &rows,
        };
        let wide = render_at(&g, true, false, 200);
        assert!(
            wide.contains("MODEL") && !wide.contains("left out"),
            "{wide}"
        );
        // Each column's longest token plus two: 40 + 16 + 7 + 8 + 13 = 84 columns with MODEL,
        // 68 without.
        let mid = render_at(&g, true, false, 72);
        assert!(!mid.contains("A100-SXM4-80GB"), "{mid}");
        assert!(mid.contains("left out to fit 72 columns: MODEL"), "{mid}");
        let narrow = render_at(&g, true, false, 50);
        assert!(
            narrow.starts_with(" northamerica-northeast1-node-0042/gpu0\n   MODEL A100-SXM4-80GB"),
            "{narrow}"
        );
        assert!(narrow.contains("COST $495"), "{narrow}");
    }

    #[test]
    fn long_lines_wrap_under_their_value() {
        let text = "Model     llama-3.1-70b — 70.55B params, 80 layers × 8192, 64 heads\n short\n";
        let out = super::fit_text_at(text, 40);
        assert_eq!(
            out,
            "Model     llama-3.1-70b — 70.55B params,\n          80 layers × 8192, 64 heads\n short\n"
        );
        let note =
            "  L40S: only multi-machine options fit, and the catalog has no network bandwidth";
        let out = super::fit_text_at(note, 40);
        for l in out.lines() {
            assert!(l.width() <= 40, "{out}");
        }
        assert!(
            out.starts_with("  L40S: only multi-machine options fit,\n    and"),
            "{out}"
        );
        // One token wider than the width is left whole.
        let path = "/a/very/long/path/that/does/not/fit/anywhere/at/all.json";
        assert_eq!(super::fit_text_at(path, 20), path);
    }

    #[test]
    fn wrap_never_cuts_a_word() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
        assert!(wrap("   ", 5).is_empty());
    }
}
