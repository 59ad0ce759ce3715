//! The `/metrics` page in Prometheus text format: the one place where a metric is named, typed and
//! explained, read from the server's counters (`metrics`), the route table's counters and the server state.

use std::fmt::Display;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::ops::metrics::{BudgetCounters, Metrics};
use crate::state::ServerState;

/// The whole page.
pub fn render(state: &ServerState) -> String {
    let mut out = String::with_capacity(8192);
    requests(&mut out, &state.metrics);
    lookup_latency(&mut out, &state.metrics);
    budget(&mut out, &state.metrics.budget);
    files_and_outbound(&mut out, &state.metrics);
    counters(&mut out, state);
    gauges(&mut out, state);
    lookup_cores(&mut out, state);
    if !state.peers.is_empty() {
        peers(&mut out, &state.peers);
    }
    if let Some(stats) = &state.controller {
        controller(&mut out, stats);
    }
    out
}

fn requests(out: &mut String, metrics: &Metrics) {
    family(out, "rocketns_requests_total", "counter", "Requests answered, by request code and result.");
    for (code, result, n) in metrics.request_counts() {
        let code = code.map_or_else(|| "other".to_string(), |c| c.to_string());
        let _ = writeln!(out, "rocketns_requests_total{{code=\"{code}\",result=\"{result}\"}} {n}");
    }
}

fn lookup_latency(out: &mut String, metrics: &Metrics) {
    let name = "rocketns_lookup_latency_seconds";
    let help = "Time to answer GET_ROUTEINFO_BY_TOPIC inside the server (1 in 16 sampled).";
    family(out, name, "histogram", help);
    let latency = metrics.lookup_latency();
    for (bound_us, n) in latency.buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {n}", bound_us as f64 / 1e6);
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", latency.count);
    let _ = writeln!(out, "{name}_sum {}", latency.sum.as_nanos() as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {}", latency.count);
}

fn budget(out: &mut String, b: &BudgetCounters) {
    labelled(
        out,
        ("rocketns_memory_budget_bytes", "gauge"),
        "Bytes held in the memory budget's pools: requests (large frames, registration bodies being decoded, parsed registrations waiting for the route writer; largeFrameBufferBytes) and replies (large reply bodies not yet taken; largeReplyBufferBytes).",
        "pool",
        &[("requests", gauge(&b.requests)), ("replies", gauge(&b.replies))],
    );
    labelled(
        out,
        ("rocketns_memory_budget_capacity_bytes", "gauge"),
        "The size of each pool of the memory budget.",
        "pool",
        &[("requests", gauge(&b.requests_capacity)), ("replies", gauge(&b.replies_capacity))],
    );
    labelled(
        out,
        ("rocketns_large_frames_refused_total", "counter"),
        "Connections closed because a frame over 16 KiB was not complete (too_slow), or a large reply was not taken by the peer (reply_not_taken), within largeFrameTimeoutMillis of getting room.",
        "reason",
        &[("too_slow", count(&b.frames_too_slow)), ("reply_not_taken", count(&b.replies_not_taken))],
    );
    labelled(
        out,
        ("rocketns_registration_bodies_refused_total", "counter"),
        "REGISTER_BROKER requests refused because decoding their body needs more memory than largeFrameBufferBytes (too_large), or more than their share while the pool was full (no_room).",
        "reason",
        &[("too_large", count(&b.bodies_too_large)), ("no_room", count(&b.bodies_no_room))],
    );
    single(
        out,
        ("rocketns_large_frames_waiting", "gauge"),
        "Connections whose frame over 16 KiB waits for room in the requests pool (not read meanwhile).",
        gauge(&b.waiting),
    );
    single(
        out,
        ("rocketns_audit_queue_bytes", "gauge"),
        "Bytes of audit lines waiting to be written to auditLogPath.",
        gauge(&b.audit_queued),
    );
}

fn files_and_outbound(out: &mut String, m: &Metrics) {
    let (f, o, a) = (&m.file_write_failures, &m.outbound, &m.audit);
    labelled(
        out,
        ("rocketns_file_write_failures_total", "counter"),
        "Writes of the server's files that failed: kv (kvConfigPath; the change was refused), config (the -c file, on UPDATE_NAMESRV_CONFIG; the update was refused), routes (the warm-restart route file; tried again next period).",
        "file",
        &[("kv", count(&f.kv)), ("config", count(&f.config)), ("routes", count(&f.routes))],
    );
    labelled(
        out,
        ("rocketns_min_broker_id_notifications_total", "counter"),
        "NOTIFY_MIN_BROKER_ID_CHANGE (905) sends to brokers (notifyMinBrokerIdChanged), by result.",
        "result",
        &[("sent", count(&o.notices_sent)), ("failed", count(&o.notices_failed))],
    );
    labelled(
        out,
        ("rocketns_cluster_test_lookups_total", "counter"),
        "Route lookups asked of the product environment's NameServer (clusterTest), by result.",
        "result",
        &[
            ("found", count(&o.product_found)),
            ("not_found", count(&o.product_not_found)),
            ("failed", count(&o.product_failed)),
            ("busy", count(&o.product_busy)),
        ],
    );
    labelled(
        out,
        ("rocketns_audit_events_total", "counter"),
        "Audited requests (state changes other than a broker's own registration), by outcome.",
        "outcome",
        &[("success", count(&a.succeeded)), ("refused", count(&a.refused))],
    );
}

fn counters(out: &mut String, state: &ServerState) {
    let (m, routes) = (&state.metrics, &state.routes.counters);
    let counters = [
        ("rocketns_connections_total", "Connections accepted.", &m.connections_total),
        (
            "rocketns_connections_settled_total",
            "Connections moved from the intake, where they were accepted, to the threads that answer lookups: once settled (16 requests or 1 s open).",
            &m.connections_settled,
        ),
        (
            "rocketns_connections_refused_total",
            "Connections closed as soon as accepted because serverMaxConnections were open.",
            &m.connections_refused,
        ),
        (
            "rocketns_http_connections_refused_total",
            "Connections to the metrics port closed as soon as accepted: 64 were open (16 from its address), and none of another address's to take.",
            &m.http_connections_refused,
        ),
        (
            "rocketns_http_connections_evicted_total",
            "Connections to the metrics port closed to give their place to a newcomer from an address that held fewer.",
            &m.http_connections_evicted,
        ),
        (
            "rocketns_client_log_lines_dropped_total",
            "Log lines about what clients did (malformed frames, refused signatures, slow frames) not written: over 50 a second.",
            &crate::limits::throttle::client_lines().dropped,
        ),
        (
            "rocketns_log_lines_dropped_total",
            "Log lines of any kind not written: over 200 a second, 2,000 at once.",
            &crate::ops::logging::lines().dropped,
        ),
        (
            "rocketns_table_bodies_encoded_total",
            "Whole-table reply bodies (cluster info, topic lists) encoded: once per kind and route snapshot, shared by every request for it.",
            &m.table_bodies_encoded,
        ),
        (
            "rocketns_audit_lines_lost_total",
            "Audit lines not written to auditLogPath: no room in its queue, or the write failed.",
            &m.audit.lost,
        ),
        ("rocketns_registrations_total", "REGISTER_BROKER requests applied.", &routes.registrations),
        ("rocketns_expiries_total", "Brokers removed for silence.", &routes.expiries),
        ("rocketns_snapshot_publishes_total", "Route snapshots published.", &routes.publishes),
        (
            "rocketns_min_broker_id_notices_dropped_total",
            "905 notices dropped because the notifier's queue was full.",
            &routes.notices_dropped,
        ),
    ];
    for (name, help, value) in counters {
        single(out, (name, "counter"), help, value.load(Ordering::Relaxed));
    }
}

fn gauges(out: &mut String, state: &ServerState) {
    let snapshot = state.routes.load();
    let max_connections = state.max_connections;
    let gauges = [
        ("rocketns_connections", "Connections open.", gauge(&state.metrics.connections)),
        ("rocketns_snapshot_version", "Version of the route snapshot being served.", snapshot.version as i64),
        ("rocketns_topics", "Topics in the route table.", snapshot.topics.len() as i64),
        ("rocketns_brokers", "Broker groups (broker names).", snapshot.brokers.len() as i64),
        ("rocketns_clusters", "Clusters.", snapshot.clusters.len() as i64),
        ("rocketns_live_brokers", "Broker addresses with a live heartbeat entry.", state.routes.liveness.len() as i64),
        ("rocketns_kv_entries", "KV config entries.", state.kv.entry_count() as i64),
        (
            "rocketns_ready",
            "1 while routes are served (/readyz), 0 during needWaitForService and shutdown.",
            i64::from(state.is_ready()),
        ),
        (
            "rocketns_server_max_connections",
            "serverMaxConnections, or fewer where the open-files limit does not allow it: connections beyond it are closed on accept.",
            i64::try_from(max_connections).unwrap_or(i64::MAX),
        ),
    ];
    for (name, help, value) in gauges {
        single(out, (name, "gauge"), help, value);
    }
}

fn lookup_cores(out: &mut String, state: &ServerState) {
    let Some(cores) = &state.lookups else { return };
    let live = cores.connections();
    let names: Vec<String> = (0..live.len()).map(|core| core.to_string()).collect();
    let values: Vec<(&str, i64)> = names.iter().map(String::as_str).zip(live.iter().map(|&n| n as i64)).collect();
    labelled(
        out,
        ("rocketns_lookup_core_connections", "gauge"),
        "Settled connections served by each lookup thread (src/net/cores.rs).",
        "core",
        &values,
    );
}

/// The controller's (`enableControllerInNamesrv`), on this node.
fn controller(out: &mut String, c: &crate::controller::stats::ControllerStats) {
    let n = |v: &AtomicU64| count(v);
    let gauges = [
        (
            "rocketns_controller_leader",
            "1 while this controller node leads with a majority answering it.",
            gauge(&c.leader),
        ),
        (
            "rocketns_controller_has_leader",
            "1 while this controller node knows a leader (itself included).",
            gauge(&c.has_leader),
        ),
        ("rocketns_controller_term", "The controller node's Raft term.", n(&c.term)),
        (
            "rocketns_controller_log_records",
            "Entries in the controller's Raft log since its last purge.",
            n(&c.log_records),
        ),
        ("rocketns_controller_log_bytes", "Bytes of the controller's Raft log file.", n(&c.log_bytes)),
        (
            "rocketns_controller_snapshot_timestamp_seconds",
            "When the controller's last snapshot was written or installed (Unix seconds; 0 before any).",
            n(&c.snapshot_time),
        ),
        (
            "rocketns_controller_live_brokers",
            "Brokers whose heartbeats this controller node follows.",
            n(&c.live_brokers),
        ),
    ];
    for (name, help, value) in gauges {
        single(out, (name, "gauge"), help, value);
    }
    single(
        out,
        ("rocketns_controller_leader_changes_total", "counter"),
        "Times this controller node saw a new leader.",
        n(&c.leader_changes),
    );
    labelled(
        out,
        ("rocketns_controller_elections_total", "counter"),
        "Master elections this controller node decided as leader (a broker's 1002 or its own), by result.",
        "result",
        &[("elected", n(&c.elected)), ("failed", n(&c.election_failed))],
    );
    labelled(
        out,
        ("rocketns_controller_refused_total", "counter"),
        "What the controller's port refused: Raft frames the peer fence stopped, connections over its caps.",
        "what",
        &[("peer_frame", n(&c.refused_peer_frames)), ("connection", n(&c.refused_connections))],
    );
}

/// The last comparison with each peer NameServer (`namesrvPeers`): a divergence only for peers that
/// answered it.
fn peers(out: &mut String, views: &crate::ops::peers::PeerViews) {
    use crate::ops::peers::PeerState;
    let views = views.all();
    family(
        out,
        "rocketns_peer_up",
        "gauge",
        "1 when the peer NameServer (namesrvPeers) answered this node's last comparison of brokers, 0 when it did not.",
    );
    for v in views.iter().filter(|v| v.state != PeerState::NotYet) {
        let up = matches!(v.state, PeerState::Compared { .. });
        let _ = writeln!(out, "rocketns_peer_up{{peer=\"{}\"}} {}", quoted(&v.peer), up as i64);
    }
    family(
        out,
        "rocketns_peer_divergence",
        "gauge",
        "Brokers on which this node and a peer NameServer disagreed at the last comparison (every scan period): missing_here (the peer has them, this node does not), extra_here (the other way), data_version (both, with different DataVersions: rocketns peers only).",
    );
    for v in &views {
        if let PeerState::Compared { divergence, .. } = &v.state {
            for (kind, named) in divergence.kinds() {
                let peer = quoted(&v.peer);
                let _ = writeln!(out, "rocketns_peer_divergence{{peer=\"{peer}\",kind=\"{kind}\"}} {}", named.count);
            }
        }
    }
}

/// A label's value as the text format quotes it.
fn quoted(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A family of one value.
fn single(out: &mut String, (name, kind): (&str, &str), help: &str, value: impl Display) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// A family with one label: a line per value of the label.
fn labelled(out: &mut String, (name, kind): (&str, &str), help: &str, label: &str, values: &[(&str, i64)]) {
    family(out, name, kind, help);
    for (value, n) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {n}");
    }
}

fn count(counter: &AtomicU64) -> i64 {
    counter.load(Ordering::Relaxed) as i64
}

fn gauge(gauge: &AtomicI64) -> i64 {
    gauge.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_latency_are_written_as_prometheus_reads_them() {
        let m = Metrics::default();
        m.record_request(105, true);
        m.record_request(105, true);
        m.record_request(99999, false);
        m.record_lookup_latency(std::time::Duration::from_micros(30));
        let mut text = String::new();
        requests(&mut text, &m);
        lookup_latency(&mut text, &m);
        assert!(text.starts_with("# HELP rocketns_requests_total Requests answered"), "{text}");
        assert!(text.contains("\nrocketns_requests_total{code=\"105\",result=\"success\"} 2\n"), "{text}");
        assert!(text.contains("\nrocketns_requests_total{code=\"other\",result=\"error\"} 1\n"));
        assert!(text.contains("\n# TYPE rocketns_lookup_latency_seconds histogram\n"));
        assert!(text.contains("\nrocketns_lookup_latency_seconds_bucket{le=\"0.00002\"} 0\n"));
        assert!(text.contains("\nrocketns_lookup_latency_seconds_bucket{le=\"0.00005\"} 1\n"));
        assert!(text.contains("\nrocketns_lookup_latency_seconds_bucket{le=\"+Inf\"} 1\n"));
        assert!(text.contains("\nrocketns_lookup_latency_seconds_sum 0.00003\n"));
        assert!(text.ends_with("\nrocketns_lookup_latency_seconds_count 1\n"));
    }
}
