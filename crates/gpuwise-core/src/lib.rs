//! # gpuwise-core
//!
//! The pure engine of gpuwise. Data flows one way through its modules:
//!
//! ```text
//! sample ──► profile ──► diagnose ──► report
//!   (typed      (streaming,     (class,        (fleet summary, groups,
//!    readings)   mergeable       bottleneck,    prices, warnings: the
//!                accumulators)   idle windows)  model every renderer reads)
//!                    ▲
//!     catalog (GPU specs, instances, prices), gpu (names), price (rules)
//! ```
//!
//! Contract: nothing here touches files, the network, the clock or the command line. Inputs are
//! plain typed values, outputs are plain typed values, and every function that can be pure is.
//! Readers live in `gpuwise-sources`, renderers in `gpuwise-render`, the binary in `gpuwise`.
//!
//! A missing reading is `None`, never `0`. Time is UTC milliseconds since the Unix epoch
//! ([`sample::EpochMs`]); a local time zone is only applied where a human reads hours
//! (hour-of-week patterns, idle windows in words).

pub mod demand;
pub mod diagnose;
pub mod duration;
pub mod hist;
pub mod price;
pub mod profile;
pub mod records;
pub mod report;
pub mod sample;
pub mod settings;
pub mod teams;

pub use sample::{
    DAY_MS, DeviceInfo, DeviceKey, EpochMs, HOUR_MS, MIB_BYTES, Sample, WorkloadKind, hours_of_ms,
};
