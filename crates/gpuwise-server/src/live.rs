//! Telemetry files read as they grow: each input's samples kept in tiles of time, so that a
//! report for any run of tiles is a join of accumulators, never a rescan.
//!
//! A refresh looks at every input again (directories and globs are expanded again, so new
//! files are found). A file seen before is known by its device and inode, so a log renamed by
//! rotation stays the same input; one that only grew is read from where the last read
//! stopped (its header lines given first, so the reader knows the columns); one that shrank or
//! was replaced, a compressed one that changed, and DCGM text (whose reader may need a second
//! pass over the whole file) are read again whole, replacing what that input gave. A file's
//! last line is left for the next read while it has no line end and the file was written in
//! the last minute (the writer is still on it).

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, SystemTime};

use gpuwise_core::profile::{Profile, SourceId};
use gpuwise_core::report::IngestSummary;
use gpuwise_sources::ingest::{self, Format, Outcome};
use gpuwise_sources::{IngestError, Input, ReadOptions, Tally};
use rayon::prelude::*;

/// A last line without a line end is still being written while its file changed this recently.
const WRITING: Duration = Duration::from_secs(60);

/// The latest plausible sample time, asked again at every refresh (a sample dated further
/// ahead is a broken clock): a server runs for weeks, and a bound fixed at its start skipped
/// every sample once a day had passed.
pub type Latest = std::sync::Arc<dyn Fn() -> gpuwise_core::EpochMs + Send + Sync>;

/// What runs after every refresh that read something, with the tiles read (`gpuwise serve
/// --store` keeps its completed tiles in the history store this way); an error is shown as the
/// refresh's problem.
pub type AfterRefresh = dyn Fn(&Live) -> Result<(), String> + Send + Sync;

/// Where windows reach back past the tiles the files still give (`serve --store`: the history
/// store). A window that starts before the first tile read from the files takes that part
/// from here, joined before the files' part.
pub trait History: Send + Sync {
    /// The start of the oldest data held (`None`: none).
    fn first_ms(&self) -> Option<gpuwise_core::EpochMs>;
    /// The profile of `[from, to)`, whole tiles.
    ///
    /// # Errors
    /// What went wrong reading it, in words.
    fn window(
        &self,
        from: gpuwise_core::EpochMs,
        to: gpuwise_core::EpochMs,
    ) -> Result<(Profile, IngestSummary), String>;
}

/// Everything read so far, per input.
pub struct Live {
    /// Where windows reach back past the files' tiles.
    history: Option<std::sync::Arc<dyn History>>,
    /// Run after each refresh that read something.
    after: Option<std::sync::Arc<AfterRefresh>>,
    specs: Vec<String>,
    opts: ReadOptions,
    latest: Option<Latest>,
    tile_ms: u64,
    /// Tiles kept back from the newest one with data (retention), if limited.
    retain_tiles: Option<i64>,
    sources: Vec<SourceState>,
    /// The sources in the order the inputs were last listed (as `report` would read them),
    /// then those no longer listed.
    order: Vec<usize>,
    generation: u64,
    /// What the refreshes read, added up.
    reads: Changes,
}

/// One input and what it gave.
#[derive(Debug)]
struct SourceState {
    input: Input,
    id: Option<(u64, u64)>,
    /// Length of the file at the last read.
    size: u64,
    /// Bytes read (up to a line end).
    offset: u64,
    /// Lines the reads counted, to number the lines of the next piece.
    lines: u64,
    /// The header lines to give before the lines a file grew by.
    prefix: Vec<u8>,
    prefix_lines: u64,
    /// `None`: not telemetry (or empty) when last read.
    format: Option<Format>,
    /// Whether growth is read from the offset (a plain line format), else the file is read
    /// again whole.
    appendable: bool,
    profile: Profile,
    tally: Tally,
    /// No longer listed: what it gave is dropped (see [`Live::apply`]).
    gone: bool,
}

/// The sources read before, by device and inode and by path.
#[derive(Default)]
struct Known {
    by_id: std::collections::HashMap<(u64, u64), usize>,
    by_path: std::collections::HashMap<std::path::PathBuf, usize>,
}

/// What a look at the inputs found to read: see [`Live::look`].
pub struct Look {
    opts: ReadOptions,
    first_error: Option<IngestError>,
    whole: Vec<Whole>,
    tails: Vec<Tail>,
    /// Inputs renamed (rotation): their number and new name.
    renames: Vec<(usize, Input)>,
    order: Vec<usize>,
    seen: Vec<bool>,
}

/// What [`Look::read`] read: the pieces a look found.
pub struct Found {
    tails: Vec<Result<Option<Piece>, IngestError>>,
    whole: Vec<Result<SourceState, IngestError>>,
}

impl Look {
    /// Read what the look found: the new lines of grown files, and new or replaced files whole,
    /// in parallel.
    #[must_use]
    pub fn read(&self) -> Found {
        let opts = &self.opts;
        Found {
            tails: self.tails.par_iter().map(|t| t.read(opts)).collect(),
            whole: self
                .whole
                .par_iter()
                .map(|w| read_whole(&w.input, w.id, &w.meta, opts, source_id(w.i)))
                .collect(),
        }
    }
}

/// A file that grew: where its data ends, and its header lines.
struct Tail {
    i: usize,
    input: Input,
    format: Option<Format>,
    offset: u64,
    prefix: Vec<u8>,
    prefix_lines: u64,
    meta: std::fs::Metadata,
}

/// What a file grew by, read.
struct Piece {
    profile: Profile,
    tally: Tally,
    /// Where the read stopped (after the last whole line).
    upto: u64,
    prefix_lines: u64,
}

/// A file to read whole.
struct Whole {
    i: usize,
    input: Input,
    id: Option<(u64, u64)>,
    meta: std::fs::Metadata,
    new: bool,
}

/// What a refresh changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    /// Inputs seen for the first time.
    pub new: usize,
    /// Inputs read from where they were left.
    pub grown: usize,
    /// Inputs read again whole (replaced, truncated, compressed or DCGM text that changed).
    pub reread: usize,
    /// Inputs no longer listed under any name, whose data was dropped.
    pub gone: usize,
}

impl Changes {
    /// Whether anything changed (read, or dropped).
    #[must_use]
    pub fn any(&self) -> bool {
        self.new + self.grown + self.reread + self.gone > 0
    }
}

/// The report's inputs for a window: the joined profile and what reading counted.
#[derive(Debug)]
pub struct Window {
    /// Every device's samples in the window, each device-hour once.
    pub profile: Profile,
    /// Inputs, formats, lines and skips (of everything read), samples (of the window).
    pub summary: IngestSummary,
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

fn source_id(i: usize) -> SourceId {
    SourceId::try_from(i).unwrap_or(SourceId::MAX)
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("specs", &self.specs)
            .field("tile_ms", &self.tile_ms)
            .field("sources", &self.sources.len())
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Live {
    /// Read `specs` (files, directories, globs) for the first time. `opts.tile_ms` is the tile
    /// length (one UTC day when unset); `latest`, when given, sets the latest plausible sample
    /// time before every refresh (else `opts.profile.latest_ms` stays as given).
    pub fn open(
        specs: Vec<String>,
        mut opts: ReadOptions,
        retain_ms: Option<u64>,
        latest: Option<Latest>,
    ) -> Result<Self, IngestError> {
        let day = u64::try_from(gpuwise_core::DAY_MS).unwrap_or(86_400_000);
        let tile_ms = opts.tile_ms.unwrap_or(day).max(60_000);
        opts.tile_ms = Some(tile_ms);
        opts.range = None;
        let retain_tiles =
            retain_ms.map(|r| i64::try_from(r.div_ceil(tile_ms)).unwrap_or(i64::MAX));
        let mut live = Self {
            history: None,
            after: None,
            specs,
            opts,
            latest,
            tile_ms,
            retain_tiles,
            sources: Vec::new(),
            order: Vec::new(),
            generation: 0,
            reads: Changes::default(),
        };
        live.refresh()?;
        Ok(live)
    }

    /// The tile length.
    #[must_use]
    pub fn tile_ms(&self) -> u64 {
        self.tile_ms
    }

    /// Run `f` after every refresh that reads something (and once now).
    ///
    /// # Errors
    /// What `f` says of the tiles read so far.
    pub fn after_refresh(&mut self, f: std::sync::Arc<AfterRefresh>) -> Result<(), String> {
        let r = f(self);
        self.after = Some(f);
        r
    }

    /// Let windows reach back into `h` before the first tile the files give.
    pub fn with_history(&mut self, h: std::sync::Arc<dyn History>) {
        self.history = Some(h);
    }

    /// The first tile a window may start at: the history's, when it reaches further back than
    /// the files' tiles.
    #[must_use]
    pub fn reach(&self) -> Option<i64> {
        let t = i64::try_from(self.tile_ms).unwrap_or(i64::MAX);
        let own = self.tiles().map(|(a, _)| a);
        let old = self
            .history
            .as_ref()
            .and_then(|h| h.first_ms())
            .map(|ms| ms.div_euclid(t));
        match (own, old) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The options it reads with (the fold rules of its profiles among them).
    #[must_use]
    pub fn settings(&self) -> &ReadOptions {
        &self.opts
    }

    /// The function set by [`Live::after_refresh`].
    #[must_use]
    pub fn after(&self) -> Option<std::sync::Arc<AfterRefresh>> {
        self.after.clone()
    }

    /// Counts up each time a refresh read something (caches key on it).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What the refreshes read so far: inputs new, grown (read from where they were left) and
    /// read again whole.
    #[must_use]
    pub fn reads(&self) -> &Changes {
        &self.reads
    }

    /// The first and one past the last tile with data.
    #[must_use]
    pub fn tiles(&self) -> Option<(i64, i64)> {
        let all = self.sources.iter().flat_map(|s| s.profile.tile_indices());
        let (lo, hi) = all.fold((i64::MAX, i64::MIN), |(a, b), t| (a.min(t), b.max(t)));
        (lo <= hi).then_some((lo, hi + 1))
    }

    /// The time of the newest sample read, over every input.
    #[must_use]
    pub fn last_ms(&self) -> Option<gpuwise_core::EpochMs> {
        self.sources
            .iter()
            .filter_map(|s| s.profile.last_ts())
            .max()
    }

    /// Look at every input again and read what changed (new and replaced files in parallel).
    /// An input that cannot be read now (removed between listing and opening, a permission)
    /// keeps what it gave before, or is tried again at the next refresh; the first such error
    /// comes back after everything else was read.
    pub fn refresh(&mut self) -> Result<Changes, IngestError> {
        let look = self.look()?;
        let read = look.read();
        self.apply(look, read)
    }

    /// List the inputs again and decide, from their sizes and identities, what to read. Only
    /// the refresh changes a `Live`, so a look stays true until it is applied; the reading in
    /// between ([`Look::read`]) needs no access to it, so requests are answered meanwhile.
    pub fn look(&self) -> Result<Look, IngestError> {
        let inputs = gpuwise_sources::expand(&self.specs)?;
        let mut opts = self.opts.clone();
        if let Some(latest) = &self.latest {
            opts.profile.latest_ms = latest();
        }
        let mut look = Look {
            opts,
            seen: vec![false; self.sources.len()],
            first_error: None,
            whole: Vec::new(),
            tails: Vec::new(),
            renames: Vec::new(),
            order: Vec::new(),
        };
        // Every listed file is matched to what was read before by device and inode (else by
        // path): indexed once per look, not compared with every source (per-scrape files
        // make hundreds of thousands).
        let mut known = Known::default();
        for (i, src) in self.sources.iter().enumerate().filter(|(_, s)| !s.gone) {
            if let Some(id) = src.id {
                known.by_id.entry(id).or_insert(i);
            }
            if let Some(p) = &src.input.path {
                known.by_path.entry(p.clone()).or_insert(i);
            }
        }
        for input in inputs {
            self.look_at(input, &known, &mut look);
        }
        Ok(look)
    }

    /// Decide what to do with one listed input: nothing (unchanged), read what it grew by, or
    /// read it whole (new or replaced).
    fn look_at(&self, input: Input, known_sources: &Known, look: &mut Look) {
        let Some(path) = input.path.clone() else {
            return;
        };
        let meta = match fs_err::metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                look.first_error
                    .get_or_insert(IngestError::Io { path, source: e });
                return;
            }
        };
        let id = file_id(&meta);
        // By device and inode where the system has them (a new file at a known path, as
        // rotation leaves, is a new input; the renamed old one keeps its data), else by path.
        let known = match id {
            Some(id) => known_sources.by_id.get(&id).copied(),
            None => known_sources.by_path.get(&path).copied(),
        };
        let Some(i) = known else {
            let i = self.sources.len() + look.whole.iter().filter(|w| w.new).count();
            look.order.push(i);
            look.whole.push(Whole {
                i,
                input,
                id,
                meta,
                new: true,
            });
            return;
        };
        look.seen[i] = true;
        look.order.push(i);
        let s = &self.sources[i];
        if s.input.path != input.path {
            // A log renamed by rotation keeps its data under its new name.
            look.renames.push((i, input.clone()));
        }
        if meta.len() == s.size && s.id == id {
            return;
        }
        if s.appendable && s.id == id && meta.len() > s.size && s.format.is_some() {
            look.tails.push(Tail {
                i,
                input,
                format: s.format,
                offset: s.offset,
                prefix: s.prefix.clone(),
                prefix_lines: s.prefix_lines,
                meta,
            });
            return;
        }
        look.whole.push(Whole {
            i,
            input,
            id,
            meta,
            new: false,
        });
    }

    /// Put what `look` found and `read` read in place.
    pub fn apply(&mut self, look: Look, read: Found) -> Result<Changes, IngestError> {
        let Look {
            opts,
            mut first_error,
            whole,
            tails,
            renames,
            order,
            mut seen,
        } = look;
        // The settings this look read with (its plausible-time bound) are the ones joins and
        // windows use from now on.
        self.opts = opts;
        let mut changes = Changes::default();
        for (i, input) in renames {
            self.sources[i].input = input;
        }
        for (t, r) in tails.iter().zip(read.tails) {
            let s = &mut self.sources[t.i];
            s.size = t.meta.len();
            match r {
                Ok(Some(piece)) => {
                    changes.grown += 1;
                    s.join(piece, &self.opts);
                }
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for (w, r) in whole.into_iter().zip(read.whole) {
            let state = match r {
                Ok(s) => {
                    if w.new {
                        changes.new += usize::from(s.format.is_some() || s.size > 0);
                    } else {
                        changes.reread += 1;
                    }
                    s
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    if !w.new {
                        continue;
                    }
                    // Keeps its number; read again at the next refresh.
                    SourceState::unread(w.input, w.id)
                }
            };
            if w.new {
                self.sources.push(state);
                seen.push(true);
            } else {
                self.sources[w.i] = state;
            }
        }
        for (s, seen) in self.sources.iter_mut().zip(seen) {
            if !seen && !s.gone {
                // No longer listed under any name (deleted, or replaced at its path by a new
                // file): the server answers for the files as they are, as `report` would, so
                // what it gave goes. (Kept, it overlapped the new file's data and its memory
                // was never given back.) Seen again, it is read as a new input.
                changes.gone += 1;
                *s = SourceState {
                    gone: true,
                    ..SourceState::unread(s.input.clone(), None)
                };
            }
        }
        self.order = order;
        self.retain();
        self.reads.new += changes.new;
        self.reads.grown += changes.grown;
        self.reads.reread += changes.reread;
        self.reads.gone += changes.gone;
        if changes.any() {
            self.generation += 1;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(changes),
        }
    }

    /// Drop tiles older than the retention, counted back from the newest tile with data.
    fn retain(&mut self) {
        if let (Some(keep), Some((_, end))) = (self.retain_tiles, self.tiles()) {
            let from = end.saturating_sub(keep);
            for s in &mut self.sources {
                s.profile.drop_tiles_before(from);
            }
        }
    }

    /// The profile of tiles `from..to` (each input's tiles joined, then the inputs joined in
    /// their order, each device-hour once; devices that inputs overlap on are read again from
    /// those inputs, limited to the window), and what reading counted.
    pub fn window(&self, from: i64, to: i64) -> Result<Window, IngestError> {
        let t = i64::try_from(self.tile_ms).unwrap_or(i64::MAX);
        let own_first = self.tiles().map_or(to, |(a, _)| a);
        if let Some(h) = &self.history
            && from < own_first
        {
            let split = own_first.min(to);
            let (mut profile, mut summary) = h
                .window(from.saturating_mul(t), split.saturating_mul(t))
                .map_err(|message| IngestError::Format {
                    file: "history store".to_owned(),
                    message,
                })?;
            if split < to {
                let rest = self.files_window(split, to)?;
                profile.absorb(rest.profile, &self.opts.profile);
                summary.inputs.extend(rest.summary.inputs);
                summary.formats.extend(rest.summary.formats);
                summary.lines += rest.summary.lines;
                summary.samples = profile.samples();
                summary.skipped += rest.summary.skipped;
                summary.warnings.extend(rest.summary.warnings);
            }
            return Ok(Window { profile, summary });
        }
        self.files_window(from, to)
    }

    /// [`Live::window`] from the files' tiles alone.
    fn files_window(&self, from: i64, to: i64) -> Result<Window, IngestError> {
        let st = &self.opts.profile;
        let mut profile = Profile::default();
        let mut tally = Tally::default();
        let mut inputs = Vec::with_capacity(self.sources.len());
        let mut formats = Vec::new();
        for s in self.order.iter().map(|i| &self.sources[*i]) {
            let outliers = profile.absorb(s.profile.window(from, to, st), st);
            tally.merge(s.tally.clone());
            if outliers > 0 {
                tally.skip(
                    "outlier_timestamp",
                    &s.input.name,
                    0,
                    format!("{outliers} sample(s) ahead of both neighbours where this input joins the one before it: dropped as outliers"),
                );
            }
            if let Some(f) = s.format {
                formats.push(f.name().to_owned());
            }
        }
        // Re-reads find inputs by their source number.
        for s in &self.sources {
            let mut input = s.input.clone();
            if s.gone {
                input.path = None;
            }
            inputs.push(input);
        }
        let t = i64::try_from(self.tile_ms).unwrap_or(i64::MAX);
        let opts = ReadOptions {
            range: Some((from.saturating_mul(t), to.saturating_mul(t))),
            tile_ms: None,
            ..self.opts.clone()
        };
        ingest::untangle(&mut profile, &inputs, &opts)?;
        let summary = IngestSummary {
            inputs: self
                .order
                .iter()
                .map(|i| self.sources[*i].input.name.clone())
                .collect(),
            formats,
            lines: tally.lines,
            samples: profile.samples(),
            skipped: tally.skipped(),
            warnings: tally.warnings(),
            pulled: None,
            overlap: gpuwise_core::report::OverlapSummary::default(),
        };
        Ok(Window { profile, summary })
    }

    /// Bytes the tiles hold (for the memory figure in BENCHMARKS.md).
    #[must_use]
    pub fn footprint_bytes(&self) -> usize {
        self.sources
            .iter()
            .map(|s| s.profile.footprint_bytes())
            .sum()
    }
}

/// Whether the bytes start like gzip or zstd.
fn compressed(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> IngestError + '_ {
    |source| IngestError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where reading a plain file that is `len` bytes long from `offset` should stop: after its
/// last line end, or at its end when the file is not being written any more.
fn cut(
    file: &mut std::fs::File,
    offset: u64,
    len: u64,
    meta: &std::fs::Metadata,
) -> std::io::Result<u64> {
    let still_writing = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_none_or(|age| age < WRITING);
    if !still_writing {
        return Ok(len);
    }
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > offset {
        let start = end.saturating_sub(buf.len() as u64).max(offset);
        let n = usize::try_from(end - start).unwrap_or(buf.len());
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = memchr_last(&buf[..n]) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(offset)
}

fn memchr_last(b: &[u8]) -> Option<usize> {
    b.iter().rposition(|c| *c == b'\n')
}

/// The header lines a piece read from the middle of a file needs: nvidia-smi's and a generic
/// CSV's first line (unless `--columns` names them), dmon's leading `#` lines.
fn header_prefix(head: &[u8], format: Format, opts: &ReadOptions) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut lines = 0;
    for line in head.split_inclusive(|c| *c == b'\n') {
        let take = match format {
            Format::NvidiaSmi => opts.columns.is_none() && lines == 0,
            Format::Csv => lines == 0,
            Format::Dmon => line.first() == Some(&b'#'),
            Format::Dcgm => false,
        };
        if !take || !line.ends_with(b"\n") {
            break;
        }
        out.extend_from_slice(line);
        lines += 1;
    }
    (out, lines)
}

/// Read a file whole (the first time, or again after it was replaced).
fn read_whole(
    input: &Input,
    id: Option<(u64, u64)>,
    meta: &std::fs::Metadata,
    opts: &ReadOptions,
    source: SourceId,
) -> Result<SourceState, IngestError> {
    let path = input.path.clone().unwrap_or_default();
    let err = io_error(&path);
    let len = meta.len();
    let mut state = SourceState::unread(input.clone(), id);
    state.size = len;
    if len == 0 {
        // Created and not written yet (`nvidia-smi … > file` just started): read when it grows.
        return Ok(state);
    }
    let mut file = std::fs::File::open(&path).map_err(&err)?;
    let mut head = vec![0u8; 64 << 10];
    let n = read_up_to(&mut file, &mut head).map_err(&err)?;
    head.truncate(n);
    let plain = !compressed(&head);
    let upto = if plain {
        cut(&mut file, 0, len, meta).map_err(&err)?
    } else {
        len
    };
    file.seek(SeekFrom::Start(0)).map_err(&err)?;
    let reader: Box<dyn BufRead + Send> = if plain {
        Box::new(BufReader::with_capacity(1 << 20, file.take(upto)))
    } else {
        gpuwise_sources::input::open(input)?
    };
    match ingest::read_from(input, reader, None, opts, source)? {
        Outcome::Data {
            profile,
            tally,
            format,
        } => {
            let (prefix, prefix_lines) = header_prefix(&head, format, opts);
            let untimed_dmon = format == Format::Dmon && opts.start_ms.is_some();
            state.appendable = plain && format != Format::Dcgm && !untimed_dmon;
            state.offset = upto;
            state.lines = tally.lines;
            state.prefix = prefix;
            state.prefix_lines = prefix_lines;
            state.format = Some(format);
            state.profile = profile;
            state.tally = tally;
        }
        Outcome::NotTelemetry(why) => {
            state.tally.skip("not_telemetry", &input.name, 0, why);
        }
    }
    Ok(state)
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl SourceState {
    /// An input not read yet (empty, or unreadable at the last look).
    fn unread(input: Input, id: Option<(u64, u64)>) -> Self {
        Self {
            input,
            id,
            size: 0,
            offset: 0,
            lines: 0,
            prefix: Vec::new(),
            prefix_lines: 0,
            format: None,
            appendable: false,
            profile: Profile::default(),
            tally: Tally::default(),
            gone: false,
        }
    }
}

impl Tail {
    /// The lines the file grew by (up to its last line end), read after its header lines;
    /// `None` when no whole line was added.
    fn read(&self, opts: &ReadOptions) -> Result<Option<Piece>, IngestError> {
        let path = self.input.path.clone().unwrap_or_default();
        let err = io_error(&path);
        let mut file = std::fs::File::open(&path).map_err(&err)?;
        let upto = cut(&mut file, self.offset, self.meta.len(), &self.meta).map_err(&err)?;
        if upto <= self.offset {
            return Ok(None);
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(&err)?;
        let piece = std::io::Cursor::new(self.prefix.clone()).chain(file.take(upto - self.offset));
        let reader: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(1 << 20, piece));
        let source = source_id(self.i);
        let Outcome::Data {
            profile, mut tally, ..
        } = ingest::read_from(&self.input, reader, self.format, opts, source)?
        else {
            return Ok(None);
        };
        // The header lines were counted again; the piece's lines are placed when joined.
        tally.lines = tally.lines.saturating_sub(self.prefix_lines);
        Ok(Some(Piece {
            profile,
            tally,
            upto,
            prefix_lines: self.prefix_lines,
        }))
    }
}

impl SourceState {
    /// Join the lines a file grew by to what it gave before.
    fn join(&mut self, piece: Piece, opts: &ReadOptions) {
        let Piece {
            profile,
            mut tally,
            upto,
            prefix_lines,
        } = piece;
        // The piece numbers its lines from its header lines; place them after the file's.
        tally.renumber(self.lines.saturating_sub(prefix_lines));
        self.lines += tally.lines;
        let outliers = self.profile.absorb(profile, &opts.profile);
        if outliers > 0 {
            tally.skip(
                "outlier_timestamp",
                &self.input.name,
                self.lines,
                format!("{outliers} sample(s) ahead of both neighbours where the new lines join the ones before: dropped as outliers"),
            );
        }
        self.tally.merge(tally);
        self.offset = upto;
    }
}
