//! # gpuwise-render: the drawing engine
//!
//! The one neutral shape every capability renders through — titled [`section::Section`]s of
//! rows — and the code that draws it: terminal tables fitted to the width ([`table`],
//! [`layout`]), Markdown ([`markdown`]), HTML pages with inline SVG charts ([`html`],
//! [`svg`]), CSV and JSON helpers ([`escape`], [`grid`], [`json`]), and the formatting of
//! money, shares and hours ([`text`]). It knows no capability: each domain crate turns its own
//! results into sections (`gpuwise_ledger::view`, `gpuwise_sim::view`, …; the report and the
//! advice in `gpuwise_analysis::view`, the dashboard in `gpuwise-server`), so a new capability
//! adds no dependency here.

pub mod escape;
pub mod grid;
pub mod html;
pub mod json;
pub mod layout;
pub mod markdown;
pub mod section;
pub mod svg;
pub mod table;
pub mod text;

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

/// Sections as Markdown (under `title`) or, for every other text format, a terminal table.
pub fn sections_text(
    title: &str,
    sections: &[section::Section],
    format: Format,
    opts: &RenderOptions,
) -> String {
    match format {
        Format::Markdown => markdown::render_sections(title, sections),
        _ => table::render_sections(sections, opts),
    }
}
