//! The run's clock: the system's, unless `GPUWISE_NOW` pins it (RFC 3339) for reproducible
//! output. With `GPUWISE_CLOCK_RATE` (a positive number) as well, the pinned clock moves that
//! many times faster than real time from the process's first reading: how tests run a server
//! across days. The only place the binary reads the time of day.

use std::sync::OnceLock;
use std::time::Instant;

use anyhow::Context as _;

/// When the clock was first read, for a moving pinned clock.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> anyhow::Result<i64> {
    let started = *STARTED.get_or_init(Instant::now);
    match std::env::var("GPUWISE_NOW") {
        Ok(s) => {
            let pinned = s
                .parse::<jiff::Timestamp>()
                .with_context(|| format!("GPUWISE_NOW `{s}` is not an RFC 3339 time"))?
                .as_millisecond();
            let rate = match std::env::var("GPUWISE_CLOCK_RATE") {
                Ok(r) => r
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite() && *r > 0.0)
                    .with_context(|| {
                        format!("GPUWISE_CLOCK_RATE `{r}` is not a positive number")
                    })?,
                Err(_) => return Ok(pinned),
            };
            let moved = started.elapsed().as_secs_f64() * 1000.0 * rate;
            Ok(pinned.saturating_add(moved as i64))
        }
        Err(_) => Ok(jiff::Timestamp::now().as_millisecond()),
    }
}
