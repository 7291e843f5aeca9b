//! # gpuwise-sources
//!
//! Readers that turn telemetry bytes into samples and fold them into a
//! [`gpuwise_core::profile::Profile`]:
//!
//! | module | format |
//! |---|---|
//! | [`smi`] | `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]` |
//! | [`dmon`] | `nvidia-smi dmon [-o DT]` |
//! | [`dcgm`] | DCGM exporter scrapes (Prometheus text exposition) |
//! | [`generic`] | any CSV with a column map |
//!
//! [`ingest::read_all`] expands and opens inputs ([`input`]: files, directories, globs, stdin,
//! gzip and zstd), detects each format, parses line-oriented inputs in parallel blocks, and
//! merges everything. Contract: memory is bounded by the number of devices (per DCGM file, by
//! that file's samples); a bad line or value is a counted skip in [`diag::Tally`], never a
//! panic and never a silent zero; a whole unreadable input is an [`diag::IngestError`].

pub mod dcgm;
pub mod diag;
pub mod dmon;
pub mod fuzzing;
pub mod generic;
pub mod ingest;
pub mod input;
pub mod lines;
pub mod origin;
pub mod smi;
pub mod time;
pub mod value;

pub use diag::{IngestError, Tally};
pub use ingest::{Format, Ingested, ReadOptions, read_all};
pub use input::{Input, expand};
pub use origin::Origin;
