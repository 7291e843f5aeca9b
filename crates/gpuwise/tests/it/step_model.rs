//! The serving step model against measured kernel times it was not shaped on.
//!
//! - Vidur's per-operator profiles (`../shared/data/inference/vidur-operator-profiles`, H100
//!   and A40, measured by the Vidur authors): a decoder layer's time (the operators Vidur
//!   profiles: projections, MLP, norms, activation, rotary, adds) at every token count and
//!   tensor-parallel degree. The constants were fitted on Llama-2-7B and Qwen-72B only; the
//!   other four models are the validation set (the split in docs/accuracy.md, fixed before
//!   fitting).
//! - Our own whole engine steps on an H200 (`tests/data/serve/h200-2026-11-27/steps.csv`,
//!   `bench/gpu/step-times.py`): prompts, decodes and mixed steps of a Llama-2-7B-shaped model,
//!   on a GPU none of the matrix-multiply constants came from.

use std::collections::BTreeMap;
use std::path::Path;

use gpuwise_plan::model::FfnKind;
use gpuwise_plan::perf::{Constants, StepCosts, StepWork, step_costs};
use gpuwise_plan::{Hardware, Model, Setup, Workload};

use crate::common;

const SHAPING: [&str; 2] = ["meta-llama__Llama-2-7b-hf", "Qwen__Qwen-72B"];
const VALIDATION: [&str; 4] = [
    "codellama__CodeLlama-34b-Instruct-hf",
    "internlm__internlm-20b",
    "meta-llama__Llama-2-70b-hf",
    "microsoft__phi-2",
];

/// A decoder shaped as a profile row says (layers and vocabulary do not enter a layer's time).
#[allow(clippy::too_many_arguments)]
fn shaped(heads: u32, kv_heads: u32, hidden: u32, ffn: u32, gated: bool, vocab: u32) -> Model {
    let mut m = Model {
        name: "profiled".into(),
        family: String::new(),
        params: 0.0,
        layers: 32,
        hidden,
        heads,
        kv_heads,
        head_dim: hidden / heads,
        ffn,
        ffn_kind: if gated {
            FfnKind::Gated
        } else {
            FfnKind::Plain
        },
        vocab,
        max_context: None,
        experts: 1,
        active_experts: 1,
        tied_embeddings: false,
        source: "a Vidur profile row".into(),
        assumptions: Vec::new(),
    };
    m.params = m.shape_params();
    m
}

fn costs(m: &Model, gpu: &str, tp: u32) -> StepCosts {
    let mut w = Workload::default();
    for (k, v) in [("mode", "infer"), ("precision", "bf16")] {
        w.set(k, v).expect("workload");
    }
    w.set("tp", &tp.to_string()).expect("tp");
    let s = Setup::new(m, &w);
    let spec = gpuwise_catalog::Catalog::builtin()
        .resolve(gpu)
        .expect("gpu in the catalog")
        .clone();
    step_costs(m, &s, &Hardware::from_spec(&spec), &Constants::default()).expect("step costs")
}

/// Per (model, tp): Σ measured, Σ modelled over token counts, and every point's error.
type Fits = BTreeMap<(String, u32), (f64, f64, Vec<f64>)>;

fn compare(dir: &Path, gpu_dir: &str, gpu: &str, models: &[&str]) -> Fits {
    let mut out = Fits::new();
    for name in models {
        let path = dir.join(gpu_dir).join(format!("{name}.mlp.csv"));
        let mut r = csv::Reader::from_path(&path).expect("profile");
        let head = r.headers().expect("header").clone();
        let col = |k: &str| head.iter().position(|h| h == k);
        let mut cache: BTreeMap<u32, StepCosts> = BTreeMap::new();
        for row in r.records() {
            let row = row.expect("row");
            let num = |k: &str| -> f64 {
                row[col(k).unwrap_or_else(|| panic!("{k}"))]
                    .parse()
                    .expect("a number")
            };
            let tp = num("num_tensor_parallel_workers") as u32;
            let c = cache.entry(tp).or_insert_with(|| {
                let m = shaped(
                    num("n_head") as u32,
                    num("n_kv_head") as u32,
                    num("n_embd") as u32,
                    num("n_expanded_embd") as u32,
                    &row[col("use_gated_mlp").expect("gated")] == "True",
                    num("vocab_size") as u32,
                );
                costs(&m, gpu, tp)
            });
            // The operators the profile has (Phi-2's parallel block has one norm), against the
            // model's time for the same operators.
            let (mut measured, mut modelled) = (0.0, 0.0);
            for (op, t) in c.layer_ops(num("num_tokens")) {
                if let Some(i) = col(&format!("time_stats.{op}.median")) {
                    measured += row[i].parse::<f64>().expect("a time") * 1e-3;
                    modelled += t;
                }
            }
            let e = out.entry(((*name).to_owned(), tp)).or_default();
            e.0 += measured;
            e.1 += modelled;
            e.2.push(modelled / measured - 1.0);
        }
    }
    out
}

fn median_abs(v: &[f64]) -> f64 {
    let mut a: Vec<f64> = v.iter().map(|e| e.abs()).collect();
    a.sort_by(f64::total_cmp);
    a[a.len() / 2]
}

#[test]
fn a_layer_is_within_10_percent_of_vidurs_measured_operators_on_models_it_was_not_shaped_on() {
    let Some(shared) = common::shared() else {
        return;
    };
    let dir = shared.join("inference/vidur-operator-profiles");
    for (gpu_dir, gpu) in [("h100", "H100-SXM5-80GB"), ("a40", "A40")] {
        for (set, models) in [("shaping", &SHAPING[..]), ("validation", &VALIDATION[..])] {
            let fits = compare(&dir, gpu_dir, gpu, models);
            for ((model, tp), (measured, modelled, errs)) in &fits {
                let total = modelled / measured - 1.0;
                let median = median_abs(errs);
                let within = errs.iter().filter(|e| e.abs() <= 0.10).count();
                eprintln!(
                    "{gpu:15} {set:10} {model:38} tp{tp}: total {:+.1} %, median |error| {:.1} %, {within}/{} points within 10 %",
                    total * 100.0,
                    median * 100.0,
                    errs.len()
                );
                if set == "validation" {
                    // Summed over the token counts (the time a run of steps takes) and at the
                    // median point; single token counts where cuBLAS switches kernels are
                    // off by up to 45 % and are reported, not hidden.
                    assert!(
                        total.abs() <= 0.10,
                        "{gpu} {model} tp{tp}: total {total:+.3}"
                    );
                    assert!(median <= 0.10, "{gpu} {model} tp{tp}: median {median:.3}");
                }
            }
        }
    }
}

#[test]
fn whole_engine_steps_measured_on_an_h200_are_within_15_percent() {
    let path = common::data("serve/h200-2026-11-27/steps.csv");
    // Llama-2-7B's shape, 32 layers, 32,000-token vocabulary, as bench/gpu/step-times.py ran it.
    let m = shaped(32, 32, 4096, 11008, true, 32000);
    let c = costs(&m, "H200-SXM-141GB", 1);
    let mut r = csv::Reader::from_path(&path).expect("steps");
    let mut errs = Vec::new();
    for row in r.records() {
        let row = row.expect("row");
        let n = |i: usize| -> f64 { row[i].parse().expect("a number") };
        let (prefill, decodes, ctx, ms) = (n(0), n(1) as usize, n(2), n(3));
        let w = StepWork {
            prefill_tokens: prefill,
            prefill_context: prefill * prefill / 2.0,
            decode_seqs: decodes,
            decode_context: decodes as f64 * ctx,
            sampled: decodes + usize::from(prefill > 0.0),
        };
        let e = c.step_s(&w) * 1e3 / ms - 1.0;
        eprintln!(
            "prefill {prefill:5} + {decodes:3} decodes at {ctx:5}: measured {ms:8.3} ms, modelled {:8.3} ms ({:+.1} %)",
            c.step_s(&w) * 1e3,
            e * 100.0
        );
        assert!(
            e.abs() <= 0.15,
            "prefill {prefill} + {decodes} at {ctx}: {e:+.3}"
        );
        errs.push(e);
    }
    assert_eq!(errs.len(), 15, "every measured step compared");
    let mean = errs.iter().map(|e| e.abs()).sum::<f64>() / errs.len() as f64;
    assert!(mean <= 0.08, "mean |error| {mean:.3}");
}

/// Nearest-rank percentiles as the simulator computes them: (mean, p50, p95, p99), ms.
fn percentiles(mut v: Vec<f64>) -> [f64; 4] {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    [
        v.iter().sum::<f64>() / v.len() as f64,
        q(0.5),
        q(0.95),
        q(0.99),
    ]
}

/// The measured (ttft, tpot, e2e) percentiles of a replay on the H200 engine, ms.
fn measured(name: &str) -> [[f64; 4]; 3] {
    let path = common::data(&format!("serve/h200-2026-11-27/{name}.requests.csv"));
    let mut r = csv::Reader::from_path(&path).expect("requests");
    let (mut ttft, mut tpot, mut e2e) = (Vec::new(), Vec::new(), Vec::new());
    for row in r.records() {
        let row = row.expect("row");
        let n = |i: usize| -> f64 { row[i].parse().expect("a number") };
        let (arrival, output, first, done) = (n(0), n(2), n(3), n(4));
        ttft.push((first - arrival) * 1e3);
        tpot.push((done - first) * 1e3 / (output - 1.0));
        e2e.push((done - arrival) * 1e3);
    }
    [percentiles(ttft), percentiles(tpot), percentiles(e2e)]
}

/// The simulator's (ttft, tpot, e2e) on the same arrivals, ms.
fn simulated(name: &str) -> [[f64; 4]; 3] {
    let trace = common::data(&format!("serve/h200-2026-11-27/{name}.csv"));
    let v = crate::simulate_serve::serve_json(&[
        "--trace",
        &trace,
        "--model",
        "llama-2-7b",
        "--gpu",
        "H200-SXM-141GB",
        "--max-batch",
        "128",
        "--price",
        "1",
    ]);
    let get = |k: &str| -> [f64; 4] {
        ["mean", "p50", "p95", "p99"].map(|p| v[k][p].as_f64().expect("a figure"))
    };
    [get("ttft_ms"), get("tpot_ms"), get("e2e_ms")]
}

/// End to end against a real timeline: the same arrivals served on an H200 by a minimal
/// continuous-batching engine (`bench/gpu/serve-replay.py`, 2026-11-27: Llama-2-7B shape,
/// batch ≤ 128, 8,192-token budget, decode iterations as CUDA graphs, iterations with a prompt
/// eager). An offline burst of 256 requests lands within 6 % on every figure but its median
/// time to first token (−10 %: the burst is served in two waves and the median sits at their
/// edge). Poisson traffic at 2, 5 and 10 requests/s is 11–21 % faster in the simulator on
/// time per token and end to end (22–59 % on time to first token): its decode iterations are
/// 7–13 % below the engine's (the engine runs unfused kernels — two residual adds, SiLU and multiply
/// apart — and 0.2 ms of its own work per iteration), and its eager iterations with a prompt
/// are CPU-bound in Python (16–28 ms where the kernels take 14–17). Those bands are held
/// here so that a change to the step model shows against the measurement; docs/accuracy.md
/// has the table.
#[test]
fn served_on_an_h200_the_simulator_is_within_the_recorded_bands() {
    let names = ["TTFT", "TPOT", "E2E"];
    let stats = ["mean", "p50", "p95", "p99"];
    for trace in ["burst-256", "poisson-2qps", "poisson-5qps", "poisson-10qps"] {
        let (m, s) = (measured(trace), simulated(trace));
        for k in 0..3 {
            for j in 0..4 {
                let e = s[k][j] / m[k][j] - 1.0;
                eprintln!(
                    "{trace:14} {} {:4}: measured {:9.1} ms, simulated {:9.1} ms ({:+.1} %)",
                    names[k],
                    stats[j],
                    m[k][j],
                    s[k][j],
                    e * 100.0
                );
                let (lo, hi) = match (trace, k, j) {
                    ("burst-256", 0, 1) => (-0.10, 0.06),
                    ("burst-256", _, _) => (-0.06, 0.06),
                    (_, 0, _) => (-0.6, 0.0),
                    _ => (-0.22, 0.0),
                };
                assert!(
                    (lo..=hi).contains(&e),
                    "{trace} {} {}: {e:+.3} outside {lo}..{hi}",
                    names[k],
                    stats[j]
                );
            }
        }
    }
}
