//! `gpuwise plan`: which GPU a model needs; `plan validate`: the planner against measurements;
//! `plan models`: the presets.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use gpuwise_catalog::Pricing;
use gpuwise_plan::perf::Constants;
use gpuwise_plan::rank::{self, Constraints, Request};
use gpuwise_plan::validate;
use gpuwise_plan::view as render;
use gpuwise_plan::{Mode, Model, Workload};
use gpuwise_render::Format;

use crate::cli::{ModelsArgs, PlanArgs, PlanCommand, PlanSub, ValidateArgs};
use crate::output::emit;
use crate::{duration, printer};

fn format(s: &str) -> anyhow::Result<Format> {
    let f = Format::parse(s).map_err(|e| anyhow!("--format: {e}"))?;
    if f == Format::Html {
        bail!("--format: html is for reports; use table, json, csv or markdown");
    }
    Ok(f)
}

pub(crate) fn run(cmd: &PlanCommand) -> anyhow::Result<ExitCode> {
    match &cmd.sub {
        Some(PlanSub::Validate(a)) => validate_cmd(a),
        Some(PlanSub::Models(a)) => models(a),
        None => plan(&cmd.args),
    }
}

fn models(a: &ModelsArgs) -> anyhow::Result<ExitCode> {
    emit(
        &render::render_models(&Model::presets(), format(&a.format)?),
        None,
    )?;
    Ok(ExitCode::SUCCESS)
}

fn validate_cmd(a: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let f = format(&a.format)?;
    let catalog = crate::inputs::catalog(&a.catalog)?;
    let constants = Constants::default();
    let mut files = Vec::new();
    for path in &a.cases {
        let origin = path.display().to_string();
        let text = fs_err::read_to_string(path)?;
        let cases = validate::parse_cases(&text, &origin)?;
        let outs: Vec<_> = cases
            .iter()
            .map(|c| validate::evaluate(c, &catalog, &constants))
            .collect();
        let summary = validate::summarize(&outs);
        let name = path
            .file_name()
            .map_or_else(|| origin.clone(), |n| n.to_string_lossy().into_owned());
        files.push((name, outs, summary));
    }
    let every: Vec<_> = files
        .iter()
        .flat_map(|(_, o, _)| o.iter().cloned())
        .collect();
    let summary = validate::summarize(&every);
    let shown: Vec<render::Validated> = files
        .iter()
        .map(|(name, outcomes, summary)| render::Validated {
            name,
            outcomes,
            summary,
        })
        .collect();
    emit(&render::render_validation(&shown, &summary, f), None)?;
    let mut code = ExitCode::SUCCESS;
    for (want, acc) in [
        (a.require_memory, &summary.memory),
        (a.require_throughput, &summary.throughput),
    ] {
        if let Some(w) = want
            && acc.share_within * 100.0 < w
        {
            printer::warn(&format!(
                "{}: {:.1} % of cases within tolerance, {w} % required",
                acc.name,
                acc.share_within * 100.0
            ));
            code = ExitCode::from(1);
        }
    }
    Ok(code)
}

/// A workload file: model source keys plus workload keys, all as TOML values.
fn read_workload_file(
    path: &Path,
    w: &mut Workload,
    model: &mut Option<Model>,
    tokens: &mut Option<f64>,
) -> anyhow::Result<()> {
    let origin = path.display().to_string();
    let text = fs_err::read_to_string(path)?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{origin}: not TOML: {}",
            gpuwise_catalog::toml_message(&e, &text)
        )
    })?;
    for (key, value) in &table {
        let v = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => bail!("{origin}: `{key}` must be a string, number or boolean"),
        };
        match key.as_str() {
            "model" => *model = Some(Model::preset(&v).with_context(|| origin.clone())?),
            "params" => *model = Some(Model::from_params(&v).with_context(|| origin.clone())?),
            "hf_config" | "config" => {
                let p = path.parent().unwrap_or(Path::new(".")).join(&v);
                *model = Some(hf_config(&p)?);
            }
            "tokens" => {
                *tokens = Some(
                    gpuwise_plan::model::parse_count(&v)
                        .ok_or_else(|| anyhow!("{origin}: tokens `{v}` is not a count"))?,
                );
            }
            k => {
                let used = w.set(k, &v).map_err(|e| anyhow!("{origin}: {e}"))?;
                if !used {
                    bail!("{origin}: unknown key `{k}` (see docs/planner.md for the keys)");
                }
            }
        }
    }
    Ok(())
}

fn hf_config(path: &Path) -> anyhow::Result<Model> {
    let text = fs_err::read_to_string(path)?;
    Ok(Model::from_hf_config(&text, &path.display().to_string())?)
}

/// The model (preset, `config.json` or a parameter count) and the workload: the `--workload`
/// file, then the flags over it; tokens to train on or to generate.
fn model_and_workload(a: &PlanArgs) -> anyhow::Result<(Model, Workload, f64)> {
    let mut w = Workload::default();
    let mut model = None;
    let mut tokens = None;
    if let Some(p) = &a.workload {
        read_workload_file(p, &mut w, &mut model, &mut tokens)?;
    }
    if let Some(m) = &a.model {
        model = Some(Model::preset(m)?);
    } else if let Some(c) = &a.hf_config {
        model = Some(hf_config(c)?);
    } else if let Some(p) = &a.params {
        model = Some(Model::from_params(p)?);
    }
    let model = model.ok_or_else(|| {
        anyhow!(
            "name a model: --model NAME (see `{} plan models`), --hf-config config.json or --params 7b",
            printer::me()
        )
    })?;
    let flags: [(&str, &Option<String>); 28] = [
        ("mode", &a.mode),
        ("precision", &a.precision),
        ("kv_precision", &a.kv_precision),
        ("optimizer", &a.optimizer),
        ("batch", &a.batch),
        ("ga", &a.ga),
        ("seq", &a.seq),
        ("prompt", &a.prompt),
        ("output_tokens", &a.output_tokens),
        ("context", &a.context),
        ("checkpointing", &a.checkpointing),
        ("optimizer_in_backward", &a.optimizer_in_backward),
        ("cpu_offload", &a.cpu_offload),
        ("activation_offload", &a.activation_offload),
        ("loss", &a.loss),
        ("flash_attention", &a.flash_attention),
        ("compile", &a.compile),
        ("zero_grad", &a.zero_grad),
        ("optimizer_impl", &a.optimizer_impl),
        ("lora_targets", &a.lora_targets),
        ("zero", &a.zero),
        ("tp", &a.tp),
        ("pp", &a.pp),
        ("cp", &a.cp),
        ("gpus", &a.gpus),
        ("lora_rank", &a.lora_rank),
        ("framework", &a.framework),
        ("train_tokens", &a.tokens),
    ];
    for (key, value) in flags {
        if let Some(v) = value {
            w.set(key, v)
                .map_err(|e| anyhow!("--{}: {e}", key.replace('_', "-")))?;
        }
    }
    if let Some(t) = a.tokens.as_deref() {
        tokens = gpuwise_plan::model::parse_count(t);
    }
    let tokens = tokens.unwrap_or(if w.mode.trains() { 1e9 } else { 1e6 });
    if w.mode.trains() {
        w.train_tokens = Some(tokens);
    }
    Ok((model, w, tokens))
}

/// Flags given that the mode has no use for: latency, prompt and KV settings in training;
/// optimizer, checkpointing, ZeRO and gradient accumulation in inference; a LoRA rank outside
/// LoRA. Said, never silently ignored.
fn flags_that_do_not_apply(a: &PlanArgs, mode: Mode) -> Vec<&'static str> {
    let given = |v: &Option<String>| v.is_some();
    let mut out = Vec::new();
    if mode.trains() {
        if a.max_latency_ms.is_some() {
            out.push("--max-latency-ms (time per output token, an inference figure)");
        }
        for (flag, v) in [
            ("--prompt", &a.prompt),
            ("--output-tokens", &a.output_tokens),
            ("--kv-precision", &a.kv_precision),
        ] {
            if given(v) {
                out.push(flag);
            }
        }
    } else {
        if a.network_gbps.is_some() {
            out.push("--network-gbps (data-parallel training traffic between machines)");
        }
        for (flag, v) in [
            ("--optimizer", &a.optimizer),
            ("--checkpointing", &a.checkpointing),
            ("--optimizer-in-backward", &a.optimizer_in_backward),
            ("--cpu-offload", &a.cpu_offload),
            ("--activation-offload", &a.activation_offload),
            ("--loss", &a.loss),
            ("--compile", &a.compile),
            ("--zero-grad", &a.zero_grad),
            ("--optimizer-impl", &a.optimizer_impl),
            ("--cp", &a.cp),
            ("--zero", &a.zero),
            ("--ga", &a.ga),
        ] {
            if given(v) {
                out.push(flag);
            }
        }
    }
    if !matches!(mode, Mode::Lora | Mode::Qlora) {
        for (flag, v) in [
            ("--lora-rank", &a.lora_rank),
            ("--lora-targets", &a.lora_targets),
        ] {
            if given(v) {
                out.push(flag);
            }
        }
    }
    out
}

fn plan(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    let f = format(&a.format)?;
    let (model, w, tokens) = model_and_workload(a)?;
    for flag in flags_that_do_not_apply(a, w.mode) {
        printer::warn(&format!(
            "{flag} does not apply to mode {} and is ignored",
            w.mode.name()
        ));
    }
    let catalog = crate::inputs::catalog(&a.catalog)?;
    let gpus = if a.gpu.is_empty() {
        None
    } else {
        let mut names = Vec::new();
        for g in &a.gpu {
            let fam = catalog
                .lookup(g)
                .map_err(|e| anyhow!("--gpu: {e} (see `{} catalog gpus`)", printer::me()))?;
            names.extend(fam.iter().map(|s| s.name.clone()));
        }
        Some(names)
    };
    let pricing = a
        .pricing
        .as_deref()
        .map(Pricing::parse)
        .transpose()
        .map_err(|e| anyhow!("--pricing: {e}"))?;
    let deadline_hours = a
        .deadline
        .as_deref()
        .map(|d| duration::parse_positive_ms("deadline", d))
        .transpose()
        .map_err(|e| anyhow!(e))?
        .map(|ms| gpuwise_core::hours_of_ms(ms as f64));
    if let Some(m) = a.mfu
        && !(m > 0.0 && m <= 1.0)
    {
        bail!("--mfu: {m} is not a share between 0 and 1");
    }
    if let Some(g) = a.network_gbps
        && !(g.is_finite() && g > 0.0)
    {
        bail!("--network-gbps: {g} is not a bandwidth (a positive number of Gbit/s)");
    }
    for c in &a.cloud {
        catalog.check_place(Some(c), None).map_err(|e| anyhow!(e))?;
    }
    let req = Request {
        model,
        workload: w.clone(),
        gpus,
        clouds: (!a.cloud.is_empty()).then(|| a.cloud.clone()),
        pricing,
        tokens,
        max_gpus: a
            .max_gpus
            .unwrap_or(if w.mode == Mode::Infer { 8 } else { 64 }),
        network_gbps: a.network_gbps,
        constraints: Constraints {
            max_latency_ms: a.max_latency_ms,
            min_tokens_per_s: a.min_tokens_per_s,
            deadline_hours,
            budget_usd: a.budget,
        },
        constants: Constants {
            mfu_override: a.mfu,
            ..Constants::default()
        },
    };
    let p = rank::plan(&req, &catalog);
    emit(&render::render(&p, f, a.top), a.output.as_ref())?;
    if p.options.is_empty() && p.unfit.is_empty() && !p.skipped.is_empty() {
        printer::warn(
            "no option could be priced: every GPU asked for was skipped (the reasons are listed above)",
        );
        return Ok(ExitCode::from(1));
    }
    if p.options.is_empty() {
        printer::warn(
            "no GPU in the catalog fits this workload at the counts tried (raise --max-gpus, quantize, or shorten the context)",
        );
        return Ok(ExitCode::from(1));
    }
    if p.cheapest.is_none() {
        printer::warn("no option meets the constraints; the table lists what each breaks");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
