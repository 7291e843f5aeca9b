//! `plan validate`: the planner against measured numbers.
//!
//! Cases are rows `id,metric,measured,unit,workload,tolerance_pct,source,trust` (the format of
//! shared/data/planner-calibration.csv), optionally followed by `class` (the workload class a
//! case stands for, reported together); `workload` is `key=value;…`. Each case is estimated
//! with the same model and constants as `plan`; a case that cannot be estimated is kept with
//! its reason and counts as outside its tolerance.

use serde::Serialize;

use super::model::{FfnKind, Model, parse_count};
use super::perf::{self, Constants};
use super::workload::{GPU_KEYS, MODEL_KEYS, Mode, Workload};
use super::{Hardware, Setup, memory};
use gpuwise_catalog::Catalog;
use gpuwise_core::records::record_line;

/// One case as read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Case {
    /// Case id.
    pub id: String,
    /// Metric name.
    pub metric: String,
    /// Measured value.
    pub measured: f64,
    /// Unit of `measured`.
    pub unit: String,
    /// `key=value;…`.
    pub workload: String,
    /// Tolerance, percent.
    pub tolerance_pct: f64,
    /// Where the measurement comes from.
    pub source: String,
    /// How far it can be trusted.
    pub trust: String,
    /// The workload class it stands for (empty when the file has no `class` column).
    pub class: String,
}

/// Why the cases file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    /// CSV structure.
    #[error("{origin}: line {line}: {message}")]
    Row {
        /// File.
        origin: String,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Header.
    #[error("{origin}: header must be `{HEADER}` (optionally `,class`), found `{found}`")]
    Header {
        /// File.
        origin: String,
        /// What was found.
        found: String,
    },
}

/// The header a cases file starts with.
pub const HEADER: &str = "id,metric,measured,unit,workload,tolerance_pct,source,trust";

/// Memory metrics (the rest are throughput).
pub const MEMORY_METRICS: &[&str] = &[
    "train_peak_memory",
    "infer_peak_memory",
    "weights_memory",
    "kv_cache_memory",
];

/// Throughput metrics.
pub const THROUGHPUT_METRICS: &[&str] = &[
    "train_tokens_per_s_per_gpu",
    "train_mfu",
    "decode_tokens_per_s",
    "output_tokens_per_s_total",
    "time_per_output_token_ms",
    "ttft_ms",
    "gpu_hours",
];

/// Read a cases file.
pub fn parse_cases(text: &str, origin: &str) -> Result<Vec<Case>, CasesError> {
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let line_of = |p: &csv::Position| record_line(text.as_bytes(), p, None);
    let header = r
        .headers()
        .map_err(|e| CasesError::Row {
            origin: origin.to_owned(),
            line: 1,
            message: e.to_string(),
        })?
        .iter()
        .collect::<Vec<_>>()
        .join(",");
    let fields = if header == HEADER {
        8
    } else if header == format!("{HEADER},class") {
        9
    } else {
        return Err(CasesError::Header {
            origin: origin.to_owned(),
            found: header,
        });
    };
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| CasesError::Row {
            origin: origin.to_owned(),
            line: e.position().map_or(0, line_of),
            message: e.to_string(),
        })?;
        let line = rec.position().map_or(0, line_of);
        let err = |message: String| CasesError::Row {
            origin: origin.to_owned(),
            line,
            message,
        };
        if rec.len() != fields {
            return Err(err(format!("{} fields, expected {fields}", rec.len())));
        }
        let num = |i: usize, name: &str| {
            rec[i]
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| err(format!("{name} `{}` is not a number", &rec[i])))
        };
        out.push(Case {
            id: rec[0].to_owned(),
            metric: rec[1].to_owned(),
            measured: num(2, "measured")?,
            unit: rec[3].to_owned(),
            workload: rec[4].to_owned(),
            tolerance_pct: num(5, "tolerance_pct")?,
            source: rec[6].to_owned(),
            trust: rec[7].to_owned(),
            class: rec.get(8).unwrap_or_default().trim().to_owned(),
        });
    }
    Ok(out)
}

/// One case's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Case id.
    pub id: String,
    /// Metric.
    pub metric: String,
    /// Measured value.
    pub measured: f64,
    /// Unit of both values.
    pub unit: String,
    /// The planner's estimate (absent when it cannot be made).
    pub estimate: Option<f64>,
    /// (estimate − measured) ÷ measured, percent.
    pub error_pct: Option<f64>,
    /// |error| ≤ tolerance.
    pub within_tolerance: bool,
    /// Tolerance, percent.
    pub tolerance_pct: f64,
    /// Why there is no estimate.
    pub reason: Option<String>,
    /// GPU used.
    pub gpu: Option<String>,
    /// Workload keys the planner does not use.
    pub ignored_keys: Vec<String>,
    /// Defaults and guesses that went into the estimate.
    pub assumptions: Vec<String>,
    /// The workload class (absent when the file has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

fn model_of(kv: &[(String, String)]) -> Result<Model, String> {
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if let Some(name) = get("model") {
        return Model::preset(name).map_err(|e| e.to_string());
    }
    let params = get("params_b")
        .ok_or("neither `model` nor `params_b` given")?
        .parse::<f64>()
        .map_err(|_| "params_b is not a number".to_owned())?;
    let mut m = Model::from_params(&format!("{params}b")).map_err(|e| e.to_string())?;
    let num = |k: &str| -> Result<Option<u32>, String> {
        get(k)
            .map(|v| {
                parse_count(v)
                    .filter(|x| x.fract() == 0.0 && *x <= f64::from(u32::MAX))
                    .map(|x| x as u32)
                    .ok_or_else(|| format!("{k}=`{v}`: expected a positive whole number"))
            })
            .transpose()
    };
    if let Some(l) = num("layers")? {
        m.layers = l;
    }
    if let Some(h) = num("hidden")? {
        m.hidden = h;
        // A paper's shape without a feed-forward width: GPT's 4 × hidden, plain.
        m.ffn = 4 * h;
        m.ffn_kind = FfnKind::Plain;
        m.assumptions = vec!["feed-forward 4 × hidden, plain (GPT shape)".to_owned()];
    }
    if let Some(a) = num("heads")? {
        m.heads = a;
        m.kv_heads = a;
    }
    m.head_dim = m.hidden / m.heads.max(1);
    if let Some(k) = num("kv_heads")? {
        m.kv_heads = k;
    }
    if let Some(f) = num("ffn")? {
        m.ffn = f;
    }
    if let Some(v) = num("vocab")? {
        m.vocab = v;
    }
    m.name = format!("{params}B");
    Ok(m)
}

/// The GPU of a case: `gpu`, else the first words of `gpu_note` that name one.
fn gpu_of<'c>(
    kv: &[(String, String)],
    catalog: &'c Catalog,
) -> Option<(&'c gpuwise_catalog::GpuSpec, Option<String>)> {
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if let Some(g) = get("gpu") {
        return catalog.resolve_loose(g);
    }
    let note = get("gpu_note")?;
    let head = note
        .split(['(', ';'])
        .next()
        .unwrap_or("")
        .split(" - ")
        .next()
        .unwrap_or("");
    let words: Vec<&str> = head.split_whitespace().collect();
    // Shorter and shorter prefixes ("A100 80GB" → "A100"), but never past a dropped model
    // number: "RTX A6000" is not "RTX".
    let model_number = |w: &str| {
        let l = w.to_ascii_lowercase();
        let unit = l.trim_start_matches(|c: char| c.is_ascii_digit());
        let size = unit.len() < l.len() && ["g", "gb", "gib"].contains(&unit);
        l.contains(|c: char| c.is_ascii_digit()) && !size
    };
    let shortest = (0..words.len())
        .rev()
        .find(|&i| model_number(words[i]))
        .map_or(1, |i| i + 1);
    (shortest..=words.len()).rev().find_map(|n| {
        let name = words[..n].join(" ");
        catalog.resolve_loose(&name).map(|(g, note)| {
            let from = format!("GPU from gpu_note: `{name}` → {}", g.name);
            (
                g,
                Some(note.map_or(from.clone(), |n| format!("{from}; {n}"))),
            )
        })
    })
}

fn unit_factor(unit: &str) -> Option<f64> {
    Some(match unit {
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "GB" => 1e9,
        "MB" => 1e6,
        "tokens/s" | "%" | "ms" | "hours" => 1.0,
        _ => return None,
    })
}

/// The largest batch that fits `hw` (runtime terms included), at most `cap`.
#[must_use]
pub fn max_batch(model: &Model, s: &Setup, hw: &Hardware, cap: u32) -> u32 {
    let fits = |b: u32| {
        let mut t = s.clone();
        t.batch = b;
        memory::estimate(model, &t, true).total_bytes <= hw.memory_bytes
    };
    if !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u32, cap.max(1));
    if fits(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Keys a case may carry that change no estimate, each with why. Any other key the planner
/// does not read makes the case an error (issue 41): a setting the planner cannot see must
/// not be read as its default without a word.
pub const DESCRIPTIVE_KEYS: &[(&str, &str)] = &[
    (
        "packed",
        "rows packed to `seq` tokens: the planner counts batch × seq tokens either way",
    ),
    (
        "compute_dtype",
        "a weight-only format's 16-bit compute type: the bf16 and fp16 peaks are equal on every catalog card",
    ),
    ("config", "the source's recipe name"),
    ("generate", "the source's script"),
    ("bench", "the source's benchmark name"),
    ("client", "the load generator"),
    (
        "dataset",
        "the source's dataset: the planner reads its shape from prompt and output",
    ),
    ("framework_version", "the serving framework's release"),
    ("backend", "the engine's runtime backend"),
    ("batch_note", "a note on how the source batched"),
    ("precision_note", "a note on the source's precision"),
    (
        "requests",
        "how many requests the benchmark sent: throughput is per second",
    ),
    ("accuracy_target", "the benchmark's accuracy target"),
    (
        "memory_stat",
        "how the source took the peak over ranks: the planner's GPU is the one that peaks",
    ),
    (
        "analytic",
        "the source computed the figure rather than measured it (its trust column says so)",
    ),
    ("weight_only", "the precision names the weight-only format"),
    (
        "kv_cache",
        "how the engine sizes its KV cache: `context` gives the length",
    ),
    (
        "mfu_flops",
        "the source's own MFU formula: the planner's is its model FLOPs over the catalog's dense peak",
    ),
    (
        "mfu_peak_tflops",
        "the peak the source divided by: the planner uses the catalog's",
    ),
    (
        "interconnect",
        "the source's network: the planner takes the catalog's for the card",
    ),
    (
        "sequence_parallel",
        "Megatron's sequence parallel, which the planner assumes under tensor parallel",
    ),
    (
        "dp_allreduce_overlap",
        "whether the source overlapped its gradient all-reduce: a case's speed leaves data-parallel traffic out either way (`plan` prices it per rental, overlapped), so a source that did not overlap it reads faster than it ran",
    ),
    (
        "parallelism",
        "the source's name for its layout: tp, pp, dp give it",
    ),
    (
        "pp_schedule",
        "the pipeline schedule: `vp` gives an interleaved one's virtual stages",
    ),
    (
        "max_prompt",
        "the dataset's longest prompt: `prompt` gives the mean",
    ),
    (
        "max_output",
        "the dataset's longest output: `output` gives the mean",
    ),
    (
        "output_mean",
        "the dataset's mean output: `output` gives it to the planner",
    ),
    (
        "kv_mem_fraction",
        "the engine's share of memory: the planner sizes the KV cache from what the weights leave",
    ),
    ("batching", "the engine's batching policy"),
    (
        "offload",
        "llama.cpp's layers on the GPU: the planner assumes all of them",
    ),
];

/// A key the planner neither reads nor lists in [`DESCRIPTIVE_KEYS`], or a descriptive key
/// whose value contradicts what the planner assumes.
fn unread_key(k: &str, v: &str) -> Option<String> {
    if k == "sequence_parallel" && !matches!(v, "true" | "yes" | "1" | "on") {
        return Some(format!(
            "sequence_parallel=`{v}`: the planner assumes sequence parallel under tensor parallel and cannot model it off"
        ));
    }
    if DESCRIPTIVE_KEYS.iter().any(|(d, _)| *d == k) {
        return None;
    }
    let near = DESCRIPTIVE_KEYS
        .iter()
        .map(|(d, _)| *d)
        .chain(crate::workload::KEYS.iter().copied())
        .find(|d| strsim_close(d, k));
    Some(match near {
        Some(d) => format!("unknown workload key `{k}` (did you mean `{d}`?)"),
        None => format!(
            "unknown workload key `{k}`: the planner would read the case without it (docs/planner.md lists the keys)"
        ),
    })
}

/// Two key spellings a typo apart: one edit, or the same letters without `_` and `-`.
fn strsim_close(a: &str, b: &str) -> bool {
    let bare = |x: &str| x.replace(['_', '-'], "");
    bare(a) == bare(b) || strsim::levenshtein(a, b) <= 1
}

/// Estimate one case.
#[must_use]
pub fn evaluate(case: &Case, catalog: &Catalog, c: &Constants) -> Outcome {
    let mut out = Outcome {
        id: case.id.clone(),
        metric: case.metric.clone(),
        measured: case.measured,
        unit: case.unit.clone(),
        estimate: None,
        error_pct: None,
        within_tolerance: false,
        tolerance_pct: case.tolerance_pct,
        reason: None,
        gpu: None,
        ignored_keys: Vec::new(),
        assumptions: Vec::new(),
        class: (!case.class.is_empty()).then(|| case.class.clone()),
    };
    match estimate_case(case, catalog, c, &mut out) {
        Ok(v) => {
            let err = (v - case.measured) / case.measured * 100.0;
            out.estimate = Some(v);
            out.error_pct = Some(err);
            out.within_tolerance = err.abs() <= case.tolerance_pct;
        }
        Err(reason) => out.reason = Some(reason),
    }
    out
}

/// The case's GPU: the catalog's (`gpu`, else `gpu_note`) with the case's overrides, else a
/// card the catalog lacks from the case's own figures; said in the outcome either way.
fn hardware(
    kv: &[(String, String)],
    catalog: &Catalog,
    w: &Workload,
    out: &mut Outcome,
) -> Option<Hardware> {
    if let Some((g, note)) = gpu_of(kv, catalog) {
        out.gpu = Some(g.name.clone());
        out.assumptions.extend(note);
        return Some(Hardware::from_spec(g).with_overrides(w));
    }
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let name = get("gpu")
        .or_else(|| get("gpu_note"))
        .unwrap_or("the case's GPU");
    let h = Hardware::from_figures(name, w)?;
    out.gpu = Some(h.name.clone());
    out.assumptions.push(format!(
        "{}: not in the catalog; the case's own figures (memory, bandwidth, dense TFLOPS), architecture {}",
        h.name, h.architecture
    ));
    Some(h)
}

fn estimate_case(
    case: &Case,
    catalog: &Catalog,
    c: &Constants,
    out: &mut Outcome,
) -> Result<f64, String> {
    let factor = unit_factor(&case.unit).ok_or_else(|| format!("unknown unit `{}`", case.unit))?;
    let mut kv = Vec::new();
    for part in case.workload.split(';').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("workload part `{part}` is not key=value"))?;
        kv.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut w = Workload::default();
    for (k, v) in &kv {
        if MODEL_KEYS.contains(&k.as_str()) || GPU_KEYS.contains(&k.as_str()) {
            continue;
        }
        if !w.set(k, v).map_err(|e| e.to_string())? {
            if let Some(why) = unread_key(k, v) {
                return Err(why);
            }
            out.ignored_keys.push(k.clone());
        }
    }
    for k in &out.ignored_keys {
        if let Some((_, why)) = DESCRIPTIVE_KEYS.iter().find(|(d, _)| d == k) {
            out.assumptions
                .push(format!("`{k}` changes nothing: {why}"));
        }
    }
    let model = model_of(&kv)?;
    out.assumptions.extend(model.assumptions.iter().cloned());
    let mut s = Setup::new(&model, &w);
    let is_memory = MEMORY_METRICS.contains(&case.metric.as_str());
    let hw = hardware(&kv, catalog, &w, out);
    if is_memory {
        // The workload's memory reading decides the runtime terms a measurement counts.
        let mem = memory::estimate(&model, &s, false);
        out.assumptions.append(&mut s.assumptions);
        let bytes = match case.metric.as_str() {
            "weights_memory" => mem.of(&["weights"]),
            "kv_cache_memory" => mem.of(&["kv_cache"]),
            _ => mem.total_bytes,
        };
        return Ok(bytes / factor);
    }
    let hw = hw.ok_or(
        "no GPU in the catalog matches `gpu` or `gpu_note` (give a card the catalog lacks in an --overlay, or by gpu_mem_gb, gpu_bw_gb_s and gpu_tflops_<precision>)",
    )?;
    let value = match case.metric.as_str() {
        "train_tokens_per_s_per_gpu" | "train_mfu" | "gpu_hours" => {
            if !w.mode.trains() {
                return Err(format!("{} needs a training mode", case.metric));
            }
            let t = perf::train(&model, &s, &hw, c).map_err(|e| e.to_string())?;
            out.assumptions.extend(t.notes.iter().cloned());
            match case.metric.as_str() {
                "train_mfu" => t.mfu * 100.0,
                "gpu_hours" => t.gpu_hours.ok_or("gpu_hours needs train_tokens")?,
                _ => t.tokens_per_s_per_gpu,
            }
        }
        _ => {
            if w.mode != Mode::Infer {
                return Err(format!("{} needs mode=infer", case.metric));
            }
            let offline = case.metric == "output_tokens_per_s_total"
                || w.scenario.as_deref() == Some("offline");
            let fit = max_batch(&model, &s, &hw, 4096);
            if fit == 0 {
                return Err(format!(
                    "the model does not fit {} even at batch 1",
                    hw.name
                ));
            }
            match w.batch {
                Some(b) if b > fit => {
                    s.assumptions.push(format!(
                        "batch {b} does not fit; {fit} (the most that fits) used"
                    ));
                    s.batch = fit;
                }
                None if offline => {
                    s.assumptions.retain(|a| a != "batch 1");
                    s.assumptions.push(format!(
                        "batch {fit}: the most sequences that fit (offline)"
                    ));
                    s.batch = fit;
                }
                _ => {}
            }
            let r = perf::infer(&model, &s, &hw, c).map_err(|e| e.to_string())?;
            match case.metric.as_str() {
                "decode_tokens_per_s" => r.decode_tokens_per_s,
                "output_tokens_per_s_total" => r.output_tokens_per_s * f64::from(s.dp),
                "time_per_output_token_ms" => r.tpot_ms,
                "ttft_ms" => r.ttft_ms,
                other => return Err(format!("unknown metric `{other}`")),
            }
        }
    };
    out.assumptions.append(&mut s.assumptions);
    Ok(value / factor)
}

/// Per metric (and per group) accuracy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Accuracy {
    /// Metric or group name.
    pub name: String,
    /// Cases.
    pub cases: usize,
    /// Cases with an estimate.
    pub estimated: usize,
    /// Cases within tolerance.
    pub within: usize,
    /// `within ÷ cases` (a case without an estimate counts as outside).
    pub share_within: f64,
    /// Median |error| over estimated cases, percent.
    pub median_abs_error_pct: Option<f64>,
    /// 90th percentile |error| over estimated cases, percent (nearest rank: the smallest
    /// error at least 90 % of the cases are within).
    pub p90_abs_error_pct: Option<f64>,
    /// The narrowest and widest tolerance of the cases, percent: the band `within` counts
    /// against (no share is read without it; ±50 % is not ±15 %).
    pub tolerance_pct: Option<(f64, f64)>,
}

/// The summary `plan validate` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Per metric, in first-seen order.
    pub metrics: Vec<Accuracy>,
    /// Per workload class, in first-seen order (cases with a class only).
    pub classes: Vec<Accuracy>,
    /// Memory metrics together.
    pub memory: Accuracy,
    /// Throughput metrics together.
    pub throughput: Accuracy,
    /// Everything.
    pub all: Accuracy,
}

fn accuracy(name: &str, outs: &[&Outcome]) -> Accuracy {
    let mut errs: Vec<f64> = outs
        .iter()
        .filter_map(|o| o.error_pct.map(f64::abs))
        .collect();
    errs.sort_by(f64::total_cmp);
    let median = (!errs.is_empty()).then(|| {
        let n = errs.len();
        if n % 2 == 1 {
            errs[n / 2]
        } else {
            f64::midpoint(errs[n / 2 - 1], errs[n / 2])
        }
    });
    // Nearest rank: the ⌈0.9·n⌉-th smallest.
    let p90 = (!errs.is_empty()).then(|| errs[(errs.len() * 9).div_ceil(10) - 1]);
    let tolerance = outs.iter().map(|o| o.tolerance_pct).fold(None, |band, t| {
        Some(band.map_or((t, t), |(lo, hi): (f64, f64)| (lo.min(t), hi.max(t))))
    });
    let within = outs.iter().filter(|o| o.within_tolerance).count();
    Accuracy {
        name: name.to_owned(),
        cases: outs.len(),
        estimated: errs.len(),
        within,
        share_within: if outs.is_empty() {
            0.0
        } else {
            within as f64 / outs.len() as f64
        },
        median_abs_error_pct: median,
        p90_abs_error_pct: p90,
        tolerance_pct: tolerance,
    }
}

/// Summarise outcomes.
#[must_use]
pub fn summarize(outs: &[Outcome]) -> Summary {
    let mut names: Vec<&str> = Vec::new();
    let mut classes: Vec<&str> = Vec::new();
    for o in outs {
        if !names.contains(&o.metric.as_str()) {
            names.push(&o.metric);
        }
        if let Some(c) = o.class.as_deref().filter(|c| !classes.contains(c)) {
            classes.push(c);
        }
    }
    let pick = |f: &dyn Fn(&Outcome) -> bool| outs.iter().filter(|o| f(o)).collect::<Vec<_>>();
    Summary {
        metrics: names
            .iter()
            .map(|n| accuracy(n, &pick(&|o| o.metric == *n)))
            .collect(),
        classes: classes
            .iter()
            .map(|c| accuracy(c, &pick(&|o| o.class.as_deref() == Some(*c))))
            .collect(),
        memory: accuracy(
            "memory",
            &pick(&|o| MEMORY_METRICS.contains(&o.metric.as_str())),
        ),
        throughput: accuracy(
            "throughput",
            &pick(&|o| !MEMORY_METRICS.contains(&o.metric.as_str())),
        ),
        all: accuracy("all", &pick(&|_| true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "id,metric,measured,unit,workload,tolerance_pct,source,trust\n";

    fn run(row: &str) -> Outcome {
        let cases = parse_cases(&format!("{ONE}{row}\n"), "t.csv").expect("parses");
        evaluate(&cases[0], &Catalog::builtin(), &Constants::default())
    }

    #[test]
    fn gguf_weights_case_is_exact() {
        let o = run(
            "X,weights_memory,6.67,GiB,model=codellama-7b;mode=infer;precision=q8_0;format=gguf;framework=llama.cpp,5,src,high",
        );
        assert!(o.within_tolerance, "{o:?}");
        assert!(o.error_pct.expect("estimate").abs() < 0.1);
        assert!(o.ignored_keys.is_empty(), "{:?}", o.ignored_keys);
    }

    #[test]
    fn unknown_keys_are_listed_and_bad_values_are_reasons() {
        // A key that describes the source is listed, with why it changes nothing.
        let o = run(
            "X,decode_tokens_per_s,100,tokens/s,model=llama-3-8b;mode=infer;gpu=H100-SXM5-80GB;bench=tg128,30,s,t",
        );
        assert_eq!(o.ignored_keys, vec!["bench".to_owned()]);
        assert!(o.estimate.is_some());
        assert!(
            o.assumptions
                .iter()
                .any(|a| a.starts_with("`bench` changes nothing"))
        );
        // Any other key is an error, not a default read without a word; a near miss is named.
        let o = run(
            "X,decode_tokens_per_s,100,tokens/s,model=llama-3-8b;mode=infer;gpu=H100-SXM5-80GB;flash_atention=false,30,s,t",
        );
        assert_eq!(o.estimate, None);
        assert_eq!(
            o.reason.as_deref(),
            Some("unknown workload key `flash_atention` (did you mean `flash_attention`?)")
        );
        let o = run(
            "X,decode_tokens_per_s,100,tokens/s,model=llama-3-8b;mode=infer;gpu=H100-SXM5-80GB;speculative=ngram,30,s,t",
        );
        assert!(
            o.reason
                .expect("reason")
                .starts_with("unknown workload key `speculative`")
        );
        let o = run(
            "X,train_mfu,40,%,model=llama-3-8b;mode=train;gpu=H100-SXM5-80GB;tp=2;sequence_parallel=false,30,s,t",
        );
        assert!(
            o.reason
                .expect("reason")
                .starts_with("sequence_parallel=`false`")
        );
        let o = run("X,decode_tokens_per_s,100,tokens/s,model=llama-3-8b;batch=many,30,s,t");
        assert_eq!(
            o.reason.as_deref(),
            Some("batch=`many`: expected a positive whole number")
        );
        assert!(!o.within_tolerance);
        let o = run("X,decode_tokens_per_s,100,tokens/s,model=llama-9;mode=infer,30,s,t");
        assert!(
            o.reason
                .expect("reason")
                .starts_with("no built-in model `llama-9`")
        );
        let o = run(
            "X,decode_tokens_per_s,100,tokens/s,model=llama-3-8b;mode=infer;gpu_note=unknown card,30,s,t",
        );
        assert_eq!(
            o.reason.as_deref(),
            Some(
                "no GPU in the catalog matches `gpu` or `gpu_note` (give a card the catalog lacks in an --overlay, or by gpu_mem_gb, gpu_bw_gb_s and gpu_tflops_<precision>)"
            )
        );
        let o = run("X,decode_tokens_per_s,100,furlongs,model=llama-3-8b,30,s,t");
        assert_eq!(o.reason.as_deref(), Some("unknown unit `furlongs`"));
    }

    #[test]
    fn gpu_from_a_note_says_what_it_assumed() {
        let o = run(
            "X,ttft_ms,133,ms,model=llama-2-7b;mode=infer;gpu_note=A100 variant (40GB or 80GB) not stated;precision=fp16;batch=1;prompt=2048,30,s,t",
        );
        assert_eq!(o.gpu.as_deref(), Some("A100-SXM4-80GB"));
        assert!(
            o.assumptions.iter().any(|a| a.contains("`A100` →")),
            "{:?}",
            o.assumptions
        );
    }

    #[test]
    fn bad_files_name_line_and_field() {
        let e = parse_cases("id,metric\n", "c.csv").expect_err("header");
        assert!(e.to_string().starts_with("c.csv: header must be"));
        let e = parse_cases(&format!("{ONE}A,m,x,GiB,w,5,s,t\n"), "c.csv").expect_err("num");
        assert_eq!(e.to_string(), "c.csv: line 2: measured `x` is not a number");
        let e = parse_cases(&format!("{ONE}A,m,1,GiB\n"), "c.csv").expect_err("fields");
        assert_eq!(e.to_string(), "c.csv: line 2: 4 fields, expected 8");
        // After empty lines, in a file of `\r\n` lines: the line the row is on.
        let crlf = format!("{}\r\n\r\n\r\nA,m,1,GiB\r\n", ONE.trim_end());
        let e = parse_cases(&crlf, "c.csv").expect_err("fields");
        assert_eq!(e.to_string(), "c.csv: line 4: 4 fields, expected 8");
    }

    #[test]
    fn summary_counts_unestimated_cases_as_outside() {
        let mk = |metric: &str, err: Option<f64>, ok: bool| Outcome {
            class: Some(
                if metric == "ttft_ms" {
                    "serving"
                } else {
                    "weights"
                }
                .to_owned(),
            ),
            id: "x".into(),
            metric: metric.into(),
            measured: 1.0,
            unit: "GiB".into(),
            estimate: err.map(|_| 1.0),
            error_pct: err,
            within_tolerance: ok,
            tolerance_pct: 10.0,
            reason: None,
            gpu: None,
            ignored_keys: vec![],
            assumptions: vec![],
        };
        let s = summarize(&[
            mk("weights_memory", Some(-2.0), true),
            mk("weights_memory", Some(20.0), false),
            mk("weights_memory", None, false),
            mk("ttft_ms", Some(4.0), true),
        ]);
        assert_eq!(s.memory.cases, 3);
        assert_eq!(s.memory.within, 1);
        assert_eq!(s.memory.median_abs_error_pct, Some(11.0));
        assert_eq!(s.throughput.within, 1);
        assert_eq!(s.all.cases, 4);
        // Per class, in first-seen order.
        let classes: Vec<(&str, usize, usize)> = s
            .classes
            .iter()
            .map(|a| (a.name.as_str(), a.cases, a.within))
            .collect();
        assert_eq!(classes, vec![("weights", 3, 1), ("serving", 1, 1)]);
        // The 90th percentile by nearest rank (of 2, 20: the larger), the band of tolerances.
        assert_eq!(s.memory.p90_abs_error_pct, Some(20.0));
        assert_eq!(s.memory.tolerance_pct, Some((10.0, 10.0)));
        let errs: Vec<Outcome> = (1..=20)
            .map(|i| Outcome {
                tolerance_pct: if i % 2 == 0 { 15.0 } else { 30.0 },
                ..mk("weights_memory", Some(f64::from(i)), true)
            })
            .collect();
        let s = summarize(&errs);
        // ⌈0.9 × 20⌉ = 18th smallest.
        assert_eq!(s.all.p90_abs_error_pct, Some(18.0));
        assert_eq!(s.all.median_abs_error_pct, Some(10.5));
        assert_eq!(s.all.tolerance_pct, Some((15.0, 30.0)));
    }

    #[test]
    fn a_class_column_is_optional_and_a_model_number_is_never_dropped() {
        let with = "id,metric,measured,unit,workload,tolerance_pct,source,trust,class\n\
                    A,weights_memory,6.67,GiB,model=codellama-7b;mode=infer;precision=q8_0;\
                    format=gguf;gpu_note=RTX 5000 Ada 32GB,5,src,high,gguf\n";
        let cases = parse_cases(with, "c.csv").expect("parses");
        assert_eq!(cases[0].class, "gguf");
        let o = evaluate(&cases[0], &Catalog::builtin(), &Constants::default());
        assert_eq!(o.class.as_deref(), Some("gguf"));
        // "RTX 5000 Ada" is not in the catalog, and is not taken for the "RTX" family.
        assert_eq!(o.gpu, None, "{o:?}");
        let e = parse_cases(
            "id,metric,measured,unit,workload,tolerance_pct,source,trust,class\nA,b,1,GiB,w,5,s,high\n",
            "c.csv",
        )
        .expect_err("8 fields under a 9-column header");
        assert!(e.to_string().contains("expected 9"), "{e}");
    }
}
