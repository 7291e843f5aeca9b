//! # Spot traces: how many spot instances could run, tick by tick
//!
//! Three shapes, one model ([`Trace`]: a count per fixed tick):
//!
//! - SkyPilot spot-traces JSON (`{"metadata": {"gap_seconds": N}, "data": [...]}`), the data of
//!   Wu et al., NSDI'24: `data[i]` instances available (or alive) during tick `i`.
//! - an add/remove event CSV (`time_ms,event,node`, e.g. the Parcae 32-node p3 trace): the count
//!   of live nodes after each event, sampled at `tick_s`;
//! - a generic CSV `time_s,available` (a header line is allowed): the count from each time
//!   until the next, sampled at `tick_s`.

/// A trace that cannot be used.
/// The most ticks a trace may have (a year at 3-second ticks): its counts are held, and every
/// policy walks them from every start.
pub const MAX_TICKS: usize = 10_000_000;

/// The plausible tick of a trace, in seconds (a second to a day).
pub const TICK_RANGE_S: std::ops::RangeInclusive<f64> = 1.0..=86_400.0;

/// The latest plausible time in a trace, in seconds from its zero (about 317 years: epoch
/// seconds until 2286, or a relative clock).
pub const MAX_TIME_S: f64 = 1e10;

#[derive(Debug, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct TraceError {
    origin: String,
    message: String,
}

fn err(origin: &str, message: impl Into<String>) -> TraceError {
    TraceError {
        origin: origin.to_owned(),
        message: message.into(),
    }
}

/// Spot capacity over time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Where it came from (file name).
    pub name: String,
    /// Seconds per tick.
    pub gap_s: f64,
    /// Instances available during each tick.
    pub available: Vec<u32>,
}

impl Trace {
    /// Ticks.
    #[must_use]
    pub fn ticks(&self) -> usize {
        self.available.len()
    }

    /// Hours covered.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn hours(&self) -> f64 {
        self.available.len() as f64 * self.gap_s / 3600.0
    }

    /// Keep only the ticks that start within the first `hours` (a trace collection's window:
    /// the paper's Table 3 ran on the first 13 days of a collection that later grew).
    pub fn keep_first_hours(&mut self, hours: f64) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ticks = (hours * 3600.0 / self.gap_s - 1e-9).ceil().max(0.0) as usize;
        self.available.truncate(ticks);
    }

    /// Share of ticks with at least `nodes` instances.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn availability(&self, nodes: u32) -> f64 {
        if self.available.is_empty() {
            return 0.0;
        }
        self.available.iter().filter(|&&a| a >= nodes).count() as f64 / self.available.len() as f64
    }

    /// Times per hour capacity fell from enough (≥ `nodes`) to not enough: the preemption rate
    /// a job on `nodes` instances would see while running.
    #[must_use]
    pub fn preemptions_per_hour(&self, nodes: u32) -> f64 {
        let falls = self
            .available
            .windows(2)
            .filter(|w| w[0] >= nodes && w[1] < nodes)
            .count();
        let up_hours = self.availability(nodes) * self.hours();
        #[allow(clippy::cast_precision_loss)]
        if up_hours > 0.0 {
            falls as f64 / up_hours
        } else {
            0.0
        }
    }

    /// Parse a SkyPilot spot-traces JSON file.
    ///
    /// # Errors
    /// [`TraceError`] for a file that is not such a trace, without `gap_seconds`, with a
    /// non-positive gap or a negative or fractional count.
    pub fn from_skypilot_json(text: &str, origin: &str) -> Result<Self, TraceError> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(origin, format!("is not JSON: {e}")))?;
        let gap = v
            .get("metadata")
            .and_then(|m| m.get("gap_seconds"))
            .ok_or_else(|| err(origin, "has no metadata.gap_seconds"))?
            .as_f64()
            .filter(|g| TICK_RANGE_S.contains(g))
            .ok_or_else(|| {
                err(
                    origin,
                    "metadata.gap_seconds must be a number of seconds from 1 to 86400",
                )
            })?;
        let data = v
            .get("data")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| err(origin, "has no data array"))?;
        if data.len() > MAX_TICKS {
            return Err(err(
                origin,
                format!("has {} ticks; at most {MAX_TICKS} are read", data.len()),
            ));
        }
        let available = data
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| err(origin, format!("data[{i}] = {x} is not a count")))
            })
            .collect::<Result<Vec<u32>, TraceError>>()?;
        if available.is_empty() {
            return Err(err(origin, "has no ticks"));
        }
        Ok(Self {
            name: origin.to_owned(),
            gap_s: gap,
            available,
        })
    }

    /// Parse a step function given as `(time_s, count)` changes, sampled every `tick_s` from
    /// the first time to the last.
    fn from_steps(steps: &[(f64, u32)], tick_s: f64, origin: &str) -> Result<Self, TraceError> {
        if !TICK_RANGE_S.contains(&tick_s) {
            return Err(err(origin, "the tick must be from 1 s to 1 day"));
        }
        let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
            return Err(err(origin, "has no rows"));
        };
        if last.0 <= first.0 {
            return Err(err(
                origin,
                "covers no time (first and last times are equal)",
            ));
        }
        let span = ((last.0 - first.0) / tick_s).floor();
        #[allow(clippy::cast_precision_loss)]
        if span > MAX_TICKS as f64 {
            return Err(err(
                origin,
                format!(
                    "spans {span:.0} ticks of {tick_s} s; at most {MAX_TICKS} are read (a longer --tick, or a shorter trace)"
                ),
            ));
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ticks = span as usize;
        let mut available = Vec::with_capacity(ticks);
        let mut j = 0;
        for k in 0..ticks {
            #[allow(clippy::cast_precision_loss)]
            let t = first.0 + k as f64 * tick_s;
            while j + 1 < steps.len() && steps[j + 1].0 <= t {
                j += 1;
            }
            available.push(steps[j].1);
        }
        if available.is_empty() {
            return Err(err(origin, "is shorter than one tick"));
        }
        Ok(Self {
            name: origin.to_owned(),
            gap_s: tick_s,
            available,
        })
    }

    /// Parse an add/remove event CSV (`time_ms,event,node`; no header), sampled every
    /// `tick_s`.
    ///
    /// # Errors
    /// [`TraceError`] naming the line: a time that is not a number or goes back, an event other
    /// than `add`/`remove`, a node removed that was not added.
    pub fn from_events_csv(text: &str, tick_s: f64, origin: &str) -> Result<Self, TraceError> {
        let mut live = std::collections::BTreeSet::new();
        let mut steps: Vec<(f64, u32)> = Vec::new();
        let mut last_t = f64::NEG_INFINITY;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |m: String| err(origin, format!("line {}: {m}", i + 1));
            let mut f = line.split(',').map(str::trim);
            let (Some(t), Some(ev), Some(node)) = (f.next(), f.next(), f.next()) else {
                return Err(bad("expected time_ms,event,node".into()));
            };
            let text = t;
            let t: f64 = text
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad(format!("time `{text}` is not a non-negative number")))?;
            if t / 1000.0 > MAX_TIME_S {
                return Err(bad(format!("time `{text}` ms is beyond {MAX_TIME_S:e} s")));
            }
            if t < last_t {
                return Err(bad("time goes back".into()));
            }
            last_t = t;
            match ev {
                "add" => {
                    live.insert(node.to_owned());
                }
                "remove" => {
                    if !live.remove(node) {
                        return Err(bad(format!("node `{node}` removed but not live")));
                    }
                }
                other => return Err(bad(format!("event `{other}` is not add or remove"))),
            }
            let n = u32::try_from(live.len()).unwrap_or(u32::MAX);
            match steps.last_mut() {
                Some(s) if s.0 == t / 1000.0 => s.1 = n,
                _ => steps.push((t / 1000.0, n)),
            }
        }
        Self::from_steps(&steps, tick_s, origin)
    }

    /// Parse a generic `time_s,available` CSV (a header is allowed), sampled every `tick_s`.
    ///
    /// # Errors
    /// [`TraceError`] naming the line: a negative or non-numeric time, a time going back, a
    /// count that is not a non-negative integer.
    pub fn from_generic_csv(text: &str, tick_s: f64, origin: &str) -> Result<Self, TraceError> {
        let mut steps: Vec<(f64, u32)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || (i == 0 && line.starts_with(|c: char| c.is_ascii_alphabetic())) {
                continue;
            }
            let bad = |m: String| err(origin, format!("line {}: {m}", i + 1));
            let Some((t, n)) = line.split_once(',') else {
                return Err(bad("expected time_s,available".into()));
            };
            let text = t.trim();
            let t: f64 = text
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad(format!("time `{text}` is not a non-negative number")))?;
            if t > MAX_TIME_S {
                return Err(bad(format!("time `{text}` s is beyond {MAX_TIME_S:e} s")));
            }
            let n: u32 = n
                .trim()
                .parse()
                .map_err(|_| bad(format!("available `{}` is not a count", n.trim())))?;
            if steps.last().is_some_and(|s| t < s.0) {
                return Err(bad("time goes back".into()));
            }
            steps.push((t, n));
        }
        Self::from_steps(&steps, tick_s, origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skypilot_json_and_its_errors() {
        let t = Trace::from_skypilot_json(
            r#"{"metadata":{"gap_seconds":600},"data":[1,0,1,1]}"#,
            "a.json",
        )
        .expect("valid");
        assert_eq!((t.gap_s, t.ticks()), (600.0, 4));
        assert!((t.availability(1) - 0.75).abs() < 1e-12);
        // One fall (1 → 0) in 3 available ticks = 0.5 h.
        assert!((t.preemptions_per_hour(1) - 2.0).abs() < 1e-12);
        let e = |s: &str| {
            Trace::from_skypilot_json(s, "b.json")
                .expect_err("bad")
                .to_string()
        };
        assert_eq!(e(r#"{"data":[1]}"#), "b.json: has no metadata.gap_seconds");
        assert!(
            e(r#"{"metadata":{"gap_seconds":-5},"data":[1]}"#).contains("seconds from 1 to 86400")
        );
        assert!(e(r#"{"metadata":{"gap_seconds":5},"data":[1,-1]}"#).contains("data[1] = -1"));
    }

    #[test]
    fn events_become_a_sampled_count() {
        let t = Trace::from_events_csv(
            "0,add,a\n0,add,b\n30000,remove,a\n90000,add,c\n120000,remove,b\n",
            30.0,
            "e.csv",
        )
        .expect("valid");
        assert_eq!(t.available, vec![2, 1, 1, 2]);
        let e = |s: &str| {
            Trace::from_events_csv(s, 30.0, "e.csv")
                .expect_err("bad")
                .to_string()
        };
        assert!(e("0,add,a\n10,remove,b\n").contains("line 2: node `b` removed but not live"));
        assert!(e("10,add,a\n5,add,b\n").contains("line 2: time goes back"));
        assert!(e("0,jump,a\n").contains("`jump`"));
    }

    #[test]
    fn generic_csv_with_a_header() {
        let t = Trace::from_generic_csv(
            "time_s,available\n0,1\n120,0\n180,1\n240,1\n",
            60.0,
            "g.csv",
        )
        .expect("valid");
        assert_eq!(t.available, vec![1, 1, 0, 1]);
        let e = |s: &str| {
            Trace::from_generic_csv(s, 60.0, "g.csv")
                .expect_err("bad")
                .to_string()
        };
        assert!(e("0,1\n-5,1\n").contains("line 2"));
        assert!(e("0,1\n60,x\n").contains("`x` is not a count"));
    }
}
