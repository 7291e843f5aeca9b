//! # gpuwise-render
//!
//! Renderers of a [`gpuwise_core::report::Report`], with its advice when asked for
//! ([`Document`]), of plans and of advice: they format, they decide nothing.
//!
//! | format | module | shape |
//! |---|---|---|
//! | `table` | [`table`] | terminal sections, fitted to the terminal's width |
//! | `json` | [`json`] | the whole report, schema `gpuwise.report/v1` |
//! | `csv` | [`csv`] | one row per device |
//! | `markdown` | [`markdown`] | the table sections as Markdown |
//! | `html` | [`html`] | one self-contained file with inline SVG charts, works offline |

pub mod advice;
pub mod csv;
pub mod dashboard;
pub mod escape;
pub mod grid;
pub mod html;
pub mod json;
mod layout;
pub mod ledger;
pub mod markdown;
pub mod pack;
pub mod plan;
mod section;
mod sections;
pub mod sim;
mod svg;
pub mod table;
mod text;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Terminal table.
    Table,
    /// JSON.
    Json,
    /// CSV.
    Csv,
    /// Markdown.
    Markdown,
    /// HTML.
    Html,
}

impl Format {
    /// Parse a `--format` value (also through [`std::str::FromStr`]).
    pub fn parse(s: &str) -> Result<Self, UnknownFormat> {
        match s {
            "table" => Ok(Self::Table),
            "json" => Ok(Self::Json),
            "csv" => Ok(Self::Csv),
            "markdown" | "md" => Ok(Self::Markdown),
            "html" => Ok(Self::Html),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }
}

impl std::str::FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A `--format` that is not an output format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not one of table, json, csv, markdown, html")]
pub struct UnknownFormat(pub String);

/// Options that change how a report looks (never what it says).
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// Rows of the device table in `table` and `markdown` (all rows in the other formats).
    pub top: usize,
    /// Use ANSI colour (`table` only).
    pub color: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            top: 20,
            color: false,
        }
    }
}

/// Terminal text with every line wider than the terminal (`COLUMNS`, else the terminal's
/// width, else 100) wrapped between words, for text a command writes around its tables.
#[must_use]
pub fn fit_text(text: &str) -> String {
    layout::fit_text(text)
}

/// Dollars with thousands separators (`$1,234,568`, `$12.35`): how every renderer and message
/// prints money.
#[must_use]
pub fn usd(v: f64) -> String {
    text::usd(v)
}

/// What `report` renders: the report, and the advice when `--advise` asked for it (rendered
/// after the report's own sections; in JSON, under `advice`).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Document<'a> {
    #[serde(flatten)]
    pub report: &'a gpuwise_core::report::Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<&'a gpuwise_advise::Advice>,
}

impl<'a> Document<'a> {
    /// The report alone.
    #[must_use]
    pub fn report(report: &'a gpuwise_core::report::Report) -> Self {
        Self {
            report,
            advice: None,
        }
    }

    /// The report's sections, then the advice's.
    pub(crate) fn sections(&self, top: usize) -> Vec<section::Section> {
        let mut out = sections::report_sections(self.report, top);
        if let Some(a) = self.advice {
            out.extend(advice::sections(a, top));
        }
        out
    }
}

/// Write `report` in `format` to `w`; JSON is streamed, not built in memory first.
pub fn write(
    report: &Document<'_>,
    format: Format,
    opts: &RenderOptions,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if format == Format::Json {
        return json::write(report, w);
    }
    w.write_all(render(report, format, opts).as_bytes())
}

/// Render `report` in `format`.
#[must_use]
pub fn render(report: &Document<'_>, format: Format, opts: &RenderOptions) -> String {
    match format {
        Format::Table => table::render_sections(&report.sections(opts.top), opts),
        Format::Json => json::render(report),
        Format::Csv => csv::render(report.report),
        Format::Markdown => {
            markdown::render_sections("GPU fleet report", &report.sections(opts.top))
        }
        Format::Html => html::render(report),
    }
}

/// Sections as Markdown (under `title`) or, for every other text format, a terminal table.
pub(crate) fn sections_text(
    title: &str,
    sections: &[section::Section],
    format: crate::Format,
    opts: &crate::RenderOptions,
) -> String {
    match format {
        crate::Format::Markdown => crate::markdown::render_sections(title, sections),
        _ => crate::table::render_sections(sections, opts),
    }
}
