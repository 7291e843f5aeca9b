//! `gpuwise serve`: settings as for `report`, resolved once → telemetry (files read as they
//! grow, or a store asked per window) → `gpuwise-server`, which answers HTTP and asks the one
//! [`Analysis`] it holds what a window means (the report, the advice, the allocation, the
//! budgets: the library `report`, `advise`, `allocate` and `check` ask too), so the API prints
//! what the CLI prints.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use gpuwise_analysis::Analysis;
use gpuwise_ledger::check::Policy;
use gpuwise_server::{Bound, BoxError, Live, Options, Span, Telemetry};

use crate::cli::{PromArgs, ServeArgs};
use crate::config::Config;
use crate::fleet::{self, Asks};
use crate::{duration, jobs_join, printer};

fn length(flag: &str, v: Option<&String>, default: &str) -> anyhow::Result<u64> {
    duration::parse_positive_ms(flag, v.map_or(default, String::as_str)).map_err(|e| anyhow!(e))
}

/// `--listen`: an address, or a bare port on 127.0.0.1.
fn listen(v: Option<&str>) -> anyhow::Result<SocketAddr> {
    let v = v.unwrap_or("127.0.0.1:8080");
    if let Ok(port) = v.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    v.parse().map_err(|_| {
        anyhow!("--listen `{v}` is not an address (127.0.0.1:8080, [::1]:8080) or a port")
    })
}

fn token(var: Option<&String>) -> anyhow::Result<Option<String>> {
    let Some(var) = var else {
        return Ok(None);
    };
    let t = std::env::var(var).map_err(|_| anyhow!("--token-env: ${var} is not set"))?;
    let t = t.trim().to_owned();
    anyhow::ensure!(!t.is_empty(), "--token-env: ${var} is empty");
    Ok(Some(t))
}

fn boxed(e: anyhow::Error) -> BoxError {
    e.into()
}

/// A store asked for a span: everything is the store flags' window; `last` counts back from
/// now; `start`/`end` are the window.
fn store_window(prom: &PromArgs, span: &Span) -> PromArgs {
    let mut p = prom.clone();
    let at = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms).map_or_else(|_| String::new(), |t| t.to_string())
    };
    match span {
        Span::All => {}
        Span::Last(ms) => {
            p.end = None;
            p.last = Some(format!("{ms}ms"));
        }
        Span::Range(a, b) => {
            p.last = None;
            p.end = b.map(at);
            if let Some(a) = a {
                // The store's window starts at --start; the span is given as --last from --end.
                let end = b.unwrap_or_else(|| crate::clock::now_ms().unwrap_or(*a));
                p.last = Some(format!("{}ms", end.saturating_sub(*a).max(1)));
            }
        }
    }
    p
}

/// Tiles a device may keep (`--retain` ÷ `--tile`): each holds the device's accumulators,
/// about 3.3 KB (measured: 12 GPUs × 7 days take 13 MB in day tiles and 406 MB in minute
/// tiles), so 2,000 is at most 6.5 MB per device.
const MAX_TILES_PER_DEVICE: u64 = 2_000;

/// The tile length and the retention, checked against [`MAX_TILES_PER_DEVICE`].
fn tiles(args: &ServeArgs, cfg: &Config) -> anyhow::Result<(u64, u64)> {
    let tile = length("tile", args.tile.as_ref().or(cfg.tile.as_ref()), "1d")?;
    anyhow::ensure!(tile >= 60_000, "--tile must be at least 1m");
    let retain = length(
        "retain",
        args.retain.as_ref().or(cfg.retain.as_ref()),
        "35d",
    )?;
    let per_device = retain.div_ceil(tile);
    anyhow::ensure!(
        per_device <= MAX_TILES_PER_DEVICE,
        "--tile {} with --retain {} keeps {per_device} tiles per device, about {:.0} MB per \
         device (each tile holds the device's figures, about 3.3 KB): keep at most {} — a \
         longer --tile or a shorter --retain",
        args.tile.as_deref().or(cfg.tile.as_deref()).unwrap_or("1d"),
        args.retain
            .as_deref()
            .or(cfg.retain.as_deref())
            .unwrap_or("35d"),
        per_device as f64 * 3.3 / 1024.0,
        MAX_TILES_PER_DEVICE
    );
    Ok((tile, retain))
}

/// How the server runs: flags, else the config file, else the defaults.
fn options(args: &ServeArgs, cfg: &Config) -> anyhow::Result<Options> {
    Ok(Options {
        allowed_hosts: if args.allowed_hosts.is_empty() {
            cfg.allowed_hosts.clone().unwrap_or_default()
        } else {
            args.allowed_hosts.clone()
        },
        listen: listen(args.listen.as_deref().or(cfg.listen.as_deref()))?,
        token: token(args.token_env.as_ref())?,
        refresh: Duration::from_millis(length(
            "refresh",
            args.refresh.as_ref().or(cfg.refresh.as_ref()),
            "30s",
        )?),
        request_timeout: Duration::from_millis(length(
            "request-timeout",
            args.request_timeout.as_ref(),
            "30s",
        )?),
        store_windows_per_minute: usize::from(args.store_windows_per_minute),
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(cert, key)| gpuwise_server::TlsFiles { cert, key }),
    })
}

/// The jobs of a window, joined afresh for each request (the join reads samples; the server
/// keeps profiles): the window's files read again with the join as a tap, or the store's raw
/// samples for it.
fn jobs_fn(
    args: &ServeArgs,
    read: &gpuwise_sources::ReadOptions,
    analysis: &gpuwise_analysis::Settings,
) -> Box<gpuwise_server::JobsFn> {
    let (sources, fleet_args) = (args.jobs.clone(), args.fleet.clone());
    let (read, analysis) = (read.clone(), analysis.clone());
    Box::new(move |span: &Span| {
        let now_ms = crate::clock::now_ms().map_err(boxed)?;
        let mut fleet_args = fleet_args.clone();
        let mut read = read.clone();
        if fleet_args.prom.prometheus.is_some() {
            fleet_args.prom = store_window(&fleet_args.prom, span);
        } else {
            read.range = match span {
                Span::All => None,
                Span::Last(ms) => Some((
                    now_ms.saturating_sub(i64::try_from(*ms).unwrap_or(i64::MAX)),
                    now_ms,
                )),
                Span::Range(a, b) => Some((a.unwrap_or(i64::MIN), b.unwrap_or(i64::MAX))),
            };
        }
        let settings = fleet::Settings {
            read,
            analysis: analysis.clone(),
            now_ms,
        };
        let req = jobs_join::Request {
            sources: &sources,
            fleet: &fleet_args,
            settings: gpuwise_jobs::JobSettings {
                idle_below_pct: settings.read.profile.idle_threshold_pct,
                ..gpuwise_jobs::JobSettings::default()
            },
            progress: false,
        };
        let r = jobs_join::run(&req, settings).map_err(boxed)?;
        let opts = gpuwise_render::RenderOptions::default();
        Ok(gpuwise_server::JobsAnswer {
            json: gpuwise_jobs::view::render(&r, gpuwise_render::Format::Json, &opts),
            html: gpuwise_jobs::view::render(&r, gpuwise_render::Format::Html, &opts),
        })
    })
}

/// `--store`: windows that start before the files' first tile take that part from the
/// history store (whole tiles; hours the store lacks there stay empty).
struct StoreHistory {
    dir: std::path::PathBuf,
    read: gpuwise_sources::ReadOptions,
}

impl gpuwise_server::live::History for StoreHistory {
    fn first_ms(&self) -> Option<i64> {
        gpuwise_store::Store::at(&self.dir)
            .days()
            .ok()?
            .first()
            .map(|d| d.start_ms)
    }

    fn window(
        &self,
        from: i64,
        to: i64,
    ) -> Result<
        (
            gpuwise_core::profile::Profile,
            gpuwise_core::report::IngestSummary,
        ),
        String,
    > {
        fleet::store::window(
            &self.dir,
            &fleet::store::Rest::None,
            &self.read,
            Some((from, to)),
            &|_| {},
        )
        .map_err(|e| e.to_string())
    }
}

/// `--store`: after each refresh, the completed tiles since the last write (and the one
/// before it, for samples that came late) joined across inputs and written to the history
/// store; the tile still running is left for a later refresh.
fn keep_history(
    dir: std::path::PathBuf,
    clock: gpuwise_server::Clock,
) -> Arc<gpuwise_server::live::AfterRefresh> {
    let written: std::sync::Mutex<Option<i64>> = std::sync::Mutex::new(None);
    Arc::new(move |live: &Live| {
        let Some((first, end)) = live.tiles() else {
            return Ok(());
        };
        let tile_ms = live.tile_ms();
        let t = i64::try_from(tile_ms).unwrap_or(i64::MAX);
        let now = clock();
        let complete = end.min(now.div_euclid(t));
        let mut w = written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let from = w.map_or(first, |x| (x - 1).max(first));
        let mut tiles = gpuwise_core::profile::Profile::default();
        let st = &live.settings().profile;
        for tile in from..complete {
            let piece = live.window(tile, tile + 1).map_err(|e| e.to_string())?;
            tiles.absorb(piece.profile.into_tile(tile), st);
        }
        gpuwise_store::Store::at(&dir)
            .write(&tiles, tile_ms, now, st)
            .map_err(|e| e.to_string())?;
        *w = Some(complete);
        Ok(())
    })
}

pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.config.as_deref())?;
    anyhow::ensure!(
        !args.fleet.inputs.is_empty() || args.fleet.prom.prometheus.is_some(),
        "serve reads telemetry files (INPUT…) or --prometheus URL (--store keeps their history)"
    );
    anyhow::ensure!(
        args.fleet.read.since.is_none() && args.fleet.read.until.is_none(),
        "serve takes its window per request (?last=7d, ?start=…&end=…), not --since/--until"
    );
    let budget = match args.policy.clone().or_else(|| cfg.policy.clone()) {
        Some(path) => {
            Policy::from_toml(&fs_err::read_to_string(&path)?, &path.display().to_string())?.budget
        }
        None => None,
    };
    let asks = Asks {
        workloads: args.advise.workloads.as_deref(),
        advise: Some(&args.advise),
        alloc: Some(&args.alloc),
        budget,
        keep: crate::fleet::Keep::Profiles,
    };
    let settings = fleet::resolve(&args.fleet.read, &args.fleet.analysis, &cfg, &asks)?;
    let opts = options(args, &cfg)?;
    anyhow::ensure!(
        !args.fleet.inputs.iter().any(|i| i == "-"),
        "serve reads files it can look at again; standard input (`-`) is read once: use `report`"
    );
    // The port and the token first: a taken port is said before the fleet is read.
    let bound = Bound::new(opts)?;
    let jobs = args
        .jobs
        .any()
        .then(|| jobs_fn(args, &settings.read, &settings.analysis));
    let mut read = settings.read;
    let (tile, retain) = tiles(args, &cfg)?;
    read.tile_ms = Some(tile);
    let analysis = Arc::new(Analysis::new(settings.analysis));
    // The clock's settings were checked when the settings were resolved.
    let clock: gpuwise_server::Clock = Arc::new(|| {
        crate::clock::now_ms().unwrap_or_else(|_| jiff::Timestamp::now().as_millisecond())
    });
    let telemetry = if args.fleet.prom.prometheus.is_some() {
        let prom = args.fleet.prom.clone();
        let start = args.fleet.read.start.clone();
        Telemetry::Store(Box::new(move |span: &Span| {
            let p = store_window(&prom, span);
            let start = if matches!(span, Span::All) {
                start.as_deref()
            } else {
                None
            };
            fleet::prom_pull(&p, start, &read).map_err(boxed)
        }))
    } else {
        let started = std::time::Instant::now();
        // The plausible-time bound follows the clock at every refresh.
        let now = clock.clone();
        let latest: gpuwise_server::Latest = Arc::new(move || fleet::latest_plausible(now()));
        let mut live = Live::open(args.fleet.inputs.clone(), read, Some(retain), Some(latest))?;
        if let Some(dir) = &args.fleet.store {
            live.after_refresh(keep_history(dir.clone(), clock.clone()))
                .map_err(|e| anyhow::anyhow!("--store: {e}"))?;
            live.with_history(Arc::new(StoreHistory {
                dir: dir.clone(),
                read: live.settings().clone(),
            }));
        }
        printer::info(&format!(
            "read {} in {:.1} s",
            args.fleet.inputs.join(" "),
            started.elapsed().as_secs_f64()
        ));
        Telemetry::Files {
            live: Box::new(live),
        }
    };
    let scheme = if bound.is_tls() { "https" } else { "http" };
    let server = match jobs {
        Some(jobs) => bound.serve_with_jobs(telemetry, analysis, clock, jobs),
        None => bound.serve(telemetry, analysis, clock),
    };
    printer::info(&format!(
        "serving {scheme}://{}/ (Ctrl-C stops)",
        server.local_addr()?
    ));
    server.run()?;
    Ok(ExitCode::SUCCESS)
}
