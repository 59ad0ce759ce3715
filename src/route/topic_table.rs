//! `TopicTable`: topic name → route, the table every lookup reads.
//!
//! 4,096 copy-on-write shards of plain hash tables: a lookup hashes the name once and probes one table (one or
//! two cache misses, where a persistent trie takes several); cloning the table for the next snapshot is one
//! reference count; changing a topic copies only its shard, 1/4,096 of the table, once per snapshot. So many
//! shards that a broker's change among a million routes costs about what it costs alone (a few hundred topics
//! a shard; fewer shards made each copy larger), for a longer shard list copied per snapshot published
//! (`cargo bench --bench registration -- one_broker_change`; figures in perf/README.md).

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use crate::route::FastHasher;

const SHARDS: usize = 4096;

type Shard<V> = HashTable<(Arc<str>, V)>;

#[derive(Clone)]
pub struct TopicTable<V> {
    shards: Arc<Vec<Arc<Shard<V>>>>,
    hasher: FastHasher,
    len: usize,
}

impl<V> Default for TopicTable<V> {
    fn default() -> Self {
        TopicTable {
            shards: Arc::new((0..SHARDS).map(|_| Arc::new(HashTable::new())).collect()),
            hasher: FastHasher::default(),
            len: 0,
        }
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for TopicTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Bits 32-43 of the hash: hashbrown takes a slot's position from the low bits and its tag from the top seven,
/// so a shard chosen by either would hold keys that all share them. With the top byte (as until issue 20)
/// every key of a shard had the same tag, and a probe compared the key with every entry of a group: up to 16
/// string comparisons per lookup at 100,000 topics, and per insert in the writer.
fn shard_index(hash: u64) -> usize {
    ((hash >> 32) & (SHARDS as u64 - 1)) as usize
}

impl<V> TopicTable<V> {
    pub fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        let hash = self.hasher.hash_one(key);
        self.shards[shard_index(hash)].find(hash, |(k, _)| **k == *key).map(|(k, v)| (k, v))
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get_key_value(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.shards.iter().flat_map(|shard| shard.iter().map(|(k, v)| (k, v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(k, _)| k)
    }
}

impl<V: Clone> TopicTable<V> {
    /// The shard of `hash`, copied first if an older snapshot still shares it.
    fn shard_mut(&mut self, hash: u64) -> &mut Shard<V> {
        Arc::make_mut(&mut Arc::make_mut(&mut self.shards)[shard_index(hash)])
    }

    pub fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let hash = self.hasher.hash_one(&*key);
        let hasher = self.hasher.clone();
        let shard = self.shard_mut(hash);
        if let Some((_, slot)) = shard.find_mut(hash, |(k, _)| *k == key) {
            return Some(std::mem::replace(slot, value));
        }
        shard.insert_unique(hash, (key, value), |(k, _)| hasher.hash_one(&**k));
        self.len += 1;
        None
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        // Look before copying a shard that does not hold the key.
        self.shards[shard_index(hash)].find(hash, |(k, _)| **k == *key)?;
        let removed = self.shard_mut(hash).find_entry(hash, |(k, _)| **k == *key).ok().map(|e| e.remove().0.1);
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_on_write_snapshots() {
        const KEYS: usize = 20_000;
        let mut a: TopicTable<usize> = TopicTable::default();
        for i in 0..KEYS {
            a.insert(format!("t{i}").into(), i);
        }
        let b = a.clone();
        a.insert("t7".into(), 70);
        a.remove("t8");
        a.insert("new".into(), 1);
        assert_eq!((a.get("t7"), a.get("t8"), a.get("new"), a.len()), (Some(&70), None, Some(&1), KEYS));
        assert_eq!((b.get("t7"), b.get("t8"), b.get("new"), b.len()), (Some(&7), Some(&8), None, KEYS));
        assert_eq!(a.iter().count(), KEYS);
        assert_eq!(a.remove("absent"), None);
        // Keys spread over the shards, and within a shard over hashbrown's tags (the top seven bits).
        let used = a.shards.iter().filter(|s| !s.is_empty()).count();
        assert!(used > SHARDS * 9 / 10, "{used} shards used by {KEYS} keys");
        let tags_per_shard: usize = a
            .shards
            .iter()
            .map(|s| {
                s.iter().map(|(k, _)| a.hasher.hash_one(&**k) >> 57).collect::<std::collections::HashSet<_>>().len()
            })
            .sum();
        assert!(tags_per_shard > KEYS * 9 / 10, "{KEYS} keys have {tags_per_shard} distinct tags within their shards");
        // Only the shards that changed were copied.
        let shared = a.shards.iter().zip(b.shards.iter()).filter(|(x, y)| Arc::ptr_eq(x, y)).count();
        assert!(shared >= SHARDS - 3, "{shared} shards still shared");
    }
}
