//! The actions journal: `actions.jsonl` in the store, one JSON object per line, appended and
//! never rewritten. `advise --log` appends what it recommended; `gpuwise actions done|reject`
//! appends a mark. The current state of an action is its recommendation with its latest mark.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::{StoreError, io};

/// The journal's file in a store directory.
#[must_use]
pub fn path(store: &Path) -> PathBuf {
    store.join("actions.jsonl")
}

/// Append one entry (one line, written with a single `write` on a file opened for appending,
/// so concurrent writers interleave whole lines).
///
/// # Errors
/// The file cannot be opened or written, or the entry does not serialize.
pub fn append(store: &Path, entry: &serde_json::Value) -> Result<(), StoreError> {
    std::fs::create_dir_all(store).map_err(io(store))?;
    let p = path(store);
    let mut line = serde_json::to_string(entry).map_err(|e| StoreError::Broken {
        path: p.clone(),
        why: e.to_string(),
    })?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .map_err(io(&p))?;
    f.write_all(line.as_bytes()).map_err(io(&p))?;
    f.sync_data().map_err(io(&p))
}

/// The journal's entries, with their line numbers.
#[derive(Debug, Default)]
pub struct Entries {
    /// Each entry and its line.
    pub entries: Vec<(usize, serde_json::Value)>,
    /// A last line cut short (a writer stopped mid-line, no newline after it): left out, and
    /// its number said here.
    pub torn: Option<usize>,
}

/// Every entry with its line number. A broken line is an error naming it (a journal is written
/// only by gpuwise, so a broken line means damage to look at), except a last line without its
/// newline, which a crash mid-append leaves: it is left out and reported.
///
/// # Errors
/// The file cannot be read, or a complete line is not a JSON object.
pub fn read(store: &Path) -> Result<Entries, StoreError> {
    let p = path(store);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Entries::default()),
        Err(e) => return Err(io(&p)(e)),
    };
    let mut out = Entries::default();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .filter(serde_json::Value::is_object);
        match parsed {
            Some(v) => out.entries.push((i + 1, v)),
            None if i + 1 == lines.len() && !line.ends_with('\n') => out.torn = Some(i + 1),
            None => {
                return Err(StoreError::Broken {
                    path: p.clone(),
                    why: format!("line {}: not a JSON object", i + 1),
                });
            }
        }
    }
    Ok(out)
}
