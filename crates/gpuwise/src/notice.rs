//! Notices said at most once a day: a warning that is true on every run until someone acts
//! (prices older than the staleness limit) is said the first time each day and then left to
//! `--format json`, which always carries it. The days are kept as one small file per notice
//! under `$XDG_STATE_HOME/gpuwise/said/` (else `~/.local/state/gpuwise/said/`); where that
//! cannot be read or written, every notice is said every time.

use std::path::PathBuf;

fn dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("gpuwise").join("said"))
}

/// Whether the notice `key` (its words: a new date is a new notice) is to be said now: not yet
/// said today (UTC, by the run's clock). Records today when it is.
pub(crate) fn first_today(key: &str) -> bool {
    let Ok(now) = crate::clock::now_ms() else {
        return true;
    };
    let Ok(today) = jiff::Timestamp::from_millisecond(now)
        .map(|t| jiff::tz::TimeZone::UTC.to_datetime(t).date().to_string())
    else {
        return true;
    };
    let Some(dir) = dir() else { return true };
    // The file name: the key's hash, so any text makes a safe name.
    let path = dir.join(format!("{:016x}", fnv1a(key.as_bytes())));
    if std::fs::read_to_string(&path).is_ok_and(|d| d.trim() == today) {
        return false;
    }
    let _ = std::fs::create_dir_all(&dir)
        .map_err(anyhow::Error::from)
        .and_then(|()| crate::output::write(&path, today.as_bytes()));
    true
}

/// FNV-1a, 64-bit: a stable name for a key across runs and builds (std's hasher is seeded
/// per process, and a file name needs no cryptographic hash).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
