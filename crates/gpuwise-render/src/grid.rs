//! A plain grid of strings in any text format: the shape `catalog` tables share.

use crate::Format;

/// Render `headers` and `rows` as a table, CSV or Markdown. `right` lists the columns aligned
/// right, `optional` those a narrow terminal may leave out (the least needed first; CSV and
/// Markdown keep every column). JSON is not a grid: callers serialize their own typed rows.
#[must_use]
pub fn render(
    headers: &[&str],
    right: &[usize],
    optional: &[usize],
    rows: &[Vec<String>],
    format: Format,
) -> String {
    match format {
        Format::Csv => {
            // Machine CSV: snake_case headers, empty cells for missing values (the report's
            // CSV does the same).
            let mut out = headers
                .iter()
                .map(|h| machine_name(h))
                .collect::<Vec<_>>()
                .join(",");
            out.push('\n');
            for r in rows {
                let cells: Vec<String> = r
                    .iter()
                    .map(|v| {
                        if v == "–" {
                            String::new()
                        } else {
                            crate::escape::csv(v)
                        }
                    })
                    .collect();
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
            let grid = crate::layout::Grid {
                headers,
                right,
                optional,
                rows,
            };
            let mut out = crate::layout::render(&grid, true, false);
            if rows.is_empty() {
                out.push_str("(no rows)\n");
            }
            out
        }
    }
}

/// A display header as a machine column name: `$/GPU-H ON-DEMAND` → `usd_per_gpu_h_on_demand`,
/// `MEM GB` → `mem_gb`, `TOK/S` → `tok_per_s`.
#[must_use]
pub fn machine_name(header: &str) -> String {
    let words = header
        .to_lowercase()
        .replace("$/", "usd_per_")
        .replace('$', "usd")
        .replace('/', "_per_")
        .replace('%', "pct")
        .replace('#', "rank");
    let mut out = String::with_capacity(words.len());
    for c in words.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn display_headers_become_machine_names() {
        for (h, m) in [
            ("$/GPU-H ON-DEMAND", "usd_per_gpu_h_on_demand"),
            ("MEM GB", "mem_gb"),
            ("ON-DEMAND $/H", "on_demand_usd_per_h"),
            ("TOK/S", "tok_per_s"),
            ("#", "rank"),
            ("1Y $/H", "1y_usd_per_h"),
        ] {
            assert_eq!(super::machine_name(h), m);
        }
        let csv = super::render(
            &["GPU", "MEM GB"],
            &[1],
            &[],
            &[vec!["T4".into(), "–".into()]],
            crate::Format::Csv,
        );
        assert_eq!(csv, "gpu,mem_gb\nT4,\n");
    }
}
