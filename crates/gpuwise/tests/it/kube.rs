//! `gpuwise jobs --prometheus URL --kube`: pods that request GPUs, from kube-state-metrics
//! series backfilled into a real Prometheus beside DCGM series whose pod mapping
//! (`namespace`, `pod`) dcgm-exporter would write. Planted: a Deployment's pod on GPU 0 for
//! the whole window, a CronJob's pod on GPU 1 for two hours that failed after two restarts,
//! a pod without GPUs, and GPU 1 without a pod before and after.

use std::fmt::Write as _;

use crate::common::run;
use crate::jobs::row;
use crate::prometheus::{backfilled, tools};

/// 2026-10-05T00:00:00Z, in seconds.
const T0: i64 = 1_791_158_400;
/// One sample a minute for four hours.
const N: i64 = 240;

/// kube-state-metrics' series: (metric, labels, value).
const KSM: &[(&str, &str, f64)] = &[
    (
        "kube_pod_info",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\",node=\"gpu-node-1\"",
        1.0,
    ),
    (
        "kube_pod_owner",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\",owner_kind=\"ReplicaSet\",owner_name=\"serve-7d9f\",owner_is_controller=\"true\"",
        1.0,
    ),
    (
        "kube_replicaset_owner",
        "namespace=\"ml\",replicaset=\"serve-7d9f\",owner_kind=\"Deployment\",owner_name=\"serve\"",
        1.0,
    ),
    (
        "kube_pod_created",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\"",
        (T0 - 600) as f64,
    ),
    (
        "kube_pod_start_time",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\"",
        T0 as f64,
    ),
    (
        "kube_pod_status_phase",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\",phase=\"Running\"",
        1.0,
    ),
    (
        "kube_pod_container_resource_requests",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\",container=\"vllm\",resource=\"nvidia_com_gpu\",unit=\"integer\"",
        1.0,
    ),
    (
        "kube_pod_labels",
        "namespace=\"ml\",pod=\"serve-7d9f-abc\",label_team=\"search\"",
        1.0,
    ),
    (
        "kube_pod_info",
        "namespace=\"ml\",pod=\"nightly-29001-x\",node=\"gpu-node-1\"",
        1.0,
    ),
    (
        "kube_pod_owner",
        "namespace=\"ml\",pod=\"nightly-29001-x\",owner_kind=\"Job\",owner_name=\"nightly-29001\",owner_is_controller=\"true\"",
        1.0,
    ),
    (
        "kube_job_owner",
        "namespace=\"ml\",job_name=\"nightly-29001\",owner_kind=\"CronJob\",owner_name=\"nightly\"",
        1.0,
    ),
    (
        "kube_pod_created",
        "namespace=\"ml\",pod=\"nightly-29001-x\"",
        (T0 + 3600) as f64,
    ),
    (
        "kube_pod_start_time",
        "namespace=\"ml\",pod=\"nightly-29001-x\"",
        (T0 + 3600) as f64,
    ),
    (
        "kube_pod_completion_time",
        "namespace=\"ml\",pod=\"nightly-29001-x\"",
        (T0 + 3 * 3600) as f64,
    ),
    (
        "kube_pod_status_phase",
        "namespace=\"ml\",pod=\"nightly-29001-x\",phase=\"Failed\"",
        1.0,
    ),
    (
        "kube_pod_status_phase",
        "namespace=\"ml\",pod=\"nightly-29001-x\",phase=\"Running\"",
        0.0,
    ),
    (
        "kube_pod_container_status_restarts_total",
        "namespace=\"ml\",pod=\"nightly-29001-x\",container=\"train\"",
        2.0,
    ),
    (
        "kube_pod_container_resource_requests",
        "namespace=\"ml\",pod=\"nightly-29001-x\",container=\"train\",resource=\"nvidia_com_gpu\",unit=\"integer\"",
        1.0,
    ),
    (
        "kube_pod_start_time",
        "namespace=\"ml\",pod=\"web-1\"",
        T0 as f64,
    ),
    (
        "kube_pod_container_resource_requests",
        "namespace=\"ml\",pod=\"web-1\",container=\"web\",resource=\"cpu\",unit=\"core\"",
        2.0,
    ),
];

/// The DCGM series of GPUs 0 and 1, with the pod mapping where a pod held the GPU.
fn dcgm(om: &mut String) {
    let gpu = |i: u32, k: i64| -> (String, f64) {
        let uuid = format!("GPU-0000000{i}-1111-2222-3333-444444444444");
        let base = format!(
            "gpu=\"{i}\",UUID=\"{uuid}\",Hostname=\"gpu-node-1\",modelName=\"NVIDIA A100-SXM4-80GB\""
        );
        match (i, k) {
            (0, _) => (
                format!("{base},namespace=\"ml\",pod=\"serve-7d9f-abc\""),
                60.0,
            ),
            (1, 60..180) => (
                format!("{base},namespace=\"ml\",pod=\"nightly-29001-x\""),
                90.0,
            ),
            _ => (base, 0.0),
        }
    };
    for (m, what) in [
        ("DCGM_FI_DEV_GPU_UTIL", 0),
        ("DCGM_FI_DEV_FB_USED", 1),
        ("DCGM_FI_DEV_FB_FREE", 2),
    ] {
        let _ = writeln!(om, "# TYPE {m} gauge");
        // Series by series (each label set's samples together, in time order).
        let mut series: std::collections::BTreeMap<String, Vec<(i64, f64)>> =
            std::collections::BTreeMap::new();
        for i in 0..2 {
            for k in 0..N {
                let (labels, util) = gpu(i, k);
                let used = if util > 0.0 { 40_000.0 } else { 0.0 };
                let v = [util, used, 81_920.0 - used][what];
                series.entry(labels).or_default().push((T0 + k * 60, v));
            }
        }
        for (labels, points) in series {
            for (t, v) in points {
                let _ = writeln!(om, "{m}{{{labels}}} {v} {t}");
            }
        }
    }
}

fn openmetrics() -> String {
    let mut om = String::new();
    dcgm(&mut om);
    let mut families: std::collections::BTreeMap<&str, Vec<(&str, f64)>> =
        std::collections::BTreeMap::new();
    for (m, labels, v) in KSM {
        families.entry(m).or_default().push((labels, *v));
    }
    for (m, list) in families {
        let _ = writeln!(om, "# TYPE {m} gauge");
        for (labels, v) in list {
            for k in (0..N).step_by(5) {
                let _ = writeln!(om, "{m}{{{labels}}} {v} {}", T0 + k * 60);
            }
        }
    }
    // vLLM's request counter for the serving pod: ten requests a minute.
    let _ = writeln!(om, "# TYPE vllm:request_success_total gauge");
    for k in 0..N {
        let _ = writeln!(
            om,
            "vllm:request_success_total{{namespace=\"ml\",pod=\"serve-7d9f-abc\",finished_reason=\"stop\"}} {} {}",
            10 * k,
            T0 + k * 60
        );
    }
    om.push_str("# EOF\n");
    om
}

#[test]
fn pods_from_kube_state_metrics_are_jobs_with_their_gpu_hours() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let om = tmp.path().join("fleet.om.txt");
    std::fs::write(&om, openmetrics()).expect("om");
    let server = backfilled(&om, tmp.path());
    let url = format!("http://127.0.0.1:{}", server.port);
    let o = run(&[
        "jobs",
        "--prometheus",
        &url,
        "--kube",
        "--start",
        "2026-10-05T00:00:00Z",
        "--end",
        "2026-10-05T04:00:00Z",
        "--cloud",
        "aws",
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(
        j["jobs"].as_array().expect("jobs").len(),
        2,
        "the CPU pod is not a GPU job"
    );
    let serve = row(&j, "ml/serve-7d9f-abc");
    assert_eq!(serve["source"], "kubernetes");
    assert_eq!(serve["name"], "Deployment/serve");
    assert_eq!(serve["state"], "running");
    assert_eq!(serve["user"], "search");
    assert_eq!(serve["queue_wait_s"], 600.0);
    // 240 samples a minute apart: 239 minutes observed, at 60 %.
    let h = |r: &serde_json::Value| r["observed_gpu_hours"].as_f64().expect("h");
    assert!((h(&serve) - 239.0 / 60.0).abs() < 1e-9, "{serve}");
    assert!((serve["mean_utilization_pct"].as_f64().expect("util") - 60.0).abs() < 1e-9);
    // The counter grew 2,390 over 239 minutes; `increase` extrapolates to the window's
    // four hours (at most one interval more).
    let served = serve["requests"].as_f64().expect("requests");
    assert!((2390.0..=2401.0).contains(&served), "{serve}");
    let per_1k = serve["cost_usd"].as_f64().expect("cost") / served * 1000.0;
    assert!((serve["cost_per_1k_requests_usd"].as_f64().expect("per 1k") - per_1k).abs() < 1e-9);
    let nightly = row(&j, "ml/nightly-29001-x");
    assert_eq!(nightly["name"], "CronJob/nightly");
    assert_eq!(nightly["state"], "failed");
    assert_eq!(nightly["restarts"], 2);
    assert!((h(&nightly) - 2.0).abs() < 1e-9, "{nightly}");
    assert!((nightly["gpu_hours"].as_f64().expect("h") - 2.0).abs() < 1e-9);
    let fleet = &j["fleet"];
    let unattributed = fleet["unattributed_gpu_hours"].as_f64().expect("h");
    assert!((unattributed - 119.0 / 60.0).abs() < 1e-9, "{fleet}");
    let (seen, report) = (
        fleet["observed_gpu_hours"].as_f64().expect("h"),
        fleet["report_gpu_hours"].as_f64().expect("h"),
    );
    assert!(
        (seen - report).abs() < 1e-9,
        "join {seen} vs report {report}"
    );
}
