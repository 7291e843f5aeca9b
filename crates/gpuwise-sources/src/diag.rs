//! Errors and counted skips.
//!
//! A problem with one line or one value is a *skip*: counted by kind, the first few shown with
//! file and line, the rest of the data kept. A problem that makes a whole input unreadable (no
//! such file, unknown format, a missing required column) is an [`IngestError`]. `--strict`
//! turns the first skip into an error.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::PathBuf;

use gpuwise_core::report::Warning;

/// A time for a message: RFC 3339 when it is one, else the raw milliseconds.
#[must_use]
pub fn show_time(ms: gpuwise_core::EpochMs) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| format!("{ms} ms"), |t| t.to_string())
}

/// How many examples of each kind of skip are kept.
pub const EXAMPLES: usize = 5;

/// An error that stops reading.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Cannot open or read an input.
    #[error("cannot read `{}`", path.display())]
    Io {
        /// The input.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path or glob that names no file.
    #[error("`{0}` matches no file")]
    NoMatch(String),
    /// An input that cannot be read as any (or the forced) format.
    #[error("`{file}`: {message}")]
    Format {
        /// The input.
        file: String,
        /// What is wrong, and how to fix it.
        message: String,
    },
    /// A skip under `--strict`.
    #[error("`{file}` line {line}: {message} (--strict turns skipped lines into errors)")]
    Strict {
        /// The input.
        file: String,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Two inputs cover one device at the same time, under `--strict`.
    #[error(
        "`{first}` and `{second}` both hold samples of device `{device}` for the same time (the same file twice, a copy, or two collectors); --strict refuses overlapping inputs, without it the overlap is counted once"
    )]
    Overlap {
        /// The device.
        device: String,
        /// The input that covers it first.
        first: String,
        /// The input that overlaps it.
        second: String,
    },
    /// Bad options.
    #[error("{0}")]
    Usage(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Kind {
    count: u64,
    examples: Vec<(String, u64, String)>,
}

/// Counted skips and reading statistics of one piece of input. Mergeable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines read.
    pub lines: u64,
    /// Samples produced.
    pub samples: u64,
    kinds: BTreeMap<&'static str, Kind>,
}

impl Tally {
    /// Count a skip of `kind` at `file:line`.
    pub fn skip(&mut self, kind: &'static str, file: &str, line: u64, message: impl Display) {
        let k = self.kinds.entry(kind).or_default();
        k.count += 1;
        if k.examples.len() < EXAMPLES {
            k.examples
                .push((file.to_owned(), line, message.to_string()));
        }
    }

    /// Total skips.
    #[must_use]
    pub fn skipped(&self) -> u64 {
        self.kinds.values().map(|k| k.count).sum()
    }

    /// Drop the impossible values of `sample` (see `Sample::sanitize`), counting each as an
    /// `invalid_value` skip at `file:line`; without a line number (0), the message names the
    /// sample's time instead.
    pub fn sanitize(&mut self, sample: &mut gpuwise_core::Sample, file: &str, line: u64) {
        let ts = sample.ts_ms;
        sample.sanitize(|inv| {
            let at = if line == 0 {
                format!(" at {ts} ms")
            } else {
                String::new()
            };
            self.skip(
                "invalid_value",
                file,
                line,
                format!("{inv}{at} (value dropped)"),
            );
        });
    }

    /// Count what the profile did with a sample read at `file:line` (`line` 0: no line; the
    /// message names the time): taken, an outlier dropped before it, or a timestamp outside the
    /// plausible window. Out-of-order and duplicate samples are counted by the profile itself.
    pub fn taken(
        &mut self,
        r: Result<gpuwise_core::profile::Taken, gpuwise_core::profile::Rejected>,
        file: &str,
        line: u64,
        ts_ms: gpuwise_core::EpochMs,
    ) {
        use gpuwise_core::profile::{Rejected, Taken};
        match r {
            Ok(Taken::Sample) => self.samples += 1,
            // This sample is taken and the held one before it is not: the count stays.
            Ok(Taken::DroppedOutlier(prev)) => self.skip(
                "outlier_timestamp",
                file,
                line,
                format!(
                    "the sample of this device before this one, dated {}, is later than this one and more than --max-gap after what came before it: dropped as an outlier (not used as an anchor)",
                    show_time(prev)
                ),
            ),
            Err(Rejected::OutsideWindow) => self.skip(
                "implausible_timestamp",
                file,
                line,
                format!(
                    "timestamp {} is before 2000 or more than a day in the future (sample dropped)",
                    show_time(ts_ms)
                ),
            ),
            Err(_) => {}
        }
    }

    /// Skips of one kind.
    #[must_use]
    pub fn count(&self, kind: &str) -> u64 {
        self.kinds.get(kind).map_or(0, |k| k.count)
    }

    /// Move the line numbers of the examples `offset` lines down: a piece read on its own,
    /// numbered from 1, that starts after `offset` lines of its input.
    pub fn renumber(&mut self, offset: u64) {
        for k in self.kinds.values_mut() {
            for ex in &mut k.examples {
                if ex.1 > 0 {
                    ex.1 += offset;
                }
            }
        }
    }

    /// Add `other` (a later piece: its examples come after ours).
    pub fn merge(&mut self, other: Tally) {
        self.lines += other.lines;
        self.samples += other.samples;
        for (name, k) in other.kinds {
            let mine = self.kinds.entry(name).or_default();
            mine.count += k.count;
            for ex in k.examples {
                if mine.examples.len() < EXAMPLES {
                    mine.examples.push(ex);
                }
            }
        }
    }

    /// The first skip, as a `--strict` error.
    #[must_use]
    pub fn first_error(&self) -> Option<IngestError> {
        self.kinds
            .values()
            .flat_map(|k| k.examples.iter())
            .min_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)))
            .map(|(file, line, message)| IngestError::Strict {
                file: file.clone(),
                line: *line,
                message: message.clone(),
            })
    }

    /// One warning per kind, with the examples.
    #[must_use]
    pub fn warnings(&self) -> Vec<Warning> {
        self.kinds
            .iter()
            .map(|(kind, k)| {
                let examples: Vec<String> = k
                    .examples
                    .iter()
                    .map(|(f, l, m)| {
                        if *l > 0 {
                            format!("`{f}` line {l}: {m}")
                        } else {
                            format!("`{f}`: {m}")
                        }
                    })
                    .collect();
                let more = if k.count > examples.len() as u64 {
                    format!("; {} more", k.count - examples.len() as u64)
                } else {
                    String::new()
                };
                Warning {
                    kind: (*kind).to_owned(),
                    message: format!("{} skipped ({}{more})", k.count, examples.join("; ")),
                    count: k.count,
                }
            })
            .collect()
    }
}

/// Why a header, `--columns` or `--map` gives no layout the readers can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// nvidia-smi CSV without a time column.
    #[error(
        "no `timestamp` column: collect with `--query-gpu=timestamp,…` so samples can be placed in time"
    )]
    NoTimestamp,
    /// nvidia-smi CSV without a reading (a per-process log, say).
    #[error(
        "none of utilization.gpu, utilization.memory, memory.used, memory.total, power.draw is present: nothing to measure"
    )]
    NothingToMeasure,
    /// A `noheader` nvidia-smi log without `--columns`.
    #[error(
        "no header line: a `--format=csv,noheader` nvidia-smi log needs --columns with the --query-gpu list used to collect it"
    )]
    NoHeader,
    /// A dmon header without its `gpu` column.
    #[error("the dmon header has no `gpu` column")]
    DmonNoGpu,
    /// A dmon log without readings.
    #[error(
        "the dmon log has none of the `sm`, `mem`, `fb`, `pwr` columns (collect with `-s pum` or the default)"
    )]
    DmonNothingToMeasure,
    /// A `--map` entry that is not `key=column`.
    #[error("--map entry `{0}` is not key=column")]
    MapEntry(String),
    /// A `--map` key gpuwise does not know.
    #[error(
        "--map key `{0}` is unknown; keys: timestamp, device, host, model, namespace, pod, util, sm_active, sm_occupancy, tensor_active, dram_active, mem_bw_util (each also as *_ratio), mem_used_mib, mem_total_mib, power_w, power_limit_w"
    )]
    MapKey(String),
    /// `--map` without the time column.
    #[error("--map needs `timestamp=COLUMN`")]
    MapNoTimestamp,
    /// `--map` without a reading.
    #[error("--map needs at least one reading (util=, mem_used_mib=, power_w=, …)")]
    MapNoReading,
    /// Nothing but blank lines.
    #[error("is empty")]
    Empty,
    /// No reader recognizes the input.
    #[error(
        "cannot tell the format (first line: `{0}`); pass --input-format nvidia-smi|dmon|dcgm|csv (a noheader nvidia-smi log needs --columns, a generic CSV needs --map)"
    )]
    UnknownFormat(String),
}
