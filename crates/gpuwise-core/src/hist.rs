//! # Mergeable, exact histograms with time weights
//!
//! Both histograms store integer weights (milliseconds), so merging two of them is exact and
//! order-independent: `merge(h(a), h(b)) == h(a ++ b)` bit for bit. This is what lets chunks of
//! one file and whole files be profiled in parallel and combined afterwards.

/// Utilization in 0.1 % bins over `0..=100 %`: 1,001 bins of milliseconds.
///
/// Quantiles are exact to the bin (0.1 %), which is finer than any GPU utilization counter
/// reports (nvidia-smi and DCGM `GPU_UTIL` are integers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UtilHist {
    bins: Box<[u64]>,
}

/// Number of bins of [`UtilHist`].
pub const UTIL_BINS: usize = 1001;

impl Default for UtilHist {
    fn default() -> Self {
        Self {
            bins: vec![0; UTIL_BINS].into_boxed_slice(),
        }
    }
}

impl UtilHist {
    /// Add `ms` milliseconds at `pct` percent (`0..=100`).
    pub fn add(&mut self, pct: f32, ms: u64) {
        self.bins[Self::bin(pct)] += ms;
    }

    /// The bin of `pct`: 0.1 % steps, rounded to nearest.
    #[must_use]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn bin(pct: f32) -> usize {
        // Round half away from zero without a libm call: `pct` is not negative (sanitized), and
        // in f64 the sum of an f32 below 1,001 and 0.5 is exact, so truncating it rounds.
        ((f64::from(pct * 10.0) + 0.5) as usize).min(UTIL_BINS - 1)
    }

    /// Add all of `other`.
    pub fn merge(&mut self, other: &UtilHist) {
        for (a, b) in self.bins.iter_mut().zip(other.bins.iter()) {
            *a += b;
        }
    }

    /// Total weight.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The smallest value `v` such that at least `q` of the weight is at or below `v`
    /// (`q` in `0..=1`). `None` when empty.
    #[must_use]
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut acc = 0u64;
        for (i, w) in self.bins.iter().enumerate() {
            acc += w;
            if acc >= target {
                return Some(i as f64 / 10.0);
            }
        }
        Some(100.0)
    }

    /// The largest value with weight, `None` when empty.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn max(&self) -> Option<f64> {
        self.bins
            .iter()
            .rposition(|w| *w > 0)
            .map(|i| i as f64 / 10.0)
    }

    /// Weight per whole percent (101 buckets, `[0, 0.5)` → 0 … `[99.5, 100]` → 100), for charts.
    #[must_use]
    pub fn by_percent(&self) -> Vec<u64> {
        let mut out = vec![0u64; 101];
        for (i, w) in self.bins.iter().enumerate() {
            out[(i + 5) / 10] += w;
        }
        out
    }
}

/// Log-bucketed histogram for unbounded positive values (memory in MiB), 1 % relative error.
///
/// Hand-written rather than `sketches-ddsketch` because it must take integer time weights and
/// merge exactly (ddsketch keeps an `f64` sum and counts, so merged ≠ sequential bit for bit).
/// Buckets are a dense vector from the smallest key seen (a device's memory use spans a few
/// hundred buckets at most); the last value's bucket is remembered, since memory readings
/// repeat from sample to sample.
#[derive(Clone, Debug, Default)]
pub struct LogHist {
    base: i32,
    counts: Vec<u64>,
    last: Option<(u64, i32)>,
}

impl PartialEq for LogHist {
    fn eq(&self, other: &Self) -> bool {
        // The remembered bucket is a cache, not content.
        self.iter().eq(other.iter())
    }
}

impl Eq for LogHist {}

const LOG_GAMMA: f64 = 0.009_950_330_853_168_083; // ln(1.01)

impl LogHist {
    #[allow(clippy::cast_possible_truncation)]
    fn key(v: f64) -> i32 {
        if v <= 1.0 {
            0
        } else {
            (v.ln() / LOG_GAMMA).ceil() as i32
        }
    }

    /// (key, weight) of the non-empty buckets, ascending.
    fn iter(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0)
            .map(|(i, w)| (self.base + i as i32, *w))
    }

    #[allow(clippy::cast_sign_loss)]
    fn slot(&mut self, key: i32) -> &mut u64 {
        if self.counts.is_empty() {
            self.base = key;
        } else if key < self.base {
            let extra = (self.base - key) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, extra));
            self.base = key;
        }
        let i = (key - self.base) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        &mut self.counts[i]
    }

    /// Add `ms` at value `v` (values ≤ 1 share bucket 0).
    pub fn add(&mut self, v: f64, ms: u64) {
        let bits = v.to_bits();
        let key = match self.last {
            Some((b, k)) if b == bits => k,
            _ => {
                let k = Self::key(v);
                self.last = Some((bits, k));
                k
            }
        };
        *self.slot(key) += ms;
    }

    /// Add all of `other`.
    pub fn merge(&mut self, other: &LogHist) {
        for (k, w) in other.iter() {
            *self.slot(k) += w;
        }
    }

    /// Quantile `q` (upper edge of the bucket holding it, within 1 %).
    #[must_use]
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return None;
        }
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut acc = 0;
        for (k, w) in self.iter() {
            acc += w;
            if acc >= target {
                return Some((f64::from(k) * LOG_GAMMA).exp());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn util_quantiles_are_exact_to_the_bin() {
        let mut h = UtilHist::default();
        h.add(10.0, 90);
        h.add(80.0, 10);
        assert_eq!(h.quantile(0.5), Some(10.0));
        assert_eq!(h.quantile(0.9), Some(10.0));
        assert_eq!(h.quantile(0.95), Some(80.0));
        assert_eq!(h.max(), Some(80.0));
        assert_eq!(h.total(), 100);
        assert_eq!(UtilHist::default().quantile(0.5), None);
        assert_eq!(h.by_percent()[10], 90);
    }

    #[test]
    fn bin_rounds_like_round() {
        // Every 1,000th f32 from 0 to past 100 %, and the exact halves.
        let mut bits = 0u32;
        while f32::from_bits(bits) < 101.0 {
            let p = f32::from_bits(bits);
            assert_eq!(
                UtilHist::bin(p),
                ((p * 10.0).round() as usize).min(UTIL_BINS - 1),
                "{p}"
            );
            bits += 1000;
        }
        for k in 0..1000u16 {
            let p = (f32::from(k) + 0.5) / 10.0;
            assert_eq!(
                UtilHist::bin(p),
                ((p * 10.0).round() as usize).min(UTIL_BINS - 1),
                "{p}"
            );
        }
    }

    #[test]
    fn log_quantile_within_one_percent() {
        let mut h = LogHist::default();
        for v in 1..=1000 {
            h.add(f64::from(v) * 10.0, 1);
        }
        let p95 = h.quantile(0.95).unwrap_or_default();
        assert!((p95 - 9500.0).abs() / 9500.0 < 0.011, "{p95}");
    }
}
