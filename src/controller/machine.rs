//! The replicated state as openraft applies it: the committed entries' events applied in order, and
//! snapshots of it in `raft-snapshot.json` (replaced atomically) from which a restart or a lagging node
//! starts, instead of the whole log.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{EntryPayload, LogId, RaftSnapshotBuilder, StorageError, StorageIOError, StoredMembership};
use serde::{Deserialize, Serialize};

use super::raft::{ControllerRaft, Entry, NodeId};
use super::replicas::ReplicasInfo;
use crate::store::fsutil;

const SNAPSHOT_FILE: &str = "raft-snapshot.json";

type Membership = StoredMembership<NodeId, openraft::BasicNode>;
type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

/// `raft-snapshot.json`: the snapshot's metadata and the state it holds.
#[derive(Deserialize)]
struct StoredSnapshot {
    meta: Meta,
    state: ReplicasInfo,
}

/// `raft-snapshot.json`'s metadata alone (the state is skipped over, not built).
#[derive(Deserialize)]
struct MetaOnly {
    meta: Meta,
}

/// Whether `data` is a snapshot this node can install as `meta`, sent by a leader of `term`: it reads as
/// one (a garbled one would make openraft stop the node's Raft for good), it holds that metadata itself
/// (the file is what a restart reads), its last entry's term is not above the leader's, and its state is
/// within the bounds that decisions keep. `network` refuses its last chunk otherwise.
pub fn installable(data: &[u8], meta: &Meta, term: u64) -> bool {
    let Ok(mut stored) = serde_json::from_slice::<StoredSnapshot>(data) else { return false };
    stored.state.recount();
    stored.meta == *meta && meta.last_log_id.is_none_or(|id| id.leader_id.term <= term) && stored.state.within_bounds()
}

/// The same, written from borrowed parts.
#[derive(Serialize)]
struct SnapshotToStore<'a> {
    meta: &'a Meta,
    state: &'a ReplicasInfo,
}

/// The applied state, shared by the state machine, its snapshot builder and whoever decides requests.
pub struct Applied {
    pub state: ReplicasInfo,
    pub last_applied: Option<LogId<NodeId>>,
    pub membership: Membership,
    /// The last snapshot's metadata; its data is its file, read when a follower needs it (never kept in
    /// memory: the state is already there once).
    snapshot: Option<Meta>,
}

#[derive(Clone)]
pub struct StateMachine {
    dir: PathBuf,
    applied: Arc<Mutex<Applied>>,
    /// Held while the snapshot file is written, so that two writes never race to it.
    file: Arc<Mutex<()>>,
    /// When the last snapshot was written, in Unix seconds (for /metrics).
    snapshot_time: Arc<AtomicU64>,
}

impl StateMachine {
    /// The state of the last snapshot in `dir`, or an empty one; the log's entries after it are applied
    /// again by openraft once they are known committed.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(SNAPSHOT_FILE);
        fsutil::remove_stale_temporaries(&path);
        let mut applied = Applied {
            state: ReplicasInfo::default(),
            last_applied: None,
            membership: Membership::default(),
            snapshot: None,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: StoredSnapshot = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
                applied.last_applied = stored.meta.last_log_id;
                applied.membership = stored.meta.last_membership.clone();
                applied.state = stored.state;
                applied.state.recount();
                applied.snapshot = Some(stored.meta);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let snapshot_time = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        Ok(StateMachine {
            dir: dir.to_path_buf(),
            applied: Arc::new(Mutex::new(applied)),
            file: Arc::default(),
            snapshot_time: Arc::new(AtomicU64::new(snapshot_time)),
        })
    }

    /// When the last snapshot was written, in Unix seconds, kept as it changes (for /metrics).
    pub fn snapshot_time(&self) -> Arc<AtomicU64> {
        self.snapshot_time.clone()
    }

    /// The applied state, to decide requests against (held briefly: the state machine waits meanwhile).
    pub fn applied(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `bytes`, the snapshot `meta` names, as the snapshot file (on a blocking thread, no lock on the
    /// state held: its fsyncs hold up no decision) and notes it as the last one; a snapshot older than one
    /// noted meanwhile (a build that an install overtook) is not written over it.
    async fn write_file(&self, bytes: Vec<u8>, meta: &Meta) -> std::io::Result<Vec<u8>> {
        let (this, meta) = (self.clone(), meta.clone());
        let written = tokio::task::spawn_blocking(move || {
            let _one_writer = this.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let newer = this.applied().snapshot.as_ref().is_some_and(|noted| noted.last_log_id > meta.last_log_id);
            if newer {
                return Ok(bytes);
            }
            fsutil::write_atomically(&this.dir.join(SNAPSHOT_FILE), &bytes).map_err(std::io::Error::other)?;
            this.applied().snapshot = Some(meta);
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            this.snapshot_time.store(now, Ordering::Relaxed);
            Ok(bytes)
        });
        written.await.map_err(std::io::Error::other)?
    }
}

/// Writes `state` as the snapshot of `dir` up to `last_log_id`, for benches that start from one.
#[cfg(feature = "testing")]
pub fn write_snapshot(dir: &Path, state: &ReplicasInfo, last_log_id: LogId<NodeId>) -> std::io::Result<()> {
    let meta = Meta {
        last_log_id: Some(last_log_id),
        last_membership: Membership::default(),
        snapshot_id: format!("{}-{}", last_log_id.leader_id, last_log_id.index),
    };
    let bytes = serde_json::to_vec(&SnapshotToStore { meta: &meta, state }).map_err(std::io::Error::other)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(SNAPSHOT_FILE), bytes)
}

impl RaftSnapshotBuilder<ControllerRaft> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<ControllerRaft>, StorageError<NodeId>> {
        let (meta, bytes) = {
            let applied = self.applied();
            let last = applied.last_applied;
            let meta = Meta {
                last_log_id: last,
                last_membership: applied.membership.clone(),
                snapshot_id: last.map_or_else(|| "empty".to_string(), |id| format!("{}-{}", id.leader_id, id.index)),
            };
            let bytes = serde_json::to_vec(&SnapshotToStore { meta: &meta, state: &applied.state })
                .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
            (meta, bytes)
        };
        let data = self.write_file(bytes, &meta).await.map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<ControllerRaft> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        let applied = self.applied();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut applied = self.applied();
        let mut results = Vec::new();
        for entry in entries {
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(events) => {
                    for event in events {
                        applied.state.apply(event);
                    }
                }
                EntryPayload::Membership(m) => applied.membership = Membership::new(Some(entry.log_id), m.clone()),
            }
            applied.last_applied = Some(entry.log_id);
            results.push(());
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let signature = Some(meta.signature());
        // The data is the leader's snapshot file: what this node keeps as its own.
        let bytes = snapshot.into_inner();
        let mut state = serde_json::from_slice::<StoredSnapshot>(&bytes)
            .map_err(|e| StorageIOError::read_snapshot(signature.clone(), &e))?
            .state;
        state.recount();
        // Written first: not installed (the state stays the one the last applied entry left) if it fails.
        self.write_file(bytes, meta).await.map_err(|e| StorageIOError::write_snapshot(signature, &e))?;
        let mut applied = self.applied();
        applied.state = state;
        applied.last_applied = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        Ok(())
    }

    /// The snapshot file, with the metadata it holds itself: a snapshot built since the last one was
    /// noted is sent with its own metadata, never the older one's.
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<ControllerRaft>>, StorageError<NodeId>> {
        if self.applied().snapshot.is_none() {
            return Ok(None);
        }
        let (path, file) = (self.dir.join(SNAPSHOT_FILE), self.file.clone());
        let read = tokio::task::spawn_blocking(move || {
            let _no_writer = file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let data = std::fs::read(path)?;
            let stored: MetaOnly = serde_json::from_slice(&data).map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>((stored.meta, data))
        });
        let (meta, data) = match read.await {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => return Err(StorageIOError::read_snapshot(None, &e).into()),
            Err(e) => return Err(StorageIOError::read_snapshot(None, &std::io::Error::other(e)).into()),
        };
        Ok(Some(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn meta(index: u64) -> Meta {
        Meta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 0), index)),
            last_membership: Membership::default(),
            snapshot_id: format!("1-0-{index}"),
        }
    }

    fn data(meta: &Meta) -> Vec<u8> {
        serde_json::to_vec(&SnapshotToStore { meta, state: &ReplicasInfo::default() }).expect("a snapshot")
    }

    /// A build that an install overtook (the build read the state at index 5; the leader's snapshot of
    /// index 10 was installed before the build's file was written) leaves the newer file, which is what
    /// the node sends and what it restarts from.
    #[tokio::test]
    async fn a_build_overtaken_by_an_install_leaves_the_newer_file() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut machine = StateMachine::open(dir.path()).expect("open");
        let newer = meta(10);
        machine.install_snapshot(&newer, Box::new(Cursor::new(data(&newer)))).await.expect("installed");
        let older = meta(5);
        machine.write_file(data(&older), &older).await.expect("the late build");
        let current = machine.get_current_snapshot().await.expect("read").expect("a snapshot");
        assert_eq!(current.meta.last_log_id.map(|id| id.index), Some(10));
        let restarted = StateMachine::open(dir.path()).expect("open again");
        assert_eq!(restarted.applied().last_applied.map(|id| id.index), Some(10));
    }
}
