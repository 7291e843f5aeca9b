//! JSON: the report as it is, schema `gpuwise.report/v1` (see `docs/report-schema.md`), with
//! the advice under `advice` when there is one.

/// Pretty-printed JSON with a trailing newline.
#[must_use]
pub fn render(report: &crate::Document<'_>) -> String {
    pretty(report)
}

/// Any output as pretty-printed JSON with a trailing newline: every renderer's `json` format.
pub(crate) fn pretty<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// The same, streamed to `w`.
pub fn write(report: &crate::Document<'_>, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, report)?;
    w.write_all(b"\n")
}
