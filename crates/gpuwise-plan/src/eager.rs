//! A training step in eager PyTorch (Hugging Face's Trainer, PEFT, TRL): its matrix
//! multiplies, the memory-bound kernels between them, the optimizer, and the host that
//! launches them all (issue 41).
//!
//! The default utilization ([`super::perf::default_hfu`]) was measured on large models whose
//! matrix multiplies dwarf everything else. An eager step of a small model is not like that:
//! profiled on an H200 (`bench/gpu/encoder-anatomy.py`, results in
//! `bench/gpu/encoder-anatomy-h200.jsonl`), BERT-large under bf16 autocast spends 14 ms of a
//! 100 ms step in matrix multiplies, 35 ms in elementwise, normalisation, softmax, dropout
//! and cast kernels, 7 ms in AdamW, and the rest waiting on Python to launch its 2,912
//! kernels. In fp32 the same step is 165 ms of matrix multiplies out of 202. So the step is
//! timed here as the sum of its GPU parts, or the host's launches if those take longer:
//!
//! - matrix multiplies: training FLOPs at [`MATMUL_EFFICIENCY`] of the dense peak;
//! - memory-bound kernels: `β_h · hidden + β_s · heads · seq` bytes per token and layer at
//!   the peak bandwidth ([`ActivationBytes`]; `β_s` only where attention is eager, the score
//!   matrices' softmax, mask and dropout), a third more where full checkpointing reruns the
//!   forward pass;
//! - the optimizer: [`OPTIMIZER_BYTES_PER_PARAM`] per trained parameter, once per optimizer
//!   step;
//! - the host: [`KERNELS_PER_LAYER`] a layer (forward and backward) plus [`KERNELS_FIXED`] a
//!   step, [`HOST_S_PER_KERNEL`] each.
//!
//! Every constant comes out of `bench/gpu/eager-fit.py` run on that file: two models
//! (BERT-large at 8 × 512 and BERT-base at 32 × 128) and two precisions, so two unknowns per
//! precision are solved exactly, not fitted to any case `plan validate` scores. The
//! efficiencies of the kernels on the H200 are folded into the bytes and assumed to carry to
//! other cards; the host's time per launch is that of the machine measured (a sandboxed
//! server's CPU) and varies with the CPU and the Python and PyTorch builds.

use super::workload::{Checkpointing, Mode, Precision};
use super::{Hardware, Model, Setup};

/// Share of the dense peak the matrix multiplies reach: fp32 on CUDA cores, and 16-bit on
/// tensor cores (the mean of BERT-large's and BERT-base's, 0.73 and 0.66 in fp32, 0.57 and
/// 0.53 in bf16).
pub const MATMUL_EFFICIENCY: [(Precision, f64); 2] =
    [(Precision::Fp32, 0.694), (Precision::AmpBf16, 0.552)];

/// Bytes per token and layer of the kernels that are not matrix multiplies, as time at the
/// card's peak bandwidth: `hidden` bytes per hidden unit, `scores` per attention score (heads
/// × sequence) when attention is eager.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActivationBytes {
    /// Per hidden unit.
    pub hidden: f64,
    /// Per score element.
    pub scores: f64,
}

/// [`ActivationBytes`] in fp32 and under 16-bit autocast (which adds casts both ways).
pub const ACTIVATION_BYTES: [(Precision, ActivationBytes); 2] = [
    (
        Precision::Fp32,
        ActivationBytes {
            hidden: 732.6,
            scores: 68.2,
        },
    ),
    (
        Precision::AmpBf16,
        ActivationBytes {
            hidden: 870.2,
            scores: 101.9,
        },
    ),
];

/// `torch.optim.AdamW` (its default multi-tensor path) per trained parameter: 103–106 bytes
/// measured, about eleven passes over fp32 tensors.
pub const OPTIMIZER_BYTES_PER_PARAM: f64 = 104.0;

/// Kernels one layer launches, forward and backward, in fp32 and under autocast.
pub const KERNELS_PER_LAYER: [(Precision, f64); 2] =
    [(Precision::Fp32, 80.9), (Precision::AmpBf16, 114.4)];

/// Kernels a step launches beyond the layers (embeddings, loss, optimizer).
pub const KERNELS_FIXED: [(Precision, f64); 2] =
    [(Precision::Fp32, 94.0), (Precision::AmpBf16, 166.0)];

/// The host's time per kernel where it bounds the step: 34.4 and 33.6 µs in the two
/// autocast steps, whose GPU work is 57 % and 29 % of their wall time.
pub const HOST_S_PER_KERNEL: f64 = 34.0e-6;

/// Whether the step is timed by this model: an eager framework without `torch.compile`.
#[must_use]
pub fn applies(s: &Setup) -> bool {
    s.workload.framework_is(super::workload::HF_FRAMEWORKS) && s.workload.compile != Some(true)
}

fn of<T: Copy>(table: &[(Precision, T); 2], p: Precision) -> T {
    // fp32 (and tf32, which eager PyTorch leaves off by default) on one side; everything that
    // runs matrix multiplies in 16 bits on the other.
    if matches!(p, Precision::Fp32 | Precision::Tf32) {
        table[0].1
    } else {
        table[1].1
    }
}

/// One micro-batch's time on one GPU, by part.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Matrix multiplies, seconds.
    pub matmul_s: f64,
    /// Memory-bound kernels between them, seconds.
    pub memory_s: f64,
    /// The optimizer's share (its step ÷ micro-batches per step), seconds.
    pub optimizer_s: f64,
    /// The host's launches, seconds.
    pub host_s: f64,
    /// Tokens the micro-batch holds on this GPU.
    pub tokens: f64,
}

impl Step {
    /// The micro-batch's time: the GPU's parts in sequence, or the host's launches if longer.
    #[must_use]
    pub fn seconds(&self) -> f64 {
        (self.matmul_s + self.memory_s + self.optimizer_s).max(self.host_s)
    }

    /// Whether the host's launches bound it.
    #[must_use]
    pub fn host_bound(&self) -> bool {
        self.host_s > self.matmul_s + self.memory_s + self.optimizer_s
    }
}

/// Time one micro-batch. `hw_flops_per_token`: the training FLOPs per token (recomputation
/// included); `nominal`: the dense peak of the arithmetic precision, FLOP/s; `bandwidth`:
/// bytes/s.
#[must_use]
pub fn step(
    m: &Model,
    s: &Setup,
    hw: &Hardware,
    hw_flops_per_token: f64,
    nominal: f64,
    bandwidth: f64,
) -> Step {
    let w = &s.workload;
    // Weight-only formats multiply in 16 bits: `of` reads them with the 16-bit constants.
    let p = s.precision;
    let tokens = s.local_tokens();
    let mp = s.model_parallel();
    let layers = f64::from(m.layers) / f64::from(s.pp);
    let rerun = if w.checkpointing == Checkpointing::Full {
        4.0 / 3.0
    } else {
        1.0
    };
    let matmul_s = hw_flops_per_token * tokens
        / mp
        / (nominal * of(&MATMUL_EFFICIENCY, p) * hw.power_factor());
    let b = of(&ACTIVATION_BYTES, p);
    let scores = if w.flash_attention {
        0.0
    } else {
        f64::from(m.heads) * f64::from(s.seq) / f64::from(s.cp)
    };
    let per_token_layer = (b.hidden * f64::from(m.hidden) + b.scores * scores) / f64::from(s.tp);
    let memory_s = per_token_layer * tokens * layers * rerun / bandwidth;
    let trained = if w.mode == Mode::Train {
        m.params
    } else {
        super::memory::lora_params_on(m, w.lora_rank, w.lora_targets)
    };
    let sharded = if w.zero >= 1 {
        f64::from(s.shard_ways())
    } else {
        1.0
    };
    let optimizer_s = OPTIMIZER_BYTES_PER_PARAM * trained
        / mp
        / sharded
        / bandwidth
        / f64::from(s.microbatches.max(1));
    let kernels = of(&KERNELS_PER_LAYER, p) * layers * rerun + of(&KERNELS_FIXED, p);
    Step {
        matmul_s,
        memory_s,
        optimizer_s,
        host_s: kernels * HOST_S_PER_KERNEL,
        tokens,
    }
}

/// The note a plan carries for an eager step.
#[must_use]
pub fn note(st: &Step) -> String {
    let ms = |x: f64| x * 1e3;
    format!(
        "eager PyTorch step, as profiled on an H200 (bench/gpu/encoder-anatomy.py): matrix multiplies {:.1} ms + memory-bound kernels {:.1} ms + optimizer {:.1} ms; host launches {:.1} ms at {:.0} µs a kernel{}",
        ms(st.matmul_s),
        ms(st.memory_s),
        ms(st.optimizer_s),
        ms(st.host_s),
        HOST_S_PER_KERNEL * 1e6,
        if st.host_bound() {
            " bound the step"
        } else {
            ""
        }
    )
}
