//! A year of a fleet's history written straight into a store, for `bench/history.sh`: no
//! telemetry files (a year of 1,000 GPUs at 30 s is a billion nvidia-smi lines, ~100 GB), the
//! samples generated in memory and folded by the same `ProfileBuilder` tiles and
//! `Store::write` that `gpuwise rollup` uses, a day at a time (each day with the next day's
//! first sample, so the last hour's edge is known; the next day's write replaces that
//! one-sample tile, as a later rollup would).
//!
//!     cargo run --release -p gpuwise-store --example year -- DIR GPUS DAYS INTERVAL_S [COMPACT_AFTER_DAYS]

use std::time::Instant;

use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::sample::{DeviceKey, Sample};
use gpuwise_core::settings::ProfileSettings;
use gpuwise_store::Store;
use rayon::prelude::*;

const DAY: i64 = 86_400_000;
/// 2025-01-01T00:00:00Z.
const START: i64 = 1_735_689_600_000;

fn arg(i: usize, default: &str) -> String {
    std::env::args()
        .nth(i)
        .unwrap_or_else(|| default.to_owned())
}

/// Device `d`'s samples of day `day` (and the next day's first), a busy share by device and a
/// daily cycle, jittered.
fn day_samples(d: usize, day: i64, interval: i64) -> Vec<Sample> {
    let mut rng = fastrand::Rng::with_seed((d as u64) << 20 | day as u64);
    let busy = (d % 10) as f32 / 10.0;
    let from = START + day * DAY;
    let mut out = Vec::with_capacity((DAY / interval) as usize + 2);
    let mut t = from + (d as i64 * 7_919) % interval;
    let mut first_next = false;
    while !first_next {
        first_next = t >= from + DAY;
        let hour = (t - from).rem_euclid(DAY) / 3_600_000;
        let on = (8..20).contains(&hour) || rng.f32() < busy;
        let util = if on { 40.0 + rng.f32() * 60.0 } else { 0.0 };
        out.push(Sample {
            ts_ms: t,
            util_pct: Some(util.round()),
            mem_used_mib: Some(if on { 30_000.0 } else { 500.0 }),
            mem_total_mib: Some(81_920.0),
            power_w: Some(70.0 + util * 3.5),
            ..Sample::default()
        });
        t += interval + rng.i64(-1_000..1_000);
    }
    out
}

#[allow(clippy::print_stdout)] // the example prints its one JSON line
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = arg(1, "year-store");
    let gpus: usize = arg(2, "1000").parse()?;
    let days: i64 = arg(3, "365").parse()?;
    let interval: i64 = arg(4, "30").parse::<i64>()? * 1000;
    let compact: Option<i64> = std::env::args().nth(5).map(|v| v.parse()).transpose()?;
    let st = ProfileSettings::default();
    let store = Store::at(&dir);
    let keys: Vec<DeviceKey> = (0..gpus)
        .map(|d| {
            DeviceKey::new(
                format!("node{:04}", d / 8),
                format!("GPU-{d:08x}-0000-4000-8000-000000000000"),
            )
        })
        .collect();
    let started = Instant::now();
    // Days in pairs of workers: each day is folded and written on its own.
    let samples: u64 = (0..days)
        .into_par_iter()
        .map(|day| -> Result<u64, String> {
            let mut b = ProfileBuilder::new(st.clone()).with_tiles(3_600_000);
            let mut n = 0u64;
            for (d, key) in keys.iter().enumerate() {
                let id = b.device(key.clone());
                b.info_mut(id).model_name = Some("NVIDIA A100-SXM4-80GB".to_owned());
                for s in day_samples(d, day, interval) {
                    let _ = b.push(id, &s);
                    n += 1;
                }
            }
            store
                .write(&b.build(), 3_600_000, i64::MAX, &st)
                .map_err(|e| e.to_string())?;
            Ok(n)
        })
        .collect::<Result<Vec<u64>, String>>()?
        .into_iter()
        .sum();
    let secs = started.elapsed().as_secs_f64();
    let compacted = match compact {
        Some(c) => store.compact(START + (days - c) * DAY, &st)?,
        None => 0,
    };
    let bytes: u64 = store.days()?.iter().map(|d| d.bytes).sum();
    println!(
        "{{\"gpus\": {gpus}, \"days\": {days}, \"interval_s\": {}, \"samples\": {samples}, \"rollup_s\": {secs:.1}, \"samples_per_s\": {:.0}, \"compacted_days\": {compacted}, \"store_bytes\": {bytes}}}",
        interval / 1000,
        samples as f64 / secs
    );
    Ok(())
}
