//! Kubernetes pods as jobs, from kube-state-metrics series in the store the GPU metrics are in.
//!
//! The binary asks the store for each metric's last value in the window
//! (`last_over_time(M[window])` at its end) and hands the points here. A pod that requests GPUs
//! (`kube_pod_container_resource_requests{resource="nvidia_com_gpu"}`, summed over its
//! containers) is a job `namespace/pod`: its owner chain names it (a ReplicaSet's Deployment,
//! a Job's CronJob: `Deployment/llm-serve`), its node comes from `kube_pod_info`, its times from
//! `kube_pod_created` (submitted), `kube_pod_start_time` and `kube_pod_completion_time`, its
//! state from the phase whose `kube_pod_status_phase` is 1, its restarts from
//! `kube_pod_container_status_restarts_total`, its user and experiment from the allow-listed
//! pod labels `label_user` (or `label_owner`, `label_team`) and `label_experiment`. Its GPU
//! samples find it by dcgm-exporter's pod mapping (`namespace` and `pod` on each series).

use std::collections::BTreeMap;

use gpuwise_core::EpochMs;

use crate::record::{JobRecord, JobState, Source};

/// The kube-state-metrics series read.
pub const METRICS: &[&str] = &[
    "kube_pod_info",
    "kube_pod_owner",
    "kube_pod_labels",
    "kube_pod_created",
    "kube_pod_start_time",
    "kube_pod_completion_time",
    "kube_pod_status_phase",
    "kube_pod_container_status_restarts_total",
    "kube_pod_container_resource_requests",
    "kube_replicaset_owner",
    "kube_job_owner",
];

/// The name the binary gives the requests each pod served in the window (its counter's
/// `increase`, summed by namespace and pod), for the cost per 1,000 requests.
pub const REQUESTS: &str = "requests";

/// One series' last value in the window.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The metric (one of [`METRICS`]).
    pub metric: String,
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// Its last value.
    pub value: f64,
}

/// What is gathered per pod before it becomes a record.
#[derive(Default)]
struct Pod {
    node: Option<String>,
    owner: Option<(String, String, bool)>,
    labels: BTreeMap<String, String>,
    created: Option<f64>,
    started: Option<f64>,
    completed: Option<f64>,
    phase: Option<String>,
    restarts: f64,
    gpus: f64,
    requests: Option<f64>,
}

#[allow(clippy::cast_possible_truncation)]
fn ms(seconds: f64) -> Option<EpochMs> {
    (seconds.is_finite() && seconds > 0.0).then(|| (seconds * 1000.0).round() as EpochMs)
}

/// The GPU-requesting pods of `points` as job records, by `namespace/pod`.
#[must_use]
pub fn pods(points: &[Point]) -> Vec<JobRecord> {
    let mut pods: BTreeMap<(String, String), Pod> = BTreeMap::new();
    let mut rs_owner: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    let mut job_owner: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    for p in points {
        let l = |k: &str| p.labels.get(k).cloned().unwrap_or_default();
        let ns = l("namespace");
        match p.metric.as_str() {
            "kube_replicaset_owner" if !l("owner_name").is_empty() => {
                rs_owner.insert((ns, l("replicaset")), (l("owner_kind"), l("owner_name")));
                continue;
            }
            "kube_job_owner" if !l("owner_name").is_empty() => {
                job_owner.insert((ns, l("job_name")), (l("owner_kind"), l("owner_name")));
                continue;
            }
            _ => {}
        }
        let pod_name = l("pod");
        if pod_name.is_empty() || ns.is_empty() {
            continue;
        }
        let pod = pods.entry((ns, pod_name)).or_default();
        absorb(pod, p);
    }
    pods.into_iter()
        .filter(|(_, p)| p.gpus >= 1.0)
        .map(|((ns, name), p)| record(&ns, &name, p, &rs_owner, &job_owner))
        .collect()
}

/// Fold one series into its pod.
fn absorb(pod: &mut Pod, p: &Point) {
    let l = |k: &str| p.labels.get(k).filter(|v| !v.is_empty()).cloned();
    match p.metric.as_str() {
        "kube_pod_info" => pod.node = l("node").or(pod.node.take()),
        "kube_pod_owner" => {
            if let (Some(kind), Some(name)) = (l("owner_kind"), l("owner_name")) {
                let controller = l("owner_is_controller").as_deref() == Some("true");
                if pod.owner.as_ref().is_none_or(|o| !o.2 && controller) {
                    pod.owner = Some((kind, name, controller));
                }
            }
        }
        "kube_pod_labels" => {
            for (k, v) in &p.labels {
                if let Some(name) = k.strip_prefix("label_") {
                    pod.labels.insert(name.to_owned(), v.clone());
                }
            }
        }
        "kube_pod_created" => pod.created = Some(p.value),
        REQUESTS if p.value.is_finite() && p.value >= 0.0 => {
            pod.requests = Some(pod.requests.unwrap_or(0.0) + p.value);
        }
        "kube_pod_start_time" => pod.started = Some(p.value),
        "kube_pod_completion_time" => {
            pod.completed = Some(pod.completed.map_or(p.value, |c| c.max(p.value)));
        }
        "kube_pod_status_phase" if p.value >= 1.0 => pod.phase = l("phase"),
        "kube_pod_container_status_restarts_total" if p.value.is_finite() => {
            pod.restarts += p.value;
        }
        "kube_pod_container_resource_requests"
            if matches!(
                l("resource").as_deref(),
                Some("nvidia_com_gpu" | "nvidia.com/gpu")
            ) && p.value.is_finite() =>
        {
            pod.gpus += p.value;
        }
        _ => {}
    }
}

fn record(
    ns: &str,
    name: &str,
    p: Pod,
    rs_owner: &BTreeMap<(String, String), (String, String)>,
    job_owner: &BTreeMap<(String, String), (String, String)>,
) -> JobRecord {
    let mut r = JobRecord::new(format!("{ns}/{name}"), Source::Kubernetes);
    // The owner chain: a ReplicaSet's Deployment, a Job's CronJob.
    let owner = p.owner.map(|(kind, owner, _)| {
        let up = match kind.as_str() {
            "ReplicaSet" => rs_owner.get(&(ns.to_owned(), owner.clone())),
            "Job" => job_owner.get(&(ns.to_owned(), owner.clone())),
            _ => None,
        };
        match up {
            Some((k, n)) if !k.is_empty() => format!("{k}/{n}"),
            _ => format!("{kind}/{owner}"),
        }
    });
    r.name = owner.or_else(|| Some(name.to_owned()));
    r.account = Some(ns.to_owned());
    r.user = ["user", "owner", "team"]
        .iter()
        .find_map(|k| p.labels.get(*k).cloned());
    r.experiment = p.labels.get("experiment").cloned();
    r.submit_ms = p.created.and_then(ms);
    r.start_ms = p.started.and_then(ms);
    r.end_ms = p.completed.and_then(ms);
    r.state = match p.phase.as_deref() {
        Some("Succeeded") => JobState::Completed,
        Some("Failed") => JobState::Failed,
        Some("Running") => JobState::Running,
        Some("Pending") => JobState::Pending,
        _ => JobState::Other,
    };
    if r.state == JobState::Running {
        r.end_ms = None;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    {
        r.gpus = p.gpus.round() as u32;
        r.restarts = p.restarts.round() as u32;
    }
    r.nodes = p.node.into_iter().collect();
    r.requests = p.requests;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(metric: &str, labels: &[(&str, &str)], value: f64) -> Point {
        Point {
            metric: metric.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        }
    }

    /// Two GPU pods (a Deployment's, a CronJob's) and a CPU pod.
    fn planted() -> Vec<Point> {
        let ns = ("namespace", "ml");
        let a = ("pod", "serve-7d9f-abc");
        let b = ("pod", "train-x-1");
        vec![
            pt("kube_pod_info", &[ns, a, ("node", "gpu-node-1")], 1.0),
            pt(
                "kube_pod_owner",
                &[
                    ns,
                    a,
                    ("owner_kind", "ReplicaSet"),
                    ("owner_name", "serve-7d9f"),
                    ("owner_is_controller", "true"),
                ],
                1.0,
            ),
            pt(
                "kube_replicaset_owner",
                &[
                    ns,
                    ("replicaset", "serve-7d9f"),
                    ("owner_kind", "Deployment"),
                    ("owner_name", "serve"),
                ],
                1.0,
            ),
            pt("kube_pod_created", &[ns, a], 1_791_158_400.0),
            pt("kube_pod_start_time", &[ns, a], 1_791_158_460.0),
            pt("kube_pod_status_phase", &[ns, a, ("phase", "Pending")], 0.0),
            pt("kube_pod_status_phase", &[ns, a, ("phase", "Running")], 1.0),
            pt(
                "kube_pod_container_resource_requests",
                &[ns, a, ("resource", "nvidia_com_gpu"), ("container", "c1")],
                2.0,
            ),
            pt(
                "kube_pod_container_resource_requests",
                &[ns, a, ("resource", "cpu"), ("container", "c1")],
                8.0,
            ),
            pt(
                "kube_pod_container_status_restarts_total",
                &[ns, a, ("container", "c1")],
                3.0,
            ),
            pt("kube_pod_labels", &[ns, a, ("label_team", "search")], 1.0),
            pt(
                "kube_pod_owner",
                &[
                    ns,
                    b,
                    ("owner_kind", "Job"),
                    ("owner_name", "train-x"),
                    ("owner_is_controller", "true"),
                ],
                1.0,
            ),
            pt(
                "kube_job_owner",
                &[
                    ns,
                    ("job_name", "train-x"),
                    ("owner_kind", "CronJob"),
                    ("owner_name", "nightly"),
                ],
                1.0,
            ),
            pt("kube_pod_status_phase", &[ns, b, ("phase", "Failed")], 1.0),
            pt("kube_pod_completion_time", &[ns, b], 1_791_162_000.0),
            pt("kube_pod_start_time", &[ns, b], 1_791_158_400.0),
            pt(
                "kube_pod_container_resource_requests",
                &[ns, b, ("resource", "nvidia_com_gpu")],
                1.0,
            ),
            pt(
                "kube_pod_labels",
                &[ns, b, ("label_experiment", "ablation")],
                1.0,
            ),
            // A CPU pod is not a GPU job.
            pt(
                "kube_pod_start_time",
                &[ns, ("pod", "web")],
                1_791_158_400.0,
            ),
        ]
    }

    #[test]
    fn gpu_pods_with_their_owner_chain_phase_and_times() {
        let points = planted();
        let r = pods(&points);
        assert_eq!(r.len(), 2);
        let (s, t) = (&r[0], &r[1]);
        assert_eq!(s.id, "ml/serve-7d9f-abc");
        assert_eq!(s.name.as_deref(), Some("Deployment/serve"));
        assert_eq!((s.gpus, s.restarts, s.state), (2, 3, JobState::Running));
        assert_eq!(s.nodes, ["gpu-node-1"]);
        assert_eq!(s.queue_wait_ms(), Some(60_000));
        assert_eq!(s.user.as_deref(), Some("search"));
        assert_eq!(t.name.as_deref(), Some("CronJob/nightly"));
        assert_eq!(t.state, JobState::Failed);
        assert_eq!(
            t.end_ms.zip(t.start_ms).map(|(e, s)| e - s),
            Some(3_600_000)
        );
        assert_eq!(t.experiment.as_deref(), Some("ablation"));
    }
}
