//! # Diagnosis: a class, a bottleneck hint and recurring idle windows per device
//!
//! Pure functions of a [`DeviceStats`] and the thresholds in [`DiagnoseSettings`]. Each
//! verdict carries the evidence it rests on, in words and numbers, and says `unknown` with a
//! reason when the data cannot support a verdict (nvidia-smi data has no SM or DRAM activity,
//! so it cannot tell memory-bound from compute-bound).

use serde::Serialize;

use crate::profile::{DeviceStats, HowBin};
use crate::sample::WorkloadKind;
use crate::settings::{BottleneckRules, DiagnoseSettings};

/// How a device spent its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Idle for most of the observed time, memory mostly free.
    Idle,
    /// Idle for most of the observed time while holding memory (a forgotten notebook kernel).
    HeldIdle,
    /// Mean utilization below the over-provisioning threshold.
    Underutilized,
    /// Inside the healthy band.
    Healthy,
    /// Above the healthy band: the device is the constraint.
    Saturated,
    /// No utilization signal to judge from.
    Unknown,
}

impl Class {
    /// All classes, in report order.
    pub const ALL: [Class; 6] = [
        Class::Idle,
        Class::HeldIdle,
        Class::Underutilized,
        Class::Healthy,
        Class::Saturated,
        Class::Unknown,
    ];

    /// The JSON name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Idle => "idle",
            Class::HeldIdle => "held_idle",
            Class::Underutilized => "underutilized",
            Class::Healthy => "healthy",
            Class::Saturated => "saturated",
            Class::Unknown => "unknown",
        }
    }
}

/// What limits a device's work, as far as the data can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BottleneckKind {
    /// Bursts of work separated by short stalls: the GPU waits for work (its input pipeline in
    /// training; requests between bursts in serving).
    InputBound,
    /// DRAM busy while compute pipes are not: bandwidth limits the work.
    MemoryBound,
    /// SMs or tensor cores busy: the GPU is doing arithmetic.
    ComputeBound,
    /// The engine is busy but SMs are mostly empty: small kernels, launch overhead.
    LaunchBound,
    /// The data cannot say (the reason says why).
    Unknown,
}

/// A bottleneck hint with its evidence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bottleneck {
    /// The hint.
    pub kind: BottleneckKind,
    /// The measured numbers it rests on, or why it is unknown.
    pub evidence: String,
}

/// A recurring idle window, in the report's time zone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IdleWindow {
    /// `weekdays`, `weekend`, or `every day`.
    pub days: String,
    /// First idle hour (`0..24`).
    pub start_hour: u8,
    /// Hour the window ends (exclusive; may be smaller than `start_hour` across midnight).
    pub end_hour: u8,
}

/// A device's diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The class.
    pub class: Class,
    /// Why this class, with numbers.
    pub class_reason: String,
    /// Bottleneck hint.
    pub bottleneck: Bottleneck,
    /// Recurring idle windows.
    pub idle_windows: Vec<IdleWindow>,
    /// The windows in words (`idle 19:00–08:00 on weekdays and all weekend`).
    pub idle_pattern: Option<String>,
    /// Hours per week inside recurring idle hours of the week.
    pub recurring_idle_hours_per_week: f64,
}

/// Diagnose one device.
#[must_use]
pub fn diagnose(s: &DeviceStats, st: &DiagnoseSettings, kind: Option<WorkloadKind>) -> Diagnosis {
    let (class, class_reason) = classify(s, st);
    let bottleneck = bottleneck(s, class, &st.bottleneck, kind);
    let (idle_windows, recurring) = idle_windows(&s.hour_of_week(), st.recurring_idle_share_pct);
    let idle_pattern = describe(&idle_windows);
    Diagnosis {
        class,
        class_reason,
        bottleneck,
        idle_windows,
        idle_pattern,
        recurring_idle_hours_per_week: recurring,
    }
}

fn classify(s: &DeviceStats, st: &DiagnoseSettings) -> (Class, String) {
    let Some(u) = &s.util else {
        return (
            Class::Unknown,
            "no utilization reading (nvidia-smi prints [N/A] for utilization in MIG mode; \
             DCGM needs PROF_GR_ENGINE_ACTIVE for MIG instances)"
                .to_owned(),
        );
    };
    if u.observed_hours <= 0.0 {
        return (
            Class::Unknown,
            "a single sample: no observed duration".to_owned(),
        );
    }
    let idle_share = 100.0 * s.idle_hours / u.observed_hours;
    if idle_share >= st.idle_share_pct {
        let held_share = if s.idle_hours > 0.0 {
            100.0 * s.held_idle_hours / s.idle_hours
        } else {
            0.0
        };
        if held_share >= st.held_share_pct {
            return (
                Class::HeldIdle,
                format!(
                    "idle {idle_share:.0} % of observed time (≥ {:.0} %), memory held during {held_share:.0} % of it (≥ {:.0} %)",
                    st.idle_share_pct, st.held_share_pct
                ),
            );
        }
        return (
            Class::Idle,
            format!(
                "idle {idle_share:.0} % of observed time (≥ {:.0} %)",
                st.idle_share_pct
            ),
        );
    }
    if u.mean_pct < st.underutilized_below_pct {
        return (
            Class::Underutilized,
            format!(
                "mean utilization {:.1} % < {:.0} %",
                u.mean_pct, st.underutilized_below_pct
            ),
        );
    }
    if u.mean_pct > st.saturated_above_pct {
        return (
            Class::Saturated,
            format!(
                "mean utilization {:.1} % > {:.0} %",
                u.mean_pct, st.saturated_above_pct
            ),
        );
    }
    (
        Class::Healthy,
        format!(
            "mean utilization {:.1} % within {:.0}–{:.0} %",
            u.mean_pct, st.underutilized_below_pct, st.saturated_above_pct
        ),
    )
}

fn bottleneck(
    s: &DeviceStats,
    class: Class,
    r: &BottleneckRules,
    kind: Option<WorkloadKind>,
) -> Bottleneck {
    let unknown = |why: String| Bottleneck {
        kind: BottleneckKind::Unknown,
        evidence: why,
    };
    let Some(u) = &s.util else {
        return unknown("no utilization reading".into());
    };
    if matches!(class, Class::Idle | Class::HeldIdle) {
        return unknown("the device is idle: no work to diagnose".into());
    }
    // Stalls: time below the idle threshold that is not part of an idle episode, i.e. short
    // dips between bursts of work.
    let stall_share = if u.observed_hours > 0.0 {
        100.0 * (s.below_threshold_hours - s.idle_hours).max(0.0) / u.observed_hours
    } else {
        0.0
    };
    if stall_share >= r.stall_share_min_pct && u.p95_pct >= r.burst_p95_min_pct {
        // What the GPU waits for depends on the work: a hint says; without one, "waiting for
        // work" covers a data loader that cannot keep up and a server idle between requests.
        let waits_for = match kind {
            Some(WorkloadKind::Training | WorkloadKind::Batch) => {
                "the GPU waits for its input (data loading, preprocessing or communication)"
            }
            Some(WorkloadKind::Inference) => {
                "the GPU waits for requests between bursts: batching and autoscaling decide its use, not data loading"
            }
            Some(WorkloadKind::Notebook) => "the GPU waits for the person at the notebook",
            None => {
                "the GPU waits for work (in training, its input pipeline; in serving, requests)"
            }
        };
        return Bottleneck {
            kind: BottleneckKind::InputBound,
            evidence: format!(
                "utilization drops below the idle threshold for {stall_share:.0} % of the time in short stalls \
                 (shorter than an idle episode) between bursts at p95 {:.0} %: {waits_for}",
                u.p95_pct
            ),
        };
    }
    let (Some(sm), Some(dram)) = (s.sm_active_pct, s.dram_active_pct) else {
        return unknown(
            "no SM or DRAM activity in the data (nvidia-smi and DCGM without profiling metrics cannot \
             tell memory-bound from compute-bound); collect DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_DRAM_ACTIVE"
                .into(),
        );
    };
    let tensor = s.tensor_active_pct;
    let tensor_text = tensor.map_or_else(|| "unknown".to_owned(), |t| format!("{t:.0} %"));
    if u.mean_pct >= r.launch_engine_min_pct
        && sm < r.launch_sm_to_engine_max * u.mean_pct
        && sm < r.launch_sm_max_pct
    {
        return Bottleneck {
            kind: BottleneckKind::LaunchBound,
            evidence: format!(
                "engine active {:.0} % but SM active only {sm:.0} %: kernels too small to fill the GPU \
                 (launch overhead, small batches)",
                u.mean_pct
            ),
        };
    }
    let dram_heavy = dram >= r.memory_dram_min_pct && dram >= sm * r.memory_dram_to_sm_min;
    match tensor {
        Some(t) if dram_heavy && t < r.memory_tensor_max_pct => {
            return Bottleneck {
                kind: BottleneckKind::MemoryBound,
                evidence: format!(
                    "DRAM active {dram:.0} % with tensor pipes {t:.0} % and SM active {sm:.0} %"
                ),
            };
        }
        None if dram_heavy => {
            return unknown(format!(
                "DRAM active {dram:.0} % and SM active {sm:.0} %, but no tensor-pipe activity in the data: \
                 memory-bound cannot be told from tensor-bound; collect DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
            ));
        }
        _ => {}
    }
    if sm >= r.compute_sm_min_pct || tensor.is_some_and(|t| t >= r.compute_tensor_min_pct) {
        return Bottleneck {
            kind: BottleneckKind::ComputeBound,
            evidence: format!(
                "SM active {sm:.0} %, tensor pipes {tensor_text}, DRAM active {dram:.0} %"
            ),
        };
    }
    unknown(format!(
        "no dominant limit: SM active {sm:.0} %, tensor pipes {tensor_text}, DRAM active {dram:.0} %"
    ))
}

/// Recurring idle windows from the hour-of-week bins: a bin is idle when idle for at least
/// `share_pct` of its observed time. Returns the windows and the idle-bin hours per week.
#[must_use]
pub fn idle_windows(how: &[HowBin], share_pct: f64) -> (Vec<IdleWindow>, f64) {
    if how.len() != 168 {
        return (Vec::new(), 0.0);
    }
    let idle: Vec<bool> = how
        .iter()
        .map(|b| b.covered_hours > 0.0 && 100.0 * b.idle_hours / b.covered_hours >= share_pct)
        .collect();
    #[allow(clippy::cast_precision_loss)]
    let per_week = idle.iter().filter(|x| **x).count() as f64;
    let mut out = Vec::new();
    let all = |days: std::ops::Range<usize>, h: usize| days.clone().all(|d| idle[d * 24 + h]);
    let weekday: Vec<bool> = (0..24).map(|h| all(0..5, h)).collect();
    let weekend: Vec<bool> = (0..24).map(|h| all(5..7, h)).collect();
    if weekday.iter().all(|x| *x) && weekend.iter().all(|x| *x) {
        out.push(IdleWindow {
            days: "every day".into(),
            start_hour: 0,
            end_hour: 0,
        });
        return (out, per_week);
    }
    let same = weekday == weekend;
    if let Some((a, b)) = longest_circular_run(&weekday) {
        let days = if same { "every day" } else { "weekdays" };
        out.push(IdleWindow {
            days: days.into(),
            start_hour: a,
            end_hour: b,
        });
    }
    if !same && let Some((a, b)) = longest_circular_run(&weekend) {
        out.push(IdleWindow {
            days: "weekend".into(),
            start_hour: a,
            end_hour: b,
        });
    }
    (out, per_week)
}

/// Longest run of `true` hours on a 24-hour circle, at least 2 hours long; `(start, end)` with
/// `end` exclusive, `(0, 0)` for the whole day.
#[allow(clippy::cast_possible_truncation)]
fn longest_circular_run(hours: &[bool]) -> Option<(u8, u8)> {
    if hours.iter().all(|x| *x) {
        return Some((0, 0));
    }
    let n = hours.len();
    let mut best: Option<(usize, usize)> = None;
    for start in 0..n {
        if !hours[start] || hours[(start + n - 1) % n] {
            continue;
        }
        let len = (0..n).take_while(|k| hours[(start + k) % n]).count();
        if len >= 2 && best.is_none_or(|(_, l)| len > l) {
            best = Some((start, len));
        }
    }
    best.map(|(s, l)| (s as u8, ((s + l) % n) as u8))
}

/// An idle window this long (of 24 h) is said the other way round: by its busy hours.
const MOSTLY_IDLE_HOURS: i32 = 18;

/// Windows in words: `idle 19:00–08:00 on weekdays and all weekend`; a device idle all but a
/// few hours reads `busy only 14:00–15:00 on weekdays`.
#[must_use]
pub fn describe(windows: &[IdleWindow]) -> Option<String> {
    if windows.is_empty() {
        return None;
    }
    // Idle all but a few hours: say when it is busy (`busy only 14:00–15:00 on weekdays`),
    // not `idle 15:00–14:00 on weekdays and all weekend`.
    let span = |w: &IdleWindow| (i32::from(w.end_hour) - i32::from(w.start_hour)).rem_euclid(24);
    let mostly = |w: &IdleWindow| w.start_hour != w.end_hour && span(w) >= MOSTLY_IDLE_HOURS;
    let busy = |w: &IdleWindow, days: &str| {
        format!(
            "busy only {:02}:00–{:02}:00 {days}",
            w.end_hour, w.start_hour
        )
    };
    match windows {
        [w] if w.days == "every day" && mostly(w) => return Some(busy(w, "every day")),
        [a, b] => {
            let (wd, we) = if a.days == "weekdays" { (a, b) } else { (b, a) };
            if wd.days == "weekdays"
                && we.days == "weekend"
                && we.start_hour == we.end_hour
                && mostly(wd)
            {
                return Some(busy(wd, "on weekdays"));
            }
        }
        _ => {}
    }
    let parts: Vec<String> = windows.iter().map(window_words).collect();
    Some(format!("idle {}", parts.join(" and ")))
}

/// One recurring window in words: `19:00–08:00 on weekdays`, `all weekend`, `around the
/// clock` (a whole day is never `00:00–00:00`).
#[must_use]
pub fn window_words(w: &IdleWindow) -> String {
    let whole = w.start_hour == w.end_hour;
    match (w.days.as_str(), whole) {
        ("every day", true) => "around the clock".to_owned(),
        ("weekend", true) => "all weekend".to_owned(),
        ("weekdays", true) => "all day on weekdays".to_owned(),
        ("every day", false) => format!("{:02}:00–{:02}:00 every day", w.start_hour, w.end_hour),
        (days, false) => format!("{:02}:00–{:02}:00 on {days}", w.start_hour, w.end_hour),
        (days, true) => format!("all day {days}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::DeviceAcc;
    use crate::sample::Sample;
    use crate::settings::ProfileSettings;

    /// An hour at one reading per minute: engine `util`, SM, DRAM and tensor activity.
    fn stats(util: f32, sm: f32, dram: f32, tensor: Option<f32>) -> DeviceStats {
        let at = |m: i64| Sample {
            util_pct: Some(util),
            sm_active_pct: Some(sm),
            dram_active_pct: Some(dram),
            tensor_active_pct: tensor,
            ..Sample::at(m * 60_000)
        };
        let st = ProfileSettings::default();
        let mut acc = DeviceAcc::new(&at(0));
        for m in 1..=60 {
            let _ = acc.push(&at(m), &st);
        }
        acc.finish(&st, &jiff::tz::TimeZone::UTC)
    }

    fn hint(s: &DeviceStats) -> Bottleneck {
        bottleneck(s, Class::Healthy, &BottleneckRules::default(), None)
    }

    #[test]
    fn bottleneck_rules_and_their_evidence() {
        let b = hint(&stats(90.0, 30.0, 20.0, Some(5.0)));
        assert_eq!(b.kind, BottleneckKind::LaunchBound, "{}", b.evidence);
        let b = hint(&stats(90.0, 60.0, 70.0, Some(10.0)));
        assert_eq!(b.kind, BottleneckKind::MemoryBound, "{}", b.evidence);
        let b = hint(&stats(90.0, 80.0, 30.0, Some(50.0)));
        assert_eq!(b.kind, BottleneckKind::ComputeBound, "{}", b.evidence);
        assert!(b.evidence.contains("tensor pipes 50 %"), "{}", b.evidence);
    }

    #[test]
    fn unknown_tensor_activity_is_never_read_as_zero() {
        // DRAM-heavy with no tensor reading: it was "memory-bound, tensor pipes 0 %"; the
        // tensor pipes may be the busy ones, so the verdict is unknown and says why.
        let b = hint(&stats(90.0, 60.0, 70.0, None));
        assert_eq!(b.kind, BottleneckKind::Unknown);
        assert!(
            b.evidence.contains("no tensor-pipe activity"),
            "{}",
            b.evidence
        );
        // SM-heavy without DRAM pressure is compute-bound either way, and says tensor unknown.
        let b = hint(&stats(90.0, 85.0, 20.0, None));
        assert_eq!(b.kind, BottleneckKind::ComputeBound);
        assert!(
            b.evidence.contains("tensor pipes unknown"),
            "{}",
            b.evidence
        );
    }

    #[test]
    fn other_thresholds_give_other_verdicts() {
        let s = stats(90.0, 60.0, 70.0, Some(10.0));
        let strict = BottleneckRules {
            memory_dram_min_pct: 80.0,
            compute_sm_min_pct: 55.0,
            ..BottleneckRules::default()
        };
        assert_eq!(
            bottleneck(&s, Class::Healthy, &strict, None).kind,
            BottleneckKind::ComputeBound
        );
    }

    fn how(idle: impl Fn(usize, usize) -> bool) -> Vec<HowBin> {
        (0..168)
            .map(|b| HowBin {
                covered_hours: 1.0,
                util_hours: 1.0,
                util_pct_hours: 0.0,
                idle_hours: if idle(b / 24, b % 24) { 1.0 } else { 0.0 },
            })
            .collect()
    }

    #[test]
    fn nights_and_weekends_in_words() {
        let bins = how(|d, h| d >= 5 || !(8..19).contains(&h));
        let (w, per_week) = idle_windows(&bins, 90.0);
        assert_eq!(
            describe(&w).as_deref(),
            Some("idle 19:00–08:00 on weekdays and all weekend")
        );
        assert!((per_week - (5.0 * 13.0 + 48.0)).abs() < 1e-9);
    }

    #[test]
    fn every_night_and_always() {
        let (w, _) = idle_windows(&how(|_, h| h < 6), 90.0);
        assert_eq!(describe(&w).as_deref(), Some("idle 00:00–06:00 every day"));
        let w = vec![
            IdleWindow {
                days: "weekdays".into(),
                start_hour: 15,
                end_hour: 14,
            },
            IdleWindow {
                days: "weekend".into(),
                start_hour: 0,
                end_hour: 0,
            },
        ];
        assert_eq!(
            describe(&w).as_deref(),
            Some("busy only 14:00–15:00 on weekdays")
        );
        let w = vec![IdleWindow {
            days: "every day".into(),
            start_hour: 22,
            end_hour: 20,
        }];
        assert_eq!(
            describe(&w).as_deref(),
            Some("busy only 20:00–22:00 every day")
        );
        let (w, _) = idle_windows(&how(|_, _| true), 90.0);
        assert_eq!(describe(&w).as_deref(), Some("idle around the clock"));
        let (w, _) = idle_windows(&how(|_, _| false), 90.0);
        assert_eq!(describe(&w), None);
    }

    /// A whole day reads as words, never `00:00–00:00` (the dashboard printed "weekend
    /// 00:00–00:00").
    #[test]
    fn windows_in_words() {
        let w = |days: &str, start_hour: u8, end_hour: u8| IdleWindow {
            days: days.into(),
            start_hour,
            end_hour,
        };
        assert_eq!(window_words(&w("weekend", 0, 0)), "all weekend");
        assert_eq!(window_words(&w("every day", 0, 0)), "around the clock");
        assert_eq!(
            window_words(&w("weekdays", 19, 8)),
            "19:00–08:00 on weekdays"
        );
        assert_eq!(window_words(&w("every day", 1, 5)), "01:00–05:00 every day");
    }
}
