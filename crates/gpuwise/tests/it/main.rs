//! Integration tests: the real `gpuwise` binary on readable fixtures, real third-party
//! captures (`../shared/data`), generated fleets with planted truth, and a bad-input corpus.

#![allow(clippy::print_stderr)] // a skip is reported on stderr, as the test harness does

mod advise;
mod bad_input;
mod browser;
mod catalog;
mod cli;
mod common;
mod deploy;
mod grafana;
mod graph;
mod history;
mod hostile;
mod jobs;
mod kube;
mod ledger;
mod messy;
mod mlflow;
mod pack;
mod plan;
mod planted;
mod prometheus;
mod pushdown_diff;
mod real_data;
mod rules;
mod schedule;
mod serve;
mod simulate;
mod simulate_serve;
mod slurm;
mod step_model;
mod widths;
