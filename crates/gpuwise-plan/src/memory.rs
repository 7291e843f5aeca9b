//! Memory per GPU as a sum of named terms, each with its formula in words.
//!
//! Training (per parameter, before sharding): weights, gradients and optimizer states by
//! precision — mixed precision is the ZeRO paper's 2 + 2 + 12 = 16 bytes with Adam (16-bit
//! weights and gradients, fp32 master weights and two fp32 moments), or under PyTorch autocast
//! without sharding fp32 weights and gradients plus a 16-bit cast cache (4 + 4 + 2 + 8 = 18).
//! ZeRO stage 1 shards optimizer states and master weights over data parallel ranks, stage 2
//! also gradients, stage 3 (FSDP) also weights; tensor and pipeline parallel split everything.
//!
//! Activations per layer and token, in bytes per hidden unit at 16 bits (Korthikanti et al. 2022,
//! generalised to grouped-query attention, gated feed-forwards and models without dropout):
//! attention `2 + 2q + 4k + 2q (+1 dropout)`, feed-forward `2 + 4f (+1)` plain or `2 + 8f`
//! gated, norms `4`, plus `5·a·s/h` (plain) or `2·a·s/h` (gated) for the score matrices unless
//! flash attention is on (q, k, f: query, key/value and feed-forward widths over hidden; a
//! heads, s sequence). Full checkpointing keeps each layer's input and recomputes one layer at
//! a time; selective keeps all but the score matrices under Megatron and, elsewhere (PyTorch
//! op-level selective checkpointing, torchtitan's policy), the layer input, the attention
//! output and every other matrix-multiply output. Tensor parallel divides activations
//! (sequence parallel assumed; outside Megatron the layer in use keeps its two gathered inputs
//! whole); pipeline parallel does not (the first stage holds pp
//! micro-batches of L/pp layers). The loss keeps the logits in the activation precision plus
//! three fp32 copies (upcast, log-softmax, its gradient); torchtune's chunked loss keeps one
//! eighth of the fp32 copies.
//!
//! Inference: weights (quantized formats cover the blocks' linear layers; embeddings stay
//! 16-bit except in GGUF files), KV cache `2 · L · kv_heads · head_dim · bytes` per token,
//! the prefill working set of one layer (chunks of at most 8,192 tokens) and, for weight-only
//! formats, one block matrix widened to 16-bit.
//!
//! Runtime: the CUDA context and allocator headroom ([`CUDA_CONTEXT_BYTES`],
//! [`ALLOCATOR_HEADROOM`]) are added when fitting a plan and when a measurement includes them
//! (NVML "used" memory); a reading of PyTorch's reserved pool adds the headroom alone.

use serde::Serialize;

use super::workload::{Checkpointing, LoraTargets, Mode, Optimizer, Precision};
use super::{Model, Setup};
use crate::model::FfnKind;

/// CUDA context and kernel images of a PyTorch process: 1,343 MB measured by Hugging Face's
/// "Model training anatomy" guide (a 1×1 tensor on the GPU, nothing else). Varies with the
/// driver, GPU and PyTorch build (lazy module loading lowers it).
pub const CUDA_CONTEXT_BYTES: f64 = 1343.0 * 1024.0 * 1024.0;

/// Allocator headroom: PyTorch's caching allocator holds freed blocks and fragments; 5 % of
/// the allocated peak (an assumption; 3–10 % is typical of long runs).
pub const ALLOCATOR_HEADROOM: f64 = 0.05;

/// Largest prefill chunk (vLLM and TensorRT-LLM batch at most this many tokens per step by
/// default).
pub const PREFILL_CHUNK_TOKENS: f64 = 8192.0;

/// One term.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Term {
    /// `weights`, `gradients`, `optimizer`, `activations`, `kv_cache`, …
    pub name: &'static str,
    /// Bytes on one GPU.
    pub bytes: f64,
    /// How it was computed.
    pub formula: String,
}

/// Memory on one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Memory {
    /// The terms, largest contributions first in the usual order of a breakdown.
    pub terms: Vec<Term>,
    /// Their sum, bytes.
    pub total_bytes: f64,
}

impl Memory {
    fn push(&mut self, name: &'static str, bytes: f64, formula: String) {
        if bytes > 0.0 {
            self.total_bytes += bytes;
            self.terms.push(Term {
                name,
                bytes,
                formula,
            });
        }
    }

    /// A term that holds nothing on the GPU but says where its bytes are.
    fn note(&mut self, name: &'static str, formula: String) {
        self.terms.push(Term {
            name,
            bytes: 0.0,
            formula,
        });
    }

    /// The largest term (what overflows first).
    #[must_use]
    pub fn largest(&self) -> Option<&Term> {
        self.terms.iter().max_by(|a, b| a.bytes.total_cmp(&b.bytes))
    }

    /// Sum of the named terms.
    #[must_use]
    pub fn of(&self, names: &[&str]) -> f64 {
        self.terms
            .iter()
            .filter(|t| names.contains(&t.name))
            .map(|t| t.bytes)
            .sum()
    }
}

/// Bytes per parameter of each model state under a precision and optimizer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateBytes {
    /// Weights as stored for the arithmetic.
    pub weights: f64,
    /// Gradients.
    pub grads: f64,
    /// fp32 master weights (mixed precision with a master copy).
    pub master: f64,
    /// Optimizer moments.
    pub optimizer: f64,
    /// Autocast's 16-bit copies of fp32 weights (PyTorch AMP without a master copy).
    pub cast_cache: f64,
}

impl StateBytes {
    /// For full training. `hidden` sizes Adafactor's factored moment (rows + columns of an
    /// h × h matrix: 8/h bytes per parameter at fp32). `master_copy`: mixed precision keeps
    /// 16-bit weights and gradients and a separate fp32 master (DeepSpeed, Megatron, FSDP);
    /// otherwise (PyTorch autocast) weights and gradients are fp32 and casts are cached.
    #[must_use]
    pub fn new(p: Precision, opt: Optimizer, hidden: f64, master_copy: bool) -> Self {
        let moments = |state_bytes: f64| match opt {
            Optimizer::AdamW | Optimizer::Adam => 2.0 * state_bytes,
            Optimizer::Adam8bit | Optimizer::PagedAdam8bit => 2.0,
            Optimizer::Adafactor => 2.0 * state_bytes / hidden.max(1.0),
            Optimizer::Sgd => state_bytes,
        };
        match p {
            // FP8 training recipes keep bf16 training's states; only matmuls run in FP8.
            Precision::AmpFp16 | Precision::AmpBf16 | Precision::Fp8 if master_copy => Self {
                weights: 2.0,
                grads: 2.0,
                master: 4.0,
                optimizer: moments(4.0),
                cast_cache: 0.0,
            },
            Precision::AmpFp16 | Precision::AmpBf16 | Precision::Fp8 => Self {
                weights: 4.0,
                grads: 4.0,
                master: 0.0,
                optimizer: moments(4.0),
                cast_cache: 2.0,
            },
            Precision::Fp32 | Precision::Tf32 => Self {
                weights: 4.0,
                grads: 4.0,
                master: 0.0,
                optimizer: moments(4.0),
                cast_cache: 0.0,
            },
            _ => Self {
                weights: 2.0,
                grads: 2.0,
                master: 0.0,
                optimizer: moments(2.0),
                cast_cache: 0.0,
            },
        }
    }
}

/// Activation units (× hidden × 2 bytes per token) of one layer kept without checkpointing,
/// the part of it that is the score matrices, and the sum of matrix-multiply outputs.
fn layer_units(m: &Model, seq: f64, flash: bool) -> (f64, f64, f64) {
    let h = f64::from(m.hidden);
    let q = f64::from(m.heads * m.head_dim) / h;
    let k = f64::from(m.kv_heads * m.head_dim) / h;
    let f = f64::from(m.ffn) / h;
    let a = f64::from(m.heads);
    let (drop, mlp, scores, mm_mlp) = match m.ffn_kind {
        FfnKind::Plain => (1.0, 2.0 + 4.0 * f + 1.0, 5.0 * a * seq / h, 2.0 * f + 2.0),
        FfnKind::Gated => (0.0, 2.0 + 8.0 * f, 2.0 * a * seq / h, 4.0 * f + 2.0),
    };
    let attn = 2.0 + 2.0 * q + 4.0 * k + 2.0 * q + drop;
    let scores = if flash { 0.0 } else { scores };
    let mm = 2.0 * q + 4.0 * k + 2.0 + mm_mlp;
    (attn + mlp + 4.0 + scores, scores, mm)
}

/// [`layer_units`] for the training setup `s`, and the units of a layer's input. PyTorch
/// autocast over fp32 weights (mixed precision without a master copy) keeps the residual
/// stream in fp32 — the embedding is not on autocast's lists, and adding a 16-bit output to an
/// fp32 stream promotes — and runs softmax and the norms in fp32 (autocast's fp32 list): the
/// layer input and both norms' saved inputs take 4 bytes, and the attention probabilities
/// softmax saves take 4 bytes where there are score matrices.
fn training_layer_units(model: &Model, s: &Setup) -> (f64, f64, f64, f64) {
    // Context parallel splits each sequence: a GPU's score blocks are its local queries
    // against one peer's keys at a time (ring attention).
    let local_seq = f64::from(s.seq) / f64::from(s.cp);
    let (full, scores, mm) = layer_units(model, local_seq, s.workload.flash_attention);
    // Tensor parallel with sequence parallel gathers the sequence before the attention's and
    // the feed-forward's column-parallel projections. Megatron re-gathers it in the backward
    // pass (Korthikanti et al. 2022, 4.2.2); PyTorch's DTensor tensor parallel (torchtitan)
    // keeps what the projections saved, the gathered inputs, whole: 2 + 2 units × tp instead
    // of ÷ tp.
    let full = if s.tp > 1 && !s.workload.framework_is(&["megatron", "nemo"]) {
        full + 4.0 * f64::from(s.tp - 1)
    } else {
        full
    };
    let autocast = s.workload.mode == Mode::Train && state_bytes(model, s).cast_cache > 0.0;
    if !autocast {
        return (full, scores, mm, 2.0);
    }
    let fp32_probs = if s.workload.flash_attention {
        0.0
    } else {
        2.0 * f64::from(model.heads) * local_seq / f64::from(model.hidden)
    };
    (full + 4.0 + fp32_probs, scores + fp32_probs, mm, 4.0)
}

/// Memory per GPU for `model` under `s`, as named terms: the model states (weights, and in
/// training gradients, master weights, optimizer moments), then activations and loss
/// (training) or KV cache and prefill workspace (inference), then workspaces and, with
/// `runtime` (fitting a plan) or a measurement's reading that includes them, the CUDA context
/// and allocator headroom.
#[must_use]
pub fn estimate(model: &Model, s: &Setup, runtime: bool) -> Memory {
    let w = &s.workload;
    let mut mem = Memory {
        terms: Vec::new(),
        total_bytes: 0.0,
    };
    match w.mode {
        Mode::Train if w.cpu_offload => {
            // FSDP's CPUOffload / ZeRO-Offload: the model states live in host memory; the GPU
            // holds the layers gathered for use.
            let mut states = Memory {
                terms: Vec::new(),
                total_bytes: 0.0,
            };
            training_states(model, s, &mut states);
            for t in states.terms {
                if matches!(t.name, "gathered_layers" | "unsharded_gradient") {
                    mem.push(t.name, t.bytes, t.formula);
                } else {
                    mem.note(
                        t.name,
                        format!(
                            "on the host (CPU offload): {:.2} GiB = {}",
                            t.bytes / super::GIB,
                            t.formula
                        ),
                    );
                }
            }
        }
        Mode::Train => training_states(model, s, &mut mem),
        Mode::Lora | Mode::Qlora => {
            stored_weights(model, s, &mut mem, "frozen base: ");
            adapters(model, s, &mut mem);
        }
        Mode::Infer => stored_weights(model, s, &mut mem, ""),
    }
    if w.mode.trains() && w.scope.as_deref() == Some("model_states_only") {
        return mem;
    }
    if w.mode.trains() {
        activations_and_loss(model, s, &mut mem);
        gradients_made_in_backward(model, s, &mut mem);
        foreach_step(model, s, &mut mem);
    } else {
        kv_cache_and_prefill(model, s, &mut mem);
    }
    workspaces(model, s, runtime, &mut mem);
    mem
}

/// Weights as stored for inference and for a frozen LoRA base.
fn stored_weights(model: &Model, s: &Setup, mem: &mut Memory, label: &str) {
    let (w, p, n, mp) = (&s.workload, s.precision, model.params, s.model_parallel());
    let emb = model.embedding_params() * if model.tied_embeddings { 1.0 } else { 2.0 };
    let (bytes, formula) = if p.quantizes_embeddings() || w.gguf {
        (
            n * p.weight_bits() / 8.0,
            format!("{n:.4e} params × {} bits", p.weight_bits()),
        )
    } else {
        let blocks = model.block_linear_params();
        (
            blocks * p.weight_bits() / 8.0 + emb * 2.0,
            format!(
                "{blocks:.4e} block params × {} bits + {emb:.4e} embedding params × 16 bits",
                p.weight_bits()
            ),
        )
    };
    // FSDP (ZeRO-3) shards every parameter, frozen ones too (torchtune's and PEFT's LoRA and
    // QLoRA recipes across GPUs); the adapters stay whole (they are tiny).
    let shard = if w.mode.trains() && w.zero >= 3 {
        f64::from(s.shard_ways())
    } else {
        1.0
    };
    mem.push(
        "weights",
        bytes / mp / shard,
        format!(
            "{label}{formula} ÷ {mp} (tp × pp){}",
            if shard > 1.0 {
                format!(" ÷ {shard} (FSDP / ZeRO-3 shards)")
            } else {
                String::new()
            }
        ),
    );
    if w.mode.trains() {
        gathered_layers(model, s, bytes / n.max(1.0), mem);
    }
}

/// Bytes per parameter of full training's model states in `s`: mixed precision keeps a master
/// copy under ZeRO, tensor or pipeline parallel and the frameworks that always do.
#[must_use]
pub fn state_bytes(model: &Model, s: &Setup) -> StateBytes {
    let w = &s.workload;
    let master_copy = w.zero > 0
        || s.tp > 1
        || s.pp > 1
        || w.framework_is(&["megatron", "deepspeed", "nemo", "torchtitan", "llm-foundry"]);
    StateBytes::new(
        s.precision,
        w.optimizer,
        f64::from(model.hidden),
        master_copy,
    )
}

/// Full training: weights, gradients, master weights, optimizer moments and the autocast
/// copies, sharded by ZeRO stage over data parallel; with ZeRO-3 the gathered layers.
fn training_states(model: &Model, s: &Setup, mem: &mut Memory) {
    let (w, n, mp) = (&s.workload, model.params, s.model_parallel());
    let dp = f64::from(s.shard_ways());
    let h = f64::from(model.hidden);
    let b = state_bytes(model, s);
    let shard = |stage: u8| if w.zero >= stage { dp } else { 1.0 };
    let per = |x: f64, stage: u8| n * x / mp / shard(stage);
    mem.push(
        "weights",
        per(b.weights, 3),
        format!(
            "{n:.4e} params × {} B ÷ {mp} (tp × pp){}",
            b.weights,
            zero_note(w.zero, 3, dp)
        ),
    );
    if w.optimizer_in_backward {
        // Each parameter is updated as soon as its gradient is ready and the gradient freed:
        // one tensor's gradient at a time, the largest being the embedding's.
        let largest = f64::from(model.vocab) * h;
        mem.push(
            "gradients",
            largest * b.grads / mp,
            format!(
                "optimizer in the backward pass: one tensor's gradient at a time, the largest \
                 (embedding, {largest:.4e} params) × {} B ÷ tp·pp",
                b.grads
            ),
        );
    } else {
        mem.push(
            "gradients",
            per(b.grads, 2),
            format!("params × {} B ÷ tp·pp{}", b.grads, zero_note(w.zero, 2, dp)),
        );
    }
    mem.push(
        "master_weights",
        per(b.master, 1),
        format!(
            "params × 4 B (fp32 master) ÷ tp·pp{}",
            zero_note(w.zero, 1, dp)
        ),
    );
    if w.optimizer == Optimizer::PagedAdam8bit {
        mem.note(
            "optimizer",
            format!(
                "params × 2 B (8-bit moments) = {:.2} GiB in CUDA unified memory (bitsandbytes' \
                 paged optimizer): outside PyTorch's allocator, paged to host RAM when the GPU \
                 is full, so not counted here (a step that pages moves them over PCIe; not in \
                 the speed)",
                per(2.0, 1) / super::GIB
            ),
        );
    } else {
        mem.push(
            "optimizer",
            per(b.optimizer, 1),
            format!(
                "params × {:.3} B ({:?} moments) ÷ tp·pp{}",
                b.optimizer,
                w.optimizer,
                zero_note(w.zero, 1, dp)
            ),
        );
    }
    mem.push(
        "cast_cache",
        n * b.cast_cache / mp,
        "params × 2 B: autocast's 16-bit copies of fp32 weights".to_owned(),
    );
    gathered_layers(model, s, 2.0, mem);
    if w.zero >= 3 && s.shard_ways() > 1 && w.scope.as_deref() != Some("model_states_only") {
        unsharded_gradients(model, s, b.grads, mem);
    }
}

/// Gradients whole on the GPU under ZeRO-3 / FSDP before their reduce-scatter to the shards
/// (and, with CPU offload, their copy to the host): one layer's at a time, split by tensor
/// parallel only. Under pipeline parallelism PyTorch's pipeline stages (torchtitan) turn
/// FSDP's gradient sync off until the last micro-batch's backward, and FSDP2 accumulates the
/// unsharded gradients in its reduce dtype (fp32) meanwhile: the stage's layers' gradients
/// stay whole, at 4 bytes, across the micro-batches.
fn unsharded_gradients(model: &Model, s: &Setup, grad_bytes: f64, mem: &mut Memory) {
    let layer = layer_params(model);
    let tp = f64::from(s.tp);
    if s.pp > 1 && s.workload.framework_is(&["torchtitan"]) {
        let held = (f64::from(model.layers) / f64::from(s.pp)).ceil();
        mem.push(
            "unsharded_gradient",
            held * layer * 4.0 / tp,
            format!(
                "{held} layers × {layer:.4e} params × 4 B ÷ {tp} (tp): the stage's gradients, \
                 accumulated unsharded in fp32 across micro-batches (pipeline stages turn FSDP's \
                 gradient sync off until the last backward)"
            ),
        );
    } else {
        mem.push(
            "unsharded_gradient",
            layer * grad_bytes / tp,
            format!(
                "1 layer × {layer:.4e} params × {grad_bytes} B ÷ {tp} (tp): a layer's gradient \
                 before reduce-scatter"
            ),
        );
    }
}

/// Parameters of one transformer block (all but the embeddings, over the layers).
fn layer_params(model: &Model) -> f64 {
    let emb = model.embedding_params() * if model.tied_embeddings { 1.0 } else { 2.0 };
    (model.params - emb) / f64::from(model.layers.max(1))
}

/// ZeRO-3 / FSDP gathers each layer's weights before using it: the layer in use and the next
/// one, prefetched, unsharded at `bytes` per parameter (working buffers, not model states: the
/// ZeRO paper's model-state figures leave them out).
fn gathered_layers(model: &Model, s: &Setup, bytes: f64, mem: &mut Memory) {
    let w = &s.workload;
    if w.zero < 3 || s.shard_ways() <= 1 || w.scope.as_deref() == Some("model_states_only") {
        return;
    }
    let layer = layer_params(model);
    // Tensor parallel splits each layer; pipeline parallel splits the layers among stages, so
    // a gathered layer is whole but for tp. torchtitan does not reshard after the forward
    // pass under pipeline parallelism (to spare an all-gather per micro-batch): a stage keeps
    // all its layers gathered.
    let tp = f64::from(s.tp);
    let (held, why) = if s.pp > 1 && w.framework_is(&["torchtitan"]) {
        (
            (f64::from(model.layers) / f64::from(s.pp)).ceil(),
            "the stage's layers, kept gathered between micro-batches (torchtitan: no reshard \
             after forward under pipeline parallelism)",
        )
    } else {
        (2.0, "the unsharded layer in use and the next prefetched")
    };
    mem.push(
        "gathered_layers",
        held * layer * bytes / tp,
        format!("{held} layers × layer params × {bytes} B ÷ {tp} (tp): {why}"),
    );
}

/// LoRA / QLoRA adapters with their fp32 gradients and moments.
fn adapters(model: &Model, s: &Setup, mem: &mut Memory) {
    let (w, mp) = (&s.workload, s.model_parallel());
    let h = f64::from(model.hidden);
    let adapters = lora_params_on(model, w.lora_rank, w.lora_targets);
    // torchtune builds the whole model, adapters included, in the 16-bit training dtype (its
    // recipes instantiate under `set_default_dtype` and check the adapters' dtype; a QLoRA
    // base's compute dtype too); PEFT keeps them in fp32 beside a 16-bit base.
    let (dtype, dtype_name) = if w.framework_is(&["torchtune"]) && s.precision.weight_bits() < 32.0
    {
        (Precision::Bf16, "16-bit")
    } else {
        (Precision::Fp32, "fp32")
    };
    let b = StateBytes::new(dtype, w.optimizer, h, false);
    let per_param = b.weights + b.grads + b.optimizer;
    // FSDP shards the adapters with everything else.
    let shard = if w.zero >= 3 {
        f64::from(s.shard_ways())
    } else {
        1.0
    };
    mem.push(
        "adapters",
        adapters * per_param / mp / shard,
        format!(
            "{adapters:.4e} adapter params (rank {} on every block linear) × {per_param} B \
             ({dtype_name} weights, gradients, moments) ÷ {mp} (tp × pp){}",
            w.lora_rank,
            zero_note(w.zero, 3, shard)
        ),
    );
}

/// Bytes of one activation unit on one GPU (the unit of [`layer_units`]: 2 bytes per hidden
/// value per token at 16 bits): × hidden × the GPU's tokens, ÷ tp (sequence parallel).
fn activation_unit(model: &Model, s: &Setup) -> f64 {
    s.precision.activation_bytes() / 2.0 * f64::from(model.hidden) * s.local_tokens()
        / f64::from(s.tp)
}

/// Training activations (by checkpointing policy) and the loss's logits.
fn activations_and_loss(model: &Model, s: &Setup, mem: &mut Memory) {
    let (w, p) = (&s.workload, s.precision);
    let h = f64::from(model.hidden);
    let tp = f64::from(s.tp);
    let t = s.local_tokens();
    let unit = activation_unit(model, s);
    let (full, scores, mm, input) = training_layer_units(model, s);
    let l = f64::from(model.layers);
    let (kept, how) = match w.checkpointing {
        Checkpointing::None => (l * full, format!("{l} layers × {full:.1}")),
        Checkpointing::Selective if w.framework_is(&["megatron", "nemo"]) => (
            l * (full - scores),
            format!("{l} layers × {:.1} (scores recomputed)", full - scores),
        ),
        Checkpointing::Selective => {
            let keep = input + 2.0 * f64::from(model.heads * model.head_dim) / h + mm / 2.0;
            (
                l * keep + full,
                format!(
                    "{l} layers × {keep:.1} (input, attention output, every other matmul output) + one layer recomputed ({full:.1})"
                ),
            )
        }
        Checkpointing::Full => (
            l * input + full,
            format!("{l} layer inputs × {input} + one layer recomputed ({full:.1})"),
        ),
    };
    let scale = format!(
        "B per hidden unit per token at 16 bits; × hidden × {t} tokens{}{}",
        if p.activation_bytes() > 2.0 {
            " × 2 (fp32)"
        } else {
            ""
        },
        if s.tp > 1 {
            " ÷ tp (sequence parallel)"
        } else {
            ""
        }
    );
    if w.activation_offload {
        // Every tensor the forward pass saves goes to host memory and comes back for its
        // layer's backward: the GPU holds that one layer's working set.
        mem.push(
            "activations",
            full * unit,
            format!("one layer in use ({full:.1}) {scale}; the rest ({how}) in host memory"),
        );
    } else {
        mem.push("activations", kept * unit, format!("{how} {scale}"));
    }
    let v = f64::from(model.vocab);
    let ab = p.activation_bytes();
    if w.classification_head {
        // A handful of labels per sequence or token, not the vocabulary: a few bytes.
        mem.push(
            "loss",
            (ab + 12.0) * t * 2.0 / tp,
            format!(
                "classification head: 2 labels × {t} tokens at most × {} B (logits and fp32 copies)",
                ab + 12.0
            ),
        );
        return;
    }
    let chunked = w
        .chunked_loss
        .unwrap_or_else(|| w.framework_is(&["torchtune"]));
    let (per_token, how) = if chunked {
        (ab + 12.0 / 8.0, "logits + fp32 loss in 8 chunks")
    } else {
        (
            ab + 12.0,
            "logits + 3 fp32 copies (upcast, log-softmax, gradient)",
        )
    };
    mem.push(
        "loss",
        per_token * t * v / tp,
        format!("{how}: {per_token} B × {t} tokens × {v} vocab ÷ tp"),
    );
}

/// Full training's gradients exist only from the backward pass to the optimizer step when
/// nothing keeps them between steps: one micro-batch per step, PyTorch's `zero_grad` freeing
/// them (`set_to_none`, its default since 2.0; `zero_grad=keep` says otherwise), no persistent gradient buffers (Megatron's and
/// DeepSpeed's contiguous buffers, DDP's and ZeRO-1/2's buckets). The backward pass makes each
/// layer's gradients as it frees that layer's activations, so the peak is the larger of the
/// forward pass's end (activations and loss) and the backward pass's end (gradients and the
/// last layer's working set), not their sum. The gradients term keeps what exceeds the
/// activations.
fn gradients_made_in_backward(model: &Model, s: &Setup, mem: &mut Memory) {
    let w = &s.workload;
    let persistent = w.framework_is(&["megatron", "deepspeed", "nemo"])
        || (s.shard_ways() > 1 && w.zero < 3)
        || s.microbatches > 1
        || s.pp > 1
        || w.keep_gradients;
    if w.mode != Mode::Train || w.optimizer_in_backward || w.cpu_offload || persistent {
        return;
    }
    let (full, _, _, _) = training_layer_units(model, s);
    let layer = full * activation_unit(model, s);
    // Autocast's 16-bit weight copies are saved for the backward pass like activations and
    // freed layer by layer as it runs: they belong to the forward side.
    let forward = mem.of(&["activations", "loss", "cast_cache"]);
    let Some(g) = mem.terms.iter_mut().find(|t| t.name == "gradients") else {
        return;
    };
    let beyond = (g.bytes + layer - forward).max(0.0);
    let gib = |b: f64| b / super::GIB;
    g.formula = format!(
        "{}; made in the backward pass as activations are freed and freed after the step (one \
         micro-batch per step): the peak is max(activations + loss (+ autocast's copies) {:.2} \
         GiB, gradients {:.2} GiB + one layer {:.2} GiB), so {:.2} GiB count beyond the \
         activations",
        g.formula,
        gib(forward),
        gib(g.bytes),
        gib(layer),
        gib(beyond)
    );
    mem.total_bytes -= g.bytes - beyond;
    g.bytes = beyond;
}

/// PyTorch's multi-tensor Adam/AdamW step (`optimizer_impl=foreach`) makes one fp32 tensor
/// per parameter (`_foreach_sqrt` of the second moments) while the weights, the whole
/// gradients and the moments are all live. When activations are small (checkpointing, one
/// short micro-batch) that moment is the peak: measured on an H200, BERT-large in the Trainer
/// at batch 1 × 4 with checkpointing peaks at 6,461 MiB against 5,112 MiB of states
/// (`tests/data/plan/measured-gpu.csv`, GM-13).
fn foreach_step(model: &Model, s: &Setup, mem: &mut Memory) {
    let w = &s.workload;
    let adam = matches!(w.optimizer, Optimizer::AdamW | Optimizer::Adam);
    if w.mode != Mode::Train || !w.foreach_optimizer || !adam || w.optimizer_in_backward {
        return;
    }
    let b = state_bytes(model, s);
    let dp = f64::from(s.shard_ways());
    let shard = |stage: u8| if w.zero >= stage { dp } else { 1.0 };
    let per = |x: f64, stage: u8| model.params * x / s.model_parallel() / shard(stage);
    let workspace = per(4.0, 1);
    let step = mem.of(&["weights", "master_weights", "optimizer"]) + per(b.grads, 2) + workspace;
    let beyond = step - mem.total_bytes;
    if beyond > 0.0 {
        let gib = |x: f64| x / super::GIB;
        mem.push(
            "optimizer_step",
            beyond,
            format!(
                "the foreach step: weights, whole gradients and moments plus one fp32 copy of \
                 the parameters ({:.2} GiB) = {:.2} GiB, {:.2} GiB above the backward pass's peak",
                gib(workspace),
                gib(step),
                gib(beyond)
            ),
        );
    }
}

/// Inference: the KV cache of every sequence and the prefill workspace.
fn kv_cache_and_prefill(model: &Model, s: &Setup, mem: &mut Memory) {
    let w = &s.workload;
    let h = f64::from(model.hidden);
    let tp = f64::from(s.tp);
    let kv_b = s.kv_precision.weight_bits() / 8.0;
    let kv_heads = f64::from(model.kv_heads);
    let per_gpu_heads = (kv_heads / tp).ceil().max(1.0);
    let per_token = model.kv_elems_per_token() * kv_b * per_gpu_heads / kv_heads / f64::from(s.pp);
    let seqs = f64::from(s.batch);
    mem.push(
            "kv_cache",
            seqs * f64::from(s.kv_len) * per_token,
            format!(
                "{seqs} seqs × {} tokens × 2·{}·{}·{} × {kv_b} B (KV heads split over tp, layers over pp)",
                s.kv_len, model.layers, model.kv_heads, model.head_dim
            ),
        );
    let tokens = (seqs * f64::from(s.prompt)).clamp(1.0, PREFILL_CHUNK_TOKENS);
    let (full, _, _) = layer_units(model, f64::from(s.prompt), w.flash_attention);
    mem.push(
        "prefill_workspace",
        full * h * tokens / tp + 4.0 * seqs * f64::from(model.vocab),
        format!(
            "one layer × {full:.1} B × hidden × {tokens} tokens + fp32 logits of the last tokens"
        ),
    );
}

/// The dequantization workspace of weight-only formats; with `runtime` or a reading that counts
/// them, allocator headroom and the CUDA context.
fn workspaces(model: &Model, s: &Setup, runtime: bool, mem: &mut Memory) {
    let (w, p) = (&s.workload, s.precision);
    let h = f64::from(model.hidden);
    let tp = f64::from(s.tp);
    let gib = |b: f64| format!("{:.2} GiB", b / super::GIB);
    if p.weight_only() && !w.gguf {
        let widest = f64::from(model.ffn).max(f64::from(model.heads * model.head_dim)) * h;
        mem.push(
            "dequant_workspace",
            widest * 2.0 / tp,
            "the widest block matrix widened to 16-bit for the matmul".to_owned(),
        );
    }
    // A plan fits the whole process (`runtime`); a measurement counts what its reading
    // counts: NVML's "used" the context and the allocator's cache, PyTorch's reserved pool
    // the cache alone, its allocated peak neither.
    let context = runtime || w.includes_context;
    if context || w.reserved_memory {
        let headroom = mem.total_bytes * ALLOCATOR_HEADROOM;
        mem.push(
            "allocator_headroom",
            headroom,
            format!(
                "{:.0} % of the above ({})",
                ALLOCATOR_HEADROOM * 100.0,
                gib(headroom)
            ),
        );
    }
    if context {
        mem.push(
            "cuda_context",
            CUDA_CONTEXT_BYTES,
            "CUDA context and kernels (1,343 MB, Hugging Face measurement)".to_owned(),
        );
    }
}

fn zero_note(zero: u8, stage: u8, dp: f64) -> String {
    if zero >= stage && dp > 1.0 {
        format!(" ÷ {dp} (ZeRO-{zero} over data parallel)")
    } else {
        String::new()
    }
}

/// LoRA adapter parameters: rank × (inputs + outputs) of every linear layer in every block.
#[must_use]
pub fn lora_params(m: &Model, rank: u32) -> f64 {
    lora_params_on(m, rank, LoraTargets::ALL)
}

/// LoRA adapter parameters on the layers `targets` names: rank × (inputs + outputs) of each
/// (a plain feed-forward has no gate: naming it adds nothing).
#[must_use]
pub fn lora_params_on(m: &Model, rank: u32, targets: LoraTargets) -> f64 {
    let h = f64::from(m.hidden);
    let q = f64::from(m.heads * m.head_dim);
    let kv = f64::from(m.kv_heads * m.head_dim);
    let f = f64::from(m.ffn);
    let gated = m.ffn_kind == FfnKind::Gated;
    let per_layer: f64 = [
        (LoraTargets::Q, h + q),
        (LoraTargets::K, h + kv),
        (LoraTargets::V, h + kv),
        (LoraTargets::O, q + h),
        (LoraTargets::GATE, if gated { h + f } else { 0.0 }),
        (LoraTargets::UP, h + f),
        (LoraTargets::DOWN, f + h),
    ]
    .iter()
    .filter(|(bit, _)| targets.has(*bit))
    .map(|(_, n)| n)
    .sum();
    f64::from(rank) * f64::from(m.layers) * per_layer
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_setup as setup;

    #[test]
    fn zero_paper_model_state_arithmetic() {
        // Rajbhandari et al. 2020, Sec. 3 and Fig. 1: mixed-precision Adam holds 2 + 2 + 12 =
        // 16 bytes per parameter; ZeRO-1 4Ψ + 12Ψ/Nd, ZeRO-2 2Ψ + 14Ψ/Nd, ZeRO-3 16Ψ/Nd.
        let m = Model::from_params("7.5b").expect("model");
        let psi = m.params;
        let states = |zero: &str| {
            let s = setup(
                &m,
                &[
                    ("mode", "train"),
                    ("precision", "amp_fp16"),
                    ("optimizer", "adam"),
                    ("dp", "64"),
                    ("zero", zero),
                    ("scope", "model_states_only"),
                ],
            );
            let mem = estimate(&m, &s, false);
            mem.of(&["weights", "gradients", "master_weights", "optimizer"])
        };
        let close = |a: f64, b: f64| assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
        close(states("0"), 16.0 * psi);
        close(states("1"), 4.0 * psi + 12.0 * psi / 64.0);
        close(states("2"), 2.0 * psi + 14.0 * psi / 64.0);
        close(states("3"), 16.0 * psi / 64.0);
        // The paper's own figure: 7.5B on 64 GPUs under ZeRO-1 is 31.4 GB.
        assert!((states("1") / 1e9 - 31.4).abs() < 0.05);
    }

    #[test]
    fn model_states_scope_is_the_whole_total() {
        // The paper's figures count model states only: under ZeRO-3 the gathered layers and a
        // layer's whole gradient are working buffers, left out of that scope.
        let m = Model::from_params("7.5b").expect("model");
        let kv = [
            ("mode", "train"),
            ("precision", "amp_fp16"),
            ("optimizer", "adam"),
            ("dp", "64"),
            ("zero", "3"),
        ];
        let mut scoped = kv.to_vec();
        scoped.push(("scope", "model_states_only"));
        let only = estimate(&m, &setup(&m, &scoped), false);
        assert!((only.total_bytes / (16.0 * m.params / 64.0) - 1.0).abs() < 1e-12);
        let whole = estimate(&m, &setup(&m, &kv), false);
        assert!(whole.of(&["gathered_layers"]) > 0.0 && whole.of(&["unsharded_gradient"]) > 0.0);
    }

    #[test]
    fn pipeline_stages_accumulate_unsharded_fp32_gradients_under_torchtitan() {
        let m = Model::preset("llama-3.1-405b").expect("preset");
        let held = |framework: &'static str, pp: &'static str| {
            let kv = [
                ("mode", "train"),
                ("precision", "amp_bf16"),
                ("dp", "8"),
                ("tp", "8"),
                ("pp", pp),
                ("zero", "3"),
                ("framework", framework),
            ];
            estimate(&m, &setup(&m, &kv), false).of(&["unsharded_gradient"])
        };
        let layer = layer_params(&m);
        // The stage's 16 layers, fp32, split by tp only.
        assert!((held("torchtitan", "8") / (16.0 * layer * 4.0 / 8.0) - 1.0).abs() < 1e-9);
        // Without pipeline stages (or under Megatron): one layer's 16-bit gradient.
        assert!((held("torchtitan", "1") / (layer * 2.0 / 8.0) - 1.0).abs() < 1e-9);
        assert!((held("megatron", "8") / (layer * 2.0 / 8.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn pytorch_tensor_parallel_keeps_the_gathered_inputs() {
        // Sequence parallel gathers the attention's and the feed-forward's inputs; Megatron
        // re-gathers them in the backward pass, PyTorch's DTensor TP keeps them whole.
        let m = Model::preset("llama-3.1-70b").expect("preset");
        let act = |framework: &'static str| {
            let kv = [
                ("mode", "train"),
                ("precision", "bf16"),
                ("batch", "2"),
                ("seq", "8192"),
                ("tp", "8"),
                ("checkpointing", "full"),
                ("framework", framework),
            ];
            estimate(&m, &setup(&m, &kv), false).of(&["activations"])
        };
        let unit = 8192.0 * 16_384.0 / 8.0;
        assert!((act("torchtitan") - act("megatron") - 4.0 * 7.0 * unit).abs() < 1.0);
    }

    #[test]
    fn context_parallel_splits_the_sequence_and_shards_the_states_further() {
        // torchtitan's Table 2: 8 GPUs as FSDP 8 at 32k tokens or FSDP 4 × CP 2 at 64k: each
        // GPU holds 32k tokens and an eighth of the states either way.
        let m = Model::preset("llama-3.1-8b").expect("preset");
        let mem = |dp: &'static str, cp: &'static str, seq: &'static str| {
            let kv = [
                ("mode", "train"),
                ("precision", "amp_bf16"),
                ("framework", "torchtitan"),
                ("zero", "3"),
                ("batch", "1"),
                ("checkpointing", "full"),
                ("dp", dp),
                ("cp", cp),
                ("seq", seq),
            ];
            let s = setup(&m, &kv);
            assert_eq!(s.gpus, 8);
            estimate(&m, &s, false)
        };
        let (fsdp, cp) = (mem("8", "1", "32768"), mem("4", "2", "65536"));
        for term in [
            "weights",
            "optimizer",
            "activations",
            "loss",
            "gathered_layers",
        ] {
            assert!(
                (fsdp.of(&[term]) - cp.of(&[term])).abs() < 1.0,
                "{term}: {} vs {}",
                fsdp.of(&[term]),
                cp.of(&[term])
            );
        }
        // Without context parallel the 64k sequence sits on one GPU: twice the activations.
        let whole = mem("8", "1", "65536");
        assert!((whole.of(&["activations"]) / cp.of(&["activations"]) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_reserved_reading_adds_the_allocator_cache_not_the_context() {
        let m = Model::preset("llama-3-8b").expect("preset");
        let mem = |reading: &'static str| {
            let kv = [("mode", "train"), ("memory_reading", reading)];
            estimate(&m, &setup(&m, &kv), false)
        };
        let allocated = mem("allocated");
        let reserved = mem("reserved");
        let headroom = allocated.total_bytes * ALLOCATOR_HEADROOM;
        assert!((reserved.of(&["allocator_headroom"]) - headroom).abs() < 1.0);
        assert_eq!(reserved.of(&["cuda_context"]), 0.0);
        assert!((mem("used").of(&["cuda_context"]) - CUDA_CONTEXT_BYTES).abs() < 1.0);
    }

    #[test]
    fn torchtitan_keeps_a_pipeline_stage_gathered() {
        let m = Model::preset("llama-3.1-405b").expect("preset");
        let gathered = |framework: &'static str| {
            let kv = [
                ("mode", "train"),
                ("precision", "amp_bf16"),
                ("dp", "8"),
                ("tp", "8"),
                ("pp", "8"),
                ("zero", "3"),
                ("framework", framework),
            ];
            estimate(&m, &setup(&m, &kv), false).of(&["gathered_layers"])
        };
        let layer = layer_params(&m) * 2.0 / 8.0;
        // Two layers in flight, whole but for tp (pipeline stages split the layers, not a layer).
        assert!((gathered("megatron") / (2.0 * layer) - 1.0).abs() < 1e-9);
        // torchtitan under PP: the stage's 16 layers stay gathered.
        assert!((gathered("torchtitan") / (16.0 * layer) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fsdp_shards_a_frozen_base_and_its_adapters() {
        let m = Model::preset("llama-3.1-70b").expect("preset");
        let one = |extra: &[(&'static str, &'static str)]| {
            let mut kv = vec![("mode", "lora"), ("precision", "bf16"), ("lora_rank", "16")];
            kv.extend_from_slice(extra);
            estimate(&m, &setup(&m, &kv), false)
        };
        let alone = one(&[]);
        let sharded = one(&[("dp", "8"), ("zero", "3")]);
        for term in ["weights", "adapters"] {
            let (a, b) = (alone.of(&[term]), sharded.of(&[term]));
            assert!((a / b - 8.0).abs() < 1e-9, "{term}: {a} vs {b}");
        }
        // Two layers gathered at a time, 16-bit; no base gradients (the base is frozen).
        let gathered = sharded.of(&["gathered_layers"]);
        let layer = layer_params(&m) * 2.0;
        assert!(
            (gathered / (2.0 * layer) - 1.0).abs() < 0.02,
            "{gathered} vs {layer}"
        );
        assert_eq!(sharded.of(&["unsharded_gradient", "gradients"]), 0.0);
        // Data parallel without ZeRO-3 keeps the whole base on every GPU.
        let replicated = one(&[("dp", "8"), ("zero", "2")]);
        assert!((replicated.of(&["weights"]) - alone.of(&["weights"])).abs() < 1.0);
    }

    #[test]
    fn paged_moments_optimizer_in_backward_and_cpu_offload() {
        let m = Model::preset("llama-3.1-8b").expect("preset");
        let est = |extra: &[(&'static str, &'static str)]| {
            let mut kv = vec![("mode", "train"), ("precision", "bf16"), ("batch", "2")];
            kv.extend_from_slice(extra);
            estimate(&m, &setup(&m, &kv), false)
        };
        let plain = est(&[("optimizer", "adam8bit")]);
        let paged = est(&[("optimizer", "paged_adamw8bit")]);
        // The same 2 bytes per parameter, in unified memory: named, not counted on the GPU.
        assert!((plain.of(&["optimizer"]) - 2.0 * m.params).abs() < 1.0);
        let note = paged
            .terms
            .iter()
            .find(|t| t.name == "optimizer")
            .expect("named");
        assert_eq!(note.bytes, 0.0);
        assert!(note.formula.contains("unified memory"), "{}", note.formula);
        assert!((plain.total_bytes - paged.total_bytes - 2.0 * m.params).abs() < 1.0);
        // In the backward pass: one tensor's gradient, the embedding's.
        let in_bwd = est(&[("optimizer", "adam8bit"), ("optimizer_in_bwd", "true")]);
        let largest = f64::from(m.vocab) * f64::from(m.hidden) * 2.0;
        assert!((in_bwd.of(&["gradients"]) - largest).abs() < 1.0);
        // CPU offload under FSDP: the model states are on the host.
        let off = est(&[
            ("optimizer", "adamw"),
            ("dp", "8"),
            ("zero", "3"),
            ("cpu_offload", "true"),
        ]);
        for t in &off.terms {
            if ["weights", "gradients", "optimizer"].contains(&t.name) {
                assert_eq!(t.bytes, 0.0, "{}", t.name);
                assert!(t.formula.starts_with("on the host"), "{}", t.formula);
            }
        }
        assert!(off.of(&["gathered_layers", "unsharded_gradient", "activations"]) > 0.0);
    }

    #[test]
    fn a_classification_head_has_no_vocabulary_logits() {
        let m = Model::preset("bert-large").expect("preset");
        let est = |head: &'static str| {
            let kv = [
                ("mode", "train"),
                ("precision", "fp32"),
                ("batch", "8"),
                ("seq", "512"),
                ("task_head", head),
            ];
            estimate(&m, &setup(&m, &kv), false).of(&["loss"])
        };
        // 4 + 12 bytes of logits per token and vocabulary entry against 2 labels.
        let tokens = 8.0 * 512.0;
        assert!((est("mlm") - 16.0 * tokens * f64::from(m.vocab)).abs() < 1.0);
        assert!((est("seq-classification") - 16.0 * tokens * 2.0).abs() < 1.0);
        let mut w = crate::Workload::default();
        assert!(w.set("task_head", "regression").is_err());
    }

    #[test]
    fn state_bytes_per_optimizer() {
        let b = |p, o| {
            let x = StateBytes::new(p, o, 4096.0, true);
            x.weights + x.grads + x.master + x.optimizer + x.cast_cache
        };
        assert_eq!(b(Precision::Fp32, Optimizer::AdamW), 16.0);
        assert_eq!(b(Precision::AmpBf16, Optimizer::Adam8bit), 10.0);
        assert_eq!(b(Precision::AmpBf16, Optimizer::Sgd), 12.0);
        // FP8 training keeps bf16 training's states (only the matmuls run in FP8).
        assert_eq!(
            b(Precision::Fp8, Optimizer::AdamW),
            b(Precision::AmpBf16, Optimizer::AdamW)
        );
        assert_eq!(b(Precision::Bf16, Optimizer::AdamW), 8.0);
        assert!((b(Precision::AmpBf16, Optimizer::Adafactor) - 8.002).abs() < 1e-3);
        // Autocast without a master copy: fp32 weights and grads and a 16-bit cast cache.
        let a = StateBytes::new(Precision::AmpFp16, Optimizer::AdamW, 4096.0, false);
        assert_eq!(a.weights + a.grads + a.optimizer + a.cast_cache, 18.0);
    }

    #[test]
    fn korthikanti_34_units_for_gpt() {
        // A GPT-3-shaped layer without flash attention: sbh(34 + 5as/h) bytes.
        let m = Model::preset("gpt3-175b").expect("preset");
        let s = 2048.0;
        let (full, scores, _) = layer_units(&m, s, false);
        let h = f64::from(m.hidden);
        assert!((scores - 5.0 * 96.0 * s / h).abs() < 1e-9);
        assert!((full - scores - 34.0).abs() < 1e-9, "{full}");
        let (flash, _, _) = layer_units(&m, s, true);
        assert!((flash - 34.0).abs() < 1e-9);
    }

    #[test]
    fn kv_cache_uses_grouped_query_heads() {
        // Llama-3-8B: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token.
        let m = Model::preset("llama-3-8b").expect("preset");
        let s = setup(
            &m,
            &[("batch", "4"), ("context", "8192"), ("precision", "bf16")],
        );
        let mem = estimate(&m, &s, false);
        assert_eq!(mem.of(&["kv_cache"]), 4.0 * 8192.0 * 131_072.0);
        // Tensor parallel 2 halves it; 16 ways replicate the 8 heads.
        let s2 = setup(&m, &[("context", "8192"), ("tp", "2")]);
        assert_eq!(
            estimate(&m, &s2, false).of(&["kv_cache"]),
            8192.0 * 65_536.0
        );
        let s16 = setup(&m, &[("context", "8192"), ("tp", "16")]);
        assert_eq!(
            estimate(&m, &s16, false).of(&["kv_cache"]),
            8192.0 * 16_384.0
        );
    }

    #[test]
    fn gguf_quantizes_everything_and_int4_only_blocks() {
        let m = Model::preset("codellama-7b").expect("preset");
        let s = setup(&m, &[("precision", "q8_0"), ("format", "gguf")]);
        let gib = estimate(&m, &s, false).of(&["weights"]) / crate::GIB;
        assert!((gib - 6.67).abs() < 0.01, "{gib}");
        let s = setup(&m, &[("precision", "int4")]);
        let w = estimate(&m, &s, false).of(&["weights"]);
        let emb = 2.0 * 32_016.0 * 4096.0;
        assert!((w - ((m.params - emb) * 4.25 / 8.0 + emb * 2.0)).abs() < 1.0);
    }

    #[test]
    fn checkpointing_orders_activation_memory() {
        let m = Model::preset("llama-3-8b").expect("preset");
        let act = |c: &str| {
            let s = setup(
                &m,
                &[
                    ("mode", "train"),
                    ("precision", "bf16"),
                    ("batch", "2"),
                    ("seq", "4096"),
                    ("checkpointing", c),
                ],
            );
            estimate(&m, &s, false).of(&["activations"])
        };
        assert!(act("none") > act("selective"));
        assert!(act("selective") > act("full"));
        // Full: 32 layer inputs + one layer recomputed.
        let unit = 4096.0 * 8192.0;
        let (full, _, _) = layer_units(&m, 4096.0, true);
        assert!((act("full") - (32.0 * 2.0 + full) * unit).abs() < 1.0);
    }

    #[test]
    fn autocast_keeps_the_residual_stream_norms_and_probabilities_in_fp32() {
        // BERT-large under autocast over fp32 weights (no master copy): each layer input and
        // both norms' inputs at 4 bytes, and softmax's saved probabilities at 4 bytes.
        let m = Model::preset("bert-large").expect("preset");
        let act = |precision: &str, c: &str| {
            let kv = [
                ("mode", "train"),
                ("precision", precision),
                ("batch", "8"),
                ("seq", "512"),
                ("flash_attention", "false"),
                ("checkpointing", c),
            ];
            estimate(&m, &setup(&m, &kv), false).of(&["activations"])
        };
        let unit = 1024.0 * 4096.0;
        let (full, _, _) = layer_units(&m, 512.0, false);
        let probs = 2.0 * 16.0 * 512.0 / 1024.0;
        assert!((act("bf16", "none") - 24.0 * full * unit).abs() < 1.0);
        assert!((act("amp_bf16", "none") - 24.0 * (full + 4.0 + probs) * unit).abs() < 1.0);
        let ckpt = (24.0 * 4.0 + full + 4.0 + probs) * unit;
        assert!((act("amp_bf16", "full") - ckpt).abs() < 1.0);
    }

    #[test]
    fn gradients_replace_activations_in_the_backward_pass() {
        // torchtune's Llama 3.2 3B ablation (README): bf16 states, 2 × 4096 tokens.
        let m = Model::preset("llama-3.2-3b").expect("preset");
        let mem = |extra: &[(&'static str, &'static str)]| {
            let mut kv = vec![
                ("mode", "train"),
                ("precision", "bf16"),
                ("batch", "2"),
                ("seq", "4096"),
                ("framework", "torchtune"),
            ];
            kv.extend_from_slice(extra);
            estimate(&m, &setup(&m, &kv), false)
        };
        let grads = m.params * 2.0;
        let (full, _, _) = layer_units(&m, 4096.0, true);
        let layer = full * 3072.0 * 8192.0;
        // Without checkpointing the activations outweigh the gradients: none count.
        let none = mem(&[("checkpointing", "none")]);
        assert_eq!(none.of(&["gradients"]), 0.0);
        // With it the backward pass ends holding every gradient and one layer.
        let ckpt = mem(&[("checkpointing", "full")]);
        let forward = ckpt.of(&["activations", "loss"]);
        assert!((ckpt.of(&["gradients"]) - (grads + layer - forward)).abs() < 1.0);
        let states = ckpt.of(&["weights", "optimizer"]);
        assert!((ckpt.total_bytes - (states + grads + layer)).abs() < 1.0);
        // Under autocast the 16-bit weight copies are saved like activations: the forward
        // side of the max.
        let kv = [
            ("mode", "train"),
            ("precision", "amp_bf16"),
            ("batch", "2"),
            ("seq", "4096"),
            ("checkpointing", "full"),
        ];
        let amp = estimate(&m, &setup(&m, &kv), false);
        let fwd = amp.of(&["activations", "loss", "cast_cache"]);
        let fp32_grads = m.params * 4.0;
        let (full, _, _, _) = training_layer_units(&m, &setup(&m, &kv));
        let amp_layer = full * 3072.0 * 8192.0;
        assert!((amp.of(&["gradients"]) - (fp32_grads + amp_layer - fwd).max(0.0)).abs() < 1.0);
        // Kept between micro-batches, or in a persistent buffer, they add up.
        let ga = mem(&[("checkpointing", "full"), ("ga", "2")]);
        assert!((ga.of(&["gradients"]) - grads).abs() < 1.0);
        let megatron = mem(&[("checkpointing", "full"), ("framework", "megatron")]);
        assert!((megatron.of(&["gradients"]) - grads).abs() < 1.0);
    }

    #[test]
    fn activation_offload_and_the_loss_key() {
        let m = Model::preset("llama-3.2-3b").expect("preset");
        let mem = |extra: &[(&'static str, &'static str)]| {
            let mut kv = vec![
                ("mode", "lora"),
                ("precision", "bf16"),
                ("lora_rank", "64"),
                ("batch", "2"),
                ("seq", "4096"),
                ("checkpointing", "full"),
            ];
            kv.extend_from_slice(extra);
            estimate(&m, &setup(&m, &kv), false)
        };
        let (full, _, _) = layer_units(&m, 4096.0, true);
        let unit = 3072.0 * 8192.0;
        let offloaded = mem(&[("activation_offload", "true")]);
        assert!((offloaded.of(&["activations"]) - full * unit).abs() < 1.0);
        let logits = 8192.0 * 128_256.0;
        assert!((mem(&[("loss", "full")]).of(&["loss"]) - 14.0 * logits).abs() < 1.0);
        assert!((mem(&[("loss", "chunked")]).of(&["loss"]) - 3.5 * logits).abs() < 1.0);
        // torchtune keeps the adapters and their moments in the 16-bit training dtype.
        let adapters = lora_params(&m, 64);
        let tt = mem(&[("framework", "torchtune")]).of(&["adapters"]);
        assert!((tt - adapters * 8.0).abs() < 1.0);
        assert!((mem(&[]).of(&["adapters"]) - adapters * 16.0).abs() < 1.0);
    }

    #[test]
    fn loss_term_full_and_chunked() {
        // 14 B per token per vocabulary entry: bf16 logits + three fp32 copies.
        let m = Model::preset("llama-3-8b").expect("preset");
        let kv = [("mode", "train"), ("batch", "2"), ("seq", "1024")];
        let loss = |extra: &[(&str, &str)]| {
            let all: Vec<(&str, &str)> = kv.iter().chain(extra).copied().collect();
            estimate(&m, &setup(&m, &all), false).of(&["loss"])
        };
        assert_eq!(loss(&[]), 14.0 * 2048.0 * 128_256.0);
        assert_eq!(
            loss(&[("framework", "torchtune")]),
            3.5 * 2048.0 * 128_256.0
        );
        assert_eq!(loss(&[("tp", "2")]), 7.0 * 2048.0 * 128_256.0);
    }

    #[test]
    fn fsdp_gathers_two_layers_and_weight_only_widens_one_matrix() {
        let m = Model::preset("llama-3-8b").expect("preset");
        let s = setup(&m, &[("mode", "train"), ("zero", "3"), ("dp", "8")]);
        let layer = (m.params - 2.0 * 128_256.0 * 4096.0) / 32.0;
        assert!((estimate(&m, &s, false).of(&["gathered_layers"]) - 4.0 * layer).abs() < 1.0);
        let q = setup(&m, &[("precision", "int8")]);
        assert_eq!(
            estimate(&m, &q, false).of(&["dequant_workspace"]),
            14_336.0 * 4096.0 * 2.0
        );
        let bf = setup(&m, &[("precision", "bf16")]);
        assert_eq!(estimate(&m, &bf, false).of(&["dequant_workspace"]), 0.0);
    }

    #[test]
    fn prefill_workspace_is_one_layer_of_a_chunk() {
        let m = Model::preset("llama-3-8b").expect("preset");
        let s = setup(&m, &[("batch", "64"), ("prompt", "1024")]);
        let (full, _, _) = layer_units(&m, 1024.0, true);
        let want = full * 4096.0 * PREFILL_CHUNK_TOKENS + 4.0 * 64.0 * 128_256.0;
        assert!((estimate(&m, &s, false).of(&["prefill_workspace"]) - want).abs() < 1.0);
    }

    #[test]
    fn lora_adapters_are_small_and_runtime_terms_are_explicit() {
        let m = Model::preset("llama-3.1-8b").expect("preset");
        assert!((lora_params(&m, 8) / 1e6 - 20.97).abs() < 0.01);
        // Query and value only (PEFT's default for Llama, LitGPT's configs): rank × layers ×
        // ((h + q) + (h + kv)) = 8 × 32 × (8,192 + 5,120).
        let qv = LoraTargets::parse("q_proj,v_proj").expect("targets");
        assert_eq!(lora_params_on(&m, 8, qv), 8.0 * 32.0 * (8192.0 + 5120.0));
        let everything = LoraTargets::parse("attn+mlp").expect("targets");
        assert_eq!(lora_params_on(&m, 8, everything), lora_params(&m, 8));
        assert!(LoraTargets::parse("lm_head").is_err() && LoraTargets::parse(",").is_err());
        let adapters = |t: &str| {
            let s = setup(&m, &[("mode", "lora"), ("lora_targets", t)]);
            estimate(&m, &s, false).of(&["adapters"])
        };
        assert!(adapters("q+v") < 0.25 * adapters("all"));
        let s = setup(&m, &[("mode", "qlora")]);
        let mem = estimate(&m, &s, true);
        let names: Vec<&str> = mem.terms.iter().map(|t| t.name).collect();
        assert!(names.contains(&"cuda_context") && names.contains(&"allocator_headroom"));
        assert!(!names.contains(&"gradients"));
        let before = mem.total_bytes - mem.of(&["cuda_context", "allocator_headroom"]);
        assert!((mem.of(&["allocator_headroom"]) - before * ALLOCATOR_HEADROOM).abs() < 1.0);
        assert_eq!(mem.of(&["cuda_context"]), CUDA_CONTEXT_BYTES);
    }
}
