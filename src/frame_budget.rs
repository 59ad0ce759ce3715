//! The large-frame budget: memory for requests over 64 KiB, shared by all connections.
//!
//! Any connection may send a frame up to `frameMaxLength` (16 MiB), as with Java: a default Java broker with
//! tens of thousands of topics sends its whole topic table in one REGISTER_BROKER, over a fresh connection.
//! What bounds memory is this budget instead of a per-connection cap. A large frame is buffered only once the
//! budget has room for all of it, and until then its connection is not read from (TCP pushes back on the
//! sender); the room is held until the frame's request has been processed, so the budget bounds the large
//! requests being received, parsed and applied at once (by default one: a 15 MB registration's parse and
//! the snapshot it leads to are what peak memory is made of). A large frame must be complete within
//! `largeFrameTimeoutMillis` of its length prefix, waiting included, or its connection is closed: connections
//! that announce big frames and send them slowly can neither hold more than the budget nor hold it for long.
//! Small frames (every lookup, heartbeat and admin request) never touch the budget, and neither do
//! connections over which a broker has registered: a flood of large frames must not keep known brokers from
//! re-registering (refusing one would close its connection, which removes the broker), and those
//! connections are only as many as the brokers.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// Frames up to this length (prefix included) are buffered without asking the budget.
pub const LARGE_FRAME: usize = 64 * 1024;

/// An empty buffer with room for a large frame of `len` bytes, its pages already faulted in. The room is
/// fresh memory, and faulting it in (the kernel zeroes every page) took 30-40 ms for a 15 MB frame on this
/// project's machines: paid by the worker thread copying the frame in, it held every lookup queued there.
/// The blocking pool pays instead.
pub async fn large_frame_buffer(len: usize) -> bytes::BytesMut {
    let prefaulted = tokio::task::spawn_blocking(move || {
        let mut buf = bytes::BytesMut::with_capacity(len);
        buf.resize(len, 0);
        buf.clear();
        buf
    });
    prefaulted.await.unwrap_or_else(|_| bytes::BytesMut::with_capacity(len))
}

/// Why a connection's large frame was refused; the connection is closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LargeFrameError {
    #[error("no room in the large-frame budget for a frame of {len} bytes within {timeout_ms} ms")]
    NoRoom { len: usize, timeout_ms: u64 },
    #[error("frame of {len} bytes not complete within {timeout_ms} ms of its length prefix")]
    TooSlow { len: usize, timeout_ms: u64 },
}

/// Shared by every connection of a server.
#[derive(Clone)]
pub struct FrameBudget {
    room: Arc<Semaphore>,
    capacity: usize,
    metrics: Arc<Metrics>,
}

/// Room held for one large frame; given back when dropped.
pub struct Reservation {
    _permit: OwnedSemaphorePermit,
    len: usize,
    metrics: Arc<Metrics>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.metrics.large_frame_bytes.fetch_sub(self.len as i64, Ordering::Relaxed);
    }
}

impl FrameBudget {
    /// The config's validation keeps `capacity` at least `frameMaxLength`, so that one largest frame always
    /// fits; a frame larger than the budget would take all of it.
    pub fn new(capacity: usize, metrics: Arc<Metrics>) -> Self {
        let capacity = capacity.min(Semaphore::MAX_PERMITS);
        FrameBudget { room: Arc::new(Semaphore::new(capacity)), capacity, metrics }
    }

    /// Waits, in arrival order, until there is room for `len` bytes. Callers bound the wait with the frame's
    /// deadline.
    pub async fn reserve(&self, len: usize) -> Reservation {
        let permits = u32::try_from(len.min(self.capacity)).unwrap_or(u32::MAX);
        let Ok(permit) = self.room.clone().acquire_many_owned(permits).await else {
            // The semaphore is never closed.
            return std::future::pending().await;
        };
        self.metrics.large_frame_bytes.fetch_add(len as i64, Ordering::Relaxed);
        Reservation { _permit: permit, len, metrics: self.metrics.clone() }
    }

    /// Counts a refused large frame (its connection is being closed).
    pub fn count_refusal(&self, error: &LargeFrameError) {
        let counter = match error {
            LargeFrameError::NoRoom { .. } => &self.metrics.large_frames_no_room,
            LargeFrameError::TooSlow { .. } => &self.metrics.large_frames_too_slow,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_in_order_and_gives_room_back() {
        let metrics = Arc::new(Metrics::default());
        let budget = FrameBudget::new(100, metrics.clone());
        let first = budget.reserve(60).await;
        assert_eq!(metrics.large_frame_bytes.load(Ordering::Relaxed), 60);
        let waiting = tokio::time::timeout(Duration::from_secs(1), budget.reserve(60)).await;
        assert!(waiting.is_err(), "no room while the first holds 60 of 100");
        let b = budget.clone();
        let second = tokio::spawn(async move { b.reserve(60).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!second.is_finished());
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(metrics.large_frame_bytes.load(Ordering::Relaxed), 60);
        drop(second);
        assert_eq!(metrics.large_frame_bytes.load(Ordering::Relaxed), 0);
    }
}
