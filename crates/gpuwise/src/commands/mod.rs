//! The commands. Each resolves its settings, calls the library crates, renders, and returns
//! an exit code; none prints data anywhere but stdout or `--output`.

use std::process::ExitCode;

use crate::cli::{Cli, Command, SimulateCommand};

mod actions;
mod advise;
mod allocate;
mod catalog;
mod check;
mod demo;
mod generate;
mod jobs;
mod pack;
mod plan;
mod reconcile;
mod record;
mod report;
mod review;
mod rollup;
mod schedule;
mod serve;
mod simulate;
mod simulate_serve;

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Report(args) => report::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Catalog(cmd) => catalog::run(&cmd),
        Command::Generate(args) => generate::run(&args),
        Command::Plan(cmd) => plan::run(&cmd),
        Command::Advise(args) => advise::run(&args),
        Command::Record(args) => record::run(&args),
        Command::Allocate(args) => allocate::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Simulate(cmd) => match &cmd {
            SimulateCommand::Spot(args) => simulate::spot(args),
            SimulateCommand::Commit(args) => simulate::commit(args),
            SimulateCommand::Serve(args) => simulate_serve::run(args),
        },
        Command::Serve(args) => serve::run(&args),
        Command::Schedule(args) => schedule::run(&args),
        Command::Pack(args) => pack::run(&args),
        Command::Jobs(args) => jobs::run(&args),
        Command::Rollup(args) => rollup::run(&args),
        Command::Review(args) => review::run(&args),
        Command::Actions(args) => actions::run(&args),
    }
}
