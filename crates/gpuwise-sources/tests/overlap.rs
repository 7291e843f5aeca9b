//! Every device-hour once: a device's samples cut into overlapping pieces (files that repeat
//! each other's lines, a file given twice, a concatenation of overlapping logs) give exactly
//! the profile of the one log they were cut from, whatever the block size. Only the counters of
//! what was dropped differ.

mod common;

use common::log;
use gpuwise_core::profile::DeviceStats;
use gpuwise_sources::{Input, ReadOptions, read_all};
use proptest::prelude::*;

fn input(path: &std::path::Path) -> Input {
    Input {
        path: Some(path.to_path_buf()),
        name: path.display().to_string(),
        found_in_dir: false,
    }
}

/// The statistics with the counters of dropped data cleared.
fn figures(inputs: &[Input], opts: &ReadOptions) -> Vec<(String, DeviceStats)> {
    let got = read_all(inputs, opts, &|_| {}).expect("read");
    got.profile
        .finish(&opts.profile, &jiff::tz::TimeZone::UTC)
        .into_iter()
        .map(|d| {
            let mut s = d.stats;
            s.reordered = 0;
            s.duplicates = 0;
            s.overlaps = 0;
            s.overlap_samples = 0;
            s.overlap_hours = 0.0;
            (d.key.to_string(), s)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn overlapping_pieces_count_once(
        seed in 0u64..1000,
        cuts in prop::collection::vec((0usize..100, 1usize..100), 1..5),
        block in prop_oneof![Just(1usize << 30), 2048usize..20_000],
        concat in any::<bool>(),
    ) {
        let text = log(seed, 300);
        let mut lines: Vec<&str> = text.lines().collect();
        let header = lines.remove(0);
        let n = lines.len();
        let dir = tempfile::tempdir().expect("tempdir");
        let whole_path = dir.path().join("whole.csv");
        std::fs::write(&whole_path, &text).expect("write");
        // Pieces: random line ranges, plus one that covers everything (so the union is whole),
        // in random order; as separate files, or concatenated into one disordered file.
        let mut ranges: Vec<(usize, usize)> = cuts
            .iter()
            .map(|(a, len)| {
                let a = a * n / 100;
                (a, (a + len * n / 100).min(n))
            })
            .collect();
        ranges.push((0, n));
        let turn = seed as usize % ranges.len();
        ranges.rotate_left(turn);
        let pieces: Vec<String> = ranges
            .iter()
            .map(|(a, b)| {
                let mut s = format!("{header}\n");
                for l in &lines[*a..*b] {
                    s.push_str(l);
                    s.push('\n');
                }
                s
            })
            .collect();
        let mut inputs = Vec::new();
        if concat {
            // A log appended to with a repeat (a collector that re-sent what it had): the
            // pieces in order of their start, so the sequential rule keeps the union.
            let mut order: Vec<usize> = (0..pieces.len()).collect();
            order.sort_by_key(|i| ranges[*i].0);
            let text: String = order.iter().map(|i| pieces[*i].as_str()).collect();
            let path = dir.path().join("node.csv");
            std::fs::write(&path, text).expect("write");
            inputs.push(input(&path));
        } else {
            for (i, p) in pieces.iter().enumerate() {
                let path = dir.path().join(format!("node-{i}.csv"));
                std::fs::write(&path, p).expect("write");
                inputs.push(input(&path));
            }
        }
        let opts = ReadOptions { block_bytes: block, ..ReadOptions::default() };
        let whole = figures(&[input(&whole_path)], &opts);
        prop_assert_eq!(whole.len(), 4);
        let cut = figures(&inputs, &opts);
        // Hosts come from file names; the GPUs (by UUID) are the same four.
        let strip = |v: Vec<(String, DeviceStats)>| -> Vec<(String, DeviceStats)> {
            v.into_iter()
                .map(|(k, s)| (k.split_once('/').map_or(k.clone(), |x| x.1.to_owned()), s))
                .collect()
        };
        let (cut, whole) = (strip(cut), strip(whole));
        for ((ka, a), (kb, b)) in cut.iter().zip(&whole) {
            prop_assert_eq!(ka, kb);
            prop_assert!(
                a == b,
                "{}: samples {} vs {}, hours {} vs {}, first {} vs {}, last {} vs {}",
                ka, a.samples, b.samples, a.observed_hours, b.observed_hours,
                a.first_ts_ms, b.first_ts_ms, a.last_ts_ms, b.last_ts_ms
            );
        }
        prop_assert_eq!(cut.len(), whole.len());
    }
}
