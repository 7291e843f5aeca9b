//! # gpuwise-pack: fit work onto GPUs and run job queues at the lowest cost
//!
//! Pure (no files, clock or command line).
//!
//! - [`jobs`]: job lists (the Microsoft ITP traces, a generic CSV with priorities,
//!   interruptibility and allowed pools) and pools (`NAME=CAPACITY@PRICE`).
//! - [`schedule`]: a job queue run over pools by a policy (FIFO, EDF, priority with preemption
//!   of interruptible jobs, EASY backfilling, cost-aware), event by event; deadlines, job
//!   completion times, GPU-hours and dollars per pool, and a lower bound on the cost
//!   (`gpuwise.schedule/v1`).

pub mod jobs;
pub mod schedule;
