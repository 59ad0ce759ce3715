//! A small writer of fastjson-compatible JSON text, the only JSON encoder in rocketns.
//!
//! Java peers compare what they read with what fastjson 1.2.83 would have written, and the Go client parses
//! `brokerAddrs` by hand, so bodies are written field by field in fastjson's shape: alphabetical properties,
//! no nulls, no whitespace. Two styles exist:
//! - [`JsonStyle::Fastjson`]: fastjson's defaults. Numeric map keys are bare (`{0:"a"}`) and non-ASCII text
//!   is written as raw UTF-8.
//! - [`JsonStyle::Standard`]: fastjson with `BrowserCompatible`, `QuoteFieldNames` and `MapSortField`, which
//!   the NameServer uses for routes asked for by version ≥ 4.9.4 clients: numeric keys are quoted, `/` and
//!   every character outside printable ASCII are escaped, and longs beyond 2^53 become strings.

use bytes::BufMut;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    Fastjson,
    Standard,
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";
/// JavaScript's largest exactly representable integer; fastjson's browser mode quotes longs beyond it.
const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

fn put_unicode_escape<B: BufMut>(out: &mut B, unit: u16) {
    out.put_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.put_u8(HEX[((unit >> shift) & 0xF) as usize]);
    }
}

/// Writes `s` as a quoted JSON string.
pub fn write_str<B: BufMut>(out: &mut B, s: &str, style: JsonStyle) {
    out.put_u8(b'"');
    let bytes = s.as_bytes();
    let mut plain_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let needs_escape = match b {
            b'"' | b'\\' | 0..=0x1F => true,
            b'/' => style == JsonStyle::Standard,
            0x7F..=0xFF => style == JsonStyle::Standard,
            _ => false,
        };
        if !needs_escape {
            continue;
        }
        out.put_slice(&bytes[plain_from..i]);
        plain_from = i + 1;
        match b {
            b'"' => out.put_slice(b"\\\""),
            b'\\' => out.put_slice(b"\\\\"),
            b'/' => out.put_slice(b"\\/"),
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            0x08 => out.put_slice(b"\\b"),
            0x0C => out.put_slice(b"\\f"),
            0..=0x1F | 0x7F => put_unicode_escape(out, b as u16),
            _ => {
                // A UTF-8 lead byte in standard style: escape the whole character as UTF-16 units.
                if b >= 0xC0 {
                    let ch = s[i..].chars().next().unwrap_or('\u{FFFD}');
                    let mut units = [0u16; 2];
                    for unit in ch.encode_utf16(&mut units) {
                        put_unicode_escape(out, *unit);
                    }
                }
                // Continuation bytes were covered by their lead byte.
            }
        }
    }
    out.put_slice(&bytes[plain_from..]);
    out.put_u8(b'"');
}

/// Writes a property name followed by `:`. Field names are always quoted, in both styles.
pub fn write_key<B: BufMut>(out: &mut B, name: &str) {
    write_str(out, name, JsonStyle::Fastjson);
    out.put_u8(b':');
}

/// Writes an integer map key (`brokerAddrs` ids): bare in fastjson style, quoted in standard style.
pub fn write_int_key<B: BufMut>(out: &mut B, key: i64, style: JsonStyle) {
    let mut buf = itoa::Buffer::new();
    let text = buf.format(key);
    match style {
        JsonStyle::Fastjson => out.put_slice(text.as_bytes()),
        JsonStyle::Standard => {
            out.put_u8(b'"');
            out.put_slice(text.as_bytes());
            out.put_u8(b'"');
        }
    }
    out.put_u8(b':');
}

/// Writes an `int` property value.
pub fn write_int<B: BufMut>(out: &mut B, value: i64) {
    // Most ints of a reply header (its code, its flag) are one digit: one byte, not a formatted copy.
    if let Ok(digit @ 0..=9) = u8::try_from(value) {
        out.put_u8(b'0' + digit);
        return;
    }
    let mut buf = itoa::Buffer::new();
    out.put_slice(buf.format(value).as_bytes());
}

/// Writes a `long` property value; browser-compatible output quotes values a JavaScript number cannot hold.
pub fn write_long<B: BufMut>(out: &mut B, value: i64, style: JsonStyle) {
    if style == JsonStyle::Standard && !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&value) {
        out.put_u8(b'"');
        write_int(out, value);
        out.put_u8(b'"');
    } else {
        write_int(out, value);
    }
}

pub fn write_bool<B: BufMut>(out: &mut B, value: bool) {
    out.put_slice(if value { b"true" } else { b"false" });
}

/// Writes `["a","b"]`.
pub fn write_str_array<'a, B: BufMut>(out: &mut B, items: impl IntoIterator<Item = &'a str>, style: JsonStyle) {
    out.put_u8(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        write_str(out, item, style);
    }
    out.put_u8(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str, style: JsonStyle) -> String {
        let mut v = Vec::new();
        write_str(&mut v, text, style);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn standard_style_escapes_non_ascii_and_slash() {
        assert_eq!(s("broker-中", JsonStyle::Standard), r#""broker-\u4E2D""#);
        assert_eq!(s("broker-中", JsonStyle::Fastjson), "\"broker-中\"");
        assert_eq!(s("a/b", JsonStyle::Standard), r#""a\/b""#);
        assert_eq!(s("a/b", JsonStyle::Fastjson), r#""a/b""#);
        assert_eq!(s("😀", JsonStyle::Standard), r#""\uD83D\uDE00""#);
    }

    #[test]
    fn control_characters_and_quotes() {
        assert_eq!(s("a\"b\\c\nd\u{1}", JsonStyle::Fastjson), r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn keys_and_longs() {
        let mut v = Vec::new();
        write_int_key(&mut v, 0, JsonStyle::Fastjson);
        write_int_key(&mut v, 1, JsonStyle::Standard);
        write_long(&mut v, 1 << 60, JsonStyle::Standard);
        v.push(b' ');
        write_long(&mut v, 1 << 60, JsonStyle::Fastjson);
        assert_eq!(String::from_utf8(v).unwrap(), "0:\"1\":\"1152921504606846976\" 1152921504606846976");
    }

    #[test]
    fn ints_of_every_width() {
        for n in [i64::MIN, -10, -1, 0, 1, 9, 10, 255, 256, 479, 2_147_483_647, i64::MAX] {
            let mut v = Vec::new();
            write_int(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
        }
    }
}
