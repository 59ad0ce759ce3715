//! The memory budget: what clients make rocketns hold beyond each connection's own small buffers, and the
//! one place that bounds it.
//!
//! Each connection keeps a few kilobytes of its own (`connection.rs` says how many). Everything larger is
//! charged, before it is held, to one of two pools shared by all connections, registered brokers or not:
//! - `requests` (`largeFrameBufferBytes`): frames over [`SMALL_FRAME`] from their length prefix until their
//!   request has been processed, and for REGISTER_BROKER the body's decoding (inflated bytes, parsed topic
//!   configs) and the parsed registration until the route writer has applied it;
//! - `replies` (`largeReplyBufferBytes`): reply bodies over the copy limit (a 100,000-topic list, a large
//!   cluster info) queued on a connection until its peer has taken them. The HTTP port's dumps are charged
//!   here too, and besides to `http_dumps`, a gate of half its size: clients of the operator's port that
//!   never read cannot hold the room a remoting client's reply needs (issue 44's review: three unread
//!   11 MB `/cluster` dumps held the whole pool and a remoting cluster-info request waited 15-19 s).
//!
//! Room is taken in arrival order (a fair semaphore), so a flood of large frames delays a broker's
//! registration but cannot starve it. A request that already holds room never waits for more, it only
//! tries (`Charge::try_grow`): two requests that each held room and waited for more could otherwise wait for
//! each other forever. A [`Charge`] gives its room back when dropped; the gauges of both pools are
//! `rocketns_memory_budget_bytes{pool=...}`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Frames up to this length (prefix included) are read into a connection's own buffer without a charge.
pub const SMALL_FRAME: usize = 16 * 1024;

/// What a frame over [`SMALL_FRAME`] reserves: its bytes, and 3/4 of them again for what its request builds
/// while it is processed (a Java broker's JSON registration parses to under half its size; the decoder's
/// meter, `protocol::meter`, holds every decode to its allowance).
pub const fn large_frame_room(len: u64) -> u64 {
    len.saturating_add(len / 4 * 3)
}

/// What a request's own connection lends its processing without a charge: a small frame's registration
/// body decodes within this (a default broker's table of a few dozen topics parses to a few kilobytes).
pub const CONNECTION_DECODE: usize = 16 * 1024;

/// The room a request holds in the `requests` pool while it is processed: its frame's bytes, and what its
/// processing may build (nothing for a small frame, whose connection lends [`CONNECTION_DECODE`]).
#[derive(Debug, Default)]
pub struct RequestRoom {
    pub charge: Charge,
    /// The frame's own bytes, of `charge`.
    pub frame: usize,
}

impl RequestRoom {
    /// What the request's processing may build with the room it holds and what its connection lends.
    pub fn for_processing(&self) -> usize {
        self.charge.bytes().saturating_sub(self.frame) + CONNECTION_DECODE
    }
}

/// The largest pool: `acquire_many` takes a `u32` of permits, one a byte.
pub const MAX_POOL: usize = u32::MAX as usize;

/// The two pools, shared by every connection of a server.
#[derive(Clone)]
pub struct MemoryBudget {
    pub requests: Pool,
    pub replies: Pool,
    /// The share of `replies` that the HTTP port's dumps may hold together (half of it).
    pub http_dumps: Pool,
}

impl MemoryBudget {
    /// Pools of `requests` and `replies` bytes; their gauges are the metrics' own.
    pub fn new(requests: usize, replies: usize, metrics: &crate::ops::metrics::Metrics) -> Self {
        let budget = MemoryBudget {
            requests: Pool::new(requests, metrics.budget.requests.clone()),
            replies: Pool::new(replies, metrics.budget.replies.clone()),
            // A gate, not memory of its own: what passes it is counted in `replies`' gauge.
            http_dumps: Pool::new(replies / 2, Arc::default()),
        };
        metrics.budget.requests_capacity.store(budget.requests.capacity() as i64, Ordering::Relaxed);
        metrics.budget.replies_capacity.store(budget.replies.capacity() as i64, Ordering::Relaxed);
        budget
    }

    /// The pools of `largeFrameBufferBytes` and `largeReplyBufferBytes`.
    pub fn from_config(config: &crate::config::NamesrvConfig, metrics: &crate::ops::metrics::Metrics) -> Self {
        let bytes = |v: u64| usize::try_from(v).unwrap_or(MAX_POOL);
        MemoryBudget::new(bytes(config.large_frame_buffer_bytes), bytes(config.large_reply_buffer_bytes), metrics)
    }
}

/// Room of one kind, in bytes.
#[derive(Clone)]
pub struct Pool {
    room: Arc<Semaphore>,
    capacity: usize,
    /// Bytes held (the gauge).
    held: Arc<AtomicI64>,
}

/// Room held in a pool; given back when dropped. The default charge holds nothing.
#[derive(Default)]
pub struct Charge {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    /// `None` only while nothing is held.
    pool: Option<Pool>,
}

impl std::fmt::Debug for Charge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Charge({} bytes)", self.bytes)
    }
}

impl Pool {
    pub fn new(capacity: usize, held: Arc<AtomicI64>) -> Self {
        let capacity = capacity.min(MAX_POOL);
        Pool { room: Arc::new(Semaphore::new(capacity)), capacity, held }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes held now.
    #[cfg(any(test, feature = "testing"))]
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed).max(0) as usize
    }

    fn none(&self) -> Charge {
        Charge { permit: None, bytes: 0, pool: Some(self.clone()) }
    }

    /// Waits, in arrival order, until there is room for `bytes` (at most the whole pool). Callers that hold
    /// room in this pool already must not wait: see [`Charge::try_grow`].
    pub async fn reserve(&self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.capacity);
        if bytes == 0 {
            return self.none();
        }
        let Ok(permit) = self.room.clone().acquire_many_owned(bytes as u32).await else {
            // The semaphore is never closed.
            return std::future::pending().await;
        };
        self.charged(permit, bytes)
    }

    /// Room for `bytes` if there is some now and nobody waits ahead (the semaphore is fair).
    pub fn try_reserve(&self, bytes: usize) -> Option<Charge> {
        if bytes == 0 {
            return Some(self.none());
        }
        if bytes > self.capacity {
            return None;
        }
        let permit = self.room.clone().try_acquire_many_owned(bytes as u32).ok()?;
        Some(self.charged(permit, bytes))
    }

    fn charged(&self, permit: OwnedSemaphorePermit, bytes: usize) -> Charge {
        self.held.fetch_add(bytes as i64, Ordering::Relaxed);
        Charge { permit: Some(permit), bytes, pool: Some(self.clone()) }
    }
}

impl Charge {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives back what is held beyond `bytes`.
    pub fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            drop(self.split_off(self.bytes - bytes));
        }
    }

    /// Holds `bytes` in all if `pool` (this charge's, if it has one) has the difference now; never waits
    /// (see the module's doc).
    pub fn try_grow(&mut self, bytes: usize, pool: &Pool) -> bool {
        if bytes <= self.bytes {
            return true;
        }
        match pool.try_reserve(bytes - self.bytes) {
            Some(more) => {
                self.merge(more);
                true
            }
            None => false,
        }
    }

    /// Adds `other`'s room (of the same pool) to this charge.
    pub fn merge(&mut self, mut other: Charge) {
        if let (Some(mine), Some(theirs)) = (&self.pool, &other.pool) {
            debug_assert!(Arc::ptr_eq(&mine.room, &theirs.room), "charges of one pool");
        }
        if self.pool.is_none() {
            self.pool = other.pool.clone();
        }
        match (&mut self.permit, other.permit.take()) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        self.bytes += std::mem::take(&mut other.bytes);
    }

    /// Moves `bytes` of this charge (at most all of it) into a charge of their own, e.g. a parsed
    /// registration's share that travels to the route writer while the rest is given back.
    pub fn split_off(&mut self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.bytes);
        let permit =
            if bytes == self.bytes { self.permit.take() } else { self.permit.as_mut().and_then(|p| p.split(bytes)) };
        self.bytes -= bytes;
        Charge { permit, bytes, pool: self.pool.clone() }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool
            && self.bytes > 0
        {
            pool.held.fetch_sub(self.bytes as i64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const UNIT: usize = 1024;

    fn pool(capacity: usize) -> Pool {
        Pool::new(capacity, Arc::default())
    }

    #[tokio::test(start_paused = true)]
    async fn waits_in_order_and_gives_room_back() {
        let pool = pool(100 * UNIT);
        let first = pool.reserve(60 * UNIT).await;
        assert_eq!(pool.held(), 60 * UNIT);
        let waiting = tokio::time::timeout(Duration::from_secs(1), pool.reserve(60 * UNIT)).await;
        assert!(waiting.is_err(), "no room while the first holds 60 of 100");
        let p = pool.clone();
        let second = tokio::spawn(async move { p.reserve(60 * UNIT).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!second.is_finished());
        assert!(pool.try_reserve(10 * UNIT).is_none(), "a waiter is ahead: no overtaking");
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(pool.held(), 60 * UNIT);
        drop(second);
        assert_eq!(pool.held(), 0);
    }

    #[tokio::test]
    async fn shrinks_grows_and_splits_without_losing_room() {
        let pool = pool(64 * UNIT);
        let mut charge = pool.reserve(40 * UNIT).await;
        charge.shrink_to(10 * UNIT + 1);
        assert_eq!((charge.bytes(), pool.held()), (10 * UNIT + 1, 10 * UNIT + 1));
        assert!(charge.try_grow(60 * UNIT, &pool));
        assert!(!charge.try_grow(65 * UNIT, &pool), "more than the pool");
        assert!(pool.try_reserve(5 * UNIT).is_none(), "60 of 64 held");
        let part = charge.split_off(20 * UNIT + 7);
        assert_eq!((part.bytes(), charge.bytes()), (20 * UNIT + 7, 40 * UNIT - 7));
        drop(charge);
        assert_eq!(pool.held(), 20 * UNIT + 7);
        // The part's bytes are its own; the rest is free again.
        let rest = pool.try_reserve(43 * UNIT).expect("the rest is free");
        assert!(pool.try_reserve(UNIT).is_none());
        drop((part, rest));
        assert_eq!(pool.held(), 0);
        assert!(pool.try_reserve(64 * UNIT).is_some());
    }
}
