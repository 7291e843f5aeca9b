//! # gpuwise-record
//!
//! `gpuwise record`: sample NVML every interval, per GPU and MIG instance, and write the
//! nvidia-smi CSV that `gpuwise report` reads, a per-process log with each process's owner
//! (container, pod), and optionally an OpenMetrics endpoint. For machines with no DCGM and no
//! Prometheus.
//!
//! Flow: a [`Sampler`] (NVML, or a test double) → [`Snapshot`] → [`logs`] (text) → [`writer::Log`]
//! (append, rotate, compress, fsync) and [`exposition::Exposition`] (the latest readings).
//! The loop ([`record`]) keeps ticks on a fixed schedule, flushes every `flush` interval, and
//! stops at the duration or when told to (a signal), flushing before it returns.

pub mod cgroup;
pub mod exposition;
pub mod logs;
pub mod reading;
pub mod sampler;
pub mod writer;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub use reading::{GpuReading, Mig, Owner, ProcessReading, Snapshot};
pub use sampler::{NvmlSampler, SampleError, Sampler};
pub use writer::{Recovered, Rotation, WriteError};

/// How to record.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Output directory: `HOST.csv` (GPUs) and `processes/HOST.csv`.
    pub out: PathBuf,
    /// Host name, the stem of both logs.
    pub host: String,
    pub interval: Duration,
    pub flush: Duration,
    /// Stop after this long; `None` runs until told to stop.
    pub duration: Option<Duration>,
    pub rotation: Rotation,
    /// Also write the per-process log.
    pub processes: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub ticks: u64,
    /// Ticks whose sampling failed as a whole (the last error is kept).
    pub failed_ticks: u64,
    pub last_error: Option<String>,
    /// Ticks skipped because sampling fell behind the schedule.
    pub late_ticks: u64,
    pub gpu_rows: u64,
    pub process_rows: u64,
    /// Files rotated (and compressed) by this run.
    pub rotated: usize,
    /// What opening the logs repaired.
    pub recovered: Vec<(PathBuf, Recovered)>,
    /// Why the run ended.
    pub stopped_by_signal: bool,
}

/// The recorder failed: a log could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot write the log {0}")]
    Write(#[from] WriteError),
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Record until `settings.duration` has passed or a message arrives on `stop`.
///
/// Each tick samples once, appends its rows, and updates `exposition`. A tick whose sampling
/// fails is counted and skipped (the driver may come back); a log that cannot be written ends
/// the run with an error.
///
/// # Errors
/// [`RecordError::Write`] when a log cannot be opened, written or flushed.
pub fn record(
    sampler: &mut dyn Sampler,
    settings: &Settings,
    stop: &Receiver<()>,
    exposition: Option<&exposition::Shared>,
) -> Result<Summary, RecordError> {
    let mut summary = Summary::default();
    let mut logs = Logs::open(settings, &mut summary)?;
    let started = Instant::now();
    let mut next = started;
    let mut last_flush = started;
    loop {
        logs.tick(sampler, exposition, &mut summary)?;
        if last_flush.elapsed() >= settings.flush {
            logs.flush()?;
            last_flush = Instant::now();
        }
        // The next tick on the fixed schedule; ticks missed while sampling was slow are
        // skipped (and counted), not run in a burst.
        next += settings.interval;
        let now = Instant::now();
        while next <= now {
            next += settings.interval;
            summary.late_ticks += 1;
        }
        if let Some(d) = settings.duration
            && started + d <= next
        {
            // The last tick is at or before the end; wait out the rest, then stop.
            let end = started + d;
            if stop
                .recv_timeout(end.saturating_duration_since(now))
                .is_ok()
            {
                summary.stopped_by_signal = true;
            }
            break;
        }
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(()) => {
                summary.stopped_by_signal = true;
                break;
            }
            Err(RecvTimeoutError::Timeout) => {}
            // Nobody can tell us to stop any more: keep to the schedule.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        }
    }
    summary.rotated += logs.finish()?;
    Ok(summary)
}

/// The GPU log and, when asked, the process log, with reusable text buffers.
struct Logs {
    gpu: writer::Log,
    processes: Option<writer::Log>,
    text: String,
    bytes: Vec<u8>,
}

impl Logs {
    /// Open (and repair) both logs, noting what was repaired in `summary`.
    fn open(settings: &Settings, summary: &mut Summary) -> Result<Self, RecordError> {
        let now = now_ms();
        let (gpu, rec) = writer::Log::open(
            &settings.out,
            &settings.host,
            logs::GPU_HEADER,
            settings.rotation,
            now,
        )?;
        summary.recovered.push((gpu.path(), rec));
        let processes = if settings.processes {
            let (log, rec) = writer::Log::open(
                &settings.out.join("processes"),
                &settings.host,
                logs::PROCESS_HEADER,
                settings.rotation,
                now,
            )?;
            summary.recovered.push((log.path(), rec));
            Some(log)
        } else {
            None
        };
        Ok(Self {
            gpu,
            processes,
            text: String::new(),
            bytes: Vec::new(),
        })
    }

    /// Sample once and append the rows; a failed sample is counted, not fatal.
    fn tick(
        &mut self,
        sampler: &mut dyn Sampler,
        exposition: Option<&exposition::Shared>,
        summary: &mut Summary,
    ) -> Result<(), RecordError> {
        let at_ms = now_ms();
        summary.ticks += 1;
        let (gpus, processes) = match sampler.sample() {
            Ok(x) => x,
            Err(e) => {
                summary.failed_ticks += 1;
                summary.last_error = Some(e.to_string());
                return Ok(());
            }
        };
        let snap = Snapshot {
            at_ms,
            gpus,
            processes,
        };
        self.text.clear();
        logs::gpu_rows(&snap, &mut self.text);
        self.gpu.append(self.text.as_bytes(), at_ms)?;
        summary.gpu_rows += snap.gpus.len() as u64;
        if let Some(log) = self.processes.as_mut() {
            self.bytes.clear();
            logs::process_rows(&snap, &mut self.bytes);
            log.append(&self.bytes, at_ms)?;
            summary.process_rows += snap.processes.len() as u64;
        }
        if let Some(e) = exposition
            && let Ok(e) = e.write()
        {
            e.update(&snap);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RecordError> {
        self.gpu.flush()?;
        if let Some(log) = self.processes.as_mut() {
            log.flush()?;
        }
        Ok(())
    }

    /// Flush, wait for compressions; the number of files rotated.
    fn finish(self) -> Result<usize, RecordError> {
        let mut rotated = self.gpu.finish()?;
        if let Some(log) = self.processes {
            rotated += log.finish()?;
        }
        Ok(rotated)
    }
}
