//! # gpuwise
//!
//! The binary: parse arguments → resolve settings (flags, environment, config file) → run the
//! command → render → exit code. Everything else lives in the library crates.
//!
//! Exit codes: 0 success; 1 the report ran and a `--max-idle-share` budget was exceeded;
//! 2 an error (bad arguments, unreadable input, `--strict` skip). A closed pipe on stdout
//! (`gpuwise report | head`) is success.

mod cli;
mod clock;
mod commands;
mod config;
mod duration;
mod fleet;
mod output;
mod printer;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::parse();
    match commands::run(args) {
        Ok(code) => code,
        Err(err) => {
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            printer::error(&err);
            ExitCode::from(2)
        }
    }
}
