//! `gpuwise jobs` against planted truth: a fleet whose jobs, GPU use and sampling the test
//! decides, written as nvidia-smi logs (no job labels: the join goes by node, index and time)
//! and DCGM scrapes with dcgm-exporter's `hpc_job` label, with intervals that do not divide
//! the hour, random phases, jitter, gaps, repeated lines, a second collector's verbatim copy, a rotated log
//! read after the newer one, and jobs across the window's edges. The truth is computed second by
//! second from the samples written (not by the join's interval arithmetic).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::common::{Rng, run};

/// 2026-10-05T00:00:00Z.
const T0: i64 = 1_791_158_400;
const MAX_GAP: i64 = 300;
const WINDOW: (i64, i64) = (T0, T0 + 12 * 3600);

/// A planted job: on which node and GPU indices, when (seconds from T0), how busy.
struct Job {
    id: &'static str,
    node: &'static str,
    indices: &'static [u32],
    from_h: f64,
    to_h: f64,
    /// Utilization of each index while busy (by position in `indices`).
    util: &'static [f64],
    /// Busy until this hour, idle after.
    busy_until_h: f64,
    mem_mib: f64,
}

const PLANTED: &[Job] = &[
    // Four GPUs, one used.
    Job {
        id: "101",
        node: "node01",
        indices: &[0, 1, 2, 3],
        from_h: 1.0,
        to_h: 5.0,
        util: &[80.0, 0.0, 0.0, 0.0],
        busy_until_h: 5.0,
        mem_mib: 40_000.0,
    },
    // Busy 1.5 h, then idle for its last 2 h.
    Job {
        id: "102",
        node: "node01",
        indices: &[0, 1],
        from_h: 5.5,
        to_h: 9.0,
        util: &[60.0, 55.0],
        busy_until_h: 7.0,
        mem_mib: 30_000.0,
    },
    // Small memory, hits its time limit.
    Job {
        id: "103",
        node: "node01",
        indices: &[2],
        from_h: 6.0,
        to_h: 8.0,
        util: &[35.0],
        busy_until_h: 8.0,
        mem_mib: 4_000.0,
    },
    // An array task running past the window's end.
    Job {
        id: "104_1",
        node: "node01",
        indices: &[0, 1],
        from_h: 10.0,
        to_h: 14.0,
        util: &[90.0, 90.0],
        busy_until_h: 14.0,
        mem_mib: 70_000.0,
    },
    // Started before the window.
    Job {
        id: "105",
        node: "node02",
        indices: &[0, 1],
        from_h: -2.0,
        to_h: 1.0,
        util: &[45.0, 45.0],
        busy_until_h: 1.0,
        mem_mib: 30_000.0,
    },
    // Eight GPUs over two nodes, one of which sends no telemetry.
    Job {
        id: "106+0",
        node: "node02",
        indices: &[0, 1, 2, 3],
        from_h: 2.0,
        to_h: 6.0,
        util: &[95.0, 95.0, 95.0, 95.0],
        busy_until_h: 6.0,
        mem_mib: 60_000.0,
    },
    // Labelled by the exporter.
    Job {
        id: "107",
        node: "node03",
        indices: &[0],
        from_h: 3.0,
        to_h: 7.0,
        util: &[50.0],
        busy_until_h: 7.0,
        mem_mib: 50_000.0,
    },
    // Labelled, and no record has it.
    Job {
        id: "999",
        node: "node03",
        indices: &[1],
        from_h: 4.0,
        to_h: 5.0,
        util: &[20.0],
        busy_until_h: 5.0,
        mem_mib: 10_000.0,
    },
];

pub(crate) const SACCT: &str = "JobID|JobName|User|Account|Partition|QOS|Submit|Start|End|Elapsed|Timelimit|State|ExitCode|AllocTRES|NodeList
101|wide|ana|ml|gpu|normal|2026-10-05T00:40:00|2026-10-05T01:00:00|2026-10-05T05:00:00|04:00:00|08:00:00|COMPLETED|0:0|billing=32,cpu=32,gres/gpu:a100=4,gres/gpu=4,node=1|node01
101.batch|batch||ml||normal|2026-10-05T01:00:00|2026-10-05T01:00:00|2026-10-05T05:00:00|04:00:00||COMPLETED|0:0|cpu=32,gres/gpu=4|node01
101.extern|extern||ml||normal|2026-10-05T01:00:00|2026-10-05T01:00:00|2026-10-05T05:00:00|04:00:00||COMPLETED|0:0|cpu=32,gres/gpu=4|node01
102|tail|bo|ml|gpu|normal|2026-10-05T05:00:00|2026-10-05T05:30:00|2026-10-05T09:00:00|03:30:00|12:00:00|FAILED|1:0|gres/gpu=2,node=1|node01
103|small|bo|vision|gpu|normal|2026-10-05T06:00:00|2026-10-05T06:00:00|2026-10-05T08:00:00|02:00:00|02:00:00|TIMEOUT|0:0|gres/gpu=1|node01
104_1|sweep|cy|ml|gpu|normal|2026-10-05T09:00:00|2026-10-05T10:00:00|Unknown|00:00:00|1-00:00:00|RUNNING|0:0|gres/gpu=2|node01
105|early|cy|vision|gpu|normal|2026-10-04T21:00:00|2026-10-04T22:00:00|2026-10-05T01:00:00|03:00:00|04:00:00|COMPLETED|0:0|gres/gpu=2|node02
106+0|het|ana|ml|gpu|normal|2026-10-05T02:00:00|2026-10-05T02:00:00|2026-10-05T06:00:00|04:00:00|08:00:00|CANCELLED by 1234|0:15|gres/gpu=8,node=2|node[02,04]
107|labelled|di|nlp|gpu|normal|2026-10-05T02:30:00|2026-10-05T03:00:00|2026-10-05T07:00:00|04:00:00|08:00:00|OUT_OF_MEMORY|0:125|gres/gpu=1|node03
108|waiting|di|nlp|gpu|normal|2026-10-05T11:00:00|Unknown|Unknown|00:00:00|01:00:00|PENDING|0:0||None assigned
109|broken|di|nlp|gpu|normal|2026-10-05T11:00:00|2026-10-05T25:00:00|Unknown|00:00:00|01:00:00|RUNNING|0:0|gres/gpu=1|node03
";

/// The planted job on `node`/`index` at second `t`, and its utilization and memory.
fn owner(node: &str, index: u32, t: i64) -> Option<(&'static str, f64, f64)> {
    PLANTED.iter().find_map(|p| {
        let (a, b) = (
            T0 + (p.from_h * 3600.0) as i64,
            T0 + (p.to_h * 3600.0) as i64,
        );
        let k = p.indices.iter().position(|i| *i == index)?;
        (p.node == node && (a..b).contains(&t)).then(|| {
            let busy = t < T0 + (p.busy_until_h * 3600.0) as i64;
            (p.id, if busy { p.util[k] } else { 0.0 }, p.mem_mib)
        })
    })
}

/// One device's sample times: an interval that does not divide the hour, a random phase,
/// jitter of a few seconds, a 20-minute gap on some devices.
fn times(r: &mut Rng, gap: bool) -> Vec<i64> {
    let step = r.range(37, 74);
    let mut t = WINDOW.0 - 3600 + r.range(0, step);
    let mut out = Vec::new();
    while t < WINDOW.1 + 3600 {
        let jittered = t + r.range(-3, 4);
        let in_gap = gap && (T0 + 3 * 3600..T0 + 3 * 3600 + 1200).contains(&jittered);
        if !in_gap && out.last().is_none_or(|l| jittered > *l) {
            out.push(jittered);
        }
        t += step;
    }
    out
}

fn smi_time(t: i64) -> String {
    let ts = jiff::Timestamp::from_second(t).expect("planted");
    ts.strftime("%Y/%m/%d %H:%M:%S.000").to_string()
}

fn uuid(node: &str, i: u32) -> String {
    let n: u32 = node[4..].parse().expect("planted");
    format!("GPU-{n:04}{i:04}-aaaa-bbbb-cccc-dddddddddddd")
}

/// Per device: (node, index, samples as (time, util, mem, job label)).
pub(crate) type Device = (String, u32, Vec<(i64, f64, f64, Option<&'static str>)>);

pub(crate) fn plant(dir: &Path, seed: u64) -> Vec<Device> {
    let mut r = Rng(seed);
    let mut devices = Vec::new();
    for (node, gpus) in [("node01", 4), ("node02", 4), ("node03", 2)] {
        let mut text = if node == "node03" {
            String::new()
        } else {
            "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n".to_owned()
        };
        for i in 0..gpus {
            let gap = node == "node02" && i == 3;
            let mut samples = Vec::new();
            for t in times(&mut r, gap) {
                let (job, util, mem) =
                    owner(node, i, t).map_or((None, 0.0, 500.0), |(j, u, m)| (Some(j), u, m));
                let label = if node == "node03" { job } else { None };
                samples.push((t, util, mem, label));
                if node == "node03" {
                    let labels = format!(
                        "gpu=\"{i}\",UUID=\"{}\",Hostname=\"{node}\",modelName=\"NVIDIA A100-SXM4-80GB\"{}",
                        uuid(node, i),
                        label.map_or(String::new(), |j| format!(",hpc_job=\"{j}\""))
                    );
                    let _ = writeln!(text, "DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util} {}", t * 1000);
                    let _ = writeln!(text, "DCGM_FI_DEV_FB_USED{{{labels}}} {mem} {}", t * 1000);
                    let _ = writeln!(
                        text,
                        "DCGM_FI_DEV_FB_FREE{{{labels}}} {} {}",
                        81_920.0 - mem,
                        t * 1000
                    );
                } else {
                    let line = format!(
                        "{}, {i}, {}, NVIDIA A100-SXM4-80GB, {util} %, {mem} MiB, 81920 MiB, 250.0 W\n",
                        smi_time(t),
                        uuid(node, i)
                    );
                    text.push_str(&line);
                    if r.chance(0.01) {
                        // A line written twice.
                        text.push_str(&line);
                    }
                }
            }
            devices.push((node.to_owned(), i, samples));
        }
        let name = if node == "node03" {
            format!("{node}.prom")
        } else {
            format!("{node}.csv")
        };
        if node == "node02" {
            // Rotated: the older half in `node02.csv.1`, read after the newer `node02.csv`.
            let lines: Vec<&str> = text.lines().collect();
            let (head, body) = (lines[0], &lines[1..]);
            let cut = smi_time(T0 + 6 * 3600);
            let (older, newer): (Vec<&str>, Vec<&str>) =
                body.iter().partition(|l| l[..cut.len()] < *cut);
            assert!(!older.is_empty() && !newer.is_empty());
            let file = |rows: &[&str]| format!("{head}\n{}\n", rows.join("\n"));
            std::fs::write(dir.join(format!("{name}.1")), file(&older)).expect("planted");
            std::fs::write(dir.join(&name), file(&newer)).expect("planted");
            continue;
        }
        std::fs::write(dir.join(&name), &text).expect("planted");
        if node == "node01" {
            // A second collector's verbatim copy, read first (the directory sorts first).
            std::fs::create_dir_all(dir.join("collector-b")).expect("planted");
            std::fs::write(dir.join("collector-b").join(&name), &text).expect("planted");
        }
    }
    std::fs::write(
        dir.join("README.md"),
        "Not telemetry: notes beside the logs.\n",
    )
    .expect("planted");
    devices
}

/// Per job: (observed seconds, utilization × seconds, idle seconds); and unattributed
/// seconds — second by second, from the samples written.
fn truth(devices: &[Device]) -> (BTreeMap<String, (i64, f64, i64)>, i64) {
    let mut jobs: BTreeMap<String, (i64, f64, i64)> = BTreeMap::new();
    let mut none = 0;
    for (node, index, samples) in devices {
        let inside: Vec<_> = samples
            .iter()
            .filter(|s| (WINDOW.0..WINDOW.1).contains(&s.0))
            .collect();
        for w in inside.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.0 - a.0 > MAX_GAP {
                continue;
            }
            for t in a.0..b.0 {
                // The label first; else the scheduler's record (999 has none).
                let job = match a.3 {
                    Some(j) => Some(j.to_owned()),
                    None => owner(node, *index, t)
                        .map(|(j, _, _)| j.to_owned())
                        .filter(|j| j != "999"),
                };
                match job {
                    Some(j) => {
                        let e = jobs.entry(j).or_default();
                        e.0 += 1;
                        e.1 += a.1;
                        e.2 += i64::from(a.1 < 5.0);
                    }
                    None => none += 1,
                }
            }
        }
    }
    (jobs, none)
}

/// A planted fleet (`fleet/`) and its Slurm accounting (`sacct.txt`), in a folder of their own.
pub(crate) struct Planted {
    _dir: tempfile::TempDir,
    pub(crate) fleet: String,
    pub(crate) sacct: String,
    pub(crate) devices: Vec<Device>,
}

/// The fleet of `seed`, planted.
pub(crate) fn planted(seed: u64) -> Planted {
    let dir = tempfile::tempdir().expect("planted");
    let fleet = dir.path().join("fleet");
    std::fs::create_dir_all(&fleet).expect("planted");
    let devices = plant(&fleet, seed);
    let sacct = dir.path().join("sacct.txt");
    std::fs::write(&sacct, SACCT).expect("planted");
    Planted {
        fleet: fleet.display().to_string(),
        sacct: sacct.display().to_string(),
        _dir: dir,
        devices,
    }
}

impl Planted {
    /// `gpuwise jobs` over the planted window, priced on AWS, with `extra` flags.
    pub(crate) fn jobs(&self, extra: &[&str]) -> crate::common::Out {
        let mut args = vec![
            "jobs",
            &self.fleet,
            "--sacct",
            &self.sacct,
            "--since",
            "2026-10-05T00:00:00Z",
            "--until",
            "2026-10-05T12:00:00Z",
            "--cloud",
            "aws",
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        run(&args)
    }

    /// [`Planted::jobs`] as JSON, which must succeed.
    pub(crate) fn json(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = extra.to_vec();
        args.extend_from_slice(&["--format", "json"]);
        let o = self.jobs(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).expect("JSON")
    }

    /// A folder beside the planted one's, for what a test writes.
    pub(crate) fn path(&self) -> &Path {
        self._dir.path()
    }
}

#[test]
fn each_gpu_second_goes_to_its_job_or_to_none() {
    let p = planted(20_261_005);
    let (truth, none) = truth(&p.devices);
    let o = p.jobs(&["--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("line 12, field Start"),
        "the bad line is named: {}",
        o.stderr
    );
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(j["schema"], "gpuwise.jobs/v1");
    let by_id: BTreeMap<&str, &serde_json::Value> = j["jobs"]
        .as_array()
        .expect("planted")
        .iter()
        .map(|x| (x["id"].as_str().expect("planted"), x))
        .collect();
    for (id, (secs, util_sum, idle)) in &truth {
        let row = by_id[id.as_str()];
        let h = *secs as f64 / 3600.0;
        assert!(
            (row["observed_gpu_hours"].as_f64().expect("planted") - h).abs() < 1e-9,
            "{id}: {row}"
        );
        let mean = util_sum / *secs as f64;
        assert!(
            (row["mean_utilization_pct"].as_f64().expect("planted") - mean).abs() < 1e-6,
            "{id}"
        );
        let share = *idle as f64 / *secs as f64 * 100.0;
        assert!(
            (row["idle_share_pct"].as_f64().expect("planted") - share).abs() < 1e-6,
            "{id}"
        );
    }
    let fleet = &j["fleet"];
    let unattributed = fleet["unattributed_gpu_hours"].as_f64().expect("planted");
    assert!(
        (unattributed - none as f64 / 3600.0).abs() < 1e-9,
        "{fleet}"
    );
    assert_eq!(j["unattributed_gpu_hours"], fleet["unattributed_gpu_hours"]);
    // The join counts what the report counts: every device-hour once, the copy included.
    let observed = fleet["observed_gpu_hours"].as_f64().expect("planted");
    let report = fleet["report_gpu_hours"].as_f64().expect("planted");
    assert!(
        (observed - report).abs() < 1e-6,
        "join {observed} vs report {report}"
    );
    assert!(
        fleet["repeated_samples"].as_u64().expect("planted") > 1000,
        "the copy's samples"
    );
    assert!(
        j["warnings"]
            .as_array()
            .expect("planted")
            .iter()
            .all(|w| !w.as_str().expect("planted").contains("the join saw"))
    );
}

/// A job's row of the JSON.
pub(crate) fn row(j: &serde_json::Value, id: &str) -> serde_json::Value {
    j["jobs"]
        .as_array()
        .expect("planted")
        .iter()
        .find(|x| x["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id}"))
}

/// A job's flags: (kind, message).
fn flags(j: &serde_json::Value, id: &str) -> Vec<(String, String)> {
    row(j, id)["flags"]
        .as_array()
        .expect("planted")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().expect("planted").to_owned(),
                f["message"].as_str().expect("planted").to_owned(),
            )
        })
        .collect()
}

fn has(j: &serde_json::Value, id: &str, kind: &str) -> bool {
    flags(j, id).iter().any(|(k, _)| k == kind)
}

#[test]
fn flags_name_what_was_planted() {
    let j = planted(7).json(&[]);
    assert_eq!(row(&j, "101")["gpus_used"], 1);
    assert!(has(&j, "101", "unused_gpus"), "{:?}", flags(&j, "101"));
    let tail = flags(&j, "102")
        .into_iter()
        .find(|(k, _)| k == "idle_tail")
        .expect("102 idles for its last 2 h");
    assert!(tail.1.contains("last 2.0 h"), "{tail:?}");
    assert!(has(&j, "103", "memory_oversized"), "{:?}", flags(&j, "103"));
    assert!(has(&j, "103", "time_limit"));
    assert!(flags(&j, "106+0").is_empty(), "{:?}", flags(&j, "106+0"));
    assert!(flags(&j, "105").is_empty(), "{:?}", flags(&j, "105"));
}

#[test]
fn held_hours_states_and_unit_costs_follow_the_plan() {
    let j = planted(7).json(&[]);
    let num = |id: &str, field: &str| row(&j, id)[field].as_f64().expect("a number");
    // Held: GPUs × run time inside the window (clipped at both edges).
    for (id, held) in [
        ("101", 16.0),
        ("102", 7.0),
        ("103", 2.0),
        ("104_1", 4.0),
        ("105", 2.0),
        ("106+0", 32.0),
        ("107", 4.0),
    ] {
        assert!(
            (num(id, "gpu_hours") - held).abs() < 1e-9,
            "{id}: {}",
            row(&j, id)
        );
    }
    // Half of 106+0's GPUs are on a node that sends nothing.
    assert!((num("106+0", "observed_gpu_hours") - 16.0).abs() < 0.5);
    assert!(
        j["fleet"]["held_unobserved_gpu_hours"]
            .as_f64()
            .expect("a number")
            >= 16.0
    );
    for (id, state) in [
        ("101", "completed"),
        ("102", "failed"),
        ("103", "timeout"),
        ("104_1", "running"),
        ("106+0", "cancelled"),
        ("107", "out_of_memory"),
        ("108", "pending"),
    ] {
        assert_eq!(row(&j, id)["state"], state, "{id}");
    }
    assert_eq!(num("108", "gpu_hours"), 0.0);
    assert_eq!(row(&j, "999")["source"], "telemetry");
    assert_eq!(row(&j, "107")["binding"], "lowest_free");
    assert_eq!(row(&j, "107")["qos"], "normal");
    assert_eq!(num("101", "queue_wait_s"), 1200.0);
    // Priced from the devices' catalog price; cost = price × held hours.
    assert!((num("101", "cost_usd") - num("101", "price_usd_per_gpu_hour") * 16.0).abs() < 1e-9);
    // Cost per successful run: the account's ended runs' cost over its successes.
    let ml = j["groups"]["account"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["key"] == "ml")
        .expect("account ml")
        .clone();
    let ended: f64 = ["101", "102", "106+0"]
        .iter()
        .map(|id| num(id, "cost_usd"))
        .sum();
    assert_eq!(ml["succeeded"], 1);
    assert_eq!(ml["unsuccessful"], 2);
    let per = |k: &str| ml[k].as_f64().expect("a number");
    assert!(
        (per("cost_per_successful_run_usd") - ended).abs() < 1e-6,
        "{ml}"
    );
    assert!((per("cost_per_run_usd") - ended / 3.0).abs() < 1e-6);
}

#[test]
fn a_job_belongs_to_the_team_that_owns_its_gpus() {
    let p = planted(17);
    let teams = p.path().join("teams.toml");
    std::fs::write(
        &teams,
        "[hosts]\n\"node01\" = \"vision\"\n\"node0[23]\" = \"nlp\"\n",
    )
    .expect("teams");
    let teams = teams.display().to_string();
    let j = p.json(&["--teams", &teams]);
    for (id, team) in [("101", "vision"), ("105", "nlp"), ("107", "nlp")] {
        assert_eq!(row(&j, id)["team"], team, "{id}");
    }
    assert_eq!(
        row(&j, "108")["team"],
        serde_json::Value::Null,
        "a pending job has no GPUs"
    );
    // The CSV: one line per job, the JSON's figures.
    let csv_out = p.jobs(&["--teams", &teams, "--format", "csv"]);
    let mut rd = csv::Reader::from_reader(csv_out.stdout.as_bytes());
    let head = rd.headers().expect("header").clone();
    let col = |name: &str| head.iter().position(|h| h == name).expect(name);
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.expect("a row")).collect();
    assert_eq!(rows.len(), j["jobs"].as_array().expect("jobs").len());
    for r in &rows {
        let json = row(&j, &r[col("id")]);
        assert_eq!(r[col("team")], *json["team"].as_str().unwrap_or(""));
        let h: f64 = r[col("observed_gpu_hours")].parse().expect("hours");
        assert!((h - json["observed_gpu_hours"].as_f64().expect("h")).abs() < 1e-12);
    }
    let teams: Vec<&str> = j["groups"]["team"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["key"].as_str().expect("key"))
        .collect();
    assert_eq!(teams, ["nlp", "vision"]);
}

/// `serve --sacct`: `/api/jobs` for a window is what `gpuwise jobs` prints for it, byte for
/// byte; without job records it is 404.
#[test]
fn the_api_prints_what_the_cli_prints() {
    let p = planted(5);
    let cli = p.jobs(&["--format", "json"]);
    assert_eq!(cli.code, 0, "{}", cli.stderr);
    let served =
        crate::serve::Served::start(&[&p.fleet, "--sacct", &p.sacct, "--cloud", "aws"], &[]);
    let (status, body) =
        served.get("/api/jobs?start=2026-10-05T00:00:00Z&end=2026-10-05T12:00:00Z");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, cli.stdout);
    let (status, page) = served.get("/jobs?last=7d");
    assert_eq!(status, 200);
    assert!(page.contains("id=\"headline\""), "{page}");
    // Each answer reads the samples again: a client asks few distinct windows a minute (16 by
    // default, two asked so far).
    let codes: Vec<u16> = (1..=15)
        .map(|h| served.get(&format!("/api/jobs?last={h}h")).0)
        .collect();
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 14, "{codes:?}");
    assert_eq!(codes.last(), Some(&429), "{codes:?}");
    let bare = crate::serve::Served::start(&[&p.fleet], &[]);
    let (status, body) = bare.get("/api/jobs");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("--sacct"), "{body}");
}

/// `--notify`: one digest per user whose flagged jobs' idle time cost at least the threshold,
/// listing exactly those jobs; the webhook's secret never printed.
#[test]
fn each_user_gets_a_digest_of_their_wasteful_jobs() {
    let p = planted(13);
    let j = p.json(&[]);
    // Expected, from the report: per user, the flagged jobs and their idle cost.
    let mut want: BTreeMap<String, (Vec<String>, f64)> = BTreeMap::new();
    for r in j["jobs"].as_array().expect("jobs") {
        if r["flags"].as_array().is_some_and(|f| !f.is_empty()) && r["user"].is_string() {
            let e = want
                .entry(r["user"].as_str().expect("user").to_owned())
                .or_default();
            e.0.push(r["id"].as_str().expect("id").to_owned());
            e.1 += r["idle_cost_usd"].as_f64().unwrap_or(0.0);
        }
    }
    let min = 5.0;
    want.retain(|_, (_, cost)| *cost >= min);
    assert!(want.len() >= 2, "{want:?}");
    let (url, got) = crate::ledger::receiver(vec![200; want.len()]);
    let min_text = min.to_string();
    let o = p.jobs(&[
        "--notify",
        &url,
        "--notify-format",
        "generic",
        "--digest-min-idle-cost",
        &min_text,
        "-o",
        "/dev/null",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        !o.stderr.contains("secret") && !o.stderr.contains("T000"),
        "{}",
        o.stderr
    );
    // `-o /dev/null` writes to the device: it is never replaced by a file (as root it was).
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let null = std::fs::metadata("/dev/null").expect("/dev/null");
        assert!(
            null.file_type().is_char_device(),
            "/dev/null is still a device"
        );
    }
    let bodies = got.join().expect("receiver");
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in &bodies {
        let d: serde_json::Value = serde_json::from_str(b).expect("a JSON body");
        assert_eq!(d["schema"], "gpuwise.jobs-digest/v1");
        let mut ids: Vec<String> = d["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .map(|x| x["id"].as_str().expect("id").to_owned())
            .collect();
        ids.sort();
        seen.insert(d["user"].as_str().expect("user").to_owned(), ids);
    }
    for (user, (ids, _)) in &mut want {
        ids.sort();
        assert_eq!(seen.get(user), Some(&*ids), "{user}");
    }
    assert_eq!(seen.len(), want.len());
}

/// `gpuwise jobs` on a bad `sacct` file of the corpus (`tests/data/bad/slurm/`): exit code,
/// stdout, stderr.
fn bad(file: &str, extra: &[&str]) -> crate::common::Out {
    let path = crate::common::data(&format!("bad/slurm/{file}"));
    let telemetry = crate::common::data("smi/two-gpus.csv");
    let mut args = vec![
        "jobs",
        &telemetry,
        "--sacct",
        &path,
        "--format",
        "json",
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn the_bad_sacct_corpus_is_read_or_refused_by_name() {
    let o = bad("odd-states.txt", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    for (id, state) in [
        ("11", "cancelled"),
        ("12", "node_fail"),
        ("13", "pending"),
        ("14", "timeout"),
        ("15", "other"),
        ("16", "preempted"),
        ("17", "running"),
        ("18", "out_of_memory"),
    ] {
        assert_eq!(row(&j, id)["state"], state, "{id}");
    }
    assert_eq!(row(&j, "13")["cost_usd"], 0.0, "a pending job held nothing");
    assert_eq!(row(&j, "16")["time_limit_s"], serde_json::Value::Null);
    let o = bad("bad-fields.txt", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for named in [
        "line 2, field Start",
        "line 3, field End",
        "line 4, field AllocTRES",
        "line 5, field NodeList",
        "line 6: 5 fields where the header has 16",
    ] {
        assert!(o.stderr.contains(named), "{named}: {}", o.stderr);
    }
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(
        j["jobs"].as_array().expect("jobs").len(),
        1,
        "the good line is kept"
    );
    assert_eq!(bad("bad-fields.txt", &["--strict"]).code, 2);
    let o = bad("steps-arrays-het.txt", &[]);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let ids: Vec<&str> = j["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|x| x["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["31", "32_0", "32_[1-5]", "40+0", "40+1"]);
    assert_eq!(row(&j, "32_0")["raw_id"], "33");
    assert_eq!(
        row(&j, "40+1")["nodes"],
        serde_json::json!(["gpu01", "gpu02", "gpu07"])
    );
    let o = bad("reused-id.txt", &[]);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(row(&j, "51")["state"], "completed");
    assert_eq!(row(&j, "51@2026-01-05T11:00:00Z")["state"], "failed");
    assert_eq!(
        j["jobs"].as_array().expect("jobs").len(),
        4,
        "the repeated line is one job; a requeued job two runs"
    );
    let again = row(&j, "52@2026-01-05T10:12:00Z");
    assert_eq!(
        (again["restarts"].as_u64(), again["state"].as_str()),
        (Some(1), Some("completed"))
    );
    let cy = j["groups"]["user"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["key"] == "cy")
        .cloned()
        .expect("cy");
    assert_eq!(
        (cy["preempted"].as_u64(), cy["recovered"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        o.stderr.contains("ran more than once (requeued)"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("reused after a controller restart"),
        "{}",
        o.stderr
    );
    let o = bad("parsable-trailing-pipe.txt", &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        row(&serde_json::from_str(&o.stdout).expect("JSON"), "71")["state"],
        "completed"
    );
    let o = bad("no-header.txt", &[]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("no-header.txt") && o.stderr.contains("JobID"),
        "{}",
        o.stderr
    );
    let o = bad("not-utf8.txt", &[]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("not-utf8.txt"), "{}", o.stderr);
}
