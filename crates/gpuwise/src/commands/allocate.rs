//! `gpuwise allocate`: the fleet's cost by team (showback or chargeback), unit costs, the
//! month to date and month-end forecast; or the allocation as FOCUS 1.2 rows.

use std::process::ExitCode;

use gpuwise_render::{Format, RenderOptions};

use crate::cli::AllocateArgs;
use crate::config::{Config, output_format};
use crate::fleet::{Asks, Keep};
use crate::output::emit;
use crate::printer;

pub(crate) fn run(args: &AllocateArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let focus = args.format.as_deref() == Some("focus");
    let format = if focus {
        Format::Csv
    } else {
        output_format(args.format.as_deref(), &cfg)?
    };
    anyhow::ensure!(
        format != Format::Html,
        "--format: allocate prints table, json, csv, markdown or focus"
    );
    let asks = Asks {
        alloc: Some(&args.alloc),
        keep: if focus { Keep::Focus } else { Keep::Allocation },
        ..Asks::default()
    };
    let mut fleet = crate::fleet::read(&args.fleet, &cfg, &asks, !args.out.no_progress)?;
    if focus {
        let rows = fleet.focus_rows();
        let unpriced = rows.unpriced_devices;
        if unpriced > 0 {
            printer::warn(&format!(
                "{unpriced} device(s) have no price and no FOCUS rows (a FOCUS cost cannot be unknown)"
            ));
        }
        emit(&rows.csv, args.out.output.as_ref())?;
        return Ok(ExitCode::SUCCESS);
    }
    let a = fleet.allocation()?;
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let text = gpuwise_ledger::view::allocation(&a, format, &RenderOptions { top: 0, color })?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
