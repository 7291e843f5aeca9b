//! Model descriptions: the architecture numbers the memory and throughput terms need.
//!
//! Three ways in: a built-in preset (`data/models.csv`, each row with its source), a Hugging
//! Face `config.json` ([`Model::from_hf_config`]), or a bare parameter count
//! ([`Model::from_params`]) whose missing shape is filled by stated assumptions.

use serde::{Deserialize, Serialize};

/// Feed-forward block shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnKind {
    /// Two matrices and an activation (GPT, BERT, MPT).
    Plain,
    /// Three matrices, gate ⊙ up (SwiGLU / GeGLU: Llama, Mistral, Qwen, Gemma).
    Gated,
}

/// A transformer's architecture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Model {
    /// Name (`llama-3-70b`).
    pub name: String,
    /// Architecture family as Hugging Face's `config.json` names it (`model_type`: `bert`,
    /// `llama`, …); empty when unknown. Release rules that differ by architecture read it
    /// ([`crate::workload::Workload::with_releases`]), never the name.
    pub family: String,
    /// Total parameters (all experts of a mixture).
    pub params: f64,
    /// Transformer blocks.
    pub layers: u32,
    /// Model width.
    pub hidden: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (= heads for multi-head, fewer for grouped-query, 1 for multi-query).
    pub kv_heads: u32,
    /// Width of one head.
    pub head_dim: u32,
    /// Feed-forward width (of one expert).
    pub ffn: u32,
    /// Feed-forward shape.
    pub ffn_kind: FfnKind,
    /// Vocabulary (0 if unknown).
    pub vocab: u32,
    /// Longest context it was trained for.
    pub max_context: Option<u32>,
    /// Experts per MoE layer (1 = dense).
    pub experts: u32,
    /// Experts each token is routed to.
    pub active_experts: u32,
    /// Input embedding and output projection share one matrix.
    pub tied_embeddings: bool,
    /// Where the numbers come from.
    pub source: String,
    /// What was assumed rather than read.
    pub assumptions: Vec<String>,
}

const PRESETS: &str = include_str!("../data/models.csv");

#[derive(Deserialize)]
struct Row {
    name: String,
    family: String,
    params_b: f64,
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: Option<u32>,
    ffn: u32,
    ffn_kind: FfnKind,
    vocab: Option<u32>,
    max_context: Option<u32>,
    experts: Option<u32>,
    active_experts: Option<u32>,
    tied_embeddings: bool,
    source: String,
    as_of: String,
}

/// Why a model description could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    /// No preset of that name.
    #[error(
        "no built-in model `{name}`; did you mean {near}? ({count} are built in: `plan models` lists them)"
    )]
    Unknown {
        /// Asked name.
        name: String,
        /// The nearest preset names.
        near: String,
        /// Presets in all.
        count: usize,
    },
    /// A config.json that does not describe a transformer we can size.
    #[error("{origin}: {message}")]
    Config {
        /// File.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A parameter count that is not one.
    #[error("--params `{0}`: expected a count such as 7b, 350m or 6.7e9")]
    Params(String),
}

/// What is impossible about an attention shape, if anything.
fn shape_error(hidden: u32, heads: u32, kv_heads: u32, head_dim: u32) -> Option<String> {
    if hidden < heads {
        return Some(format!(
            "a hidden size of {hidden} with {heads} heads leaves no dimension per head"
        ));
    }
    if kv_heads == 0 || kv_heads > heads {
        return Some(format!(
            "{kv_heads} key/value heads for {heads} attention heads (from 1 to {heads})"
        ));
    }
    (head_dim == 0).then(|| "`head_dim` must be positive".to_owned())
}

impl Model {
    /// Every built-in preset, in file order.
    ///
    /// # Panics
    /// Never for the shipped file (a unit test parses it).
    #[must_use]
    pub fn presets() -> Vec<Model> {
        let mut r = csv::Reader::from_reader(PRESETS.as_bytes());
        r.deserialize::<Row>()
            .map(|row| {
                #[allow(clippy::expect_used)]
                let row = row.expect("built-in models.csv parses (unit-tested)");
                let head_dim = row.head_dim.unwrap_or(row.hidden / row.heads.max(1));
                Model {
                    name: row.name,
                    family: row.family,
                    params: row.params_b * 1e9,
                    layers: row.layers,
                    hidden: row.hidden,
                    heads: row.heads,
                    kv_heads: row.kv_heads,
                    head_dim,
                    ffn: row.ffn,
                    ffn_kind: row.ffn_kind,
                    vocab: row.vocab.unwrap_or(0),
                    max_context: row.max_context,
                    experts: row.experts.unwrap_or(1).max(1),
                    active_experts: row.active_experts.unwrap_or(1).max(1),
                    tied_embeddings: row.tied_embeddings,
                    source: format!("{} (as of {})", row.source, row.as_of),
                    assumptions: Vec::new(),
                }
            })
            .collect()
    }

    /// The preset called `name` (case and `_`/`-` folded).
    pub fn preset(name: &str) -> Result<Model, ModelError> {
        let fold = |s: &str| s.to_ascii_lowercase().replace('_', "-");
        let want = fold(name);
        let all = Self::presets();
        all.iter()
            .find(|m| fold(&m.name) == want)
            .cloned()
            .ok_or_else(|| ModelError::Unknown {
                name: name.to_owned(),
                near: gpuwise_catalog::nearest_names(name, all.iter().map(|m| m.name.as_str()))
                    .join(", "),
                count: all.len(),
            })
    }

    /// A model from a Hugging Face `config.json` (Llama, Mistral, Mixtral, Qwen, Gemma, GPT-2,
    /// GPT-NeoX, MPT, BERT, OPT key spellings). The parameter count is computed from the shape.
    pub fn from_hf_config(text: &str, origin: &str) -> Result<Model, ModelError> {
        let err = |message: String| ModelError::Config {
            origin: origin.to_owned(),
            message,
        };
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| err("not a JSON object".to_owned()))?;
        // Multimodal configs nest the language model.
        let obj = obj
            .get("text_config")
            .and_then(serde_json::Value::as_object)
            .unwrap_or(obj);
        // A field that is there must be a whole number that fits: an oversized `vocab_size`
        // read as "absent" left the embeddings out without a word.
        let int = |keys: &[&str]| -> Result<Option<u32>, ModelError> {
            keys.iter()
                .find_map(|k| obj.get(*k).filter(|v| !v.is_null()).map(|v| (k, v)))
                .map(|(k, v)| {
                    v.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| {
                            err(format!(
                                "`{k}` = {v} is not a whole number from 0 to 4294967295"
                            ))
                        })
                })
                .transpose()
        };
        let need = |keys: &[&str]| {
            int(keys)?.ok_or_else(|| err(format!("no `{}` (a positive integer)", keys[0])))
        };
        let mut assumptions = Vec::new();
        let layers = need(&["num_hidden_layers", "n_layer", "n_layers", "num_layers"])?;
        let hidden = need(&["hidden_size", "n_embd", "d_model", "dim"])?;
        let heads = need(&["num_attention_heads", "n_head", "n_heads"])?;
        if layers == 0 || hidden == 0 || heads == 0 {
            return Err(err(
                "layers, hidden size and heads must be positive".to_owned()
            ));
        }
        let kv_heads = int(&["num_key_value_heads", "n_kv_heads", "num_kv_heads"])?
            .or_else(|| {
                obj.get("multi_query")
                    .and_then(serde_json::Value::as_bool)
                    .filter(|b| *b)
                    .map(|_| 1)
            })
            .unwrap_or(heads);
        let head_dim = int(&["head_dim"])?.unwrap_or(hidden / heads);
        shape_error(hidden, heads, kv_heads, head_dim).map_or(Ok(()), |why| Err(err(why)))?;
        let ffn = match int(&["intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"])? {
            Some(f) => f,
            None => ffn_from_ratio(obj, hidden, &mut assumptions),
        };
        let model_type = obj
            .get("model_type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let act = obj
            .get("hidden_act")
            .or_else(|| obj.get("hidden_activation"))
            .or_else(|| obj.get("activation_function"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let gated = gated_ffn(model_type, act);
        let vocab = int(&["vocab_size", "padded_vocab_size"])?.unwrap_or(0);
        if vocab == 0 {
            assumptions.push("no vocab_size: embedding and output terms left out".to_owned());
        }
        let experts = int(&["num_local_experts", "num_experts", "n_routed_experts"])?.unwrap_or(1);
        let active = int(&["num_experts_per_tok", "moe_top_k"])?.unwrap_or(1);
        let tied = obj
            .get("tie_word_embeddings")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true);
        let name = config_name(obj, model_type, origin);
        let mut m = Model {
            name,
            family: model_type.to_owned(),
            params: 0.0,
            layers,
            hidden,
            heads,
            kv_heads: kv_heads.max(1),
            head_dim,
            ffn,
            ffn_kind: if gated {
                FfnKind::Gated
            } else {
                FfnKind::Plain
            },
            vocab,
            max_context: int(&["max_position_embeddings", "n_positions", "max_seq_len"])?,
            experts: experts.max(1),
            active_experts: active.clamp(1, experts.max(1)),
            tied_embeddings: tied,
            source: format!("{origin} (parameters computed from the shape; biases left out)"),
            assumptions,
        };
        m.params = m.shape_params();
        Ok(m)
    }

    /// A model known only by its parameter count (`7b`, `350m`, `6.7e9`). The shape is assumed
    /// Llama-like: width from N ≈ 12·L·h² with L = h/128 (Kaplan et al. 2020's aspect ratio),
    /// head width 128, multi-head attention (the most KV cache), a gated feed-forward 8/3 × h
    /// wide, a 32,000-token vocabulary, untied embeddings. Every one of these is listed in
    /// `assumptions`.
    pub fn from_params(text: &str) -> Result<Model, ModelError> {
        let params = parse_count(text).ok_or_else(|| ModelError::Params(text.to_owned()))?;
        if !(1e6..=1e13).contains(&params) {
            return Err(ModelError::Params(text.to_owned()));
        }
        let h_raw = (params * 128.0 / 12.0).cbrt();
        let hidden = ((h_raw / 128.0).round().max(1.0) * 128.0) as u32;
        let heads = hidden / 128;
        let layers =
            ((params / (12.0 * f64::from(hidden) * f64::from(hidden))).round() as u32).max(1);
        let ffn = ((f64::from(hidden) * 8.0 / 3.0 / 256.0).round() * 256.0) as u32;
        Ok(Model {
            name: format!("{text} parameters"),
            family: String::new(),
            params,
            layers,
            hidden,
            heads,
            kv_heads: heads,
            head_dim: 128,
            ffn,
            ffn_kind: FfnKind::Gated,
            vocab: 32_000,
            max_context: None,
            experts: 1,
            active_experts: 1,
            tied_embeddings: false,
            source: "parameter count given on the command line".to_owned(),
            assumptions: vec![format!(
                "shape assumed Llama-like: {layers} layers × {hidden} wide (N ≈ 12·L·h², L = h/128), \
                 {heads} heads of 128, multi-head attention (no GQA: the largest KV cache), gated \
                 feed-forward {ffn} wide, vocabulary 32,000, untied embeddings"
            )],
        })
    }

    /// Parameters of one feed-forward expert.
    #[must_use]
    pub fn ffn_params(&self) -> f64 {
        let mats = match self.ffn_kind {
            FfnKind::Plain => 2.0,
            FfnKind::Gated => 3.0,
        };
        mats * f64::from(self.hidden) * f64::from(self.ffn)
    }

    /// Parameters of one block's attention projections.
    #[must_use]
    pub fn attention_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let q = f64::from(self.heads * self.head_dim);
        let kv = f64::from(self.kv_heads * self.head_dim);
        2.0 * h * q + 2.0 * h * kv
    }

    /// One embedding matrix (vocab × hidden).
    #[must_use]
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// Parameters counted from the shape (no biases, no learned positions): how presets are
    /// checked and how `config.json` models are sized.
    #[must_use]
    pub fn shape_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let router = if self.experts > 1 {
            h * f64::from(self.experts)
        } else {
            0.0
        };
        let block = self.attention_params()
            + f64::from(self.experts) * self.ffn_params()
            + router
            + 2.0 * h;
        let emb = self.embedding_params() * if self.tied_embeddings { 1.0 } else { 2.0 };
        emb + f64::from(self.layers) * block + h
    }

    /// Parameters in the transformer blocks' linear layers (what weight quantization touches).
    #[must_use]
    pub fn block_linear_params(&self) -> f64 {
        (self.params - self.embedding_params() * if self.tied_embeddings { 1.0 } else { 2.0 })
            .max(0.0)
    }

    /// Parameters a token touches: all but the experts it is not routed to.
    #[must_use]
    pub fn active_params(&self) -> f64 {
        let idle = f64::from(self.experts - self.active_experts.min(self.experts));
        self.params - f64::from(self.layers) * idle * self.ffn_params()
    }

    /// Parameters in matrix multiplies per token: the active parameters less the input
    /// embedding, which is a lookup (a tied matrix still multiplies once, as the output layer).
    #[must_use]
    pub fn matmul_params(&self) -> f64 {
        let lookup = if self.tied_embeddings {
            0.0
        } else {
            self.embedding_params()
        };
        (self.active_params() - lookup).max(0.0)
    }

    /// Key and value elements stored per token (all layers).
    #[must_use]
    pub fn kv_elems_per_token(&self) -> f64 {
        2.0 * f64::from(self.layers) * f64::from(self.kv_heads) * f64::from(self.head_dim)
    }
}

/// `7b`, `7B`, `350m`, `1.5t`, `6.7e9`, `7000000000`.
#[must_use]
pub fn parse_count(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_lowercase() {
        'k' => (&s[..s.len() - 1], 1e3),
        'm' => (&s[..s.len() - 1], 1e6),
        'b' => (&s[..s.len() - 1], 1e9),
        't' => (&s[..s.len() - 1], 1e12),
        _ => (s, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v * mult)
}

/// Whether the feed-forward block is gated (SwiGLU, GeGLU): by model type, else activation.
fn gated_ffn(model_type: &str, act: &str) -> bool {
    matches!(
        model_type,
        "llama"
            | "mistral"
            | "mixtral"
            | "qwen2"
            | "qwen2_moe"
            | "qwen3"
            | "gemma"
            | "gemma2"
            | "gemma3_text"
            | "phi3"
            | "olmo2"
            | "deepseek_v2"
            | "deepseek_v3"
            | "granite"
    ) || act.contains("glu")
        || (act == "silu" && model_type != "gpt_neox")
}

/// A config's name: `_name_or_path`, else its model type, else where it came from.
fn config_name(
    obj: &serde_json::Map<String, serde_json::Value>,
    model_type: &str,
    origin: &str,
) -> String {
    obj.get("_name_or_path")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(
            || {
                if model_type.is_empty() {
                    origin.to_owned()
                } else {
                    model_type.to_owned()
                }
            },
            str::to_owned,
        )
}

/// The feed-forward width from an `expansion_ratio` (MPT), else 4 × hidden (said so).
fn ffn_from_ratio(
    obj: &serde_json::Map<String, serde_json::Value>,
    hidden: u32,
    assumptions: &mut Vec<String>,
) -> u32 {
    let ratio = obj
        .get("expansion_ratio")
        .and_then(serde_json::Value::as_f64);
    if ratio.is_none() {
        assumptions.push("feed-forward width not given: 4 × hidden".to_owned());
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let w = (f64::from(hidden) * ratio.unwrap_or(4.0)).round() as u32;
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_their_shapes_add_up_to_their_parameter_counts() {
        let all = Model::presets();
        assert!(all.len() >= 25);
        for m in &all {
            let rel = m.shape_params() / m.params - 1.0;
            // Biases, poolers and learned positions are not in the shape count: within 1 %.
            assert!(
                rel.abs() < 0.01,
                "{}: shape {} vs {}",
                m.name,
                m.shape_params(),
                m.params
            );
            assert!(!m.source.is_empty());
        }
    }

    #[test]
    fn moe_active_parameters() {
        let m = Model::preset("mixtral-8x7b").expect("preset");
        // Mistral AI: 46.7B total, 12.9B active per token.
        assert!(
            (m.active_params() / 1e9 - 12.88).abs() < 0.05,
            "{}",
            m.active_params()
        );
        assert!((m.params / 1e9 - 46.70).abs() < 0.01);
    }

    #[test]
    fn matmul_parameters_leave_out_the_input_lookup() {
        let m = Model::preset("llama-3-8b").expect("preset");
        let emb = 128_256.0 * 4096.0;
        assert!((m.matmul_params() - (m.params - emb)).abs() < 1.0);
        let tied = Model::preset("llama-3.2-1b").expect("preset");
        assert!((tied.matmul_params() - tied.params).abs() < 1.0);
    }

    #[test]
    fn hf_config_of_llama_3_8b() {
        let cfg = r#"{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,
            "max_position_embeddings":8192,"model_type":"llama","num_attention_heads":32,
            "num_hidden_layers":32,"num_key_value_heads":8,"tie_word_embeddings":false,
            "vocab_size":128256,"hidden_act":"silu","_name_or_path":"meta-llama/Meta-Llama-3-8B"}"#;
        let m = Model::from_hf_config(cfg, "config.json").expect("parses");
        assert_eq!(m.params.round(), 8_030_261_248.0);
        assert_eq!(
            (m.kv_heads, m.head_dim, m.ffn_kind),
            (8, 128, FfnKind::Gated)
        );
        assert_eq!(m.name, "meta-llama/Meta-Llama-3-8B");
    }

    #[test]
    fn hf_config_errors_name_the_file_and_key() {
        let e = Model::from_hf_config(r#"{"hidden_size": 10}"#, "cfg.json").expect_err("bad");
        assert_eq!(
            e.to_string(),
            "cfg.json: no `num_hidden_layers` (a positive integer)"
        );
        let e = Model::from_hf_config("{", "cfg.json").expect_err("bad");
        assert!(e.to_string().starts_with("cfg.json: not JSON"));
    }

    #[test]
    fn bare_parameter_counts() {
        assert_eq!(parse_count("7b"), Some(7e9));
        assert_eq!(parse_count("350M"), Some(3.5e8));
        assert_eq!(parse_count("6.7e9"), Some(6.7e9));
        assert_eq!(parse_count("seven"), None);
        let m = Model::from_params("7b").expect("7b");
        let n = 12.0 * f64::from(m.layers) * f64::from(m.hidden).powi(2);
        assert!(
            (n / 7e9 - 1.0).abs() < 0.1,
            "{} layers × {}",
            m.layers,
            m.hidden
        );
        assert!(!m.assumptions.is_empty());
        assert!(Model::from_params("0").is_err());
    }

    /// A config whose numbers cannot be a model is an error naming the field, never a model
    /// with the embeddings quietly left out (an oversized `vocab_size` read as absent) or
    /// with no dimension per head.
    #[test]
    fn impossible_hf_configs_are_errors() {
        let base = r#""num_hidden_layers": 32, "num_attention_heads": 32"#;
        let err = |extra: &str| {
            Model::from_hf_config(&format!("{{{base}, {extra}}}"), "c.json")
                .expect_err("impossible")
                .to_string()
        };
        assert!(
            err(r#""hidden_size": 4096, "vocab_size": 99999999999"#)
                .contains("`vocab_size` = 99999999999 is not a whole number")
        );
        assert!(
            err(r#""hidden_size": 4096, "head_dim": 0"#).contains("`head_dim` must be positive")
        );
        assert!(err(r#""hidden_size": 1"#).contains("a hidden size of 1 with 32 heads"));
        assert!(
            err(r#""hidden_size": 4096, "num_key_value_heads": 64"#)
                .contains("64 key/value heads for 32")
        );
        assert!(err(r#""hidden_size": 4096, "vocab_size": -5"#).contains("`vocab_size` = -5"));
        assert!(
            Model::from_hf_config(
                &format!("{{{base}, \"hidden_size\": 4096, \"vocab_size\": null}}"),
                "c.json"
            )
            .is_ok()
        );
    }
}
