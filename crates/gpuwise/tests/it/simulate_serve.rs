//! `gpuwise simulate serve` on the real traces (Azure 2023, Mooncake, ServeGen rates), one
//! request against the planner's own figures, the sweep's choice and front, autoscaling to
//! zero, and bad input. (The engine's queueing checks, M/D/1 and M/D/c, are
//! `gpuwise-sim`'s own tests.)

use std::path::Path;

use crate::common::{run, shared};

pub(crate) fn serve_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["simulate", "serve"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = run(&all);
    assert_eq!(o.code, 0, "{all:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("serve JSON")
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

/// GPU-hours are the timeline's integral × GPUs per replica; cost is GPU-hours × the price;
/// every request is served or dropped; percentiles are in order; the bounds hold.
fn invariants(r: &serde_json::Value) {
    assert_eq!(r["schema"], "gpuwise.serve/v1");
    let t = r["timeline"].as_array().expect("timeline");
    let integral: f64 = t
        .windows(2)
        .map(|w| f(&w[0]["replicas"]) * (f(&w[1]["t_s"]) - f(&w[0]["t_s"])))
        .sum::<f64>()
        * f(&r["gpus_per_replica"])
        / 3600.0;
    assert!((f(&r["gpu_hours"]) - integral).abs() < 1e-9 * integral.max(1.0));
    let price = f(&r["config"]["usd_per_gpu_hour"]);
    assert!((f(&r["cost_usd"]) - price * f(&r["gpu_hours"])).abs() < 1e-9);
    assert_eq!(
        r["served"].as_u64().expect("served") + r["dropped"].as_u64().expect("dropped"),
        r["requests"].as_u64().expect("requests")
    );
    for k in ["ttft_ms", "tpot_ms", "e2e_ms"] {
        let l = &r[k];
        assert!(
            f(&l["p50"]) <= f(&l["p95"]) && f(&l["p95"]) <= f(&l["p99"]),
            "{k}: {l}"
        );
    }
    let b = &r["bounds"];
    assert!(f(&b["perfect_autoscaler_gpu_hours"]) <= f(&r["gpu_hours"]) + 1e-9);
    assert!(f(&r["gpu_hours"]) <= f(&b["static_peak_gpu_hours"]) + 1e-9);
}

#[test]
fn the_real_traces_replay() {
    let Some(data) = shared() else { return };
    let azure = data.join("inference/azure-llm-2023/AzureLLMInferenceTrace_conv.csv");
    let azure = azure.display().to_string();
    let r = serve_json(&[
        "--trace",
        &azure,
        "--model",
        "llama-3-8b",
        "--gpu",
        "H100-SXM5-80GB",
        "--replicas",
        "1",
        "--slo-ttft-ms",
        "2000",
        "--slo-tpot-ms",
        "100",
    ]);
    invariants(&r);
    // The trace's own totals, counted here from the CSV.
    let text = std::fs::read_to_string(&azure).expect("trace");
    let (mut n, mut input, mut output) = (0u64, 0u64, 0u64);
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let v: Vec<&str> = line.split(',').collect();
        n += 1;
        input += v[1].trim().parse::<u64>().expect("input");
        output += v[2].trim().parse::<u64>().expect("output");
    }
    assert_eq!(r["requests"], n);
    assert_eq!(r["requests"], 19_366);
    assert_eq!(r["input_tokens"], input);
    assert_eq!(r["output_tokens"], output);
    assert_eq!(r["trace"]["format"], "azure");
    assert!(f(&r["duration_s"]) >= 3_502.0);
    assert!(f(&r["slo_attainment"]) > 0.9);
    // Mooncake's long prompts, and ServeGen rate windows with Azure's token counts.
    let moon = data.join("inference/mooncake-fast25/conversation_trace.csv");
    let m = serve_json(&[
        "--trace",
        &moon.display().to_string(),
        "--model",
        "llama-3-8b",
        "--gpu",
        "H100-SXM5-80GB",
        "--replicas",
        "4",
    ]);
    invariants(&m);
    assert_eq!(m["requests"], 12_031);
    assert_eq!(m["trace"]["format"], "mooncake");
    let rates = data.join("inference/servegen/servegen_m-small_rate_10min.csv");
    if rates.is_file() {
        let head: String = std::fs::read_to_string(&rates)
            .expect("rates")
            .lines()
            .take(7)
            .map(|l| format!("{l}\n"))
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join("rates.csv");
        std::fs::write(&part, head).expect("rates part");
        let g = serve_json(&[
            "--rates",
            &part.display().to_string(),
            "--lengths-from",
            &azure,
            "--seed",
            "3",
            "--rate-scale",
            "0.005",
            "--model",
            "llama-3-8b",
            "--gpu",
            "H100-SXM5-80GB",
        ]);
        assert_eq!(g["trace"]["format"], "servegen");
        // Six windows of 600 s at the totals × 0.005, Poisson: the count within a few percent.
        let want: f64 = std::fs::read_to_string(&rates)
            .expect("rates")
            .lines()
            .skip(1)
            .take(6)
            .map(|l| {
                l.split(',')
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            })
            .sum::<f64>()
            * 600.0
            * 0.005;
        let got = f(&g["requests"]);
        assert!(
            (got / want - 1.0).abs() < 0.05,
            "{got} requests, {want} expected"
        );
        invariants(&g);
    }
}

#[test]
fn one_request_costs_what_the_step_model_says() {
    // One request alone at batch 1: its time to first token is one prefill step of the step
    // model and its time per output token the mean of its 256 decode steps, each at its own
    // context (the engine's bookkeeping against the model, computed here step by step).
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("one.csv");
    std::fs::write(&trace, "arrival_s,input_tokens,output_tokens\n0,1024,257\n").expect("trace");
    let r = serve_json(&[
        "--trace",
        &trace.display().to_string(),
        "--model",
        "llama-3-8b",
        "--gpu",
        "H100-SXM5-80GB",
        "--max-batch",
        "1",
    ]);
    let m = gpuwise_plan::Model::preset("llama-3-8b").expect("model");
    let mut w = gpuwise_plan::Workload::default();
    for (k, v) in [
        ("mode", "infer"),
        ("batch", "1"),
        ("prompt", "1024"),
        ("output", "256"),
    ] {
        w.set(k, v).expect("workload");
    }
    let s = gpuwise_plan::Setup::new(&m, &w);
    let catalog = gpuwise_catalog::Catalog::builtin();
    let hw = gpuwise_plan::Hardware::from_spec(catalog.resolve("H100-SXM5-80GB").expect("gpu"));
    let c = gpuwise_plan::perf::step_costs(&m, &s, &hw, &gpuwise_plan::perf::Constants::default())
        .expect("step costs");
    // The prompt in one step (the default token budget holds it), attending over itself.
    let ttft_want = c.step_s(&gpuwise_plan::perf::StepWork {
        prefill_tokens: 1024.0,
        prefill_context: 1024.0 * 512.0,
        sampled: 1,
        ..Default::default()
    }) * 1e3;
    // Then 256 decode steps, the first with the prompt and the first token as its context.
    let decode: Vec<f64> = (1..=256)
        .map(|g| {
            c.step_s(&gpuwise_plan::perf::StepWork {
                decode_seqs: 1,
                decode_context: f64::from(1024 + g),
                sampled: 1,
                ..Default::default()
            }) * 1e3
        })
        .collect();
    let tpot_want = decode.iter().sum::<f64>() / 256.0;
    let ttft = f(&r["ttft_ms"]["mean"]);
    let tpot = f(&r["tpot_ms"]["mean"]);
    assert!(
        (ttft / ttft_want - 1.0).abs() < 1e-6,
        "TTFT {ttft} vs {ttft_want}"
    );
    assert!(
        (tpot / tpot_want - 1.0).abs() < 1e-6,
        "TPOT {tpot} vs {tpot_want}"
    );
    // Llama-3-8B on an H100: a 1,024-token prompt in 20–60 ms, a decode step in 5–12 ms.
    assert!((20.0..60.0).contains(&ttft), "{ttft}");
    assert!((5.0..12.0).contains(&tpot), "{tpot}");
}

/// A replica on an A10G runs on the A10's tensor figures, an upper bound: the run says so, as
/// `plan` does; an H100 run, on its own datasheet, says nothing of the kind.
#[test]
fn a_bound_on_a_gpus_figures_is_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = steady(dir.path(), 20, 2.0, 512, 64);
    let notes = |gpu: &str| -> Vec<String> {
        let r = serve_json(&["--trace", &trace, "--model", "mistral-7b", "--gpu", gpu]);
        r["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .map(|n| n.as_str().expect("a note").to_owned())
            .collect()
    };
    let a10g = notes("A10G");
    assert!(
        a10g.iter().any(
            |n| n.starts_with("A10G: tensor TFLOPS are the A10's") && n.contains("upper bound")
        ),
        "{a10g:?}"
    );
    let h100 = notes("H100-SXM5-80GB");
    assert!(!h100.iter().any(|n| n.contains("upper bound")), "{h100:?}");
}

/// A generic trace: `n` requests at `rate` per second (evenly spaced), `input`/`output` tokens.
fn steady(dir: &Path, n: usize, rate: f64, input: u32, output: u32) -> String {
    let mut s = String::from("arrival_s,input_tokens,output_tokens\n");
    for i in 0..n {
        s.push_str(&format!("{},{input},{output}\n", i as f64 / rate));
    }
    let p = dir.join(format!("steady-{n}-{rate}.csv"));
    std::fs::write(&p, s).expect("trace");
    p.display().to_string()
}

#[test]
fn the_sweep_picks_the_cheapest_that_meets_the_slo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = steady(dir.path(), 600, 4.0, 800, 150);
    let args = [
        "--trace",
        &trace,
        "--model",
        "llama-3-8b",
        "--gpu",
        "H100-SXM5-80GB,L4",
        "--replicas",
        "1,2,4",
        "--max-batch",
        "4,32",
        "--slo-ttft-ms",
        "1500",
        "--slo-tpot-ms",
        "80",
        "--sweep",
    ];
    let r = serve_json(&args);
    invariants(&r);
    assert_eq!(r["slo_met"], true);
    let chosen_cost = f(&r["cost_usd"]);
    assert!(f(&r["slo_attainment"]) >= 0.99);
    let candidates = r["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 12);
    for c in candidates {
        if c["slo_attainment"].as_f64().is_some_and(|a| a >= 0.99) {
            assert!(
                f(&c["cost_usd"]) >= chosen_cost - 1e-9,
                "{c} is cheaper and meets the SLO"
            );
        }
    }
    let front = r["front"].as_array().expect("front");
    assert!(!front.is_empty());
    for w in front.windows(2) {
        assert!(f(&w[1]["cost_usd"]) >= f(&w[0]["cost_usd"]));
        assert!(f(&w[1]["e2e_p99_ms"]) < f(&w[0]["e2e_p99_ms"]));
    }
    // An SLO nothing meets: the closest is shown, and the exit status says so.
    let mut impossible: Vec<&str> = args.to_vec();
    impossible[11] = "1";
    let mut all = vec!["simulate", "serve"];
    all.extend(impossible);
    let o = run(&all);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("no configuration meets the SLO"),
        "{}",
        o.stderr
    );
}

/// A sweep candidate that does not fit (a batch limit whose workspace leaves no KV cache) is
/// left out and named with the right cause, the rest still run; only nothing fitting is an
/// error. Flags that size work are bounded, and a zero `--tp` is refused, not clamped.
#[test]
fn a_candidate_that_does_not_fit_is_left_out_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = steady(dir.path(), 200, 4.0, 800, 150);
    let base = [
        "simulate",
        "serve",
        "--trace",
        &trace,
        "--model",
        "llama-3-8b",
    ];
    let with = |extra: &[&str]| {
        let mut all = base.to_vec();
        all.extend_from_slice(extra);
        run(&all)
    };
    let o = with(&[
        "--gpu",
        "H100-SXM5-80GB,L4",
        "--replicas",
        "1,2",
        "--max-batch",
        "4,32,20000",
        "--slo-ttft-ms",
        "1500",
        "--sweep",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(
        r["candidates"].as_array().map(Vec::len),
        Some(8),
        "2 GPUs × 2 × 2"
    );
    let notes = r["notes"].to_string();
    for gpu in ["1 × H100-SXM5-80GB (80 GB)", "1 × L4 (24 GB)"] {
        assert!(
            notes.contains(&format!("left out: llama-3-8b does not fit {gpu} at bf16: with a batch limit of 20000 the activation workspace leaves no room for a KV cache")),
            "{notes}"
        );
    }
    // A sweep without lists sweeps the default grid (it ran the one default and failed).
    let o = with(&[
        "--gpu",
        "L4,H100-SXM5-80GB",
        "--sweep",
        "--slo-ttft-ms",
        "2000",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("json");
    assert_eq!(r["candidates"].as_array().map(Vec::len), Some(2 * 5 * 3));
    // A price the catalog has only for another pricing or cloud is refused, as `simulate spot`
    // does (it was taken silently: spot priced as on demand).
    let o = with(&["--gpu", "L4", "--pricing", "spot", "--cloud", "aws"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the catalog has no spot price for L4 on aws: give --price USD"),
        "{}",
        o.stderr
    );
    let o = with(&["--gpu", "L4", "--max-batch", "20000"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("try a smaller --max-batch"),
        "{}",
        o.stderr
    );
    for (flag, value, want) in [
        ("--replicas", "1000000", "--replicas: at most 1024"),
        ("--max-batch", "0", "--max-batch: from 1 to 65536"),
        ("--tp", "0", "--tp: at least 1"),
        ("--price", "NaN", "`NaN` is not a price in USD above zero"),
    ] {
        let o = with(&["--gpu", "L4", flag, value]);
        assert_eq!(o.code, 2, "{flag} {value}");
        assert!(o.stderr.contains(want), "{flag} {value}: {}", o.stderr);
    }
}

#[test]
fn autoscaling_to_zero_follows_the_bursts() {
    // Two bursts an hour apart, from zero replicas: scaled to zero between them, the GPU-hours
    // stay far below holding the peak all along, and the first request of each burst waits
    // for a start.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = String::from("arrival_s,input_tokens,output_tokens\n");
    for burst in [0.0, 3600.0] {
        for i in 0..200 {
            s.push_str(&format!("{},500,100\n", burst + f64::from(i) * 0.5));
        }
    }
    let trace = dir.path().join("bursts.csv");
    std::fs::write(&trace, s).expect("trace");
    let r = serve_json(&[
        "--trace",
        &trace.display().to_string(),
        "--model",
        "llama-3-8b",
        "--gpu",
        "L4",
        "--autoscale",
        "target=0.5,min=0,max=6,cooldown=60s,startup=30s,interval=10s",
        "--max-batch",
        "8",
    ]);
    invariants(&r);
    let t = r["timeline"].as_array().expect("timeline");
    // The first request (at 0 s) starts the first replica.
    assert_eq!(t[0]["replicas"], 1);
    assert!(
        t.iter().any(|p| p["replicas"] == 0 && f(&p["t_s"]) > 0.0),
        "back to zero between bursts"
    );
    assert!(f(&r["gpu_hours"]) < 0.5 * f(&r["bounds"]["static_peak_gpu_hours"]));
    assert!(
        f(&r["ttft_ms"]["p99"]) >= 30_000.0,
        "a cold start is waited for"
    );
    assert_eq!(r["served"], 400);
}

#[test]
fn bad_input_is_counted_or_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("messy.csv");
    std::fs::write(
        &trace,
        "arrival_s,input_tokens,output_tokens\n5,100,10\n1,100,10\n2,-4,10\n3,,10\n4,100,10\n",
    )
    .expect("trace");
    let t = trace.display().to_string();
    let o = run(&[
        "simulate",
        "serve",
        "--trace",
        &t,
        "--model",
        "llama-3-8b",
        "--gpu",
        "H100-SXM5-80GB",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("sorted by arrival"), "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert_eq!(r["requests"], 3);
    assert_eq!(r["trace"]["skipped"]["negative_tokens"], 1);
    assert_eq!(r["trace"]["skipped"]["missing_tokens"], 1);
    assert_eq!(r["trace"]["out_of_order"], 1);
    for (args, says) in [
        (
            vec!["--model", "llama-3-70b", "--gpu", "L4"],
            "does not fit",
        ),
        (
            vec!["--model", "llama-3-8b", "--gpu", "H100-SXM5-80GB,L4"],
            "--sweep",
        ),
        (
            vec![
                "--model",
                "llama-3-8b",
                "--gpu",
                "L4",
                "--replicas",
                "1,2",
                "--sweep",
            ],
            "SLO",
        ),
        (
            vec![
                "--model",
                "llama-3-8b",
                "--gpu",
                "L4",
                "--autoscale",
                "target=2",
            ],
            "target",
        ),
        (
            vec![
                "--model",
                "llama-3-8b",
                "--gpu",
                "L4",
                "--autoscale",
                "spare=3",
            ],
            "unknown key",
        ),
        (vec!["--model", "llama-3-8b", "--gpu", "NoSuchGPU"], "--gpu"),
        (vec!["--gpu", "L4"], "name a model"),
    ] {
        let mut all = vec!["simulate", "serve", "--trace", t.as_str()];
        all.extend(args);
        let o = run(&all);
        assert_eq!(o.code, 2, "{all:?}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{all:?}: {}", o.stderr);
    }
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "when,who\n1,2\n").expect("empty");
    let o = run(&[
        "simulate",
        "serve",
        "--trace",
        &empty.display().to_string(),
        "--model",
        "llama-3-8b",
        "--gpu",
        "L4",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("empty.csv"), "{}", o.stderr);
}

#[test]
fn predictive_and_scheduled_scaling_meet_a_daily_burst_earlier() {
    // Two days with the same burst (3 req/s from 11:00 to 13:00), from zero replicas. The
    // reactive policy meets each burst late (cold starts); the predictive one holds yesterday's
    // load on day two; a schedule from the reactive run holds each hour's replicas from its
    // start; a warm replica absorbs the first minutes.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = String::from("arrival_s,input_tokens,output_tokens\n");
    for day in 0..2 {
        for i in 0..(2 * 3600 * 3) {
            s.push_str(&format!(
                "{:.3},600,120\n",
                f64::from(day * 86_400 + 11 * 3600) + f64::from(i) / 3.0
            ));
        }
    }
    let trace = dir.path().join("daily.csv");
    std::fs::write(&trace, s).expect("trace");
    let t = trace.display().to_string();
    let run_with = |policy: &str| {
        serve_json(&[
            "--trace",
            &t,
            "--model",
            "llama-3-8b",
            "--gpu",
            "L4",
            "--max-batch",
            "16",
            "--slo-ttft-ms",
            "2000",
            "--slo-tpot-ms",
            "100",
            "--autoscale",
            &format!("target=0.6,min=0,max=16,cooldown=2m,startup=90s,{policy}"),
        ])
    };
    let reactive = run_with("policy=reactive");
    let predictive = run_with("policy=predictive,period=1d");
    let schedule = run_with("policy=schedule,period=1d");
    let warm = run_with("policy=reactive,warm=1");
    let queue = run_with("policy=reactive,metric=queue");
    invariants(&queue);
    assert_eq!(queue["config"]["scaling"]["on_queue"], true);
    // Scaling on the queue adds replicas while requests wait for the ones starting.
    assert!(f(&queue["gpu_hours"]) >= f(&reactive["gpu_hours"]));
    for r in [&reactive, &predictive, &schedule, &warm] {
        invariants(r);
        assert_eq!(r["served"], 43_200);
    }
    let slo = |r: &serde_json::Value| f(&r["slo_attainment"]);
    assert!(
        slo(&predictive) > slo(&reactive),
        "{} vs {}",
        slo(&predictive),
        slo(&reactive)
    );
    assert!(slo(&schedule) >= 0.99, "{}", slo(&schedule));
    assert!(slo(&warm) > slo(&reactive));
    assert!(f(&predictive["ttft_ms"]["p99"]) < f(&reactive["ttft_ms"]["p99"]));
    // Holding replicas ahead costs GPU-hours.
    assert!(f(&schedule["gpu_hours"]) > f(&reactive["gpu_hours"]));
    assert_eq!(schedule["config"]["scaling"]["kind"], "schedule");
    assert_eq!(
        schedule["config"]["scaling"]["replicas_by_hour"]
            .as_array()
            .expect("hours")
            .len(),
        24
    );
}

#[test]
fn spot_replicas_are_preempted_as_the_trace_says() {
    // Four replicas, two on spot; spot capacity 2, then none from 600 s to 1,200 s, then 2
    // again. Both spot replicas are preempted at 600 s (their requests go back to the queue),
    // restart at 1,200 s after their startup, and are billed at the spot price only while up.
    let dir = tempfile::tempdir().expect("tempdir");
    let traffic = steady(dir.path(), 7_200, 4.0, 800, 200);
    let spot = dir.path().join("spot.csv");
    std::fs::write(&spot, "time_s,available\n0,2\n600,0\n1200,2\n3600,2\n").expect("spot trace");
    let r = serve_json(&[
        "--trace",
        &traffic,
        "--model",
        "llama-3-8b",
        "--gpu",
        "L4",
        "--replicas",
        "4",
        "--spot",
        "2",
        "--spot-trace",
        &spot.display().to_string(),
        "--spot-tick",
        "1m",
        "--price",
        "1.0",
        "--spot-price",
        "0.25",
        "--slo-ttft-ms",
        "5000",
    ]);
    invariants_with_spot(&r);
    assert_eq!(r["preemptions"], 2);
    assert!(r["requeued"].as_u64().expect("requeued") > 0);
    assert_eq!(r["served"], 7_200);
    // Spot time: two replicas for 600 s, none for 600 s, two again from 1,200 s to the end
    // (the startup counts: a starting replica is billed).
    let end = f(&r["duration_s"]);
    let want_spot_h = 2.0 * (600.0 + (end - 1200.0)) / 3600.0;
    assert!(
        (f(&r["spot_gpu_hours"]) - want_spot_h).abs() < 1e-6,
        "{} vs {want_spot_h}",
        r["spot_gpu_hours"]
    );
    let od = f(&r["gpu_hours"]) - f(&r["spot_gpu_hours"]);
    assert!((f(&r["cost_usd"]) - (od * 1.0 + f(&r["spot_gpu_hours"]) * 0.25)).abs() < 1e-9);
    // --spot needs a fixed fleet and a trace.
    let o = run(&[
        "simulate",
        "serve",
        "--trace",
        &traffic,
        "--model",
        "llama-3-8b",
        "--gpu",
        "L4",
        "--replicas",
        "2",
        "--spot",
        "3",
        "--spot-trace",
        &spot.display().to_string(),
        "--spot-price",
        "0.2",
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--spot 3"), "{}", o.stderr);
}

/// [`invariants`] with spot: cost is on-demand hours at the price plus spot hours at the spot
/// price; the rest is the same.
fn invariants_with_spot(r: &serde_json::Value) {
    let mut plain = r.clone();
    let spot_price = f(&r["config"]["spot"]["usd_per_gpu_hour"]);
    let od_price = f(&r["config"]["usd_per_gpu_hour"]);
    let spot_h = f(&r["spot_gpu_hours"]);
    // Check everything else by pricing the spot hours as on-demand.
    plain["cost_usd"] = (f(&r["cost_usd"]) + spot_h * (od_price - spot_price)).into();
    invariants(&plain);
}

#[test]
fn the_bad_trace_corpus_gives_clear_errors() {
    let file = |name: &str| crate::common::data(&format!("bad/traffic/{name}"));
    let base = ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "L4"];
    for (name, says) in [
        ("unknown-header.csv", "Mooncake"),
        ("header-only.csv", "no request"),
        ("no-usable-row.csv", "no request"),
    ] {
        let t = file(name);
        let mut all = base.to_vec();
        all.extend(["--trace", t.as_str()]);
        let o = run(&all);
        assert_eq!(o.code, 2, "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains(name) && o.stderr.contains(says),
            "{name}: {}",
            o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "{name}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = steady(dir.path(), 10, 1.0, 100, 10);
    let profile = file("profile-bad-row.csv");
    let mut all = base.to_vec();
    all.extend(["--trace", trace.as_str(), "--profile", profile.as_str()]);
    let o = run(&all);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("profile-bad-row.csv:3"), "{}", o.stderr);
}

/// vLLM's two schedulers on the same traffic: prompts first gives prompts their first token
/// sooner and stalls the running sequences while it prefills (the trade-off chunked prefill
/// was made for); neither preempts when the cache has room.
#[test]
fn prompts_first_trades_time_per_token_for_time_to_first_token() {
    let trace = crate::common::data("serve/h200-2026-11-27/poisson-10qps.csv");
    let serve = |batching: &str| {
        let r = serve_json(&[
            "--trace",
            &trace,
            "--model",
            "llama-2-7b",
            "--gpu",
            "H100-SXM5-80GB",
            "--max-batch",
            "128",
            "--batching",
            batching,
        ]);
        invariants(&r);
        assert_eq!(r["served"], 448);
        assert_eq!(r["recomputed"], 0, "{batching}");
        r
    };
    let (mixed, first) = (serve("continuous"), serve("prompts-first"));
    assert_eq!(first["config"]["batching"]["kind"], "prompts_first");
    assert!(f(&first["ttft_ms"]["p50"]) < f(&mixed["ttft_ms"]["p50"]));
    assert!(f(&first["ttft_ms"]["p99"]) < f(&mixed["ttft_ms"]["p99"]));
    assert!(f(&first["tpot_ms"]["p50"]) > f(&mixed["tpot_ms"]["p50"]));
    assert!(f(&first["tpot_ms"]["p99"]) > f(&mixed["tpot_ms"]["p99"]));
    let o = run(&[
        "simulate",
        "serve",
        "--trace",
        &trace,
        "--model",
        "llama-2-7b",
        "--gpu",
        "H100-SXM5-80GB",
        "--batching",
        "fifo",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("not continuous, prompts-first or static"),
        "{}",
        o.stderr
    );
}

/// An L4 cannot keep up with 10 requests a second of Llama-2-7B: its KV cache fills, the
/// latest admitted sequences are preempted and recomputed (as vLLM does), and still every
/// request is served once, its tokens counted once; the table says how many were preempted.
#[test]
fn a_full_kv_cache_preempts_and_every_request_is_still_served() {
    let trace = crate::common::data("serve/h200-2026-11-27/poisson-10qps.csv");
    let args = [
        "simulate",
        "serve",
        "--trace",
        &trace,
        "--model",
        "llama-2-7b",
        "--gpu",
        "L4",
        "--max-batch",
        "128",
    ];
    let r = serve_json(&args[2..]);
    invariants(&r);
    assert_eq!(
        (r["served"].as_u64(), r["dropped"].as_u64()),
        (Some(448), Some(0))
    );
    assert_eq!(r["output_tokens"], 448 * 128);
    let n = r["recomputed"].as_u64().expect("a count");
    assert!(n > 0, "{n}");
    let table = run(&args);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table
            .stdout
            .contains(&format!("{n} preempted when the KV cache was full")),
        "{}",
        table.stdout
    );
}
