//! `gpuwise jobs --slurm` against a real Slurm: one node started by `.ci/run` with
//! `tests/slurm/cluster.sh` (slurmctld, slurmd, slurmdbd on MariaDB, munge; four a100 GPUs as
//! generic resources), `$GPUWISE_SLURM_CONF` naming its slurm.conf. Jobs are submitted with
//! `sbatch`; the cluster's prolog writes dcgm-exporter's job mapping (a file per GPU index
//! holding the job id) and the test's exporter writes, every second, each GPU's reading as a
//! DCGM scrape labelled with the mapped job (`hpc_job`) and as an nvidia-smi log without it.
//! The two joins — by the label, and by node, index and time from `sacct` — must agree, which
//! checks the lowest-free rule against the indices Slurm really gave.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::cmd;

/// The cluster's slurm.conf; `None` (with a printed reason) where none runs outside CI.
fn cluster() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("GPUWISE_SLURM_CONF") {
        return Some(PathBuf::from(c));
    }
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "GPUWISE_SLURM_CONF is not set: .ci/run starts a Slurm cluster (tests/slurm/cluster.sh) for this test"
    );
    eprintln!(
        "skipping: no Slurm cluster (start one with tests/slurm/cluster.sh start DIR and set GPUWISE_SLURM_CONF)"
    );
    None
}

fn slurm(conf: &Path, program: &str, args: &[&str]) -> String {
    let o = Command::new(program)
        .args(args)
        .env("SLURM_CONF", conf)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        o.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

fn hostname() -> String {
    let o = Command::new("hostname")
        .arg("-s")
        .output()
        .expect("hostname");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// Every second until stopped: each GPU's utilization (the planted share of the job its
/// mapping file names, by the GPU's place among that job's), as DCGM and as nvidia-smi.
fn exporter(
    map: PathBuf,
    util: PathBuf,
    out: PathBuf,
    host: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let dcgm = out.join("dcgm");
        let smi = out.join("smi");
        std::fs::create_dir_all(&dcgm).expect("dir");
        std::fs::create_dir_all(&smi).expect("dir");
        let mut prom = String::new();
        let mut csv = String::from(
            "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n",
        );
        while !stop.load(Ordering::Relaxed) {
            let now = jiff::Timestamp::now();
            let ms = now.as_millisecond();
            let jobs: Vec<Option<String>> = (0..4)
                .map(|i| {
                    std::fs::read_to_string(map.join(i.to_string()))
                        .ok()
                        .map(|s| s.trim().to_owned())
                })
                .collect();
            for i in 0..4usize {
                let (u, mem) = jobs[i].as_ref().map_or((0.0, 500.0), |j| {
                    let place = (0..i).filter(|k| jobs[*k].as_ref() == Some(j)).count();
                    let planted = std::fs::read_to_string(util.join(j)).unwrap_or_default();
                    let u: f64 = planted
                        .split_whitespace()
                        .nth(place)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0.0);
                    (u, if u > 0.0 { 30_000.0 } else { 1_000.0 })
                });
                let uuid = format!("GPU-0000000{i}-1111-2222-3333-444444444444");
                let label = jobs[i]
                    .as_ref()
                    .map_or(String::new(), |j| format!(",hpc_job=\"{j}\""));
                let labels = format!(
                    "gpu=\"{i}\",UUID=\"{uuid}\",Hostname=\"{host}\",modelName=\"NVIDIA A100-SXM4-80GB\"{label}"
                );
                let _ = writeln!(prom, "DCGM_FI_DEV_GPU_UTIL{{{labels}}} {u} {ms}");
                let _ = writeln!(prom, "DCGM_FI_DEV_FB_USED{{{labels}}} {mem} {ms}");
                let _ = writeln!(
                    prom,
                    "DCGM_FI_DEV_FB_FREE{{{labels}}} {} {ms}",
                    81_920.0 - mem
                );
                let _ = writeln!(
                    csv,
                    "{}, {i}, {uuid}, NVIDIA A100-SXM4-80GB, {u} %, {mem} MiB, 81920 MiB",
                    now.strftime("%Y/%m/%d %H:%M:%S%.3f")
                );
            }
            std::thread::sleep(Duration::from_millis(1000));
        }
        std::fs::write(dcgm.join(format!("{host}.prom")), prom).expect("write");
        std::fs::write(smi.join(format!("{host}.csv")), csv).expect("write");
    })
}

/// Submit a job whose script plants its GPUs' utilization (space-separated, by place) while
/// it runs: a workload's GPU use starts when its script does, not when the prolog maps it.
fn submit(conf: &Path, util: &Path, gpus: u32, planted: &str, work: &str, name: &str) -> String {
    submit_with(conf, util, (gpus, planted), work, name, &[])
}

/// [`submit`] with more `sbatch` flags (`--array=0-1`).
fn submit_with(
    conf: &Path,
    util: &Path,
    (gpus, planted): (u32, &str),
    work: &str,
    name: &str,
    extra: &[&str],
) -> String {
    let gres = format!("--gres=gpu:a100:{gpus}");
    let file = format!("{}/$SLURM_JOB_ID", util.display());
    let script = format!("echo '{planted}' > {file}; {work}; rc=$?; rm -f {file}; exit $rc");
    let mut args = vec![
        "--parsable",
        "-c1",
        "--mem=10",
        "-o",
        "/dev/null",
        &gres,
        "-J",
        name,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--wrap", &script]);
    let id = slurm(conf, "sbatch", &args);
    id.split(';').next().unwrap_or(&id).to_owned()
}

fn states(conf: &Path, ids: &[&str]) -> BTreeMap<String, String> {
    let out = slurm(
        conf,
        "sacct",
        &[
            "--parsable2",
            "--noheader",
            "-X",
            "-a",
            "--format=JobID,JobIDRaw,State",
            "-j",
            &ids.join(","),
        ],
    );
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            Some((f.get(1)?.to_string(), f.get(2)?.to_string()))
        })
        .collect()
}

fn run_jobs(conf: &Path, dir: &Path, since: &str, until: &str) -> serde_json::Value {
    let o = cmd()
        .env("SLURM_CONF", conf)
        .args([
            "jobs",
            &dir.display().to_string(),
            "--slurm",
            "--since",
            since,
            "--until",
            until,
            "--min-observed",
            "1s",
            "--format",
            "json",
            "--no-progress",
        ])
        .output()
        .expect("gpuwise runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// Wait until the jobs have ended, cancelling `cancel` four seconds after it starts.
fn wait(conf: &Path, ids: &[&str], cancel: &str) {
    let start = Instant::now();
    let mut cancelled = false;
    loop {
        let st = states(conf, ids);
        if !cancelled && st.get(cancel).is_some_and(|s| s == "RUNNING") {
            std::thread::sleep(Duration::from_secs(4));
            slurm(conf, "scancel", &[cancel]);
            cancelled = true;
        }
        // An array job lists one line per task.
        let done = st.len() >= ids.len()
            && st
                .values()
                .all(|s| !matches!(s.as_str(), "RUNNING" | "PENDING" | "COMPLETING"));
        if done || start.elapsed() > Duration::from_secs(120) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn row(j: &serde_json::Value, id: &str) -> serde_json::Value {
    j["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|x| x["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("job {id} in {j}"))
}

/// The longest time between one sample round and the next in the exporter's nvidia-smi log.
fn longest_interval_s(csv: &str) -> f64 {
    let times: Vec<f64> = csv
        .lines()
        .skip(1)
        .filter_map(|l| {
            let t = l.split(',').next()?;
            let t = jiff::civil::DateTime::strptime("%Y/%m/%d %H:%M:%S%.f", t).ok()?;
            Some(
                jiff::tz::TimeZone::UTC
                    .to_timestamp(t)
                    .ok()?
                    .as_millisecond() as f64
                    / 1e3,
            )
        })
        .collect();
    times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max)
}

fn util(j: &serde_json::Value, id: &str) -> f64 {
    row(j, id)["mean_utilization_pct"].as_f64().expect("util")
}

/// An idle job: by its label, never used; by the schedule, it holds the reading of the job
/// before it on that GPU for at most one second (sacct's times are whole seconds, so the
/// recorded start can be up to a second early) plus one sample interval (sample and hold:
/// the last reading before the handover stands until the next), and no more.
fn the_idle_job_borrows_one_handover(
    by_label: &serde_json::Value,
    by_schedule: &serde_json::Value,
    cancel: &str,
    dir: &Path,
) {
    assert_eq!(row(by_label, cancel)["gpus_used"], 0);
    let smi = std::fs::read_to_string(dir.join(format!("tel/smi/{}.csv", hostname())))
        .expect("the nvidia-smi log");
    let held = 1.0 + longest_interval_s(&smi);
    let c = row(by_schedule, cancel);
    let busy_s = util(by_schedule, cancel) / 100.0 * c["run_s"].as_f64().expect("run_s");
    assert!(
        busy_s <= 0.8 * held + 0.01,
        "the cancelled job's busy seconds by schedule ({busy_s:.2}) exceed one handover at \
         80 % ({held:.2} s): {c}"
    );
}

#[test]
fn jobs_from_a_real_slurm_agree_by_label_and_by_schedule() {
    let Some(conf) = cluster() else { return };
    let cluster_dir = conf
        .parent()
        .expect("the cluster's directory")
        .to_path_buf();
    let tmp = tempfile::tempdir().expect("tmp");
    let planted = tmp.path().join("util");
    std::fs::create_dir_all(&planted).expect("dir");
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5);
    let stop = Arc::new(AtomicBool::new(false));
    let exp = exporter(
        cluster_dir.join("map"),
        planted.clone(),
        tmp.path().join("tel"),
        hostname(),
        stop.clone(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let both = submit(&conf, &planted, 2, "80 80", "sleep 8", "both");
    let half = submit(&conf, &planted, 2, "70 0", "sleep 8", "half");
    let fail = submit(&conf, &planted, 1, "50", "sleep 4; false", "fail");
    let cancel = submit(&conf, &planted, 1, "0", "sleep 120", "cancel");
    let array = submit_with(
        &conf,
        &planted,
        (1, "60"),
        "sleep 4",
        "sweep",
        &["--array=0-1"],
    );
    wait(&conf, &[&both, &half, &fail, &cancel, &array], &cancel);
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    exp.join().expect("exporter");
    let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    let (since, until) = (since.to_string(), until.to_string());
    let by_label = run_jobs(&conf, &tmp.path().join("tel/dcgm"), &since, &until);
    let by_schedule = run_jobs(&conf, &tmp.path().join("tel/smi"), &since, &until);
    for (id, state) in [
        (&both, "completed"),
        (&half, "completed"),
        (&fail, "failed"),
        (&cancel, "cancelled"),
    ] {
        assert_eq!(row(&by_label, id)["state"], state, "{id}");
    }
    for id in [&both, &half, &fail] {
        let (a, b) = (row(&by_label, id), row(&by_schedule, id));
        let h = |x: &serde_json::Value| x["observed_gpu_hours"].as_f64().expect("h");
        // The prolog writes the mapping a moment after the job starts, the epilog removes it
        // a moment after it ends: up to a few seconds per GPU apart.
        let gpus = a["gpus"].as_f64().expect("gpus");
        assert!(
            (h(&a) - h(&b)).abs() * 3600.0 < 4.0 * gpus,
            "{id}: {} h by label, {} h by schedule",
            h(&a),
            h(&b)
        );
        assert!(h(&a) > 0.0, "{id} was observed");
        assert_eq!(a["gpus_used"], b["gpus_used"], "{id}");
    }
    // Array tasks: Slurm prints `N_0`, `N_1`; the prolog (and so the label) has their own
    // numbers, which `JobIDRaw` gives.
    for task in [format!("{array}_0"), format!("{array}_1")] {
        let (a, b) = (row(&by_label, &task), row(&by_schedule, &task));
        assert!(a["raw_id"].is_string(), "{a}");
        let h = |x: &serde_json::Value| x["observed_gpu_hours"].as_f64().expect("h");
        assert!(
            h(&a) > 0.0 && (h(&a) - h(&b)).abs() * 3600.0 < 4.0,
            "{task}: {a} / {b}"
        );
        assert_eq!(a["source"], "slurm", "{task} found by its raw id");
    }
    assert_eq!(row(&by_label, &both)["gpus_used"], 2);
    assert_eq!(row(&by_label, &both)["gpu_type"], "a100");
    assert!(util(&by_schedule, &both) > 50.0);
    assert_eq!(row(&by_label, &half)["gpus_used"], 1);
    let kinds: Vec<String> = row(&by_schedule, &half)["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .map(|f| f["kind"].as_str().expect("kind").to_owned())
        .collect();
    assert!(kinds.contains(&"unused_gpus".to_owned()), "{kinds:?}");
    the_idle_job_borrows_one_handover(&by_label, &by_schedule, &cancel, tmp.path());
    for j in [&by_label, &by_schedule] {
        let f = &j["fleet"];
        let h = |k: &str| f[k].as_f64().expect("h");
        let (seen, report) = (h("observed_gpu_hours"), h("report_gpu_hours"));
        assert!(
            (seen - report).abs() < 1e-9,
            "join {seen} vs report {report}"
        );
        assert!(h("unattributed_gpu_hours") > 0.0, "GPUs idle between jobs");
    }
}
