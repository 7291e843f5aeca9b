//! Messages to people go to stderr (data goes to stdout); progress only on a terminal.

#![allow(clippy::print_stderr)]

use std::io::IsTerminal;

use gpuwise_render::escape::terminal;

/// Whether colour may be used on `stream_is_tty`: never with `NO_COLOR` set (any value).
pub(crate) fn color_allowed(stream_is_tty: bool) -> bool {
    stream_is_tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Print an error chain once, with a hint line where one helps.
pub(crate) fn error(err: &anyhow::Error) {
    let color = color_allowed(std::io::stderr().is_terminal());
    let label = if color {
        "\x1b[1;31merror\x1b[0m"
    } else {
        "error"
    };
    eprintln!("{label}: {}", terminal(&format!("{err:#}")));
}

/// An informational line.
pub(crate) fn info(msg: &str) {
    eprintln!("{}", terminal(msg));
}

/// A warning line.
pub(crate) fn warn(msg: &str) {
    let color = color_allowed(std::io::stderr().is_terminal());
    let label = if color {
        "\x1b[1;33mwarning\x1b[0m"
    } else {
        "warning"
    };
    eprintln!("{label}: {}", terminal(msg));
}

/// A byte counter shown while reading, on a terminal only.
pub(crate) fn progress(enabled: bool) -> Option<indicatif::ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} reading {bytes} ({bytes_per_sec}) {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(bar)
}

/// Run `read` with a byte counter that [`progress`] shows while it runs (on a terminal only),
/// then clear it.
pub(crate) fn reading<T>(enabled: bool, read: impl FnOnce(&(dyn Fn(u64) + Sync)) -> T) -> T {
    let bar = progress(enabled);
    let counter = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let out = read(&counter);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    out
}

/// How to run this program again, for hints: `gpuwise` when it was started by that name (it is
/// on PATH), else the path it was started by (`target/release/gpuwise` after `cargo run`),
/// relative to the working directory when it is below it — so a printed hint runs as printed.
pub(crate) fn me() -> String {
    let Some(arg0) = std::env::args_os().next() else {
        return "gpuwise".to_owned();
    };
    let path = std::path::PathBuf::from(&arg0);
    if path.components().count() <= 1 {
        return path.to_string_lossy().into_owned();
    }
    // Below `/` every path is "below the working directory": `usr/local/bin/gpuwise` would
    // run as printed but reads as a typo, so from the root the path stays absolute.
    let shown = std::env::current_dir()
        .ok()
        .filter(|cwd| cwd.parent().is_some())
        .and_then(|cwd| {
            path.strip_prefix(&cwd)
                .ok()
                .map(std::path::Path::to_path_buf)
        })
        .unwrap_or(path);
    let text = shown.to_string_lossy().into_owned();
    if text.contains(' ') {
        format!("'{text}'")
    } else {
        text
    }
}
