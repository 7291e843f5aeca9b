//! The one tabular shape every sectioned renderer prints (`table`, `markdown`, `html`), filled
//! by the report ([`crate::sections`]) and the advice ([`crate::advice`]) alike.

/// A titled table.
pub(crate) struct Section {
    pub title: String,
    pub note: Option<String>,
    pub headers: Vec<&'static str>,
    /// Columns aligned right (numbers).
    pub right: Vec<usize>,
    /// Columns a narrow terminal may leave out, the least needed first.
    pub optional: Vec<usize>,
    pub rows: Vec<Vec<String>>,
}
