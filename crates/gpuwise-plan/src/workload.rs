//! What is run on the model: mode, precision, batch, sequence, parallelism.
//!
//! One parser for every way a workload is written: `key=value;…` (the calibration file),
//! flags and a TOML file are all fed through [`Workload::set`], so a key means the same thing
//! everywhere and an unknown key is reported the same way.

use serde::Serialize;

/// A workload key or value the planner cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// Not one of the names of a setting (`mode`, `precision`, `optimizer`, `checkpointing`).
    #[error("{what} `{given}` is not one of {expected}")]
    Unknown {
        /// The setting.
        what: &'static str,
        /// What was given.
        given: String,
        /// The names there are.
        expected: &'static str,
    },
    /// A value of the wrong kind for its key.
    #[error("{key}=`{given}`: expected {expected}")]
    Value {
        /// The key.
        key: String,
        /// What was given.
        given: String,
        /// What the key takes.
        expected: &'static str,
    },
}

/// Training or inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Full training or fine-tuning.
    Train,
    /// LoRA: frozen 16-bit base, trained low-rank adapters.
    Lora,
    /// QLoRA: frozen 4-bit (NF4) base, trained adapters.
    Qlora,
    /// Inference (prefill and decode).
    Infer,
}

impl Mode {
    /// Parse `train`, `lora`, `qlora`, `infer` (`inference`, `serve`).
    pub fn parse(s: &str) -> Result<Self, WorkloadError> {
        match s {
            "train" | "training" | "pretrain" | "finetune" => Ok(Self::Train),
            "lora" => Ok(Self::Lora),
            "qlora" => Ok(Self::Qlora),
            "infer" | "inference" | "serve" => Ok(Self::Infer),
            o => Err(WorkloadError::Unknown {
                what: "mode",
                given: o.to_owned(),
                expected: "train, lora, qlora, infer",
            }),
        }
    }

    /// The name `parse` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::Lora => "lora",
            Self::Qlora => "qlora",
            Self::Infer => "infer",
        }
    }

    /// Whether weights are updated (anything but inference).
    #[must_use]
    pub fn trains(self) -> bool {
        self != Self::Infer
    }
}

/// Number formats of weights (and, for training, of the arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// 32-bit float.
    Fp32,
    /// TF32 tensor-core arithmetic on fp32 storage.
    Tf32,
    /// 16-bit float throughout.
    Fp16,
    /// bfloat16 throughout.
    Bf16,
    /// Mixed precision, fp16 arithmetic, fp32 master weights.
    AmpFp16,
    /// Mixed precision, bf16 arithmetic, fp32 master weights.
    AmpBf16,
    /// 8-bit float weights and arithmetic.
    Fp8,
    /// 8-bit integer weights (weight-only; 16-bit arithmetic).
    Int8,
    /// 4-bit integer weights with a 16-bit scale and zero point per group (AWQ, GPTQ, gpt-fast).
    Int4 {
        /// Weights per group.
        group: u32,
    },
    /// GGUF Q8_0: blocks of 32 int8 and one fp16 scale (8.5 bits per weight).
    Q8_0,
    /// GGUF Q4_0: blocks of 32 4-bit and one fp16 scale (4.5 bits).
    Q4_0,
    /// GGUF Q4_K_M: Q4_K with Q6_K for some tensors (≈ 4.85 bits on Llama models).
    Q4KM,
    /// bitsandbytes NF4 with double quantization (QLoRA): 4 + 8/64 + 32/(64·256) bits.
    Nf4,
}

impl Precision {
    /// Parse a precision name (`bf16`, `amp_bf16`, `int4`, `int4-g32`, `q4_k_m`, …).
    pub fn parse(s: &str) -> Result<Self, WorkloadError> {
        let l = s.to_ascii_lowercase().replace('-', "_");
        Ok(match l.as_str() {
            "fp32" | "float32" => Self::Fp32,
            "tf32" => Self::Tf32,
            "fp16" | "float16" | "half" => Self::Fp16,
            "bf16" | "bfloat16" => Self::Bf16,
            "amp_fp16" | "mixed_fp16" => Self::AmpFp16,
            "amp_bf16" | "mixed_bf16" => Self::AmpBf16,
            "fp8" | "fp8_e4m3" => Self::Fp8,
            "int8" => Self::Int8,
            "int4" => Self::Int4 { group: 128 },
            "q8_0" => Self::Q8_0,
            "q4_0" => Self::Q4_0,
            "q4_k_m" => Self::Q4KM,
            "nf4" => Self::Nf4,
            other => {
                if let Some(g) = other
                    .strip_prefix("int4_g")
                    .and_then(|g| g.parse::<u32>().ok())
                    .filter(|g| *g > 0)
                {
                    Self::Int4 { group: g }
                } else {
                    return Err(WorkloadError::Unknown {
                        what: "precision",
                        given: s.to_owned(),
                        expected: "fp32, tf32, fp16, bf16, amp_fp16, amp_bf16, fp8, int8, int4 (int4_g32 …), q8_0, q4_0, q4_k_m, nf4",
                    });
                }
            }
        })
    }

    /// Bits per quantized weight, scales included.
    #[must_use]
    pub fn weight_bits(self) -> f64 {
        match self {
            Self::Fp32 | Self::Tf32 => 32.0,
            Self::Fp16 | Self::Bf16 | Self::AmpFp16 | Self::AmpBf16 => 16.0,
            Self::Fp8 | Self::Int8 => 8.0,
            Self::Int4 { group } => 4.0 + 32.0 / f64::from(group),
            Self::Q8_0 => 8.5,
            Self::Q4_0 => 4.5,
            Self::Q4KM => 4.85,
            Self::Nf4 => 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0),
        }
    }

    /// Whether every tensor, embeddings included, is stored at [`Self::weight_bits`] (GGUF
    /// files); otherwise quantized formats cover the blocks' linear layers only and the
    /// embeddings and output layer stay 16-bit, as bitsandbytes, AWQ/GPTQ and TensorRT-LLM do.
    #[must_use]
    pub fn quantizes_embeddings(self) -> bool {
        matches!(self, Self::Q8_0 | Self::Q4_0 | Self::Q4KM) || self.weight_bits() >= 16.0
    }

    /// Weight-only quantization: weights are widened to 16-bit for the arithmetic.
    #[must_use]
    pub fn weight_only(self) -> bool {
        matches!(
            self,
            Self::Int8 | Self::Int4 { .. } | Self::Q8_0 | Self::Q4_0 | Self::Q4KM | Self::Nf4
        )
    }

    /// Mixed precision (fp32 master weights).
    #[must_use]
    pub fn mixed(self) -> bool {
        matches!(self, Self::AmpFp16 | Self::AmpBf16)
    }

    /// Bytes of an activation element in this precision's arithmetic.
    #[must_use]
    pub fn activation_bytes(self) -> f64 {
        match self {
            Self::Fp32 | Self::Tf32 => 4.0,
            _ => 2.0,
        }
    }

    /// The peak a GPU reaches in this precision's arithmetic, from its dense TFLOPS.
    #[must_use]
    /// BF16 needs BF16 units (not on Volta or Turing); FP8 falls back to 16-bit arithmetic
    /// (FP8 weights widened, as vLLM's Marlin kernels do on Ampere); weight-only formats
    /// compute in 16-bit, either kind.
    pub fn peak_tflops(self, t: &gpuwise_catalog::DenseTflops) -> Option<f64> {
        let half = t.bf16.or(t.fp16);
        match self {
            Self::Fp32 => t.fp32,
            Self::Tf32 => t.tf32.or(t.fp32),
            Self::Fp16 | Self::AmpFp16 => t.fp16.or(t.bf16),
            Self::Bf16 | Self::AmpBf16 => t.bf16,
            Self::Fp8 => t.fp8.or(half),
            _ => half,
        }
    }

    /// The name `parse` takes.
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Self::Fp32 => "fp32".into(),
            Self::Tf32 => "tf32".into(),
            Self::Fp16 => "fp16".into(),
            Self::Bf16 => "bf16".into(),
            Self::AmpFp16 => "amp_fp16".into(),
            Self::AmpBf16 => "amp_bf16".into(),
            Self::Fp8 => "fp8".into(),
            Self::Int8 => "int8".into(),
            Self::Int4 { group } => format!("int4_g{group}"),
            Self::Q8_0 => "q8_0".into(),
            Self::Q4_0 => "q4_0".into(),
            Self::Q4KM => "q4_k_m".into(),
            Self::Nf4 => "nf4".into(),
        }
    }
}

/// Optimizers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// AdamW: two fp32 moments.
    AdamW,
    /// Adam: two fp32 moments.
    Adam,
    /// 8-bit Adam (bitsandbytes): two 8-bit moments.
    Adam8bit,
    /// bitsandbytes' paged 8-bit AdamW: the same moments in CUDA unified memory, paged to host
    /// RAM when the GPU runs short (torchtune's single-GPU full fine-tune default).
    #[serde(rename = "paged_adamw8bit")]
    PagedAdam8bit,
    /// Adafactor: factored second moment, no first moment (Hugging Face defaults).
    Adafactor,
    /// SGD with momentum: one buffer.
    Sgd,
}

impl Optimizer {
    /// Parse an optimizer name.
    pub fn parse(s: &str) -> Result<Self, WorkloadError> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "adamw" | "adamwtorch" | "fusedadam" => Ok(Self::AdamW),
            "adam" => Ok(Self::Adam),
            "adam8bit" | "adamw8bit" => Ok(Self::Adam8bit),
            "pagedadamw8bit" | "pagedadam8bit" => Ok(Self::PagedAdam8bit),
            "adafactor" => Ok(Self::Adafactor),
            "sgd" => Ok(Self::Sgd),
            _ => Err(WorkloadError::Unknown {
                what: "optimizer",
                given: s.to_owned(),
                expected: "adamw, adam, adam8bit, paged_adamw8bit, adafactor, sgd",
            }),
        }
    }
}

/// The linear layers of a block that carry LoRA adapters (PEFT's `target_modules`, LitGPT's
/// `lora_query` … `lora_mlp`), as bits: query, key, value, output, gate, up, down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoraTargets(pub u8);

impl LoraTargets {
    /// Every linear layer of the block (the default).
    pub const ALL: Self = Self(0b111_1111);
    /// The query projection.
    pub const Q: u8 = 1;
    /// The key projection.
    pub const K: u8 = 2;
    /// The value projection.
    pub const V: u8 = 4;
    /// The attention output projection.
    pub const O: u8 = 8;
    /// The gate of a gated feed-forward.
    pub const GATE: u8 = 16;
    /// The feed-forward's up projection.
    pub const UP: u8 = 32;
    /// The feed-forward's down projection.
    pub const DOWN: u8 = 64;

    /// `q,v`, `q_proj+v_proj`, `query,value,mlp`, `all-linear`: names separated by `,`, `+`
    /// or `|`.
    pub fn parse(v: &str) -> Result<Self, WorkloadError> {
        let mut bits = 0;
        for name in v
            .split([',', '+', '|'])
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            bits |= match name.to_ascii_lowercase().as_str() {
                "q" | "query" | "q_proj" | "wq" => Self::Q,
                "k" | "key" | "k_proj" | "wk" => Self::K,
                "v" | "value" | "v_proj" | "wv" => Self::V,
                "o" | "projection" | "o_proj" | "out_proj" | "output_proj" | "wo" => Self::O,
                "gate" | "gate_proj" | "w1" => Self::GATE,
                "up" | "up_proj" | "w3" => Self::UP,
                "down" | "down_proj" | "w2" => Self::DOWN,
                "mlp" => Self::GATE | Self::UP | Self::DOWN,
                "attn" | "attention" => Self::Q | Self::K | Self::V | Self::O,
                "all" | "all-linear" | "all_linear" => Self::ALL.0,
                _ => {
                    return Err(WorkloadError::Unknown {
                        what: "LoRA target",
                        given: name.to_owned(),
                        expected: "q, k, v, o, gate, up, down, mlp, attn or all (PEFT's q_proj … names too)",
                    });
                }
            };
        }
        if bits == 0 {
            return Err(WorkloadError::Value {
                key: "lora_targets".to_owned(),
                given: v.to_owned(),
                expected: "at least one layer",
            });
        }
        Ok(Self(bits))
    }

    /// Whether a layer carries an adapter.
    #[must_use]
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// Activation checkpointing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Checkpointing {
    /// Keep every activation.
    None,
    /// Recompute part of each layer (see `memory` for what each framework keeps).
    Selective,
    /// Keep layer inputs only, recompute each layer in the backward pass.
    Full,
}

impl Checkpointing {
    /// Parse `none`, `selective`, `full`.
    pub fn parse(s: &str) -> Result<Self, WorkloadError> {
        match s {
            "none" | "false" | "off" | "no" => Ok(Self::None),
            "selective" | "op" => Ok(Self::Selective),
            "full" | "true" | "on" | "yes" => Ok(Self::Full),
            o => Err(WorkloadError::Unknown {
                what: "checkpointing",
                given: o.to_owned(),
                expected: "none, selective, full",
            }),
        }
    }
}

/// A workload. Fields left `None` take the defaults documented on [`Workload::set`] and in
/// docs/planner.md, and every default used is named in the plan's assumptions.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Workload {
    /// Mode.
    pub mode: Mode,
    /// The mode as given when it is a synonym that needs saying (`finetune` is full
    /// training, not adapters).
    #[serde(skip)]
    pub mode_given: Option<String>,
    /// Weight / arithmetic precision.
    pub precision: Option<Precision>,
    /// KV cache precision.
    pub kv_precision: Option<Precision>,
    /// Weights per scale group of int4 formats (`int4` alone means 128).
    pub group_size: Option<u32>,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Micro-batch per GPU (training) or concurrent sequences (inference).
    pub batch: Option<u32>,
    /// Gradient accumulation steps.
    pub ga: Option<u32>,
    /// Sequences per optimizer step, all GPUs.
    pub global_batch: Option<u32>,
    /// Training sequence length.
    pub seq: Option<u32>,
    /// Prompt tokens per request.
    pub prompt: Option<u32>,
    /// Generated tokens per request.
    pub output: Option<u32>,
    /// KV cache length per sequence (when sized to a context rather than prompt + output).
    pub context: Option<u32>,
    /// Activation checkpointing.
    pub checkpointing: Checkpointing,
    /// The optimizer steps each parameter during the backward pass and frees its gradient
    /// (torchtune's `optimizer_in_bwd`).
    pub optimizer_in_backward: bool,
    /// Gradients kept between optimizer steps: `zero_grad` zeroing them in place (PyTorch's
    /// default before 2.0, `set_to_none=False`) instead of freeing them.
    pub keep_gradients: bool,
    /// Whether `zero_grad` (or `set_to_none`) was given, so that a stated PyTorch release does
    /// not override it.
    pub zero_grad_given: bool,
    /// Whether the attention kernel was given (`flash_attention`, `attention`), likewise.
    pub attention_given: bool,
    /// The PyTorch release the workload ran on (`torch=1.13.1`), if stated.
    pub torch_version: Option<(u32, u32, u32)>,
    /// The transformers release, if stated.
    pub transformers_version: Option<(u32, u32, u32)>,
    /// PyTorch's multi-tensor (`foreach`) optimizer step, which holds one fp32 copy of the
    /// parameters as a workspace (`optimizer_impl=foreach`); fused kernels and per-parameter
    /// loops hold none (the default).
    pub foreach_optimizer: bool,
    /// Model states in host memory (FSDP `CPUOffload`, DeepSpeed ZeRO-Offload).
    pub cpu_offload: bool,
    /// Activations saved for the backward pass kept in host memory (torchtune's and TRL's
    /// `OffloadActivations`); the GPU holds the layer being recomputed or differentiated.
    pub activation_offload: bool,
    /// The loss upcasts its logits to fp32 in chunks (`Some(true)`: torchtune's
    /// `CEWithChunkedOutputLoss`) or all at once (`Some(false)`); `None`: by framework
    /// (chunked under torchtune).
    pub chunked_loss: Option<bool>,
    /// The head trained on top: `false` a language-model head (logits over the vocabulary,
    /// the default), `true` a classification head (a few labels per sequence or token).
    pub classification_head: bool,
    /// Flash / memory-efficient attention (no s² buffers).
    pub flash_attention: bool,
    /// `torch.compile` on (`Some(true)`) or off; `None`: not said. Under an eager framework
    /// (Hugging Face) it selects the large-model utilization instead of the eager step model.
    pub compile: Option<bool>,
    /// ZeRO stage (3 = FSDP full sharding).
    pub zero: u8,
    /// Tensor parallel degree.
    pub tp: u32,
    /// Pipeline parallel degree.
    pub pp: u32,
    /// Virtual pipeline stages per GPU (Megatron's interleaved schedule); 0 or 1: none.
    pub vp: u32,
    /// Context parallel degree: each sequence split over this many GPUs (ring attention).
    pub cp: u32,
    /// Data parallel degree.
    pub dp: Option<u32>,
    /// GPUs in all.
    pub gpus: Option<u32>,
    /// Tokens per optimizer step over all GPUs (`global_batch` × `seq`, as Megatron and
    /// torchtitan tables give it).
    pub global_batch_tokens: Option<f64>,
    /// LoRA rank.
    pub lora_rank: u32,
    /// The layers that carry adapters.
    pub lora_targets: LoraTargets,
    /// Framework (changes what "selective" checkpointing keeps, how the loss is computed and
    /// how mixed precision stores weights; see docs/planner.md).
    pub framework: Option<String>,
    /// Tokens to train on.
    pub train_tokens: Option<f64>,
    /// `offline` (max throughput) or `online`.
    pub scenario: Option<String>,
    /// Whether measured memory includes the CUDA context and allocator cache (NVML "used").
    pub includes_context: bool,
    /// Whether measured memory is the caching allocator's reserved pool (PyTorch's
    /// `max_memory_reserved`, what torchtitan logs): the allocated peak plus the cache, without
    /// the CUDA context.
    pub reserved_memory: bool,
    /// `model_states_only`: weights, gradients and optimizer states alone (the ZeRO paper).
    pub scope: Option<String>,
    /// Whether the file is a GGUF artifact (every tensor quantized).
    pub gguf: bool,
    /// GPU overrides: memory GB, bandwidth GB/s, power cap W.
    pub gpu_mem_gb: Option<f64>,
    /// Bandwidth override.
    pub gpu_bw_gb_s: Option<f64>,
    /// Power cap.
    pub gpu_power_w: Option<f64>,
    /// Dense TFLOPS per precision (`gpu_tflops_bf16`, …): a card the catalog lacks, or a
    /// figure that overrides the catalog's.
    pub gpu_tflops: gpuwise_catalog::DenseTflops,
    /// The architecture of a card given by its figures (selects the default utilization).
    pub gpu_architecture: Option<String>,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            mode: Mode::Infer,
            mode_given: None,
            precision: None,
            kv_precision: None,
            group_size: None,
            optimizer: Optimizer::AdamW,
            batch: None,
            ga: None,
            global_batch: None,
            seq: None,
            prompt: None,
            output: None,
            context: None,
            checkpointing: Checkpointing::None,
            optimizer_in_backward: false,
            keep_gradients: false,
            zero_grad_given: false,
            attention_given: false,
            torch_version: None,
            transformers_version: None,
            foreach_optimizer: false,
            cpu_offload: false,
            activation_offload: false,
            chunked_loss: None,
            classification_head: false,
            flash_attention: true,
            compile: None,
            zero: 0,
            tp: 1,
            pp: 1,
            vp: 1,
            cp: 1,
            dp: None,
            gpus: None,
            global_batch_tokens: None,
            lora_rank: 8,
            lora_targets: LoraTargets::ALL,
            framework: None,
            train_tokens: None,
            scenario: None,
            includes_context: false,
            reserved_memory: false,
            scope: None,
            gguf: false,
            gpu_mem_gb: None,
            gpu_bw_gb_s: None,
            gpu_power_w: None,
            gpu_tflops: gpuwise_catalog::DenseTflops::default(),
            gpu_architecture: None,
        }
    }
}

fn uint(key: &str, v: &str) -> Result<u32, WorkloadError> {
    if v == "0" {
        return Ok(0);
    }
    let x = crate::model::parse_count(v)
        .filter(|x| x.fract() == 0.0 && *x <= f64::from(u32::MAX))
        .ok_or_else(|| WorkloadError::Value {
            key: key.to_owned(),
            given: v.to_owned(),
            expected: "a positive whole number",
        })?;
    Ok(x as u32)
}

/// A count that cannot be zero (`batch=0`, `tp=0` were taken as 1 without a word).
fn positive(key: &str, v: &str) -> Result<u32, WorkloadError> {
    match uint(key, v)? {
        0 => Err(WorkloadError::Value {
            key: key.to_owned(),
            given: v.to_owned(),
            expected: "a whole number from 1",
        }),
        n => Ok(n),
    }
}

/// A release `major.minor[.patch]`, with a leading `v` and a local suffix (`2.11.0+cu130`,
/// `2.1.0a0`) allowed.
fn release(key: &str, v: &str) -> Result<(u32, u32, u32), WorkloadError> {
    let bad = || WorkloadError::Value {
        key: key.to_owned(),
        given: v.to_owned(),
        expected: "a release such as 2.1.1 or 4.41",
    };
    let core = v
        .trim_start_matches('v')
        .split(['+', '-'])
        .next()
        .unwrap_or("");
    let mut parts = core.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>()
    });
    let major = parts.next().ok_or_else(bad)?.map_err(|_| bad())?;
    let minor = parts.next().ok_or_else(bad)?.map_err(|_| bad())?;
    let patch = parts.next().map_or(Ok(0), |p| p.map_err(|_| bad()))?;
    Ok((major, minor, patch))
}

/// The frameworks built on Hugging Face transformers (eager PyTorch unless compiled).
pub const HF_FRAMEWORKS: &[&str] = &["hf", "transformers", "trl", "peft", "accelerate"];

fn float(key: &str, v: &str) -> Result<f64, WorkloadError> {
    crate::model::parse_count(v).ok_or_else(|| WorkloadError::Value {
        key: key.to_owned(),
        given: v.to_owned(),
        expected: "a positive number",
    })
}

fn boolean(key: &str, v: &str) -> Result<bool, WorkloadError> {
    match v {
        "true" | "yes" | "1" | "on" => Ok(true),
        "false" | "no" | "0" | "off" => Ok(false),
        _ => Err(WorkloadError::Value {
            key: key.to_owned(),
            given: v.to_owned(),
            expected: "true or false",
        }),
    }
}

/// The value of the first `(spellings, value)` pair that names `v`, else an error that says
/// what was `expected`.
fn choice<T: Copy>(
    key: &str,
    v: &str,
    pairs: &[(&[&str], T)],
    expected: &'static str,
) -> Result<T, WorkloadError> {
    pairs
        .iter()
        .find(|(names, _)| names.contains(&v))
        .map(|(_, value)| *value)
        .ok_or_else(|| WorkloadError::Value {
            key: key.to_owned(),
            given: v.to_owned(),
            expected,
        })
}

/// Keys that describe the model rather than the workload; [`Workload::set`] leaves them to
/// the caller (`plan validate` builds the model from them).
pub const MODEL_KEYS: &[&str] = &[
    "model", "params_b", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
];

/// Every key [`Workload::set`] reads (aliases included), for "did you mean" on an unknown one;
/// a test holds it to `set`.
pub const KEYS: &[&str] = &[
    "mode",
    "precision",
    "kv_precision",
    "group_size",
    "optimizer",
    "batch",
    "concurrency",
    "ga",
    "global_batch",
    "global_batch_tokens",
    "seq",
    "prompt",
    "output_tokens",
    "output",
    "context",
    "checkpointing",
    "zero_grad",
    "optimizer_impl",
    "torch",
    "pytorch",
    "torch_version",
    "transformers",
    "transformers_version",
    "lora_targets",
    "target_modules",
    "set_to_none",
    "optimizer_in_bwd",
    "optimizer_in_backward",
    "cpu_offload",
    "fsdp_cpu_offload",
    "activation_offload",
    "activation_offloading",
    "enable_activation_offloading",
    "flash_attention",
    "attention",
    "attn_implementation",
    "compile",
    "torch_compile",
    "zero",
    "fsdp",
    "tp",
    "pp",
    "vp",
    "virtual_pipeline",
    "virtual_pipeline_stages",
    "cp",
    "dp",
    "gpus",
    "lora_rank",
    "framework",
    "train_tokens",
    "scenario",
    "loss",
    "task_head",
    "includes_context",
    "memory_reading",
    "scope",
    "format",
    "gpu_mem_gb",
    "gpu_bw_gb_s",
    "gpu_power_w",
    "gpu_architecture",
    "gpu_tflops_fp32",
    "gpu_tflops_tf32",
    "gpu_tflops_fp16",
    "gpu_tflops_bf16",
    "gpu_tflops_fp8",
    "gpu_tflops_int8",
];

/// Keys naming the GPU; left to the caller like [`MODEL_KEYS`].
pub const GPU_KEYS: &[&str] = &["gpu", "gpu_note"];

impl Workload {
    /// Set one key. Returns `Ok(false)` for a key the planner does not use (the caller reports
    /// it as ignored), `Err` for a used key with a bad value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, WorkloadError> {
        let v = value.trim();
        match key {
            "mode" => {
                self.mode = Mode::parse(v)?;
                self.mode_given = (v == "finetune").then(|| v.to_owned());
            }
            "precision" => self.precision = Some(Precision::parse(v)?),
            "kv_precision" => self.kv_precision = Some(Precision::parse(v)?),
            "group_size" => self.group_size = Some(positive(key, v)?),
            "optimizer" => self.optimizer = Optimizer::parse(v)?,
            // Serving benchmarks' concurrency is the planner's batch: sequences in flight.
            "batch" | "concurrency" => self.batch = Some(positive(key, v)?),
            "global_batch_tokens" => self.global_batch_tokens = Some(float(key, v)?),
            "ga" => self.ga = Some(uint(key, v)?),
            "global_batch" => self.global_batch = Some(uint(key, v)?),
            "seq" => self.seq = Some(uint(key, v)?),
            "prompt" => self.prompt = Some(uint(key, v)?),
            "output_tokens" | "output" => self.output = Some(uint(key, v)?),
            "context" => {
                // `context=0`: no prompt in the KV cache (llama-bench tg128).
                self.context = Some(uint(key, v)?);
            }
            "checkpointing" => self.checkpointing = Checkpointing::parse(v)?,
            "optimizer_in_bwd" | "optimizer_in_backward" => {
                self.optimizer_in_backward = boolean(key, v)?;
            }
            "cpu_offload" | "fsdp_cpu_offload" => self.cpu_offload = boolean(key, v)?,
            "activation_offload" | "activation_offloading" | "enable_activation_offloading" => {
                self.activation_offload = boolean(key, v)?;
            }
            "flash_attention" => {
                self.flash_attention = boolean(key, v)?;
                self.attention_given = true;
            }
            "compile" | "torch_compile" => self.compile = Some(boolean(key, v)?),
            "zero" => {
                let z = uint(key, v)?;
                if z > 3 {
                    return Err(WorkloadError::Value {
                        key: key.to_owned(),
                        given: v.to_owned(),
                        expected: "a ZeRO stage: 0, 1, 2, 3",
                    });
                }
                self.zero = z as u8;
            }
            "fsdp" => {
                if boolean(key, v)? {
                    self.zero = 3;
                }
            }
            "tp" => self.tp = positive(key, v)?,
            "pp" => self.pp = positive(key, v)?,
            "vp" | "virtual_pipeline" | "virtual_pipeline_stages" => self.vp = positive(key, v)?,
            "cp" => self.cp = positive(key, v)?,
            "dp" => self.dp = Some(positive(key, v)?),
            "gpus" => self.gpus = Some(positive(key, v)?),
            "lora_rank" => self.lora_rank = positive(key, v)?,
            "framework" => self.framework = Some(v.to_ascii_lowercase()),
            "train_tokens" => self.train_tokens = Some(float(key, v)?),
            "scenario" => self.scenario = Some(v.to_ascii_lowercase()),
            _ => return self.set_head_and_reading(key, v),
        }
        Ok(true)
    }

    /// [`Workload::set`] for the loss and task head, and the keys that say how a measurement
    /// was read or what the GPU was (`plan validate`'s cases).
    fn set_head_and_reading(&mut self, key: &str, v: &str) -> Result<bool, WorkloadError> {
        match key {
            "loss" => {
                self.chunked_loss = Some(choice(
                    key,
                    v,
                    &[
                        (&["chunked", "chunked_ce", "CEWithChunkedOutputLoss"], true),
                        (&["full", "ce", "cross_entropy", "CrossEntropyLoss"], false),
                    ],
                    "chunked or full",
                )?);
            }
            "task_head" => {
                self.classification_head = choice(
                    key,
                    v,
                    &[
                        (&["lm", "causal-lm", "mlm", "masked-lm"], false),
                        (
                            &[
                                "seq-classification",
                                "sequence-classification",
                                "token-classification",
                                "classification",
                            ],
                            true,
                        ),
                    ],
                    "lm, mlm, seq-classification or token-classification",
                )?;
            }
            "includes_context" => self.includes_context = boolean(key, v)?,
            "memory_reading" => {
                (self.reserved_memory, self.includes_context) = choice(
                    key,
                    v,
                    &[
                        (
                            &["allocated", "active", "max_memory_allocated"],
                            (false, false),
                        ),
                        (&["reserved", "max_memory_reserved"], (true, false)),
                        (&["used", "nvml"], (false, true)),
                    ],
                    "allocated, reserved or used",
                )?;
            }
            "scope" => self.scope = Some(v.to_owned()),
            "format" => self.gguf = v.eq_ignore_ascii_case("gguf"),
            "gpu_mem_gb" => self.gpu_mem_gb = Some(float(key, v)?),
            "gpu_bw_gb_s" => self.gpu_bw_gb_s = Some(float(key, v)?),
            "gpu_power_w" => self.gpu_power_w = Some(float(key, v)?),
            "gpu_architecture" => self.gpu_architecture = Some(v.to_owned()),
            _ => return self.set_step(key, v),
        }
        Ok(true)
    }

    /// [`Workload::set`] for how the framework runs a step: attention kernels, what
    /// `zero_grad` does, the optimizer's implementation.
    fn set_step(&mut self, key: &str, v: &str) -> Result<bool, WorkloadError> {
        match key {
            // Hugging Face's `attn_implementation`: every fused kernel keeps no score matrices.
            "attention" | "attn_implementation" => {
                self.attention_given = true;
                self.flash_attention = choice(
                    key,
                    v,
                    &[
                        (&["eager"], false),
                        (
                            &[
                                "sdpa",
                                "flash",
                                "flash_attention_2",
                                "flash_attention_3",
                                "flex_attention",
                                "xformers",
                                "mem_efficient",
                            ],
                            true,
                        ),
                    ],
                    "eager, sdpa, flash_attention_2, flash_attention_3, flex_attention or xformers",
                )?;
            }
            "zero_grad" => {
                self.zero_grad_given = true;
                self.keep_gradients = choice(
                    key,
                    v,
                    &[
                        (&["keep", "zero", "in_place"], true),
                        (&["free", "none", "set_to_none"], false),
                    ],
                    "keep (zeroed in place, PyTorch before 2.0) or free (set to None)",
                )?;
            }
            "set_to_none" => {
                self.keep_gradients = !boolean(key, v)?;
                self.zero_grad_given = true;
            }
            "torch" | "pytorch" | "torch_version" => self.torch_version = Some(release(key, v)?),
            "transformers" | "transformers_version" => {
                self.transformers_version = Some(release(key, v)?);
            }
            "lora_targets" | "target_modules" => self.lora_targets = LoraTargets::parse(v)?,
            "optimizer_impl" => {
                self.foreach_optimizer = choice(
                    key,
                    v,
                    &[
                        (&["foreach"], true),
                        (&["fused", "for_loop", "loop"], false),
                    ],
                    "foreach, fused or for_loop",
                )?;
            }
            _ => return self.set_tflops(key, v),
        }
        Ok(true)
    }

    /// `gpu_tflops_<precision>`: a dense TFLOPS figure of the case's GPU.
    fn set_tflops(&mut self, key: &str, v: &str) -> Result<bool, WorkloadError> {
        let t = &mut self.gpu_tflops;
        let slot = match key {
            "gpu_tflops_fp32" => &mut t.fp32,
            "gpu_tflops_tf32" => &mut t.tf32,
            "gpu_tflops_fp16" => &mut t.fp16,
            "gpu_tflops_bf16" => &mut t.bf16,
            "gpu_tflops_fp8" => &mut t.fp8,
            "gpu_tflops_int8" => &mut t.int8,
            _ => return Ok(false),
        };
        *slot = Some(float(key, v)?);
        Ok(true)
    }

    /// The precision in effect: as given, else `amp_bf16` for training, `bf16` for LoRA and
    /// inference, `nf4` for QLoRA.
    #[must_use]
    pub fn precision(&self) -> Precision {
        match self.precision {
            Some(Precision::Int4 { group }) => Precision::Int4 {
                group: self.group_size.unwrap_or(group),
            },
            Some(p) => p,
            None => match self.mode {
                Mode::Train => Precision::AmpBf16,
                Mode::Lora | Mode::Infer => Precision::Bf16,
                Mode::Qlora => Precision::Nf4,
            },
        }
    }

    /// The workload with what a stated PyTorch or transformers release implies where the
    /// workload does not say it itself, and a note for each. `bert`: the model's family
    /// ([`crate::Model::family`], Hugging Face's `model_type`) is `bert`, whose SDPA attention
    /// came later than the decoders'. Other encoder families (RoBERTa, DeBERTa, …) have their
    /// own release histories, not modelled: for them only the general rules apply.
    ///
    /// - PyTorch before 2.0: `zero_grad` zeroes gradients in place and keeps them
    ///   (`set_to_none=True` became its default in 2.0).
    /// - transformers before 4.36 (SDPA by default from then, huggingface/transformers#28005),
    ///   BERT before 4.41 (huggingface/transformers#28802, merged April 2024), or a
    ///   transformers-based framework on PyTorch before 2.1.1 (transformers picks SDPA by
    ///   default only from 2.1.1): eager attention, whose score matrices are kept.
    #[must_use]
    pub fn with_releases(&self, bert: bool) -> (Workload, Vec<String>) {
        let show = |(a, b, c): (u32, u32, u32)| format!("{a}.{b}.{c}");
        let mut w = self.clone();
        let mut notes = Vec::new();
        if let Some(t) = self.torch_version
            && t < (2, 0, 0)
            && !self.zero_grad_given
        {
            w.keep_gradients = true;
            notes.push(format!(
                "PyTorch {}: zero_grad keeps the gradients between steps (set_to_none became its default in 2.0)",
                show(t)
            ));
        }
        let eager = match (self.transformers_version, self.torch_version) {
            (Some(v), _) if v < (4, 36, 0) => Some(format!(
                "transformers {}: eager attention (SDPA is its default from 4.36)",
                show(v)
            )),
            (Some(v), _) if bert && v < (4, 41, 0) => Some(format!(
                "transformers {}: BERT's eager attention (its SDPA is from 4.41)",
                show(v)
            )),
            (_, Some(t)) if t < (2, 1, 1) && self.framework_is(HF_FRAMEWORKS) => Some(format!(
                "PyTorch {}: eager attention (transformers picks SDPA by default from torch 2.1.1)",
                show(t)
            )),
            _ => None,
        };
        if let Some(note) = eager.filter(|_| !self.attention_given) {
            w.flash_attention = false;
            notes.push(note);
        }
        (w, notes)
    }

    /// Sequences per optimizer step over all GPUs: `global_batch`, else
    /// `global_batch_tokens` ÷ `seq`.
    #[must_use]
    pub fn global_sequences(&self, seq: u32) -> Option<u32> {
        self.global_batch.or_else(|| {
            self.global_batch_tokens
                .map(|t| (t / f64::from(seq.max(1))).round() as u32)
        })
    }

    /// Whether this framework is named (`torchtitan`, `megatron`, …).
    #[must_use]
    pub fn framework_is(&self, names: &[&str]) -> bool {
        self.framework
            .as_deref()
            .is_some_and(|f| names.iter().any(|n| f.starts_with(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_per_weight() {
        let b = |s: &str| Precision::parse(s).expect("known").weight_bits();
        assert_eq!(b("q8_0"), 8.5);
        assert_eq!(b("q4_0"), 4.5);
        assert_eq!(b("int4"), 4.25);
        assert_eq!(b("int4_g32"), 5.0);
        assert!((b("nf4") - 4.127).abs() < 1e-3);
        assert_eq!(b("amp_bf16"), 16.0);
        assert!(Precision::parse("int3").is_err());
    }

    #[test]
    fn a_stated_release_sets_what_that_release_did_unless_the_workload_says_it() {
        let read = |kv: &[(&str, &str)], bert: bool| {
            let mut w = Workload::default();
            for (k, v) in kv {
                assert_eq!(w.set(k, v), Ok(true), "{k}");
            }
            w.with_releases(bert)
        };
        assert_eq!(release("torch", "2.11.0+cu130"), Ok((2, 11, 0)));
        assert_eq!(release("torch", "v1.13"), Ok((1, 13, 0)));
        assert_eq!(release("torch", "2.1.0a0"), Ok((2, 1, 0)));
        assert!(release("torch", "latest").is_err() && release("torch", "2").is_err());
        // Hugging Face's 2022 anatomy runs: PyTorch 1.x, transformers 4.2x, BERT.
        let (w, notes) = read(&[("torch", "1.13.1"), ("transformers", "4.26.0")], true);
        assert!(w.keep_gradients && !w.flash_attention, "{notes:?}");
        assert_eq!(notes.len(), 2);
        // BERT's SDPA came in 4.41, the decoders' in 4.36.
        let (w, _) = read(&[("transformers", "4.38.2")], true);
        assert!(!w.flash_attention);
        let (w, _) = read(&[("transformers", "4.38.2")], false);
        assert!(w.flash_attention);
        // transformers on PyTorch before 2.1.1 runs eager attention; Megatron is not told so.
        let (w, _) = read(&[("torch", "2.0.1"), ("framework", "hf")], false);
        assert!(!w.flash_attention && !w.keep_gradients);
        let (w, _) = read(&[("torch", "2.0.1"), ("framework", "megatron")], false);
        assert!(w.flash_attention);
        // What the workload says itself wins, in either order.
        for kv in [
            [("torch", "1.13"), ("zero_grad", "free")],
            [("zero_grad", "free"), ("torch", "1.13")],
        ] {
            assert!(!read(&kv, false).0.keep_gradients);
        }
        let (w, notes) = read(&[("transformers", "4.26"), ("attention", "sdpa")], true);
        assert!(w.flash_attention && notes.is_empty());
        // Today's releases change nothing.
        let (w, notes) = read(&[("torch", "2.11.0"), ("transformers", "5.17.0")], true);
        assert!(w.flash_attention && !w.keep_gradients && notes.is_empty());
    }

    #[test]
    fn keys_set_report_unknowns_and_reject_bad_values() {
        let mut w = Workload::default();
        assert_eq!(w.set("batch", "8"), Ok(true));
        assert_eq!(w.batch, Some(8));
        assert_eq!(w.set("compile", "true"), Ok(true));
        assert_eq!(w.compile, Some(true));
        assert_eq!(w.set("no_such_key", "1"), Ok(false));
        for k in KEYS {
            let mut w = Workload::default();
            // Each key is read: a value it cannot take is an error, never "not mine".
            assert_ne!(w.set(k, "\u{1}"), Ok(false), "{k}");
        }
        let err = w.set("batch", "eight").expect_err("not a number");
        assert_eq!(
            err.to_string(),
            "batch=`eight`: expected a positive whole number"
        );
        assert!(matches!(err, WorkloadError::Value { .. }));
        assert!(w.set("zero", "4").is_err());
        assert!(matches!(
            w.set("mode", "fly"),
            Err(WorkloadError::Unknown { what: "mode", .. })
        ));
        assert_eq!(w.set("train_tokens", "2e12"), Ok(true));
        assert_eq!(w.train_tokens, Some(2e12));
    }
}
