//! The decoder's meter: how much memory decoding a request body may build (parsed topic configs, their
//! strings, serde's scratch space), counted as it is built, so that no body makes the server hold more than
//! the room its request was given in the memory budget (`budget.rs`): a zlib bomb, a million tiny topic
//! configs or a 16 MiB array where a topic name should be are stopped at their allowance.
//!
//! The meter is the decoding thread's own (decodes run on the blocking pool, one body a thread at a time):
//! [`metered`] starts it, and the deserializers of everything a decode keeps charge it before or as they
//! allocate. Outside [`metered`] nothing is counted (tests, tools).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// The decode built more than its allowance, and was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("decoding needs more than its allowance of {allowance} bytes")]
pub struct OverAllowance {
    pub allowance: usize,
}

/// The decode running on this thread: what it may build, what it holds now, the most it held, and how
/// many elements its next list is expected to have ([`set_len_hint`]).
#[derive(Clone, Copy, Default)]
struct Meter {
    allowance: usize,
    held: usize,
    peak: usize,
    len_hint: usize,
}

thread_local! {
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

/// Runs `decode` on this thread with `allowance` bytes to build, and returns its result with the bytes
/// still held at its end (what the decoded value keeps; `release`d scratch space is not counted); `Err`
/// when it went over at any moment (its own error then only says where it was stopped).
pub fn metered<T, E>(
    allowance: usize,
    decode: impl FnOnce() -> Result<T, E>,
) -> Result<(Result<T, E>, usize), OverAllowance> {
    let outer = METER.replace(Some(Meter { allowance, ..Meter::default() }));
    let result = decode();
    let meter = METER.replace(outer).unwrap_or_default();
    if meter.peak > allowance { Err(OverAllowance { allowance }) } else { Ok((result, meter.held)) }
}

/// Counts `bytes` against the running decode's allowance before they are allocated: an error once what is
/// held exceeds it, and from then on.
pub fn charge(bytes: usize) -> Result<(), OverAllowance> {
    METER.with(|cell| match cell.get() {
        None => Ok(()),
        Some(mut meter) => {
            meter.held = meter.held.saturating_add(bytes);
            meter.peak = meter.peak.max(meter.held);
            cell.set(Some(meter));
            if meter.peak > meter.allowance { Err(OverAllowance { allowance: meter.allowance }) } else { Ok(()) }
        }
    })
}

/// How many elements the decode's next list will have, counted cheaply beforehand (a list grown by
/// doubling can hold three times what it needs while it grows); the next [`take_len_hint`] takes it.
pub fn set_len_hint(len: usize) {
    METER.with(|cell| {
        if let Some(mut meter) = cell.get() {
            meter.len_hint = len;
            cell.set(Some(meter));
        }
    });
}

/// The hint [`set_len_hint`] left, once.
pub fn take_len_hint() -> usize {
    METER.with(|cell| match cell.get() {
        None => 0,
        Some(mut meter) => {
            let hint = std::mem::take(&mut meter.len_hint);
            cell.set(Some(meter));
            hint
        }
    })
}

/// Room for `len` elements in `vec`, charged before it is allocated.
pub fn reserve_exact<T>(vec: &mut Vec<T>, len: usize) -> Result<(), OverAllowance> {
    if len > vec.capacity() {
        charge(alloc_cost(len * size_of::<T>()))?;
        release(alloc_cost(vec.capacity() * size_of::<T>()));
        vec.reserve_exact(len - vec.len());
    }
    Ok(())
}

/// Counts `bytes` charged before as freed (a vector's old buffer once it has grown, scratch space).
pub fn release(bytes: usize) {
    METER.with(|cell| {
        if let Some(mut meter) = cell.get() {
            meter.held = meter.held.saturating_sub(bytes);
            cell.set(Some(meter));
        }
    });
}

/// [`charge`], as a deserializer's error.
pub fn charge_de<E: de::Error>(bytes: usize) -> Result<(), E> {
    charge(bytes).map_err(E::custom)
}

/// What a heap allocation of `len` bytes costs, the allocator's rounding included (a generous bound: its
/// size classes are at most an eighth apart, and the smallest is 8 bytes).
pub fn alloc_cost(len: usize) -> usize {
    if len == 0 { 0 } else { len + len / 8 + 16 }
}

/// Room for one more element of `vec`, charged before it is allocated: the vector grows by doubling, its
/// new buffer is charged whole while the old one still exists, and the old one is released once the
/// elements have moved.
pub fn reserve_one<T>(vec: &mut Vec<T>) -> Result<(), OverAllowance> {
    if vec.len() == vec.capacity() {
        let old = alloc_cost(vec.capacity() * size_of::<T>());
        let more = vec.capacity().max(4);
        charge(alloc_cost((vec.capacity() + more) * size_of::<T>()))?;
        vec.reserve_exact(more);
        release(old);
    }
    Ok(())
}

/// The longest run of bytes between two quotes: a bound on what serde_json's scratch buffer (where it
/// unescapes a string) can grow to while it reads `json`.
pub fn longest_quoted_run(json: &[u8]) -> usize {
    let mut longest = 0;
    let mut last = None;
    for at in memchr::memchr_iter(b'"', json) {
        if let Some(last) = last {
            longest = longest.max(at - last);
        }
        last = Some(at);
    }
    longest
}

/// A `Vec<T>` whose buffer is charged as it grows; `T`'s own fields charge what they allocate.
pub fn vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    struct SeqVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for SeqVisitor<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element()? {
                reserve_one(&mut out).map_err(de::Error::custom)?;
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_any(SeqVisitor(PhantomData))
}

/// `Option<Vec<T>>` with [`vec`]'s charging.
pub fn opt_vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    vec(d).map(Some)
}

/// A list of strings (filter server addresses), each charged.
pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    vec::<D, ChargedString>(d).map(|v| v.into_iter().map(|s| s.0).collect())
}

/// `Option<Vec<String>>` with [`strings`]'s charging.
pub fn opt_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    strings(d).map(Some)
}

/// A string charged before it is copied.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChargedString(pub String);

impl<'de> Deserialize<'de> for ChargedString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl Visitor<'_> for StrVisitor {
            type Value = ChargedString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                charge_de(alloc_cost(v.len()))?;
                Ok(ChargedString(v.to_string()))
            }
        }
        d.deserialize_string(StrVisitor)
    }
}

/// A map whose entries are charged as they are inserted (a B-tree keeps nodes at least about half full:
/// two and a half slots an entry, and a node header, are a bound); keys' and values' own fields charge
/// what they allocate.
pub fn btree<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    struct MapVisitor<K, V>(PhantomData<(K, V)>);
    impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Visitor<'de> for MapVisitor<K, V> {
        type Value = BTreeMap<K, V>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            let per_entry = (size_of::<K>() + size_of::<V>()) * 5 / 2 + 16;
            while let Some((k, v)) = map.next_entry()? {
                charge_de(per_entry)?;
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(MapVisitor(PhantomData))
}

/// `Option<BTreeMap<K, V>>` with [`btree`]'s charging.
pub fn opt_btree<'de, D, K, V>(d: D) -> Result<Option<BTreeMap<K, V>>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    btree(d).map(Some)
}

/// Any JSON value, each node and string charged: what a string field holds when a peer sent an array or
/// an object there (Java's lenient readers take its text).
pub struct ChargedValue(pub serde_json::Value);

impl<'de> Deserialize<'de> for ChargedValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(ChargedValue)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        charge_de(alloc_cost(v.len()))?;
        Ok(v.into())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<ChargedValue>()? {
            reserve_one(&mut out).map_err(de::Error::custom)?;
            out.push(v.0);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        let per_entry = (size_of::<String>() + size_of::<serde_json::Value>()) * 5 / 2 + 16;
        while let Some((k, v)) = map.next_entry::<ChargedString, ChargedValue>()? {
            charge_de(per_entry)?;
            out.insert(k.0, v.0);
        }
        Ok(serde_json::Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Lists {
        #[serde(deserialize_with = "strings")]
        names: Vec<String>,
    }

    #[test]
    fn a_decode_within_its_allowance_reports_what_it_built() {
        let json = br#"{"names":["a","bb","ccc"]}"#;
        let (parsed, held) = metered(10_000, || serde_json::from_slice::<Lists>(json)).expect("within the allowance");
        assert_eq!(parsed.unwrap().names, ["a", "bb", "ccc"]);
        let strings = alloc_cost(1) + alloc_cost(2) + alloc_cost(3);
        assert_eq!(held, strings + alloc_cost(4 * size_of::<String>()));
    }

    #[test]
    fn a_decode_over_its_allowance_is_stopped() {
        let many: Vec<String> = (0..10_000).map(|i| format!("name-{i}")).collect();
        let json = serde_json::to_vec(&serde_json::json!({ "names": many })).unwrap();
        let over = metered(json.len() / 4, || serde_json::from_slice::<Lists>(&json));
        assert_eq!(over.unwrap_err(), OverAllowance { allowance: json.len() / 4 });
        // Nothing is counted outside a metered decode, and the thread's meter is gone after one.
        assert!(charge(usize::MAX).is_ok());
    }

    #[test]
    fn the_longest_quoted_run_bounds_any_string() {
        assert_eq!(longest_quoted_run(br#"{"a":"bcd","e":1}"#), 4);
        assert_eq!(longest_quoted_run(b"no quotes"), 0);
    }
}
