//! Busy GPUs per hour: the demand a commitment is sized on, one definition for the advice's
//! `commit_baseline` and `gpuwise simulate commit`.
//!
//! A GPU is busy in an hour it spent mostly out of idle episodes: its busy GPU-hours in that
//! hour (covered less idle, times its share of the physical GPU) are at least half an hour.
//! Three rules keep the series true to the data:
//! - **MIG instances fold into their GPU.** The instances of one physical GPU (same host and
//!   GPU UUID) add their busy share-hours; the GPU counts once. Counted whole, seven busy
//!   1g instances were seven busy GPUs. An instance whose share is unknown is left out and
//!   counted ([`BusyHours::unknown_share`]), never given a guessed share.
//! - **Only observed hours.** An hour in which no device reported is not an hour with no
//!   demand: it is left out of the series, and the coverage says how many hours the span had.
//!   (Padding them with zeros shrank every busy share by the coverage: 70 % telemetry made a
//!   GPU busy all the time look busy 70 % of the time.)
//! - Interruptible demand (a label the caller decides) is counted apart: it is never committed.

use std::collections::{BTreeMap, BTreeSet};

use crate::profile::HourPoint;
use crate::{EpochMs, HOUR_MS};

/// One device's part in the demand.
#[derive(Clone, Copy, Debug)]
pub struct Unit<'a> {
    /// The physical GPU it runs on: host and GPU UUID (a MIG instance's parent).
    pub parent: (&'a str, &'a str),
    /// Its share of that GPU (1 for a whole GPU, slices/7 for a MIG instance), if known.
    pub share: Option<f64>,
    /// Its hourly timeline.
    pub hourly: &'a [HourPoint],
    /// Whether its demand is interruptible (never committed).
    pub interruptible: bool,
}

/// Busy GPUs per observed hour, in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BusyHours {
    /// Committable busy GPUs, one entry per observed hour.
    pub busy: Vec<u32>,
    /// Interruptible busy GPUs, the same hours.
    pub interruptible: Vec<u32>,
    /// Clock hours from the first observed hour to the last, inclusive.
    pub span_hours: usize,
    /// Devices left out because their share of a GPU is unknown.
    pub unknown_share: usize,
}

impl BusyHours {
    /// Observed hours over the span, %; `None` for an empty series.
    #[must_use]
    pub fn coverage_pct(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        (self.span_hours > 0).then(|| 100.0 * self.busy.len() as f64 / self.span_hours as f64)
    }
}

/// The busy GPUs of each observed hour (see the module docs).
pub fn busy_hours<'a>(units: impl IntoIterator<Item = Unit<'a>>) -> BusyHours {
    // (hour, parent GPU) → busy share-hours, committable and interruptible.
    type Key<'k> = (EpochMs, (&'k str, &'k str));
    let mut gpu_hours: BTreeMap<Key<'_>, (f64, f64)> = BTreeMap::new();
    let mut observed: BTreeSet<EpochMs> = BTreeSet::new();
    let mut unknown_share = 0;
    for u in units {
        for h in u.hourly.iter().filter(|h| h.covered_hours > 0.0) {
            observed.insert(h.start_ms);
        }
        let Some(share) = u.share else {
            unknown_share += 1;
            continue;
        };
        for h in u.hourly {
            let busy = (h.covered_hours - h.idle_hours).max(0.0) * share;
            let e = gpu_hours.entry((h.start_ms, u.parent)).or_default();
            if u.interruptible {
                e.1 += busy;
            } else {
                e.0 += busy;
            }
        }
    }
    let index: BTreeMap<EpochMs, usize> =
        observed.iter().enumerate().map(|(i, h)| (*h, i)).collect();
    let mut out = BusyHours {
        busy: vec![0; observed.len()],
        interruptible: vec![0; observed.len()],
        span_hours: match (observed.first(), observed.last()) {
            (Some(a), Some(b)) => usize::try_from((b - a) / HOUR_MS + 1).unwrap_or(0),
            _ => 0,
        },
        unknown_share,
    };
    for ((hour, _), (committable, interruptible)) in gpu_hours {
        if committable + interruptible < 0.5 {
            continue;
        }
        let Some(&i) = index.get(&hour) else { continue };
        // A GPU whose busy time is mostly interruptible is interruptible demand.
        if interruptible > committable {
            out.interruptible[i] += 1;
        } else {
            out.busy[i] += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours(busy: &[f64]) -> Vec<HourPoint> {
        busy.iter()
            .enumerate()
            .map(|(i, b)| HourPoint {
                start_ms: i64::try_from(i).unwrap_or(0) * HOUR_MS,
                covered_hours: 1.0,
                util_hours: 1.0,
                util_weighted: 0,
                idle_hours: 1.0 - b,
            })
            .collect()
    }

    #[test]
    fn mig_instances_fold_into_their_gpu() {
        // Seven busy 1g instances of one GPU are one busy GPU; a whole GPU beside it is one
        // more.
        let mig = hours(&[1.0, 1.0]);
        let whole = hours(&[1.0, 0.0]);
        let mut units: Vec<Unit<'_>> = (0..7)
            .map(|_| Unit {
                parent: ("h", "GPU-a"),
                share: Some(1.0 / 7.0),
                hourly: &mig,
                interruptible: false,
            })
            .collect();
        units.push(Unit {
            parent: ("h", "GPU-b"),
            share: Some(1.0),
            hourly: &whole,
            interruptible: false,
        });
        let b = busy_hours(units);
        assert_eq!(b.busy, vec![2, 1]);
        // Three busy instances of seven are under half the GPU: not busy.
        let three: Vec<Unit<'_>> = (0..3)
            .map(|_| Unit {
                parent: ("h", "GPU-a"),
                share: Some(1.0 / 7.0),
                hourly: &mig,
                interruptible: false,
            })
            .collect();
        assert_eq!(busy_hours(three).busy, vec![0, 0]);
    }

    #[test]
    fn hours_without_telemetry_are_left_out_not_zero() {
        // Busy every hour it reported; it reported 7 of 10 hours.
        let mut h = hours(&[1.0; 10]);
        for i in [2, 5, 8] {
            h[i].covered_hours = 0.0;
            h[i].idle_hours = 0.0;
        }
        h.retain(|p| p.covered_hours > 0.0);
        let b = busy_hours([Unit {
            parent: ("h", "GPU-a"),
            share: Some(1.0),
            hourly: &h,
            interruptible: false,
        }]);
        assert_eq!(b.busy, vec![1; 7], "busy in every hour it was seen");
        assert_eq!(b.span_hours, 10);
        assert!((b.coverage_pct().unwrap_or(0.0) - 70.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_shares_are_counted_apart_and_interruptible_demand_apart() {
        let h = hours(&[1.0]);
        let b = busy_hours([
            Unit {
                parent: ("h", "GPU-a"),
                share: None,
                hourly: &h,
                interruptible: false,
            },
            Unit {
                parent: ("h", "GPU-b"),
                share: Some(1.0),
                hourly: &h,
                interruptible: true,
            },
        ]);
        assert_eq!((b.busy, b.interruptible), (vec![0], vec![1]));
        assert_eq!(b.unknown_share, 1);
    }
}
