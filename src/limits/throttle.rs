//! Rates that clients cannot push the server past: log lines they cause, and the bytes of large replies.
//!
//! Without a bound, a client sending malformed frames, unsigned requests or audited requests (each a
//! line) over and over could make the server write its log as fast as it sends, and fill the disk it is
//! on: lines over the rate are counted, not written. And clients reading 1.3 MB topic lists as fast as
//! they can took gigabytes a second through the kernel, on the cores that answer lookups: large replies
//! are paced (`largeReplyBytesPerSecond`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long an accept loop pauses after a failed accept (out of descriptors and the like): it neither spins
/// nor writes more than a line each time, and the next accept may work.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Logs a failed accept on `port` and pauses [`ACCEPT_RETRY`].
pub async fn after_failed_accept(port: &'static str, error: &std::io::Error) {
    tracing::warn!(port, error = %error, "accept failed");
    tokio::time::sleep(ACCEPT_RETRY).await;
}

/// A token bucket: `per_second` lines on average, `burst` at once.
pub struct LineBudget {
    per_second: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
    pub dropped: AtomicU64,
}

impl LineBudget {
    pub fn new(per_second: u32, burst: u32) -> Self {
        LineBudget {
            per_second: f64::from(per_second),
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
            dropped: AtomicU64::new(0),
        }
    }

    /// Whether one more line may be written now; a line that may not is counted.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (tokens, last) = &mut *state;
        *tokens = (*tokens + now.saturating_duration_since(*last).as_secs_f64() * self.per_second).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            return true;
        }
        drop(state);
        self.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Warnings and information about what a client did (a malformed frame, a refused signature, a large
/// frame too slow): 50 lines a second, 500 at once.
pub fn client_lines() -> &'static LineBudget {
    static LINES: std::sync::OnceLock<LineBudget> = std::sync::OnceLock::new();
    LINES.get_or_init(|| LineBudget::new(50, 500))
}

/// `tracing::warn!`/`info!` of a line a client caused, within [`client_lines`].
macro_rules! client_log {
    ($level:ident, $($arg:tt)*) => {
        if $crate::limits::throttle::client_lines().allow() {
            tracing::$level!($($arg)*);
        }
    };
}
pub(crate) use client_log;

/// Bytes a second, all callers together, with a second's worth at once (GCRA: each call moves one
/// theoretical arrival time forward by what it takes, and waits while that runs more than a second ahead).
pub struct BytePacer {
    per_second: f64,
    arrival: Mutex<tokio::time::Instant>,
}

impl BytePacer {
    /// `per_second` 0 paces nothing.
    pub fn new(per_second: u64) -> Self {
        BytePacer { per_second: per_second as f64, arrival: Mutex::new(tokio::time::Instant::now()) }
    }

    /// Waits until `bytes` more may go.
    pub async fn take(&self, bytes: usize) {
        if self.per_second == 0.0 {
            return;
        }
        let now = tokio::time::Instant::now();
        let cost = std::time::Duration::from_secs_f64(bytes as f64 / self.per_second);
        let go_at = {
            let mut arrival = self.arrival.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let start = (*arrival).max(now);
            *arrival = start + cost;
            *arrival - std::time::Duration::from_secs(1)
        };
        if go_at > now {
            tokio::time::sleep_until(go_at).await;
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    /// A second's worth at once, then the rate (on the paused clock).
    #[tokio::test(start_paused = true)]
    async fn bytes_are_paced_after_a_seconds_worth() {
        let pacer = BytePacer::new(1000);
        let started = tokio::time::Instant::now();
        pacer.take(1000).await;
        assert_eq!(started.elapsed(), std::time::Duration::ZERO, "a second's worth at once");
        for _ in 0..4 {
            pacer.take(500).await;
        }
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(2), "then 1,000 bytes a second");
        let unpaced = tokio::time::Instant::now();
        BytePacer::new(0).take(usize::MAX).await;
        assert_eq!(unpaced.elapsed(), std::time::Duration::ZERO, "0 paces nothing");
    }

    #[test]
    fn a_burst_then_the_rate() {
        let budget = LineBudget::new(10, 5);
        let start = budget.state.lock().unwrap().1;
        assert_eq!((0..20).filter(|_| budget.allow_at(start)).count(), 5, "the burst, then nothing at once");
        assert_eq!(budget.dropped.load(Ordering::Relaxed), 15);
        let later = start + std::time::Duration::from_millis(350);
        assert_eq!((0..20).filter(|_| budget.allow_at(later)).count(), 3, "a third of a second's worth");
        let much_later = start + std::time::Duration::from_secs(60);
        assert_eq!((0..20).filter(|_| budget.allow_at(much_later)).count(), 5, "never more than the burst");
    }
}
