//! What the server counts, and its Prometheus text rendering (served by `http`).
//!
//! Counting stays off shared cache lines: a connection tallies its requests locally and adds them once per
//! batch to its worker thread's own shard of the counters (each shard on cache lines of its own); lookup
//! latency is sampled (one lookup in 16) into the same shard. Only rendering reads every shard.

use std::fmt::Write as _;
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

/// A connection's own tally, added to the shared counters once per batch of requests.
#[derive(Default)]
pub struct RequestTally {
    counts: [[u64; 2]; SLOTS],
    seen: u64,
}

impl Default for Metrics {
    /// A shard for each core (the runtime's worker count), plus one for the other threads.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Metrics::with_shards(cores + 1)
    }
}

impl RequestTally {
    pub fn record(&mut self, code: i32, success: bool) {
        self.counts[slot(code)][usize::from(!success)] += 1;
        self.seen += 1;
    }

    /// Whether this lookup's latency should be sampled.
    pub fn sample_lookup(&self) -> bool {
        self.seen.is_multiple_of(16)
    }

    pub fn flush(&mut self, metrics: &Metrics) {
        for (shared, local) in metrics.shard().requests.iter().zip(self.counts.iter_mut()) {
            for (s, l) in shared.iter().zip(local.iter_mut()) {
                if *l > 0 {
                    s.fetch_add(*l, Ordering::Relaxed);
                    *l = 0;
                }
            }
        }
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

    /// The counters in Prometheus text format, followed by `gauges` (name, help, value).
    pub fn render(&self, counters: &[(&str, &str, u64)], gauges: &[(&str, &str, i64)]) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP rocketns_requests_total Requests answered, by request code and result.\n");
        out.push_str("# TYPE rocketns_requests_total counter\n");
        for i in 0..SLOTS {
            let code = CODES.get(i).map(|c| c.to_string()).unwrap_or_else(|| "other".into());
            for (r, result) in ["success", "error"].iter().enumerate() {
                let n = self.sum(|s| &s.requests[i][r]);
                if n > 0 {
                    let _ = writeln!(out, "rocketns_requests_total{{code=\"{code}\",result=\"{result}\"}} {n}");
                }
            }
        }
        out.push_str("# HELP rocketns_lookup_latency_seconds Time to answer GET_ROUTEINFO_BY_TOPIC inside the server (1 in 16 sampled).\n");
        out.push_str("# TYPE rocketns_lookup_latency_seconds histogram\n");
        let mut cumulative = 0;
        for (i, bound) in LATENCY_BUCKETS_US.iter().enumerate() {
            cumulative += self.sum(|s| &s.latency_buckets[i]);
            let _ =
                writeln!(out, "rocketns_lookup_latency_seconds_bucket{{le=\"{}\"}} {cumulative}", *bound as f64 / 1e6);
        }
        let count = self.sum(|s| &s.latency_count);
        let _ = writeln!(out, "rocketns_lookup_latency_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "rocketns_lookup_latency_seconds_sum {}", self.sum(|s| &s.latency_sum_ns) as f64 / 1e9);
        let _ = writeln!(out, "rocketns_lookup_latency_seconds_count {count}");
        self.budget.render(&mut out);
        let f = &self.file_write_failures;
        write_labelled_counter(
            &mut out,
            "rocketns_file_write_failures_total",
            "Writes of the server's files that failed: kv (kvConfigPath; the change was refused), config (the -c file, on UPDATE_NAMESRV_CONFIG; the update was refused), routes (the warm-restart route file; tried again next period).",
            "file",
            &[("kv", &f.kv), ("config", &f.config), ("routes", &f.routes)],
        );
        let o = &self.outbound;
        write_labelled_counter(
            &mut out,
            "rocketns_min_broker_id_notifications_total",
            "NOTIFY_MIN_BROKER_ID_CHANGE (905) sends to brokers (notifyMinBrokerIdChanged), by result.",
            "result",
            &[("sent", &o.notices_sent), ("failed", &o.notices_failed)],
        );
        write_labelled_counter(
            &mut out,
            "rocketns_cluster_test_lookups_total",
            "Route lookups asked of the product environment's NameServer (clusterTest), by result.",
            "result",
            &[
                ("found", &o.product_found),
                ("not_found", &o.product_not_found),
                ("failed", &o.product_failed),
                ("busy", &o.product_busy),
            ],
        );
        let a = &self.audit;
        write_labelled_counter(
            &mut out,
            "rocketns_audit_events_total",
            "Audited requests (state changes other than a broker's own registration), by outcome.",
            "outcome",
            &[("success", &a.succeeded), ("refused", &a.refused)],
        );
        let connections_total = self.connections_total.load(Ordering::Relaxed);
        let connections = self.connections.load(Ordering::Relaxed);
        let all_counters = [
            ("rocketns_connections_total", "Connections accepted.", connections_total),
            (
                "rocketns_connections_settled_total",
                "Connections moved from the intake, where they were accepted, to the threads that answer lookups: once settled (16 requests or 1 s open).",
                self.connections_settled.load(Ordering::Relaxed),
            ),
            (
                "rocketns_connections_refused_total",
                "Connections closed as soon as accepted because serverMaxConnections were open.",
                self.connections_refused.load(Ordering::Relaxed),
            ),
            (
                "rocketns_client_log_lines_dropped_total",
                "Log lines about what clients did (malformed frames, refused signatures, slow frames) not written: over 50 a second.",
                crate::limits::throttle::client_lines().dropped.load(Ordering::Relaxed),
            ),
            (
                "rocketns_table_bodies_encoded_total",
                "Whole-table reply bodies (cluster info, topic lists) encoded: once per kind and route snapshot, shared by every request for it.",
                self.table_bodies_encoded.load(Ordering::Relaxed),
            ),
            (
                "rocketns_audit_lines_lost_total",
                "Audit lines not written to auditLogPath: no room in its queue, or the write failed.",
                a.lost.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, value) in all_counters.iter().chain(counters) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
        }
        let all_gauges = [("rocketns_connections", "Connections open.", connections)];
        for (name, help, value) in all_gauges.iter().chain(gauges) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        out
    }
}

impl BudgetCounters {
    fn render(&self, out: &mut String) {
        let load = |gauge: &AtomicI64| gauge.load(Ordering::Relaxed);
        write_labelled(
            out,
            ("rocketns_memory_budget_bytes", "gauge"),
            "Bytes held in the memory budget's pools: requests (large frames, registration bodies being decoded, parsed registrations waiting for the route writer; largeFrameBufferBytes) and replies (large reply bodies not yet taken; largeReplyBufferBytes).",
            "pool",
            &[("requests", load(&self.requests)), ("replies", load(&self.replies))],
        );
        write_labelled(
            out,
            ("rocketns_memory_budget_capacity_bytes", "gauge"),
            "The size of each pool of the memory budget.",
            "pool",
            &[("requests", load(&self.requests_capacity)), ("replies", load(&self.replies_capacity))],
        );
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed) as i64;
        write_labelled(
            out,
            ("rocketns_large_frames_refused_total", "counter"),
            "Connections closed because a frame over 16 KiB was not complete (too_slow), or a large reply was not taken by the peer (reply_not_taken), within largeFrameTimeoutMillis of getting room.",
            "reason",
            &[("too_slow", count(&self.frames_too_slow)), ("reply_not_taken", count(&self.replies_not_taken))],
        );
        write_labelled(
            out,
            ("rocketns_registration_bodies_refused_total", "counter"),
            "REGISTER_BROKER requests refused because decoding their body needs more memory than largeFrameBufferBytes (too_large), or more than their share while the pool was full (no_room).",
            "reason",
            &[("too_large", count(&self.bodies_too_large)), ("no_room", count(&self.bodies_no_room))],
        );
        let gauges = [
            (
                "rocketns_large_frames_waiting",
                "Connections whose frame over 16 KiB waits for room in the requests pool (not read meanwhile).",
                load(&self.waiting),
            ),
            ("rocketns_audit_queue_bytes", "Bytes of audit lines waiting to be written to auditLogPath.", load(&self.audit_queued)),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
    }
}

/// A counter family with one label: its HELP and TYPE lines, then a line per value of the label.
fn write_labelled_counter(out: &mut String, name: &str, help: &str, label: &str, values: &[(&str, &AtomicU64)]) {
    let values: Vec<(&str, i64)> = values.iter().map(|(v, n)| (*v, n.load(Ordering::Relaxed) as i64)).collect();
    write_labelled(out, (name, "counter"), help, label, &values);
}

/// A gauge family with one label, for what the server state knows and the counters do not (`http.rs`).
pub fn write_labelled_gauge(out: &mut String, name: &str, help: &str, label: &str, values: &[(&str, i64)]) {
    write_labelled(out, (name, "gauge"), help, label, values);
}

/// A family of one type with one label: its HELP and TYPE lines, then a line per value of the label.
fn write_labelled(out: &mut String, (name, kind): (&str, &str), help: &str, label: &str, values: &[(&str, i64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (value, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_flush_into_the_text() {
        // More shards than the test process has threads, so that two threads never share one here.
        let m = Metrics::with_shards(4096);
        let mut t = RequestTally::default();
        t.record(105, true);
        t.record(105, false);
        t.record(99999, false);
        t.flush(&m);
        t.flush(&m);
        // Another thread counts in another shard; the text sums them.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut t = RequestTally::default();
                t.record(105, true);
                t.flush(&m);
            });
        });
        let used = m.shards.iter().filter(|s| s.requests[slot(105)].iter().any(|n| n.load(Ordering::Relaxed) > 0));
        assert_eq!(used.count(), 2);
        m.record_lookup_latency(Duration::from_micros(30));
        let text = m.render(&[("rocketns_x_total", "x", 3)], &[("rocketns_topics", "t", 7)]);
        assert!(text.contains("rocketns_requests_total{code=\"105\",result=\"success\"} 2\n"), "{text}");
        assert!(text.contains("rocketns_requests_total{code=\"105\",result=\"error\"} 1\n"));
        assert!(text.contains("rocketns_requests_total{code=\"other\",result=\"error\"} 1\n"));
        assert!(text.contains("rocketns_lookup_latency_seconds_bucket{le=\"0.00002\"} 0\n"));
        assert!(text.contains("rocketns_lookup_latency_seconds_bucket{le=\"0.00005\"} 1\n"));
        assert!(text.contains("rocketns_x_total 3\n") && text.contains("rocketns_topics 7\n"));
    }
}
