//! The jobs report drawn: a table, Markdown, an HTML page, JSON (`gpuwise.jobs/v1`), or its
//! job rows as CSV.

use gpuwise_render::escape;
use gpuwise_render::section::Section;
use gpuwise_render::text::{hours, opt, pct, usd_or_unpriced};
use gpuwise_render::{Format, RenderOptions};

use crate::report::{Group, JobRow, JobsReport};

fn gb(mib: Option<f64>) -> String {
    opt(mib, |m| format!("{:.1} GiB", m / 1024.0))
}

fn summary(r: &JobsReport) -> Section {
    let f = &r.fleet;
    let mut rows = vec![
        vec!["jobs".into(), r.jobs.len().to_string()],
        vec!["GPU-hours held by jobs".into(), hours(f.held_gpu_hours)],
        vec![
            "  of them seen by the telemetry".into(),
            hours(f.attributed_gpu_hours),
        ],
        vec![
            "  held and idle (allocated, unused)".into(),
            hours(f.allocated_idle_gpu_hours),
        ],
        vec![
            "  held, not seen".into(),
            hours(f.held_unobserved_gpu_hours),
        ],
        vec![
            "GPU-hours seen with no job (unallocated)".into(),
            hours(f.unattributed_gpu_hours),
        ],
        vec![
            "  of them idle".into(),
            hours(f.unattributed_idle_gpu_hours),
        ],
        vec!["cost of jobs".into(), gpuwise_render::usd(f.cost_usd)],
        vec!["  of it idle".into(), gpuwise_render::usd(f.idle_cost_usd)],
    ];
    if f.unpriced_jobs > 0 {
        rows.push(vec![
            "jobs with no price".into(),
            f.unpriced_jobs.to_string(),
        ]);
    }
    if let Some(h) = f.report_gpu_hours {
        rows.push(vec![
            "GPU-hours in the report (the join's check)".into(),
            hours(h),
        ]);
    }
    Section {
        title: "Jobs".into(),
        note: Some(format!(
            "Window {} to {}. Idle: below {} % utilization.",
            r.window.from.as_deref().unwrap_or("?"),
            r.window.to.as_deref().unwrap_or("?"),
            r.settings.idle_below_pct
        )),
        headers: vec!["FIGURE", "VALUE"],
        right: vec![1],
        optional: Vec::new(),
        rows,
    }
}

fn job_rows(jobs: &[&JobRow]) -> Vec<Vec<String>> {
    jobs.iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.user.clone().unwrap_or_default(),
                j.state.name().to_owned(),
                j.gpus.to_string(),
                format!("{:.2}", j.gpu_hours),
                usd_or_unpriced(j.cost_usd),
                pct(j.mean_utilization_pct),
                pct(j.idle_share_pct),
                gb(j.peak_memory_used_mib),
                j.flags.iter().map(|f| f.kind).collect::<Vec<_>>().join(" "),
            ]
        })
        .collect()
}

fn jobs_section(r: &JobsReport, top: usize) -> Section {
    let mut jobs: Vec<&JobRow> = r.jobs.iter().collect();
    // The costliest waste first.
    jobs.sort_by(|a, b| {
        b.idle_cost_usd
            .unwrap_or(0.0)
            .total_cmp(&a.idle_cost_usd.unwrap_or(0.0))
            .then_with(|| b.gpu_hours.total_cmp(&a.gpu_hours))
    });
    let shown = jobs.len().min(top);
    Section {
        title: "Jobs, the costliest idle first".into(),
        note: (jobs.len() > shown)
            .then(|| format!("{shown} of {} jobs (all in JSON and CSV).", jobs.len())),
        headers: vec![
            "JOB",
            "USER",
            "STATE",
            "GPUS",
            "GPU-H",
            "COST",
            "MEAN UTIL",
            "IDLE",
            "PEAK MEM",
            "FLAGS",
        ],
        right: vec![3, 4, 5, 6, 7, 8],
        optional: vec![8, 7, 1],
        rows: job_rows(&jobs[..shown]),
    }
}

fn evidence(r: &JobsReport, top: usize) -> Option<Section> {
    let mut rows = Vec::new();
    for j in &r.jobs {
        for f in &j.flags {
            rows.push(vec![j.id.clone(), f.kind.to_owned(), f.message.clone()]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let all = rows.len();
    rows.truncate(top.max(1).saturating_mul(2));
    Some(Section {
        title: "What the flags saw".into(),
        note: (all > rows.len()).then(|| format!("{} of {all} flags.", rows.len())),
        headers: vec!["JOB", "FLAG", "EVIDENCE"],
        right: Vec::new(),
        optional: Vec::new(),
        rows,
    })
}

fn group_section(by: &str, groups: &[Group]) -> Section {
    Section {
        title: format!("Per {by}"),
        note: Some(
            "Cost per successful run counts the unsuccessful runs' cost against the successes."
                .into(),
        ),
        headers: vec![
            "KEY",
            "JOBS",
            "OK",
            "NOT OK",
            "GPU-H",
            "COST",
            "PER RUN",
            "PER SUCCESS",
            "IDLE COST",
            "QUEUE SHARE",
        ],
        right: vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
        optional: vec![9, 8, 6],
        rows: groups
            .iter()
            .map(|g| {
                vec![
                    g.key.clone(),
                    g.jobs.to_string(),
                    g.succeeded.to_string(),
                    g.unsuccessful.to_string(),
                    format!("{:.2}", g.gpu_hours),
                    gpuwise_render::usd(g.cost_usd),
                    // No ended run, no success: no unit cost (never $0).
                    opt(g.cost_per_run_usd, gpuwise_render::usd),
                    opt(g.cost_per_successful_run_usd, gpuwise_render::usd),
                    gpuwise_render::usd(g.idle_cost_usd),
                    pct(g.queue_share_pct),
                ]
            })
            .collect(),
    }
}

/// The report's sections, in the order every format shows them.
#[must_use]
pub fn sections(r: &JobsReport, top: usize) -> Vec<Section> {
    let mut out = vec![summary(r), jobs_section(r, top)];
    out.extend(evidence(r, top));
    for by in ["user", "account", "team", "experiment"] {
        if let Some(g) = r.groups.get(by)
            && !g.is_empty()
        {
            out.push(group_section(by, g));
        }
    }
    if !r.warnings.is_empty() {
        out.push(Section {
            title: "Warnings".into(),
            note: None,
            headers: vec!["WARNING"],
            right: Vec::new(),
            optional: Vec::new(),
            rows: r.warnings.iter().map(|w| vec![w.clone()]).collect(),
        });
    }
    out
}

/// The job rows as CSV (one line per job; flags joined by `;`).
#[must_use]
pub fn csv(r: &JobsReport) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_csv(r, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// [`csv()`], written line by line.
///
/// # Errors
/// The writer's.
pub fn write_csv(r: &JobsReport, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    w.write_all(
        b"id,source,user,account,team,partition,experiment,state,gpus,gpu_type,binding,start,end,queue_wait_s,run_s,gpu_hours,observed_gpu_hours,price_usd_per_gpu_hour,cost_usd,idle_cost_usd,mean_utilization_pct,p95_utilization_pct,idle_share_pct,peak_memory_used_mib,memory_total_mib,mean_power_w,gpus_observed,gpus_used,flags\n",
    )?;
    let o = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    let s = |v: &Option<String>| escape::csv(v.as_deref().unwrap_or(""));
    for j in &r.jobs {
        let binding = serde_json::to_value(j.binding)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let flags: Vec<&str> = j.flags.iter().map(|f| f.kind).collect();
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            escape::csv(&j.id),
            j.source.name(),
            s(&j.user),
            s(&j.account),
            s(&j.team),
            s(&j.partition),
            s(&j.experiment),
            j.state.name(),
            j.gpus,
            s(&j.gpu_type),
            binding,
            s(&j.start),
            s(&j.end),
            o(j.queue_wait_s),
            o(j.run_s),
            j.gpu_hours,
            j.observed_gpu_hours,
            o(j.price_usd_per_gpu_hour),
            o(j.cost_usd),
            o(j.idle_cost_usd),
            o(j.mean_utilization_pct),
            o(j.p95_utilization_pct),
            o(j.idle_share_pct),
            o(j.peak_memory_used_mib),
            o(j.memory_total_mib),
            o(j.mean_power_w),
            j.gpus_observed,
            j.gpus_used,
            escape::csv(&flags.join(";")),
        )?;
    }
    Ok(())
}

/// The headline: what jobs held, what of it was idle.
#[must_use]
pub fn headline(r: &JobsReport) -> String {
    let flagged = r.jobs.iter().filter(|j| !j.flags.is_empty()).count();
    format!(
        "{} jobs held {} GPU-hours ({}); {} of them idle ({}), {} jobs flagged; {} GPU-hours ran with no job.",
        r.jobs.len(),
        hours(r.fleet.held_gpu_hours),
        gpuwise_render::usd(r.fleet.cost_usd),
        hours(r.fleet.allocated_idle_gpu_hours),
        gpuwise_render::usd(r.fleet.idle_cost_usd),
        flagged,
        hours(r.fleet.unattributed_gpu_hours),
    )
}

/// The report in `format`, written to `w` (JSON and CSV streamed: a month of 100,000 jobs is
/// never one string).
///
/// # Errors
/// The writer's.
pub fn write(
    r: &JobsReport,
    format: Format,
    opts: &RenderOptions,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *w, r)?;
            w.write_all(b"\n")
        }
        Format::Csv => write_csv(r, w),
        _ => w.write_all(render(r, format, opts).as_bytes()),
    }
}

/// The report in `format`.
#[must_use]
pub fn render(r: &JobsReport, format: Format, opts: &RenderOptions) -> String {
    match format {
        Format::Json => gpuwise_render::json::pretty(r),
        Format::Csv => csv(r),
        Format::Html => gpuwise_render::html::page(
            "GPU jobs",
            &format!(
                "{} to {}",
                r.window.from.as_deref().unwrap_or("?"),
                r.window.to.as_deref().unwrap_or("?")
            ),
            &headline(r),
            &[],
            &sections(r, usize::MAX),
        ),
        _ => {
            let mut out = headline(r);
            out.push_str("\n\n");
            out.push_str(&gpuwise_render::sections_text(
                "GPU jobs",
                &sections(r, opts.top),
                format,
                opts,
            ));
            out
        }
    }
}
