//! `gpuwise actions`: the store's journal of recommended actions, with their marks; `done` and
//! `reject` append a mark (the journal is never rewritten).

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_analysis::review::LoggedAction;
use gpuwise_render::escape;

use crate::cli::{ActionMark, ActionsArgs};
use crate::output::emit;

fn find<'a>(actions: &'a [LoggedAction], id: &str) -> anyhow::Result<&'a LoggedAction> {
    let hits: Vec<&LoggedAction> = actions.iter().filter(|a| a.id.starts_with(id)).collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(anyhow!(
            "no action {id} in the journal ({} actions; `gpuwise actions` lists them)",
            actions.len()
        )),
        many => Err(anyhow!(
            "{id} names {} actions ({}): give more of the id",
            many.len(),
            many.iter()
                .map(|a| a.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn date(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

pub(crate) fn run(args: &ActionsArgs) -> anyhow::Result<ExitCode> {
    let dir = crate::fleet::store::dir(args.store.as_deref())?;
    let actions = crate::fleet::store::actions(&dir)?;
    let now = crate::clock::now_ms()?;
    match &args.mark {
        Some(ActionMark::Done {
            id,
            date: when,
            note,
        }) => {
            let a = find(&actions, id)?;
            let done_ms = match when {
                Some(w) => crate::fleet::instant(w).map_err(|e| anyhow!("--date: {e}"))?,
                None => now,
            };
            anyhow::ensure!(
                done_ms >= a.based_on.1,
                "--date: {} is before the end of the window the action was based on ({})",
                date(done_ms),
                date(a.based_on.1)
            );
            gpuwise_store::journal::append(
                &dir,
                &serde_json::json!({"type": "done", "id": a.id, "done_ms": done_ms, "marked_ms": now, "note": note}),
            )?;
            crate::printer::info(&format!("{} marked done on {}", a.id, date(done_ms)));
        }
        Some(ActionMark::Reject { id, reason }) => {
            let a = find(&actions, id)?;
            gpuwise_store::journal::append(
                &dir,
                &serde_json::json!({"type": "rejected", "id": a.id, "reason": reason, "marked_ms": now}),
            )?;
            crate::printer::info(&format!("{} marked rejected", a.id));
        }
        Some(ActionMark::List) | None => {
            emit(&list(&actions, &dir, args.format.as_deref())?, None)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The actions in `format`.
fn list(
    actions: &[LoggedAction],
    dir: &std::path::Path,
    format: Option<&str>,
) -> anyhow::Result<String> {
    Ok(match format.unwrap_or("table") {
        "json" => format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "gpuwise.actions/v1",
                "actions": actions,
            }))?
        ),
        "csv" => {
            let mut s =
                String::from("id,recommended,kind,state,done,predicted_monthly_usd,targets,note\n");
            for a in actions {
                s.push_str(&format!(
                    "{},{},{},{},{},{},{},{}\n",
                    a.id,
                    date(a.recommended_ms),
                    a.kind,
                    a.state,
                    a.done_ms.map(date).unwrap_or_default(),
                    a.predicted_monthly_usd,
                    escape::csv(&a.target_names.join(";")),
                    escape::csv(a.note.as_deref().unwrap_or(""))
                ));
            }
            s
        }
        f @ ("table" | "markdown") => {
            let format = if f == "table" {
                gpuwise_render::Format::Table
            } else {
                gpuwise_render::Format::Markdown
            };
            let section = gpuwise_render::section::Section {
                title: format!("Actions in {}", gpuwise_store::journal::path(dir).display()),
                note: None,
                headers: vec![
                    "ID",
                    "RECOMMENDED",
                    "KIND",
                    "STATE",
                    "DONE",
                    "PREDICTED/MO",
                    "TARGETS",
                ],
                right: vec![5],
                optional: vec![6, 4],
                rows: actions
                    .iter()
                    .map(|a| {
                        vec![
                            a.id.clone(),
                            date(a.recommended_ms),
                            a.kind.clone(),
                            a.state.clone(),
                            a.done_ms.map(date).unwrap_or_default(),
                            gpuwise_render::usd(a.predicted_monthly_usd),
                            a.target_names.join(", "),
                        ]
                    })
                    .collect(),
            };
            gpuwise_render::sections_text(
                "Actions",
                &[section],
                format,
                &gpuwise_render::RenderOptions {
                    top: 0,
                    color: false,
                },
            )
        }
        other => {
            anyhow::bail!("--format: actions prints table, json, csv or markdown, not {other}")
        }
    })
}
