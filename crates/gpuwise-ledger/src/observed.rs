//! # What telemetry saw, per host and hour
//!
//! [`Observed`]: per host, per UTC hour, the physical GPU-hours that reported (a GPU counts
//! once however many MIG instances it carries: its hour is the longest of its instances'
//! coverage) and the idle GPU-hours (share-weighted, as the report counts them). This is what
//! a bill for instances is checked against. (Allocation reads each device's own hourly
//! timeline, in `allocate`.)

use std::collections::BTreeMap;

use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use gpuwise_core::sample::EpochMs;

/// One hour of a host.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostHour {
    /// Physical GPU-hours with data.
    pub gpu_hours: f64,
    /// Idle GPU-hours (share-weighted; devices of unknown share left out).
    pub idle_gpu_hours: f64,
    /// GPU-hours of devices whose share is known (the denominator of the idle share).
    pub weighed_gpu_hours: f64,
}

/// Per host, per UTC hour start.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// host → hour start → hour.
    pub hosts: BTreeMap<String, BTreeMap<EpochMs, HostHour>>,
}

impl Observed {
    /// Fold the profiles; `report` gives each device's share of a GPU.
    #[must_use]
    pub fn new(profiles: &[DeviceProfile], report: &Report) -> Self {
        let shares: BTreeMap<&str, Option<f64>> = report
            .devices
            .iter()
            .map(|d| (d.id.as_str(), d.gpu_share))
            .collect();
        // (host, gpu) → hour → longest instance coverage.
        let mut physical: BTreeMap<(&str, &str), BTreeMap<EpochMs, f64>> = BTreeMap::new();
        let mut hosts: BTreeMap<String, BTreeMap<EpochMs, HostHour>> = BTreeMap::new();
        for p in profiles {
            let share = shares.get(p.key.to_string().as_str()).copied().flatten();
            let cells = physical
                .entry((p.key.host.as_str(), p.key.gpu.as_str()))
                .or_default();
            let host = hosts.entry(p.key.host.clone()).or_default();
            for h in &p.stats.hourly {
                let c = cells.entry(h.start_ms).or_default();
                *c = c.max(h.covered_hours);
                if let Some(share) = share {
                    let cell = host.entry(h.start_ms).or_default();
                    cell.idle_gpu_hours += h.idle_hours * share;
                    cell.weighed_gpu_hours += h.covered_hours * share;
                }
            }
        }
        for ((host, _), cells) in physical {
            let hours = hosts.entry(host.to_owned()).or_default();
            for (start, covered) in cells {
                hours.entry(start).or_default().gpu_hours += covered;
            }
        }
        Self { hosts }
    }

    /// A host's hours that fall in `[start, end)`, each hour weighed by the part of it inside.
    #[must_use]
    pub fn within(&self, host: &str, start: EpochMs, end: EpochMs) -> HostHour {
        let mut out = HostHour::default();
        let Some(hours) = self.hosts.get(host) else {
            return out;
        };
        let from = start.div_euclid(gpuwise_core::HOUR_MS) * gpuwise_core::HOUR_MS;
        for (&h, cell) in hours.range(from..end) {
            let inside = overlap_fraction(h, start, end);
            out.gpu_hours += cell.gpu_hours * inside;
            out.idle_gpu_hours += cell.idle_gpu_hours * inside;
            out.weighed_gpu_hours += cell.weighed_gpu_hours * inside;
        }
        out
    }
}

/// The part of the hour starting at `h` inside `[start, end)`.
#[allow(clippy::cast_precision_loss)]
fn overlap_fraction(h: EpochMs, start: EpochMs, end: EpochMs) -> f64 {
    let lo = h.max(start);
    let hi = (h + gpuwise_core::HOUR_MS).min(end);
    if hi <= lo {
        0.0
    } else {
        (hi - lo) as f64 / gpuwise_core::HOUR_MS as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_hours_weigh_by_the_part_inside() {
        const H: i64 = gpuwise_core::HOUR_MS;
        assert!((overlap_fraction(0, 0, H) - 1.0).abs() < 1e-12);
        assert!((overlap_fraction(0, H / 4, H) - 0.75).abs() < 1e-12);
        assert!(overlap_fraction(0, H, 2 * H).abs() < 1e-12);
        let mut o = Observed::default();
        o.hosts.entry("a".into()).or_default().extend([
            (
                0,
                HostHour {
                    gpu_hours: 8.0,
                    ..HostHour::default()
                },
            ),
            (
                H,
                HostHour {
                    gpu_hours: 4.0,
                    ..HostHour::default()
                },
            ),
        ]);
        let w = o.within("a", H / 2, 2 * H);
        assert!((w.gpu_hours - 8.0).abs() < 1e-9, "{w:?}");
        assert_eq!(o.within("b", 0, H).gpu_hours, 0.0);
    }
}
