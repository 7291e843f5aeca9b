//! # gpuwise
//!
//! The binary: parse arguments → resolve settings (flags, environment, config file) → run the
//! command → render → exit code. Everything else lives in the library crates.
//!
//! Exit codes: 0 success; 1 the report ran and a `--max-idle-share` budget was exceeded;
//! 2 an error (bad arguments, unreadable input, `--strict` skip, memory exhausted). A closed pipe on stdout
//! (`gpuwise report | head`) is success.

mod alloc;
mod cli;
mod clock;
mod commands;
mod config;
mod duration;
mod fleet;
mod inputs;
mod jobs_join;
mod notice;
mod output;
mod printer;
mod synthetic;
mod webhook;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: alloc::ErrorOnExhaustion = alloc::ErrorOnExhaustion;

fn main() -> ExitCode {
    let args = cli::parse();
    // A file-size limit (`ulimit -f`) sends SIGXFSZ, whose default kills the process without a
    // word (a recorder died silently). Caught, the write fails with EFBIG instead, and that is
    // reported like any failed write: the file named, exit 2.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    // Start the worker threads now, so that a process that may not have them (a memory or
    // thread limit) is told so plainly instead of panicking at the first parallel step.
    if let Err(e) = rayon::ThreadPoolBuilder::new().build_global() {
        printer::error(&anyhow::anyhow!("cannot start worker threads: {e}"));
        return ExitCode::from(2);
    }
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
