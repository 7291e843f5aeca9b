//! `gpuwise pack`: the FGD paper's allocation ratios reproduced on the shared Alibaba lists;
//! every placement on the real cluster checked against the CSVs read here; MIG instances at
//! legal positions; consolidation of a report; the bad-input corpus.

use std::collections::{BTreeMap, HashMap};

use crate::common::{run, shared};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

/// Rows of a CSV as maps by column (plain CSV: the shared lists have no quotes).
fn rows(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(str::to_owned)
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_owned))
                .collect()
        })
        .collect()
}

/// A published curve (`analysis_allo_discrete.csv` or `analysis_frag_discrete.csv`): the mean
/// over the ten seeds at each arrived percent.
fn published_curve(data: &std::path::Path, file: &str, list: &str, policy: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(data.join("packing/fgd-simulator-results").join(file))
        .expect("published curves");
    let runs: Vec<HashMap<String, String>> = rows(&text)
        .into_iter()
        .filter(|r| r["workload"] == list && r["sc_policy"] == policy)
        .collect();
    assert_eq!(runs.len(), 10, "ten published seeds");
    (0..=130)
        .map(|x| {
            runs.iter()
                .map(|r| r[&x.to_string()].parse::<f64>().expect("point"))
                .sum::<f64>()
                / 10.0
        })
        .collect()
}

/// Our mean curve over runs, for `field`.
fn mean_curve(runs: &[serde_json::Value], field: &str) -> Vec<f64> {
    let mut sum = vec![(0.0, 0u32); 131];
    for r in runs {
        for p in r["curve"].as_array().expect("curve") {
            let x = p["arrived_pct"].as_u64().expect("x") as usize;
            if x <= 130 {
                sum[x].0 += f(&p[field]);
                sum[x].1 += 1;
            }
        }
    }
    sum.iter().map(|(s, n)| s / f64::from(*n)).collect()
}

#[test]
fn fgd_and_best_fit_reproduce_the_published_curves() {
    let Some(data) = shared() else { return };
    let dir = data.join("packing/alibaba-gpu-v2023");
    let pods = dir.join("openb_pod_list_default.csv").display().to_string();
    let nodes = dir
        .join("openb_node_list_gpu_node.csv")
        .display()
        .to_string();
    for (policy, theirs) in [("fgd", "06-FGD"), ("best-fit", "05-BestFit")] {
        let seeds: Vec<String> = (42..52).map(|s| s.to_string()).collect();
        // Two runs at a time: the machine has two cores.
        let runs: Vec<serde_json::Value> = seeds
            .chunks(2)
            .flat_map(|pair| {
                std::thread::scope(|s| {
                    let handles: Vec<_> = pair
                        .iter()
                        .map(|seed| {
                            let (pods, nodes) = (&pods, &nodes);
                            s.spawn(move || {
                                json(&[
                                    "pack",
                                    pods,
                                    "--nodes",
                                    nodes,
                                    "--policy",
                                    policy,
                                    "--load",
                                    "1.3",
                                    "--shuffle",
                                    "--seed",
                                    seed,
                                    "--format",
                                    "json",
                                ])
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("run"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for r in &runs {
            assert_eq!(r["schema"], "gpuwise.pack/v1");
            assert_eq!(r["cluster_gpus"], 6212);
            let arrived = f(&r["arrived_pct"]);
            assert!((129.9..=130.0).contains(&arrived), "arrived {arrived} %");
            let ratio = f(&r["allocation_ratio_pct"]);
            let unallocated = f(&r["unallocated_gpus"]);
            assert!((6212.0 * (1.0 - ratio / 100.0) - unallocated).abs() < 1e-6);
            assert!((f(&r["fragmented_gpus"]) / 62.12 - f(&r["fragmentation_pct"])).abs() < 1e-9);
        }
        // The whole curves, 0 to 130 % of the GPUs asked for: allocation (Fig. 9a) and
        // fragmentation (Fig. 7a), each point within half a point of the published mean.
        for (field, file) in [
            ("allocation_ratio_pct", "analysis_allo_discrete.csv"),
            ("fragmentation_pct", "analysis_frag_discrete.csv"),
        ] {
            let mine = mean_curve(&runs, field);
            let theirs = published_curve(&data, file, "openb_pod_list_default", theirs);
            for (x, (m, t)) in mine.iter().zip(&theirs).enumerate() {
                assert!(
                    (m - t).abs() <= 0.5,
                    "{policy} {field} at {x} %: {m:.2} against the published {t:.2}"
                );
            }
        }
    }
}

/// All thirteen shared lists × the six policies × the ten seeds of the paper's protocol: the
/// mean allocation ratio at 130 % lies within the range the authors' ten seeds span
/// (`alloc_at_130pct_summary.csv`) and within half a point of their mean. 780 runs, two at a
/// time (the machine has two cores).
#[test]
fn every_shared_list_and_policy_lands_within_the_published_range() {
    let Some(data) = shared() else { return };
    let dir = data.join("packing/alibaba-gpu-v2023");
    let nodes = dir
        .join("openb_node_list_gpu_node.csv")
        .display()
        .to_string();
    let summary = std::fs::read_to_string(
        data.join("packing/fgd-simulator-results/alloc_at_130pct_summary.csv"),
    )
    .expect("published summary");
    let published = rows(&summary);
    assert_eq!(published.len(), 78, "13 lists × 6 policies");
    let policies = [
        ("random", "01-Random"),
        ("dot-product", "02-DotProd"),
        ("gpu-clustering", "03-GpuClustering"),
        ("gpu-packing", "04-GpuPacking"),
        ("best-fit", "05-BestFit"),
        ("fgd", "06-FGD"),
    ];
    let mut jobs = Vec::new();
    for row in &published {
        let (ours, _) = policies
            .iter()
            .find(|(_, theirs)| *theirs == row["sc_policy"])
            .expect("a known policy");
        for seed in 42..52 {
            jobs.push((row["workload"].clone(), *ours, seed));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(BTreeMap::<(String, &str), Vec<f64>>::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((list, policy, seed)) = jobs.get(i) else {
                        break;
                    };
                    let pods = dir.join(format!("{list}.csv")).display().to_string();
                    let r = json(&[
                        "pack",
                        &pods,
                        "--nodes",
                        &nodes,
                        "--policy",
                        policy,
                        "--load",
                        "1.3",
                        "--shuffle",
                        "--seed",
                        &seed.to_string(),
                        "--format",
                        "json",
                    ]);
                    results
                        .lock()
                        .expect("results")
                        .entry((list.clone(), *policy))
                        .or_default()
                        .push(f(&r["allocation_ratio_pct"]));
                }
            });
        }
    });
    let results = results.into_inner().expect("results");
    let mut worst: f64 = 0.0;
    for row in &published {
        let (ours, _) = policies
            .iter()
            .find(|(_, theirs)| *theirs == row["sc_policy"])
            .expect("a known policy");
        let runs = &results[&(row["workload"].clone(), *ours)];
        assert_eq!(runs.len(), 10);
        let mean = runs.iter().sum::<f64>() / 10.0;
        let num = |k: &str| row[k].parse::<f64>().expect("a number");
        let (theirs, lo, hi) = (num("gpu_alloc_pct_at_130_mean"), num("min"), num("max"));
        worst = worst.max((mean - theirs).abs());
        assert!(
            (lo..=hi).contains(&mean) && (mean - theirs).abs() <= 0.5,
            "{} {ours}: {mean:.2} against the published {theirs:.2} ({lo:.2}–{hi:.2})",
            row["workload"]
        );
    }
    eprintln!(
        "78 lists × policies within the published ranges; largest difference of means {worst:.2} points"
    );
}

/// Every placement of one run on the real cluster, replayed against the node and workload
/// lists read here: no node above its CPU or memory, no GPU above 1000 thousandths, GPU models
/// as the workload allows, the GPUs each asked for, and the totals.
#[test]
fn placements_on_the_real_cluster_keep_every_limit() {
    let Some(data) = shared() else { return };
    let dir = data.join("packing/alibaba-gpu-v2023");
    let pods_path = dir.join("openb_pod_list_gpuspec25.csv");
    let nodes_path = dir.join("openb_node_list_gpu_node.csv");
    let pods: HashMap<String, HashMap<String, String>> =
        rows(&std::fs::read_to_string(&pods_path).expect("pods"))
            .into_iter()
            .map(|r| (r["name"].clone(), r))
            .collect();
    let nodes: HashMap<String, HashMap<String, String>> =
        rows(&std::fs::read_to_string(&nodes_path).expect("nodes"))
            .into_iter()
            .map(|r| (r["sn"].clone(), r))
            .collect();
    let r = json(&[
        "pack",
        &pods_path.display().to_string(),
        "--nodes",
        &nodes_path.display().to_string(),
        "--policy",
        "fgd",
        "--load",
        "1.3",
        "--shuffle",
        "--format",
        "json",
    ]);
    let num = |m: &HashMap<String, String>, k: &str| -> i64 { m[k].parse().expect(k) };
    let mut cpu: BTreeMap<&str, i64> = BTreeMap::new();
    let mut mem: BTreeMap<&str, i64> = BTreeMap::new();
    let mut gpu: BTreeMap<(&str, u64), i64> = BTreeMap::new();
    let (mut allocated, mut failed, mut spec_checked) = (0, 0, 0);
    for x in r["placements"].as_array().expect("placements") {
        let name = x["pod"].as_str().expect("pod");
        let original = name.split("-copy-").next().expect("name");
        let p = &pods[original];
        let Some(node) = x["node"].as_str() else {
            failed += 1;
            continue;
        };
        let n = &nodes[node];
        *cpu.entry(node).or_default() += num(p, "cpu_milli");
        *mem.entry(node).or_default() += num(p, "memory_mib");
        assert!(cpu[node] <= num(n, "cpu_milli"), "{node}: CPU over");
        assert!(mem[node] <= num(n, "memory_mib"), "{node}: memory over");
        let (count, milli) = (num(p, "num_gpu"), num(p, "gpu_milli"));
        let gpus = x["gpus"].as_array().expect("gpus");
        assert_eq!(gpus.len() as i64, count, "{name}: GPUs");
        if !p["gpu_spec"].is_empty() {
            assert!(p["gpu_spec"].split('|').any(|m| m == n["model"]), "{name}");
            spec_checked += 1;
        }
        for g in gpus {
            let g = g.as_u64().expect("index");
            assert!((g as i64) < num(n, "gpu"), "{name}: GPU {g} on {node}");
            *gpu.entry((node, g)).or_default() += milli;
            assert!(gpu[&(node, g)] <= 1000, "{node} GPU {g} over 1000");
        }
        allocated += count * milli;
    }
    assert_eq!(r["allocated_gpu_milli"], allocated);
    assert_eq!(r["failed_pods"], failed);
    assert!(
        spec_checked > 500,
        "{spec_checked} placements had a GPU model to respect"
    );
}

#[test]
fn mig_instances_sit_at_legal_positions_and_never_overlap() {
    let dir = tempfile::tempdir().expect("tmp");
    let nodes = dir.path().join("nodes.csv");
    let pods = dir.path().join("pods.csv");
    std::fs::write(
        &nodes,
        "name,gpu,model,cpu_milli,memory_mib\na,4,A100-SXM4-80GB,64000,512000\nb,8,H100-SXM5-80GB,96000,1024000\n",
    )
    .expect("nodes");
    let profiles = [
        "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ];
    let mut list = String::from("name,num_gpu,mig_profile,cpu_milli\n");
    for i in 0..90 {
        list.push_str(&format!("w{i:03},1,{},500\n", profiles[(i * 7) % 6]));
    }
    std::fs::write(&pods, list).expect("pods");
    let r = json(&[
        "pack",
        &pods.display().to_string(),
        "--nodes",
        &nodes.display().to_string(),
        "--policy",
        "mig",
        "--format",
        "json",
    ]);
    // (compute slices, memory slices, legal first memory slices): NVIDIA's MIG User Guide.
    let shape = |p: &str| -> (u8, u8, &'static [u8]) {
        match p {
            "1g.10gb" => (1, 1, &[0, 1, 2, 3, 4, 5, 6]),
            "1g.20gb" => (1, 2, &[0, 2, 4, 6]),
            "2g.20gb" => (2, 2, &[0, 2, 4]),
            "3g.40gb" => (3, 4, &[0, 4]),
            "4g.40gb" => (4, 4, &[0]),
            "7g.80gb" => (7, 8, &[0]),
            other => panic!("{other}"),
        }
    };
    let mut gpus: BTreeMap<(String, u64), (u8, u8)> = BTreeMap::new();
    let mut placed = 0;
    for x in r["placements"].as_array().expect("placements") {
        let Some(node) = x["node"].as_str() else {
            continue;
        };
        let profile = x["mig"]["profile"].as_str().expect("profile");
        let start = x["mig"]["start"].as_u64().expect("start") as u8;
        let (compute, memory, legal) = shape(profile);
        assert!(legal.contains(&start), "{profile} at {start}");
        let g = gpus
            .entry((node.to_owned(), x["gpus"][0].as_u64().expect("gpu")))
            .or_default();
        let span = (((1u16 << memory) - 1) << start) as u8;
        assert_eq!(g.0 & span, 0, "{profile} at {start} overlaps");
        g.0 |= span;
        g.1 += compute;
        assert!(g.1 <= 7, "more than 7 compute slices");
        placed += u64::from(compute);
    }
    let ratio = f(&r["allocation_ratio_pct"]);
    assert!((ratio - 100.0 * placed as f64 / 84.0).abs() < 1e-9);
    assert!(
        r["failed_pods"].as_u64().expect("failed") > 0,
        "90 asks overfill 12 GPUs"
    );
}

#[test]
fn consolidation_packs_a_report_and_skips_what_is_unknown() {
    let file = crate::common::data("bad/pack/report-unknown-memory.json");
    let o = run(&["pack", "--consolidate", &file, "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for why in [
        "peak or total memory unknown",
        "p95 utilization unknown",
        "a MIG instance",
    ] {
        assert!(o.stderr.contains(why), "{why}: {}", o.stderr);
    }
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(r["schema"], "gpuwise.consolidate/v1");
    // Two devices at (25 %, 30 %) and (12.5 %, 20 %) share one GPU; the cheaper price is used.
    assert_eq!(r["devices"], 2);
    assert_eq!(r["gpus_needed"], 1);
    assert_eq!(r["lower_bound"], 1);
    assert_eq!(r["freed"], 1);
    assert!((f(&r["freed_usd_per_month"]) - 4.0 * 730.0).abs() < 1e-9);
    // With 60 % headroom (40 % capacity) they no longer fit together: 0.3 + 0.2 > 0.4.
    let r = json(&[
        "pack",
        "--consolidate",
        &file,
        "--headroom",
        "0.6",
        "--format",
        "json",
    ]);
    assert_eq!(r["gpus_needed"], 2);
    let csv = run(&["pack", "--consolidate", &file, "--format", "csv"]);
    assert!(
        csv.stdout
            .starts_with("device,model,gpu,memory_share,compute_share\n")
    );
}

#[test]
fn the_bad_pack_corpus_gives_clear_errors() {
    let file = |name: &str| crate::common::data(&format!("bad/pack/{name}"));
    let good_nodes = file("nodes-bad-rows.csv");
    let good_pods = file("pods-bad-rows.csv");
    for (pods, nodes, says) in [
        (
            &good_pods,
            file("nodes-missing-columns.csv"),
            "gpu (or gpus)",
        ),
        (
            &good_pods,
            file("nodes-duplicate.csv"),
            "`n0` is listed twice",
        ),
        (
            &file("pods-no-usable-row.csv"),
            good_nodes.clone(),
            "bad_num_gpu ×1",
        ),
    ] {
        let o = run(&["pack", pods, "--nodes", &nodes]);
        assert_eq!(o.code, 2, "{}", o.stderr);
        assert!(o.stderr.contains(says), "{says}: {}", o.stderr);
    }
    let o = run(&[
        "pack",
        &good_pods,
        "--nodes",
        &good_nodes,
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for why in [
        "gpus_without_model",
        "bad_cpu_milli",
        "bad_gpu",
        "gpu_milli_not_1_to_1000",
        "shared_gpus_on_a_multi_gpu_workload",
        "bad_num_gpu",
    ] {
        assert!(o.stderr.contains(why), "{why}: {}", o.stderr);
    }
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(r["nodes"], 2);
    assert_eq!(r["pods"], 3);
    assert_eq!(r["failed_pods"], 0);
    let o = run(&["pack", "--consolidate", &file("report-not-a-report.json")]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("not a `gpuwise report"), "{}", o.stderr);
    // A flag that cannot apply to a consolidation is refused, not ignored.
    let o = run(&[
        "pack",
        "--consolidate",
        &file("report-unknown-memory.json"),
        "--policy",
        "fgd",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--policy"), "{}", o.stderr);
    // A load no copies can reach is an error, not an endless loop.
    let o = run(&[
        "pack",
        &file("pods-cpu-only.csv"),
        "--nodes",
        &good_nodes,
        "--load",
        "1.3",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("no workload in the list asks for a GPU"),
        "{}",
        o.stderr
    );
    for bad in [["--policy", "tetris"], ["--load", "0"]] {
        let o = run(&["pack", &good_pods, "--nodes", &good_nodes, bad[0], bad[1]]);
        assert_eq!(o.code, 2, "{bad:?}");
        assert!(o.stderr.contains(bad[0]), "{}", o.stderr);
    }
}

#[test]
fn table_markdown_and_csv_say_the_same() {
    let nodes = crate::common::data("bad/pack/nodes-bad-rows.csv");
    let pods = crate::common::data("bad/pack/pods-bad-rows.csv");
    let table = run(&["pack", &pods, "--nodes", &nodes, "--policy", "best-fit"]);
    assert!(
        table.stdout.contains("allocation ratio"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("15.00 %"), "{}", table.stdout);
    let md = run(&["pack", &pods, "--nodes", &nodes, "--format", "markdown"]);
    assert!(
        md.stdout.contains("| allocation ratio | 15.00 % |"),
        "{}",
        md.stdout
    );
    let csv = run(&["pack", &pods, "--nodes", &nodes, "--format", "csv"]);
    let lines: Vec<&str> = csv.stdout.lines().collect();
    assert_eq!(lines[0], "pod,node,gpus");
    assert_eq!(lines.len(), 4);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("p6,") && l.ends_with(',')),
        "CPU-only: no GPU"
    );
}

/// Natural mistakes get errors that say what happened: the two lists swapped, a CSV or a
/// directory given to `--consolidate` (they said "header lacks …", "not JSON", "Is a
/// directory").
#[test]
fn swapped_lists_and_wrong_consolidate_inputs_are_named() {
    let nodes = crate::common::data("bad/pack/nodes-duplicate.csv");
    let pods = crate::common::data("bad/pack/pods-cpu-only.csv");
    let o = crate::common::run(&["pack", &nodes, "--nodes", &pods]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("the files look swapped"), "{}", o.stderr);
    let o = crate::common::run(&["pack", "--consolidate", &pods]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("is CSV (`name,num_gpu,cpu_milli`), not a report's JSON"),
        "{}",
        o.stderr
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let o = crate::common::run(&["pack", "--consolidate", &dir.path().display().to_string()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("is a directory: it takes a report's JSON"),
        "{}",
        o.stderr
    );
}
