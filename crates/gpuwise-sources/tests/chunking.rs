//! Parallel chunked reading gives exactly the profile of a one-piece read, whatever the block
//! size (blocks are cut at line boundaries, parsed in parallel and joined in order).

use std::fmt::Write as _;

use gpuwise_sources::{Input, ReadOptions, read_all};
use proptest::prelude::*;

/// A 4-GPU nvidia-smi log with bursts, idle runs, gaps, `[N/A]`, and bad lines and values
/// (whose skips name their line), from a seeded LCG.
fn log(seed: u64, rows: usize) -> String {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x >> 33
    };
    let mut s = String::from(
        "timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n",
    );
    let mut t: i64 = 1_767_571_200;
    for _ in 0..rows {
        t += if next() % 50 == 0 { 900 } else { 30 };
        for g in 0..4 {
            if next() % 150 == 0 {
                s.push_str("2026/01/05 00:00:00.000, NVIDIA L4, truncated\n");
            }
            let util = if next() % 3 == 0 {
                "0 %".to_owned()
            } else if next() % 120 == 0 {
                "abc %".to_owned()
            } else if next() % 40 == 0 {
                "[N/A]".to_owned()
            } else {
                format!("{} %", next() % 101)
            };
            let dt = jiff::Timestamp::from_second(t)
                .expect("ts")
                .strftime("%Y/%m/%d %H:%M:%S.000");
            let _ = writeln!(
                s,
                "{dt}, NVIDIA L4, GPU-{g:08}, {g}, {util}, {} MiB, 23034 MiB, {}.{:02} W",
                next() % 4000,
                16 + next() % 50,
                next() % 100
            );
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn chunked_equals_whole(seed in 0u64..1000, block in 1024usize..20_000) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.csv");
        std::fs::write(&path, log(seed, 600)).expect("write");
        let input = Input { path: Some(path.clone()), name: path.display().to_string() };
        let whole_opts = ReadOptions { block_bytes: 1 << 30, ..ReadOptions::default() };
        let chunk_opts = ReadOptions { block_bytes: block, ..ReadOptions::default() };
        let whole = read_all(std::slice::from_ref(&input), &whole_opts, &|_| {}).expect("read");
        let chunked = read_all(std::slice::from_ref(&input), &chunk_opts, &|_| {}).expect("read");
        prop_assert!(whole.tally.skipped() > 0);
        prop_assert_eq!(&whole.tally, &chunked.tally);
        let st = &whole_opts.profile;
        let a = whole.profile.joined(st);
        let b = chunked.profile.joined(st);
        prop_assert_eq!(a.len(), 4);
        prop_assert_eq!(a, b);
    }
}
