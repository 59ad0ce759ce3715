//! The KV config store (Java's `KVConfigManager`): namespace → key → value, kept in memory and persisted to
//! `kvConfigPath` in Java's file format, `{"configTable":{ns:{k:v}}}`.
//!
//! Acknowledged means on disk, and a change that fails changes nothing: each change builds the next table,
//! writes the whole file atomically (a crash at any moment leaves a file that parses and holds every
//! acknowledged write), and only then publishes the table in memory. A change that cannot be written leaves
//! memory and file as they were. Changes are made one at a time, through a [`KvWriter`]; whoever holds it
//! also decides what else follows a change in the same order (ORDER_TOPIC_CONFIG's routes, `processor/kv.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Deserialize;

use crate::protocol::json::{self, JsonStyle};

/// The namespace of ordered-topic configs (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

type Table = BTreeMap<String, BTreeMap<String, String>>;

#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error("cannot read KV config file {path}: {message}")]
    Load { path: String, message: String },
    #[error("cannot write KV config file {path}: {source}")]
    Persist { path: String, source: std::io::Error },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvFile {
    #[serde(default)]
    config_table: BTreeMap<String, BTreeMap<String, Option<String>>>,
}

pub struct KvConfigStore {
    path: PathBuf,
    /// The table as last written to the file.
    table: Arc<ArcSwap<Table>>,
    /// One change at a time, from building the next table to publishing it.
    writer: Arc<tokio::sync::Mutex<()>>,
}

/// The right to change the store, one change after another, held by one caller at a time. A change's file
/// write and its publication run together on the blocking pool, holding the turn: a caller that stops
/// waiting for one (its connection closed) cannot let the next change start before it ends, nor leave
/// the file and the table apart.
pub struct KvWriter<'a> {
    store: &'a KvConfigStore,
    turn: Arc<tokio::sync::OwnedMutexGuard<()>>,
}

impl KvConfigStore {
    /// Loads `path`; a missing file is an empty store, a malformed one is an error (as in Java).
    pub fn load(path: &Path) -> Result<Self, KvError> {
        crate::store::fsutil::remove_stale_temporaries(path);
        let table = match std::fs::read(path) {
            Ok(bytes) => {
                let file: KvFile = crate::protocol::lenient::from_fastjson_slice(&bytes)
                    .map_err(|e| KvError::Load { path: path.display().to_string(), message: e.to_string() })?;
                file.config_table
                    .into_iter()
                    .map(|(ns, kv)| (ns, kv.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table::new(),
            Err(e) => return Err(KvError::Load { path: path.display().to_string(), message: e.to_string() }),
        };
        Ok(KvConfigStore {
            path: path.to_path_buf(),
            table: Arc::new(ArcSwap::from_pointee(table)),
            writer: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.load().get(namespace).and_then(|kv| kv.get(key)).cloned()
    }

    /// The whole namespace, or `None` when it was never created.
    pub fn namespace(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.table.load().get(namespace).cloned()
    }

    pub fn entry_count(&self) -> usize {
        self.table.load().values().map(BTreeMap::len).sum()
    }

    /// Waits for the turn to change the store.
    pub async fn writer(&self) -> KvWriter<'_> {
        KvWriter { store: self, turn: Arc::new(self.writer.clone().lock_owned().await) }
    }

    #[cfg(any(test, feature = "testing"))]
    /// Stores the pair; returns once the file holds it (see [`KvWriter::put`]).
    pub async fn put(&self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        self.writer().await.put(namespace, key, value).await
    }

    #[cfg(any(test, feature = "testing"))]
    /// Removes the key (see [`KvWriter::delete`]).
    pub async fn delete(&self, namespace: &str, key: &str) -> Result<bool, KvError> {
        self.writer().await.delete(namespace, key).await
    }
}

impl KvWriter<'_> {
    /// Stores the pair: written to the file, then visible. On an error nothing changed.
    pub async fn put(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        let mut next = Table::clone(&self.store.table.load());
        next.entry(namespace.to_string()).or_default().insert(key.to_string(), value.to_string());
        self.publish(next).await
    }

    /// Removes the key (the namespace stays, possibly empty): written, then visible. Returns whether it
    /// existed; nothing is written when it did not. On an error nothing changed.
    pub async fn delete(&mut self, namespace: &str, key: &str) -> Result<bool, KvError> {
        let current = self.store.table.load_full();
        if !current.get(namespace).is_some_and(|kv| kv.contains_key(key)) {
            return Ok(false);
        }
        let mut next = Table::clone(&current);
        if let Some(kv) = next.get_mut(namespace) {
            kv.remove(key);
        }
        self.publish(next).await.map(|()| true)
    }

    /// Writes `next` to the file, then makes it the table, both on the blocking pool with the turn held. If
    /// the write failed but left the new content in place (`fsutil::ReplaceError::Replaced`), the table
    /// follows the file, and the change is still reported as failed.
    async fn publish(&mut self, next: Table) -> Result<(), KvError> {
        let (path, table, turn) = (self.store.path.clone(), self.store.table.clone(), self.turn.clone());
        let persist_error = |source| KvError::Persist { path: self.store.path.display().to_string(), source };
        let written = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let written = crate::store::fsutil::replace_durably(&path, &encode_kv_file(&next));
            if !matches!(written, Err(crate::store::fsutil::ReplaceError::Unchanged(_))) {
                table.store(Arc::new(next));
            }
            written
        })
        .await
        .map_err(|e| persist_error(std::io::Error::other(e)))?;
        written.map_err(|e| persist_error(std::io::Error::other(e.to_string())))
    }
}

fn write_string_map(out: &mut Vec<u8>, map: &BTreeMap<String, String>) {
    out.push(b'{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_key(out, k);
        json::write_str(out, v, JsonStyle::Fastjson);
    }
    out.push(b'}');
}

/// `KVConfigSerializeWrapper`: `{"configTable":{"ns":{"k":"v"}}}`.
fn encode_kv_file(table: &Table) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"configTable\":{");
    for (i, (ns, kv)) in table.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_key(&mut out, ns);
        write_string_map(&mut out, kv);
    }
    out.extend_from_slice(b"}}");
    out
}

/// `KVTable`: `{"table":{"k":"v"}}`.
pub fn encode_kv_table(kv: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"table\":");
    write_string_map(&mut out, kv);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// KVConfigSerializeWrapperTest#testEncodeAndDecode: the file format round-trips.
    #[test]
    fn file_format_round_trips() {
        let mut table = Table::new();
        let ns = table.entry("ORDER_TOPIC_CONFIG".to_string()).or_default();
        ns.insert("a".into(), "broker-a:4".into());
        ns.insert("b".into(), "broker-b:4".into());
        ns.insert("c".into(), "x\"y".into());
        let bytes = encode_kv_file(&table);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"a":"broker-a:4","b":"broker-b:4","c":"x\"y"}}}"#
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(**KvConfigStore::load(&path).unwrap().table.load(), table);
    }

    /// KVConfigManagerTest#testPutKVConfig and #testDeleteKVConfig.
    #[tokio::test]
    async fn put_get_delete_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv").join("kvConfig.json");
        let store = KvConfigStore::load(&path).unwrap();
        store.put(ORDER_TOPIC_CONFIG, "UnitTest", "test").await.unwrap();
        assert!(store.namespace(ORDER_TOPIC_CONFIG).is_some());
        assert_eq!(store.get(ORDER_TOPIC_CONFIG, "UnitTest").as_deref(), Some("test"));
        assert!(!store.delete("absent-namespace", "UnitTest").await.unwrap());
        assert!(store.namespace("absent-namespace").is_none());
        assert!(store.delete(ORDER_TOPIC_CONFIG, "UnitTest").await.unwrap());
        assert_eq!(store.get(ORDER_TOPIC_CONFIG, "UnitTest"), None);
        assert_eq!(store.namespace(ORDER_TOPIC_CONFIG), Some(BTreeMap::new()), "the namespace stays");
        store.put("ns", "k", "v").await.unwrap();
        let reloaded = KvConfigStore::load(&path).unwrap();
        assert_eq!(reloaded.get("ns", "k").as_deref(), Some("v"));
        assert_eq!(reloaded.entry_count(), 1);
    }

    /// A change whose caller stops waiting once its write has started (a request whose connection closed)
    /// still ends, and is published, before the next change starts: the next one sees it, and the file
    /// holds both.
    #[tokio::test]
    async fn a_change_given_up_on_still_ends_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        let store = KvConfigStore::load(&path).unwrap();
        let big = "x".repeat(4 << 20);
        {
            let mut writer = store.writer().await;
            let put = writer.put("ns", "first", &big);
            // One poll: the table is built and its write handed to the blocking pool; then the caller goes.
            assert!(tokio::time::timeout(Duration::ZERO, put).await.is_err(), "the write takes a moment");
        }
        store.put("ns", "second", "v").await.unwrap();
        assert_eq!(store.get("ns", "first").as_deref(), Some(big.as_str()), "the first change was published");
        let reloaded = KvConfigStore::load(&path).unwrap();
        assert_eq!(reloaded.entry_count(), 2, "the file holds both");
    }

    #[test]
    fn malformed_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        std::fs::write(&path, b"{\"configTable\":").unwrap();
        assert!(KvConfigStore::load(&path).is_err());
    }
}
