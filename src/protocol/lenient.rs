//! Lenient reading of what Java peers send: numbers as strings, strings as numbers, fastjson's bare map keys.
//!
//! fastjson accepts `"counter":"5"` as well as `"counter":5`, and writes `{0:"addr"}` for `Map<Long, _>`; strict
//! JSON parsers reject the latter. These helpers make serde as forgiving as the Java side.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

struct NumberVisitor;

impl<'de> Visitor<'de> for NumberVisitor {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer, or a string holding one")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i64::try_from(v).map(Some).map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v.abs() < 9.2e18 { Ok(Some(v as i64)) } else { Err(E::custom("not an integer")) }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        parse_java_long(v).map(Some).ok_or_else(|| E::custom(format!("not an integer: {v:?}")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(NumberVisitor)
    }
}

/// Java's `Long.parseLong`: an optional sign and decimal digits, nothing else.
pub fn parse_java_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Java's `Boolean.parseBoolean`: `true` in any case is true, everything else false.
pub fn parse_java_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

pub fn i64_or_zero<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(d.deserialize_any(NumberVisitor)?.unwrap_or(0))
}

pub fn i32_or_zero<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let v = d.deserialize_any(NumberVisitor)?.unwrap_or(0);
    i32::try_from(v).map_err(|_| de::Error::custom("integer out of int range"))
}

#[cfg(any(test, feature = "testing"))]
pub fn opt_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    match d.deserialize_any(NumberVisitor)? {
        None => Ok(None),
        Some(v) => i32::try_from(v).map(Some).map_err(|_| de::Error::custom("integer out of int range")),
    }
}

struct BoolVisitor;

impl<'de> Visitor<'de> for BoolVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(parse_java_bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        Ok(v != 0)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        Ok(v != 0)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

pub fn bool_or_false<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    d.deserialize_any(BoolVisitor)
}

/// A JSON scalar rendered the way Java's `toString` would; `None` for null.
pub fn scalar_to_string(v: serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }
}

/// A string field, as fastjson reads one: a number or boolean as its text, an array or object as its JSON
/// text. Charged to the decoder's meter as it is built.
pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = <crate::protocol::meter::ChargedValue as serde::Deserialize>::deserialize(d)?.0;
    // A string was charged as it was read; anything else is turned into text now.
    let charged = matches!(v, serde_json::Value::String(_));
    let text = scalar_to_string(v);
    if let Some(t) = text.as_ref().filter(|_| !charged) {
        crate::protocol::meter::charge_de(crate::protocol::meter::alloc_cost(t.len()))?;
    }
    Ok(text)
}

/// Rewrites fastjson's bare numeric object keys (`{0:"a"}`) as quoted keys, leaving everything else as is.
/// Returns `None` when the text has no such key, so callers only pay for a copy when one is needed, and
/// when it nests deeper than serde_json reads (it would fail anyway). The copy is charged to the decoder's
/// meter at its exact size before it is made (`None` when that is over the allowance).
pub fn quote_bare_keys(text: &[u8]) -> Option<Vec<u8>> {
    let mut count = 0;
    for_each_bare_key(text, |_, _| count += 1)?;
    if count == 0 {
        return None;
    }
    let len = text.len() + 2 * count;
    crate::protocol::meter::charge(crate::protocol::meter::alloc_cost(len)).ok()?;
    let mut out = Vec::with_capacity(len);
    let mut copied = 0;
    for_each_bare_key(text, |start, end| {
        out.extend_from_slice(&text[copied..start]);
        out.push(b'"');
        out.extend_from_slice(&text[start..end]);
        out.push(b'"');
        copied = end;
    })?;
    out.extend_from_slice(&text[copied..]);
    Some(out)
}

/// serde_json's nesting limit.
const MAX_DEPTH: u32 = 128;

/// Calls `bare` with the start and end of each bare numeric object key, in order; `None` when the text nests
/// deeper than [`MAX_DEPTH`].
fn for_each_bare_key(text: &[u8], mut bare: impl FnMut(usize, usize)) -> Option<()> {
    let mut in_string = false;
    let mut escaped = false;
    // After `{` or `,` inside an object we expect a key; one bit a level says object (1) or array (0).
    let mut objects: u128 = 0;
    let mut depth: u32 = 0;
    let in_object = |objects: u128, depth: u32| depth > 0 && objects >> (depth - 1) & 1 == 1;
    let mut expect_key = false;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => {
                    in_string = true;
                    expect_key = false;
                }
                b'{' | b'[' => {
                    if depth == MAX_DEPTH {
                        return None;
                    }
                    let bit = 1u128 << depth;
                    objects = if b == b'{' { objects | bit } else { objects & !bit };
                    depth += 1;
                    expect_key = b == b'{';
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    expect_key = false;
                }
                b',' => expect_key = in_object(objects, depth),
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'-' | b'0'..=b'9' if expect_key => {
                    let mut end = i + 1;
                    while end < text.len() && text[end].is_ascii_digit() {
                        end += 1;
                    }
                    bare(i, end);
                    expect_key = false;
                    i = end;
                    continue;
                }
                _ => expect_key = false,
            }
        }
        i += 1;
    }
    Some(())
}

/// Parses JSON as fastjson would accept it: strict first, then once more with bare keys quoted.
pub fn from_fastjson_slice<T: serde::de::DeserializeOwned>(text: &[u8]) -> serde_json::Result<T> {
    match serde_json::from_slice(text) {
        Ok(v) => Ok(v),
        Err(first) => match quote_bare_keys(text) {
            Some(fixed) => serde_json::from_slice(&fixed),
            None => Err(first),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_bare_keys() {
        let fixed = quote_bare_keys(br#"{"a":{0:"x:1",-1:"y"},"b":[1,2],"c":"{0:1}"}"#).unwrap();
        assert_eq!(std::str::from_utf8(&fixed).unwrap(), r#"{"a":{"0":"x:1","-1":"y"},"b":[1,2],"c":"{0:1}"}"#);
        assert!(quote_bare_keys(br#"{"a":[1,{"b":2}]}"#).is_none());
    }

    #[test]
    fn java_number_rules() {
        assert_eq!(parse_java_long("-12"), Some(-12));
        assert_eq!(parse_java_long("12 "), None);
        assert_eq!(parse_java_long(""), None);
        assert!(parse_java_bool("TRUE"));
        assert!(!parse_java_bool("yes"));
    }
}
