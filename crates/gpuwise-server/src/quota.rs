//! A cap per client on distinct windows asked of a store: every window not already answered
//! is a new query against Prometheus (or Mimir, VictoriaMetrics …), and every distinct
//! `?last=`/`?start=` value is a window, so one client stepping through values could keep the
//! store busy. Each client (by address) may start a set number of distinct windows (16 by
//! default, `--store-windows-per-minute`) in any minute; asking again for one of those, or for
//! a window already answered, is not counted.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

const MINUTE: Duration = Duration::from_secs(60);

/// The windows one client asked, oldest first, with when.
type Asked = VecDeque<(Instant, String)>;

/// The windows each client asked of the store in the last minute.
pub(crate) struct StoreQuota {
    per_minute: usize,
    seen: Mutex<HashMap<Option<IpAddr>, Asked>>,
}

impl StoreQuota {
    /// `per_minute` distinct windows per client (at least one).
    pub(crate) fn new(per_minute: usize) -> Self {
        Self {
            per_minute: per_minute.max(1),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `client` may ask the store for window `key` at `now`; else the seconds until it
    /// may.
    pub(crate) fn admit(&self, client: Option<IpAddr>, key: &str, now: Instant) -> Result<(), u64> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget what is older than a minute, and clients with nothing left.
        seen.retain(|_, asked| {
            while asked
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) >= MINUTE)
            {
                asked.pop_front();
            }
            !asked.is_empty()
        });
        let asked = seen.entry(client).or_default();
        if asked.iter().any(|(_, k)| k == key) {
            return Ok(());
        }
        if asked.len() >= self.per_minute {
            let oldest = asked.front().map_or(now, |(at, _)| *at);
            let wait = MINUTE.saturating_sub(now.duration_since(oldest));
            return Err(wait.as_secs().max(1));
        }
        asked.push_back((now, key.to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::StoreQuota;
    use std::time::{Duration, Instant};

    #[test]
    fn distinct_windows_per_client_per_minute() {
        const PER_MINUTE: usize = 16;
        let q = StoreQuota::new(PER_MINUTE);
        let t0 = Instant::now();
        let a = Some("10.0.0.1".parse().expect("ip"));
        let b = Some("10.0.0.2".parse().expect("ip"));
        for i in 0..PER_MINUTE {
            assert_eq!(q.admit(a, &format!("w{i}"), t0), Ok(()));
        }
        // A new window is refused for a minute from the first; one already asked is not.
        assert_eq!(q.admit(a, "w-new", t0 + Duration::from_secs(20)), Err(40));
        assert_eq!(q.admit(a, "w3", t0 + Duration::from_secs(20)), Ok(()));
        // Another client has its own count.
        assert_eq!(q.admit(b, "w-new", t0 + Duration::from_secs(20)), Ok(()));
        // A minute on, the first client may again.
        assert_eq!(q.admit(a, "w-new", t0 + Duration::from_secs(61)), Ok(()));
    }
}
