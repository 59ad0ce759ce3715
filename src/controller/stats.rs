//! What the controller shows operators on /metrics (named in `ops::exposition`): its role and term as
//! openraft reports them, leader changes, elections by result, its log and last snapshot, the brokers it
//! follows and what its port refused. Counted by the node; read by the NameServer's metrics page.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Default)]
pub struct ControllerStats {
    /// 1 while this node leads with a majority answering it, else 0.
    pub leader: AtomicI64,
    /// 1 while this node knows a leader (itself included), else 0.
    pub has_leader: AtomicI64,
    pub term: AtomicU64,
    pub leader_changes: AtomicU64,
    pub elected: AtomicU64,
    pub election_failed: AtomicU64,
    /// Entries in the log since its last purge, and the log file's bytes.
    pub log_records: AtomicU64,
    pub log_bytes: std::sync::Arc<AtomicU64>,
    /// When the last snapshot was written or installed, in Unix seconds; 0 before any.
    pub snapshot_time: std::sync::Arc<AtomicU64>,
    pub live_brokers: AtomicU64,
    pub refused_peer_frames: AtomicU64,
    pub refused_connections: AtomicU64,
}

impl ControllerStats {
    pub fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Follows openraft's metrics into `stats` (and the heartbeat table's size), until the node stops.
pub async fn follow(node: std::sync::Arc<super::node::ControllerNode>) {
    let mut metrics = node.raft.metrics();
    let mut leader_before = None;
    loop {
        let (leader, term, records) = {
            let m = metrics.borrow_and_update();
            let purged = m.purged.map_or(0, |p| p.index);
            (m.current_leader, m.current_term, m.last_log_index.map_or(0, |last| last.saturating_sub(purged)))
        };
        let stats = &node.stats;
        if leader != leader_before && leader.is_some() {
            ControllerStats::count(&stats.leader_changes);
        }
        leader_before = leader;
        stats.leader.store(i64::from(node.is_leader()), Ordering::Relaxed);
        stats.has_leader.store(i64::from(node.knows_leader()), Ordering::Relaxed);
        stats.term.store(term, Ordering::Relaxed);
        stats.log_records.store(records, Ordering::Relaxed);
        stats.live_brokers.store(node.heartbeats.followed() as u64, Ordering::Relaxed);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
