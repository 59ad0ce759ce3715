//! A reply as the Java-reference tests keep it (a JSON line per reply in their fixtures), and how two replies
//! are compared: byte for byte, or under one of the normalizations that COMPATIBILITY.md names. Shared by
//! the fixed corpus (tests/java_reference.rs) and the generated sequences (tests/difftest).

use std::collections::BTreeMap;

use base64::Engine;
use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use tokio_util::codec::Decoder;

use crate::protocol::lenient::quote_bare_keys;
use crate::remoting::{FrameDecoder, decode_command};

/// How a reply is compared with the reference's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// Code, remark, extFields (as a map) and body byte for byte.
    Exact,
    /// As `Exact`, but the body as parsed JSON with every array taken as a multiset and the `ignore`d
    /// top-level fields left out: Java leaves that order, or that choice, to a HashMap. `row` is the
    /// COMPATIBILITY.md row that says so.
    Unordered { ignore: &'static [&'static str], row: &'static str },
    /// As `Exact`, but the body as properties text, on the keys both sides have, except the `ignore`d ones.
    Properties { ignore: &'static [&'static str], row: &'static str },
    /// Differs on purpose: the COMPATIBILITY.md row with this id says how and why.
    Differs(&'static str),
}

/// Java's HashMap order: the order of brokers in a route, of topics in a topic list.
pub const HASH_ORDER: Compare = Compare::Unordered { ignore: &[], row: "hashmap-order" };

impl Compare {
    /// The COMPATIBILITY.md row that allows the normalization, if any.
    pub fn row(self) -> Option<&'static str> {
        match self {
            Compare::Exact => None,
            Compare::Unordered { row, .. } | Compare::Properties { row, .. } | Compare::Differs(row) => Some(row),
        }
    }
}

/// A reply, as the fixtures keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub step: String,
    #[serde(rename = "serializeType")]
    pub serialize_type: u8,
    pub code: i32,
    pub flag: i32,
    pub remark: Option<String>,
    #[serde(rename = "extFields")]
    pub ext_fields: BTreeMap<String, String>,
    /// The body as text when it is UTF-8, else `bodyBase64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(rename = "bodyBase64", default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

/// A frame that does not hold a reply.
#[derive(Debug, thiserror::Error)]
#[error("not a valid reply frame: {0}")]
pub struct BadFrame(String);

impl Reply {
    /// The reply in a whole frame (length prefix included), and the frame's opaque.
    pub fn from_frame(step: &str, frame: &[u8]) -> Result<(Reply, i32), BadFrame> {
        let mut buf = BytesMut::from(frame);
        let raw = FrameDecoder::default()
            .decode(&mut buf)
            .map_err(|e| BadFrame(e.to_string()))?
            .ok_or_else(|| BadFrame("a partial frame".into()))?;
        let serialize_type = raw.serialize_type.code();
        let cmd = decode_command(raw).map_err(|e| BadFrame(e.to_string()))?;
        let ext_fields =
            cmd.ext_fields.iter().flat_map(|e| e.iter()).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (body, body_base64) = match std::str::from_utf8(&cmd.body) {
            _ if cmd.body.is_empty() => (None, None),
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (None, Some(base64::engine::general_purpose::STANDARD.encode(&cmd.body))),
        };
        let reply = Reply {
            step: step.into(),
            serialize_type,
            code: cmd.code,
            flag: cmd.flag,
            remark: cmd.remark,
            ext_fields,
            body,
            body_base64,
        };
        Ok((reply, cmd.opaque))
    }

    pub fn body_bytes(&self) -> Vec<u8> {
        match (&self.body, &self.body_base64) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }

    /// The body as JSON with arrays sorted (fastjson's bare keys quoted), for a reader; `None` if not JSON.
    pub fn canonical_body(&self, ignore: &[&str]) -> Option<serde_json::Value> {
        canonical(&self.body_bytes(), ignore)
    }
}

/// JSON with every array sorted (by each element's text) and the `ignore`d top-level fields removed.
pub fn canonical(body: &[u8], ignore: &[&str]) -> Option<serde_json::Value> {
    fn sort_arrays(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Array(items) => {
                items.iter_mut().for_each(sort_arrays);
                items.sort_by_key(|i| i.to_string());
            }
            serde_json::Value::Object(map) => map.values_mut().for_each(sort_arrays),
            _ => {}
        }
    }
    // fastjson's bare numeric keys (`{0:"addr"}`) are quoted first.
    let text = quote_bare_keys(body).unwrap_or_else(|| body.to_vec());
    let mut v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    if let Some(map) = v.as_object_mut() {
        ignore.iter().for_each(|k| drop(map.remove(*k)));
    }
    sort_arrays(&mut v);
    Some(v)
}

fn properties(body: &[u8], ignore: &[&str]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !ignore.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Where `got` differs from `want`, in words; empty when they agree under `compare`. `names` are the two
/// sides' names for the report.
pub fn differences(compare: Compare, want: &Reply, got: &Reply, names: (&str, &str)) -> Vec<String> {
    let mut out = Vec::new();
    if let Compare::Differs(_) = compare {
        return out;
    }
    let (w, g) = names;
    for (what, a, b) in [
        ("serializeType", want.serialize_type.to_string(), got.serialize_type.to_string()),
        ("code", want.code.to_string(), got.code.to_string()),
        ("flag", want.flag.to_string(), got.flag.to_string()),
        ("remark", format!("{:?}", want.remark), format!("{:?}", got.remark)),
        ("extFields", format!("{:?}", want.ext_fields), format!("{:?}", got.ext_fields)),
    ] {
        if a != b {
            out.push(format!("{what}: {w} {a}, {g} {b}"));
        }
    }
    let (wb, gb) = (want.body_bytes(), got.body_bytes());
    let same_body = match compare {
        Compare::Unordered { ignore, .. } => {
            // The same form too: fastjson's bare numeric keys on both sides, or on neither.
            let bare = |b: &[u8]| quote_bare_keys(b).is_some();
            wb == gb
                || (bare(&wb) == bare(&gb)
                    && canonical(&wb, ignore).is_some()
                    && canonical(&wb, ignore) == canonical(&gb, ignore))
        }
        Compare::Properties { ignore, .. } => {
            let (a, b) = (properties(&wb, ignore), properties(&gb, ignore));
            for (k, v) in &a {
                if let Some(other) = b.get(k).filter(|o| *o != v) {
                    out.push(format!("{k}: {w} {v:?}, {g} {other:?}"));
                }
            }
            true
        }
        _ => wb == gb,
    };
    if !same_body {
        out.push(format!("body:\n  {w:9}{}\n  {g:9}{}", String::from_utf8_lossy(&wb), String::from_utf8_lossy(&gb)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(body: &str) -> Reply {
        Reply {
            step: "s".into(),
            serialize_type: 0,
            code: 0,
            flag: 1,
            remark: None,
            ext_fields: BTreeMap::new(),
            body: Some(body.into()),
            body_base64: None,
        }
    }

    #[test]
    fn unordered_takes_arrays_as_sets_but_not_bare_keys_as_quoted_ones() {
        let (a, b) = (reply(r#"{"x":[1,2],"m":{0:"a"}}"#), reply(r#"{"m":{0:"a"},"x":[2,1]}"#));
        assert!(differences(HASH_ORDER, &a, &b, ("a", "b")).is_empty());
        assert!(!differences(Compare::Exact, &a, &b, ("a", "b")).is_empty());
        let quoted = reply(r#"{"x":[1,2],"m":{"0":"a"}}"#);
        assert!(!differences(HASH_ORDER, &a, &quoted, ("a", "b")).is_empty());
    }

    #[test]
    fn properties_compare_the_shared_keys_but_the_ignored() {
        let (a, b) = (reply("a=1\nb=2\npath=/x\n"), reply("a=1\npath=/y\nc=3\n"));
        let compare = Compare::Properties { ignore: &["path"], row: "r" };
        assert!(differences(compare, &a, &b, ("a", "b")).is_empty());
        let c = reply("a=9\n");
        assert_eq!(differences(compare, &a, &c, ("a", "b")), vec![r#"a: a "1", b "9""#.to_string()]);
    }
}
