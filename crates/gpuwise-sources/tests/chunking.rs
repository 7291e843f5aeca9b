//! Parallel chunked reading gives exactly the profile of a one-piece read, whatever the block
//! size (blocks are cut at line boundaries, parsed in parallel and joined in order).

mod common;

use common::log;
use gpuwise_sources::{Input, ReadOptions, read_all};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn chunked_equals_whole(seed in 0u64..1000, block in 1024usize..20_000) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.csv");
        std::fs::write(&path, log(seed, 600)).expect("write");
        let input = Input { path: Some(path.clone()), name: path.display().to_string(), found_in_dir: false };
        let whole_opts = ReadOptions { block_bytes: 1 << 30, ..ReadOptions::default() };
        let chunk_opts = ReadOptions { block_bytes: block, ..ReadOptions::default() };
        let whole = read_all(std::slice::from_ref(&input), &whole_opts, &|_| {}).expect("read");
        let chunked = read_all(std::slice::from_ref(&input), &chunk_opts, &|_| {}).expect("read");
        prop_assert!(whole.tally.skipped() > 0);
        prop_assert_eq!(&whole.tally, &chunked.tally);
        let a = whole.profile.joined();
        let b = chunked.profile.joined();
        prop_assert_eq!(a.len(), 4);
        prop_assert_eq!(a, b);
    }
}

/// What a tap saw: each sample's device, time and utilization, in order.
#[derive(Default)]
struct Seen(Vec<(String, i64, Option<f32>)>);

impl gpuwise_core::profile::Tap for Seen {
    fn sample(&mut self, at: gpuwise_core::profile::TapPoint<'_>, s: &gpuwise_core::Sample) {
        self.0.push((at.key.to_string(), s.ts_ms, s.util_pct));
    }
}

fn tapped(input: &Input, block: usize) -> Vec<(String, i64, Option<f32>)> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
    let opts = ReadOptions {
        block_bytes: block,
        tap: Some(gpuwise_core::profile::SharedTap(seen.clone())),
        ..ReadOptions::default()
    };
    read_all(std::slice::from_ref(input), &opts, &|_| {}).expect("read");
    drop(opts);
    std::sync::Arc::try_unwrap(seen)
        .ok()
        .expect("the readers let go of the tap")
        .into_inner()
        .expect("not poisoned")
        .0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// A tap sees the samples of an input in file order whatever the block size: blocks are
    /// parsed in parallel into logs that are replayed in order.
    #[test]
    fn a_tap_sees_file_order_whatever_the_blocks(seed in 0u64..1000, block in 1024usize..20_000) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.csv");
        std::fs::write(&path, log(seed, 600)).expect("write");
        let input = Input { path: Some(path.clone()), name: path.display().to_string(), found_in_dir: false };
        let whole = tapped(&input, 1 << 30);
        prop_assert!(whole.len() > 1000);
        prop_assert_eq!(whole, tapped(&input, block));
    }
}
