//! Reading inputs into a profile: format detection, chunked parallel parsing, merging.
//!
//! Line-oriented formats (nvidia-smi CSV, timed dmon) are cut into blocks at line boundaries;
//! each free worker takes the next block and parses it into a profile of its own, and block
//! profiles are joined in file order as they finish, so memory stays bounded by the number of
//! devices and workers, not by the input. Many inputs are read in parallel too. DCGM scrapes
//! and generic CSV are read one file at a time (files in parallel).

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::sync::{Mutex, PoisonError};

use gpuwise_core::EpochMs;
use gpuwise_core::profile::{
    Identity, Keep, Profile, ProfileBuilder, Rebuilding, SharedTap, SourceId, TapLog,
};
use gpuwise_core::settings::ProfileSettings;
use jiff::tz::TimeZone;
use rayon::prelude::*;

use crate::diag::{IngestError, LayoutError, Tally};
use crate::generic::ColumnMap;
use crate::input::{self, Input};
use crate::origin::Origin;
use crate::time::LocalClock;
use crate::{dcgm, dmon, generic, smi};

/// Input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `nvidia-smi --query-gpu … --format=csv`.
    NvidiaSmi,
    /// `nvidia-smi dmon`.
    Dmon,
    /// DCGM exporter scrape (Prometheus text).
    Dcgm,
    /// Generic CSV with `--map`.
    Csv,
}

/// An `--input-format` that is not an input format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not one of nvidia-smi, dmon, dcgm, csv")]
pub struct UnknownInputFormat(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownInputFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Format {
    /// Parse a `--input-format` value (also through [`std::str::FromStr`]).
    pub fn parse(s: &str) -> Result<Self, UnknownInputFormat> {
        match s {
            "nvidia-smi" | "smi" => Ok(Self::NvidiaSmi),
            "dmon" => Ok(Self::Dmon),
            "dcgm" | "prometheus" => Ok(Self::Dcgm),
            "csv" => Ok(Self::Csv),
            other => Err(UnknownInputFormat(other.to_owned())),
        }
    }

    /// The name `--input-format` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::NvidiaSmi => "nvidia-smi",
            Self::Dmon => "dmon",
            Self::Dcgm => "dcgm",
            Self::Csv => "csv",
        }
    }
}

/// Options of [`read_all`].
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Force a format (else detected per input).
    pub format: Option<Format>,
    /// Force the host of every device.
    pub host: Option<String>,
    /// Time zone of naive local timestamps.
    pub tz: TimeZone,
    /// Column names of `noheader` nvidia-smi logs, in query order.
    pub columns: Option<Vec<String>>,
    /// Column map of generic CSV.
    pub map: Option<ColumnMap>,
    /// Turn the first skip into an error.
    pub strict: bool,
    /// How samples become time.
    pub profile: ProfileSettings,
    /// Start time of untimed dmon logs.
    pub start_ms: Option<EpochMs>,
    /// Interval of untimed dmon rows.
    pub interval_ms: u64,
    /// Block size for parallel parsing.
    pub block_bytes: usize,
    /// Only samples at or after the first and before the second time (`--since`/`--until`).
    pub range: Option<(EpochMs, EpochMs)>,
    /// Keep each device's samples in tiles of this length (`gpuwise serve`), see
    /// [`gpuwise_core::profile::Profile::window`].
    pub tile_ms: Option<u64>,
    /// Show every sample taken to this tap (`gpuwise jobs`). Inputs are then read one after
    /// another in their order, each in one pass, so that the tap sees each device's samples
    /// in the order the profile takes them.
    pub tap: Option<gpuwise_core::profile::SharedTap>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            format: None,
            host: None,
            tz: TimeZone::UTC,
            columns: None,
            map: None,
            strict: false,
            profile: ProfileSettings::default(),
            start_ms: None,
            interval_ms: 1000,
            block_bytes: 4 << 20,
            range: None,
            tile_ms: None,
            tap: None,
        }
    }
}

/// The result of reading.
#[derive(Debug, Default)]
pub struct Ingested {
    /// Per-device accumulators.
    pub profile: Profile,
    /// Lines, samples and skips.
    pub tally: Tally,
    /// Each input's name and format.
    pub formats: Vec<(String, Format)>,
}

const HEAD: usize = 64 << 10;
use crate::lines::MAX_LINE;

/// Detect the format from the first bytes of an input.
pub fn detect(head: &[u8], opts: &ReadOptions) -> Result<Format, LayoutError> {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}');
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return Err(LayoutError::Empty);
    };
    let first_lower = first.to_ascii_lowercase();
    // A dmon header: `#Date Time gpu …` with `-o DT`, else `# gpu pwr gtemp …`; at least two
    // of dmon's column names after `gpu` (a Markdown title `# GPU logs` is not one).
    let words: Vec<&str> = first_lower
        .trim_start_matches('#')
        .split_whitespace()
        .collect();
    let dmon_columns = words
        .iter()
        .filter(|w| {
            [
                "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk",
                "fb", "bar1", "ccpm", "rxpci", "txpci",
            ]
            .contains(w)
        })
        .count();
    if first_lower.starts_with('#')
        && (words.first() == Some(&"gpu") || first_lower.starts_with("#date"))
        && dmon_columns >= 2
    {
        return Ok(Format::Dmon);
    }
    let dcgmish = |l: &str| {
        let l = l
            .trim_start_matches("# HELP ")
            .trim_start_matches("# TYPE ");
        l.starts_with("DCGM_") || l.starts_with("dcgm_")
    };
    if dcgmish(first) || text.lines().take(200).any(dcgmish) {
        return Ok(Format::Dcgm);
    }
    if opts.map.is_some() {
        return Ok(Format::Csv);
    }
    if first.contains(',') && opts.columns.is_some() {
        return Ok(Format::NvidiaSmi);
    }
    if first.contains(',') && smi::looks_like_header(first) {
        // A header with nothing to measure (a `--query-compute-apps` or `gpuwise record`
        // per-process log) is not GPU telemetry: skipped in a directory, an error when named.
        let names: Vec<String> = first.split(',').map(str::to_owned).collect();
        return smi::Layout::new(&names, None).map(|_| Format::NvidiaSmi);
    }
    Err(LayoutError::UnknownFormat(first.chars().take(80).collect()))
}

/// Read all inputs in parallel into one profile, each device-hour once (see [`Profile`]):
/// inputs are read in parallel and their pieces joined in input order; devices whose inputs
/// overlap in time are then read again, from those inputs only, and rebuilt by the overlap rule.
pub fn read_all(
    inputs: &[Input],
    opts: &ReadOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Ingested, IngestError> {
    let joiner = Mutex::new(Joiner::default());
    if opts.tap.is_some() {
        // A tap sees samples in the order they are taken: one input after another (each
        // input's blocks parsed in parallel, and shown to the tap in file order).
        for (i, input) in inputs.iter().enumerate() {
            let job = Job::plain(source_id(i));
            let part = read_job(input, opts, &job, progress);
            lock(&joiner).add(i, part, inputs, opts);
        }
    } else {
        // Each free worker takes the next input in order (not a half of the list each), so
        // the joiner waits for at most one input per worker and memory stays bounded by the
        // devices.
        inputs
            .iter()
            .enumerate()
            .par_bridge()
            .for_each(|(i, input)| {
                let job = Job::plain(source_id(i));
                let part = read_job(input, opts, &job, progress);
                lock(&joiner).add(i, part, inputs, opts);
            });
    }
    let joiner = joiner.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = joiner.error {
        return Err(e);
    }
    let mut out = joiner.out;
    untangle(&mut out.profile, inputs, opts)?;
    out.tally.samples = out.profile.samples();
    if opts.strict {
        if let Some(e) = out.tally.first_error() {
            return Err(e);
        }
        if let Some((device, a, b)) = out.profile.first_overlap() {
            return Err(IngestError::Overlap {
                device: device.to_string(),
                first: inputs[a as usize].name.clone(),
                second: inputs[b as usize].name.clone(),
            });
        }
    }
    Ok(out)
}

/// Read again the inputs of the devices `profile` found tangled (inputs numbered by their
/// place in `inputs`, overlapping in time on a device), keeping of each only what the overlap
/// rule gives it, and put the rebuilt devices in place. Standard input cannot be read again:
/// its devices keep what was joined before the tangle and say so.
pub fn untangle(
    profile: &mut Profile,
    inputs: &[Input],
    opts: &ReadOptions,
) -> Result<(), IngestError> {
    let Some(mut plan) = profile.tangled() else {
        return Ok(());
    };
    let unreadable: Vec<SourceId> = plan
        .reads
        .iter()
        .map(|(src, _)| *src)
        .filter(|src| inputs.get(*src as usize).is_none_or(|i| i.path.is_none()))
        .collect();
    for src in unreadable {
        plan.drop_source(src);
    }
    // Re-read in waves of a few inputs at a time, joined as they come (memory stays near
    // one accumulator per tangled device, whatever the number of inputs).
    let mut rebuilt = Rebuilding::default();
    for wave in plan.reads.chunks(REREAD_WAVE) {
        let pieces: Vec<Result<Profile, IngestError>> = wave
            .par_iter()
            .map(|(src, keep)| {
                let job = Job {
                    source: *src,
                    filter: Some(std::sync::Arc::new(keep.clone())),
                    sequential: true,
                };
                read_job(&inputs[*src as usize], opts, &job, &|_| {}).and_then(|r| match r {
                    Outcome::Data { profile, .. } => Ok(profile),
                    Outcome::NotTelemetry(message) => Err(IngestError::Format {
                        file: inputs[*src as usize].name.clone(),
                        message,
                    }),
                })
            })
            .collect();
        for p in pieces {
            rebuilt.add(&plan, p?, &opts.profile);
        }
    }
    profile.finish_rebuild(&plan, rebuilt, &opts.profile);
    Ok(())
}

/// Scopes of replayed block logs: above every input's number, one per block.
static REPLAY_SCOPE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);

/// Inputs re-read at once when untangling overlaps.
const REREAD_WAVE: usize = 64;

fn source_id(i: usize) -> SourceId {
    SourceId::try_from(i).unwrap_or(SourceId::MAX)
}

/// How one input is read: its number, and for a re-read, which devices to keep and whether to
/// read it in one sequential pass.
#[derive(Clone, Debug, Default)]
pub struct Job {
    /// The input's number.
    pub source: SourceId,
    /// Devices to keep and from when (a re-read); `None`: all.
    pub filter: Option<std::sync::Arc<BTreeMap<Identity, Keep>>>,
    /// Parse blocks one after another into one builder (the sequential rule, exactly).
    pub sequential: bool,
}

impl Job {
    /// Read all of input `source`.
    #[must_use]
    pub fn plain(source: SourceId) -> Self {
        Self {
            source,
            ..Self::default()
        }
    }

    /// The builder of one block parsed in parallel: where the input has a tap, a log of its
    /// own stands in for it (replayed into the tap in file order).
    fn block_builder(
        &self,
        opts: &ReadOptions,
    ) -> (ProfileBuilder, Option<std::sync::Arc<Mutex<TapLog>>>) {
        let b = self.builder(opts);
        if opts.tap.is_none() || self.filter.is_some() {
            return (b, None);
        }
        let log = std::sync::Arc::new(Mutex::new(TapLog::default()));
        let tap = SharedTap(log.clone());
        (b.with_tap(Some(tap)), Some(log))
    }

    fn builder(&self, opts: &ReadOptions) -> ProfileBuilder {
        let mut b = ProfileBuilder::for_source(opts.profile.clone(), self.source);
        if let Some(f) = &self.filter {
            b = b.with_filter(f.clone());
        }
        if let Some((start, end)) = opts.range {
            b = b.with_range(start, end);
        }
        // A re-read that untangles overlaps joins whole devices: never tiled, and never
        // shown to a tap a second time.
        if self.filter.is_none() {
            if let Some(t) = opts.tile_ms {
                b = b.with_tiles(t);
            }
            b = b.with_tap(opts.tap.clone());
        }
        b
    }
}

/// What reading one input gave.
#[derive(Debug)]
pub enum Outcome {
    /// Telemetry.
    Data {
        /// Its devices.
        profile: Profile,
        /// Its lines and skips.
        tally: Tally,
        /// Its format.
        format: Format,
    },
    /// A file found in a directory that is not telemetry (a README beside the logs): skipped
    /// and named in the warnings, unless `--strict`.
    NotTelemetry(String),
}

/// Items numbered 0, 1, 2, … that finish in any order, handed on in their order (inputs to
/// the joiner, blocks of an input to its profile): waits for at most one item per worker.
struct Reorder<T> {
    next: u64,
    waiting: BTreeMap<u64, T>,
}

impl<T> Default for Reorder<T> {
    fn default() -> Self {
        Self {
            next: 0,
            waiting: BTreeMap::new(),
        }
    }
}

impl<T> Reorder<T> {
    /// Take item `seq`; hand every item now in order to `then`, with its number.
    fn push(&mut self, seq: u64, item: T, mut then: impl FnMut(u64, T)) {
        self.waiting.insert(seq, item);
        while let Some(item) = self.waiting.remove(&self.next) {
            then(self.next, item);
            self.next += 1;
        }
    }
}

/// Joins the inputs' results in input order as they finish.
#[derive(Default)]
struct Joiner {
    out: Ingested,
    order: Reorder<Result<Outcome, IngestError>>,
    error: Option<IngestError>,
}

impl Joiner {
    fn add(
        &mut self,
        i: usize,
        part: Result<Outcome, IngestError>,
        inputs: &[Input],
        opts: &ReadOptions,
    ) {
        let Self { out, order, error } = self;
        order.push(i as u64, part, |n, part| {
            // `n` numbers one of `inputs`.
            #[allow(clippy::cast_possible_truncation)]
            let input = &inputs[n as usize];
            if error.is_some() {
                return;
            }
            match part {
                Err(e) => *error = Some(e),
                Ok(Outcome::Data {
                    profile,
                    tally,
                    format,
                }) => {
                    let seams = out.profile.absorb(profile, &opts.profile);
                    out.tally.merge(tally);
                    if seams > 0 {
                        out.tally.skip(
                            "outlier_timestamp",
                            &input.name,
                            0,
                            format!("{seams} sample(s) ahead of both neighbours where this input joins the one before it: dropped as outliers"),
                        );
                    }
                    out.formats.push((input.name.clone(), format));
                }
                Ok(Outcome::NotTelemetry(why)) => {
                    if opts.strict {
                        *error = Some(IngestError::Format {
                            file: input.name.clone(),
                            message: format!(
                                "{why} (--strict: every file in a directory must be telemetry)"
                            ),
                        });
                    } else {
                        out.tally.skip("not_telemetry", &input.name, 0, why);
                    }
                }
            }
        });
    }
}

/// Read one input as `job` says. A file found in a directory whose head does not fit any
/// format it looked like (a Markdown file, a stray CSV without nvidia-smi's header) is not
/// telemetry: skipped and named, not an error.
pub fn read_job(
    input: &Input,
    opts: &ReadOptions,
    job: &Job,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Outcome, IngestError> {
    match read_input(input, opts, job, progress) {
        Err(IngestError::Format { message, .. }) if input.found_in_dir && opts.format.is_none() => {
            Ok(Outcome::NotTelemetry(message))
        }
        other => other,
    }
}

fn read_input(
    input: &Input,
    opts: &ReadOptions,
    job: &Job,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Outcome, IngestError> {
    let (reader, trailing) = input::open_noting(input)?;
    let mut out = read_opened(input, reader, opts, job, progress)?;
    if let Outcome::Data { tally, .. } = &mut out
        && trailing.load(std::sync::atomic::Ordering::Relaxed)
    {
        tally.skip(
            "trailing_garbage",
            &input.name,
            0,
            "bytes after the last gzip member are not gzip; ignored",
        );
    }
    Ok(out)
}

/// Read `input` from `reader` instead of opening it: a prefix of a file that is still being
/// written (up to its last whole line), or its header lines followed by the lines it grew by
/// (what `gpuwise serve` reads). DCGM text read this way must be the whole file (one that is
/// not in scrape order is read a second time from the start of the file).
pub fn read_from(
    input: &Input,
    reader: Box<dyn BufRead + Send>,
    format: Option<Format>,
    opts: &ReadOptions,
    source: SourceId,
) -> Result<Outcome, IngestError> {
    let opts = ReadOptions {
        format: format.or(opts.format),
        ..opts.clone()
    };
    let job = Job::plain(source);
    match read_opened(input, reader, &opts, &job, &|_| {}) {
        Err(IngestError::Format { message, .. }) if input.found_in_dir && opts.format.is_none() => {
            Ok(Outcome::NotTelemetry(message))
        }
        other => other,
    }
}

fn read_opened(
    input: &Input,
    mut reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    job: &Job,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Outcome, IngestError> {
    let mut head = Vec::with_capacity(HEAD);
    (&mut reader)
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(io_error(input))?;
    let format = match opts.format {
        Some(f) => f,
        None => match detect(&head, opts) {
            Ok(f) => f,
            Err(e) if input.found_in_dir => return Ok(Outcome::NotTelemetry(e.to_string())),
            Err(e) => return Err(format_error(&input.name)(e.to_string())),
        },
    };
    let stem = input.host_stem();
    let o = Opened {
        input,
        opts,
        job,
        progress,
        host: opts.host.clone().unwrap_or_else(|| stem.clone()),
        stem,
        all: std::io::Cursor::new(head).chain(reader),
    };
    let (profile, tally) = match format {
        Format::NvidiaSmi => read_smi(o),
        Format::Dmon => read_dmon(o),
        Format::Dcgm => read_dcgm(o),
        Format::Csv => read_csv(o),
    }?;
    Ok(Outcome::Data {
        profile,
        tally,
        format,
    })
}

/// An input opened and its format known: what every format's reading needs.
struct Opened<'a> {
    input: &'a Input,
    opts: &'a ReadOptions,
    job: &'a Job,
    progress: &'a (dyn Fn(u64) + Sync),
    /// `--host`, else the file name's host.
    host: String,
    stem: String,
    /// The head already read (to detect the format and the layout), then the rest.
    all: std::io::Chain<std::io::Cursor<Vec<u8>>, Box<dyn BufRead + Send>>,
}

fn io_error(input: &Input) -> impl Fn(std::io::Error) -> IngestError + '_ {
    |source| IngestError::Io {
        path: input.path.clone().unwrap_or_else(|| "-".into()),
        source,
    }
}

fn format_error(file: &str) -> impl Fn(String) -> IngestError + '_ {
    |message| IngestError::Format {
        file: file.to_owned(),
        message,
    }
}

/// nvidia-smi CSV: its layout from the header (or `--columns`), then blocks in parallel.
fn read_smi(o: Opened<'_>) -> Result<(Profile, Tally), IngestError> {
    let Opened {
        input,
        opts,
        job,
        progress,
        host,
        mut all,
        ..
    } = o;
    let file = input.name.as_str();
    let io_err = io_error(input);
    let fmt_err = format_error(file);
    let (layout, _) =
        smi_layout(all.get_ref().0.get_ref(), opts).map_err(|e| fmt_err(e.to_string()))?;
    let force_host = opts.host.is_some();
    let (profile, tally) = blocks(&mut all, file, opts, job, progress, |data, b, t| {
        smi::SmiReader::new(
            &layout,
            file,
            &host,
            force_host,
            LocalClock::new(opts.tz.clone()),
        )
        .read(data, b, t)
    })
    .map_err(&io_err)?;
    Ok((profile, tally))
}

/// `nvidia-smi dmon`: timed logs in parallel blocks; untimed ones in order from `--start`.
fn read_dmon(o: Opened<'_>) -> Result<(Profile, Tally), IngestError> {
    let Opened {
        input,
        opts,
        job,
        progress,
        host,
        mut all,
        ..
    } = o;
    let file = input.name.as_str();
    let io_err = io_error(input);
    let fmt_err = format_error(file);
    let head_text = String::from_utf8_lossy(all.get_ref().0.get_ref()).into_owned();
    let header = head_text
        .lines()
        .find(|l| l.trim_start().starts_with('#'))
        .ok_or_else(|| fmt_err("no `# gpu …` header line (dmon prints it first)".into()))?;
    let layout = dmon::Layout::from_header(header).map_err(|e| fmt_err(e.to_string()))?;
    if layout.timed() {
        let (profile, tally) = blocks(&mut all, file, opts, job, progress, |data, b, t| {
            dmon::DmonReader::new(
                &layout,
                file,
                &host,
                LocalClock::new(opts.tz.clone()),
                None,
                opts.interval_ms,
            )
            .read(data, b, t)
        })
        .map_err(&io_err)?;
        Ok((profile, tally))
    } else {
        let Some(start) = opts.start_ms else {
            return Err(fmt_err(
                    "the dmon log has no date and time columns: collect with `nvidia-smi dmon -o DT`, or pass --start (and --interval if not 1 s)".into(),
                ));
        };
        // Untimed rows are placed by counting rounds from the start, so one reader
        // reads the blocks in order (memory stays one block, not the whole log).
        let mut reader = dmon::DmonReader::new(
            &layout,
            file,
            &host,
            LocalClock::new(opts.tz.clone()),
            Some(start),
            opts.interval_ms,
        );
        let seq = Job {
            sequential: true,
            ..job.clone()
        };
        let (profile, tally) =
            sequential_blocks(&mut all, file, opts, &seq, progress, |data, b, t| {
                reader.read(data, b, t)
            })
            .map_err(&io_err)?;
        Ok((profile, tally))
    }
}

/// DCGM text: read by scrape, and again by series when the file is not ordered by scrape.
fn read_dcgm(o: Opened<'_>) -> Result<(Profile, Tally), IngestError> {
    let Opened {
        input,
        opts,
        job,
        progress,
        stem,
        mut all,
        ..
    } = o;
    let file = input.name.as_str();
    let io_err = io_error(input);
    let file_ts = input::file_time_ms(input);
    let origin = Origin {
        file,
        host: opts.host.as_deref(),
        stem: &stem,
    };
    // Stdin cannot be read twice: buffer it by series from the start. Nor can a tap unsee
    // the samples of a first pass that turns out to be out of scrape order.
    let first = if input.path.is_some() && opts.tap.is_none() {
        dcgm::Order::ByScrape
    } else {
        dcgm::Order::BySeries
    };
    let mut b = job.builder(opts);
    let mut t = Tally::default();
    let mut counting = Counting {
        inner: &mut all,
        progress,
        pending: 0,
    };
    if dcgm::read(&mut counting, first, &origin, file_ts, &mut b, &mut t).map_err(&io_err)?
        == dcgm::Outcome::ReadAgainBySeries
    {
        let mut again = input::open(input)?;
        b = job.builder(opts);
        t = Tally::default();
        dcgm::read(
            &mut again,
            dcgm::Order::BySeries,
            &origin,
            file_ts,
            &mut b,
            &mut t,
        )
        .map_err(&io_err)?;
    }
    Ok((b.build(), t))
}

/// Generic CSV with `--map`, lines over the bound counted and skipped.
fn read_csv(o: Opened<'_>) -> Result<(Profile, Tally), IngestError> {
    let Opened {
        input,
        opts,
        job,
        stem,
        all,
        ..
    } = o;
    let file = input.name.as_str();
    let fmt_err = format_error(file);
    let map = opts
        .map
        .as_ref()
        .ok_or_else(|| fmt_err("generic CSV needs --map timestamp=COL,util=COL,…".into()))?;
    let mut b = job.builder(opts);
    let mut t = Tally::default();
    let mut clock = LocalClock::new(opts.tz.clone());
    let origin = Origin {
        file,
        host: opts.host.as_deref(),
        stem: &stem,
    };
    let mut limited = crate::lines::RecordLimit::new(all, MAX_LINE, b',');
    generic::read(&mut limited, map, &origin, &mut clock, &mut b, &mut t)?;
    for line in limited.dropped {
        t.lines += 1;
        t.skip(
            "line_too_long",
            file,
            line,
            format!("record longer than {MAX_LINE} bytes"),
        );
    }
    Ok((b.build(), t))
}

/// A reader that reports bytes consumed to the progress callback (in 1 MiB steps).
struct Counting<'a, R> {
    inner: &'a mut R,
    progress: &'a (dyn Fn(u64) + Sync),
    pending: u64,
}

impl<R: BufRead> std::io::Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<'_, R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
        self.count(n);
    }
}

impl<R> Counting<'_, R> {
    fn count(&mut self, n: usize) {
        self.pending += n as u64;
        if self.pending >= 1 << 20 {
            (self.progress)(self.pending);
            self.pending = 0;
        }
    }
}

/// The nvidia-smi layout from the head of a file: its header, or `--columns`.
fn smi_layout(head: &[u8], opts: &ReadOptions) -> Result<(smi::Layout, bool), LayoutError> {
    let text = String::from_utf8_lossy(head);
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    match (first, &opts.columns) {
        (Some(line), _) if smi::looks_like_header(line) => {
            let names: Vec<String> = line.split(',').map(str::to_owned).collect();
            Ok((
                smi::Layout::new(&names, Some(line.as_bytes().to_vec()))?,
                true,
            ))
        }
        (_, Some(cols)) => Ok((smi::Layout::new(cols, None)?, false)),
        _ => Err(LayoutError::NoHeader),
    }
}

/// Parse a line-oriented input in parallel, block by block. A worker that is free takes the
/// next block from the reader (so reading and decompressing overlap with parsing, with no
/// barrier where one core waits for the other), parses it into a profile of its own, and hands
/// it to [`InOrder`], which joins the pieces in file order as soon as the blocks before them
/// are in. At most one block per worker is in flight, so memory is bounded by the number of
/// workers and devices, not by the input.
fn blocks(
    r: &mut (impl BufRead + Send),
    file: &str,
    opts: &ReadOptions,
    job: &Job,
    progress: &(dyn Fn(u64) + Sync),
    parse: impl Fn(&[u8], &mut ProfileBuilder, &mut Tally) -> u64 + Sync,
) -> std::io::Result<(Profile, Tally)> {
    if job.sequential {
        return sequential_blocks(r, file, opts, job, progress, parse);
    }
    let spare = Mutex::new(Vec::new());
    let failed = Mutex::new(None);
    let mut cutter = BlockCutter::new(opts.block_bytes);
    let mut seq = 0u64;
    let source = std::iter::from_fn(|| {
        for buf in lock(&spare).drain(..) {
            cutter.recycle(buf);
        }
        match cutter.next(r) {
            Ok(Some(block)) => {
                seq += 1;
                Some((seq - 1, block))
            }
            Ok(None) => None,
            Err(e) => {
                *lock(&failed) = Some(e);
                None
            }
        }
    })
    .fuse();
    let joined = Mutex::new(InOrder {
        tap: opts.tap.clone().filter(|_| job.filter.is_none()),
        ..InOrder::default()
    });
    source.par_bridge().for_each(|(seq, block)| {
        let (mut b, log) = job.block_builder(opts);
        let mut t = Tally::default();
        let lines = parse(&block.data, &mut b, &mut t);
        let profile = b.build();
        let log = log
            .and_then(|l| std::sync::Arc::try_unwrap(l).ok())
            .map(|l| l.into_inner().unwrap_or_else(PoisonError::into_inner));
        let piece = Piece {
            profile,
            tally: t,
            lines,
            overlong_after: block.overlong_after,
            bytes: block.data.len() as u64,
            log,
        };
        lock(&spare).push(block.data);
        lock(&joined).add(seq, piece, file, &opts.profile, progress);
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        return Err(e);
    }
    let joined = joined.into_inner().unwrap_or_else(PoisonError::into_inner);
    Ok((joined.profile, joined.tally))
}

/// Place a parsed block after the `lines_before` lines ahead of it: its skips (numbered from
/// 1 in the block) renumbered, and the over-long line cut after it counted.
fn place_block(
    t: &mut Tally,
    lines_before: &mut u64,
    lines: u64,
    overlong_after: bool,
    file: &str,
) {
    t.renumber(*lines_before);
    *lines_before += lines;
    if overlong_after {
        *lines_before += 1;
        t.lines += 1;
        t.skip(
            "line_too_long",
            file,
            *lines_before,
            format!("record longer than {MAX_LINE} bytes"),
        );
    }
}

/// The blocks of one input parsed one after another into one builder: a re-read that must
/// follow the sequential rule exactly (in-file disorder across blocks, clipped overlaps).
fn sequential_blocks(
    r: &mut (impl BufRead + Send),
    file: &str,
    opts: &ReadOptions,
    job: &Job,
    progress: &(dyn Fn(u64) + Sync),
    mut parse: impl FnMut(&[u8], &mut ProfileBuilder, &mut Tally) -> u64,
) -> std::io::Result<(Profile, Tally)> {
    let mut cutter = BlockCutter::new(opts.block_bytes);
    let mut b = job.builder(opts);
    let mut tally = Tally::default();
    let mut lines_before = 0;
    while let Some(block) = cutter.next(r)? {
        let mut t = Tally::default();
        let lines = parse(&block.data, &mut b, &mut t);
        place_block(&mut t, &mut lines_before, lines, block.overlong_after, file);
        progress(block.data.len() as u64);
        tally.merge(t);
        cutter.recycle(block.data);
    }
    Ok((b.build(), tally))
}

/// A lock that a panicking parser (a bug, caught at the thread boundary) does not poison.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One parsed block.
struct Piece {
    profile: Profile,
    tally: Tally,
    /// Lines in the block (its skips are numbered from 1).
    lines: u64,
    overlong_after: bool,
    bytes: u64,
    /// What the block showed its tap, to replay into the real one in file order.
    log: Option<TapLog>,
}

/// Joins parsed blocks in file order, whatever order they finish in.
#[derive(Default)]
struct InOrder {
    /// The tap the blocks' logs are replayed into.
    tap: Option<SharedTap>,
    profile: Profile,
    tally: Tally,
    /// Lines of the input before the next block.
    lines_before: u64,
    /// Blocks that finished before one ahead of them.
    order: Reorder<Piece>,
}

impl InOrder {
    fn add(
        &mut self,
        seq: u64,
        piece: Piece,
        file: &str,
        st: &ProfileSettings,
        progress: &(dyn Fn(u64) + Sync),
    ) {
        let Self {
            tap,
            profile,
            tally,
            lines_before,
            order,
        } = self;
        order.push(seq, piece, |_, mut p| {
            progress(p.bytes);
            if let (Some(tap), Some(log)) = (tap.as_ref(), p.log.take()) {
                let scope = REPLAY_SCOPE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                log.replay(scope, &mut *tap.0.lock().unwrap_or_else(PoisonError::into_inner));
            }
            // Blocks are parsed before the lines ahead of them are counted: each numbers its
            // lines from 1, and its skips are renumbered here.
            place_block(&mut p.tally, lines_before, p.lines, p.overlong_after, file);
            let seams = profile.absorb(p.profile, st);
            if seams > 0 {
                p.tally.skip(
                    "outlier_timestamp",
                    file,
                    *lines_before - p.lines + 1,
                    format!("{seams} sample(s) ahead of both neighbours just before this line: dropped as outliers"),
                );
            }
            tally.merge(p.tally);
        });
    }
}

struct Block {
    data: Vec<u8>,
    /// Whether an over-long line (dropped) follows the block's lines.
    overlong_after: bool,
}

/// Cuts a stream into blocks that end at a line boundary.
struct BlockCutter {
    size: usize,
    /// Bytes read but not yet emitted are `carry[..filled]`; the rest is spare room.
    carry: Vec<u8>,
    filled: usize,
    /// Buffers of parsed blocks, reused so that steady-state reading allocates nothing.
    pool: Vec<Vec<u8>>,
    skipping: bool,
    done: bool,
}

/// Bytes asked of the reader per call.
const READ_CHUNK: usize = 1 << 20;

thread_local! {
    /// One buffer of a finished cutter, kept for the next file read on this thread: a fresh
    /// one is zeroed as it grows, a megabyte at a time, for every small file of a fleet.
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for BlockCutter {
    fn drop(&mut self) {
        let largest = self
            .pool
            .drain(..)
            .chain(std::iter::once(std::mem::take(&mut self.carry)))
            .max_by_key(Vec::len);
        if let Some(buf) = largest.filter(|b| !b.is_empty()) {
            SPARE.with(|s| {
                let mut s = s.borrow_mut();
                if s.is_empty() {
                    s.push(buf);
                }
            });
        }
    }
}

impl BlockCutter {
    fn new(size: usize) -> Self {
        Self {
            size: size.max(1024),
            carry: SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default(),
            filled: 0,
            pool: Vec::new(),
            skipping: false,
            done: false,
        }
    }

    /// Give a parsed block's buffer back for reuse.
    fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < 64 {
            self.pool.push(data);
        }
    }

    fn next(&mut self, r: &mut (impl BufRead + ?Sized)) -> std::io::Result<Option<Block>> {
        loop {
            if self.done {
                if self.filled == 0 {
                    return Ok(None);
                }
                let mut data = std::mem::take(&mut self.carry);
                data.truncate(self.filled);
                self.filled = 0;
                return Ok(Some(Block {
                    data,
                    overlong_after: false,
                }));
            }
            // Read straight into the carry buffer (one copy from the kernel or decoder). The
            // buffer keeps its length between reads (`filled` marks the data), so recycled
            // buffers are not zeroed again.
            let old = self.filled;
            let chunk = READ_CHUNK.min(self.size);
            if self.carry.len() < old + chunk {
                self.carry.resize(old + chunk, 0);
            }
            let n = loop {
                match r.read(&mut self.carry[old..old + chunk]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            self.filled = old + n;
            if n == 0 {
                self.done = true;
                continue;
            }
            if self.skipping {
                // Inside an over-long line: drop bytes up to its end.
                match memchr::memchr(b'\n', &self.carry[old..self.filled]) {
                    Some(i) => {
                        self.carry.copy_within(old + i + 1..self.filled, old);
                        self.filled -= i + 1;
                        self.skipping = false;
                    }
                    None => self.filled = old,
                }
                continue;
            }
            let done_len = memchr::memrchr(b'\n', &self.carry[old..self.filled]).map_or_else(
                || memchr::memrchr(b'\n', &self.carry[..old]).map_or(0, |i| i + 1),
                |i| old + i + 1,
            );
            if self.filled - done_len > MAX_LINE {
                // The unfinished line is over-long: emit the lines before it, skip the rest of it.
                let mut data = std::mem::take(&mut self.carry);
                data.truncate(done_len);
                self.filled = 0;
                self.skipping = true;
                return Ok(Some(Block {
                    data,
                    overlong_after: true,
                }));
            }
            if self.filled >= self.size && done_len > 0 {
                let mut rest = self.pool.pop().unwrap_or_default();
                let tail = self.filled - done_len;
                if rest.len() < tail {
                    rest.resize(tail, 0);
                }
                rest[..tail].copy_from_slice(&self.carry[done_len..self.filled]);
                let mut data = std::mem::replace(&mut self.carry, rest);
                data.truncate(done_len);
                self.filled = tail;
                return Ok(Some(Block {
                    data,
                    overlong_after: false,
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutter_keeps_lines_whole_and_counts_them() {
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let mut r = std::io::BufReader::with_capacity(100, text.as_bytes());
        let mut c = BlockCutter::new(1024);
        let mut joined = Vec::new();
        let mut expect_line = 1;
        while let Some(b) = c.next(&mut r).expect("io") {
            assert!(!b.overlong_after);
            assert!(b.data.ends_with(b"\n"));
            let first = String::from_utf8_lossy(&b.data)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            assert_eq!(first, format!("line {expect_line}"));
            expect_line += b.data.iter().filter(|c| **c == b'\n').count() as u64;
            joined.extend_from_slice(&b.data);
        }
        assert_eq!(joined, text.as_bytes());
    }

    #[test]
    fn cutter_drops_overlong_lines() {
        let mut text = b"a\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 2 * MAX_LINE));
        text.extend_from_slice(b"\nb\n");
        let mut r = std::io::BufReader::with_capacity(4096, &text[..]);
        let mut c = BlockCutter::new(1024);
        let mut out = Vec::new();
        let mut over = Vec::new();
        while let Some(b) = c.next(&mut r).expect("io") {
            out.extend_from_slice(&b.data);
            if b.overlong_after {
                // The over-long line comes right after the lines read so far: it is line 2.
                over.push(out.iter().filter(|c| **c == b'\n').count() + 1);
            }
        }
        assert_eq!(over, vec![2]);
        assert_eq!(out, b"a\nb\n");
    }
}
