//! # The planner: memory, throughput and cost of a model on every GPU
//!
//! ```text
//! Model + Workload ──► Setup (defaults filled, each one named) ──► memory::estimate
//!                                  │                                   │
//!                    Hardware (catalog GPU + overrides) ──► perf::train / perf::infer
//!                                                                      │
//!                                   catalog prices ──► rank::plan (options, Pareto, picks)
//! ```
//!
//! A physical model, no fitted curves: memory is a sum of named terms (weights, gradients,
//! optimizer states, activations after Korthikanti et al. 2022, KV cache, runtime), training
//! throughput is achieved FLOP/s over FLOPs per token, decode is bytes moved per step over
//! achieved bandwidth, prefill is compute-bound. The few constants are in [`perf::Constants`]
//! with their meaning and evidence; `plan validate` checks the whole against measurements.

pub mod eager;
pub mod kernels;
pub mod memory;
pub mod model;
pub mod perf;
pub mod rank;
pub mod validate;
pub mod view;
pub mod workload;

use serde::Serialize;

use gpuwise_catalog::GpuSpec;
pub use model::Model;
pub use workload::{Checkpointing, Mode, Optimizer, Precision, Workload};

/// The GPU as the planner sees it: catalog figures with any overrides applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hardware {
    /// Catalog name.
    pub name: String,
    /// Architecture (selects the default utilization).
    pub architecture: String,
    /// Memory, bytes.
    pub memory_bytes: f64,
    /// Peak memory bandwidth, bytes/s.
    pub bandwidth: Option<f64>,
    /// Dense peak TFLOPS by precision.
    pub tflops: gpuwise_catalog::DenseTflops,
    /// Board power.
    pub tdp_w: Option<f64>,
    /// Power cap in effect, if below the board power.
    pub power_cap_w: Option<f64>,
    /// GPU-to-GPU bandwidth, one direction, bytes/s.
    pub link_bytes_s: Option<f64>,
}

impl Hardware {
    /// From a catalog entry. Datasheet memory is in GB (10⁹ bytes); interconnect figures are
    /// both directions together, so one direction is half.
    #[must_use]
    pub fn from_spec(g: &GpuSpec) -> Self {
        Self {
            name: g.name.clone(),
            architecture: g.architecture.clone(),
            memory_bytes: g.memory_gb * 1e9,
            bandwidth: g.memory_bandwidth_gb_s.map(|b| b * 1e9),
            tflops: g.dense_tflops.clone(),
            tdp_w: g.tdp_w,
            power_cap_w: None,
            link_bytes_s: g.interconnect_gb_s.map(|b| b * 1e9 / 2.0),
        }
    }

    /// Apply a workload's `gpu_mem_gb`, `gpu_bw_gb_s`, `gpu_power_w` and `gpu_tflops_*`.
    #[must_use]
    pub fn with_overrides(mut self, w: &Workload) -> Self {
        if let Some(m) = w.gpu_mem_gb {
            self.memory_bytes = m * 1e9;
        }
        if let Some(b) = w.gpu_bw_gb_s {
            self.bandwidth = Some(b * 1e9);
        }
        if let Some(p) = w.gpu_power_w {
            self.power_cap_w = Some(p);
        }
        let (t, o) = (&mut self.tflops, &w.gpu_tflops);
        for (slot, given) in [
            (&mut t.fp32, o.fp32),
            (&mut t.tf32, o.tf32),
            (&mut t.fp16, o.fp16),
            (&mut t.bf16, o.bf16),
            (&mut t.fp8, o.fp8),
            (&mut t.int8, o.int8),
        ] {
            if given.is_some() {
                *slot = given;
            }
        }
        self
    }

    /// A card the catalog lacks, from a workload's own figures: its memory (`gpu_mem_gb`),
    /// bandwidth (`gpu_bw_gb_s`) and at least one dense TFLOPS figure (`gpu_tflops_bf16`, …);
    /// `None` when any of those is missing. Its architecture is `gpu_architecture`, else
    /// `custom` (the default utilization of an architecture the planner has no evidence for).
    #[must_use]
    pub fn from_figures(name: &str, w: &Workload) -> Option<Self> {
        let t = &w.gpu_tflops;
        let any_compute = [t.fp32, t.tf32, t.fp16, t.bf16, t.fp8, t.int8]
            .iter()
            .any(Option::is_some);
        let (memory, bandwidth) = (w.gpu_mem_gb?, w.gpu_bw_gb_s?);
        any_compute.then(|| Self {
            name: name.to_owned(),
            architecture: w
                .gpu_architecture
                .clone()
                .unwrap_or_else(|| "custom".to_owned()),
            memory_bytes: memory * 1e9,
            bandwidth: Some(bandwidth * 1e9),
            tflops: t.clone(),
            tdp_w: None,
            power_cap_w: None,
            link_bytes_s: None,
        })
    }

    /// Share of the board's compute a power cap leaves: cap ÷ TDP (at most 1). An assumption:
    /// clocks fall roughly in proportion to power under a cap; bandwidth is not scaled.
    #[must_use]
    pub fn power_factor(&self) -> f64 {
        match (self.power_cap_w, self.tdp_w) {
            (Some(cap), Some(tdp)) if tdp > 0.0 => (cap / tdp).min(1.0),
            _ => 1.0,
        }
    }
}

/// A workload with every default filled in and every default named.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Setup {
    /// The workload as given.
    pub workload: Workload,
    /// Precision in effect.
    pub precision: Precision,
    /// KV cache precision in effect.
    pub kv_precision: Precision,
    /// Micro-batch (training) or concurrent sequences (inference).
    pub batch: u32,
    /// Training sequence length.
    pub seq: u32,
    /// Prompt tokens.
    pub prompt: u32,
    /// Output tokens.
    pub output: u32,
    /// KV cache entries per sequence.
    pub kv_len: u32,
    /// Tensor parallel.
    pub tp: u32,
    /// Pipeline parallel.
    pub pp: u32,
    /// Context parallel: each sequence split over this many GPUs.
    pub cp: u32,
    /// Data parallel.
    pub dp: u32,
    /// GPUs in all.
    pub gpus: u32,
    /// Micro-batches per pipeline per step.
    pub microbatches: u32,
    /// Defaults taken, in words.
    pub assumptions: Vec<String>,
}

/// Prompt tokens when none are given.
pub const DEFAULT_PROMPT: u32 = 512;
/// Output tokens when none are given.
pub const DEFAULT_OUTPUT: u32 = 256;
/// Training sequence when none is given (or the model's context, if shorter).
pub const DEFAULT_SEQ: u32 = 2048;

impl Setup {
    /// Fill `w`'s gaps for `model`.
    #[must_use]
    pub fn new(model: &Model, w: &Workload) -> Self {
        let (released, mut assumptions) = w.with_releases(model.family == "bert");
        let w = &released;
        if let Some(m) = &w.mode_given {
            assumptions.push(format!(
                "--mode {m} is full fine-tuning (every weight trained; --mode lora or qlora trains adapters)"
            ));
        }
        let precision = w.precision();
        if w.precision.is_none() {
            assumptions.push(format!(
                "precision {} (default for {})",
                precision.name(),
                w.mode.name()
            ));
        }
        let half = if matches!(precision, Precision::Fp16 | Precision::AmpFp16) {
            Precision::Fp16
        } else {
            Precision::Bf16
        };
        let kv_precision = w.kv_precision.unwrap_or(match precision {
            Precision::Fp32 | Precision::Tf32 => Precision::Fp32,
            _ => half,
        });
        let batch = w.batch.unwrap_or(1);
        if w.batch.is_none() {
            assumptions.push("batch 1".to_owned());
        }
        let seq = w.seq.unwrap_or_else(|| {
            let s = model
                .max_context
                .map_or(DEFAULT_SEQ, |c| c.min(DEFAULT_SEQ));
            if w.mode.trains() {
                assumptions.push(format!("sequence {s} tokens"));
            }
            s
        });
        let prompt = w.prompt.unwrap_or_else(|| {
            let p = w.context.map_or(DEFAULT_PROMPT, |c| c.min(DEFAULT_PROMPT));
            if !w.mode.trains() {
                assumptions.push(format!("prompt {p} tokens"));
            }
            p
        });
        let output = w.output.unwrap_or_else(|| {
            if !w.mode.trains() {
                assumptions.push(format!("output {DEFAULT_OUTPUT} tokens"));
            }
            DEFAULT_OUTPUT
        });
        let kv_len = match w.context {
            Some(c) if c > 0 => c,
            Some(_) => output,
            None => prompt + output,
        };
        let tp = w.tp.max(1);
        let pp = w.pp.max(1);
        let cp = w.cp.max(1);
        let dp =
            w.dp.or_else(|| w.gpus.map(|g| (g / (tp * pp * cp)).max(1)))
                .unwrap_or(1);
        let gpus = w.gpus.unwrap_or(dp * tp * pp * cp);
        let global = w.global_sequences(seq);
        let microbatches =
            w.ga.filter(|g| *g > 1)
                .or_else(|| global.map(|g| (g / (dp * batch).max(1)).max(1)))
                .unwrap_or_else(|| {
                    if pp > 1 {
                        assumptions.push(format!(
                            "{} micro-batches per pipeline step (4 × pp; none given)",
                            4 * pp
                        ));
                        4 * pp
                    } else {
                        1
                    }
                });
        if w.vp > 1 && pp > 1 {
            assumptions.push(format!(
                "interleaved pipeline, {} virtual stages per GPU: the bubble ÷ {}; the activations the first stage holds beyond 1F1B's are not counted",
                w.vp, w.vp
            ));
        }
        Self {
            workload: w.clone(),
            precision,
            kv_precision,
            batch,
            seq,
            prompt,
            output,
            kv_len,
            tp,
            pp,
            cp,
            dp,
            gpus,
            microbatches,
            assumptions,
        }
    }

    /// GPUs the model states are sharded over under ZeRO / FSDP: the data-parallel ranks and,
    /// with context parallelism, its ranks too (torchtitan's FSDP mesh flattens data and
    /// context parallel; Megatron's distributed optimizer shards over both).
    #[must_use]
    pub fn shard_ways(&self) -> u32 {
        self.dp * self.cp
    }

    /// Tokens of one micro-batch on one GPU: context parallelism splits each sequence.
    #[must_use]
    pub fn local_tokens(&self) -> f64 {
        f64::from(self.batch) * f64::from(self.seq) / f64::from(self.cp)
    }

    /// Model-parallel ways one copy of the weights is split.
    #[must_use]
    pub fn model_parallel(&self) -> f64 {
        f64::from(self.tp * self.pp)
    }
}

/// GiB in bytes.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A setup from `key=value` pairs that must all be planner keys (unit tests of the terms).
#[cfg(test)]
pub(crate) fn test_setup(m: &Model, kv: &[(&str, &str)]) -> Setup {
    let mut w = Workload::default();
    for (k, v) in kv {
        assert_eq!(w.set(k, v), Ok(true), "{k}");
    }
    Setup::new(m, &w)
}

#[cfg(test)]
mod tests {
    use super::{Model, test_setup};

    /// BERT's later SDPA is a rule of its architecture: a BERT read from its `config.json`
    /// under another name gets it, a decoder whose name starts with "bert" does not.
    #[test]
    fn the_bert_release_rule_follows_the_family_not_the_name() {
        let config = |name: &str, model_type: &str| {
            let text = format!(
                r#"{{"_name_or_path": "{name}", "model_type": "{model_type}", "hidden_size": 1024,
                   "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
                   "vocab_size": 30522, "max_position_embeddings": 512}}"#
            );
            Model::from_hf_config(&text, "config.json").expect("config")
        };
        let release = [("framework", "hf"), ("transformers", "4.38.2")];
        let encoder = config("acme/support-ticket-encoder", "bert");
        assert_eq!(encoder.family, "bert");
        let s = test_setup(&encoder, &release);
        assert!(!s.workload.flash_attention, "{:?}", s.assumptions);
        assert!(s.assumptions.iter().any(|a| a.contains("BERT's eager")));
        let decoder = config("bertha-7b", "llama");
        let s = test_setup(&decoder, &release);
        assert!(s.workload.flash_attention, "{:?}", s.assumptions);
        // The presets carry their family too.
        assert_eq!(Model::preset("bert-large").expect("preset").family, "bert");
        assert_eq!(Model::preset("llama-3-8b").expect("preset").family, "llama");
    }
}
