//! # gpuwise-store: months of history in an open format
//!
//! A store is a directory. Its `tiles/` hold, per UTC day, one Parquet file
//! (`tiles/day=YYYY-MM-DD/part.parquet`) with a row per device and tile (an hour, or a whole day
//! once compacted). Each row carries plain columns any engine reads (DuckDB, Spark, Trino:
//! GPU-hours, utilization, idle time, memory, power) and the device's accumulator itself
//! (`state`, serde's postcard encoding of [`TilePiece`]), which joins exactly: any run of whole
//! tiles loaded from a store is the profile the raw samples of those tiles give (the
//! accumulators' merge is exact, see `gpuwise_core::profile`).
//!
//! **Writes are atomic**: a day's file is written beside its final name, synced, and renamed
//! over it, so a crash leaves the old file or the new one, never half of one (a stray
//! `.tmp` file is ignored by readers and removed by the next write).
//!
//! **One fold.** Accumulators depend on the rules that folded them (the maximum gap, the idle
//! threshold, the shortest idle episode, held memory): each file records them, and a reader
//! with other rules is refused rather than given figures folded under rules it did not ask for.
//!
//! The store also keeps the actions journal ([`journal`]): what `advise --log` recommended and
//! what users marked done or rejected, as JSON Lines, appended and never rewritten.

pub mod journal;
mod parquet_io;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuwise_core::profile::{Identity, Profile, TilePiece};
use gpuwise_core::settings::ProfileSettings;

pub use parquet_io::COLUMNS;

/// The store format this build writes and reads.
pub const FORMAT: &str = "gpuwise.store/v1";

const DAY_MS: i64 = 86_400_000;

/// What went wrong with a store, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A Parquet file of the store is not one this build can read.
    #[error("{path}: {why}")]
    Broken {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The store was folded under other rules than the reader's.
    #[error(
        "{path}: rolled up with {stored}, asked for {asked}; run `gpuwise rollup` again with these settings, or read the raw telemetry without --store"
    )]
    OtherFold {
        /// The file.
        path: PathBuf,
        /// The rules it was written with.
        stored: String,
        /// The rules asked for.
        asked: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The rules accumulators are folded under (the part of [`ProfileSettings`] that shapes them).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fold {
    /// Longest interval a sample stands for.
    pub max_gap_ms: u64,
    /// Utilization below which time is idle.
    pub idle_threshold_pct: f32,
    /// Shortest idle run that is an episode.
    pub min_idle_episode_ms: u64,
    /// Memory above which idle time is held.
    pub held_idle_min_mib: f32,
}

impl Fold {
    /// The fold of `st`.
    #[must_use]
    pub fn of(st: &ProfileSettings) -> Self {
        Self {
            max_gap_ms: st.max_gap_ms,
            idle_threshold_pct: st.idle_threshold_pct,
            min_idle_episode_ms: st.min_idle_episode_ms,
            held_idle_min_mib: st.held_idle_min_mib,
        }
    }

    fn words(&self) -> String {
        format!(
            "max gap {} s, idle below {} %, idle episodes from {} s, held from {} MiB",
            self.max_gap_ms / 1000,
            self.idle_threshold_pct,
            self.min_idle_episode_ms / 1000,
            self.held_idle_min_mib
        )
    }
}

/// One row of a store: a device's piece of one tile.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Start of the tile.
    pub tile_start_ms: i64,
    /// Length of the tile.
    pub tile_ms: u64,
    /// The device's piece.
    pub piece: TilePiece,
    /// What the interval from the tile's last sample to the device's next sample (in a later
    /// tile) adds: a sample stands for the time until the next, so that interval is the
    /// tile's, though its end lies in the next tile. The state joins it exactly when tiles are
    /// joined; the plain columns add it here, so that a sum over rows in another engine is
    /// the report's figure.
    pub edge: Edge,
}

/// The totals the interval across a tile's end adds (see [`Row::edge`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Edge {
    /// Covered time.
    pub covered_ms: i64,
    /// Time with a utilization reading.
    pub util_ms: i64,
    /// Σ utilization × 100 × ms.
    pub util_sum: i128,
    /// Time below the idle threshold.
    pub idle_ms: i64,
    /// Idle time with memory held.
    pub held_idle_ms: i64,
}

impl Edge {
    /// What joining `next` to `acc` adds beyond the two alone.
    fn between(
        acc: &gpuwise_core::profile::DeviceAcc,
        next: &gpuwise_core::profile::DeviceAcc,
        st: &ProfileSettings,
    ) -> Self {
        let mut joined = acc.clone();
        joined.merge(next, st);
        let (j, a, b) = (joined.totals(), acc.totals(), next.totals());
        let d = |x: u64, y: u64, z: u64| {
            i64::try_from(x).unwrap_or(i64::MAX)
                - i64::try_from(y).unwrap_or(i64::MAX)
                - i64::try_from(z).unwrap_or(i64::MAX)
        };
        Self {
            covered_ms: d(j.covered_ms, a.covered_ms, b.covered_ms),
            util_ms: d(j.util_ms, a.util_ms, b.util_ms),
            util_sum: i128::try_from(j.util_sum).unwrap_or(i128::MAX)
                - i128::try_from(a.util_sum).unwrap_or(i128::MAX)
                - i128::try_from(b.util_sum).unwrap_or(i128::MAX),
            idle_ms: d(j.idle_ms, a.idle_ms, b.idle_ms),
            held_idle_ms: d(j.held_idle_ms, a.held_idle_ms, b.held_idle_ms),
        }
    }
}

/// Each device's rows get the edge to its next row (rows of one write, any order).
fn add_edges(rows: &mut [Row], st: &ProfileSettings) {
    let mut by: BTreeMap<Identity, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        by.entry(Identity::of(&r.piece.key)).or_default().push(i);
    }
    for mut idx in by.into_values() {
        idx.sort_by_key(|&i| rows[i].tile_start_ms);
        for w in idx.windows(2) {
            let e = Edge::between(&rows[w[0]].piece.acc, &rows[w[1]].piece.acc, st);
            rows[w[0]].edge = e;
        }
    }
}

/// A store directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// What a write did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    /// Day partitions written (new or replaced).
    pub days: usize,
    /// Rows in those days after the write.
    pub rows: usize,
    /// Rows the write added or replaced.
    pub changed: usize,
    /// Rows kept from the store because it held more samples of that device and tile.
    pub kept: usize,
    /// Device tiles not written because they end after the time given to [`Store::write`]
    /// (the hour still running: more samples may come).
    pub open: usize,
    /// Bytes of the days written.
    pub bytes: u64,
}

/// One day partition.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Day {
    /// Its start (UTC midnight).
    pub start_ms: i64,
    /// Its file.
    pub path: PathBuf,
    /// Bytes.
    pub bytes: u64,
}

/// What a window's load joined.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Per run of touching tiles, `(start, end)` and the tiles joined into one profile, in
    /// time order.
    pub pieces: Vec<(i64, i64, Profile)>,
    /// Rows read.
    pub rows: usize,
    /// Samples in them.
    pub samples: u64,
}

impl Loaded {
    /// The spans the store covered.
    #[must_use]
    pub fn covered(&self) -> Vec<(i64, i64)> {
        self.pieces.iter().map(|(a, b, _)| (*a, *b)).collect()
    }

    /// Every piece joined into one profile.
    #[must_use]
    pub fn joined(self, st: &ProfileSettings) -> Profile {
        let mut out = Profile::default();
        for (_, _, p) in self.pieces {
            out.absorb(p, st);
        }
        out
    }
}

impl Store {
    /// The store at `dir` (created on the first write).
    #[must_use]
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn tiles(&self) -> PathBuf {
        self.dir.join("tiles")
    }

    fn day_path(&self, start_ms: i64) -> PathBuf {
        self.tiles()
            .join(format!("day={}", day_name(start_ms)))
            .join("part.parquet")
    }

    /// The day partitions, oldest first (none where the store does not exist yet).
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn days(&self) -> Result<Vec<Day>, StoreError> {
        let tiles = self.tiles();
        let entries = match std::fs::read_dir(&tiles) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&tiles)(e)),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(io(&tiles))?;
            let name = e.file_name();
            let Some(start_ms) = name.to_str().and_then(parse_day_dir) else {
                continue;
            };
            let path = e.path().join("part.parquet");
            match std::fs::metadata(&path) {
                Ok(m) => out.push(Day {
                    start_ms,
                    path,
                    bytes: m.len(),
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&path)(e)),
            }
        }
        out.sort_by_key(|d| d.start_ms);
        Ok(out)
    }

    /// Write a tiled profile's pieces (tiles of `tile_ms`, indices as `Profile::with_tiles`
    /// numbers them), folded under `st`, leaving out tiles that end after `complete_before`
    /// (the hour still running). Per device and tile, a piece replaces the stored one unless
    /// the store holds more samples of it (a later read of a rotated log that no longer has
    /// the hour's beginning does not shrink it).
    ///
    /// # Errors
    /// A file cannot be read or written, or the store was folded under other rules.
    pub fn write(
        &self,
        profile: &Profile,
        tile_ms: u64,
        complete_before: i64,
        st: &ProfileSettings,
    ) -> Result<Written, StoreError> {
        let len = i64::try_from(tile_ms).unwrap_or(i64::MAX);
        let mut open = 0;
        let mut all = Vec::new();
        for (tile, piece) in profile.tile_pieces() {
            let start = tile.saturating_mul(len);
            if start.saturating_add(len) > complete_before {
                open += 1;
                continue;
            }
            all.push(Row {
                tile_start_ms: start,
                tile_ms,
                piece,
                edge: Edge::default(),
            });
        }
        add_edges(&mut all, st);
        let mut by_day: BTreeMap<i64, Vec<Row>> = BTreeMap::new();
        for r in all {
            by_day.entry(day_of(r.tile_start_ms)).or_default().push(r);
        }
        let fold = Fold::of(st);
        let mut w = Written {
            open,
            ..Written::default()
        };
        for (day, fresh) in by_day {
            let path = self.day_path(day);
            let old = if path.exists() {
                parquet_io::read(&path, Some(&fold))?
            } else {
                Vec::new()
            };
            let (rows, changed, kept) = merge_rows(old, fresh);
            w.bytes += parquet_io::write_atomic(&path, &rows, &fold)?;
            w.days += 1;
            w.rows += rows.len();
            w.changed += changed;
            w.kept += kept;
        }
        Ok(w)
    }

    /// Load the tiles wholly inside `[from, to)`, folded under `st`, joined as they are read
    /// (one run of touching tiles into one profile): memory holds one accumulator per device
    /// and run, and the day files being read (a few at a time, in parallel).
    ///
    /// # Errors
    /// A file cannot be read, is broken, or was folded under other rules.
    pub fn load(&self, from: i64, to: i64, st: &ProfileSettings) -> Result<Loaded, StoreError> {
        use rayon::prelude::*;
        let fold = Fold::of(st);
        let days: Vec<Day> = self
            .days()?
            .into_iter()
            .filter(|d| d.start_ms < to && d.start_ms + DAY_MS > from)
            .collect();
        let mut out = Loaded::default();
        for chunk in days.chunks(2 * rayon::current_num_threads().max(1)) {
            let read: Vec<Vec<Row>> = chunk
                .par_iter()
                .map(|d| parquet_io::read(&d.path, Some(&fold)))
                .collect::<Result<_, _>>()?;
            for row in read.into_iter().flatten() {
                let end = row
                    .tile_start_ms
                    .saturating_add(i64::try_from(row.tile_ms).unwrap_or(i64::MAX));
                if row.tile_start_ms < from || end > to {
                    continue;
                }
                out.rows += 1;
                out.samples += row.piece.acc.samples();
                // Rows come in time order (days ascending, a day's rows by tile): a tile
                // after the run's end starts a new run.
                match out.pieces.last_mut() {
                    Some((_, b, p)) if row.tile_start_ms <= *b => {
                        *b = (*b).max(end);
                        p.add_stored(row.piece, st);
                    }
                    _ => {
                        let mut p = Profile::default();
                        p.add_stored(row.piece, st);
                        out.pieces.push((row.tile_start_ms, end, p));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every row of one day partition (for tools and tests), without checking its fold.
    ///
    /// # Errors
    /// The file cannot be read or is broken.
    pub fn read_day(&self, day: &Day) -> Result<Vec<Row>, StoreError> {
        parquet_io::read(&day.path, None)
    }

    /// Remove the day partitions that end at or before `before_ms` (retention); returns how
    /// many.
    ///
    /// # Errors
    /// A partition cannot be removed.
    pub fn retain(&self, before_ms: i64) -> Result<usize, StoreError> {
        let mut n = 0;
        for d in self.days()? {
            if d.start_ms + DAY_MS <= before_ms {
                let dir = d.path.parent().unwrap_or(&d.path).to_path_buf();
                std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Join the tiles of each day that ends at or before `before_ms` into one tile per device
    /// and day (exact: the same accumulators, joined); returns the days rewritten. Compacted
    /// days answer only windows of whole days.
    ///
    /// # Errors
    /// A file cannot be read or written, or was folded under other rules.
    pub fn compact(&self, before_ms: i64, st: &ProfileSettings) -> Result<usize, StoreError> {
        let fold = Fold::of(st);
        let mut n = 0;
        for d in self.days()? {
            if d.start_ms + DAY_MS > before_ms {
                continue;
            }
            let rows = parquet_io::read(&d.path, Some(&fold))?;
            if rows.iter().all(|r| r.tile_ms == DAY_MS.unsigned_abs()) {
                continue;
            }
            // The day's edge per device: its last tile's (the ones inside the day are joined).
            let mut edges: BTreeMap<Identity, (i64, Edge)> = BTreeMap::new();
            let mut day = Profile::default();
            for r in rows {
                let e = edges
                    .entry(Identity::of(&r.piece.key))
                    .or_insert((r.tile_start_ms, r.edge));
                if r.tile_start_ms >= e.0 {
                    *e = (r.tile_start_ms, r.edge);
                }
                day.add_tile_piece(r.tile_start_ms, r.piece, st);
            }
            let rows: Vec<Row> = day
                .window(d.start_ms, d.start_ms + DAY_MS, st)
                .into_tile(d.start_ms)
                .tile_pieces()
                .map(|(start, piece)| Row {
                    tile_start_ms: start,
                    tile_ms: DAY_MS.unsigned_abs(),
                    edge: edges
                        .get(&Identity::of(&piece.key))
                        .map(|e| e.1)
                        .unwrap_or_default(),
                    piece,
                })
                .collect();
            parquet_io::write_atomic(&d.path, &rows, &fold)?;
            n += 1;
        }
        Ok(n)
    }
}

/// Per device and tile, the fresh piece unless the stored one has more samples; rows sorted
/// by tile, then device. Returns the rows, how many fresh ones went in, and how many stored
/// ones were kept over a fresh one.
fn merge_rows(old: Vec<Row>, fresh: Vec<Row>) -> (Vec<Row>, usize, usize) {
    let mut by: BTreeMap<(i64, Identity), Row> = BTreeMap::new();
    for r in old {
        by.insert((r.tile_start_ms, Identity::of(&r.piece.key)), r);
    }
    let (mut changed, mut kept) = (0, 0);
    for r in fresh {
        let k = (r.tile_start_ms, Identity::of(&r.piece.key));
        match by.get(&k) {
            Some(o) if o.piece.acc.samples() > r.piece.acc.samples() => kept += 1,
            Some(o) if o == &r => {}
            _ => {
                changed += 1;
                by.insert(k, r);
            }
        }
    }
    (by.into_values().collect(), changed, kept)
}

/// Whether a decoded piece of a tile of `tile_ms` holds together enough to be joined (see
/// `DeviceAcc::is_consistent`; the sample after the tile, which the tile's last interval
/// reaches, is the only one past it).
#[must_use]
pub fn plausible(piece: &TilePiece, tile_ms: u64) -> bool {
    piece.acc.is_consistent(tile_ms.saturating_mul(2))
}

/// UTC midnight at or before `ms`.
#[must_use]
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS) * DAY_MS
}

fn day_name(start_ms: i64) -> String {
    jiff::Timestamp::from_millisecond(start_ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| start_ms.to_string())
}

fn parse_day_dir(name: &str) -> Option<i64> {
    let d: jiff::civil::Date = name.strip_prefix("day=")?.parse().ok()?;
    jiff::tz::TimeZone::UTC
        .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
        .ok()
        .map(jiff::Timestamp::as_millisecond)
}

#[cfg(test)]
mod tests;
