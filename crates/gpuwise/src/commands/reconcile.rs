//! `gpuwise reconcile`: FOCUS bills against the telemetry of the same fleet.

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use gpuwise_ledger::bill::{BillBuilder, JoinKey};
use gpuwise_ledger::focus::{self, ReadTally};
use gpuwise_ledger::observed::Observed;
use gpuwise_ledger::reconcile::{self, Thresholds};
use gpuwise_render::{Format, RenderOptions};

use crate::cli::ReconcileArgs;
use crate::config::{Config, output_format};
use crate::output::emit;
use crate::printer;

/// Parquet files start with these bytes.
const PARQUET_MAGIC: &[u8] = b"PAR1";

/// Read one bill file (CSV, gzip or zstd CSV, or Parquet) into `builder`, its parts (blocks of
/// CSV records, Parquet row groups) read on every core, each into a fork of the builder, and
/// joined in file order.
pub(crate) fn read_bill(path: &Path, builder: &mut BillBuilder<'_>) -> anyhow::Result<ReadTally> {
    let name = path.display().to_string();
    let cannot = || format!("cannot read `{name}`");
    let input = gpuwise_sources::Input {
        path: Some(path.to_path_buf()),
        name: name.clone(),
        found_in_dir: false,
    };
    let (mut reader, trailing) = gpuwise_sources::input::open_noting(&input)?;
    let head = reader.fill_buf().with_context(cannot)?;
    if head.starts_with(PARQUET_MAGIC) {
        // Parquet's footer is at the end. A plain file is read where it lies (pages as they
        // are needed); a compressed one (rare) is decompressed into memory first.
        let mut file = std::fs::File::open(path).with_context(cannot)?;
        let mut magic = [0u8; 4];
        let plain = file.read_exact(&mut magic).is_ok() && magic == PARQUET_MAGIC;
        let bytes = if plain {
            None
        } else {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).with_context(cannot)?;
            Some(bytes::Bytes::from(bytes))
        };
        // The reader turns a panic of the Parquet decoder on corrupt data into an error;
        // silence the default hook meanwhile so the user sees that error, not a panic trace.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let read = match bytes {
            Some(b) => parquet_parts(focus::ParquetBill::open(b, &name), builder),
            None => parquet_parts(
                focus::ParquetBill::open(Positional::new(file).with_context(cannot)?, &name),
                builder,
            ),
        };
        std::panic::set_hook(hook);
        return read;
    }
    let mut blocks = focus::CsvBlocks::open(reader, &name)?;
    let header = blocks.header().clone();
    let mut tally = header.tally();
    let parts = std::iter::from_fn(|| blocks.next_block(focus::BLOCK).transpose());
    in_parallel(parts, builder, &mut tally, |block, fork| {
        Ok(header.read_block(&block?, &name, &mut |r| fork.add(r))?)
    })?;
    tally.add(blocks.finish());
    if trailing.load(std::sync::atomic::Ordering::Relaxed) {
        printer::warn(&format!(
            "{name}: bytes after the last gzip member are not gzip; ignored"
        ));
    }
    Ok(tally)
}

/// A file read at positions (`pread`), so that row groups are decoded by several threads at
/// once: `File`'s own `ChunkReader` seeks the file offset its clones share, which two threads
/// race on ("Invalid page header").
struct Positional {
    file: std::sync::Arc<std::fs::File>,
    len: u64,
}

impl Positional {
    fn new(file: std::fs::File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self {
            file: std::sync::Arc::new(file),
            len,
        })
    }
}

/// A reader of a [`Positional`] file from an offset on.
struct At {
    file: std::sync::Arc<std::fs::File>,
    pos: u64,
}

#[cfg(unix)]
fn read_at(file: &std::fs::File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, pos)
}

#[cfg(windows)]
fn read_at(file: &std::fs::File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, pos)
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl focus::Length for Positional {
    fn len(&self) -> u64 {
        self.len
    }
}

impl focus::ChunkReader for Positional {
    type T = std::io::BufReader<At>;

    fn get_read(&self, start: u64) -> Result<Self::T, focus::ParquetError> {
        Ok(std::io::BufReader::new(At {
            file: std::sync::Arc::clone(&self.file),
            pos: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<bytes::Bytes, focus::ParquetError> {
        let mut buf = vec![0; length];
        let mut at = At {
            file: std::sync::Arc::clone(&self.file),
            pos: start,
        };
        at.read_exact(&mut buf)
            .map_err(|e| focus::ParquetError::External(Box::new(e)))?;
        Ok(buf.into())
    }
}

fn parquet_parts<R: focus::ChunkReader + 'static>(
    bill: Result<focus::ParquetBill<R>, focus::FocusError>,
    builder: &mut BillBuilder<'_>,
) -> anyhow::Result<ReadTally> {
    let bill = bill?;
    let mut tally = bill.tally();
    in_parallel(0..bill.parts(), builder, &mut tally, |part, fork| {
        Ok(bill.read_part(part, &mut |r| fork.add(r))?)
    })?;
    Ok(tally)
}

/// Read `parts` on every core, each into a fork of `builder` by `read`, and join the forks
/// and tallies in the parts' order as they finish (a part done early waits for those before
/// it). The first part that fails, in order, is the error.
fn in_parallel<P: Send>(
    parts: impl Iterator<Item = P> + Send,
    builder: &mut BillBuilder<'_>,
    tally: &mut ReadTally,
    read: impl Fn(P, &mut BillBuilder<'_>) -> anyhow::Result<ReadTally> + Sync,
) -> anyhow::Result<()> {
    use rayon::iter::{ParallelBridge, ParallelIterator};
    struct Joiner<'b, 'c> {
        builder: &'b mut BillBuilder<'c>,
        tally: &'b mut ReadTally,
        next: usize,
        waiting: std::collections::BTreeMap<usize, anyhow::Result<(BillBuilder<'c>, ReadTally)>>,
        failed: Option<anyhow::Error>,
    }
    let template = builder.fork();
    let joiner = std::sync::Mutex::new(Joiner {
        builder,
        tally,
        next: 0,
        waiting: std::collections::BTreeMap::new(),
        failed: None,
    });
    parts.enumerate().par_bridge().for_each(|(i, part)| {
        let mut fork = template.fork();
        let done = read(part, &mut fork).map(|t| (fork, t));
        let mut guard = joiner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let j = &mut *guard;
        j.waiting.insert(i, done);
        while let Some(done) = j.waiting.remove(&j.next) {
            j.next += 1;
            match done {
                Ok((fork, t)) if j.failed.is_none() => {
                    j.builder.merge(fork);
                    j.tally.add(t);
                }
                Ok(_) => {}
                Err(e) => {
                    j.failed.get_or_insert(e);
                }
            }
        }
    });
    let j = joiner
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    j.failed.map_or(Ok(()), Err)
}

/// How a tally's separator reads in a message (`""` for a comma or Parquet).
fn separated(tally: &ReadTally) -> &'static str {
    match tally.delimiter {
        Some(b';') => "semicolon-separated, ",
        Some(b'\t') => "tab-separated, ",
        Some(b'|') => "pipe-separated, ",
        _ => "",
    }
}

pub(crate) fn run(args: &ReconcileArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        format != Format::Html,
        "--format: reconcile prints table, json, csv or markdown"
    );
    let join: JoinKey = args.join.parse().map_err(|e| anyhow!("--join: {e}"))?;
    for (flag, v) in [
        ("--gap-hours", args.gap_hours),
        ("--gap-share", args.gap_share),
    ] {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0,
            "{flag} must be a non-negative number, got {v}"
        );
    }
    let fleet = crate::fleet::read(
        &args.fleet,
        &cfg,
        &crate::fleet::Asks::default(),
        !args.out.no_progress,
    )?;
    let (report, profiles) = (&fleet.report, &fleet.profiles);
    let catalog = fleet.analysis.settings().prices.catalog();
    let mut builder = BillBuilder::new(catalog, &join, &args.team_tag);
    for path in &args.bill {
        let tally = read_bill(path, &mut builder)?;
        builder.add_read_skips(&tally.skips);
        printer::info(&format!(
            "{}: FOCUS {} ({}{} rows{})",
            path.display(),
            tally.version,
            separated(&tally),
            tally.rows,
            if tally.skips.total() > 0 {
                format!(", {} skipped", tally.skips.total())
            } else {
                String::new()
            }
        ));
    }
    let bill = builder.finish()?;
    if bill.rows == bill.skips.total() {
        let files = args
            .bill
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if bill.rows == 0 {
            bail!("{files}: the bill has no rows");
        }
        let why = bill
            .skips
            .by_reason
            .iter()
            .map(|(k, (n, e))| format!("{n} {k}, e.g. {e}"))
            .collect::<Vec<_>>()
            .join("; ");
        bail!(
            "{files}: no bill row could be read; all {} were skipped ({why})",
            bill.rows
        );
    }
    let prices = gpuwise_ledger::bill::catalog_prices(catalog, &bill);
    let observed = Observed::new(profiles, report);
    let r = reconcile::reconcile(
        &bill,
        &observed,
        &prices,
        &join,
        &args.team_tag,
        Thresholds {
            gap_hours: args.gap_hours,
            gap_share_pct: args.gap_share,
        },
    );
    for w in &r.warnings {
        printer::warn(w);
    }
    for (k, s) in &r.rows.skipped {
        printer::warn(&format!(
            "{} bill row(s) skipped ({k}), e.g. {}",
            s.count, s.example
        ));
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let text = gpuwise_ledger::view::reconciliation(&r, format, &RenderOptions { top: 0, color })?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
