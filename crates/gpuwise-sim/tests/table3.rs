//! Wu et al., NSDI'24, Table 3, on the authors' own 2-week traces (`../shared/data`).

#![allow(clippy::print_stderr)]

use gpuwise_sim::montecarlo::{PolicyKind, Prices, run_all, starts, summarize};
use gpuwise_sim::spot::Job;
use gpuwise_sim::trace::Trace;

fn shared() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("GPUWISE_SHARED_DATA").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
        std::path::PathBuf::from,
    );
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "shared data not found at {} (set GPUWISE_SHARED_DATA); CI must have it",
        dir.display()
    );
    eprintln!("skipping: shared data not found at {}", dir.display());
    None
}

fn read_traces(dir: &std::path::Path) -> Vec<Trace> {
    let mut traces: Vec<Trace> = std::fs::read_dir(dir)
        .expect("traces")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            Trace::from_skypilot_json(
                &std::fs::read_to_string(&p).expect("read"),
                &p.display().to_string(),
            )
            .expect("trace")
        })
        .collect();
    traces.sort_by(|a, b| a.name.cmp(&b.name));
    traces
}

/// The paper's job: 48 h of work, a 60 h deadline, a 12-minute changeover, no checkpoints.
fn paper_job() -> Job {
    Job {
        work_s: 48.0 * 3600.0,
        deadline_s: Some(60.0 * 3600.0),
        changeover_s: 0.2 * 3600.0,
        checkpoint_interval_s: 0.0,
        checkpoint_cost_s: 0.0,
        nodes: 1,
    }
}

const AVAILABILITY: &str = "spot/skypilot-spot-traces/availability/1-node";

#[test]
fn table_3() {
    let Some(data) = shared() else { return };
    let mut traces = read_traces(&data.join(AVAILABILITY).join("aws-10-26-2022"));
    assert_eq!(traces.len(), 8);
    // The paper ran on the collection's first two weeks ("2-week (13 days)", the traces'
    // README); the files have since grown to 27 days.
    for t in &mut traces {
        t.keep_first_hours(13.0 * 24.0);
    }

    let job = paper_job();
    let sets: Vec<(&Trace, Vec<usize>)> = traces
        .iter()
        .enumerate()
        .map(|(i, t)| (t, starts(t, &job, 300, i as u64).expect("fits")))
        .collect();
    // (policy, the paper's on-demand and spot hours); within half an hour each.
    for (p, od, spot) in [
        (PolicyKind::Greedy, 30.8, 17.2),
        (PolicyKind::UniformProgress, 25.1, 22.9),
        (PolicyKind::Omniscient, 20.7, 27.4),
    ] {
        let runs = run_all(p, &job, &sets, None);
        assert_eq!(runs.len(), 2400);
        let s = summarize(p, &job, &runs, None);
        eprintln!(
            "{}: on-demand {:.2} h, spot {:.2} h (paper {od} / {spot}), deadline met {:.3}",
            p.name(),
            s.on_demand_work_hours_mean,
            s.spot_work_hours_mean,
            s.deadline_met_share
        );
        assert!((s.on_demand_work_hours_mean - od).abs() <= 0.5, "{s:?}");
        assert!((s.spot_work_hours_mean - spot).abs() <= 0.5, "{s:?}");
        assert!(
            (s.on_demand_work_hours_mean + s.spot_work_hours_mean - 48.0).abs() < 1e-6,
            "work is conserved"
        );
        assert_eq!(
            s.deadline_met_share, 1.0,
            "a feasible deadline is always met"
        );
    }
}

/// Uniform progress exists to spend less than greedy: on every single-node trace of both
/// collections (the paper's job, prices in the traces' ratio of about 1:3.3), its mean cost
/// is not above greedy's beyond the 1 % two near-identical policies differ by on 300 starts.
#[test]
fn uniform_progress_costs_no_more_than_greedy() {
    let Some(data) = shared() else { return };
    let job = paper_job();
    // p3.2xlarge in us-east-1: $3.06 on demand, about $0.92 spot.
    let prices = Some(Prices {
        spot_usd_per_hour: 0.918,
        on_demand_usd_per_hour: 3.06,
    });
    let mut checked = 0;
    for collection in ["aws-10-26-2022", "aws-02-15-2023"] {
        for (i, t) in read_traces(&data.join(AVAILABILITY).join(collection))
            .iter()
            .enumerate()
        {
            let sets = [(t, starts(t, &job, 300, i as u64).expect("fits"))];
            let cost = |p| {
                summarize(p, &job, &run_all(p, &job, &sets, prices), prices)
                    .cost_usd_mean
                    .expect("priced")
            };
            let (greedy, up) = (cost(PolicyKind::Greedy), cost(PolicyKind::UniformProgress));
            eprintln!(
                "{collection}/{}: greedy ${greedy:.2}, uniform progress ${up:.2}",
                t.name.rsplit('/').next().unwrap_or(&t.name)
            );
            assert!(
                up <= greedy * 1.01,
                "{}: ${up:.2} against ${greedy:.2}",
                t.name
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 14);
}
