//! The Grafana dashboard (`deploy/grafana/gpuwise-dashboard.json`): a well-formed dashboard
//! model, and every panel's query answered with data by a real Prometheus (Debian's, as in
//! `prometheus.rs`) scraping a real `gpuwise serve` — no panel is empty, no query is invalid.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::repo;
use crate::prometheus::{query, scraping, tools};
use crate::serve::Served;

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("deploy/grafana/gpuwise-dashboard.json"))
        .expect("the dashboard");
    serde_json::from_str(&text).expect("JSON")
}

/// Each panel's queries: (panel title, PromQL).
fn queries(d: &serde_json::Value) -> Vec<(String, String)> {
    d["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().expect("title").to_owned();
            p["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .map(move |t| (title.clone(), t["expr"].as_str().expect("expr").to_owned()))
        })
        .collect()
}

#[test]
fn the_dashboard_is_a_well_formed_grafana_model() {
    let d = dashboard();
    assert_eq!(
        d["schemaVersion"], 39,
        "the schema version docs/deploy.md states"
    );
    assert_eq!(d["uid"], "gpuwise-fleet");
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    // The data source is a variable, so the dashboard imports into any Grafana.
    assert_eq!(d["templating"]["list"][0]["type"], "datasource");
    assert_eq!(d["templating"]["list"][0]["query"], "prometheus");
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().expect("id")), "ids are unique");
        assert_eq!(p["datasource"]["uid"], "${datasource}");
        let g = &p["gridPos"];
        let (x, y, w, h) = ["x", "y", "w", "h"]
            .map(|k| g[k].as_u64().expect("gridPos"))
            .into();
        assert!(
            w >= 1 && h >= 1 && x + w <= 24,
            "{}: inside the 24 columns",
            p["title"]
        );
        // No two panels overlap.
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(
                    cells.insert((cx, cy)),
                    "{} overlaps another panel",
                    p["title"]
                );
            }
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty());
        for t in targets {
            assert!(t["refId"].is_string() && t["expr"].is_string());
        }
    }
}

/// `gpuwise serve` over 8 generated GPUs of one team with a budget, at a mid-month clock (the
/// budget panels need a month to date).
fn budgeted_fleet(dir: &std::path::Path) -> Served {
    const NOW: &str = "2026-11-20T00:00:00Z";
    let logs = crate::rules::fleet_at(dir, NOW, "8", "2", "11", &[]);
    let teams = dir.join("teams.toml");
    std::fs::write(&teams, "[hosts]\n\"train-*\" = \"research\"\n").expect("teams");
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "[budget]\nmonthly_usd = { research = 5000 }\n").expect("policy");
    Served::start(
        &[
            &logs,
            "--teams",
            &teams.display().to_string(),
            "--policy",
            &policy.display().to_string(),
        ],
        &[("GPUWISE_NOW", NOW)],
    )
}

#[test]
fn every_panel_has_data_from_a_prometheus_scraping_serve() {
    if !tools() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let served = budgeted_fleet(tmp.path());
    let target = served.base.trim_start_matches("http://").to_owned();
    let prom = scraping(tmp.path(), &target);
    let d = dashboard();
    let all = queries(&d);
    assert!(all.len() >= 10);
    // Scrapes every second: wait until every panel's query has data (or a minute passed).
    let t0 = Instant::now();
    let mut empty: Vec<(String, String)> = all.clone();
    while !empty.is_empty() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        empty.retain(|(_, expr)| {
            query(prom.port, expr).is_none_or(|v| {
                assert_ne!(v["status"], "error", "{expr}: {v}");
                v["data"]["result"].as_array().is_none_or(Vec::is_empty)
            })
        });
    }
    assert!(empty.is_empty(), "panels without data: {empty:?}");
    // The figures are serve's own: the spend panel reads what /metrics says.
    let spend = query(prom.port, "gpuwise_fleet_cost_usd").expect("answer");
    let v: f64 = spend["data"]["result"][0]["value"][1]
        .as_str()
        .expect("a value")
        .parse()
        .expect("a number");
    let (_, metrics) = served.get("/metrics");
    let line = metrics
        .lines()
        .find(|l| l.starts_with("gpuwise_fleet_cost_usd "))
        .expect("the fleet's cost");
    let want: f64 = line
        .split_whitespace()
        .nth(1)
        .expect("value")
        .parse()
        .expect("number");
    assert!((v - want).abs() < 1e-6 * want.max(1.0), "{v} vs {want}");
    // Utilization by team is the GPU-time-weighted mean of the devices' own figures.
    let series = |name: &str| -> std::collections::BTreeMap<String, f64> {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .map(|l| {
                let device = l
                    .split("device=\"")
                    .nth(1)
                    .expect("device")
                    .split('"')
                    .next()
                    .expect("id");
                let v = l
                    .rsplit(' ')
                    .next()
                    .expect("value")
                    .parse()
                    .expect("number");
                (device.to_owned(), v)
            })
            .collect()
    };
    let (util, secs) = (
        series("gpuwise_device_utilization_percent"),
        series("gpuwise_device_gpu_seconds"),
    );
    let weighted: f64 = util.iter().map(|(d, u)| u * secs[d]).sum::<f64>()
        / util.keys().map(|d| secs[d]).sum::<f64>();
    let panel = &queries(&d)
        .into_iter()
        .find(|(t, _)| t.starts_with("Utilization by team"))
        .expect("the panel")
        .1;
    let got: f64 = query(prom.port, panel).expect("answer")["data"]["result"][0]["value"][1]
        .as_str()
        .expect("a value")
        .parse()
        .expect("a number");
    assert!((got - weighted).abs() < 1e-6, "{got} vs {weighted}");
    // The team panel groups by the teams file.
    let by_team = query(prom.port, "sum by (team) (gpuwise_device_cost_usd)").expect("answer");
    assert_eq!(by_team["data"]["result"][0]["metric"]["team"], "research");
}
