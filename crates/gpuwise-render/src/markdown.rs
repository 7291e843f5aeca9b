//! Markdown: the same sections as the terminal table, as pipe tables.

fn esc(s: &str) -> String {
    crate::escape::markdown(s)
}

/// Titled sections as a Markdown document headed `title`.
pub fn render_sections(title: &str, sections: &[crate::section::Section]) -> String {
    let mut out = format!("# {title}\n\n");
    for s in sections {
        out.push_str(&format!("## {}\n\n", esc(&s.title)));
        let headers: Vec<String> = s
            .headers
            .iter()
            .map(|h| {
                if h.is_empty() {
                    " ".to_owned()
                } else {
                    (*h).to_owned()
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", headers.join(" | ")));
        let aligns: Vec<&str> = (0..headers.len())
            .map(|i| if s.right.contains(&i) { "---:" } else { "---" })
            .collect();
        out.push_str(&format!("|{}|\n", aligns.join("|")));
        for row in &s.rows {
            let cells: Vec<String> = row.iter().map(|c| esc(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if let Some(n) = &s.note {
            out.push_str(&format!("\n_{}_\n", esc(n)));
        }
        out.push('\n');
    }
    out
}
