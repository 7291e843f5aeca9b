//! Renderers of `gpuwise plan` and `gpuwise plan validate`.

use crate::rank::Plan;
use crate::validate::{Accuracy, Outcome, Summary};
use crate::{GIB, Model};
use serde::Serialize;

use gpuwise_render::text::usd;
use gpuwise_render::{Format, grid};

/// Schema id of `plan validate --format json`.
pub const VALIDATE_SCHEMA: &str = "gpuwise.plan-validate/v1";

fn sig(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn params(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2}B", n / 1e9)
    } else {
        format!("{:.0}M", n / 1e6)
    }
}

fn heading(format: Format, text: &str) -> String {
    heading_at(format, 2, text)
}

/// One line describing a model.
#[must_use]
pub fn describe_model(m: &Model) -> String {
    let attn = if m.kv_heads == m.heads {
        "multi-head attention".to_owned()
    } else if m.kv_heads == 1 {
        "multi-query attention".to_owned()
    } else {
        format!("GQA, {} KV heads", m.kv_heads)
    };
    let moe = if m.experts > 1 {
        format!(
            ", {} experts ({} active: {} params per token)",
            m.experts,
            m.active_experts,
            params(m.active_params())
        )
    } else {
        String::new()
    };
    format!(
        "{} — {} params, {} layers × {}, {} heads ({attn}), FFN {}{moe}",
        m.name,
        params(m.params),
        m.layers,
        m.hidden,
        m.heads,
        m.ffn
    )
}

/// The plan in `format` (table, markdown, csv, json); `top` options in table and markdown:
/// the model and workload, memory on one GPU, the picks, the options, what does not fit.
#[must_use]
pub fn render(plan: &Plan, format: Format, top: usize) -> String {
    if format == Format::Json {
        return gpuwise_render::json::pretty(plan);
    }
    let rows = option_rows(plan);
    let headers = [
        "#", "GPU", "N", "CLOUD", "INSTANCE", "PRICING", "$/GPU-H", "GIB/GPU", "TOK/S", "NET GBPS",
        "WAIT %", "TPOT MS", "HOURS", "TOTAL", "$/1M TOK", "BREAKS",
    ];
    let right = [2, 6, 7, 8, 9, 10, 11, 12, 13, 14];
    if format == Format::Csv {
        return grid::render(&headers, &right, &[], &rows, format);
    }
    // The terminal table leaves the instance type to the picks, CSV and JSON.
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|mut r| {
            r.remove(4);
            r
        })
        .collect();
    let headers: Vec<&str> = headers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(_, h)| *h)
        .collect();
    let right = [2, 5, 6, 7, 8, 9, 10, 11, 12, 13];
    let mut out = String::new();
    describe_plan(plan, format, &mut out);
    memory_table(plan, format, &mut out);
    picks_table(plan, format, &mut out);
    let shown = top.min(rows.len());
    out.push_str(&heading(
        format,
        &format!(
            "Options ({shown} of {}; ranked by $ per 1M tokens; * on the cost-time Pareto front)",
            rows.len()
        ),
    ));
    // A narrow terminal keeps the GPU, count, cloud, time, total and $ per token.
    let optional = [8, 9, 14, 6, 4, 7, 10, 5];
    out.push_str(&grid::render(
        &headers,
        &right,
        &optional,
        &rows[..shown],
        format,
    ));
    // A GPU's note where that GPU is shown (the options listed, or a pick), not on every plan.
    let picked = [plan.cheapest, plan.balanced, plan.fastest]
        .into_iter()
        .flatten()
        .filter_map(|i| plan.options.get(i).map(|o| o.gpu.as_str()));
    let shown_gpus: std::collections::BTreeSet<&str> = rows[..shown]
        .iter()
        .filter_map(|r| r.get(1).map(String::as_str))
        .chain(picked)
        .collect();
    for n in plan
        .gpu_notes
        .iter()
        .filter(|n| shown_gpus.contains(n.gpu.as_str()))
    {
        out.push_str(&format!("\nNote on {}: {}.\n", n.gpu, n.note));
    }
    left_out(plan, format, &mut out);
    out.push_str(
        "\nEstimates from a physical model (docs/planner.md); prices from the catalog with their dates (`--format json`).\n",
    );
    terminal(format, out)
}

/// Table text fitted to the terminal's width; Markdown as it is.
fn terminal(format: Format, text: String) -> String {
    if format == Format::Table {
        gpuwise_render::layout::fit_text(&text)
    } else {
        text
    }
}

/// GPUs used, and paid for when the machines hold more (`1/8`: one GPU of an 8-GPU machine).
fn gpus_used_and_paid(o: &crate::rank::PlanOption) -> String {
    if o.gpus_billed > o.count {
        format!("{}/{}", o.count, o.gpus_billed)
    } else {
        o.count.to_string()
    }
}

/// One row per option, every column (CSV keeps them all).
fn option_rows(plan: &Plan) -> Vec<Vec<String>> {
    plan.options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            vec![
                format!("{}{}", i + 1, if o.pareto { "*" } else { "" }),
                o.gpu.clone(),
                gpus_used_and_paid(o),
                o.cloud.clone(),
                o.instance_type.clone(),
                o.pricing.to_string(),
                format!("{:.4}", o.usd_per_gpu_hour),
                format!("{:.1}/{:.0}", o.memory_per_gpu_gib, o.gpu_memory_gib),
                sig(o.tokens_per_s),
                o.network_gbps
                    .map_or_else(|| "–".to_owned(), |g| format!("{g:.0}")),
                o.dp_comm_share
                    .map_or_else(|| "–".to_owned(), |c| format!("{:.0}", c * 100.0)),
                o.tpot_ms.map_or_else(|| "–".to_owned(), sig),
                sig(o.hours),
                usd(o.total_usd),
                format!("{:.4}", o.usd_per_million_tokens),
                o.violates.join("; "),
            ]
        })
        .collect()
}

/// The model, the workload and what was assumed.
fn describe_plan(plan: &Plan, format: Format, out: &mut String) {
    let s = &plan.setup;
    let w = &s.workload;
    if format == Format::Markdown {
        out.push_str("# gpuwise plan\n\n");
    }
    out.push_str(&format!("Model     {}\n", describe_model(&plan.model)));
    let shape = if w.mode.trains() {
        format!(
            "{} {}, batch {} × seq {}, checkpointing {}, optimizer {}, {} tokens",
            w.mode.name(),
            s.precision.name(),
            s.batch,
            s.seq,
            format!("{:?}", w.checkpointing).to_lowercase(),
            format!("{:?}", w.optimizer).to_lowercase(),
            plan.tokens
        )
    } else {
        format!(
            "{} {}, batch {}, prompt {} → output {}, KV {} tokens/seq at {}, {} output tokens",
            w.mode.name(),
            s.precision.name(),
            s.batch,
            s.prompt,
            s.output,
            s.kv_len,
            s.kv_precision.name(),
            plan.tokens
        )
    };
    out.push_str(&format!("Workload  {shape}\n"));
    let assumed: Vec<&String> = plan
        .model
        .assumptions
        .iter()
        .chain(&s.assumptions)
        .collect();
    if !assumed.is_empty() {
        out.push_str(&format!(
            "Assumed   {}\n",
            assumed
                .iter()
                .map(|a| a.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
}

/// Memory on one GPU, term by term.
fn memory_table(plan: &Plan, format: Format, out: &mut String) {
    out.push_str(&heading(format, "Memory on one GPU (before any split)"));
    let mem_rows: Vec<Vec<String>> = plan
        .memory_one_gpu
        .terms
        .iter()
        .map(|t| {
            vec![
                t.name.to_owned(),
                format!("{:.2}", t.bytes / GIB),
                t.formula.clone(),
            ]
        })
        .chain(std::iter::once(vec![
            "total".to_owned(),
            format!("{:.2}", plan.memory_one_gpu.total_bytes / GIB),
            String::new(),
        ]))
        .collect();
    out.push_str(&grid::render(
        &["TERM", "GIB", "HOW"],
        &[1],
        &[],
        &mem_rows,
        format,
    ));
}

/// The cheapest, balanced and fastest options.
fn picks_table(plan: &Plan, format: Format, out: &mut String) {
    out.push_str(&heading(format, "Picks"));
    let pick = |label: &str, i: Option<usize>| -> Vec<String> {
        match i.map(|i| &plan.options[i]) {
            Some(o) => vec![
                label.to_owned(),
                format!("{} × {}", gpus_used_and_paid(o), o.gpu),
                format!(
                    "{} {} {} ({})",
                    o.cloud, o.instance_type, o.region, o.pricing
                ),
                usd(o.total_usd),
                format!("{} h", sig(o.hours)),
                format!("${:.4}/1M", o.usd_per_million_tokens),
            ],
            None => vec![label.to_owned(), "none meets the constraints".to_owned()],
        }
    };
    let picks = vec![
        pick("cheapest", plan.cheapest),
        pick("balanced", plan.balanced),
        pick("fastest", plan.fastest),
    ];
    let picks: Vec<Vec<String>> = picks
        .into_iter()
        .map(|mut r| {
            r.resize(6, String::new());
            r
        })
        .collect();
    out.push_str(&grid::render(
        &["PICK", "GPUS", "WHERE", "TOTAL", "TIME", "UNIT COST"],
        &[3, 4, 5],
        &[],
        &picks,
        format,
    ));
}

/// GPUs that do not fit, and GPUs skipped.
fn left_out(plan: &Plan, format: Format, out: &mut String) {
    if !plan.unfit.is_empty() {
        out.push_str(&heading(format, "Does not fit"));
        let r: Vec<Vec<String>> = plan
            .unfit
            .iter()
            .map(|u| {
                vec![
                    u.gpu.clone(),
                    u.count.to_string(),
                    format!("{:.1}", u.needed_gib),
                    format!("{:.1}", u.has_gib),
                    u.overflow.clone(),
                ]
            })
            .collect();
        out.push_str(&grid::render(
            &["GPU", "AT N", "NEEDS GIB/GPU", "HAS GIB", "LARGEST TERM"],
            &[1, 2, 3],
            &[],
            &r,
            format,
        ));
    }
    if !plan.skipped.is_empty() {
        // One line per reason: which GPUs it left out.
        let mut by_reason: Vec<(String, Vec<&str>)> = Vec::new();
        for s in &plan.skipped {
            // A GPU-specific reason starts with the GPU's name; the rest of it is shared.
            let reason = s
                .reason
                .strip_prefix(&format!("{}: ", s.gpu))
                .or_else(|| s.reason.strip_prefix(&format!("{} ", s.gpu)))
                .unwrap_or(&s.reason)
                .to_owned();
            match by_reason.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, gpus)) => gpus.push(&s.gpu),
                None => by_reason.push((reason, vec![&s.gpu])),
            }
        }
        out.push_str(&format!("\nSkipped {} GPU(s):\n", plan.skipped.len()));
        for (reason, gpus) in by_reason {
            // A long list of names is cut: the reasons are what matter (`--format json` has all).
            let names = if gpus.len() > 6 {
                format!("{} and {} more", gpus[..5].join(", "), gpus.len() - 5)
            } else {
                gpus.join(", ")
            };
            out.push_str(&format!("  {names}: {reason}\n"));
        }
    }
}

/// One cases file's outcomes and their summary.
pub struct Validated<'a> {
    /// The file's name (as shown: its last path component).
    pub name: &'a str,
    /// Its cases.
    pub outcomes: &'a [Outcome],
    /// Their summary.
    pub summary: &'a Summary,
}

#[derive(Serialize)]
struct ValidateJson<'a> {
    schema: &'static str,
    cases: Vec<CaseJson<'a>>,
    summary: &'a Summary,
    files: Vec<FileJson<'a>>,
}

#[derive(Serialize)]
struct CaseJson<'a> {
    file: &'a str,
    #[serde(flatten)]
    outcome: &'a Outcome,
}

#[derive(Serialize)]
struct FileJson<'a> {
    file: &'a str,
    summary: &'a Summary,
}

fn acc_row(a: &Accuracy) -> Vec<String> {
    let pct = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |m| format!("{m:.1}%"));
    vec![
        a.name.clone(),
        a.cases.to_string(),
        a.estimated.to_string(),
        a.within.to_string(),
        match a.tolerance_pct {
            None => "–".to_owned(),
            Some((lo, hi)) if lo == hi => format!("±{lo}%"),
            Some((lo, hi)) => format!("±{lo}–{hi}%"),
        },
        if a.cases == 0 {
            "–".to_owned()
        } else {
            format!("{:.0}%", a.share_within * 100.0)
        },
        pct(a.median_abs_error_pct),
        pct(a.p90_abs_error_pct),
    ]
}

const CASE_HEADERS: [&str; 9] = [
    "ID", "METRIC", "MEASURED", "ESTIMATE", "UNIT", "ERROR", "TOL", "WITHIN", "GPU",
];

fn case_row(o: &Outcome) -> Vec<String> {
    vec![
        o.id.clone(),
        o.metric.clone(),
        sig(o.measured),
        o.estimate.map_or_else(|| "–".to_owned(), sig),
        o.unit.clone(),
        o.error_pct
            .map_or_else(|| "–".to_owned(), |e| format!("{e:+.1}%")),
        format!("±{}%", o.tolerance_pct),
        match (&o.reason, o.within_tolerance) {
            (Some(r), _) => format!("not estimated: {r}"),
            (None, true) => "yes".to_owned(),
            (None, false) => "no".to_owned(),
        },
        o.gpu.clone().unwrap_or_default(),
    ]
}

/// A heading at `level` (2 = `##`) in markdown; a plain line otherwise.
fn heading_at(format: Format, level: usize, text: &str) -> String {
    match format {
        Format::Markdown => format!("\n{} {text}\n\n", "#".repeat(level)),
        _ => format!("\n{text}\n"),
    }
}

const ACC_HEADERS: [&str; 8] = [
    "METRIC",
    "CASES",
    "ESTIMATED",
    "WITHIN",
    "TOL",
    "SHARE",
    "MEDIAN ABS ERR",
    "P90 ABS ERR",
];

/// One file's cases, classes, metrics and assumptions, with headings at `level`.
fn file_block(v: &Validated, level: usize, format: Format) -> String {
    let mut out = heading_at(format, level, "Cases");
    let rows: Vec<Vec<String>> = v.outcomes.iter().map(case_row).collect();
    out.push_str(&grid::render(
        &CASE_HEADERS,
        &[2, 3, 5, 6],
        &[],
        &rows,
        format,
    ));
    if !v.summary.classes.is_empty() {
        out.push_str(&heading_at(format, level, "Per class"));
        let rows: Vec<Vec<String>> = v.summary.classes.iter().map(acc_row).collect();
        let mut headers = ACC_HEADERS;
        headers[0] = "CLASS";
        out.push_str(&grid::render(
            &headers,
            &[1, 2, 3, 5, 6, 7],
            &[],
            &rows,
            format,
        ));
    }
    out.push_str(&heading_at(format, level, "Per metric"));
    let mut acc: Vec<Vec<String>> = v.summary.metrics.iter().map(acc_row).collect();
    acc.push(acc_row(&v.summary.memory));
    acc.push(acc_row(&v.summary.throughput));
    acc.push(acc_row(&v.summary.all));
    out.push_str(&grid::render(
        &ACC_HEADERS,
        &[1, 2, 3, 5, 6, 7],
        &[],
        &acc,
        format,
    ));
    let notes: Vec<Vec<String>> = v
        .outcomes
        .iter()
        .filter(|o| !o.assumptions.is_empty() || !o.ignored_keys.is_empty())
        .map(|o| {
            let mut parts = o.assumptions.clone();
            if !o.ignored_keys.is_empty() {
                parts.push(format!("ignored keys: {}", o.ignored_keys.join(", ")));
            }
            vec![o.id.clone(), parts.join("; ")]
        })
        .collect();
    if !notes.is_empty() {
        out.push_str(&heading_at(format, level, "Assumptions per case"));
        out.push_str(&grid::render(
            &["ID", "ASSUMED / IGNORED"],
            &[],
            &[],
            &notes,
            format,
        ));
    }
    out
}

/// `plan validate` output for one or more cases files, file by file; `all` summarises them
/// together (JSON only).
#[must_use]
pub fn render_validation(files: &[Validated], all: &Summary, format: Format) -> String {
    if format == Format::Json {
        return gpuwise_render::json::pretty(&ValidateJson {
            schema: VALIDATE_SCHEMA,
            cases: files
                .iter()
                .flat_map(|v| {
                    v.outcomes.iter().map(|o| CaseJson {
                        file: v.name,
                        outcome: o,
                    })
                })
                .collect(),
            summary: all,
            files: files
                .iter()
                .map(|v| FileJson {
                    file: v.name,
                    summary: v.summary,
                })
                .collect(),
        });
    }
    if format == Format::Csv {
        let mut headers = vec!["FILE"];
        headers.extend(CASE_HEADERS);
        let rows: Vec<Vec<String>> = files
            .iter()
            .flat_map(|v| {
                v.outcomes.iter().map(|o| {
                    let mut row = vec![v.name.to_owned()];
                    row.extend(case_row(o));
                    row
                })
            })
            .collect();
        return grid::render(&headers, &[3, 4, 6, 7], &[], &rows, format);
    }
    let mut out = String::new();
    if format == Format::Markdown {
        let names: Vec<&str> = files.iter().map(|v| v.name).collect();
        out.push_str(&format!(
            "# Planner accuracy\n\nProduced by `gpuwise plan validate {} --format markdown`; \
             a test checks this file against the command. Error = (estimate − measured) ÷ \
             measured. A case without an estimate counts as outside its tolerance.\n",
            names.join(" ")
        ));
    }
    if let [one] = files {
        out.push_str(&file_block(one, 2, format));
        return terminal(format, out);
    }
    // File by file: a calibration file (fitted) and a held-out one are not to be mixed.
    for v in files {
        out.push_str(&heading_at(format, 2, v.name));
        out.push_str(&file_block(v, 3, format));
    }
    terminal(format, out)
}

/// The built-in model presets.
#[must_use]
pub fn render_models(models: &[Model], format: Format) -> String {
    if format == Format::Json {
        return gpuwise_render::json::pretty(&models);
    }
    let rows: Vec<Vec<String>> = models
        .iter()
        .map(|m| {
            vec![
                m.name.clone(),
                params(m.params),
                m.layers.to_string(),
                m.hidden.to_string(),
                m.heads.to_string(),
                m.kv_heads.to_string(),
                m.ffn.to_string(),
                if m.vocab == 0 {
                    "–".to_owned()
                } else {
                    m.vocab.to_string()
                },
                m.max_context
                    .map_or_else(|| "–".to_owned(), |c| c.to_string()),
                if m.experts > 1 {
                    format!("{}/{}", m.active_experts, m.experts)
                } else {
                    "–".to_owned()
                },
            ]
        })
        .collect();
    grid::render(
        &[
            "MODEL", "PARAMS", "LAYERS", "HIDDEN", "HEADS", "KV", "FFN", "VOCAB", "CONTEXT",
            "EXPERTS",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &[],
        &rows,
        format,
    )
}
