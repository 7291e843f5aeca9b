//! `gpuwise serve` on a free loopback port: the API prints what the CLI prints (whole data,
//! windows, advice), files that grow, appear and rotate are read from where they were left and
//! still give the CLI's report, `/metrics` is OpenMetrics that promtool accepts with the
//! report's figures, and a listener others can reach needs a token. (The dashboard in a
//! browser is in `browser`.)

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{cmd, run};

/// A running `gpuwise serve`, killed when dropped.
pub(crate) struct Served {
    child: Child,
    pub(crate) base: String,
    token: Option<String>,
}

impl Served {
    /// Start `gpuwise serve ARGS --listen 127.0.0.1:0` and wait for its address.
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut c = cmd();
        c.arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("gpuwise serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("serving http") {
                    // `serving http://ADDR/` or `serving https://ADDR/`.
                    let url = &line[at + 8..];
                    let end = url.find("://").map_or(url.len(), |i| i + 3);
                    let addr = url[end..].split('/').next().unwrap_or("");
                    let _ = tx.send(Ok(format!("{}{addr}", &url[..end])));
                }
                all.push_str(&line);
                all.push('\n');
            }
            let _ = tx.send(Err(all));
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(base)) => Self {
                child,
                base,
                token: None,
            },
            Ok(Err(stderr)) => panic!("gpuwise serve stopped: {stderr}"),
            Err(_) => panic!("gpuwise serve did not start in time"),
        }
    }

    /// The server's resident memory in KiB (Linux), else `None`.
    fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }

    fn with_token(mut self, t: &str) -> Self {
        self.token = Some(t.to_owned());
        self
    }

    /// GET `path`: status and body.
    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        self.get_as(path, self.token.as_deref())
    }

    fn get_as(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut req = agent.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut r = req.call().expect("the server answers");
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().expect("a text body"))
    }

    /// The data generation `/healthz` reports.
    pub(crate) fn generation(&self) -> u64 {
        let (_, body) = self.get("/healthz");
        let v: serde_json::Value = serde_json::from_str(&body).expect("healthz JSON");
        v["generation"].as_u64().expect("generation")
    }

    /// Wait until the server has read new data (a generation after `after`).
    pub(crate) fn wait_past(&self, after: u64) {
        let start = Instant::now();
        while self.generation() <= after {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no refresh after generation {after}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A generated fleet (nvidia-smi CSV, one file per host) in `dir/fleet`, without its planted
/// truth.
pub(crate) fn fleet(dir: &Path, gpus: &str, days: &str) -> String {
    let out = crate::rules::fleet_at(dir, crate::common::NOW, gpus, days, "11", &[]);
    std::fs::remove_file(dir.join("fleet/truth.json")).expect("truth");
    out
}

fn cli(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.code, 0, "gpuwise {args:?}: {}", o.stderr);
    o.stdout
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).expect("JSON")
}

#[test]
fn the_api_prints_what_the_cli_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "10", "4");
    let s = Served::start(&[&data], &[]);
    let (code, report) = s.get("/api/report");
    assert_eq!(code, 200, "{report}");
    assert_eq!(
        report,
        cli(&["report", &data, "--format", "json", "--no-progress"])
    );
    let (code, advice) = s.get("/api/advice");
    assert_eq!(code, 200);
    assert_eq!(
        advice,
        cli(&["advise", &data, "--format", "json", "--no-progress"])
    );
    let (code, allocation) = s.get("/api/allocation");
    assert_eq!(code, 200);
    assert_eq!(
        allocation,
        cli(&["allocate", &data, "--format", "json", "--no-progress"])
    );
    // A window is whole UTC days, the same as --since/--until on those days: a range inside
    // one day, a date range (the end date included), and the last day of data.
    let first = json(&report)["window"]["start"]
        .as_str()
        .expect("start")
        .to_owned();
    let day = |n: i64| {
        let d: jiff::civil::Date = first[..10].parse().expect("date");
        d.checked_add(jiff::Span::new().days(n))
            .expect("day")
            .to_string()
    };
    for (query, since, until) in [
        (
            format!("start={}T06:00:00Z&end={}T07:00:00Z", day(1), day(1)),
            day(1),
            day(2),
        ),
        (format!("start={}&end={}", day(1), day(2)), day(1), day(3)),
    ] {
        let (code, body) = s.get(&format!("/api/report?{query}"));
        assert_eq!(code, 200, "{query}: {body}");
        let want = cli(&[
            "report",
            &data,
            "--format",
            "json",
            "--no-progress",
            "--since",
            &since,
            "--until",
            &until,
        ]);
        assert_eq!(body, want, "?{query}");
        assert!(json(&body)["fleet"]["gpu_hours"].as_f64().expect("h") > 0.0);
    }
    let end = json(&report)["window"]["end"]
        .as_str()
        .expect("end")
        .to_owned();
    last_is_the_n_ending_at_the_newest_sample(&s, &data, &end);
    // Bad windows are the client's error; one outside the data is not found.
    for q in [
        "last=7",
        "start=yesterday",
        "start=2026-01-03&end=2026-01-02",
        "last=1d&start=2026-01-01",
    ] {
        let (code, body) = s.get(&format!("/api/report?{q}"));
        assert_eq!(code, 400, "?{q}: {body}");
        assert!(json(&body)["error"].is_string());
    }
    let (code, _) = s.get("/api/report?start=2030-01-01");
    assert_eq!(code, 404);
    let (code, _) = s.get("/device?id=nosuch");
    assert_eq!(code, 404);
}

/// Append `lines` to `path`, the last one without its line end when `partial`.
fn append(path: &Path, lines: &[&str], partial: bool) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("append");
    for (i, l) in lines.iter().enumerate() {
        f.write_all(l.as_bytes()).expect("write");
        if !(partial && i + 1 == lines.len()) {
            f.write_all(b"\n").expect("write");
        }
    }
}

#[test]
fn files_that_grow_appear_and_rotate_are_read_where_they_were_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "12", "2");
    // Hold back the second half of one host's log, and a whole host.
    let mut files: Vec<_> = std::fs::read_dir(&data)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let grow = files[0].clone();
    let text = std::fs::read_to_string(&grow).expect("log");
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    std::fs::write(&grow, format!("{}\n", lines[..half].join("\n"))).expect("half");
    let later = files[1].clone();
    let held = dir.path().join("held.csv");
    std::fs::rename(&later, &held).expect("hold back");
    // A line still being written when the server starts is left for later.
    append(&grow, &[&lines[half][..lines[half].len() / 2]], true);
    let s = Served::start(&[&data, "--refresh", "1s"], &[]);
    let g0 = s.generation();
    let (_, first) = s.get("/api/report");
    let skipped = json(&first)["ingest"]["skipped"].as_u64().expect("skipped");
    assert_eq!(skipped, 0, "a half-written line is not a bad line");
    // The rest of the line, the rest of the log, and the held host appear.
    append(&grow, &[&lines[half][lines[half].len() / 2..]], false);
    append(&grow, &lines[half + 1..], false);
    std::fs::rename(&held, &later).expect("appear");
    s.wait_past(g0);
    let reads = |s: &Served| json(&s.get("/healthz").1)["reads"].clone();
    let expected = || cli(&["report", &data, "--format", "json", "--no-progress"]);
    let mut got = s.get("/api/report").1;
    // The two changes may land in two refreshes.
    let start = Instant::now();
    while got != expected() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(300));
        got = s.get("/api/report").1;
    }
    assert_eq!(got, expected());
    // The grown log was read from where it was left, not again whole.
    let r = reads(&s);
    assert_eq!(r["grown"], 1, "{r}");
    assert_eq!(r["reread"], 0, "{r}");
    assert_eq!(r["new"], 2, "{r}");
    // Rotation: the log is renamed and a new one started at the same path with the next hour
    // of the same devices (written by shifting the last hour's lines by one hour).
    let g1 = s.generation();
    let rotated = grow.with_extension("csv.1");
    std::fs::rename(&grow, &rotated).expect("rotate");
    let header = lines[0];
    let tail: Vec<String> = lines[lines.len() - 12..]
        .iter()
        .map(|l| shift_hour(l))
        .collect();
    std::fs::write(&grow, format!("{header}\n{}\n", tail.join("\n"))).expect("new log");
    s.wait_past(g1);
    let start = Instant::now();
    let mut got = s.get("/api/report").1;
    while got != expected() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(300));
        got = s.get("/api/report").1;
    }
    assert_eq!(got, expected(), "after rotation");
    // The renamed log is the same input (its data kept, nothing read again); the new one is new.
    let r = reads(&s);
    assert_eq!((&r["new"], &r["reread"]), (&3.into(), &0.into()), "{r}");
    let hours = json(&got)["fleet"]["gpu_hours"].as_f64().expect("hours");
    let before = json(&first)["fleet"]["gpu_hours"].as_f64().expect("hours");
    assert!(hours > before, "{hours} after growing, {before} before");
}

/// An nvidia-smi CSV line one hour later (its timestamp is the first field,
/// `YYYY/MM/DD HH:MM:SS.mmm`).
fn shift_hour(line: &str) -> String {
    let (ts, rest) = line.split_once(',').expect("a CSV line");
    let t: jiff::civil::DateTime =
        jiff::civil::DateTime::strptime("%Y/%m/%d %H:%M:%S%.f", ts.trim())
            .expect("an nvidia-smi timestamp");
    let later = t.checked_add(jiff::Span::new().hours(1)).expect("later");
    format!("{},{rest}", later.strftime("%Y/%m/%d %H:%M:%S%.3f"))
}

#[test]
fn metrics_are_openmetrics_with_the_reports_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "6", "2");
    // A hostile team name: quotes, a backslash and a line break in a label value.
    let teams = dir.path().join("teams.toml");
    std::fs::write(
        &teams,
        "[hosts]\n\"*\" = \"ml \\\"core\\\" \\\\ team\\nB<script>alert(1)</script>\"\n",
    )
    .expect("teams");
    let s = Served::start(&[&data, "--teams", &teams.display().to_string()], &[]);
    let (code, text) = s.get("/metrics");
    assert_eq!(code, 200);
    assert!(
        text.ends_with("# EOF\n"),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    let report = json(&s.get("/api/report").1);
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    let fleet = &report["fleet"];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(
        value("gpuwise_fleet_gpu_seconds"),
        fleet["gpu_hours"].as_f64().expect("h") * 3600.0
    ));
    assert!(close(
        value("gpuwise_fleet_idle_gpu_seconds"),
        fleet["idle_gpu_hours"].as_f64().expect("h") * 3600.0
    ));
    let devices = report["devices"].as_array().expect("devices");
    let classes = text
        .lines()
        .filter(|l| l.starts_with("gpuwise_device_class{"))
        .count();
    assert_eq!(classes, devices.len());
    assert!(
        text.contains(r#"team="ml \"core\" \\ team\nB<script>alert(1)</script>""#),
        "escaped label"
    );
    // The same name on the dashboard is text, not markup.
    let (_, page) = s.get("/");
    assert!(
        !page.contains("<script>alert(1)"),
        "the team name ran as a script"
    );
    assert!(
        page.contains("&lt;script&gt;alert(1)"),
        "the team name is shown"
    );
    // promtool (Prometheus' own checker) accepts it.
    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut p) => {
            p.stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write");
            let o = p.wait_with_output().expect("promtool");
            assert!(
                o.status.success(),
                "promtool: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Err(_) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "promtool must be installed in CI"
            );
            eprintln!("skipping promtool: not installed");
        }
    }
}

#[test]
fn a_listener_others_can_reach_needs_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "4", "1");
    let o = run(&["serve", &data, "--listen", "0.0.0.0:0"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("not a loopback address"), "{}", o.stderr);
    // A taken port is said at once, with its address, once, before the fleet is read
    // (`--port` is `--listen`; it suggested --prometheus).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let o = run(&["serve", &data, "--port", &port]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    let want = format!("error: cannot listen on 127.0.0.1:{port}: Address already in use");
    assert!(o.stderr.contains(&want), "{}", o.stderr);
    assert_eq!(
        o.stderr.matches("Address already in use").count(),
        1,
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("read "),
        "the fleet was read first: {}",
        o.stderr
    );
    for (args, says) in [
        (
            vec!["--token-env", "GPUWISE_TEST_UNSET_TOKEN"],
            "is not set",
        ),
        (vec!["--listen", "everywhere"], "is not an address"),
        (vec!["--tile", "0s"], "--tile"),
        (vec!["--tile", "10s"], "at least 1m"),
        // 35 days of minute tiles: 50,400 per device (406 MB for 12 GPUs over a week).
        (vec!["--tile", "1m"], "keeps 50400 tiles per device"),
        (
            vec!["--tile", "1h", "--retain", "90d"],
            "keeps 2160 tiles per device",
        ),
        (vec!["-"], "standard input"),
        (vec!["--since", "2026-01-05"], "per request"),
    ] {
        let mut all = vec!["serve", data.as_str()];
        all.extend(args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{all:?}");
        assert!(o.stderr.contains(says), "{all:?}: {}", o.stderr);
    }
    // With a token, every route but /healthz wants it; nothing answers to another verb.
    let s = Served::start(
        &[&data, "--token-env", "GPUWISE_TEST_TOKEN"],
        &[("GPUWISE_TEST_TOKEN", "s3cret-token")],
    );
    assert_eq!(s.get("/api/report").0, 401);
    assert_eq!(s.get_as("/api/report", Some("s3cret-tokeN")).0, 401);
    assert_eq!(s.get_as("/metrics", Some("nope")).0, 401);
    // Health without the token says it is up, never what it read or what failed (paths).
    let (code, body) = s.get("/healthz");
    assert_eq!(code, 200);
    let h = json(&body);
    assert!(h.get("reads").is_none() && h.get("data").is_none(), "{h}");
    // The scheme's case does not matter (RFC 7235).
    assert_eq!(s.get_as("/api/report", Some("s3cret-token")).0, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let lower = agent
        .get(format!("{}/api/report", s.base))
        .header("Authorization", "bearer s3cret-token")
        .call()
        .expect("answers");
    assert_eq!(lower.status().as_u16(), 200);
    let s = s.with_token("s3cret-token");
    assert!(json(&s.get("/healthz").1).get("reads").is_some());
    // A repeated parameter is a JSON 400 like every bad window.
    let (code, body) = s.get("/api/report?last=1d&last=2d");
    assert_eq!(code, 400, "{body}");
    assert!(json(&body)["error"].is_string(), "{body}");
    let (code, body) = s.get("/api/report");
    assert_eq!(code, 200);
    assert!(
        !body.contains("s3cret"),
        "the token never appears in output"
    );
    let r = agent
        .post(format!("{}/api/report", s.base))
        .header("Authorization", "Bearer s3cret-token")
        .send("")
        .expect("answers");
    assert_eq!(r.status().as_u16(), 405, "nothing changes state");
    assert!(
        r.headers().get("access-control-allow-origin").is_none(),
        "no CORS"
    );
    // A request that takes longer than the limit is answered 408 (the first dashboard of 24
    // GPUs over a week takes about 10 ms to build; the limit here is one).
    let big = fleet(&dir.path().join("big"), "24", "7");
    let quick = Served::start(&[&big, "--request-timeout", "1ms"], &[]);
    assert_eq!(quick.get("/").0, 408);
}

#[test]
fn report_windows_add_up_to_the_whole() {
    // 12 GPUs × 3 days at 5 min from 2026-01-05: each day's window holds its samples; the one
    // interval per device that crosses a cut belongs to neither side (docs/serve.md).
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "12", "3");
    let hours = |extra: &[&str]| {
        let mut args = vec!["report", &data, "--format", "json", "--no-progress"];
        args.extend_from_slice(extra);
        json(&cli(&args))["fleet"]["gpu_hours"]
            .as_f64()
            .expect("gpu_hours")
    };
    let whole = hours(&[]);
    let days: f64 = [["--until", "2026-01-06"], ["--since", "2026-01-06"]]
        .iter()
        .map(|w| hours(w))
        .sum();
    let interval_h = 5.0 / 60.0;
    assert!(
        (whole - days - 12.0 * interval_h).abs() < 1e-9,
        "whole {whole}, halves {days}"
    );
    let middle = hours(&["--since", "2026-01-06", "--until", "2026-01-07"]);
    assert!(
        (middle - 12.0 * (24.0 - interval_h)).abs() < 1e-9,
        "{middle}"
    );
    // Bad windows are errors that say why.
    for (args, says) in [
        (
            vec!["--since", "2026-01-07", "--until", "2026-01-06"],
            "before --until",
        ),
        (vec!["--since", "yesterday"], "--since"),
        (vec!["--since", "2027-01-01"], "no samples"),
    ] {
        let mut all = vec!["report", data.as_str(), "--no-progress"];
        all.extend(args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{all:?}");
        assert!(o.stderr.contains(says), "{all:?}: {}", o.stderr);
    }
}

/// DCGM lines for one GPU, one a minute from `from_ms`, `n` of them.
fn dcgm_minutes(from_ms: i64, n: i64) -> String {
    (0..n)
        .map(|i| {
            format!(
                "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-c10c0000-0000-4000-8000-000000000001\",Hostname=\"clockwork\"}} 40 {}\n",
                from_ms + i * 60_000
            )
        })
        .collect()
}

/// A server that runs for days while its log grows: the latest plausible sample time follows
/// the clock at every refresh. (It was fixed at start, a day ahead of it, so after a day every
/// new sample was skipped as "more than a day in the future" and the dashboard froze.) The
/// clock runs 20,000× fast from 2026-01-10T01:00Z (`GPUWISE_CLOCK_RATE`), so three days pass
/// in 13 s.
#[test]
fn serve_follows_the_clock_across_days() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("clockwork.prom");
    let day0 = 1_768_003_200_000; // 2026-01-10T00:00:00Z
    std::fs::write(&log, dcgm_minutes(day0, 60)).expect("log");
    let s = Served::start(
        &[&log.display().to_string(), "--refresh", "1s"],
        &[
            ("GPUWISE_NOW", "2026-01-10T01:00:00Z"),
            ("GPUWISE_CLOCK_RATE", "20000"),
        ],
    );
    let (code, first) = s.get("/api/report");
    assert_eq!(code, 200, "{first}");
    assert_eq!(json(&first)["devices"][0]["samples"], 60);
    // Three days and a bit later by the server's clock, 30 samples of day 3 arrive; and one
    // dated a month on, which is still a broken clock.
    std::thread::sleep(Duration::from_secs(14));
    let day3 = day0 + 3 * 86_400_000;
    let g = s.generation();
    append(
        &log,
        &[
            dcgm_minutes(day3, 30).trim_end(),
            dcgm_minutes(day3 + 30 * 86_400_000, 1).trim_end(),
        ],
        false,
    );
    s.wait_past(g);
    let start = Instant::now();
    let mut report = json(&s.get("/api/report").1);
    while report["devices"][0]["samples"] != 90 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(300));
        report = json(&s.get("/api/report").1);
    }
    assert_eq!(
        report["devices"][0]["samples"], 90,
        "{}",
        report["warnings"]
    );
    assert!(
        report["devices"][0]["last_seen"]
            .as_str()
            .is_some_and(|t| t.starts_with("2026-01-13")),
        "{}",
        report["devices"][0]["last_seen"]
    );
    // The month-ahead sample is skipped and counted as such.
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("implausible_timestamp"), "{warnings}");
    assert_eq!(report["ingest"]["skipped"], 1, "{}", report["ingest"]);
}

/// `last=N` is the N ending at the newest sample, widened to whole days at its start: the
/// CLI from the day that holds its first moment.
fn last_is_the_n_ending_at_the_newest_sample(s: &Served, data: &str, end: &str) {
    // `last=N` is the N ending at the newest sample, widened to whole days at its start: the
    // CLI from the day that holds its first moment. Generated days end with a sample at
    // midnight, which once opened a day of its own: `last=1d` was that day alone ($0) and
    // `last=7d` six days.
    let newest: jiff::Timestamp = end.parse().expect("end");
    for (q, days) in [
        ("last=1d", 1),
        ("last=24h", 1),
        ("last=2d", 2),
        ("last=3d", 3),
    ] {
        let (code, body) = s.get(&format!("/api/report?{q}"));
        assert_eq!(code, 200, "{q}: {body}");
        let from = newest - jiff::SignedDuration::from_hours(24 * days)
            + jiff::SignedDuration::from_millis(1);
        let since = jiff::tz::TimeZone::UTC.to_datetime(from).date().to_string();
        let want = cli(&[
            "report",
            data,
            "--format",
            "json",
            "--no-progress",
            "--since",
            &since,
        ]);
        assert_eq!(body, want, "?{q}");
        let hours = json(&body)["fleet"]["gpu_hours"].as_f64().expect("hours");
        if end.ends_with("T00:00:00Z") {
            // Whole days: every device's N × 24 hours, no more (10 GPUs, minus what the
            // generated fleet had off).
            assert!(
                hours > 0.0 && hours <= 10.0 * 24.0 * days as f64 + 1e-6,
                "?{q}: {hours}"
            );
        }
    }
}

/// GET `path` with a `Host` header of our choosing (ureq sets its own): the status.
fn status_with_host(base: &str, path: &str, host: &str) -> u16 {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// DNS rebinding: a page whose name was made to resolve to 127.0.0.1 sends its own name in
/// `Host`; the server answers only loopback names, its address and `--allowed-host` names
/// (421 otherwise), on every route, `/healthz` included.
#[test]
fn a_forged_host_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "2", "1");
    let s = Served::start(&[&data, "--allowed-host", "gpu-dash.internal"], &[]);
    let port = s.base.rsplit(':').next().expect("port").to_owned();
    for path in ["/", "/api/report", "/metrics", "/healthz"] {
        assert_eq!(
            status_with_host(&s.base, path, "evil.example"),
            421,
            "{path}"
        );
        assert_eq!(
            status_with_host(&s.base, path, &format!("attacker.example:{port}")),
            421,
            "{path}"
        );
        assert_eq!(
            status_with_host(&s.base, path, &format!("127.0.0.1:{port}")),
            200,
            "{path}"
        );
        assert_eq!(
            status_with_host(&s.base, path, &format!("localhost:{port}")),
            200,
            "{path}"
        );
        assert_eq!(
            status_with_host(&s.base, path, &format!("gpu-dash.internal:{port}")),
            200,
            "{path}"
        );
    }
}

/// Connections that never finish their headers are closed after the header-read timeout
/// (10 s), so 300 of them hold the server for that long at most: a request after it is
/// answered. (They were held forever, and the server was unreachable before any token check.)
#[test]
fn idle_connections_do_not_hold_the_server() {
    use std::io::{Read as _, Write as _};
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "2", "1");
    let s = Served::start(&[&data], &[]);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let idle: Vec<std::net::TcpStream> = (0..300)
        .filter_map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).ok()?;
            c.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").ok()?;
            Some(c)
        })
        .collect();
    assert!(idle.len() > 250, "{} idle connections opened", idle.len());
    std::thread::sleep(Duration::from_secs(12));
    let started = Instant::now();
    let (code, _) = s.get("/healthz");
    assert_eq!(code, 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The server closed the idle ones (it may answer 408 first): a read ends.
    let mut c = idle.into_iter().next().expect("one");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = Vec::new();
    assert!(
        c.read_to_end(&mut buf).is_ok(),
        "the idle connection was closed"
    );
}

/// Load control: sixteen requests at once for one cold window compute it once (the others wait
/// for that answer), and forty distinct windows keep at most 32 answers (the least recently used
/// go first; the cache was cleared whole). `/healthz` counts both.
#[test]
fn one_window_asked_at_once_is_analysed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "8", "3");
    let s = Served::start(&[&data, "--tile", "1h"], &[]);
    let analyses = |s: &Served| json(&s.get("/healthz").1)["analyses"].clone();
    let before = analyses(&s)["computed"].as_u64().expect("computed");
    let base = s.base.clone();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let base = base.clone();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                let mut r = agent
                    .get(format!("{base}/api/report?last=2d"))
                    .call()
                    .expect("answers");
                (
                    r.status().as_u16(),
                    r.body_mut().read_to_string().expect("body"),
                )
            })
        })
        .collect();
    let bodies: Vec<(u16, String)> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    assert!(bodies.iter().all(|(c, b)| *c == 200 && *b == bodies[0].1));
    let after = analyses(&s)["computed"].as_u64().expect("computed");
    assert_eq!(after - before, 1, "one analysis for sixteen requests");
    // Forty distinct windows of whole hours.
    let first = json(&s.get("/api/report").1)["window"]["start"]
        .as_str()
        .expect("start")[..10]
        .to_owned();
    let computed = analyses(&s)["computed"].as_u64().expect("computed");
    for h in 0..40 {
        let (code, body) = s.get(&format!(
            "/api/report?start={first}T{:02}:00:00Z&end={first}T{:02}:30:00Z",
            h / 2,
            h / 2 + 1 + h % 2
        ));
        assert_eq!(code, 200, "{body}");
    }
    let a = analyses(&s);
    assert_eq!(
        a["computed"].as_u64().expect("computed") - computed,
        40,
        "{a}"
    );
    assert_eq!(a["kept"], 32, "{a}");
}

/// `/metrics` computes only what it exposes: a cold window asked by `/metrics` is analysed to
/// the report alone (no advice, allocation or budgets); the API's full analysis of a window
/// serves `/metrics` after it without another.
#[test]
fn metrics_compute_only_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "4", "2");
    let s = Served::start(&[&data], &[]);
    let analyses = |s: &Served| json(&s.get("/healthz").1)["analyses"].clone();
    let count = |a: &serde_json::Value, k: &str| a[k].as_u64().expect(k);
    let a0 = analyses(&s);
    let (code, metrics) = s.get("/metrics?last=1d");
    assert_eq!(code, 200, "{metrics}");
    let a1 = analyses(&s);
    assert_eq!(count(&a1, "computed") - count(&a0, "computed"), 1, "{a1}");
    assert_eq!(
        count(&a1, "report_only") - count(&a0, "report_only"),
        1,
        "{a1}"
    );
    // The advice needs the full analysis: computed once more, and not to the report alone.
    let (code, _) = s.get("/api/advice?last=1d");
    assert_eq!(code, 200);
    let a2 = analyses(&s);
    assert_eq!(count(&a2, "computed") - count(&a1, "computed"), 1, "{a2}");
    assert_eq!(count(&a2, "report_only"), count(&a1, "report_only"), "{a2}");
    // Now /metrics is answered from the full analysis, with the same figures.
    let (code, again) = s.get("/metrics?last=1d");
    assert_eq!(code, 200);
    assert_eq!(count(&analyses(&s), "computed"), count(&a2, "computed"));
    let figures = |m: &str| {
        m.lines()
            .filter(|l| !l.starts_with('#') && !l.contains("generation"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // The same figures in the same order (series sorted within each family).
    assert_eq!(figures(&again), figures(&metrics));
}

/// Against a store, one client may start N distinct windows a minute
/// (`--store-windows-per-minute`): the next is a 429 that says when to ask again, without a
/// query; a window it already asked is not counted. (The store here is a closed port: each
/// query fails as a 502.)
#[test]
fn a_client_asks_a_store_for_few_windows_a_minute() {
    let s = Served::start(
        &[
            "--prometheus",
            "http://127.0.0.1:9",
            "--store-windows-per-minute",
            "3",
        ],
        &[],
    );
    for h in 1..=3 {
        let (code, body) = s.get(&format!("/api/report?last={h}h"));
        assert_eq!(code, 502, "{h}: {body}");
    }
    let (code, body) = s.get("/api/report?last=4h");
    assert_eq!(code, 429, "{body}");
    assert!(
        body.contains("more than 3 distinct windows") && body.contains("ask again in"),
        "{body}"
    );
    assert!(json(&body)["error"].is_string(), "{body}");
    let (code, body) = s.get("/api/report?last=3h");
    assert_eq!(code, 502, "an asked window is not counted again: {body}");
}

/// With `--tls-cert/--tls-key` the server speaks HTTPS (a client trusting the certificate
/// reads the API; plain HTTP to that port gets no answer) and signs browsers in with a
/// `Secure` cookie; bad files are errors naming the flag and the file, before anything is read.
#[test]
fn tls_serves_https_and_secure_cookies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "2", "1");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("a certificate");
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.key_pair.serialize_pem());
    let cert_file = dir.path().join("cert.pem");
    let key_file = dir.path().join("key.pem");
    std::fs::write(&cert_file, &cert_pem).expect("cert");
    std::fs::write(&key_file, &key_pem).expect("key");
    let (c, k) = (
        cert_file.display().to_string(),
        key_file.display().to_string(),
    );
    let s = Served::start(
        &[&data, "--tls-cert", &c, "--tls-key", &k, "--token-env", "T"],
        &[("T", "s3cret")],
    )
    .with_token("s3cret");
    assert!(s.base.starts_with("https://127.0.0.1:"), "{}", s.base);
    let root = ureq::tls::Certificate::from_pem(cert_pem.as_bytes()).expect("pem");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&[root]))
                .build(),
        )
        .build()
        .into();
    let mut r = agent
        .get(format!("{}/api/report", s.base))
        .header("Authorization", "Bearer s3cret")
        .call()
        .expect("https answers");
    assert_eq!(r.status().as_u16(), 200);
    let body = r.body_mut().read_to_string().expect("body");
    assert_eq!(json(&body)["fleet"]["devices"], 2);
    let r = agent
        .post(format!("{}/login", s.base))
        .content_type("application/x-www-form-urlencoded")
        .send("token=s3cret")
        .expect("login answers");
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Secure"),
        "{cookie}"
    );
    // Plain HTTP to the HTTPS port: no HTTP answer.
    let plain = s.base.replace("https://", "http://");
    let plain_agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into();
    assert!(plain_agent.get(format!("{plain}/healthz")).call().is_err());
    // A key that is not a key: said at start, naming the flag and the file.
    let o = cmd()
        .args(["serve", &data, "--tls-cert", &c, "--tls-key", &c])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--tls-key") && err.contains("cert.pem"),
        "{err}"
    );
    let o = cmd()
        .args(["serve", &data, "--tls-cert", &c])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "--tls-cert needs --tls-key");
}

/// Bounded concurrent load: sixteen clients ask for 1,000 distinct windows (hour tiles of three
/// days) and the cached dashboard between them. Every answer is a 200, the p99 latency stays
/// under 5 s on a 2-core machine, and memory stays flat: the answers kept are bounded (32), so
/// the server holds no more after the last 900 windows than after the first 100 (within 32 MiB
/// of allocator slack).
#[test]
fn a_thousand_windows_under_load_keep_memory_flat() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "8", "3");
    let s = Served::start(&[&data, "--tile", "1h"], &[]);
    let at = |h: usize| format!("2026-01-{:02}T{:02}:00:00Z", 5 + h / 24, h % 24);
    let windows: Vec<String> = (1..72)
        .flat_map(|len| (0..72 - len).map(move |a| (a, a + len)))
        .take(1000)
        .map(|(a, b)| format!("/api/report?start={}&end={}", at(a), at(b)))
        .collect();
    assert_eq!(windows.len(), 1000);
    let load = |batch: &[String]| -> Vec<f64> {
        let chunks: Vec<Vec<String>> = batch
            .chunks(batch.len().div_ceil(16))
            .map(<[String]>::to_vec)
            .collect();
        let threads: Vec<_> = chunks
            .into_iter()
            .map(|paths| {
                let base = s.base.clone();
                std::thread::spawn(move || {
                    let agent: ureq::Agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .build()
                        .into();
                    let mut ms = Vec::new();
                    for (i, p) in paths.iter().enumerate() {
                        // After every third window, the (cached) dashboard.
                        let dashboard = (i % 3 == 2).then_some("/");
                        for path in std::iter::once(p.as_str()).chain(dashboard) {
                            let t = Instant::now();
                            let r = agent.get(format!("{base}{path}")).call().expect("answers");
                            assert_eq!(r.status().as_u16(), 200, "{path}");
                            ms.push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    ms
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("client"))
            .collect()
    };
    let mut ms = load(&windows[..100]);
    let Some(after_100) = s.rss_kib() else {
        eprintln!("skipping the memory half: no /proc");
        return;
    };
    ms.extend(load(&windows[100..]));
    let after_1000 = s.rss_kib().expect("rss");
    ms.sort_by(f64::total_cmp);
    let p99 = ms[ms.len() * 99 / 100];
    assert!(p99 < 5000.0, "p99 {p99:.0} ms");
    assert!(
        after_1000 <= after_100 + 32 * 1024,
        "memory grew from {after_100} KiB to {after_1000} KiB"
    );
    eprintln!("p99 {p99:.1} ms, rss {after_100} -> {after_1000} KiB");
    let a = json(&s.get("/healthz").1)["analyses"].clone();
    assert_eq!(a["kept"], 32, "{a}");
    // Each distinct window was analysed (once): the load was of cold windows.
    assert!(a["computed"].as_u64().expect("computed") >= 1000, "{a}");
}

/// A log grown by lines repeating its last timestamp: the server says what `report` says of
/// the file (repeated samples dropped and counted), not an overlap between inputs (it did).
#[test]
fn a_grown_log_repeating_its_last_timestamp_is_no_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "2", "1");
    let file = std::fs::read_dir(&data)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "csv"))
        .expect("a log");
    let s = Served::start(&[&data, "--refresh", "1s"], &[]);
    let g = s.generation();
    let text = std::fs::read_to_string(&file).expect("log");
    let last: Vec<&str> = text.lines().rev().take(2).collect();
    append(&file, &last, false);
    s.wait_past(g);
    let kinds = |v: &serde_json::Value| {
        v["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .map(|w| {
                (
                    w["kind"].as_str().unwrap_or("").to_owned(),
                    w["count"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let served = json(&s.get("/api/report").1);
    let cli = json(&cli(&[
        "report",
        &data,
        "--format",
        "json",
        "--no-progress",
    ]));
    assert_eq!(kinds(&served), kinds(&cli));
    assert!(
        kinds(&served)
            .iter()
            .any(|(k, n)| k == "duplicate_timestamp" && n == 2),
        "{:?}",
        kinds(&served)
    );
    assert!(!kinds(&served).iter().any(|(k, _)| k == "overlap"));
    assert_eq!(served["fleet"], cli["fleet"]);
}

/// The server survives its inputs changing under it, and after each change answers what
/// `report` says of the files as they now are: a log truncated in place, a log replaced by
/// another, a log deleted, and a log grown by one 100 MB line (past the 1 MiB line bound:
/// skipped and counted, the lines after it read).
#[test]
fn inputs_that_change_under_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "12", "2");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&data)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    let s = Served::start(&[&data, "--refresh", "1s"], &[]);
    let settle = |s: &Served, what: &str| {
        let expected = || cli(&["report", &data, "--format", "json", "--no-progress"]);
        let start = Instant::now();
        let mut got = s.get("/api/report").1;
        while got != expected() && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(300));
            got = s.get("/api/report").1;
        }
        assert_eq!(got, expected(), "after {what}");
    };
    settle(&s, "the start");
    // Truncated in place (copytruncate) to its header and first hour.
    let text = std::fs::read_to_string(&files[0]).expect("read");
    let keep: Vec<&str> = text.lines().take(1 + 8 * 12).collect(); // the header, an hour
    std::fs::write(&files[0], keep.join("\n") + "\n").expect("truncate");
    settle(&s, "a truncation");
    // Replaced by another file at the same path (a new inode).
    let tmp = files[0].with_extension("new");
    std::fs::write(&tmp, &text).expect("new");
    std::fs::rename(&tmp, &files[0]).expect("replace");
    settle(&s, "a replacement");
    // Deleted.
    std::fs::remove_file(&files[1]).expect("delete");
    settle(&s, "a deletion");
    // Grown by a 100 MB line, then by good lines.
    let last = text.lines().last().expect("a line").to_owned();
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&files[0])
            .expect("open");
        let junk = "x".repeat(1 << 20);
        for _ in 0..100 {
            f.write_all(junk.as_bytes()).expect("junk");
        }
        writeln!(f).expect("end of the long line");
        writeln!(f, "{}", shift_hour(&last)).expect("a good line");
    }
    settle(&s, "a 100 MB line");
    let r = json(&s.get("/api/report").1);
    assert!(
        r["ingest"]["skipped"].as_u64().expect("skipped") >= 1,
        "{}",
        r["ingest"]
    );
}

/// A raw HTTP/1.1 request to `base`: the status, the headers (lower-case names) and the body.
fn raw_request(base: &str, head: &str, body: &str) -> (u16, String, String) {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "{head}\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (headers, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let code = headers
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, headers.to_ascii_lowercase(), body.to_owned())
}

/// With a token, a browser signs in through a form: the dashboard redirects to it, a wrong token
/// gets it again (401), the right one sets an HttpOnly, SameSite=Strict session cookie that
/// opens the dashboard and the API, logging out clears it, and a restart signs everyone out.
#[test]
fn a_browser_signs_in_with_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = fleet(dir.path(), "2", "1");
    let env = [("GPUWISE_TEST_TOKEN", "s3cret-token")];
    let s = Served::start(&[&data, "--token-env", "GPUWISE_TEST_TOKEN"], &env);
    let (code, headers, _) = raw_request(&s.base, "GET / HTTP/1.1", "");
    assert_eq!(code, 303, "{headers}");
    assert!(headers.contains("location: login"), "{headers}");
    let (code, _, form) = raw_request(&s.base, "GET /login HTTP/1.1", "");
    assert_eq!(code, 200);
    assert!(
        form.contains("type=\"password\"") && !form.contains("<script"),
        "{form}"
    );
    let post = |token: &str| {
        raw_request(
            &s.base,
            "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded",
            &format!("token={token}"),
        )
    };
    let (code, headers, body) = post("wrong");
    assert_eq!(code, 401);
    assert!(
        !headers.contains("set-cookie") && body.contains("not the token"),
        "{headers}"
    );
    let (code, headers, _) = post("s3cret-token");
    assert_eq!(code, 303, "{headers}");
    let cookie_line = headers
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie_line.contains("httponly") && cookie_line.contains("samesite=strict"),
        "{cookie_line}"
    );
    // The header's own case, for sending it back.
    let value = cookie_line
        .trim_start_matches("set-cookie:")
        .trim()
        .split(';')
        .next()
        .expect("name=value")
        .to_owned();
    let with_cookie = |path: &str| {
        raw_request(
            &s.base,
            &format!("GET {path} HTTP/1.1\r\nCookie: {value}"),
            "",
        )
    };
    let (code, _, page) = with_cookie("/");
    assert_eq!(code, 200);
    assert!(
        page.contains("Log out"),
        "signed in, the page offers to log out"
    );
    assert_eq!(with_cookie("/api/report").0, 200);
    assert!(with_cookie("/healthz").2.contains("\"reads\""));
    let (code, headers, _) = raw_request(&s.base, "POST /logout HTTP/1.1", "");
    assert_eq!(code, 303);
    assert!(headers.contains("max-age=0"), "{headers}");
    // A restart draws a new session value: the old cookie opens nothing.
    drop(s);
    let s = Served::start(&[&data, "--token-env", "GPUWISE_TEST_TOKEN"], &env);
    let (code, _, _) = raw_request(
        &s.base,
        &format!("GET /api/report HTTP/1.1\r\nCookie: {value}"),
        "",
    );
    assert_eq!(code, 401);
}
