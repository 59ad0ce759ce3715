//! A single-pass reader of JSON command headers.
//!
//! Every request starts with one of these, so this is the hottest parse in the server. It reads the
//! top-level object in one pass, keeps the handful of fields a `RemotingCommand` has, and skips everything
//! else, with Java's leniency: numbers may come as strings, `extFields` values may be numbers or booleans,
//! an unknown `language` is no language, unknown keys are ignored. Nesting is limited so that a deep
//! document cannot exhaust the stack.

use std::ops::Range;

use bytes::Bytes;

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::decode::HeaderError;
use crate::protocol::lenient::parse_java_long;

/// Deeper values are refused (serde_json's default limit, which Java's fastjson also far exceeds).
const MAX_DEPTH: usize = 128;

pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
}

fn err(msg: impl Into<String>) -> HeaderError {
    HeaderError::Json(msg.into())
}

fn utf8(bytes: &[u8]) -> Result<&str, HeaderError> {
    std::str::from_utf8(bytes).map_err(|_| err("invalid UTF-8 in header"))
}

/// A JSON scalar or composite, as far as a header field needs it.
enum Value<'a> {
    Str(std::borrow::Cow<'a, str>),
    /// A number, `true`/`false`, or a nested object/array: its text, as Java's `toString` would give it.
    Raw(&'a str),
    Null,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(super) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    #[inline]
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, b: u8) -> Result<(), HeaderError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(err(format!("expected '{}' at byte {}", b as char, self.pos)))
        }
    }

    /// A string's raw bytes when it has no escapes (the common case), leaving the reader after it; `None`
    /// (and the reader on the opening quote) when it has escapes.
    fn plain_string(&mut self) -> Result<Option<&'a [u8]>, HeaderError> {
        self.expect(b'"')?;
        let start = self.pos;
        // Header strings are short: a plain loop beats a vectorized search here.
        for (i, &b) in self.bytes[start..].iter().enumerate() {
            match b {
                b'"' => {
                    self.pos = start + i + 1;
                    return Ok(Some(&self.bytes[start..start + i]));
                }
                b'\\' | 0..=0x1F => {
                    self.pos = start - 1;
                    return Ok(None);
                }
                _ => {}
            }
        }
        Err(err("unterminated string"))
    }

    fn string(&mut self) -> Result<std::borrow::Cow<'a, str>, HeaderError> {
        if let Some(plain) = self.plain_string()? {
            return Ok(std::borrow::Cow::Borrowed(utf8(plain)?));
        }
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.pos) else { return Err(err("unterminated string")) };
            self.pos += 1;
            match b {
                b'"' => return String::from_utf8(out).map(std::borrow::Cow::Owned).map_err(|_| err("invalid UTF-8")),
                b'\\' => {
                    let Some(&esc) = self.bytes.get(self.pos) else { return Err(err("unterminated escape")) };
                    self.pos += 1;
                    let ch = match esc {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1F => return Err(err("control character in string")),
                _ => out.push(b),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, HeaderError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or_else(|| err("short \\u escape"))?;
        self.pos += 4;
        u16::from_str_radix(utf8(digits)?, 16).map_err(|_| err("invalid \\u escape"))
    }

    fn unicode_escape(&mut self) -> Result<char, HeaderError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.bytes[self.pos..].starts_with(b"\\u") {
            self.pos += 2;
            let second = self.hex4()?;
            let code = 0x10000 + (((first as u32) - 0xD800) << 10) + ((second as u32).wrapping_sub(0xDC00) & 0x3FF);
            return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
        }
        Ok(char::from_u32(first as u32).unwrap_or('\u{FFFD}'))
    }

    /// Skips any value, returning its text.
    fn skip_value(&mut self, depth: usize) -> Result<&'a [u8], HeaderError> {
        if depth > MAX_DEPTH {
            return Err(err("header nested too deeply"));
        }
        let start = match self.peek() {
            Some(_) => self.pos,
            None => return Err(err("unexpected end of header")),
        };
        match self.bytes[self.pos] {
            b'"' => {
                if self.plain_string()?.is_none() {
                    self.string()?;
                }
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.pos += 1;
                if self.peek() == Some(close) {
                    self.pos += 1;
                } else {
                    loop {
                        if open == b'{' {
                            self.skip_value(depth + 1)?;
                            self.expect(b':')?;
                        }
                        self.skip_value(depth + 1)?;
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(c) if c == close => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(err("malformed object or array")),
                        }
                    }
                }
            }
            _ => {
                while let Some(b) = self.bytes.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.pos += 1;
                }
                let token = &self.bytes[start..self.pos];
                if !is_scalar_token(token) {
                    return Err(err(format!("invalid token {:?}", String::from_utf8_lossy(token))));
                }
            }
        }
        Ok(&self.bytes[start..self.pos])
    }

    fn value(&mut self) -> Result<Value<'a>, HeaderError> {
        match self.peek() {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            _ => match self.skip_value(1)? {
                b"null" => Ok(Value::Null),
                raw => Ok(Value::Raw(utf8(raw)?)),
            },
        }
    }

    /// An object key; keys with escapes are decoded, the others borrowed.
    fn key(&mut self) -> Result<std::borrow::Cow<'a, [u8]>, HeaderError> {
        if self.peek() != Some(b'"') {
            return Err(err(format!("expected a key at byte {}", self.pos)));
        }
        match self.plain_string()? {
            Some(plain) => Ok(std::borrow::Cow::Borrowed(plain)),
            None => Ok(std::borrow::Cow::Owned(self.string()?.into_owned().into_bytes())),
        }
    }

    /// An `int` value: digits straight from the text, or anything else through the lenient path.
    fn int(&mut self, field: &str) -> Result<i32, HeaderError> {
        self.skip_ws();
        if let Some((n, end)) = plain_int(self.bytes, self.pos) {
            self.pos = end;
            return Ok(n);
        }
        int_field(self.value()?, field)
    }
}

/// Whether a bare token is `true`, `false`, `null` or number-like, as far as a value nobody reads needs
/// checking (both readers skip such values).
pub(super) fn is_scalar_token(token: &[u8]) -> bool {
    matches!(token, b"true" | b"false" | b"null")
        || (!token.is_empty() && token.iter().all(|b| b.is_ascii_digit() || b"+-.eE".contains(b)))
}

/// An int written as plain digits at `start` (optionally negative, up to ten digits) and followed by a
/// delimiter: its value and where it ends. `None` for anything else, a value outside int range included,
/// which the general reader's lenient path then reads or refuses.
pub(super) fn plain_int(bytes: &[u8], start: usize) -> Option<(i32, usize)> {
    let negative = bytes.get(start) == Some(&b'-');
    let digits_start = start + negative as usize;
    let mut end = digits_start;
    let mut n: i64 = 0;
    while let Some(&d) = bytes.get(end) {
        if !d.is_ascii_digit() || end - digits_start == 10 {
            break;
        }
        n = n * 10 + (d - b'0') as i64;
        end += 1;
    }
    if end == digits_start || !matches!(bytes.get(end), Some(b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r')) {
        return None;
    }
    Some((i32::try_from(if negative { -n } else { n }).ok()?, end))
}

/// An `int` field: a number or a string holding one; null is 0.
fn int_field(v: Value<'_>, field: &str) -> Result<i32, HeaderError> {
    let text = match &v {
        Value::Null => return Ok(0),
        Value::Str(s) => s.as_ref(),
        Value::Raw(r) => r,
    };
    let n = match parse_java_long(text) {
        Some(n) => n,
        // fastjson reads `1.0` into an int field.
        None => match text.parse::<f64>() {
            Ok(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => f as i64,
            _ => return Err(err(format!("{field} is not an integer: {text:?}"))),
        },
    };
    i32::try_from(n).map_err(|_| err(format!("{field} out of int range: {n}")))
}

fn ext_fields(r: &mut Reader<'_>) -> Result<Option<ExtFields>, HeaderError> {
    if r.peek() == Some(b'n') {
        r.skip_value(1)?;
        return Ok(None);
    }
    r.expect(b'{')?;
    let mut ext = ExtFields::new();
    if r.peek() == Some(b'}') {
        r.pos += 1;
        return Ok(Some(ext));
    }
    loop {
        let key = r.key()?;
        r.expect(b':')?;
        let value = r.value()?;
        let key = utf8(&key)?;
        if ext.len() == ExtFields::MAX {
            return Err(err(format!("more than {} extFields", ExtFields::MAX)));
        }
        match value {
            Value::Str(v) => ext.push(key, &v),
            Value::Raw(v) => ext.push(key, v),
            Value::Null => {}
        }
        match r.peek() {
            Some(b',') => r.pos += 1,
            Some(b'}') => {
                r.pos += 1;
                return Ok(Some(ext));
            }
            _ => return Err(err("malformed extFields")),
        }
    }
}

#[cfg(any(test, feature = "testing"))]
/// Reads a JSON header: the plain form every client writes in one fast pass (`json_header_plain`), anything
/// else with the general reader.
pub fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    decode_json_frame(Bytes::copy_from_slice(header))
}

/// `decode_json_header` of a frame's header, whose bytes the command's fields then share.
#[cfg(any(test, feature = "testing"))]
fn decode_json_frame(header: Bytes) -> Result<RemotingCommand, HeaderError> {
    let mut cmd = RemotingCommand::blank();
    decode_json_frame_into(header, &mut cmd).map(|()| cmd)
}

/// `decode_json_frame` into `cmd`, whatever it held.
pub(super) fn decode_json_frame_into(header: Bytes, cmd: &mut RemotingCommand) -> Result<(), HeaderError> {
    decode_json_frame_marked(header, cmd).map(drop)
}

/// `decode_json_frame_into`, also saying where the opaque's number is when the plain reader read the
/// header and found one (`super::repeated` reads the next header of the same shape by it).
pub(super) fn decode_json_frame_marked(
    header: Bytes,
    cmd: &mut RemotingCommand,
) -> Result<Option<Range<usize>>, HeaderError> {
    match super::json_header_plain::decode_plain_marked(header, cmd) {
        Ok(opaque) => Ok(opaque),
        Err(header) => {
            *cmd = decode_general(&header)?;
            Ok(None)
        }
    }
}

/// The general reader alone, which defines what every header means: the fuzz target checks the fast
/// reader against it.
pub fn decode_general(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    let mut r = Reader { bytes: header, pos: 0 };
    let mut cmd = RemotingCommand::blank();
    r.expect(b'{')?;
    if r.peek() == Some(b'}') {
        r.pos += 1;
    } else {
        loop {
            let key = r.key()?;
            r.expect(b':')?;
            match key.as_ref() {
                b"code" => cmd.code = r.int("code")?,
                b"flag" => cmd.flag = r.int("flag")?,
                b"opaque" => cmd.opaque = r.int("opaque")?,
                b"version" => cmd.version = r.int("version")?,
                b"extFields" => cmd.ext_fields = ext_fields(&mut r)?,
                b"language" => {
                    cmd.language = match r.value()? {
                        Value::Str(name) => LanguageCode::from_name(&name),
                        Value::Raw(n) => n.parse::<u8>().ok().and_then(LanguageCode::from_code),
                        Value::Null => None,
                    }
                }
                b"remark" => {
                    cmd.remark = match r.value()? {
                        Value::Str(s) => Some(s.into_owned()),
                        Value::Raw(s) => Some(s.to_string()),
                        Value::Null => None,
                    }
                }
                _ => {
                    r.skip_value(1)?;
                }
            }
            match r.peek() {
                Some(b',') => r.pos += 1,
                Some(b'}') => {
                    r.pos += 1;
                    break;
                }
                _ => return Err(err(format!("malformed header at byte {}", r.pos))),
            }
        }
    }
    if r.peek().is_some() {
        return Err(err("trailing characters after the header"));
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast reader takes every client's header in any field order and with any opaque, agrees with the
    /// general reader on all it takes, and leaves the rest to it.
    #[test]
    fn plain_reader_agrees_with_the_general_reader() {
        use super::super::json_header_plain::decode_plain;
        let fields = [
            r#""code":105"#,
            r#""extFields":{"topic":"TopicTest","k":"v"}"#,
            r#""flag":0"#,
            r#""language":"GO""#,
            r#""opaque":OPAQUE"#,
            r#""remark":"""#,
            r#""serializeTypeCurrentRPC":"JSON""#,
            r#""version":317"#,
        ];
        let mut taken = 0;
        for rotation in 0..fields.len() {
            for reversed in [false, true] {
                let mut order: Vec<&str> = fields.iter().cycle().skip(rotation).take(fields.len()).copied().collect();
                if reversed {
                    order.reverse();
                }
                for opaque in ["0", "7", "999999999", "1000000000", "2147483647", "-1", "-2147483648"] {
                    for sep in [",", " , ", ",\n"] {
                        let header = format!("{{{}}}", order.join(sep)).replace("OPAQUE", opaque);
                        let fast =
                            decode_plain(Bytes::from(header.clone())).unwrap_or_else(|_| panic!("not taken: {header}"));
                        assert_eq!(fast.ext("topic"), Some("TopicTest"), "{header}");
                        assert_eq!(fast, decode_general(header.as_bytes()).unwrap(), "{header}");
                        assert_eq!(fast.opaque, opaque.parse::<i32>().unwrap());
                        taken += 1;
                    }
                }
            }
        }
        assert_eq!(taken, 8 * 2 * 7 * 3);
        for odd in [
            &br#"{"code":105,"extFields":{"topic":"a\"b"},"flag":0,"opaque":1,"version":479}"#[..],
            br#"{"code":"105","flag":0,"opaque":1,"version":479}"#,
            br#"{"code":105,"flag":0,"opaque":1,"version":479,"x":[1]}"#,
            br#"{"code":105,"extFields":{"n":5}}"#,
            br#"{"code":null}"#,
            br#"{"language":0}"#,
            br#"{"code":1.0}"#,
            br#"{"code":2147483648}"#,
            br#"{"opaque":99999999999}"#,
            br#"{"co\u0064e":105}"#,
            "{\"code\":105,\"extFields\":{\"topic\":\"中\"},\"opaque\":1}".as_bytes(),
            b"{\"code\":105,\"remark\":\"\xff\"}",
        ] {
            assert!(decode_plain(Bytes::copy_from_slice(odd)).is_err(), "{}", String::from_utf8_lossy(odd));
        }
        // Text outside ASCII is the general reader's, which checks it is UTF-8.
        assert_eq!(
            decode_json_header("{\"code\":105,\"extFields\":{\"topic\":\"中\"}}".as_bytes()).unwrap().ext("topic"),
            Some("中")
        );
        assert!(decode_json_header(b"{\"code\":105,\"remark\":\"\xff\"}").is_err());
        assert_eq!(decode_json_header(br#"{"code":null,"language":0}"#).unwrap().language, Some(LanguageCode::Java));
        assert_eq!(decode_json_header(br#"{"co\u0064e":105}"#).unwrap().code, 105);
        assert!(decode_json_header(br#"{"code":105,"flag":0,"opaque":99999999999,"version":479}"#).is_err());
        assert!(decode_json_header(br#"{"opaque":2147483648}"#).is_err());
    }

    /// Repeated keys: the last one wins, in both readers (Java's HashMap and fastjson's setters agree).
    #[test]
    fn repeated_keys_keep_the_last_value() {
        for header in [
            &br#"{"code":1,"code":2,"extFields":{"a":"1"},"extFields":{"b":"2","b":"3"}}"#[..],
            br#"{"code":1,"code":"2","extFields":{"a":"1"},"extFields":{"b":"2","b":3}}"#,
        ] {
            let cmd = decode_json_header(header).unwrap();
            assert_eq!((cmd.code, cmd.ext("a"), cmd.ext("b")), (2, None, Some("3")));
        }
    }

    #[test]
    fn escapes_and_unicode() {
        let cmd = decode_json_header(
            br#"{"code":105,"extFields":{"topic":"a\"b\\c\/d\u4E2D\uD83D\uDE00","k\nx":"v"},"remark":"\t"}"#,
        )
        .unwrap();
        assert_eq!(cmd.ext("topic"), Some("a\"b\\c/d中😀"));
        assert_eq!(cmd.ext("k\nx"), Some("v"));
        assert_eq!(cmd.remark.as_deref(), Some("\t"));
    }

    #[test]
    fn nested_and_odd_values_are_tolerated_or_refused() {
        let cmd = decode_json_header(
            br#" { "code" : 105 , "extFields" : { "n" : 1.5 , "o" : {"a":[1,{"b":null}]} , "z" : null } , "x" : [true,false,null,"s",{}] , "flag" : 2 } "#,
        )
        .unwrap();
        assert_eq!((cmd.code, cmd.flag), (105, 2));
        assert_eq!(cmd.ext("n"), Some("1.5"));
        assert_eq!(cmd.ext("o"), Some(r#"{"a":[1,{"b":null}]}"#));
        assert_eq!(cmd.ext("z"), None);
        assert_eq!(decode_json_header(br#"{"code":1.0}"#).unwrap().code, 1);
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(decode_json_header(deep.as_bytes()).is_err());
        for bad in [
            &b"{"[..],
            b"{\"code\":}",
            b"{\"code\":105,}",
            b"{\"code\":105} x",
            b"{\"code\":\"1\x01\"}",
            b"{\"code\":tru}",
            b"{\"a\":\"\\q\"}",
            b"{\"code\":99999999999}",
            b"[]",
            b"",
        ] {
            assert!(decode_json_header(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
