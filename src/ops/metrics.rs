//! What the server counts (rendered for Prometheus by `exposition`).
//!
//! Counting stays off shared cache lines: a connection tallies its requests locally and adds them once per
//! batch to its worker thread's own shard of the counters (each shard on cache lines of its own); lookup
//! latency is sampled (one lookup in 16) into the same shard. Only rendering reads every shard.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::protocol::codes::request;

/// Request codes counted by name; anything else is counted as `other`.
const CODES: [i32; 23] = [
    request::PUT_KV_CONFIG,
    request::GET_KV_CONFIG,
    request::DELETE_KV_CONFIG,
    request::REGISTER_BROKER,
    request::UNREGISTER_BROKER,
    request::GET_ROUTEINFO_BY_TOPIC,
    request::GET_BROKER_CLUSTER_INFO,
    request::WIPE_WRITE_PERM_OF_BROKER,
    request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    request::DELETE_TOPIC_IN_NAMESRV,
    request::REGISTER_TOPIC_IN_NAMESRV,
    request::GET_KVLIST_BY_NAMESPACE,
    request::GET_TOPICS_BY_CLUSTER,
    request::GET_SYSTEM_TOPIC_LIST_FROM_NS,
    request::GET_UNIT_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_TOPIC_LIST,
    request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    request::UPDATE_NAMESRV_CONFIG,
    request::GET_NAMESRV_CONFIG,
    request::QUERY_DATA_VERSION,
    request::ADD_WRITE_PERM_OF_BROKER,
    request::GET_BROKER_MEMBER_GROUP,
    request::BROKER_HEARTBEAT,
];
const SLOTS: usize = CODES.len() + 1;

/// Upper bounds of the lookup latency buckets, in microseconds.
const LATENCY_BUCKETS_US: [u64; 12] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 10_000, 100_000];

fn slot(code: i32) -> usize {
    CODES.iter().position(|c| *c == code).unwrap_or(CODES.len())
}

/// The counters one group of threads writes (a shard per worker thread while there are enough).
#[derive(Default)]
struct Shard {
    /// [slot][0 = success, 1 = error]
    requests: [[AtomicU64; 2]; SLOTS],
    latency_buckets: [AtomicU64; LATENCY_BUCKETS_US.len()],
    latency_count: AtomicU64,
    latency_sum_ns: AtomicU64,
}

/// The shard of the calling thread: threads are numbered as they first count, and share shards only when
/// there are more threads than shards.
fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

pub struct Metrics {
    shards: Box<[CachePadded<Shard>]>,
    /// Written at connect and close only, not per request.
    pub connections: AtomicI64,
    pub connections_total: AtomicU64,
    /// Connections moved from the intake to the lookups' runtime (`intake.rs`).
    pub connections_settled: AtomicU64,
    /// Connections closed on accept because `serverMaxConnections` were open.
    pub connections_refused: AtomicU64,
    /// HTTP connections closed on accept because the operator's port had all its places taken.
    pub http_connections_refused: AtomicU64,
    pub http_connections_evicted: AtomicU64,
    /// The memory budget (`budget`): what its pools hold, who waits, what it refused.
    pub budget: BudgetCounters,
    /// Whole-table bodies (cluster info, topic lists) encoded: at most one of each kind per snapshot.
    pub table_bodies_encoded: AtomicU64,
    /// Writes of the server's files that failed (the change was refused, or for the route file, retried).
    pub file_write_failures: FileWriteFailures,
    /// What the NameServer's own connections did (`outbound`).
    pub outbound: OutboundCounters,
    /// The audit log's lines (`audit`).
    pub audit: AuditCounters,
}

/// The memory budget's pools and refusals (`budget.rs`).
#[derive(Debug, Default)]
pub struct BudgetCounters {
    /// Bytes held in the `requests` pool (`largeFrameBufferBytes`), and in the `replies` pool
    /// (`largeReplyBufferBytes`): the pools' own gauges.
    pub requests: Arc<AtomicI64>,
    pub replies: Arc<AtomicI64>,
    /// The pools' sizes, set when the server starts.
    pub requests_capacity: AtomicI64,
    pub replies_capacity: AtomicI64,
    /// Connections whose large frame waits for room (they are not read meanwhile).
    pub waiting: AtomicI64,
    /// Connections closed: a large frame not complete within `largeFrameTimeoutMillis` of getting room.
    pub frames_too_slow: AtomicU64,
    /// Connections closed: a large reply not taken by the peer within `largeFrameTimeoutMillis`.
    pub replies_not_taken: AtomicU64,
    /// Registrations refused: their body needs more memory to decode than the pool has in all, or than it
    /// had free when they asked for more than their share.
    pub bodies_too_large: AtomicU64,
    pub bodies_no_room: AtomicU64,
    /// Bytes of audit lines waiting for the file (`auditLogPath`).
    pub audit_queued: AtomicI64,
}

/// Audited requests, and audit lines lost.
#[derive(Debug, Default)]
pub struct AuditCounters {
    pub succeeded: AtomicU64,
    pub refused: AtomicU64,
    /// Lines not written to `auditLogPath`: no room in its queue, or the write failed.
    pub lost: AtomicU64,
}

/// 905 notices sent to brokers, and cluster-test lookups in the product environment.
#[derive(Debug, Default)]
pub struct OutboundCounters {
    pub notices_sent: AtomicU64,
    pub notices_failed: AtomicU64,
    /// The product NameServer had the topic.
    pub product_found: AtomicU64,
    /// It answered that it has no such topic.
    pub product_not_found: AtomicU64,
    /// No answer: no address, no connection, a timeout, an unreadable reply.
    pub product_failed: AtomicU64,
    /// Refused before asking: too many lookups waiting already.
    pub product_busy: AtomicU64,
}

/// Failed writes, per file.
#[derive(Debug, Default)]
pub struct FileWriteFailures {
    /// `kvConfigPath`: a KV change refused.
    pub kv: AtomicU64,
    /// The `-c` file written back on UPDATE_NAMESRV_CONFIG: the update refused.
    pub config: AtomicU64,
    /// The warm-restart route file: tried again at the next period.
    pub routes: AtomicU64,
}

impl Default for Metrics {
    /// A shard for each thread that counts requests: a lookup thread and a lane thread a core, the intake,
    /// and one for the others (the blocking pool's, an embedder's).
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Metrics::with_shards(2 * cores + 2)
    }
}

impl Metrics {
    fn with_shards(n: usize) -> Self {
        Metrics {
            shards: (0..n.max(1)).map(|_| CachePadded::new(Shard::default())).collect(),
            connections: AtomicI64::new(0),
            connections_total: AtomicU64::new(0),
            connections_settled: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            http_connections_refused: AtomicU64::new(0),
            http_connections_evicted: AtomicU64::new(0),
            budget: BudgetCounters::default(),
            table_bodies_encoded: AtomicU64::new(0),
            file_write_failures: FileWriteFailures::default(),
            outbound: OutboundCounters::default(),
            audit: AuditCounters::default(),
        }
    }

    fn shard(&self) -> &Shard {
        &self.shards[thread_number() % self.shards.len()]
    }

    /// Counts a request answered, in the calling thread's shard: an add no other thread writes while the
    /// threads that count are no more than the shards, where a tally of every code sat in each connection,
    /// idle or not (196 bytes), and was added once per batch.
    pub fn record_request(&self, code: i32, success: bool) {
        self.shard().requests[slot(code)][usize::from(!success)].fetch_add(1, Ordering::Relaxed);
    }

    /// A counter summed over the shards.
    fn sum(&self, counter: impl Fn(&Shard) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|s| counter(s).load(Ordering::Relaxed)).sum()
    }

    pub fn record_lookup_latency(&self, d: Duration) {
        let shard = self.shard();
        let us = d.as_micros() as u64;
        if let Some(i) = LATENCY_BUCKETS_US.iter().position(|b| us <= *b) {
            shard.latency_buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        shard.latency_count.fetch_add(1, Ordering::Relaxed);
        shard.latency_sum_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Requests answered, summed over the shards: (request code, or `None` for the others; result; count)
    /// for each count that is not zero, codes in `CODES`'s order, success before error.
    pub fn request_counts(&self) -> Vec<(Option<i32>, &'static str, u64)> {
        let mut counts = Vec::new();
        for i in 0..SLOTS {
            for (r, result) in ["success", "error"].into_iter().enumerate() {
                let n = self.sum(|s| &s.requests[i][r]);
                if n > 0 {
                    counts.push((CODES.get(i).copied(), result, n));
                }
            }
        }
        counts
    }

    /// The sampled lookup latencies, summed over the shards.
    pub fn lookup_latency(&self) -> LatencyHistogram {
        let mut cumulative = 0;
        let buckets = (LATENCY_BUCKETS_US.iter().enumerate())
            .map(|(i, bound)| {
                cumulative += self.sum(|s| &s.latency_buckets[i]);
                (*bound, cumulative)
            })
            .collect();
        LatencyHistogram {
            buckets,
            count: self.sum(|s| &s.latency_count),
            sum: Duration::from_nanos(self.sum(|s| &s.latency_sum_ns)),
        }
    }
}

/// Sampled lookup latencies as Prometheus counts them.
pub struct LatencyHistogram {
    /// Each bucket's upper bound in microseconds, and the lookups at most that long.
    pub buckets: Vec<(u64, u64)>,
    pub count: u64,
    pub sum: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_flush_into_the_text() {
        // More shards than the test process has threads, so that two threads never share one here.
        let m = Metrics::with_shards(4096);
        m.record_request(105, true);
        m.record_request(105, false);
        m.record_request(99999, false);
        // Another thread counts in another shard; the text sums them.
        std::thread::scope(|scope| {
            scope.spawn(|| m.record_request(105, true));
        });
        let used = m.shards.iter().filter(|s| s.requests[slot(105)].iter().any(|n| n.load(Ordering::Relaxed) > 0));
        assert_eq!(used.count(), 2);
        m.record_lookup_latency(Duration::from_micros(30));
        let requests = m.request_counts();
        assert_eq!(requests, [(Some(105), "success", 2), (Some(105), "error", 1), (None, "error", 1)]);
        let latency = m.lookup_latency();
        assert!(latency.buckets.contains(&(20, 0)) && latency.buckets.contains(&(50, 1)), "{:?}", latency.buckets);
        assert_eq!((latency.count, latency.sum), (1, Duration::from_micros(30)));
    }
}
