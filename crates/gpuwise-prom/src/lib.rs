//! # gpuwise-prom
//!
//! Fleet telemetry from a Prometheus-compatible store (Prometheus, Thanos, Mimir, Cortex,
//! VictoriaMetrics):
//!
//! | module | job |
//! |---|---|
//! | [`api`] | Prometheus HTTP API responses (vector, matrix, scalar) into typed series |
//! | [`client`] | the HTTP client: auth, headers, CA, retries, chunking, credentials redacted |
//! | [`plan`] | the pushdown's PromQL as text (pure): the window's points and their hours, thresholds in a metric's unit, the idle-episode expressions |
//! | [`pushdown`] | PromQL window and hourly aggregates → the same per-device statistics the file readers give; `--raw` re-encodes pulled samples for the DCGM reader |
//!
//! An edge (it talks to a network); it builds on `gpuwise-sources` for the DCGM reader and the
//! skip tally, and hands `gpuwise-core` the statistics.

pub mod api;
pub mod client;
pub mod plan;
pub mod pushdown;
