//! # Jobs and runs, not only devices
//!
//! Pure: scheduler and run-tracker records in, per-job figures out. Sources of records are
//! text this crate parses (`sacct --parsable2` in [`sacct`], MLflow's REST answers and CSV
//! exports in [`mlflow`], kube-state-metrics series in [`kube`]); the telemetry reaches the
//! [`join::Join`] as a tap on the report's own reading (see `gpuwise_core::profile::Tap`); the
//! [`report`] adds prices, flags and unit costs; [`view`] draws it. Fetching (running `sacct`,
//! calling MLflow or Prometheus) is the binary's.

pub mod digest;
pub mod flags;
pub mod join;
pub mod kube;
pub mod mlflow;
pub mod record;
pub mod report;
pub mod sacct;
pub mod schedule;
pub mod view;

pub use join::{Join, JoinSettings, Joined};
pub use record::{JobRecord, JobState, Source};
pub use report::{Context, JobSettings, JobsReport};
