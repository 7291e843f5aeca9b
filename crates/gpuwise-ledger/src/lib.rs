//! # gpuwise-ledger: the money
//!
//! Pure (no files, network, clock or command line): the binary reads the bytes and the clock
//! and hands them here.
//!
//! - [`focus`]: FinOps FOCUS 1.0–1.2 bills (CSV, Parquet) → [`focus::BillRow`]s, streamed.
//! - [`bill`]: rows → the bill's GPU compute per resource (instance types → GPUs).
//! - [`observed`]: profiles → GPU-hours per host and hour, per device and hour.
//! - [`allocate`]: device-hours → owners → showback or chargeback by policy, unit costs, month
//!   to date and month-end forecast (`gpuwise.allocation/v1`).
//! - [`export`]: the allocation as FOCUS 1.2 rows with `x_` columns.
//! - [`check`]: policy rules (budgets, idle share, notebooks, long jobs, spot share, stale
//!   telemetry) → violations with evidence (`gpuwise.check/v1`); [`notify`]: the message.
//! - [`reconcile`]: bill × telemetry → unmonitored, unbilled, billed-not-reporting, prices, teams
//!   (`gpuwise.reconcile/v1`).

pub mod allocate;
pub mod bill;
pub mod check;
pub mod export;
pub mod focus;
pub mod notify;
pub mod observed;
mod pages;
pub mod reconcile;
pub mod rules;
pub mod view;
