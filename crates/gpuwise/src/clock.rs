//! The run's clock: the system's, unless `GPUWISE_NOW` pins it (RFC 3339) for reproducible
//! output. The only place the binary reads the time of day.

use anyhow::Context as _;

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> anyhow::Result<i64> {
    match std::env::var("GPUWISE_NOW") {
        Ok(s) => Ok(s
            .parse::<jiff::Timestamp>()
            .with_context(|| format!("GPUWISE_NOW `{s}` is not an RFC 3339 time"))?
            .as_millisecond()),
        Err(_) => Ok(jiff::Timestamp::now().as_millisecond()),
    }
}
