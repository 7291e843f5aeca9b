//! # Kernels: how long a GPU takes for each operator of a decoder layer
//!
//! A serving step runs its kernels one after another: for every layer the QKV projection,
//! rotary embedding, attention, the output projection, two norms, the MLP's up projection,
//! activation and down projection, and two residual adds; then the output projection of every
//! sequence that samples a token. Each kernel's time is modelled from what it does, with
//! constants shaped on measured kernel times:
//!
//! - a **matrix multiply** of `m` tokens by a `k × n` weight: a fixed time plus a blend of its
//!   compute time (`2mkn` FLOPs at a share of the datasheet's dense tensor peak) and its memory
//!   time (weights, input and output at a share of the datasheet's bandwidth),
//!   `fixed + (compute^q + memory^q)^(1/q)` (`q` large is the roofline's max, 1 their sum);
//! - a **pass over activations** (norm, residual add, activation, rotary): a fixed time plus
//!   its bytes at a share of the bandwidth;
//! - **prompt attention** (flash attention): a fixed time plus its FLOPs at a share of the
//!   16-bit peak; **decode attention**: a fixed time plus the KV cache it reads at a share of
//!   the bandwidth.
//!
//! The constants are fitted by `bench/step-model-fit.py`: matrix multiplies and passes on the
//! shaping half of Vidur's measured operator times (Agrawal et al., MLSys'24,
//! `microsoft/vidur` @ 7d47513, `data/profiling/compute/{h100,a40}`; Llama-2-7B and Qwen-72B,
//! the split in docs/accuracy.md fixed before fitting), attention on our own H200 measurements
//! (`tests/data/serve/h200-2026-11-27`, PyTorch 2.11 flash attention, 2026-11-27). H100's
//! shares stand for Hopper and Blackwell, A40's for every other GPU (an assumption: no
//! profile of them was measured; across the two profiled GPUs a layer's time moves 8–15 %
//! when one's shares are used for the other, docs/accuracy.md).

use serde::Serialize;

/// A pass over activations: bytes at a share of the bandwidth, plus a fixed time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Pass {
    /// Share of the datasheet bandwidth reached.
    pub bandwidth: f64,
    /// Fixed time per kernel, seconds.
    pub fixed_s: f64,
}

impl Pass {
    /// Seconds to move `bytes`.
    #[must_use]
    pub fn seconds(&self, bytes: f64, bandwidth_bytes_s: f64) -> f64 {
        self.fixed_s + bytes / (self.bandwidth * bandwidth_bytes_s)
    }
}

/// How fast one family of GPUs runs a decoder layer's kernels, as shares of its datasheet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KernelRates {
    /// Which measurements these come from.
    pub source: &'static str,
    /// Share of the dense tensor peak a matrix multiply's compute reaches.
    pub gemm_compute: f64,
    /// Share of the bandwidth a matrix multiply's memory traffic reaches.
    pub gemm_memory: f64,
    /// Fixed time per matrix multiply, seconds.
    pub gemm_fixed_s: f64,
    /// How compute and memory time combine: `(c^q + m^q)^(1/q)`.
    pub gemm_blend: f64,
    /// RMS/layer norm.
    pub norm: Pass,
    /// Residual add.
    pub add: Pass,
    /// MLP activation (SiLU × gate, or GELU).
    pub act: Pass,
    /// Rotary embedding of queries and keys.
    pub rope: Pass,
    /// Share of the 16-bit tensor peak prompt (flash) attention reaches.
    pub prefill_attention_compute: f64,
    /// Fixed time per prompt-attention kernel, seconds.
    pub prefill_attention_fixed_s: f64,
    /// Decode attention reading the KV cache.
    pub decode_attention: Pass,
}

const ATTENTION_SOURCE: &str = "attention: our H200 measurements (PyTorch 2.11 flash attention, 2026-11-27, tests/data/serve/h200-2026-11-27)";

/// Hopper and Blackwell: fitted on Vidur's H100 profiles (shaping set).
pub const HOPPER: KernelRates = KernelRates {
    source: "Vidur's measured H100 operator times (microsoft/vidur @ 7d47513; Llama-2-7B and Qwen-72B), fitted by bench/step-model-fit.py",
    gemm_compute: 0.671_454,
    gemm_memory: 1.0,
    gemm_fixed_s: 8.795_19e-6,
    gemm_blend: 59.2005,
    norm: Pass {
        bandwidth: 0.481_339,
        fixed_s: 3.7393e-6,
    },
    add: Pass {
        bandwidth: 0.719_016,
        fixed_s: 0.656_818e-6,
    },
    act: Pass {
        bandwidth: 0.468_163,
        fixed_s: 1.606_49e-6,
    },
    rope: Pass {
        bandwidth: 0.455_674,
        fixed_s: 1.667_67e-6,
    },
    prefill_attention_compute: 0.335_237,
    prefill_attention_fixed_s: 23.3e-6,
    decode_attention: Pass {
        bandwidth: 0.488_649,
        fixed_s: 3.4e-6,
    },
};

/// Every other GPU: fitted on Vidur's A40 profiles (shaping set).
pub const AMPERE: KernelRates = KernelRates {
    source: "Vidur's measured A40 operator times (microsoft/vidur @ 7d47513; Llama-2-7B and Qwen-72B), fitted by bench/step-model-fit.py",
    gemm_compute: 0.904_915,
    gemm_memory: 0.909_745,
    gemm_fixed_s: 0.0,
    gemm_blend: 1.0,
    norm: Pass {
        bandwidth: 0.593_143,
        fixed_s: 2.730_51e-6,
    },
    add: Pass {
        bandwidth: 0.832_313,
        fixed_s: 0.559_421e-6,
    },
    act: Pass {
        bandwidth: 0.978_028,
        fixed_s: 2.724_05e-6,
    },
    rope: Pass {
        bandwidth: 0.921_848,
        fixed_s: 1.715_55e-6,
    },
    prefill_attention_compute: 0.335_237,
    prefill_attention_fixed_s: 23.3e-6,
    decode_attention: Pass {
        bandwidth: 0.488_649,
        fixed_s: 3.4e-6,
    },
};

impl KernelRates {
    /// The shares for a GPU architecture: Hopper's for Hopper and Blackwell, else Ampere's.
    #[must_use]
    pub fn for_architecture(architecture: &str) -> &'static Self {
        match architecture {
            "Hopper" | "Blackwell" => &HOPPER,
            _ => &AMPERE,
        }
    }

    /// Where the attention shares come from (the same for every family).
    #[must_use]
    pub fn attention_source() -> &'static str {
        ATTENTION_SOURCE
    }

    /// Seconds of a matrix multiply: `flops` at `peak_flops_s`, `bytes` at `bandwidth_bytes_s`.
    #[must_use]
    pub fn gemm_s(&self, flops: f64, bytes: f64, peak_flops_s: f64, bandwidth_bytes_s: f64) -> f64 {
        let compute = flops / (self.gemm_compute * peak_flops_s);
        let memory = bytes / (self.gemm_memory * bandwidth_bytes_s);
        let q = self.gemm_blend;
        let blended = if q >= 32.0 {
            // (c^q + m^q)^(1/q) for large q is the max within 2^(1/q); computed from the
            // ratio so that a long kernel's time cannot overflow.
            let (hi, lo) = if compute >= memory {
                (compute, memory)
            } else {
                (memory, compute)
            };
            let ratio = if hi > 0.0 { lo / hi } else { 0.0 };
            if ratio < 0.7 {
                // 0.7^32 < 1e-4: the smaller part changes nothing that matters, and the two
                // powers are most of a serving step's arithmetic.
                hi
            } else {
                hi * (1.0 + ratio.powf(q)).powf(1.0 / q)
            }
        } else if q == 1.0 {
            compute + memory
        } else {
            (compute.powf(q) + memory.powf(q)).powf(1.0 / q)
        };
        self.gemm_fixed_s + blended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_multiply_is_bound_by_memory_small_and_compute_large() {
        let (peak, bw) = (989.4e12, 3350e9);
        // Llama-2-7B's QKV projection on one H100: 4096 × 12288 in 16 bits.
        let (k, n) = (4096.0, 12288.0);
        let t = |m: f64| HOPPER.gemm_s(2.0 * m * k * n, 2.0 * (k * n + m * k + m * n), peak, bw);
        // One token reads the 100 MB weight: memory time plus the fixed time.
        let weights = 2.0 * k * n / bw;
        assert!((t(1.0) - HOPPER.gemm_fixed_s - weights).abs() / weights < 0.01);
        // 4,096 tokens: 412 GFLOP at 67 % of peak.
        let compute = 2.0 * 4096.0 * k * n / (HOPPER.gemm_compute * peak);
        assert!((t(4096.0) - HOPPER.gemm_fixed_s - compute).abs() / compute < 0.01);
        // Vidur measured 0.038 ms and 0.584 ms for these (the shaping set).
        assert!(
            (t(1.0) * 1e3 / 0.038 - 1.0).abs() < 0.15,
            "{}",
            t(1.0) * 1e3
        );
        assert!(
            (t(4096.0) * 1e3 / 0.584 - 1.0).abs() < 0.15,
            "{}",
            t(4096.0) * 1e3
        );
        // The sum form (Ampere's) is never below either part.
        let s = AMPERE.gemm_s(1e12, 1e9, 149.7e12, 696e9);
        assert!(s >= 1e12 / (AMPERE.gemm_compute * 149.7e12));
        assert!(s >= 1e9 / (AMPERE.gemm_memory * 696e9));
    }

    #[test]
    fn families_by_architecture() {
        assert_eq!(KernelRates::for_architecture("Hopper"), &HOPPER);
        assert_eq!(KernelRates::for_architecture("Blackwell"), &HOPPER);
        assert_eq!(KernelRates::for_architecture("Ampere"), &AMPERE);
        assert_eq!(KernelRates::for_architecture("Ada Lovelace"), &AMPERE);
    }
}
