//! # How many GPUs to commit to
//!
//! From an hourly series of busy GPUs (a GPU is busy in an hour it spent mostly out of idle
//! episodes), the cost of committing to `c` GPUs for the whole window, the rest on demand:
//!
//! `cost(c) = c × H × commit price + Σ_h max(0, busy_h − c) × on-demand price`
//!
//! (plus, where part of the demand is interruptible, that part on spot: a share of each hour's
//! demand above the commitment, or a separate interruptible series that is never committed).
//! The `k`-th committed GPU pays for itself when at least `k` GPUs are busy in a share of hours
//! of at least commitment price ÷ on-demand price — the break-even utilization — so the
//! optimum is the largest such `k` (the curve is convex). Its sensitivity: the optimum and the
//! cost of keeping it when every hour's demand is 20 % lower or higher.

use serde::Serialize;

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.commit/v1";

/// Hours per month (as the advice counts them).
pub const MONTH_HOURS: f64 = 730.0;

/// Prices per GPU-hour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CommitPrices {
    /// On demand.
    pub on_demand: f64,
    /// 1-year commitment (effective hourly), when offered.
    pub commit_1y: Option<f64>,
    /// 3-year commitment, when offered.
    pub commit_3y: Option<f64>,
    /// Spot, for the interruptible demand, when known.
    pub spot: Option<f64>,
}

/// The demand.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// Busy GPUs per observed hour that a commitment can serve (hours without telemetry are
    /// not in the series: unknown, not idle).
    pub busy: Vec<u32>,
    /// Clock hours the observed hours span (0: the series' length); the study states the
    /// coverage.
    pub span_hours: usize,
    /// Busy GPUs per hour that are interruptible (always spot, never committed).
    pub interruptible: Vec<u32>,
    /// Share (0–1) of each hour's demand above the commitment that runs on spot.
    pub spot_share: f64,
}

/// One point of the curve.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Point {
    /// GPUs committed.
    pub committed_gpus: u32,
    /// Cost per month.
    pub monthly_cost_usd: f64,
}

/// One demand scenario.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sensitivity {
    /// Every hour's demand × this.
    pub demand_scale: f64,
    /// The optimum under it.
    pub optimum_committed_gpus: u32,
    /// Its monthly cost.
    pub monthly_cost_at_optimum_usd: f64,
    /// The monthly cost of keeping the base optimum instead.
    pub monthly_cost_keeping_base_usd: f64,
}

/// One commitment term.
#[derive(Clone, Debug, Serialize)]
pub struct Term {
    /// `1y` or `3y`.
    pub term: &'static str,
    /// Its price per GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// Commitment price ÷ on-demand price, %.
    pub break_even_utilization_pct: f64,
    /// GPUs to commit to.
    pub optimum_committed_gpus: u32,
    /// Share of hours the last committed GPU is busy, % (`null` at 0 GPUs).
    pub last_gpu_utilization_pct: Option<f64>,
    /// Monthly cost at the optimum.
    pub monthly_cost_usd: f64,
    /// Against everything on demand (and spot where interruptible).
    pub monthly_savings_usd: f64,
    /// The curve from 0 to the peak.
    pub curve: Vec<Point>,
    /// At 80 % and 120 % of the demand.
    pub sensitivity: Vec<Sensitivity>,
}

/// `gpuwise.commit/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct CommitStudy {
    /// Schema.
    pub schema: &'static str,
    /// Hours in the series: the observed hours.
    pub window_hours: usize,
    /// Clock hours those span.
    pub span_hours: usize,
    /// Observed hours over the span, %.
    pub coverage_pct: f64,
    /// Most busy GPUs in an hour.
    pub peak_gpus: u32,
    /// Mean busy GPUs.
    pub mean_gpus: f64,
    /// Mean interruptible busy GPUs.
    pub mean_interruptible_gpus: f64,
    /// Share of above-commitment demand on spot.
    pub spot_share_pct: f64,
    /// Prices.
    pub prices: CommitPrices,
    /// Everything on demand (interruptible on spot), per month.
    pub on_demand_monthly_usd: f64,
    /// Per term offered.
    pub terms: Vec<Term>,
}

/// A study that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// No hours.
    #[error("no busy-GPU hours to size a commitment on")]
    Empty,
    /// Interruptible demand without a spot price.
    #[error("interruptible demand needs a spot price")]
    NoSpotPrice,
    /// A price out of range.
    #[error("{0}")]
    BadPrice(String),
}

/// Monthly cost of committing to `c` GPUs on `d` (scaled by `scale`).
#[allow(clippy::cast_precision_loss)]
fn monthly(d: &Demand, p: &CommitPrices, commit: f64, c: u32, scale: f64) -> f64 {
    let spot = p.spot.unwrap_or(p.on_demand);
    let mut total = 0.0;
    for (h, &b) in d.busy.iter().enumerate() {
        let busy = (f64::from(b) * scale).round();
        let over = (busy - f64::from(c)).max(0.0);
        let interruptible = d
            .interruptible
            .get(h)
            .map_or(0.0, |&i| (f64::from(i) * scale).round());
        total += f64::from(c) * commit
            + over * (d.spot_share * spot + (1.0 - d.spot_share) * p.on_demand)
            + interruptible * spot;
    }
    total * MONTH_HOURS / d.busy.len().max(1) as f64
}

/// The cheapest commitment on `d` scaled by `scale`: the largest `k` whose busy share reaches
/// break-even (the curve is convex; on a tie the larger, as "at least break-even" commits),
/// found by scanning (fleets have hundreds, not millions, of GPUs).
fn optimum(d: &Demand, p: &CommitPrices, commit: f64, scale: f64) -> (u32, f64) {
    let peak = d
        .busy
        .iter()
        .map(|&b| (f64::from(b) * scale).round())
        .fold(0.0, f64::max);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let peak = peak as u32;
    (0..=peak)
        .map(|c| (c, monthly(d, p, commit, c, scale)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .unwrap_or((0, 0.0))
}

/// Size the commitment.
///
/// # Errors
/// [`CommitError`] for an empty series, interruptible demand without a spot price, or prices
/// that are not positive.
#[allow(clippy::cast_precision_loss)]
pub fn study(d: &Demand, p: CommitPrices) -> Result<CommitStudy, CommitError> {
    if d.busy.is_empty() {
        return Err(CommitError::Empty);
    }
    if p.spot.is_none() && (d.spot_share > 0.0 || d.interruptible.iter().any(|&i| i > 0)) {
        return Err(CommitError::NoSpotPrice);
    }
    for (name, v) in [
        ("on-demand", Some(p.on_demand)),
        ("1-year", p.commit_1y),
        ("3-year", p.commit_3y),
        ("spot", p.spot),
    ] {
        if let Some(v) = v
            && !(v.is_finite() && v > 0.0)
        {
            return Err(CommitError::BadPrice(format!(
                "the {name} price must be positive, got {v}"
            )));
        }
    }
    let hours = d.busy.len();
    let peak = d.busy.iter().copied().max().unwrap_or(0);
    let base = monthly(d, &p, 0.0, 0, 1.0);
    let terms = [("1y", p.commit_1y), ("3y", p.commit_3y)]
        .into_iter()
        .filter_map(|(term, price)| price.map(|c| (term, c)))
        .map(|(term, c)| {
            let (k, cost) = optimum(d, &p, c, 1.0);
            let share = |k: u32| d.busy.iter().filter(|&&b| b >= k).count() as f64 / hours as f64;
            Term {
                term,
                usd_per_gpu_hour: c,
                break_even_utilization_pct: c / p.on_demand * 100.0,
                optimum_committed_gpus: k,
                last_gpu_utilization_pct: (k > 0).then(|| share(k) * 100.0),
                monthly_cost_usd: cost,
                monthly_savings_usd: base - cost,
                curve: (0..=peak)
                    .map(|g| Point {
                        committed_gpus: g,
                        monthly_cost_usd: monthly(d, &p, c, g, 1.0),
                    })
                    .collect(),
                sensitivity: [0.8, 1.2]
                    .into_iter()
                    .map(|s| {
                        let (ks, cs) = optimum(d, &p, c, s);
                        Sensitivity {
                            demand_scale: s,
                            optimum_committed_gpus: ks,
                            monthly_cost_at_optimum_usd: cs,
                            monthly_cost_keeping_base_usd: monthly(d, &p, c, k, s),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let span = d.span_hours.max(hours);
    Ok(CommitStudy {
        schema: SCHEMA,
        window_hours: hours,
        span_hours: span,
        #[allow(clippy::cast_precision_loss)]
        coverage_pct: 100.0 * hours as f64 / span as f64,
        peak_gpus: peak,
        mean_gpus: d.busy.iter().map(|&b| f64::from(b)).sum::<f64>() / hours as f64,
        mean_interruptible_gpus: d.interruptible.iter().map(|&b| f64::from(b)).sum::<f64>()
            / hours as f64,
        spot_share_pct: d.spot_share * 100.0,
        prices: p,
        on_demand_monthly_usd: base,
        terms,
    })
}

/// The optimum alone, for the advice: (GPUs to commit to, their busy share of hours).
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn baseline(busy: &[u32], on_demand: f64, commit: f64) -> (u32, f64) {
    let d = Demand {
        busy: busy.to_vec(),
        ..Demand::default()
    };
    let p = CommitPrices {
        on_demand,
        commit_1y: Some(commit),
        commit_3y: None,
        spot: None,
    };
    let (k, _) = optimum(&d, &p, commit, 1.0);
    let share = busy.iter().filter(|&&b| b >= k).count() as f64 / busy.len().max(1) as f64;
    (k, share)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> CommitPrices {
        CommitPrices {
            on_demand: 4.0,
            commit_1y: Some(2.5),
            commit_3y: Some(1.6),
            spot: Some(1.2),
        }
    }

    #[test]
    fn the_kth_gpu_is_committed_when_busy_past_break_even() {
        // 100 hours: 4 GPUs busy in every hour, a 5th in 70, a 6th in 50, a 7th in 10.
        let busy: Vec<u32> = (0..100)
            .map(|h| 4 + u32::from(h < 70) + u32::from(h < 50) + u32::from(h < 10))
            .collect();
        let s = study(
            &Demand {
                busy,
                ..Demand::default()
            },
            prices(),
        )
        .expect("study");
        // 1y: 2.5/4 = 62.5 % → the 5th GPU (70 %) yes, the 6th (50 %) no.
        let y1 = &s.terms[0];
        assert_eq!(y1.optimum_committed_gpus, 5);
        assert!((y1.break_even_utilization_pct - 62.5).abs() < 1e-9);
        assert_eq!(y1.last_gpu_utilization_pct, Some(70.0));
        // 3y: 1.6/4 = 40 % → the 6th (50 %) yes, the 7th (10 %) no.
        assert_eq!(s.terms[1].optimum_committed_gpus, 6);
        // Cost at 5 committed, by hand: 5 × 2.5 × 100 + (50 + 10) × 4 (6th in 50 h, 7th in 10 h)
        // = 1,250 + 240 = 1,490 per 100 h → × 7.3 a month.
        assert!((y1.monthly_cost_usd - 1490.0 * 7.3).abs() < 1e-6);
        // All on demand: (400 + 70 + 50 + 10) × 4 = 2,120 per 100 h.
        assert!((s.on_demand_monthly_usd - 2120.0 * 7.3).abs() < 1e-6);
        // The curve is convex and its minimum is the optimum.
        let c: Vec<f64> = y1.curve.iter().map(|p| p.monthly_cost_usd).collect();
        assert_eq!(c.len(), 8);
        let min = c.iter().copied().fold(f64::INFINITY, f64::min);
        assert!((c[5] - min).abs() < 1e-9);
        // −20 %: demand 3.2→3 … the optimum drops; keeping 5 costs more than re-sizing.
        let low = &y1.sensitivity[0];
        assert!(low.optimum_committed_gpus < 5);
        assert!(low.monthly_cost_keeping_base_usd >= low.monthly_cost_at_optimum_usd);
        assert_eq!(baseline(&[4, 5, 6], 4.0, 2.5).0, 5);
    }

    #[test]
    fn interruptible_demand_runs_on_spot() {
        let d = Demand {
            busy: vec![2; 10],
            interruptible: vec![3; 10],
            ..Demand::default()
        };
        let s = study(&d, prices()).expect("study");
        // On demand 2 × 4 + interruptible 3 × 1.2 per hour.
        assert!((s.on_demand_monthly_usd - (8.0 + 3.6) * MONTH_HOURS).abs() < 1e-6);
        let no_spot = CommitPrices {
            spot: None,
            ..prices()
        };
        assert!(matches!(study(&d, no_spot), Err(CommitError::NoSpotPrice)));
        assert!(matches!(
            study(&Demand::default(), prices()),
            Err(CommitError::Empty)
        ));
    }
}
