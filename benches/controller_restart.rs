//! What a controller node does at start before it can answer: read its log and its snapshot, and apply
//! the entries the snapshot lacks (openraft then only elects). The decisions are a master moving a
//! replica in and out of its SyncStateSet, so the state stays the same size whatever their number.
//!
//! - `log_only/{N}`: N decisions in the log and no snapshot, what a DLedger controller replays at every
//!   start (apache/rocketmq#5585): grows with N;
//! - `snapshot_and_tail/{N}`: the state after N decisions in a snapshot and the 999 decisions after it in
//!   the log, the most a rocketns node keeps between snapshots (one every 1,000): flat in N.

use std::collections::BTreeSet;
use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use openraft::storage::{RaftLogReader, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, LogId};
use rocketns::controller::log_store::{self, LogStore};
use rocketns::controller::machine::{self, StateMachine};
use rocketns::controller::raft::Entry;
use rocketns::controller::replicas::{ControllerEvent, ReplicasInfo};

const TAIL: u64 = 999;

fn event(i: u64) -> ControllerEvent {
    let group = "broker-a".to_string();
    match i {
        0 | 1 => ControllerEvent::ApplyBrokerId {
            cluster: "DefaultCluster".into(),
            broker_name: group,
            address: format!("127.0.0.1:{}", 10911 + i),
            broker_id: i as i64 + 1,
            check_code: format!("127.0.0.1:{};1700000000000", 10911 + i),
        },
        2 => ControllerEvent::ElectMaster { broker_name: group, new_master: Some(1) },
        _ => {
            let set: BTreeSet<i64> = if i.is_multiple_of(2) { [1, 2].into() } else { [1].into() };
            ControllerEvent::AlterSyncStateSet { broker_name: group, sync_state_set: set }
        }
    }
}

fn entry(index: u64) -> Entry {
    Entry { log_id: log_id(index), payload: EntryPayload::Normal(vec![event(index - 1)]) }
}

fn log_id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 0), index)
}

/// A store of `decisions` decisions: all in the log, or the first ones in a snapshot and the last `TAIL`
/// in the log.
fn store(dir: &Path, decisions: u64, snapshot: bool) {
    let first_in_log = if snapshot { decisions - TAIL + 1 } else { 1 };
    if snapshot {
        let mut state = ReplicasInfo::default();
        for i in 0..first_in_log - 1 {
            state.apply(&event(i));
        }
        machine::write_snapshot(dir, &state, log_id(first_in_log - 1)).expect("snapshot");
    }
    let entries: Vec<Entry> = (first_in_log..=decisions).map(entry).collect();
    log_store::write_log(dir, &entries).expect("log");
}

/// Opens the store and applies what the snapshot lacks, as a node's start does; returns the state.
async fn restart(dir: &Path) -> usize {
    let mut log = LogStore::open(dir).expect("log");
    let mut sm = StateMachine::open(dir).expect("state machine");
    let (applied, _) = sm.applied_state().await.expect("applied");
    let from = applied.map_or(1, |id| id.index + 1);
    let entries = log.try_get_log_entries(from..).await.expect("entries");
    sm.apply(entries).await.expect("applied").len()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("controller_restart");
    group.sample_size(10);
    for decisions in [10_000u64, 100_000] {
        for (name, snapshot) in [("log_only", false), ("snapshot_and_tail", true)] {
            let dir = tempfile::tempdir().expect("temp dir");
            store(dir.path(), decisions, snapshot);
            group.bench_with_input(BenchmarkId::new(name, decisions), &decisions, |b, _| {
                b.iter(|| black_box(runtime.block_on(restart(dir.path()))));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
