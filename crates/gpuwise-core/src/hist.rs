//! # Mergeable, exact histograms with time weights
//!
//! Both histograms store integer weights (milliseconds), so merging two of them is exact and
//! order-independent: `merge(h(a), h(b)) == h(a ++ b)` bit for bit. This is what lets chunks of
//! one file and whole files be profiled in parallel and combined afterwards.

/// Time weights by integer key, stored sparsely: the keys that have weight, ascending, and
/// their weights. A device's readings repeat a few values (nvidia-smi reports whole percents,
/// memory moves in steps), so a few dozen keys hold all the weight, where a dense array of every
/// possible key would cost kilobytes per device (100k devices must fit in 1 GB). The key of the
/// last addition is remembered: consecutive samples mostly repeat it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct SparseBins {
    keys: Vec<u32>,
    weights: Vec<u64>,
    #[serde(skip)]
    last: usize,
}

impl PartialEq for SparseBins {
    fn eq(&self, other: &Self) -> bool {
        // The remembered position is a cache, not content.
        self.keys == other.keys && self.weights == other.weights
    }
}

impl Eq for SparseBins {}

impl SparseBins {
    fn add(&mut self, key: u32, w: u64) {
        if self.keys.get(self.last) == Some(&key) {
            self.weights[self.last] += w;
            return;
        }
        match self.keys.binary_search(&key) {
            Ok(i) => {
                self.weights[i] += w;
                self.last = i;
            }
            Err(i) => {
                self.keys.insert(i, key);
                self.weights.insert(i, w);
                self.last = i;
            }
        }
    }

    fn merge(&mut self, other: &SparseBins) {
        for (k, w) in other.iter() {
            self.add(k, w);
        }
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = (u32, u64)> + '_ {
        self.keys.iter().copied().zip(self.weights.iter().copied())
    }

    fn total(&self) -> u64 {
        self.weights.iter().sum()
    }

    /// Keys strictly ascending below `key_end`, one weight each, the total at most `cap`
    /// (a decoded histogram must hold together before it is merged).
    fn is_consistent(&self, key_end: u32, cap: u64) -> bool {
        self.keys.len() == self.weights.len()
            && self.keys.windows(2).all(|w| w[0] < w[1])
            && self.keys.last().is_none_or(|k| *k < key_end)
            && self
                .weights
                .iter()
                .try_fold(0u64, |a, w| a.checked_add(*w))
                .is_some_and(|t| t <= cap)
    }

    /// The smallest key at which at least `q` of the weight lies at or below it.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn quantile_key(&self, q: f64) -> Option<u32> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut acc = 0u64;
        for (k, w) in self.iter() {
            acc += w;
            if acc >= target {
                return Some(k);
            }
        }
        self.keys.last().copied()
    }
}

/// Utilization in 0.1 % bins over `0..=100 %`: 1,001 bins of milliseconds.
///
/// Quantiles are exact to the bin (0.1 %), which is finer than any GPU utilization counter
/// reports (nvidia-smi and DCGM `GPU_UTIL` are integers). Whole percents — what nvidia-smi and
/// `GPU_UTIL` report — go to dense bins over the span a device's readings touched (one add per
/// sample); the fractional bins that DCGM's profiling ratios fill are stored sparsely. 1,001
/// dense bins would cost 8 KB a device, which 100k devices cannot afford.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UtilHist {
    #[serde(with = "dense_as_pairs")]
    whole: WholeBins,
    fractional: SparseBins,
}

/// The whole-percent bins `lo..lo + len` of a utilization histogram: the span a device's
/// readings touched (an idle GPU fills one of the 101, a busy one a few dozen around its mean),
/// in `u32` milliseconds until a bin passes 49.7 days, then in `u64`. All 101 bins in `u64`
/// took 808 bytes a device, a third of a device's whole state.
#[derive(Clone, Debug, Default)]
struct WholeBins {
    lo: usize,
    bins: Bins,
}

#[derive(Clone, Debug)]
enum Bins {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Default for Bins {
    fn default() -> Self {
        Bins::Narrow(Vec::new())
    }
}

impl PartialEq for WholeBins {
    fn eq(&self, other: &Self) -> bool {
        // The span and the width are how the bins are held, not what they hold.
        self.iter().eq(other.iter())
    }
}

impl Eq for WholeBins {}

impl WholeBins {
    fn len(&self) -> usize {
        match &self.bins {
            Bins::Narrow(v) => v.len(),
            Bins::Wide(v) => v.len(),
        }
    }

    /// The weight of bin `i` (0 outside the span).
    fn get(&self, i: usize) -> u64 {
        let Some(k) = i.checked_sub(self.lo) else {
            return 0;
        };
        match &self.bins {
            Bins::Narrow(v) => v.get(k).map_or(0, |w| u64::from(*w)),
            Bins::Wide(v) => v.get(k).copied().unwrap_or(0),
        }
    }

    /// (bin, weight) of the bins with weight, ascending.
    fn iter(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (self.lo..self.lo + self.len())
            .map(|i| (i, self.get(i)))
            .filter(|(_, w)| *w > 0)
    }

    fn total(&self) -> Option<u64> {
        self.iter().try_fold(0u64, |a, (_, w)| a.checked_add(w))
    }

    #[inline]
    fn add(&mut self, i: usize, ms: u64) {
        if let Bins::Narrow(v) = &mut self.bins
            && let Some(slot) = i.checked_sub(self.lo).and_then(|k| v.get_mut(k))
            && let Some(sum) = u32::try_from(ms).ok().and_then(|m| slot.checked_add(m))
        {
            *slot = sum;
            return;
        }
        self.add_slow(i, ms);
    }

    #[allow(clippy::cast_possible_truncation)]
    fn add_slow(&mut self, i: usize, ms: u64) {
        self.cover(i, i);
        let k = i - self.lo;
        if let Bins::Narrow(v) = &self.bins
            && u64::from(v[k])
                .checked_add(ms)
                .and_then(|sum| u32::try_from(sum).ok())
                .is_none()
        {
            self.bins = Bins::Wide(v.iter().map(|w| u64::from(*w)).collect());
        }
        match &mut self.bins {
            // Checked above: the sum fits.
            Bins::Narrow(v) => v[k] += ms as u32,
            Bins::Wide(v) => v[k] += ms,
        }
    }

    /// Widen the span to hold bins `from..=to`, exactly (no spare capacity).
    fn cover(&mut self, from: usize, to: usize) {
        let len = self.len();
        let (lo, hi) = if len == 0 {
            (from, to)
        } else {
            (self.lo.min(from), (self.lo + len - 1).max(to))
        };
        let (front, back) = (self.lo - lo.min(self.lo), hi + 1 - lo);
        let front = if len == 0 { 0 } else { front };
        match &mut self.bins {
            Bins::Narrow(v) => grow(v, front, back),
            Bins::Wide(v) => grow(v, front, back),
        }
        self.lo = lo;
    }

    fn merge(&mut self, other: &WholeBins) {
        if other.len() == 0 {
            return;
        }
        self.cover(other.lo, other.lo + other.len() - 1);
        for (i, w) in other.iter() {
            self.add(i, w);
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.bins {
            Bins::Narrow(v) => v.capacity() * 4,
            Bins::Wide(v) => v.capacity() * 8,
        }
    }
}

/// `front` zeros put before `v`, then zeros after it up to `len` in all, allocated exactly.
fn grow<T: Copy + Default>(v: &mut Vec<T>, front: usize, len: usize) {
    if front == 0 && len <= v.len() {
        return;
    }
    let mut out = Vec::with_capacity(len);
    out.resize(front, T::default());
    out.extend_from_slice(v);
    out.resize(len, T::default());
    *v = out;
}

/// The whole-percent bins stored as (bin, weight) pairs of the bins with weight: an hour of one
/// device fills a handful of the 101, and a store holds millions of hours.
mod dense_as_pairs {
    use super::WholeBins;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &WholeBins, s: S) -> Result<S::Ok, S::Error> {
        #[allow(clippy::cast_possible_truncation)]
        let pairs: Vec<(u8, u64)> = v.iter().map(|(i, w)| (i as u8, w)).collect();
        pairs.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<WholeBins, D::Error> {
        let pairs = Vec::<(u8, u64)>::deserialize(d)?;
        let mut out = WholeBins::default();
        let mut last = None;
        for (i, w) in pairs {
            if i > 100 {
                return Err(serde::de::Error::custom(format!(
                    "utilization bin {i} past 100"
                )));
            }
            if last.is_some_and(|l| l >= i) {
                return Err(serde::de::Error::custom(format!(
                    "utilization bin {i} out of order"
                )));
            }
            last = Some(i);
            out.add(usize::from(i), w);
        }
        Ok(out)
    }
}

/// Number of bins of [`UtilHist`].
pub const UTIL_BINS: usize = 1001;

impl UtilHist {
    /// Whether a decoded histogram holds together, its weight at most `cap` ms.
    #[must_use]
    pub fn is_consistent(&self, cap: u64) -> bool {
        #[allow(clippy::cast_possible_truncation)]
        let end = UTIL_BINS as u32;
        let whole = self.whole.total().is_some_and(|t| t <= cap);
        whole && self.fractional.is_consistent(end, cap)
    }

    /// Add `ms` milliseconds at `pct` percent (`0..=100`).
    #[allow(clippy::cast_possible_truncation)]
    pub fn add(&mut self, pct: f32, ms: u64) {
        let bin = Self::bin(pct);
        if bin.is_multiple_of(10) {
            self.whole.add(bin / 10, ms);
        } else {
            self.fractional.add(bin as u32, ms);
        }
    }

    /// The bin of `pct`: 0.1 % steps, rounded to nearest.
    #[must_use]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn bin(pct: f32) -> usize {
        // Round half away from zero without a libm call: `pct` is not negative (sanitized), and
        // in f64 the sum of an f32 below 1,001 and 0.5 is exact, so truncating it rounds.
        ((f64::from(pct * 10.0) + 0.5) as usize).min(UTIL_BINS - 1)
    }

    /// (bin, weight) of every bin with weight, ascending: the dense whole percents merged
    /// with the sparse fractional bins.
    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut out = Vec::with_capacity(101 + self.fractional.keys.len());
        let mut frac = self.fractional.iter().peekable();
        for w in 0u32..101 {
            let v = self.whole.get(w as usize);
            if v > 0 {
                out.push((w * 10, v));
            }
            while let Some(&(k, fv)) = frac.peek() {
                if k >= (w + 1) * 10 {
                    break;
                }
                out.push((k, fv));
                frac.next();
            }
        }
        out.into_iter()
    }

    /// Add all of `other`.
    pub fn merge(&mut self, other: &UtilHist) {
        self.whole.merge(&other.whole);
        self.fractional.merge(&other.fractional);
    }

    /// Total weight.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.whole.iter().map(|(_, w)| w).sum::<u64>() + self.fractional.total()
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
        let mut last = 0;
        for (k, w) in self.iter() {
            acc += w;
            last = k;
            if acc >= target {
                return Some(f64::from(k) / 10.0);
            }
        }
        Some(f64::from(last) / 10.0)
    }

    /// The largest value with weight, `None` when empty.
    #[must_use]
    pub fn max(&self) -> Option<f64> {
        self.iter().last().map(|(k, _)| f64::from(k) / 10.0)
    }

    /// Bytes held on the heap (for the memory budget per device).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.whole.heap_bytes()
            + self.fractional.keys.capacity() * 4
            + self.fractional.weights.capacity() * 8
    }
}

/// Log-bucketed histogram for unbounded positive values (memory in MiB), 1 % relative error.
///
/// Hand-written rather than `sketches-ddsketch` because it must take integer time weights and
/// merge exactly (ddsketch keeps an `f64` sum and counts, so merged ≠ sequential bit for bit).
/// Buckets are stored sparsely; the last value's bucket is remembered, since memory readings
/// repeat from sample to sample.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LogHist {
    bins: SparseBins,
    #[serde(skip)]
    last: Option<(u64, u32)>,
}

impl PartialEq for LogHist {
    fn eq(&self, other: &Self) -> bool {
        // The remembered bucket is a cache, not content.
        self.bins == other.bins
    }
}

impl Eq for LogHist {}

const LOG_GAMMA: f64 = 0.009_950_330_853_168_083; // ln(1.01)

impl LogHist {
    /// Whether a decoded histogram holds together, its weight at most `cap` ms.
    #[must_use]
    pub fn is_consistent(&self, cap: u64) -> bool {
        self.bins.is_consistent(u32::MAX, cap)
    }

    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn key(v: f64) -> u32 {
        if v <= 1.0 {
            0
        } else {
            // Saturating: f64::MAX gives 71,333, far inside u32.
            (v.ln() / LOG_GAMMA).ceil() as u32
        }
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
        self.bins.add(key, ms);
    }

    /// Add all of `other`.
    pub fn merge(&mut self, other: &LogHist) {
        self.bins.merge(&other.bins);
    }

    /// Quantile `q` (upper edge of the bucket holding it, within 1 %).
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.bins
            .quantile_key(q)
            .map(|k| (f64::from(k) * LOG_GAMMA).exp())
    }

    /// Bytes held on the heap (for the memory budget per device).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.bins.keys.capacity() * 4 + self.bins.weights.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_bins_widen_past_u32_and_merge_exactly() {
        // One bin past 49.7 days of milliseconds: widened to u64, nothing lost.
        let mut big = UtilHist::default();
        big.add(0.0, u64::from(u32::MAX));
        big.add(0.0, 5);
        big.add(100.0, 7);
        assert_eq!(big.total(), u64::from(u32::MAX) + 12);
        assert!(matches!(big.whole.bins, Bins::Wide(_)));
        // Spans that lie apart, joined either way round, equal the sequential fold.
        let (mut a, mut b, mut seq) = (
            UtilHist::default(),
            UtilHist::default(),
            UtilHist::default(),
        );
        for (pct, ms) in [(40.0, 3), (42.0, 1), (41.0, 2)] {
            a.add(pct, ms);
            seq.add(pct, ms);
        }
        for (pct, ms) in [(3.0, 9), (97.0, 4), (40.0, 1)] {
            b.add(pct, ms);
            seq.add(pct, ms);
        }
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab, seq);
        assert_eq!(ba, seq);
        assert_eq!(
            ab.whole.iter().collect::<Vec<_>>(),
            [(3, 9), (40, 4), (41, 2), (42, 1), (97, 4)]
        );
        assert_eq!(ab.whole.len(), 95, "the span 3..=97, exactly");
        assert_eq!(ab.quantile(0.5), Some(40.0));
        // The stored form is the nonzero pairs, and reads back equal (wide or narrow).
        for h in [&ab, &big] {
            let json = serde_json::to_string(h).expect("encodes");
            let back: UtilHist = serde_json::from_str(&json).expect("decodes");
            assert_eq!(&back, h);
        }
        assert!(
            serde_json::from_str::<UtilHist>(
                r#"{"whole":[[101,1]],"fractional":{"keys":[],"weights":[]}}"#
            )
            .is_err()
        );
        assert!(
            serde_json::from_str::<UtilHist>(
                r#"{"whole":[[5,1],[4,1]],"fractional":{"keys":[],"weights":[]}}"#
            )
            .is_err()
        );
    }

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
    fn sparse_bins_equal_a_dense_count() {
        // Random keys and weights, added in random order: the sparse bins hold exactly what a
        // dense array holds, and merging two halves gives the same.
        let mut dense = vec![0u64; UTIL_BINS];
        let mut a = UtilHist::default();
        let mut b = UtilHist::default();
        let mut x = 12_345u64;
        for i in 0..5_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            #[allow(clippy::cast_precision_loss)]
            let pct = ((x >> 40) % 1001) as f32 / 10.0;
            let w = (x >> 20) % 1000;
            dense[UtilHist::bin(pct)] += w;
            if i % 3 == 0 {
                a.add(pct, w)
            } else {
                b.add(pct, w)
            }
        }
        a.merge(&b);
        let mut got = vec![0u64; UTIL_BINS];
        let mut prev = None;
        for (k, w) in a.iter() {
            got[k as usize] += w;
            assert!(prev < Some(k), "ascending, each bin once");
            prev = Some(k);
        }
        assert_eq!(got, dense);
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
