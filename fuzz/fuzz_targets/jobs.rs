#![no_main]
//! Fuzz the jobs readers and the schedule: `sacct --parsable2` text, MLflow's REST answers
//! and run exports, kube-state-metrics points' labels; then the schedule of what was read and
//! a join of a few samples through it — no panic. Parts separated by NUL bytes.

use gpuwise_core::profile::{Tap, TapPoint};
use gpuwise_core::{DeviceInfo, DeviceKey, Sample};
use gpuwise_jobs::{Join, JoinSettings, mlflow, record, sacct};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let (a, b, c) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let _ = record::expand_nodes(b);
    let _ = record::slurm_duration_ms(b);
    let _ = mlflow::runs_csv(b);
    let _ = mlflow::runs_page(c, &Default::default());
    let _ = mlflow::experiments_page(c);
    let Ok(read) = sacct::read(a, &jiff::tz::TimeZone::UTC) else {
        return;
    };
    let jobs = &read.jobs[..read.jobs.len().min(500)];
    let mut join = Join::new(
        jobs,
        4_102_444_800_000,
        JoinSettings {
            max_gap_ms: 300_000,
            idle_below_pct: 5.0,
        },
    );
    for (i, j) in jobs.iter().enumerate().take(50) {
        let key = DeviceKey::new(
            j.nodes.first().cloned().unwrap_or_default(),
            format!("gpu{i}"),
        );
        let info = DeviceInfo {
            index: Some(u32::try_from(i % 8).unwrap_or(0)),
            ..DeviceInfo::default()
        };
        for t in [j.start_ms, j.end_ms, j.submit_ms].into_iter().flatten() {
            let at = TapPoint {
                scope: 0,
                id: i,
                key: &key,
                info: &info,
                tag: Some(&j.id),
            };
            join.sample(
                at,
                &Sample {
                    util_pct: Some(50.0),
                    ..Sample::at(t)
                },
            );
        }
    }
    let _ = join.finish();
});
