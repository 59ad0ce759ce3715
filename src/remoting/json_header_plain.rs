//! The fast reader of JSON command headers: one pass over the header as every client writes it, in any
//! field order, with numbers of any width and sign.
//!
//! Each client family orders its fields differently (fastjson sorts them, Go and Rust write struct order,
//! Node insertion order, jsoncpp sorts and ends with a newline) and a long-lived client's opaque has ten
//! digits or a sign, so the reader assumes no order and no width. It handles the plain form: string values
//! without escapes, integers for the int fields, flat `extFields` of strings, unknown keys with scalar
//! values, whitespace anywhere, ASCII text. Anything else (an escape, a byte outside ASCII, a number written
//! as a string, a nested value, an int out of range, malformed text) makes it answer `None`, and the general
//! reader in `json_header` then decides, so the two never differ on what a header means. Taking ASCII alone
//! spares it a UTF-8 check of the whole header: every client writes its headers in ASCII (topic names are
//! ASCII by RocketMQ's rules), and whatever it accepts outside strings is ASCII by its own grammar.

use std::ops::Range;

use bytes::Bytes;

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::json_header::{Reader, is_scalar_token, plain_int};

/// Bytes that end a plain string's fast scan: the closing quote, an escape, a control character, a byte
/// outside ASCII.
pub(super) static STRING_STOP: [bool; 256] = {
    let mut stop = [true; 256];
    let mut b = 0x20;
    while b < 0x80 {
        stop[b] = false;
        b += 1;
    }
    stop[b'"' as usize] = true;
    stop[b'\\' as usize] = true;
    stop
};

/// The top-level keys a command has; any other is skipped.
enum Key {
    Code,
    ExtFields,
    Flag,
    Language,
    Opaque,
    Remark,
    Version,
    Other,
}

/// The general reader's cursor (its whitespace and peek are shared).
struct Scan<'a> {
    r: Reader<'a>,
}

impl<'a> Scan<'a> {
    #[inline]
    fn ws(&mut self) {
        self.r.skip_ws();
    }

    /// The next byte after any whitespace, consumed.
    #[inline]
    fn next(&mut self) -> Option<u8> {
        self.ws();
        let b = *self.r.bytes.get(self.r.pos)?;
        self.r.pos += 1;
        Some(b)
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.r.peek()
    }

    /// Where the text of a string without escapes or control characters is, its opening quote next.
    #[inline]
    fn plain_range(&mut self) -> Option<Range<usize>> {
        if self.next()? != b'"' {
            return None;
        }
        let start = self.r.pos;
        let mut end = start;
        while let Some(&b) = self.r.bytes.get(end) {
            if STRING_STOP[b as usize] {
                break;
            }
            end += 1;
        }
        if self.r.bytes.get(end) != Some(&b'"') {
            return None;
        }
        self.r.pos = end + 1;
        Some(start..end)
    }

    #[inline]
    fn plain_bytes(&mut self) -> Option<&'a [u8]> {
        let range = self.plain_range()?;
        Some(&self.r.bytes[range])
    }

    /// A key, known ones matched whole with their quotes and colon (one comparison instead of a scan).
    #[inline]
    fn key(&mut self) -> Option<Key> {
        self.ws();
        let rest = &self.r.bytes[self.r.pos..];
        // Each literal has a constant length, so the comparison is a few loads, not a memcmp call.
        macro_rules! known {
            ($key:expr, $text:literal) => {
                if rest.starts_with($text) {
                    self.r.pos += $text.len();
                    return Some($key);
                }
            };
        }
        match rest.get(1) {
            Some(b'c') => known!(Key::Code, b"\"code\":"),
            Some(b'e') => known!(Key::ExtFields, b"\"extFields\":"),
            Some(b'f') => known!(Key::Flag, b"\"flag\":"),
            Some(b'l') => known!(Key::Language, b"\"language\":"),
            Some(b'o') => known!(Key::Opaque, b"\"opaque\":"),
            Some(b'r') => known!(Key::Remark, b"\"remark\":"),
            Some(b's') => known!(Key::Other, b"\"serializeTypeCurrentRPC\":"),
            Some(b'v') => known!(Key::Version, b"\"version\":"),
            _ => {}
        }
        let key = match self.plain_bytes()? {
            b"code" => Key::Code,
            b"extFields" => Key::ExtFields,
            b"flag" => Key::Flag,
            b"language" => Key::Language,
            b"opaque" => Key::Opaque,
            b"remark" => Key::Remark,
            b"version" => Key::Version,
            _ => Key::Other,
        };
        (self.next()? == b':').then_some(key)
    }

    /// A plain string's text: ASCII, so always UTF-8 (the check is one pass over a few bytes).
    #[inline]
    fn plain_str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.plain_bytes()?).ok()
    }

    /// `null`, consumed, or nothing consumed.
    #[inline]
    fn null(&mut self) -> bool {
        self.ws();
        let is_null = self.r.bytes[self.r.pos..].starts_with(b"null");
        if is_null {
            self.r.pos += 4;
        }
        is_null
    }

    /// An integer in int range, any width up to ten digits, optionally negative.
    #[inline]
    fn int(&mut self) -> Option<i32> {
        self.ws();
        let (n, end) = plain_int(self.r.bytes, self.r.pos)?;
        self.r.pos = end;
        Some(n)
    }

    /// The value of a key nobody reads: a plain string, a number, `true`, `false` or `null`.
    fn skip_scalar(&mut self) -> Option<()> {
        if self.peek()? == b'"' {
            return self.plain_bytes().map(drop);
        }
        let rest = &self.r.bytes[self.r.pos..];
        let len = rest.iter().position(|b| matches!(b, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))?;
        self.r.pos += len;
        is_scalar_token(&rest[..len]).then_some(())
    }

    /// A flat object of plain strings (null values left out, as the general reader does).
    fn ext_fields(&mut self) -> Option<ExtFields> {
        if self.next()? != b'{' {
            return None;
        }
        let mut ext = ExtFields::new();
        if self.peek()? == b'}' {
            self.r.pos += 1;
            return Some(ext);
        }
        loop {
            let key = self.plain_range()?;
            if self.next()? != b':' {
                return None;
            }
            if !self.null() {
                // Too many: the general reader says so.
                if ext.len() == ExtFields::MAX {
                    return None;
                }
                ext.push_frame_span(key, self.plain_range()?);
            }
            match self.next()? {
                b',' => {}
                b'}' => return Some(ext),
                _ => return None,
            }
        }
    }
}

/// Puts the command a plain header holds into `cmd` (whatever it held), its fields sharing the header's
/// bytes, and says where the opaque's number is in it (the last `opaque` key's; `None` without one); or
/// gives the header back, to leave it to the general reader (`cmd` then holds a part of it).
pub(super) fn decode_plain_marked(header: Bytes, cmd: &mut RemotingCommand) -> Result<Option<Range<usize>>, Bytes> {
    match scan(&header, cmd) {
        Some(opaque) => {
            cmd.attach_frame(header);
            Ok(opaque)
        }
        None => Err(header),
    }
}

/// `decode_plain_marked` of a fresh command.
#[cfg(test)]
pub(super) fn decode_plain(header: Bytes) -> Result<RemotingCommand, Bytes> {
    let mut cmd = RemotingCommand::blank();
    decode_plain_marked(header, &mut cmd).map(|_| cmd)
}

fn scan(header: &[u8], cmd: &mut RemotingCommand) -> Option<Option<Range<usize>>> {
    let mut s = Scan { r: Reader { bytes: header, pos: 0 } };
    let mut opaque = None;
    (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) = (0, None, 0, 0, 0);
    (cmd.remark, cmd.ext_fields) = (None, None);
    if s.next()? != b'{' {
        return None;
    }
    if s.peek()? == b'}' {
        s.r.pos += 1;
    } else {
        loop {
            match s.key()? {
                Key::Code => cmd.code = s.int()?,
                Key::Opaque => {
                    s.ws();
                    let at = s.r.pos;
                    cmd.opaque = s.int()?;
                    opaque = Some(at..s.r.pos);
                }
                Key::Flag => cmd.flag = s.int()?,
                Key::Version => cmd.version = s.int()?,
                Key::ExtFields => cmd.ext_fields = if s.null() { None } else { Some(s.ext_fields()?) },
                Key::Language => cmd.language = if s.null() { None } else { LanguageCode::from_name(s.plain_str()?) },
                Key::Remark => cmd.remark = if s.null() { None } else { Some(s.plain_str()?.to_owned()) },
                Key::Other => s.skip_scalar()?,
            }
            match s.next()? {
                b',' => {}
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.ws();
    (s.r.pos == header.len()).then_some(opaque)
}
