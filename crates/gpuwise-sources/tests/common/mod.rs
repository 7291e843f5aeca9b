//! Shared test data: a seeded nvidia-smi log with the usual damage.

use std::fmt::Write as _;

/// A 4-GPU nvidia-smi log with bursts, idle runs, gaps, `[N/A]`, and bad lines and values
/// (whose skips name their line), from a seeded LCG.
pub(crate) fn log(seed: u64, rows: usize) -> String {
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
