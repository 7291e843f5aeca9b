//! The one tabular shape every sectioned renderer prints (`table`, `markdown`, `html`), filled
//! by every capability's view alike (the report's and the advice's in `gpuwise_analysis::view`,
//! the allocation's in `gpuwise_ledger::view`, …).

/// A titled table.
pub struct Section {
    pub title: String,
    pub note: Option<String>,
    pub headers: Vec<&'static str>,
    /// Columns aligned right (numbers).
    pub right: Vec<usize>,
    /// Columns a narrow terminal may leave out, the least needed first.
    pub optional: Vec<usize>,
    pub rows: Vec<Vec<String>>,
}
