//! `gpuwise record`: settings → NVML sampler (exit 2 at once without a driver, before any file
//! is made) → optional /metrics listener → the recording loop until the duration or a signal.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, RwLock, mpsc};
use std::time::Duration;

use anyhow::Context as _;
use gpuwise_record::{NvmlSampler, Rotation, Sampler as _, Settings, exposition};

use crate::cli::RecordArgs;
use crate::duration::parse_positive_ms;
use crate::printer;

fn duration(flag: &str, v: Option<&str>, default: &str) -> anyhow::Result<Duration> {
    let ms = parse_positive_ms(flag, v.unwrap_or(default)).map_err(anyhow::Error::msg)?;
    Ok(Duration::from_millis(ms))
}

/// `PORT` → 127.0.0.1:PORT; anything else must be a socket address.
fn listen_addr(s: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse().with_context(|| {
        format!("--prometheus-listen `{s}` is neither a port nor an address like 127.0.0.1:9400")
    })
}

fn settings(args: &RecordArgs) -> anyhow::Result<Settings> {
    let host = match &args.host {
        Some(h) => h.clone(),
        None => gethostname::gethostname().to_string_lossy().into_owned(),
    };
    anyhow::ensure!(
        !host.is_empty() && !host.contains(['/', '\\']) && host != "." && host != "..",
        "--host `{host}` cannot name a file"
    );
    let rotate_mib = args.rotate_mib.unwrap_or(64);
    anyhow::ensure!(rotate_mib > 0, "--rotate-mib must be at least 1");
    let rotate_every = duration("rotate-every", args.rotate_every.as_deref(), "1d")?;
    Ok(Settings {
        out: args.out.clone(),
        host,
        interval: duration("interval", args.interval.as_deref(), "10s")?,
        flush: duration("flush", args.flush.as_deref(), "60s")?,
        duration: args
            .duration
            .as_deref()
            .map(|d| duration("duration", Some(d), ""))
            .transpose()?,
        rotation: Rotation {
            max_bytes: rotate_mib.saturating_mul(1024 * 1024),
            max_age_ms: i64::try_from(rotate_every.as_millis()).unwrap_or(i64::MAX),
        },
        processes: !args.no_processes,
    })
}

/// The token `--token-env` names, if any; an error for a listener off loopback without one.
fn listener_token(args: &RecordArgs, listen: Option<SocketAddr>) -> anyhow::Result<Option<String>> {
    let token = match &args.token_env {
        Some(var) => {
            let t = std::env::var(var)
                .map_err(|_| anyhow::anyhow!("--token-env: ${var} is not set"))?;
            let t = t.trim().to_owned();
            anyhow::ensure!(!t.is_empty(), "--token-env: ${var} is empty");
            Some(t)
        }
        None => None,
    };
    if let Some(addr) = listen {
        anyhow::ensure!(
            addr.ip().is_loopback() || token.is_some(),
            "--prometheus-listen {addr} is not a loopback address: other machines could read \
             this host's GPUs and processes. Give a token (--token-env VAR) or listen on 127.0.0.1"
        );
    }
    Ok(token)
}

pub(crate) fn run(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let settings = settings(args)?;
    let listen = args
        .prometheus_listen
        .as_deref()
        .map(listen_addr)
        .transpose()?;
    // One rule with `serve`: a listener others can reach needs a token (checked before the
    // driver, so the refusal needs no GPU).
    let token = listener_token(args, listen)?;
    // The driver first: without one, stop before anything is written.
    let mut sampler = NvmlSampler::new(settings.processes)?;
    let shared = match listen {
        Some(addr) => {
            let shared: exposition::Shared =
                Arc::new(RwLock::new(exposition::Exposition::new(&settings.host)));
            let bound = exposition::serve(addr, shared.clone(), token)
                .with_context(|| format!("cannot listen on {addr}"))?;
            printer::info(&format!("serving OpenMetrics at http://{bound}/metrics"));
            Some(shared)
        }
        None => None,
    };
    let (tx, rx) = mpsc::channel();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("cannot install the SIGTERM handler")?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = tx.send(());
        }
    });
    printer::info(&format!(
        "recording {} every {:?} into {} (flush every {:?}{})",
        sampler.describe(),
        settings.interval,
        settings
            .out
            .join(format!("{}.csv", settings.host))
            .display(),
        settings.flush,
        settings
            .duration
            .map(|d| format!(", for {d:?}"))
            .unwrap_or_default()
    ));
    let summary = gpuwise_record::record(&mut sampler, &settings, &rx, shared.as_ref())?;
    for (path, rec) in &summary.recovered {
        if rec.torn_bytes > 0 {
            printer::warn(&format!(
                "{}: cut a torn last line ({} bytes) left by an earlier run that was killed",
                path.display(),
                rec.torn_bytes
            ));
        }
        if rec.other_header {
            printer::warn(&format!(
                "{}: had other columns; moved aside as a rotated file",
                path.display()
            ));
        }
        if rec.compressed > 0 {
            printer::info(&format!(
                "{}: finished compressing {} rotated file(s) an earlier run left",
                path.display(),
                rec.compressed
            ));
        }
    }
    if let Some(e) = &summary.last_error {
        printer::warn(&format!(
            "{} of {} samples failed; the last: {e}",
            summary.failed_ticks, summary.ticks
        ));
    }
    if summary.late_ticks > 0 {
        printer::warn(&format!(
            "{} ticks were skipped because sampling took longer than --interval",
            summary.late_ticks
        ));
    }
    printer::info(&format!(
        "{}: {} samples, {} GPU rows, {} process rows, {} file(s) rotated; read it back with `{} report {}`",
        if summary.stopped_by_signal {
            "stopped"
        } else {
            "done"
        },
        summary.ticks,
        summary.gpu_rows,
        summary.process_rows,
        summary.rotated,
        printer::me(),
        settings.out.display()
    ));
    Ok(ExitCode::SUCCESS)
}
