//! Analyses by window: the most recently used kept, a window asked for by several requests at
//! once computed once for all of them, and at most a bounded number of analyses running at a
//! time. (Before: every cold window ran on its own blocking thread, up to 512 at once, the
//! same window as often as it was asked, and the cache was cleared whole at 32 entries.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Instant;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One window's answer, shared by every request that waits for it.
type Cell<T, E> = Arc<OnceLock<Result<Arc<T>, E>>>;

struct Entry<T> {
    made: Instant,
    used: u64,
    value: Arc<T>,
}

/// The analyses of windows (see the module docs).
pub(crate) struct Windows<T, E> {
    capacity: usize,
    max_running: usize,
    entries: Mutex<HashMap<String, Entry<T>>>,
    inflight: Mutex<HashMap<String, Cell<T, E>>>,
    running: Mutex<usize>,
    turn: Condvar,
    tick: AtomicU64,
    computed: AtomicU64,
}

impl<T, E: Clone> Windows<T, E> {
    /// Keep `capacity` answers; run `max_running` analyses at once.
    pub(crate) fn new(capacity: usize, max_running: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            max_running: max_running.max(1),
            entries: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            running: Mutex::new(0),
            turn: Condvar::new(),
            tick: AtomicU64::new(0),
            computed: AtomicU64::new(0),
        }
    }

    /// Analyses computed so far (answers from the cache or shared with another request are
    /// not).
    pub(crate) fn computed(&self) -> u64 {
        self.computed.load(Ordering::Relaxed)
    }

    /// Answers kept.
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// The kept answer of `key`, if `fresh` says its time of making is still good.
    /// The answer kept for `key` when still fresh (marked used), without computing one.
    pub(crate) fn peek(&self, key: &str, fresh: &dyn Fn(Instant) -> bool) -> Option<Arc<T>> {
        self.get(key, fresh)
    }

    fn get(&self, key: &str, fresh: &dyn Fn(Instant) -> bool) -> Option<Arc<T>> {
        let mut entries = lock(&self.entries);
        let e = entries.get_mut(key).filter(|e| fresh(e.made))?;
        e.used = self.tick.fetch_add(1, Ordering::Relaxed);
        Some(e.value.clone())
    }

    /// Keep `value` under `key`, dropping the least recently used answer beyond the capacity.
    fn put(&self, key: &str, value: Arc<T>) {
        let mut entries = lock(&self.entries);
        let used = self.tick.fetch_add(1, Ordering::Relaxed);
        entries.insert(
            key.to_owned(),
            Entry {
                made: Instant::now(),
                used,
                value,
            },
        );
        while entries.len() > self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
    }

    /// Wait for a turn to analyse, and hold it until the guard drops.
    fn turn(&self) -> Turn<'_, T, E> {
        let mut running = lock(&self.running);
        while *running >= self.max_running {
            running = self
                .turn
                .wait(running)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *running += 1;
        Turn(self)
    }

    /// The answer of `key`: kept, or being computed for another request (then waited for),
    /// or computed here by `compute` in a turn.
    pub(crate) fn get_or_compute(
        &self,
        key: &str,
        fresh: &dyn Fn(Instant) -> bool,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(v) = self.get(key, fresh) {
            return Ok(v);
        }
        let cell: Cell<T, E> = lock(&self.inflight)
            .entry(key.to_owned())
            .or_default()
            .clone();
        let answer = cell
            .get_or_init(|| {
                let _turn = self.turn();
                // Computed by a request that finished while this one waited for its turn.
                if let Some(v) = self.get(key, fresh) {
                    return Ok(v);
                }
                let v = Arc::new(compute()?);
                self.computed.fetch_add(1, Ordering::Relaxed);
                self.put(key, v.clone());
                Ok(v)
            })
            .clone();
        let mut inflight = lock(&self.inflight);
        if inflight.get(key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            inflight.remove(key);
        }
        answer
    }
}

/// A turn to analyse, given back on drop.
struct Turn<'a, T, E>(&'a Windows<T, E>);

impl<T, E> Drop for Turn<'_, T, E> {
    fn drop(&mut self) {
        *lock(&self.0.running) -= 1;
        self.0.turn.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_least_recently_used_answer_goes_first() {
        let w: Windows<u32, ()> = Windows::new(2, 1);
        let always = |_: Instant| true;
        for (k, v) in [("a", 1), ("b", 2)] {
            assert_eq!(w.get_or_compute(k, &always, || Ok(v)).map(|x| *x), Ok(v));
        }
        // Use a, then add c: b goes.
        assert!(w.get("a", &always).is_some());
        assert_eq!(w.get_or_compute("c", &always, || Ok(3)).map(|x| *x), Ok(3));
        assert!(w.get("a", &always).is_some() && w.get("b", &always).is_none());
        assert_eq!((w.len(), w.computed()), (2, 3));
        // A stale answer is made again.
        assert_eq!(
            w.get_or_compute("a", &|_| false, || Ok(9)).map(|x| *x),
            Ok(9)
        );
        assert_eq!(w.computed(), 4);
    }

    #[test]
    fn one_window_asked_at_once_is_computed_once_and_analyses_take_turns() {
        let w: Arc<Windows<u32, String>> = Arc::new(Windows::new(8, 2));
        let running = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..24)
            .map(|i| {
                let (w, running, most) = (w.clone(), running.clone(), most.clone());
                std::thread::spawn(move || {
                    // Sixteen ask for one window, eight for windows of their own.
                    let key = if i < 16 {
                        "same".to_owned()
                    } else {
                        format!("own{i}")
                    };
                    w.get_or_compute(&key, &|_| true, || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(7)
                    })
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().expect("thread").map(|x| *x), Ok(7));
        }
        assert_eq!(
            w.computed(),
            9,
            "the shared window once, the eight others once each"
        );
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "at most two analyses at once"
        );
        // A failure is everyone's answer for that request, and not kept.
        let w: Windows<u32, String> = Windows::new(8, 1);
        assert_eq!(
            w.get_or_compute("x", &|_| true, || Err("no".into())),
            Err("no".into())
        );
        assert_eq!(w.len(), 0);
    }
}
