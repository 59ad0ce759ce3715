//! A single-pass reader of JSON command headers.
//!
//! Every request starts with one of these, so this is the hottest parse in the server. It reads the
//! top-level object in one pass, keeps the handful of fields a `RemotingCommand` has, and skips everything
//! else, with Java's leniency: numbers may come as strings, `extFields` values may be numbers or booleans,
//! an unknown `language` is no language, unknown keys are ignored. Nesting is limited so that a deep
//! document cannot exhaust the stack.

use compact_str::CompactString;

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::decode::HeaderError;
use crate::protocol::lenient::parse_java_long;

/// Deeper values are refused (serde_json's default limit, which Java's fastjson also far exceeds).
const MAX_DEPTH: usize = 128;

struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

fn err(msg: impl Into<String>) -> HeaderError {
    HeaderError::Json(msg.into())
}

/// A JSON scalar or composite, as far as a header field needs it.
enum Value<'a> {
    Str(std::borrow::Cow<'a, str>),
    /// A number, `true`/`false`, or a nested object/array: its text, as Java's `toString` would give it.
    Raw(&'a str),
    Null,
}

impl<'a> Reader<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes().get(self.pos).copied()
    }

    fn expect(&mut self, b: u8) -> Result<(), HeaderError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(err(format!("expected '{}' at byte {}", b as char, self.pos)))
        }
    }

    fn string(&mut self) -> Result<std::borrow::Cow<'a, str>, HeaderError> {
        self.expect(b'"')?;
        let start = self.pos;
        let bytes = self.bytes();
        // Fast path: no escapes, borrow the text as it is.
        while let Some(&b) = bytes.get(self.pos) {
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(std::borrow::Cow::Borrowed(&self.text[start..self.pos - 1]));
                }
                b'\\' => break,
                0..=0x1F => return Err(err("control character in string")),
                _ => self.pos += 1,
            }
        }
        let mut out = String::from(&self.text[start..self.pos]);
        loop {
            let Some(&b) = bytes.get(self.pos) else { return Err(err("unterminated string")) };
            self.pos += 1;
            match b {
                b'"' => return Ok(std::borrow::Cow::Owned(out)),
                b'\\' => {
                    let Some(&esc) = bytes.get(self.pos) else { return Err(err("unterminated escape")) };
                    self.pos += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(err("invalid escape")),
                    }
                }
                0..=0x1F => return Err(err("control character in string")),
                _ => {
                    // Copy the whole UTF-8 character (the text is valid UTF-8).
                    let ch_start = self.pos - 1;
                    let ch = self.text[ch_start..].chars().next().ok_or_else(|| err("invalid UTF-8"))?;
                    out.push(ch);
                    self.pos = ch_start + ch.len_utf8();
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, HeaderError> {
        let digits = self.text.get(self.pos..self.pos + 4).ok_or_else(|| err("short \\u escape"))?;
        self.pos += 4;
        u16::from_str_radix(digits, 16).map_err(|_| err("invalid \\u escape"))
    }

    fn unicode_escape(&mut self) -> Result<char, HeaderError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with("\\u") {
            self.pos += 2;
            let second = self.hex4()?;
            let code = 0x10000 + (((first as u32) - 0xD800) << 10) + ((second as u32).wrapping_sub(0xDC00) & 0x3FF);
            return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
        }
        Ok(char::from_u32(first as u32).unwrap_or('\u{FFFD}'))
    }

    /// Skips any value, returning its text.
    fn skip_value(&mut self, depth: usize) -> Result<&'a str, HeaderError> {
        if depth > MAX_DEPTH {
            return Err(err("header nested too deeply"));
        }
        let start = match self.peek() {
            Some(_) => self.pos,
            None => return Err(err("unexpected end of header")),
        };
        match self.bytes()[self.pos] {
            b'"' => {
                self.string()?;
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.pos += 1;
                if self.peek() == Some(close) {
                    self.pos += 1;
                } else {
                    loop {
                        if open == b'{' {
                            self.string()?;
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
                let bytes = self.bytes();
                while let Some(b) = bytes.get(self.pos) {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.pos += 1;
                }
                let token = &self.text[start..self.pos];
                let valid = matches!(token, "true" | "false" | "null")
                    || (!token.is_empty() && token.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)));
                if !valid {
                    return Err(err(format!("invalid token {token:?}")));
                }
            }
        }
        Ok(&self.text[start..self.pos])
    }

    fn value(&mut self) -> Result<Value<'a>, HeaderError> {
        match self.peek() {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            _ => match self.skip_value(1)? {
                "null" => Ok(Value::Null),
                raw => Ok(Value::Raw(raw)),
            },
        }
    }
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
        let key = r.string()?;
        r.expect(b':')?;
        match r.value()? {
            Value::Str(v) => ext.push(CompactString::from(key), CompactString::from(v)),
            Value::Raw(v) => ext.push(CompactString::from(key), CompactString::from(v)),
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

pub fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    let text = std::str::from_utf8(header).map_err(|e| err(format!("header is not UTF-8: {e}")))?;
    let mut r = Reader { text, pos: 0 };
    let mut cmd = RemotingCommand {
        code: 0,
        language: None,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: None,
        body_prefix: bytes::Bytes::new(),
        body: bytes::Bytes::new(),
    };
    r.expect(b'{')?;
    if r.peek() == Some(b'}') {
        r.pos += 1;
    } else {
        loop {
            let key = r.string()?;
            r.expect(b':')?;
            match key.as_ref() {
                "code" => cmd.code = int_field(r.value()?, "code")?,
                "flag" => cmd.flag = int_field(r.value()?, "flag")?,
                "opaque" => cmd.opaque = int_field(r.value()?, "opaque")?,
                "version" => cmd.version = int_field(r.value()?, "version")?,
                "extFields" => cmd.ext_fields = ext_fields(&mut r)?,
                "language" => {
                    cmd.language = match r.value()? {
                        Value::Str(name) => LanguageCode::from_name(&name),
                        Value::Raw(n) => n.parse::<u8>().ok().and_then(LanguageCode::from_code),
                        Value::Null => None,
                    }
                }
                "remark" => {
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
