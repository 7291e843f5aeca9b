//! Equivalent settings give equal answers: every spelling the workload grammar accepts for one
//! setting — ZeRO-3 or FSDP, data parallel as `dp` or as `gpus`, accumulation as `ga` or as a
//! global batch, a GPU by its catalog id or by the note a source prints, a precision, a mode
//! or a boolean spelled another way, a key's aliases — is estimated exactly as the canonical
//! spelling, on every workload of a grid of training, LoRA and inference cases and every
//! metric they are measured by. (Issue 41: a case written `zero=3` instead of FSDP once read
//! 344 % high.)

use gpuwise_catalog::Catalog;
use gpuwise_plan::perf::Constants;
use gpuwise_plan::validate::{Outcome, evaluate, parse_cases};

const HEADER: &str = "id,metric,measured,unit,workload,tolerance_pct,source,trust\n";

type Workload = Vec<(String, String)>;

/// Spellings the grid compares (docs/planner.md says how many).
const COMPARED: usize = 846;

fn outcome(metric: &str, unit: &str, workload: &str) -> Outcome {
    let text = format!("{HEADER}X,{metric},1,{unit},{workload},30,grid,high\n");
    let cases = parse_cases(&text, "grid.csv").expect("parses");
    evaluate(&cases[0], &Catalog::builtin(), &Constants::default())
}

fn kv(pairs: &[(&str, String)]) -> Workload {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// Full training of an 8B model on a GPU: memory and speed.
fn training(gpu: &str, out: &mut Vec<(&'static str, &'static str, Workload)>) {
    for precision in ["amp_bf16", "bf16", "amp_fp16"] {
        for (dp, zero, ga, batch) in [(1, 0, 1, 2), (8, 3, 4, 2), (8, 1, 2, 4), (4, 3, 1, 1)] {
            let base = kv(&[
                ("model", "llama-3.1-8b".into()),
                ("mode", "train".into()),
                ("gpu", gpu.into()),
                ("precision", precision.into()),
                ("batch", batch.to_string()),
                ("seq", "2048".into()),
                ("dp", dp.to_string()),
                ("zero", zero.to_string()),
                ("ga", ga.to_string()),
                ("optimizer_in_bwd", (zero == 0).to_string()),
                ("activation_offload", (batch == 4).to_string()),
            ]);
            out.push(("train_peak_memory", "GiB", base.clone()));
            out.push(("train_tokens_per_s_per_gpu", "tokens/s", base));
        }
    }
}

/// The grid: (metric, unit, canonical workload).
/// Eager encoder fine-tuning (the Hugging Face Trainer's step model), attention and compile
/// each spelled several ways.
fn encoder(gpu: &str, out: &mut Vec<(&'static str, &'static str, Workload)>) {
    for (precision, flash, compile) in [("fp32", false, false), ("amp_bf16", true, false)] {
        for batch in [4, 8] {
            let base = kv(&[
                ("model", "bert-large".into()),
                ("mode", "train".into()),
                ("gpu", gpu.into()),
                ("framework", "hf".into()),
                ("task_head", "seq-classification".into()),
                ("precision", precision.into()),
                ("batch", batch.to_string()),
                ("seq", "512".into()),
                ("dp", "1".into()),
                ("ga", "2".into()),
                ("flash_attention", flash.to_string()),
                ("compile", compile.to_string()),
            ]);
            out.push(("train_peak_memory", "GiB", base.clone()));
            out.push(("train_tokens_per_s_per_gpu", "tokens/s", base));
        }
    }
}

fn grid() -> Vec<(&'static str, &'static str, Workload)> {
    let mut out = Vec::new();
    for gpu in ["A100-SXM4-80GB", "H100-SXM5-80GB"] {
        training(gpu, &mut out);
        encoder(gpu, &mut out);
        for (precision, batch, output) in [("bf16", 1, 128), ("fp16", 8, 256), ("fp8", 4, 64)] {
            let base = kv(&[
                ("model", "llama-3.1-8b".into()),
                ("mode", "infer".into()),
                ("gpu", gpu.into()),
                ("precision", precision.into()),
                ("batch", batch.to_string()),
                ("prompt", "512".into()),
                ("output", output.to_string()),
            ]);
            out.push(("decode_tokens_per_s", "tokens/s", base.clone()));
            out.push(("infer_peak_memory", "GiB", base));
        }
    }
    for (dp, rank) in [(8, 16), (2, 64)] {
        let base = kv(&[
            ("model", "llama-3.1-70b".into()),
            ("mode", "lora".into()),
            ("precision", "bf16".into()),
            ("lora_rank", rank.to_string()),
            ("lora_targets", "q+v".into()),
            ("batch", "1".into()),
            ("seq", "2048".into()),
            ("dp", dp.to_string()),
            ("zero", "3".into()),
            ("cpu_offload", "false".into()),
        ]);
        out.push(("train_peak_memory", "GiB", base));
    }
    out
}

/// Other names of one setting: (key, value) → the spellings that mean the same.
fn aliases(key: &str, value: &str) -> Vec<(String, String)> {
    let same = |keys: &[&str]| -> Vec<(String, String)> {
        keys.iter()
            .map(|k| ((*k).to_owned(), value.to_owned()))
            .collect()
    };
    let values = |vs: &[&str]| -> Vec<(String, String)> {
        vs.iter()
            .map(|v| (key.to_owned(), (*v).to_owned()))
            .collect()
    };
    match (key, value) {
        ("zero", "3") => vec![("fsdp".into(), "true".into())],
        ("dp", _) => same(&["gpus"]),
        ("precision", "bf16") => values(&["bfloat16", "BF16"]),
        ("precision", "fp16") => values(&["float16", "half"]),
        ("precision", "amp_bf16") => values(&["mixed_bf16", "amp-bf16"]),
        ("precision", "amp_fp16") => values(&["mixed_fp16", "AMP_FP16"]),
        ("precision", "fp8") => values(&["fp8_e4m3"]),
        ("mode", "train") => values(&["training"]),
        ("mode", "infer") => values(&["inference"]),
        ("output", _) => same(&["output_tokens"]),
        ("optimizer_in_bwd", "true") => {
            let mut v = same(&["optimizer_in_backward"]);
            v.extend(values(&["yes", "1", "on"]));
            v
        }
        ("optimizer_in_bwd", _) => same(&["optimizer_in_backward"]),
        ("activation_offload", _) => {
            same(&["activation_offloading", "enable_activation_offloading"])
        }
        ("cpu_offload", _) => same(&["fsdp_cpu_offload"]),
        ("compile", _) => same(&["torch_compile"]),
        ("lora_targets", "q+v") => {
            let mut v = values(&["q_proj+v_proj", "query|value", "v+q"]);
            v.extend(same(&["target_modules"]));
            v
        }
        ("flash_attention", "false") => ["attention", "attn_implementation"]
            .iter()
            .map(|k| ((*k).to_owned(), "eager".to_owned()))
            .collect(),
        ("flash_attention", "true") => vec![
            ("attention".into(), "sdpa".into()),
            ("attn_implementation".into(), "flash_attention_2".into()),
        ],
        ("gpu", "A100-SXM4-80GB") => ["NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"]
            .iter()
            .map(|n| ("gpu_note".to_owned(), (*n).to_owned()))
            .collect(),
        ("gpu", "H100-SXM5-80GB") => ["NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"]
            .iter()
            .map(|n| ("gpu_note".to_owned(), (*n).to_owned()))
            .collect(),
        _ => Vec::new(),
    }
}

/// The other spellings of one workload, each a whole workload that must read the same.
fn spellings(base: &Workload) -> Vec<(String, Workload)> {
    let get = |k: &str| {
        base.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let replaced = |from: &str, to: (String, String)| -> Workload {
        base.iter()
            .map(|(k, v)| {
                if k == from {
                    to.clone()
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for (k, v) in base {
        for alias in aliases(k, v) {
            out.push((
                format!("{}={} for {k}={v}", alias.0, alias.1),
                replaced(k, alias),
            ));
        }
    }
    // Accumulation as a global batch: micro-batch × steps × data-parallel ranks.
    if let (Some(ga), Some(batch), Some(dp)) = (get("ga"), get("batch"), get("dp")) {
        let n = |s: &str| s.parse::<u64>().expect("a count");
        let global = n(&batch) * n(&ga) * n(&dp);
        out.push((
            format!("global_batch={global} for ga={ga}"),
            replaced("ga", ("global_batch".into(), global.to_string())),
        ));
        if let Some(seq) = get("seq") {
            let tokens = global * n(&seq);
            out.push((
                format!("global_batch_tokens={tokens} for ga={ga}"),
                replaced("ga", ("global_batch_tokens".into(), tokens.to_string())),
            ));
        }
    }
    // A serving benchmark's concurrency is the planner's batch.
    if let (Some(batch), Some("infer")) = (get("batch"), get("mode").as_deref()) {
        out.push((
            format!("concurrency={batch} for batch={batch}"),
            replaced("batch", ("concurrency".into(), batch.clone())),
        ));
    }
    out
}

fn text(w: &Workload) -> String {
    w.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

#[test]
fn equivalent_spellings_are_estimated_alike() {
    let mut compared = 0;
    for (metric, unit, base) in grid() {
        let want = outcome(metric, unit, &text(&base));
        assert!(
            want.ignored_keys.is_empty(),
            "{}: {:?}",
            text(&base),
            want.ignored_keys
        );
        let want_value = want
            .estimate
            .unwrap_or_else(|| panic!("{metric} {}: {:?}", text(&base), want.reason));
        for (what, other) in spellings(&base) {
            let got = outcome(metric, unit, &text(&other));
            assert!(
                got.ignored_keys.is_empty(),
                "{what}: {:?}",
                got.ignored_keys
            );
            let v = got.estimate.unwrap_or_else(|| {
                panic!(
                    "{metric}, {what} ({}): no estimate: {:?}",
                    text(&other),
                    got.reason
                )
            });
            assert!(
                (v - want_value).abs() <= 1e-9 * want_value.abs(),
                "{metric}: {what} reads {v}, the canonical spelling {want_value} ({})",
                text(&base)
            );
            assert_eq!(got.gpu, want.gpu, "{what}");
            compared += 1;
        }
    }
    assert_eq!(compared, COMPARED, "spellings compared");
}
