use std::collections::HashMap;

use super::*;

#[test]
fn an_entry_is_half_a_cache_line() {
    assert_eq!(std::mem::size_of::<Option<Entry<Arc<u8>>>>(), 32);
    assert_eq!(std::mem::align_of::<Option<Entry<Arc<u8>>>>(), 32);
}

#[test]
fn copy_on_write_snapshots() {
    const KEYS: usize = 20_000;
    let mut a: TopicTable<usize> = TopicTable::default();
    for i in 0..KEYS {
        a.insert(&format!("t{i}"), i);
    }
    let b = a.clone();
    a.insert("t7", 70);
    a.remove("t8");
    a.insert("new", 1);
    assert_eq!((a.get("t7"), a.get("t8"), a.get("new"), a.len()), (Some(&70), None, Some(&1), KEYS));
    assert_eq!((b.get("t7"), b.get("t8"), b.get("new"), b.len()), (Some(&7), Some(&8), None, KEYS));
    assert_eq!(a.iter().count(), KEYS);
    assert_eq!(a.remove("absent"), None);
    let used = a.shards.iter().filter(|s| s.len > 0).count();
    assert!(used > SHARDS * 9 / 10, "{used} shards used by {KEYS} keys");
    // Only the shards that changed were copied.
    let shared = a.shards.iter().zip(b.shards.iter()).filter(|(x, y)| Arc::ptr_eq(x, y)).count();
    assert!(shared >= SHARDS - 3, "{shared} shards still shared");
}

/// Names of every length around the inline limit, and the empty one.
fn name(i: usize) -> String {
    let len = i % (INLINE + 12);
    let mut s = format!("{i}-");
    while s.len() < len {
        s.push(char::from(b'a' + (i % 26) as u8));
    }
    if i.is_multiple_of(97) { String::new() } else { s }
}

/// Inserts, replacements and removals at random against a std map, with snapshots taken on the way that must
/// keep what they held; every few hundred steps each snapshot is read back whole, hits and misses.
#[test]
fn matches_a_plain_map_through_changes_and_snapshots() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut table: TopicTable<u64> = TopicTable::default();
    let mut model: HashMap<String, u64> = HashMap::new();
    let mut snapshots: Vec<(TopicTable<u64>, HashMap<String, u64>)> = Vec::new();
    for step in 0..60_000_u32 {
        let key = name((next() % 3_000) as usize);
        let value = next();
        if next().is_multiple_of(3) {
            assert_eq!(table.remove(&key), model.remove(&key), "remove {key:?} at {step}");
        } else {
            assert_eq!(table.insert(&key, value), model.insert(key, value), "insert at {step}");
        }
        assert_eq!(table.len(), model.len());
        if step.is_multiple_of(5_000) {
            snapshots.push((table.clone(), model.clone()));
        }
        if step % 20_000 == 19_999 {
            snapshots.push((table.clone(), model.clone()));
            for (t, m) in &snapshots {
                let held: HashMap<String, u64> = t.iter().map(|(k, v)| (k.to_owned(), *v)).collect();
                assert_eq!(&held, m);
                for i in 0..3_100 {
                    assert_eq!(t.get(&name(i)), m.get(&name(i)));
                }
            }
        }
    }
    // Removing everything empties every shard.
    for key in model.keys() {
        table.remove(key);
    }
    assert!(table.is_empty() && table.shards.iter().all(|s| s.slots.is_empty()));
}

/// A shard's capacity follows its size both ways, and a probe never runs long, a miss's included.
#[test]
fn probes_stay_short_as_shards_grow_and_shrink() {
    let mut table: TopicTable<usize> = TopicTable::default();
    for i in 0..1_000_000 {
        table.insert(&format!("b{}-topic-{}", i / 1000, i % 1000), i);
    }
    let longest = |t: &TopicTable<usize>| {
        t.shards
            .iter()
            .flat_map(|s| {
                s.slots
                    .iter()
                    .enumerate()
                    .flat_map(|(at, e)| e.as_ref().map(|e| (at, e)))
                    .map(|(at, e)| distance(e.hash, at, s.slots.len()))
            })
            .max()
    };
    let load = |t: &TopicTable<usize>| t.len() as f64 / t.shards.iter().map(|s| s.slots.len()).sum::<usize>() as f64;
    assert!(longest(&table).is_some_and(|d| d < 48), "longest probe {:?}", longest(&table));
    assert!((0.6..=0.875).contains(&load(&table)), "load {}", load(&table));
    // A miss stops at the first entry nearer its home than the probe is.
    let misses: Vec<usize> = (0..100_000)
        .map(|i| {
            let name = format!("absent-{i}");
            let hash = table.hasher.hash_one(name.as_str());
            table.shards[shard_index(hash)].probe(hash, name.as_bytes()).expect_err("absent").probed + 1
        })
        .collect();
    let mean = misses.iter().sum::<usize>() as f64 / misses.len() as f64;
    assert!(mean < 4.0 && misses.iter().max() < Some(&48), "misses read {mean} slots on average");
    for i in 0..1_000_000 {
        if i % 10 != 0 {
            table.remove(&format!("b{}-topic-{}", i / 1000, i % 1000));
        }
    }
    assert_eq!(table.len(), 100_000);
    assert!(load(&table) > 0.25, "load {} after removals", load(&table));
    assert_eq!(table.get("b7-topic-10"), Some(&7010));
    assert_eq!(table.get("b7-topic-11"), None);
}
