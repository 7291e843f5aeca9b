//! `gpuwise jobs --mlflow` against a real MLflow tracking server (`mlflow server` on loopback
//! with SQLite, from PyPI; `.ci/run` installs it) whose runs are made with MLflow's own Python
//! client: runs that name their Slurm job (experiment and quality go to the job), a run that
//! names no job but where it ran (a job of its own), one that names neither (counted in a
//! warning); and an MLflow that does not answer (an error without the URL's credentials).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::jobs::{planted, row};
use crate::prometheus::http_get;

/// The `mlflow` command, or `None` (a printed skip; a failure under CI).
fn mlflow() -> Option<&'static str> {
    if Command::new("mlflow")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("mlflow");
    }
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "mlflow is not installed: .ci/run installs it from PyPI for this test"
    );
    eprintln!("skipping: mlflow is not installed (pip install mlflow)");
    None
}

/// The server and its workers, stopped together.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(program: &str, dir: &Path) -> Server {
    use std::os::unix::process::CommandExt as _;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let child = Command::new(program)
        .args([
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--workers",
            "1",
        ])
        .arg("--backend-store-uri")
        .arg(format!("sqlite:///{}/mlflow.db", dir.display()))
        .arg("--default-artifact-root")
        .arg(dir.join("artifacts"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mlflow server starts");
    let server = Server { child, port };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(90) {
        if http_get(port, "/health").is_some_and(|r| r.contains("200 OK")) {
            return server;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("mlflow server did not answer /health on port {port} within 90 s");
}

/// Runs made with MLflow's client; prints the id of the run that names no job but a place.
const RUNS: &str = r#"
import sys
from mlflow.tracking import MlflowClient
c = MlflowClient(sys.argv[1])
ft = c.create_experiment("llama-ft")
nb = c.create_experiment("notebooks")
ms = lambda h: 1791158400000 + int(h * 3600000)
r = c.create_run(ft, run_name="lr-3e-4", tags={"slurm_job_id": "101"}, start_time=ms(1))
c.log_metric(r.info.run_id, "eval_accuracy", 0.8)
c.log_metric(r.info.run_id, "requests_served", 5000)
c.set_terminated(r.info.run_id, status="FINISHED", end_time=ms(5))
r = c.create_run(ft, run_name="lr-1e-3", tags={"SLURM_JOB_ID": "102"}, start_time=ms(5.5))
c.log_metric(r.info.run_id, "eval_accuracy", 0.5)
c.set_terminated(r.info.run_id, status="FAILED", end_time=ms(9))
own = c.create_run(nb, run_name="explore", tags={"host": "node02", "gpus": "1"}, start_time=ms(7))
c.set_terminated(own.info.run_id, status="FINISHED", end_time=ms(9))
r = c.create_run(nb, run_name="orphan", start_time=ms(7))
c.set_terminated(r.info.run_id, status="KILLED", end_time=ms(8))
print(own.info.run_id)
"#;

#[test]
fn runs_from_a_real_mlflow_give_jobs_their_experiment_and_quality() {
    let Some(program) = mlflow() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(program, tmp.path());
    let url = format!("http://127.0.0.1:{}", server.port);
    let script = tmp.path().join("runs.py");
    std::fs::write(&script, RUNS).expect("script");
    let made = Command::new("python3")
        .arg(&script)
        .arg(&url)
        .output()
        .expect("python3 runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let own = String::from_utf8_lossy(&made.stdout)
        .trim()
        .lines()
        .last()
        .unwrap_or("")
        .to_owned();
    let o = planted(11).jobs(&[
        "--mlflow",
        &url,
        "--quality-metric",
        "eval_accuracy",
        "--requests-metric",
        "requests_served",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let row = |id: &str| row(&j, id);
    let a = row("101");
    assert_eq!(a["experiment"], "llama-ft");
    assert_eq!(a["quality"]["value"], 0.8);
    let per = a["cost_usd"].as_f64().expect("cost") / 0.8;
    assert!(
        (a["quality"]["cost_per_unit_usd"]
            .as_f64()
            .expect("per unit")
            - per)
            .abs()
            < 1e-9
    );
    assert_eq!(a["requests"], 5000.0);
    let per_1k = a["cost_usd"].as_f64().expect("cost") / 5.0;
    assert!((a["cost_per_1k_requests_usd"].as_f64().expect("per 1k") - per_1k).abs() < 1e-9);
    assert_eq!(row("102")["experiment"], "llama-ft");
    let mine = row(&format!("mlflow:{own}"));
    assert_eq!(mine["source"], "mlflow");
    assert_eq!(mine["state"], "completed");
    assert_eq!(mine["gpus"], 1);
    assert!(
        (mine["gpu_hours"].as_f64().expect("h") - 2.0).abs() < 1e-9,
        "{mine}"
    );
    assert!(
        (mine["observed_gpu_hours"].as_f64().expect("h") - 2.0).abs() < 0.1,
        "{mine}"
    );
    let ft = j["groups"]["experiment"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["key"] == "llama-ft")
        .cloned()
        .expect("llama-ft");
    assert_eq!(
        (ft["jobs"].as_u64(), ft["succeeded"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(o.stderr.contains("1 run(s) name no job"), "{}", o.stderr);
}

#[test]
fn an_mlflow_that_does_not_answer_is_an_error_without_its_credentials() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let dead = format!("http://alice:s3cret@127.0.0.1:{port}");
    let o = planted(3).jobs(&["--mlflow", &dead]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("127.0.0.1"), "{}", o.stderr);
    assert!(
        !o.stderr.contains("s3cret") && !o.stderr.contains("alice"),
        "{}",
        o.stderr
    );
}
