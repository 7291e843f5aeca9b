//! `gpuwise schedule` on the Microsoft ITP traces: every policy keeps the pools' capacity,
//! starts no job before it arrives, runs each job for its duration, prices every stretch, and
//! its deadline counts agree with ones computed here from the CSV; bad input.

use std::collections::BTreeMap;

use crate::common::{run, shared};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

/// (submission, duration, GPUs, deadline) by job id, read here from the ITP CSV.
fn itp(text: &str) -> BTreeMap<String, (f64, f64, u32, Option<f64>)> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).expect("column");
    let (id, sub, dur, gpus) = (
        col("job_id"),
        col("submission_time"),
        col("duration"),
        col("num_gpu"),
    );
    let deadline = header.iter().position(|h| *h == "deadline");
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            (
                v[id].to_owned(),
                (
                    v[sub].parse().expect("sub"),
                    v[dur].parse().expect("dur"),
                    v[gpus].parse().expect("gpus"),
                    deadline.map(|d| v[d].parse().expect("deadline")),
                ),
            )
        })
        .collect()
}

#[test]
fn every_policy_on_an_itp_cluster_keeps_the_rules() {
    let Some(data) = shared() else { return };
    let path = data.join("jobs/microsoft-itp-2021/with_deadlines/cluster10.csv");
    let jobs = itp(&std::fs::read_to_string(&path).expect("trace"));
    let file = path.display().to_string();
    let feasible = jobs
        .values()
        .filter(|(s, d, g, dl)| *g <= 64 && dl.is_some_and(|dl| s + d <= dl))
        .count();
    let mut costs = BTreeMap::new();
    for policy in ["fifo", "edf", "priority", "backfill", "cost-aware"] {
        let o = run(&[
            "schedule",
            &file,
            "--pool",
            "reserved=64@1.8",
            "--pool",
            "cloud=32@4.1",
            "--policy",
            policy,
            "--format",
            "json",
        ]);
        assert_eq!(o.code, 0, "{policy}: {}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
        assert_eq!(r["schema"], "gpuwise.schedule/v1");
        assert_eq!(r["jobs"], jobs.len());
        let a = r["assignments"].as_array().expect("assignments");
        // Capacity, arrivals, durations, cost, from the stretches alone.
        let mut edges: Vec<(f64, i64, String)> = Vec::new();
        let mut ran: BTreeMap<&str, f64> = BTreeMap::new();
        let mut last_end: BTreeMap<&str, f64> = BTreeMap::new();
        let mut cost = 0.0;
        for s in a {
            let id = s["job_id"].as_str().expect("id");
            let (sub, _, gpus, _) = jobs[id];
            let (start, end) = (f(&s["start_s"]), f(&s["end_s"]));
            assert!(start >= sub, "{policy}: {id} starts before it arrives");
            assert_eq!(s["gpus"], gpus);
            let pool = s["pool"].as_str().expect("pool").to_owned();
            let price = if pool == "reserved" { 1.8 } else { 4.1 };
            cost += (end - start) / 3600.0 * f64::from(gpus) * price;
            edges.push((start, i64::from(gpus), pool.clone()));
            edges.push((end, -i64::from(gpus), pool));
            *ran.entry(id).or_default() += end - start;
            let e = last_end.entry(id).or_default();
            *e = e.max(end);
        }
        edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let mut used: BTreeMap<String, i64> = BTreeMap::new();
        for (_, d, p) in edges {
            let u = used.entry(p.clone()).or_default();
            *u += d;
            assert!(
                *u <= if p == "reserved" { 64 } else { 32 },
                "{policy}: {p} over capacity"
            );
        }
        for (id, t) in &ran {
            assert!((t - jobs[*id].1).abs() < 1e-6, "{policy}: {id} ran {t} s");
        }
        assert!((f(&r["cost_usd"]) - cost).abs() < 1e-6 * cost);
        assert!(f(&r["lower_bound_cost_usd"]) <= f(&r["cost_usd"]) + 1e-6);
        assert_eq!(r["deadline_feasible"], feasible, "{policy}");
        assert_eq!(
            r["deadlines"],
            jobs.iter().filter(|j| j.1.3.is_some()).count(),
            "{policy}"
        );
        let met = last_end
            .iter()
            .filter(|(id, end)| {
                let (s, d, g, dl) = jobs[**id];
                g <= 64 && dl.is_some_and(|dl| s + d <= dl && **end <= dl + 1e-9)
            })
            .count();
        assert_eq!(r["deadline_met"], met, "{policy}");
        costs.insert(policy, f(&r["cost_usd"]));
    }
    // The cost-aware policy pays no more than first-fit over the same pools.
    assert!(costs["cost-aware"] <= costs["fifo"] + 1e-6, "{costs:?}");
}

#[test]
fn bad_lists_and_pools_are_refused_or_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = dir.path().join("jobs.csv");
    std::fs::write(
        &jobs,
        "job_id,arrival_s,duration_s,gpus,pools\na,0,60,1,\nb,x,60,1,\nc,0,-5,1,\nd,0,60,0,\n",
    )
    .expect("jobs");
    let j = jobs.display().to_string();
    let o = run(&["schedule", &j, "--pool", "p=4@1", "--format", "csv"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("job_id,pool,start_s,end_s,gpus\na,p,0,60,1\n"),
        "{}",
        o.stdout
    );
    for why in ["bad_submission", "bad_duration", "bad_gpus"] {
        assert!(o.stderr.contains(why), "{why}: {}", o.stderr);
    }
    for (args, says) in [
        (vec!["--pool", "p=4"], "@PRICE"),
        (vec!["--pool", "p=4@1", "--pool", "p=2@1"], "named twice"),
        (vec!["--pool", "p=4@1", "--policy", "sjf"], "--policy"),
    ] {
        let mut all = vec!["schedule", j.as_str()];
        all.extend(args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{all:?}");
        assert!(o.stderr.contains(says), "{all:?}: {}", o.stderr);
    }
    let pinned = dir.path().join("pinned.csv");
    std::fs::write(
        &pinned,
        "job_id,arrival_s,duration_s,gpus,pools\na,0,60,1,nowhere\n",
    )
    .expect("jobs");
    let o = run(&["schedule", &pinned.display().to_string(), "--pool", "p=4@1"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("`nowhere`"), "{}", o.stderr);
}

#[test]
fn the_bad_job_corpus_gives_clear_errors() {
    let file = |name: &str| crate::common::data(&format!("bad/jobs/{name}"));
    for (name, says) in [
        ("missing-columns.csv", "submission_time"),
        ("no-usable-row.csv", "no job"),
    ] {
        let f = file(name);
        let o = run(&["schedule", &f, "--pool", "p=4@1"]);
        assert_eq!(o.code, 2, "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains(name) && o.stderr.contains(says),
            "{name}: {}",
            o.stderr
        );
    }
    let f = file("bad-interruptible.csv");
    let o = run(&["schedule", &f, "--pool", "p=4@1", "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("bad_interruptible"), "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(r["jobs"], 1);
}
