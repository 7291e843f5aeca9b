//! JSON: every renderer's `json` format is its result as it is, pretty-printed.

/// Any output as pretty-printed JSON with a trailing newline: every renderer's `json` format.
#[must_use]
pub fn pretty<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
