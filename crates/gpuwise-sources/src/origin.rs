//! Where the data a reader reads comes from, for messages and device hosts: the one thing the
//! readers need to know about their input (kept apart so readers and `ingest`, which calls them,
//! do not import each other).

/// Where the data being read comes from: for messages and device hosts.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// Input name, for messages.
    pub file: &'a str,
    /// `--host`, which overrides any host in the data.
    pub host: Option<&'a str>,
    /// File name stem, the host when the data names none.
    pub stem: &'a str,
}
