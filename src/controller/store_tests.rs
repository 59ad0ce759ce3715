//! The controller's log and state machine on disk: openraft's own storage suite, and what a restart finds
//! (the log, the vote, the purge point, the last snapshot), including after a record torn by a crash.

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload, LogId, RaftSnapshotBuilder, StorageError, Vote};

use super::log_store::LogStore;
use super::machine::StateMachine;
use super::raft::{ControllerRaft, Entry, NodeId};
use super::replicas::ControllerEvent;

struct InTempDir;

impl StoreBuilder<ControllerRaft, LogStore, StateMachine, tempfile::TempDir> for InTempDir {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = LogStore::open(dir.path()).expect("open the log");
        let machine = StateMachine::open(dir.path()).expect("open the state machine");
        Ok((dir, log, machine))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    Suite::test_all(InTempDir).expect("openraft's storage suite");
}

fn log_id(term: u64, index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

fn entry(term: u64, index: u64) -> Entry {
    let event = ControllerEvent::ApplyBrokerId {
        cluster: "c".into(),
        broker_name: format!("b{index}"),
        address: "127.0.0.1:10911".into(),
        broker_id: 1,
        check_code: "127.0.0.1:10911;1".into(),
    };
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(vec![event]) }
}

async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    log.blocking_append(entries).await.expect("appended and flushed");
}

async fn indexes(log: &mut LogStore) -> Vec<u64> {
    log.try_get_log_entries(..).await.expect("read").iter().map(|e| e.log_id.index).collect()
}

#[tokio::test]
async fn a_restart_finds_the_log_the_vote_and_the_purge_point() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut log = LogStore::open(dir.path()).expect("open");
    append(&mut log, (1..=5).map(|i| entry(1, i)).collect()).await;
    log.save_vote(&Vote::new(2, 1)).await.expect("vote");
    log.purge(log_id(1, 2)).await.expect("purge");
    log.truncate(log_id(1, 5)).await.expect("truncate");
    drop(log);
    let mut log = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut log).await, [3, 4]);
    assert_eq!(log.read_vote().await.expect("vote"), Some(Vote::new(2, 1)));
    let state = log.get_log_state().await.expect("state");
    assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(log_id(1, 2)), Some(log_id(1, 4))));
}

/// A crash in the middle of an append leaves part of a record: it was never reported written, and the
/// log read back ends before it (and is cut there, so that the next append follows the whole ones).
#[tokio::test]
async fn a_torn_record_ends_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut log = LogStore::open(dir.path()).expect("open");
    append(&mut log, vec![entry(1, 1), entry(1, 2)]).await;
    drop(log);
    let path = dir.path().join("raft-log");
    let whole = std::fs::read(&path).expect("log file");
    let first = 8 + u32::from_be_bytes([whole[0], whole[1], whole[2], whole[3]]) as usize;
    assert!(whole.len() > first + 20, "two records");
    std::fs::write(&path, &whole[..whole.len() - 3]).expect("tear the second record");
    let mut log = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut log).await, [1]);
    append(&mut log, vec![entry(1, 2), entry(1, 3)]).await;
    drop(log);
    let mut log = LogStore::open(dir.path()).expect("reopen again");
    assert_eq!(indexes(&mut log).await, [1, 2, 3]);
}

/// A restarted node's state is its last snapshot's, without the log that led to it.
#[tokio::test]
async fn the_state_machine_restarts_from_its_snapshot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut machine = StateMachine::open(dir.path()).expect("open");
    machine.apply((1..=3).map(|i| entry(1, i))).await.expect("applied");
    let snapshot = machine.build_snapshot().await.expect("snapshot");
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 3)));
    let state = machine.applied().state.clone();
    drop(machine);
    let mut restarted = StateMachine::open(dir.path()).expect("reopen");
    let (last, _) = restarted.applied_state().await.expect("applied state");
    assert_eq!(last, Some(log_id(1, 3)));
    assert_eq!(restarted.applied().state, state);
    assert!(restarted.applied().state.group("b2").is_some());
    let current = restarted.get_current_snapshot().await.expect("read").expect("a snapshot");
    assert_eq!(current.meta.last_log_id, Some(log_id(1, 3)));
}

fn two_records(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>, usize) {
    let path = dir.join("raft-log");
    let whole = std::fs::read(&path).expect("log file");
    let first = 8 + u32::from_be_bytes([whole[0], whole[1], whole[2], whole[3]]) as usize;
    (path, whole, first)
}

/// Damage before the last record (a byte flipped in the first of three) is no torn write: the node
/// refuses to open the log, naming the file and the record's offset, and leaves the file as it was.
#[tokio::test]
async fn damage_before_the_last_record_refuses_to_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut log = LogStore::open(dir.path()).expect("open");
    append(&mut log, vec![entry(1, 1), entry(1, 2), entry(1, 3)]).await;
    drop(log);
    let (path, mut bytes, first) = two_records(dir.path());
    bytes[first + 20] ^= 0x40;
    std::fs::write(&path, &bytes).expect("damage the second record");
    let refused = LogStore::open(dir.path()).err().expect("refused");
    let message = refused.to_string();
    assert!(message.contains("raft-log") && message.contains(&format!("byte {first}")), "{message}");
    assert_eq!(std::fs::read(&path).expect("log file"), bytes, "left as it was");
}

/// A crash can leave the last record garbled at its full length, or zeros after the last whole record:
/// neither was reported written, and both are cut.
#[tokio::test]
async fn a_garbled_last_record_or_zeros_after_the_log_are_cut() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut log = LogStore::open(dir.path()).expect("open");
    append(&mut log, vec![entry(1, 1), entry(1, 2)]).await;
    drop(log);
    let (path, mut bytes, first) = two_records(dir.path());
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&path, &bytes).expect("garble the last record");
    let mut log = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut log).await, [1]);
    drop(log);
    assert_eq!(std::fs::read(&path).expect("log file").len(), first, "cut after the first");
    let mut zeros = std::fs::read(&path).expect("log file");
    zeros.extend_from_slice(&[0; 4096]);
    std::fs::write(&path, &zeros).expect("zeros after the log");
    let mut log = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut log).await, [1]);
}
