//! The report and the advice as the user reads them: terminal sections, Markdown, one
//! self-contained HTML page, CSV (one row per device) and JSON (`gpuwise.report/v1`,
//! `gpuwise.advice/v1`), drawn by `gpuwise-render`.
//!
//! | format | module | shape |
//! |---|---|---|
//! | `table` | [`gpuwise_render::table`] | terminal sections, fitted to the terminal's width |
//! | `json` | [`render`] | the whole report, schema `gpuwise.report/v1` |
//! | `csv` | [`csv`] | one row per device |
//! | `markdown` | [`gpuwise_render::markdown`] | the table sections as Markdown |
//! | `html` | [`html`] | one self-contained file with inline SVG charts, works offline |

pub mod advice;
pub mod csv;
pub mod html;
pub mod review;
pub(crate) mod sections;

/// The allocation's, the reconciliation's and the check's views (the server prints the
/// allocation as `gpuwise allocate --format json` does).
pub use gpuwise_ledger::view as ledger;

use gpuwise_render::section::Section;
use gpuwise_render::{Format, RenderOptions};

use crate::{Advice, Report};

/// A device's GPU model, its reported name, else `?`.
pub fn model(d: &gpuwise_core::report::DeviceRow) -> String {
    d.model
        .clone()
        .or_else(|| d.model_name.clone())
        .unwrap_or_else(|| "?".to_owned())
}

/// What `report` renders: the report, and the advice when `--advise` asked for it (rendered
/// after the report's own sections; in JSON, under `advice`).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Document<'a> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a Report,
    /// The advice, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advice: Option<&'a Advice>,
}

impl<'a> Document<'a> {
    /// The report alone.
    #[must_use]
    pub fn report(report: &'a Report) -> Self {
        Self {
            report,
            advice: None,
        }
    }

    /// The report's sections, then the advice's.
    pub(crate) fn sections(&self, top: usize) -> Vec<Section> {
        let mut out = sections::report_sections(self.report, top);
        if let Some(a) = self.advice {
            out.extend(advice::sections(a, top));
        }
        out
    }
}

/// Write `report` in `format` to `w`; JSON is streamed, not built in memory first.
///
/// # Errors
/// What writing to `w` returns.
pub fn write(
    report: &Document<'_>,
    format: Format,
    opts: &RenderOptions,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if format == Format::Json {
        serde_json::to_writer_pretty(&mut *w, report)?;
        return w.write_all(b"\n");
    }
    w.write_all(render(report, format, opts).as_bytes())
}

/// Render `report` in `format`.
#[must_use]
pub fn render(report: &Document<'_>, format: Format, opts: &RenderOptions) -> String {
    match format {
        Format::Table => gpuwise_render::table::render_sections(&report.sections(opts.top), opts),
        Format::Json => gpuwise_render::json::pretty(report),
        Format::Csv => csv::render(report.report),
        Format::Markdown => gpuwise_render::markdown::render_sections(
            "GPU fleet report",
            &report.sections(opts.top),
        ),
        Format::Html => html::render(report),
    }
}
