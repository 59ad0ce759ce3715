//! The controller's Raft log on disk (`controllerStorePath`): entries appended to `raft-log` and synced
//! before openraft is told they are written, the vote and the purge point in `raft-meta.json` (replaced
//! atomically). Each record is its length, its CRC32 and the entry's JSON; a record cut short or garbled
//! by a crash at the end is cut when the log is read back (it was never reported written), and damage
//! anywhere before the last record refuses to start (`read_records`). Truncating and purging
//! rewrite the file atomically: the log stays short, because snapshots let it be purged.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{LogId, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use super::raft::{ControllerRaft, Entry, NodeId};
use crate::store::fsutil;

const LOG_FILE: &str = "raft-log";
/// Files the store may hold open at once: the log, its directory while syncing, a rewrite's temporary,
/// the meta file and a snapshot's (`limits::descriptors`).
pub const FILES: usize = 8;
const META_FILE: &str = "raft-meta.json";

/// What `raft-meta.json` holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    vote: Option<Vote<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

struct Log {
    /// The file's length, for /metrics and the gate.
    size: Arc<AtomicU64>,
    dir: PathBuf,
    /// `raft-log`, opened for appending.
    file: File,
    entries: BTreeMap<u64, Entry>,
    meta: Meta,
    /// The last committed log id openraft reported (not kept across a restart: openraft finds it again).
    committed: Option<LogId<NodeId>>,
}

/// What `LogStore::terms_at` reads.
pub struct LogView {
    pub committed: Option<LogId<NodeId>>,
    pub purged: Option<LogId<NodeId>>,
    pub terms: Vec<Option<u64>>,
}

/// The log; cheap to clone (the readers openraft asks for share it).
#[derive(Clone)]
pub struct LogStore {
    log: Arc<Mutex<Log>>,
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl LogStore {
    /// Opens the log in `dir` (created if need be), as the last run left it.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let meta: Meta = match std::fs::read(dir.join(META_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(io_error)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Meta::default(),
            Err(e) => return Err(e),
        };
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (mut entries, whole) = read_records(&bytes).map_err(|offset| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: the record at byte {offset} is damaged and whole records follow it; the log is left as it is \
                     (cutting it there would lose decisions that were acknowledged). Restore the file, or remove \
                     this node's controller store so that it catches up from the others",
                    path.display()
                ),
            )
        })?;
        let purged = meta.last_purged.map(|id| id.index);
        entries.retain(|index, _| purged.is_none_or(|p| *index > p));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if whole < bytes.len() {
            tracing::warn!(path = %path.display(), kept = whole, cut = bytes.len() - whole, "the controller log's last record was not whole: cut");
            file.set_len(whole as u64)?;
            file.sync_all()?;
        }
        File::open(dir)?.sync_all()?;
        let size = Arc::new(AtomicU64::new(whole as u64));
        let log = Log { size, dir: dir.to_path_buf(), file, entries, meta, committed: None };
        Ok(LogStore { log: Arc::new(Mutex::new(log)) })
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// The log file's length, kept as it changes (for /metrics and the gate's bound).
    pub fn size(&self) -> Arc<AtomicU64> {
        self.lock().size.clone()
    }

    /// The last committed and the last purged log ids, and the term of each entry at `indexes` that the log
    /// holds, read on a blocking thread (the lock is held while a write is synced); `None` if the read
    /// failed.
    pub async fn terms_at(&self, indexes: Vec<u64>) -> Option<LogView> {
        let log = self.log.clone();
        let read = tokio::task::spawn_blocking(move || {
            let log = lock(&log);
            let terms = indexes.iter().map(|i| log.entries.get(i).map(|e| e.log_id.leader_id.term)).collect();
            LogView { committed: log.committed, purged: log.meta.last_purged, terms }
        });
        read.await.ok()
    }

    /// Runs `io` (writes and fsyncs) on a blocking thread, not on a worker of the controller's runtime,
    /// where it would hold up Raft's heartbeats and the brokers' requests.
    async fn blocking(&self, io: impl FnOnce(&mut Log) -> std::io::Result<()> + Send + 'static) -> std::io::Result<()> {
        let log = self.log.clone();
        match tokio::task::spawn_blocking(move || io(&mut lock(&log))).await {
            Ok(done) => done,
            Err(e) => Err(std::io::Error::other(format!("the log's I/O thread failed: {e}"))),
        }
    }
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    // A panic while it was held left it as the last completed operation made it.
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes `entries` as the whole log of `dir`, for benches that start from a log of a given length.
#[cfg(any(test, feature = "testing"))]
pub fn write_log(dir: &Path, entries: &[Entry]) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    for entry in entries {
        record(entry, &mut bytes)?;
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(LOG_FILE), bytes)
}

/// The whole records at the start of `bytes`, and where they end. A record cut short, or a bad one (its
/// CRC or its entry) with no whole record after it, is a torn write that was never reported written: the
/// log ends before it. A bad record followed by a whole one is damage in the middle, which cutting would
/// turn into acknowledged decisions lost: an error naming its offset, for an operator to decide.
fn read_records(bytes: &[u8]) -> Result<(BTreeMap<u64, Entry>, usize), usize> {
    let mut entries = BTreeMap::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(body) = good_record(bytes, at) else {
            if (at + 1..bytes.len()).any(|next| good_record(bytes, next).is_some()) {
                return Err(at);
            }
            break;
        };
        // Its CRC holds, so these are the bytes written: an entry that does not read is no torn write.
        let entry = serde_json::from_slice::<Entry>(body).map_err(|_| at)?;
        entries.insert(entry.log_id.index, entry);
        at += 8 + body.len();
    }
    Ok((entries, at))
}

/// The body of the record at `at`, if all of it is there, it is not empty (zeros a crash left hold
/// none) and its CRC holds.
fn good_record(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at.checked_add(8)?)?;
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let body = bytes.get(at + 8..(at + 8).checked_add(len)?)?;
    (len > 0 && crc32fast::hash(body) == crc).then_some(body)
}

fn record(entry: &Entry, out: &mut Vec<u8>) -> std::io::Result<()> {
    let body = serde_json::to_vec(entry).map_err(io_error)?;
    let len = u32::try_from(body.len()).map_err(io_error)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

impl Log {
    fn write_meta(&self, meta: &Meta) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(meta).map_err(io_error)?;
        fsutil::replace_durably(&self.dir.join(META_FILE), &bytes).map_err(io_error)
    }

    /// Replaces the log file with `entries` and keeps them.
    fn rewrite(&mut self, entries: BTreeMap<u64, Entry>) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for entry in entries.values() {
            record(entry, &mut bytes)?;
        }
        let path = self.dir.join(LOG_FILE);
        fsutil::replace_durably(&path, &bytes).map_err(io_error)?;
        self.file = OpenOptions::new().append(true).open(&path)?;
        self.entries = entries;
        self.size.store(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Appends and syncs; on a failure the file is cut back to where it was and nothing is kept.
    fn append(&mut self, new: Vec<Entry>) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for entry in &new {
            record(entry, &mut bytes)?;
        }
        let before = self.file.metadata()?.len();
        let written = self.file.write_all(&bytes).and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            let _ = self.file.set_len(before);
            return Err(e);
        }
        self.entries.extend(new.into_iter().map(|e| (e.log_id.index, e)));
        self.size.store(before + bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

impl RaftLogReader<ControllerRaft> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        Ok(self.lock().entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<ControllerRaft> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<ControllerRaft>, StorageError<NodeId>> {
        let log = self.lock();
        let last_purged_log_id = log.meta.last_purged;
        let last_log_id = log.entries.values().next_back().map(|e| e.log_id).or(last_purged_log_id);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    /// Kept in memory for the gate (`network::keeps_committed`): openraft takes every entry up to it as
    /// this node's own.
    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError<NodeId>> {
        self.lock().committed = committed;
        Ok(())
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let vote = *vote;
        self.blocking(move |log| {
            let meta = Meta { vote: Some(vote), ..log.meta.clone() };
            log.write_meta(&meta)?;
            log.meta = meta;
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.lock().meta.vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<ControllerRaft>) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        match self.blocking(move |log| log.append(entries)).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let error = StorageIOError::write_logs(&e).into();
                callback.log_io_completed(Err(e));
                Err(error)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |log| {
            let kept = log.entries.range(..log_id.index).map(|(i, e)| (*i, e.clone())).collect();
            log.rewrite(kept)
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |log| {
            // The purge point first: entries at or below it are dropped when read back, whether or not the
            // rewrite below got to run.
            let meta = Meta { last_purged: Some(log_id), ..log.meta.clone() };
            log.write_meta(&meta)?;
            log.meta = meta;
            let kept = log.entries.range(log_id.index + 1..).map(|(i, e)| (*i, e.clone())).collect();
            log.rewrite(kept)
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
