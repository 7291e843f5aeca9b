//! `gpuwise advise`: planted best answers on generated fleets (through the real binary), the
//! plan's invariants as properties (in process, on random fleets and price contexts), and bad
//! workload files.

use std::collections::BTreeMap;

use gpuwise_advise::{self as advise, Advice, AdviseSettings, Hints, Kind};
use gpuwise_catalog::{Catalog, Pricing};
use gpuwise_core::DeviceKey;
use gpuwise_core::diagnose::Class;
use gpuwise_core::price::{PriceBook, PriceContext};
use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::report::{self, GroupBy, IngestSummary, ReportOptions, TeamMap};
use gpuwise_core::settings::{DiagnoseSettings, ProfileSettings};
use gpuwise_synth::{Fleet, FleetOptions};
use proptest::prelude::*;

use crate::common::{close, data, f, run};

/// A generated fleet on disk: (advice JSON, truth JSON, report JSON).
fn generated(
    days: &str,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("fleet");
    let out_s = out.display().to_string();
    let g = run(&[
        "generate",
        "--out",
        &out_s,
        "--gpus",
        "52",
        "--days",
        days,
        "--interval",
        "2m",
        "--seed",
        "11",
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("truth.json")).expect("truth"))
            .expect("json");
    let files: Vec<String> = std::fs::read_dir(&out)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| !p.ends_with("truth.json"))
        .map(|p| p.display().to_string())
        .collect();
    let mut args: Vec<&str> = vec!["advise"];
    args.extend(files.iter().map(String::as_str));
    args.extend_from_slice(&["--format", "json", "--no-progress"]);
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let advice: serde_json::Value = serde_json::from_str(&o.stdout).expect("advice JSON");
    let mut rargs: Vec<&str> = vec!["report"];
    rargs.extend(files.iter().map(String::as_str));
    rargs.extend_from_slice(&["--format", "json", "--no-progress", "--advise"]);
    rargs.extend_from_slice(extra);
    let o = run(&rargs);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rep: serde_json::Value = serde_json::from_str(&o.stdout).expect("report JSON");
    // The HTML report's headline counts the actions it lists ("47 actions below" stood over
    // 48), and says how many of them the plan takes when that is fewer.
    let html_args: Vec<&str> = rargs
        .iter()
        .map(|a| if *a == "json" { "html" } else { a })
        .collect();
    let html = run(&html_args).stdout;
    let listed = advice["actions"].as_array().map_or(0, Vec::len);
    let in_plan = advice["actions"]
        .as_array()
        .map_or(0, |v| v.iter().filter(|x| x["in_plan"] == true).count());
    if listed > 1 {
        assert!(
            html.contains(&format!("— {listed} actions below")),
            "{listed}"
        );
    }
    if in_plan < listed {
        assert!(html.contains(&format!(", {in_plan} of them in the plan")));
    }
    (advice, truth, rep)
}

fn actions_on<'a>(a: &'a serde_json::Value, id: &str) -> Vec<&'a serde_json::Value> {
    a["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter(|x| {
            x["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .any(|t| t == id)
        })
        .collect()
}

/// The action a planted scenario must get, with its dollars checked independently.
fn planted_answer(
    scenario: &str,
    id: &str,
    dev: &serde_json::Value,
    on: &[&serde_json::Value],
    scale: f64,
    catalog: &Catalog,
) {
    let kinds: Vec<&str> = on
        .iter()
        .map(|x| x["kind"].as_str().expect("kind"))
        .collect();
    match scenario {
        "idle_nights_weekends" => {
            let s = on
                .iter()
                .find(|x| x["kind"] == "schedule_off_hours")
                .unwrap_or_else(|| panic!("{id}: a schedule ({kinds:?})"));
            assert_eq!(
                s["schedule"],
                serde_json::json!([
                    {"days": "weekdays", "start_hour": 19, "end_hour": 8},
                    {"days": "weekend", "start_hour": 0, "end_hour": 0}
                ]),
                "{id}"
            );
            // 113 of 168 hours a week off, and nothing else counted.
            let monthly = f(&dev["cost_usd"]) * scale;
            assert!(
                close(f(&s["monthly_savings_usd"]), monthly * 113.0 / 168.0, 1e-6),
                "{id}"
            );
        }
        "idle" => {
            let s = on
                .iter()
                .find(|x| x["kind"] == "shutdown_idle")
                .unwrap_or_else(|| panic!("{id}: shutdown ({kinds:?})"));
            let monthly = f(&dev["cost_usd"]) * scale;
            let idle = f(&dev["idle_hours"]) / (f(&dev["gpu_hours"]) / f(&dev["gpu_share"]));
            assert!(
                close(f(&s["monthly_savings_usd"]), monthly * idle, 1e-6),
                "{id}"
            );
        }
        "small_model_serving" => {
            let r = on
                .iter()
                .find(|x| x["kind"] == "rightsize")
                .unwrap_or_else(|| panic!("{id}: rightsize ({kinds:?})"));
            let target = catalog
                .resolve(r["target"].as_str().expect("target"))
                .expect("target in catalog");
            let peak = f(&dev["peak_memory_used_mib"]);
            assert!(
                target.memory_gb * 1e9 / 1_048_576.0 >= peak * 1.2,
                "{id} fits"
            );
            assert_ne!(target.name, "A100-SXM4-80GB");
            assert!(f(&r["projected_monthly_usd"]) < f(&r["current_monthly_usd"]));
        }
        "healthy_training" => {
            // Steady training-like load goes to spot with a Young/Daly interval:
            // τ = √(2 × 5 min × 12 h) = 85 min, overhead C/τ + τ/2M = 11.8 %.
            let x = on
                .iter()
                .find(|x| x["kind"] == "use_spot")
                .unwrap_or_else(|| panic!("{id}: spot ({kinds:?})"));
            let how = x["how"][0].as_str().expect("how");
            assert!(how.contains("checkpoint every 85 minutes"), "{how}");
            let spot = catalog
                .gpu_hour_price(&gpuwise_catalog::PriceQuery {
                    gpu: dev["model"].as_str().expect("model"),
                    cloud: None,
                    region: None,
                    pricing: Pricing::Spot,
                })
                .expect("a spot price")
                .usd_per_gpu_hour;
            let want = spot * 1.117_851_13 / f(&dev["usd_per_gpu_hour"]);
            let ratio = f(&x["projected_monthly_usd"]) / f(&x["current_monthly_usd"]);
            assert!(close(ratio, want, 1e-6), "{ratio} vs {want}");
        }
        "saturated" => assert!(on.is_empty(), "{id}: saturated gets nothing, got {kinds:?}"),
        "notebook_held" => assert!(
            kinds.contains(&"schedule_off_hours") || kinds.contains(&"release_held_idle"),
            "{id}: {kinds:?}"
        ),
        _ => {}
    }
}

#[test]
fn planted_best_answers() {
    let (a, truth, rep) = generated("14", &[]);
    assert_eq!(a["schema"], "gpuwise.advice/v1");
    // The report carries the same advice.
    assert_eq!(
        rep["advice"]["total_monthly_savings_usd"],
        a["total_monthly_savings_usd"]
    );
    assert!(
        rep["fleet"]["kpis"]["rightsized_share_pct"]
            .as_f64()
            .is_some()
    );
    // A notebook whose held-idle hours also lie in an off-hours schedule: culling alone saves
    // (nearly) all of them; in the combined plan it adds only the hours the schedule misses.
    let actions = a["actions"].as_array().expect("actions");
    let scheduled: Vec<&serde_json::Value> = actions
        .iter()
        .filter(|x| x["kind"] == "schedule_off_hours")
        .flat_map(|x| x["targets"].as_array().expect("targets"))
        .collect();
    let culled: Vec<&serde_json::Value> = actions
        .iter()
        .filter(|x| x["kind"] == "release_held_idle" && scheduled.contains(&&x["targets"][0]))
        .collect();
    assert!(!culled.is_empty(), "the fleet has scheduled notebooks");
    for x in culled {
        assert!(
            f(&x["monthly_savings_usd"]) > 10.0 * f(&x["plan_savings_usd"]),
            "alone means alone: {x}"
        );
    }
    let catalog = Catalog::builtin();
    let scale = 730.0 / f(&a["window_hours"]);
    let mut seen = BTreeMap::new();
    for t in truth["devices"].as_array().expect("devices") {
        let id = t["id"].as_str().expect("id");
        let scenario = t["scenario"].as_str().expect("scenario");
        let dev = crate::common::device(&rep, id);
        let on = actions_on(&a, id);
        if dev["usd_per_gpu_hour"].is_null() {
            assert!(on.is_empty(), "{id}: unpriced devices get no action");
            continue;
        }
        *seen.entry(scenario.to_owned()).or_insert(0) += 1;
        planted_answer(scenario, id, dev, &on, scale, &catalog);
    }
    for s in [
        "idle_nights_weekends",
        "idle",
        "small_model_serving",
        "saturated",
    ] {
        assert!(
            seen.get(s).copied().unwrap_or(0) > 0,
            "the fleet has priced {s} devices"
        );
    }
    invariants_json(&a, &rep);
}

/// The plan's invariants on the JSON form.
fn invariants_json(a: &serde_json::Value, rep: &serde_json::Value) {
    let catalog = Catalog::builtin();
    // One name per device: the advice names its targets as the report does (the ids stay too).
    let names: std::collections::BTreeMap<&str, &str> = rep["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| {
            (
                d["id"].as_str().expect("id"),
                d["name"].as_str().expect("name"),
            )
        })
        .collect();
    for x in a["actions"].as_array().expect("actions") {
        // "Alone" means alone: an action saves at least as much by itself as it adds to the
        // combined plan (where other actions may already cover some of its hours).
        assert!(
            f(&x["monthly_savings_usd"]) + 1e-6 >= f(&x["plan_savings_usd"]),
            "{x}"
        );
        let ids = x["targets"].as_array().expect("targets");
        let shown = x["target_names"].as_array().expect("target_names");
        assert_eq!(ids.len(), shown.len());
        for (id, name) in ids.iter().zip(shown) {
            assert_eq!(
                Some(&name.as_str().expect("name")),
                names.get(id.as_str().expect("id"))
            );
        }
    }
    let mut projected = 0.0;
    for d in a["devices"].as_array().expect("devices") {
        assert!(f(&d["projected_monthly_usd"]) <= f(&d["current_monthly_usd"]) + 1e-6);
        assert!(f(&d["projected_monthly_usd"]) >= -1e-6);
        projected += f(&d["projected_monthly_usd"]);
    }
    assert!(close(projected, f(&a["projected_monthly_usd"]), 1e-9));
    assert!(f(&a["total_monthly_savings_usd"]) <= f(&a["current_monthly_usd"]) + 1e-6);
    assert!(f(&a["total_monthly_savings_usd"]) >= -1e-6);
    let mut plan = 0.0;
    let mut last = f64::INFINITY;
    for x in a["actions"].as_array().expect("actions") {
        let s = f(&x["monthly_savings_usd"]);
        assert!(s >= 0.0, "{x}");
        assert!(s <= last + 1e-9, "ranked by savings");
        last = s;
        assert!(close(
            s,
            f(&x["current_monthly_usd"]) - f(&x["projected_monthly_usd"]),
            1e-9
        ));
        plan += f(&x["plan_savings_usd"]);
        for k in ["evidence", "assumptions", "how"] {
            assert!(!x[k].as_array().expect(k).is_empty(), "{k} of {x}");
        }
        if x["kind"] == "rightsize" {
            let g = catalog
                .resolve(x["target"].as_str().expect("target"))
                .expect("gpu");
            let id = x["targets"][0].as_str().expect("id");
            let peak = f(&crate::common::device(rep, id)["peak_memory_used_mib"]);
            assert!(
                g.memory_gb * 1e9 / 1_048_576.0 >= peak,
                "{id}: never less memory than the peak"
            );
        }
    }
    assert!(
        close(plan, f(&a["total_monthly_savings_usd"]), 1e-6),
        "plan savings add up"
    );
}

#[test]
fn hints_drive_spot_and_the_planner() {
    let (a, truth, _) = generated(
        "7",
        &[
            "--workloads",
            &data("advise/workloads.toml"),
            "--cloud",
            "aws",
        ],
    );
    // The DataStarved A100s are marked interruptible: spot is proposed with a Young/Daly
    // checkpoint interval, if AWS publishes a spot price; AWS in this catalog has none, so
    // none is proposed and nothing is invented.
    let mut planned = 0;
    for t in truth["devices"].as_array().expect("devices") {
        let id = t["id"].as_str().expect("id");
        for x in actions_on(&a, id) {
            assert_ne!(
                x["kind"], "use_spot",
                "no AWS spot prices in the catalog: {x}"
            );
            if x["kind"] == "rightsize" && t["scenario"] == "small_model_serving" {
                planned += 1;
                assert!(
                    x["evidence"].as_array().expect("evidence").iter().any(|e| e
                        .as_str()
                        .is_some_and(|s| s.starts_with("planner (llama-3-8b)"))),
                    "{x}"
                );
                assert_eq!(x["confidence"]["level"], "high");
                assert_eq!(x["target"], "L40S", "{x}");
            }
        }
    }
    assert!(
        planned > 0,
        "the hinted small-model servers are resized by the planner"
    );
}

#[test]
fn bad_workload_files_give_clear_errors() {
    let o = run(&[
        "advise",
        &data("smi/two-gpus.csv"),
        "--workloads",
        &data("advise/bad-kind.toml"),
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("bad-kind.toml: workload #2: kind `gaming` is not one of training, inference, notebook, batch"),
        "{}",
        o.stderr
    );
    let o = run(&[
        "advise",
        &data("smi/two-gpus.csv"),
        "--allow-clouds",
        "moon",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--allow-clouds: `moon`"), "{}", o.stderr);
    let o = run(&["advise", &data("smi/two-gpus.csv"), "--format", "html"]);
    assert_eq!(o.code, 2);
}

fn in_process(
    seed: u64,
    gpus: usize,
    days: u32,
    cloud: Option<&str>,
    pricing: Pricing,
) -> (Advice, gpuwise_core::report::Report) {
    let fleet = Fleet::new(FleetOptions {
        gpus,
        days,
        interval_ms: 300_000,
        seed,
        // Monday 2026-01-05 00:00 UTC, the generator's default.
        start_ms: 1_767_571_200_000,
        format: None,
    });
    let st = ProfileSettings::default();
    let mut b = ProfileBuilder::new(st.clone());
    for (d, spec) in fleet.devices.iter().enumerate() {
        let id = b.device(DeviceKey {
            host: spec.host.clone(),
            gpu: fleet.device_gpu_id(spec),
            mig: None,
        });
        b.info_mut(id).model_name = Some(spec.model_name.to_owned());
        for s in fleet.samples(d) {
            b.push(id, &s).expect("in order");
        }
    }
    let tz = jiff::tz::TimeZone::UTC;
    let profiles = b.build().finish(&st, &tz);
    let prices = PriceBook::new(
        Catalog::builtin(),
        PriceContext {
            cloud: cloud.map(str::to_owned),
            region: None,
            pricing: Some(pricing),
        },
    );
    let rep = report::build(
        &profiles,
        &prices,
        &TeamMap::default(),
        &ReportOptions {
            profile: st,
            diagnose: DiagnoseSettings::default(),
            group_by: GroupBy::Host,
            tz_name: "UTC".into(),
            now_ms: None,
            stale_price_days: 100_000,
        },
        IngestSummary::default(),
    );
    let settings = AdviseSettings {
        cloud: cloud.map(str::to_owned),
        pricing,
        allow_clouds: vec!["gcp".into(), "azure".into()],
        ..AdviseSettings::default()
    };
    let a = advise::advise(
        &rep,
        &profiles,
        prices.catalog(),
        &Hints::default(),
        &settings,
        &tz,
    );
    (a, rep)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]

    #[test]
    fn plan_invariants_hold_on_random_fleets(
        seed in 0u64..1000,
        gpus in 8usize..40,
        days in 1u32..4,
        cloud in prop_oneof![Just(None), Just(Some("aws")), Just(Some("gcp")), Just(Some("azure"))],
        pricing in prop_oneof![Just(Pricing::OnDemand), Just(Pricing::Spot)],
    ) {
        let (a, rep) = in_process(seed, gpus, days, cloud, pricing);
        let classes: BTreeMap<&str, Class> =
            rep.devices.iter().map(|d| (d.id.as_str(), d.class)).collect();
        let peaks: BTreeMap<&str, Option<f64>> =
            rep.devices.iter().map(|d| (d.id.as_str(), d.peak_memory_used_mib)).collect();
        let catalog = Catalog::builtin();
        prop_assert!(a.total_monthly_savings_usd <= a.current_monthly_usd + 1e-6);
        prop_assert!(a.total_monthly_savings_usd >= -1e-6);
        for x in &a.actions {
            prop_assert!(x.monthly_savings_usd >= 0.0);
            prop_assert!(x.plan_savings_usd >= -1e-9);
            for t in &x.targets {
                prop_assert!(classes[t.as_str()] != Class::Saturated, "saturated {} got {:?}", t, x.kind);
            }
            if x.kind == Kind::Rightsize {
                let g = catalog.resolve(x.target.as_deref().unwrap_or("")).expect("gpu");
                let peak = peaks[x.targets[0].as_str()].expect("peak");
                prop_assert!(g.memory_gb * 1e9 / 1_048_576.0 >= peak);
            }
        }
        for d in &a.devices {
            prop_assert!(d.projected_monthly_usd <= d.current_monthly_usd + 1e-6);
        }
    }
}

#[test]
fn a_latency_target_the_cheaper_gpu_misses_blocks_the_move() {
    let (a, truth, _) = generated("7", &["--workloads", &data("advise/tight-latency.toml")]);
    let mut servers = 0;
    for t in truth["devices"].as_array().expect("devices") {
        if t["scenario"] == "small_model_serving" {
            servers += 1;
            let id = t["id"].as_str().expect("id");
            assert!(
                actions_on(&a, id).iter().all(|x| x["kind"] != "rightsize"),
                "{id}: no GPU cheaper than an A100 decodes Llama-3-8B in 5 ms per token"
            );
        }
    }
    assert!(servers > 0);
}

#[test]
fn minutes_of_data_get_no_advice() {
    let o = run(&[
        "advise",
        &data("smi/two-gpus.csv"),
        "--format",
        "json",
        "--no-progress",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let a: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert!(a["actions"].as_array().expect("actions").is_empty());
    assert!(
        a["notes"][0]
            .as_str()
            .expect("a note")
            .contains("advice needs at least 24"),
        "{a}"
    );
}

/// The stall hint names what the GPU waits for by the workload hints: requests for a serving
/// device, its input for training, and "work" when nothing says which.
#[test]
fn the_stall_hint_follows_the_workload_kind() {
    let (_, _, rep) = generated("7", &[]);
    let stalled: Vec<&serde_json::Value> = rep["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .filter(|d| d["bottleneck"]["kind"] == "input_bound")
        .collect();
    assert!(!stalled.is_empty(), "the fleet has a data-starved device");
    let plain = stalled[0]["bottleneck"]["evidence"]
        .as_str()
        .expect("evidence");
    assert!(plain.contains("the GPU waits for work"), "{plain}");
    let id = stalled[0]["id"].as_str().expect("id");
    let dir = tempfile::tempdir().expect("tempdir");
    for (kind, says) in [
        ("inference", "waits for requests between bursts"),
        ("training", "waits for its input"),
    ] {
        let hints = dir.path().join(format!("{kind}.toml"));
        std::fs::write(
            &hints,
            format!("[[workload]]\nmatch = \"{id}\"\nkind = \"{kind}\"\n"),
        )
        .expect("write");
        let hints_s = hints.display().to_string();
        let (_, _, rep) = generated("7", &["--workloads", &hints_s]);
        let d = crate::common::device(&rep, id);
        let ev = d["bottleneck"]["evidence"].as_str().expect("evidence");
        assert!(ev.contains(says), "{kind}: {ev}");
    }
}

/// Steady devices on a cloud whose spot prices the catalog lacks: no spot action, and the notes
/// say why (advice on `--cloud aws` proposed no spot without a word).
#[test]
fn no_spot_price_is_said() {
    let (advice, _, _) = generated("3", &["--cloud", "aws"]);
    let notes = advice["notes"].to_string();
    assert!(
        notes.contains("but the catalog has no spot price for them on aws"),
        "{notes}"
    );
    let (advice, _, _) = generated("3", &[]);
    assert!(
        !advice["notes"].to_string().contains("no spot price"),
        "{}",
        advice["notes"]
    );
}
