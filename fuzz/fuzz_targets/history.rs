#![no_main]
//! Fuzz what the history store reads back: a state cell (postcard of a tile piece) decoded
//! and joined twice onto a profile, which is then finished — damage must be an error or a
//! figure, never a panic or an allocation the size of the damage; and the actions journal,
//! each line JSON, folded.

use gpuwise_core::profile::{Profile, TilePiece};
use gpuwise_core::settings::ProfileSettings;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(piece) = postcard::from_bytes::<TilePiece>(data)
        && gpuwise_store::plausible(&piece, 86_400_000)
    {
        let st = ProfileSettings::default();
        let mut p = Profile::default();
        p.add_stored(piece.clone(), &st);
        p.add_stored(piece, &st);
        let _ = p.finish(&st, &jiff::tz::TimeZone::UTC);
    }
    let text = String::from_utf8_lossy(data);
    let entries: Vec<(usize, serde_json::Value)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .map(|v| (i + 1, v))
        })
        .filter(|(_, v)| v.is_object())
        .collect();
    let _ = gpuwise_analysis::review::fold_journal(&entries);
});
