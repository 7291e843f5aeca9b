//! `gpuwise schedule`: a job list and pools → the schedule a policy makes → rendered.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_pack::jobs::{self, Pool};
use gpuwise_pack::schedule::{self, Policy};
use gpuwise_render::Format;

use crate::cli::ScheduleArgs;
use crate::output::emit;
use crate::printer;

pub(crate) fn run(a: &ScheduleArgs) -> anyhow::Result<ExitCode> {
    let format =
        crate::config::output_format(a.format.as_deref(), &crate::config::Config::default())?;
    anyhow::ensure!(
        format != Format::Html,
        "--format: schedule prints table, json, markdown or csv"
    );
    let policy: Policy = a.policy.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    let pools: Vec<Pool> = a
        .pools
        .iter()
        .map(|p| Pool::parse(p))
        .collect::<Result<_, _>>()?;
    let mut names = std::collections::BTreeSet::new();
    for p in &pools {
        anyhow::ensure!(names.insert(&p.name), "--pool: `{}` is named twice", p.name);
    }
    let name = a.jobs.display().to_string();
    let list = jobs::parse(&fs_err::read_to_string(&a.jobs)?, &name)?;
    for (why, n) in &list.skipped {
        printer::warn(&format!("{name}: {n} row(s) skipped: {why}"));
    }
    for j in &list.jobs {
        for p in &j.pools {
            anyhow::ensure!(
                names.contains(p),
                "{name}: job {} may use pool `{p}`, which no --pool names",
                j.id
            );
        }
    }
    let s = schedule::run(&list.jobs, &pools, policy);
    if s.rejected > 0 {
        printer::warn(&format!(
            "{} job(s) need more GPUs than any pool they may use holds: not scheduled",
            s.rejected
        ));
    }
    emit(&gpuwise_pack::view::schedule(&s, format), a.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
