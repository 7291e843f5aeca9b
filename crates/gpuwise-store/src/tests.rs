use super::*;
use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::sample::{DeviceKey, Sample};

const HOUR: i64 = 3_600_000;
/// 2026-10-01T00:00:00Z.
const T0: i64 = 1_790_812_800_000;

/// Three devices over three days: intervals that do not divide the hour (7–61 s, jittered),
/// random phases, gaps longer than the maximum gap, a duplicate, idle and busy stretches.
fn samples(seed: u64) -> Vec<(DeviceKey, Vec<Sample>)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..3)
        .map(|d| {
            let key = DeviceKey::new(
                format!("node{d}"),
                format!("GPU-{d:08}-aaaa-bbbb-cccc-dddddddddddd"),
            );
            let mut t = T0 + rng.i64(0..60_000);
            let step = 7_000 + 9_000 * d;
            let mut v = Vec::new();
            let mut util: f32 = 0.0;
            while t < T0 + 3 * 24 * HOUR {
                if rng.u32(0..400) == 0 {
                    t += rng.i64(6 * 60_000..3 * HOUR);
                    if t >= T0 + 3 * 24 * HOUR {
                        break;
                    }
                }
                if rng.u32(0..50) == 0 {
                    util = if util > 0.0 { 0.0 } else { rng.f32() * 100.0 };
                }
                let mem = if util > 0.0 {
                    30_000.0
                } else if d == 1 {
                    2_000.0
                } else {
                    0.0
                };
                let s = Sample {
                    ts_ms: t,
                    util_pct: Some(util.round()),
                    mem_used_mib: Some(mem),
                    mem_total_mib: Some(81_920.0),
                    power_w: Some(60.0 + util * 3.0),
                    ..Sample::default()
                };
                v.push(s);
                if rng.u32(0..300) == 0 {
                    v.push(s);
                }
                t += step + rng.i64(-2_000..2_000);
            }
            (key, v)
        })
        .collect()
}

fn build(
    data: &[(DeviceKey, Vec<Sample>)],
    tiles: Option<u64>,
    range: Option<(i64, i64)>,
) -> Profile {
    let st = ProfileSettings::default();
    let mut b = ProfileBuilder::new(st);
    if let Some(t) = tiles {
        b = b.with_tiles(t);
    }
    if let Some((a, z)) = range {
        b = b.with_range(a, z);
    }
    for (key, v) in data {
        let id = b.device(key.clone());
        for s in v {
            let _ = b.push(id, s);
        }
    }
    b.build()
}

/// Equal, or a panic naming the first field that differs (the full values are long).
fn same(
    a: &[gpuwise_core::profile::DeviceProfile],
    b: &[gpuwise_core::profile::DeviceProfile],
    what: &str,
) {
    if a == b {
        return;
    }
    let (x, y) = (format!("{a:?}"), format!("{b:?}"));
    let at = x
        .bytes()
        .zip(y.bytes())
        .position(|(p, q)| p != q)
        .unwrap_or(0);
    let from = at.saturating_sub(300);
    panic!(
        "{what}: differ at byte {at}:\n store: …{}\n raw:   …{}",
        &x[from..(at + 80).min(x.len())],
        &y[from..(at + 80).min(y.len())]
    );
}

/// A store at `dir` holding `data` in hourly tiles.
fn stored(data: &[(DeviceKey, Vec<Sample>)], dir: &std::path::Path) -> Store {
    let store = Store::at(dir);
    store
        .write(
            &build(data, Some(3_600_000), None),
            3_600_000,
            i64::MAX,
            &ProfileSettings::default(),
        )
        .expect("write");
    store
}

fn stats(p: Profile) -> Vec<gpuwise_core::profile::DeviceProfile> {
    p.finish(&ProfileSettings::default(), &jiff::tz::TimeZone::UTC)
}

#[test]
fn any_run_of_hours_from_the_store_is_the_profile_of_the_raw_samples() {
    let st = ProfileSettings::default();
    for seed in 0..4 {
        let data = samples(seed);
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::at(dir.path());
        let w = store
            .write(
                &build(&data, Some(3_600_000), None),
                3_600_000,
                i64::MAX,
                &st,
            )
            .expect("write");
        assert_eq!(w.days, 3);
        let mut rng = fastrand::Rng::with_seed(seed);
        for _ in 0..6 {
            let a = T0 + HOUR * rng.i64(0..60);
            let z = a + HOUR * rng.i64(1..72 - (a - T0) / HOUR);
            let loaded = store.load(a, z, &st).expect("load");
            let from_store = stats(loaded.joined(&st));
            let raw = stats(build(&data, None, Some((a, z))));
            same(
                &from_store,
                &raw,
                &format!(
                    "seed {seed}, hours {}..{}",
                    (a - T0) / HOUR,
                    (z - T0) / HOUR
                ),
            );
        }
    }
}

#[test]
fn compacted_days_answer_whole_days_exactly_and_a_rewrite_keeps_the_fuller_piece() {
    let st = ProfileSettings::default();
    let (data, dir) = (samples(7), tempfile::tempdir().expect("tmp"));
    let store = stored(&data, dir.path());
    let before: u64 = store.days().expect("days").iter().map(|d| d.bytes).sum();
    assert_eq!(store.compact(T0 + 2 * 24 * HOUR, &st).expect("compact"), 2);
    let after: u64 = store.days().expect("days").iter().map(|d| d.bytes).sum();
    assert!(after < before, "{after} < {before}");
    let day1 = &store.days().expect("days")[0];
    assert!(
        store
            .read_day(day1)
            .expect("rows")
            .iter()
            .all(|r| r.tile_ms == 86_400_000)
    );
    let (a, z) = (T0, T0 + 3 * 24 * HOUR);
    let loaded = store.load(a, z, &st).expect("load");
    assert_eq!(loaded.covered(), vec![(a, z)]);
    same(
        &stats(loaded.joined(&st)),
        &stats(build(&data, None, Some((a, z)))),
        "whole",
    );
    // A later read of the third day that lost its first hours (a rotated log) keeps the
    // stored hours that had more samples.
    let cut: Vec<_> = data
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.iter()
                    .filter(|s| s.ts_ms >= T0 + 50 * HOUR + HOUR / 2)
                    .copied()
                    .collect(),
            )
        })
        .collect();
    let w = store
        .write(
            &build(&cut, Some(3_600_000), None),
            3_600_000,
            i64::MAX,
            &st,
        )
        .expect("rewrite");
    // Kept: each device with samples in the half hour the cut lost.
    let lost = data
        .iter()
        .filter(|(_, v)| {
            v.iter()
                .any(|s| (T0 + 50 * HOUR..T0 + 50 * HOUR + HOUR / 2).contains(&s.ts_ms))
        })
        .count();
    assert!(lost >= 1);
    assert_eq!(w.kept, lost, "{w:?}");
    assert_eq!(w.changed, 0, "{w:?}");
    let loaded = store.load(a, z, &st).expect("load");
    same(
        &stats(loaded.joined(&st)),
        &stats(build(&data, None, Some((a, z)))),
        "whole",
    );
}

#[test]
fn a_crash_leaves_whole_files_and_bad_files_are_named() {
    let st = ProfileSettings::default();
    let (data, dir) = (samples(3), tempfile::tempdir().expect("tmp"));
    let store = stored(&data, dir.path());
    let days = store.days().expect("days");
    // A writer killed mid-write leaves its temporary file: readers do not see it.
    let tmp = days[0]
        .path
        .parent()
        .expect("dir")
        .join(".part.parquet.999.tmp");
    std::fs::write(&tmp, b"PAR1 half a file").expect("tmp");
    let whole = store.load(T0, T0 + 72 * HOUR, &st).expect("load");
    assert_eq!(
        whole.rows,
        store.load(T0, T0 + 72 * HOUR, &st).expect("again").rows
    );
    // Damage is an error naming the file, never a silent zero.
    std::fs::write(&days[1].path, b"not parquet").expect("damage");
    let e = store
        .load(T0, T0 + 72 * HOUR, &st)
        .expect_err("broken")
        .to_string();
    assert!(e.contains("part.parquet"), "{e}");
    // Other fold rules are refused with both sides named.
    let other = ProfileSettings {
        idle_threshold_pct: 10.0,
        ..ProfileSettings::default()
    };
    let e = store
        .load(T0, T0 + 24 * HOUR, &other)
        .expect_err("other fold")
        .to_string();
    assert!(
        e.contains("idle below 5 %") && e.contains("idle below 10 %"),
        "{e}"
    );
    // Retention removes whole days.
    assert_eq!(store.retain(T0 + 24 * HOUR).expect("retain"), 1);
    assert_eq!(store.days().expect("days").len(), 2);
}

#[test]
fn the_journal_keeps_every_line_and_reports_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tmp");
    journal::append(
        dir.path(),
        &serde_json::json!({"id": "a1", "kind": "shutdown_idle"}),
    )
    .expect("append");
    journal::append(dir.path(), &serde_json::json!({"id": "a1", "mark": "done"})).expect("append");
    let p = journal::path(dir.path());
    let mut text = std::fs::read_to_string(&p).expect("read");
    text.push_str("{\"id\": \"a2\", \"ki");
    std::fs::write(&p, &text).expect("tear");
    let e = journal::read(dir.path()).expect("read");
    assert_eq!(e.entries.len(), 2);
    assert_eq!(e.torn, Some(3));
    std::fs::write(&p, "{\"id\": 1}\nnot json\n{\"id\": 2}\n").expect("damage");
    let err = journal::read(dir.path()).expect_err("broken").to_string();
    assert!(err.contains("line 2"), "{err}");
}

/// A state cell the fuzzer made (CI, 2026-11-27): a held sample at the last sample's own time.
/// Joined, it underflowed the interval bucket (⌊log2 0⌋); it is now refused as inconsistent,
/// and a zero interval would count in the first bucket anyway.
const FUZZED_CELL: &[u8] = &[
    51, 114, 101, 123, 114, 101, 0, 0, 2, 8, 8, 8, 8, 45, 0, 0, 0, 0, 0, 0, 0, 76, 0, 0, 0, 0, 5,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 90, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 229, 229, 229, 229, 34, 44, 34, 105, 100, 34,
    58, 34, 97, 49, 98, 99, 111, 109, 109, 101, 110, 100,
];

/// Another (2026-11-28, after weighted sums became `u64`): a boundary sample whose readings
/// are finite but past any bound a reader lets through; joined, reading × interval overflowed.
/// Refused now (readings out of the sanitized ranges), and the sums saturate anyway.
const FUZZED_READINGS: &[u8] = &[
    8, 116, 119, 111, 45, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 112,
    114, 101, 100, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 65, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 116, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 136,
    50, 1, 1, 1, 1, 1, 1, 1, 1, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 5, 1, 1, 2, 53, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 114, 101, 99,
    111, 109, 109, 101, 110, 0, 0, 1, 2, 0, 128, 129, 167, 219, 115,
];

/// `cell` decodes, is refused as damaged, and joined regardless (as before the check) twice
/// onto a profile, finishes without a panic.
fn refused_and_joins_anyway(cell: &[u8]) {
    let st = ProfileSettings::default();
    let piece = postcard::from_bytes::<TilePiece>(cell).expect("it decodes");
    assert!(!plausible(&piece, 86_400_000), "refused: {piece:?}");
    let mut p = Profile::default();
    p.add_stored(piece.clone(), &st);
    p.add_stored(piece, &st);
    let _ = p.finish(&st, &jiff::tz::TimeZone::UTC);
}

#[test]
fn a_cell_with_readings_no_reader_lets_through_is_refused() {
    // Joined, its sums saturate instead of overflowing.
    refused_and_joins_anyway(FUZZED_READINGS);
}

#[test]
fn a_fuzzed_state_cell_is_refused_and_joins_without_a_panic_anyway() {
    // Joined, the zero interval no longer underflows.
    refused_and_joins_anyway(FUZZED_CELL);
}
