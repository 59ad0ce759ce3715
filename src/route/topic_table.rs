//! `TopicTable`: topic name → route, the table every lookup reads.
//!
//! 4,096 copy-on-write shards: a lookup hashes the name once and reads one shard; cloning the table for the
//! next snapshot is one reference count; changing a topic copies only its shard, 1/4,096 of the table, once
//! per snapshot. So many shards that a broker's change among a million routes costs about what it costs alone
//! (a few hundred topics a shard; fewer shards made each copy larger), for a longer shard list copied per
//! snapshot published (`cargo bench --bench registration -- one_broker_change`; figures in perf/README.md).
//!
//! A shard is laid out for the lookup alone (issue 46): one open-addressed array of 32-byte entries, two a
//! cache line, each holding the name's full hash, the route and the name itself when it fits (14 bytes;
//! longer names sit behind one thin pointer). A hit among a million routes is then one cache miss (two for
//! a longer name), where a hash map of `(Arc<str>, V)` took three (its control bytes, its slot, the name
//! behind the slot). Robin Hood order keeps every probe short, a miss's too: it stops at the first entry
//! nearer its home than the probe is. 64-byte entries with 46 bytes inline cost 107 MB more at a million
//! routes (perf/README.md, "A million routes, laid out for the lookup").

use std::hash::BuildHasher;
use std::sync::Arc;

use crate::route::FastHasher;

const SHARDS: usize = 4096;

/// The longest name kept in its entry.
const INLINE: usize = 14;

/// A topic's name, in its entry when it fits.
#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(arcstr::ArcStr),
}

impl Key {
    fn new(name: &str) -> Key {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Key::Inline { len, bytes }
            }
            _ => Key::Shared(name.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Shared(name) => name.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Key::Inline { .. } => std::str::from_utf8(self.as_bytes()).expect("copied from a str whole"),
            Key::Shared(name) => name,
        }
    }
}

/// Half a cache line: 8 bytes of hash, the value, the name.
#[derive(Clone)]
#[repr(align(32))]
struct Entry<V> {
    hash: u64,
    value: V,
    key: Key,
}

/// An open-addressed array in Robin Hood order, never more than 7/8 full (so a probe always ends). Held
/// behind one thin `Arc`, so that the list of shards each snapshot copies is 8 bytes a shard.
#[derive(Clone)]
struct Shard<V> {
    slots: Box<[Option<Entry<V>>]>,
    len: u32,
}

/// An entry's first slot: the hash's low 32 bits scaled to the capacity.
fn home(hash: u64, capacity: usize) -> usize {
    (((hash & 0xffff_ffff) * capacity as u64) >> 32) as usize
}

/// How far slot `at` is from the first slot of `hash`. A compare, not `%`: a division at every step of a
/// probe took a third of a million routes' registration (perf/README.md, "A million routes").
fn distance(hash: u64, at: usize, capacity: usize) -> usize {
    let home = home(hash, capacity);
    if at >= home { at - home } else { at + capacity - home }
}

impl<V> Shard<V> {
    /// The slot of `key`, if held.
    fn position(&self, hash: u64, key: &[u8]) -> Option<usize> {
        self.probe(hash, key).ok()
    }

    /// The slot of `key`, or where a miss stopped: the slot the key would take, and its distance there.
    fn probe(&self, hash: u64, key: &[u8]) -> Result<usize, Miss> {
        let capacity = self.slots.len();
        let mut at = home(hash, capacity);
        for probed in 0..capacity {
            let Some(entry) = &self.slots[at] else { return Err(Miss { at, probed }) };
            if entry.hash == hash && entry.key.as_bytes() == key {
                return Ok(at);
            }
            if distance(entry.hash, at, capacity) < probed {
                return Err(Miss { at, probed });
            }
            at = if at + 1 == capacity { 0 } else { at + 1 };
        }
        Err(Miss { at, probed: capacity })
    }
}

/// Where a probe for an absent key stopped: the first slot that is empty or holds an entry nearer its
/// own first slot than the key would be (`probed`), which is where Robin Hood order puts the key.
#[derive(Debug, Clone, Copy)]
struct Miss {
    at: usize,
    probed: usize,
}

impl<V: Clone> Shard<V> {
    /// Whether one more entry would make the shard more than 7/8 full.
    fn full(&self) -> bool {
        (self.len as usize + 1) * 8 > self.slots.len() * 7
    }

    /// Places an entry known to be absent, taking richer entries' slots on the way (Robin Hood).
    fn place(&mut self, entry: Entry<V>) {
        if self.full() {
            self.resize((self.len as usize + 1) * 3 / 2 + 1);
        }
        let at = home(entry.hash, self.slots.len());
        self.place_from(Miss { at, probed: 0 }, entry);
    }

    /// Places an absent entry from where its probe stopped (the shard not resized since): the slots
    /// before it were read already.
    fn place_from(&mut self, miss: Miss, mut entry: Entry<V>) {
        let slots = &mut self.slots;
        let capacity = slots.len();
        let Miss { mut at, mut probed } = miss;
        while let Some(held) = &mut slots[at] {
            let held_distance = distance(held.hash, at, capacity);
            if held_distance < probed {
                std::mem::swap(held, &mut entry);
                probed = held_distance;
            }
            at = if at + 1 == capacity { 0 } else { at + 1 };
            probed += 1;
        }
        slots[at] = Some(entry);
        self.len += 1;
    }

    /// Takes the entry at `at` out and moves the entries after it one slot back (backward-shift deletion).
    fn take(&mut self, mut at: usize) -> Option<Entry<V>> {
        let slots = &mut self.slots;
        let capacity = slots.len();
        let removed = slots[at].take();
        loop {
            let next = if at + 1 == capacity { 0 } else { at + 1 };
            match &slots[next] {
                Some(e) if distance(e.hash, next, capacity) > 0 => slots[at] = slots[next].take(),
                _ => break,
            }
            at = next;
        }
        self.len -= 1;
        if self.len == 0 {
            self.slots = Box::new([]);
        } else if (self.len as usize) * 4 < self.slots.len() && self.slots.len() > 16 {
            self.resize(self.len as usize * 3 / 2 + 1);
        }
        removed
    }

    fn resize(&mut self, capacity: usize) {
        let old = std::mem::replace(&mut self.slots, (0..capacity.max(8)).map(|_| None).collect());
        self.len = 0;
        for entry in old.into_vec().into_iter().flatten() {
            self.place(entry);
        }
    }
}

/// A held topic as one pointer, ordered by name: a route file's sorted list of a million topics is 8 MB,
/// where `(&str, &V)` pairs were 24.
pub struct TopicEntry<'a, V>(&'a Entry<V>);

impl<'a, V> TopicEntry<'a, V> {
    pub fn name(&self) -> &'a str {
        self.0.key.as_str()
    }

    pub fn value(&self) -> &'a V {
        &self.0.value
    }
}

impl<V> PartialEq for TopicEntry<'_, V> {
    fn eq(&self, other: &Self) -> bool {
        self.0.key.as_bytes() == other.0.key.as_bytes()
    }
}

impl<V> Eq for TopicEntry<'_, V> {}

impl<V> PartialOrd for TopicEntry<'_, V> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Byte order, which is `str`'s.
impl<V> Ord for TopicEntry<'_, V> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key.as_bytes().cmp(other.0.key.as_bytes())
    }
}

#[derive(Clone)]
pub struct TopicTable<V> {
    shards: Arc<[Arc<Shard<V>>]>,
    hasher: FastHasher,
    len: usize,
}

impl<V> Default for TopicTable<V> {
    fn default() -> Self {
        // An empty shard each, not one shared: a snapshot's copy of the list counts each shard's references,
        // and 4,096 increments of one counter wait on each other (`publish_one_change/1000`, +16 %).
        let shards = (0..SHARDS).map(|_| Arc::new(Shard { slots: Box::new([]), len: 0 })).collect();
        TopicTable { shards, hasher: FastHasher::default(), len: 0 }
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for TopicTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Bits 32-43 of the hash, so that a shard's keys differ in the low 32 bits that place them within it.
fn shard_index(hash: u64) -> usize {
    ((hash >> 32) & (SHARDS as u64 - 1)) as usize
}

impl<V> TopicTable<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        let hash = self.hasher.hash_one(key);
        let shard = &self.shards[shard_index(hash)];
        let at = shard.position(hash, key.as_bytes())?;
        shard.slots[at].as_ref().map(|e| &e.value)
    }

    /// Where `key` is (or would be) in the table: keys sorted by it visit each shard once, in slot order.
    pub fn layout_order(&self, key: &str) -> u64 {
        let hash = self.hasher.hash_one(key);
        ((shard_index(hash) as u64) << 32) | (hash & 0xffff_ffff)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries().map(|e| (e.name(), e.value()))
    }

    pub fn entries(&self) -> impl Iterator<Item = TopicEntry<'_, V>> {
        self.shards.iter().flat_map(|shard| shard.slots.iter().flatten().map(TopicEntry))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }
}

impl<V: Clone> TopicTable<V> {
    /// The shard of `hash`, copied first (and the list of shards) if an older snapshot still shares it.
    fn shard_mut(&mut self, hash: u64) -> &mut Shard<V> {
        Arc::make_mut(&mut Arc::make_mut(&mut self.shards)[shard_index(hash)])
    }

    /// The name is copied into its entry (or an `ArcStr` of its own): the table keeps no caller's `Arc`.
    pub fn insert(&mut self, key: &str, value: V) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard_mut(hash);
        let miss = match shard.probe(hash, key.as_bytes()) {
            Ok(at) => {
                let held = shard.slots[at].as_mut().map(|e| &mut e.value)?;
                return Some(std::mem::replace(held, value));
            }
            Err(miss) => miss,
        };
        let entry = Entry { hash, value, key: Key::new(key) };
        // One probe: the miss's slot is the entry's, unless the shard grows first.
        if shard.full() {
            shard.place(entry)
        } else {
            shard.place_from(miss, entry)
        }
        self.len += 1;
        None
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        // Look before copying a shard that does not hold the key.
        let at = self.shards[shard_index(hash)].position(hash, key.as_bytes())?;
        let removed = self.shard_mut(hash).take(at).map(|e| e.value);
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }
}

#[cfg(test)]
mod tests;
