//! Decoding of request headers, JSON (`T = 0`) and ROCKETMQ binary (`T = 1`), as leniently as Java does.

use std::ops::Range;

use bytes::Bytes;

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::frame::{RawFrame, SerializeType};
use super::json_header::decode_json_frame_into;
#[cfg(any(test, feature = "testing"))]
pub use super::json_header::{decode_general, decode_json_header};

/// A header that cannot be decoded; like Java, the connection is then closed without a reply.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("malformed JSON header: {0}")]
    Json(String),
    #[error("binary header truncated at {0}")]
    Truncated(&'static str),
    #[error("binary header field {0} has a negative length")]
    NegativeLength(&'static str),
    #[error("more than {} extFields", ExtFields::MAX)]
    TooManyFields,
}

/// A header whose frame has a body over this gets a buffer of its own (a frame over 16 KiB has room of
/// its own in the memory budget only until its request is processed).
const SHARED_HEADER_MAX_BODY: usize = 16 * 1024;

/// Turns a frame into a command; the body and the header's field text are shared, not copied. Except
/// behind a large body: the fields would keep the frame's whole buffer (a registration's megabytes, which
/// its handler frees as soon as they are parsed) for as long as the request lives, so that header is copied.
pub fn decode_command(frame: RawFrame) -> Result<RemotingCommand, HeaderError> {
    let mut cmd = RemotingCommand::blank();
    decode_command_into(frame, &mut cmd).map(|()| cmd)
}

/// `decode_command` into `cmd`, whatever it held: a connection decodes each request where it answers it. A
/// command is 216 bytes, which returned through the reader's layers would be copied at each.
pub fn decode_command_into(frame: RawFrame, cmd: &mut RemotingCommand) -> Result<(), HeaderError> {
    let header =
        if frame.body.len() > SHARED_HEADER_MAX_BODY { Bytes::copy_from_slice(&frame.header) } else { frame.header };
    match frame.serialize_type {
        SerializeType::Json => decode_json_frame_into(header, cmd)?,
        SerializeType::RocketMq => *cmd = decode_binary_frame(header)?,
    }
    cmd.body = frame.body;
    Ok(())
}

/// The header of the frame `src` starts with, decoded before the rest of the frame has arrived (whose is
/// the large frame waiting for room?); `None` until the whole header is there, or when it is malformed.
pub fn peek_header(src: &[u8]) -> Option<RemotingCommand> {
    let word = u32::from_be_bytes(src.get(4..8)?.try_into().ok()?);
    let header = src.get(8..8 + (word & 0x00FF_FFFF) as usize)?;
    let serialize_type = match word >> 24 {
        0 => SerializeType::Json,
        1 => SerializeType::RocketMq,
        _ => return None,
    };
    decode_command(RawFrame { serialize_type, header: Bytes::copy_from_slice(header), body: Bytes::new() }).ok()
}

/// A cursor over a binary header; every read checks the length first.
struct Cursor<'a> {
    header: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], HeaderError> {
        let rest = &self.header[self.pos..];
        if rest.len() < len {
            return Err(HeaderError::Truncated(field));
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], HeaderError> {
        let bytes = self.take(N, field)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Where `len` bytes of text are; a zero-length string is null in Java's binary decoder.
    fn string(&mut self, len: i64, field: &'static str) -> Result<Option<Range<usize>>, HeaderError> {
        let len = usize::try_from(len).map_err(|_| HeaderError::NegativeLength(field))?;
        let start = self.pos;
        self.take(len, field)?;
        Ok((len > 0).then_some(start..start + len))
    }
}

/// Java decodes binary header strings with replacement characters, so invalid UTF-8 is not fatal.
fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

#[cfg(any(test, feature = "testing"))]
pub fn decode_binary_header(header: &[u8]) -> Result<RemotingCommand, HeaderError> {
    decode_binary_frame(Bytes::copy_from_slice(header))
}

/// `decode_binary_header` of a frame's header, whose bytes the command's fields then share.
fn decode_binary_frame(header: Bytes) -> Result<RemotingCommand, HeaderError> {
    let mut buf = Cursor { header: &header, pos: 0 };
    let fixed: [u8; 17] = buf.array("fixed fields")?;
    let code = i16::from_be_bytes([fixed[0], fixed[1]]) as i32;
    let language = LanguageCode::from_code(fixed[2]);
    let version = i16::from_be_bytes([fixed[3], fixed[4]]) as i32;
    let opaque = i32::from_be_bytes([fixed[5], fixed[6], fixed[7], fixed[8]]);
    let flag = i32::from_be_bytes([fixed[9], fixed[10], fixed[11], fixed[12]]);
    let remark_len = i32::from_be_bytes([fixed[13], fixed[14], fixed[15], fixed[16]]) as i64;
    let remark = buf.string(remark_len, "remark")?.map(|r| lossy(&header[r]).into_owned());
    let ext_len = i32::from_be_bytes(buf.array("extFields length")?);
    let ext_len = usize::try_from(ext_len).map_err(|_| HeaderError::NegativeLength("extFields"))?;
    let map_start = buf.pos;
    buf.take(ext_len, "extFields")?;
    let mut map = Cursor { header: &header[..map_start + ext_len], pos: map_start };
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let mut ext = ExtFields::new();
        while map.pos < map.header.len() {
            let key_len = i16::from_be_bytes(map.array("extFields key length")?) as i64;
            let key = map.string(key_len, "extFields key")?;
            let val_len = i32::from_be_bytes(map.array("extFields value length")?) as i64;
            let value = map.string(val_len, "extFields value")?;
            let (Some(key), Some(value)) = (key, value) else { continue };
            if ext.len() == ExtFields::MAX {
                return Err(HeaderError::TooManyFields);
            }
            match (std::str::from_utf8(&header[key.clone()]), std::str::from_utf8(&header[value.clone()])) {
                (Ok(_), Ok(_)) => ext.push_frame_span(key, value),
                _ => ext.push(&lossy(&header[key]), &lossy(&header[value])),
            }
        }
        Some(ext)
    };
    let mut cmd = RemotingCommand { code, language, version, opaque, flag, remark, ext_fields, body: Bytes::new() };
    cmd.attach_frame(header);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked example of protocol.md §1.4: request 105 for TopicTest in binary form.
    #[test]
    fn binary_worked_example() {
        let header: &[u8] = &[
            0x00, 0x69, 0x00, 0x01, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x00, 0x05, b't', b'o',
            b'p', b'i', b'c', 0, 0, 0, 9, b'T', b'o', b'p', b'i', b'c', b'T', b'e', b's', b't',
        ];
        assert_eq!(header.len(), 41);
        let cmd = decode_binary_header(header).unwrap();
        assert_eq!((cmd.code, cmd.version, cmd.opaque, cmd.flag), (105, 479, 1, 0));
        assert_eq!(cmd.language, Some(LanguageCode::Java));
        assert_eq!(cmd.ext("topic"), Some("TopicTest"));
        assert_eq!(cmd.remark, None);
    }

    /// Invalid UTF-8 in a binary field is read with replacement characters, as Java's `new String` does.
    #[test]
    fn binary_invalid_utf8_is_replaced() {
        let mut h = vec![0, 105, 0, 1, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let map = [&[0, 1, b'k', 0, 0, 0, 2, 0xff, b'v'][..], &[0, 5, b't', b'o', b'p', b'i', b'c', 0, 0, 0, 1, b'T']]
            .concat();
        h.extend_from_slice(&(map.len() as i32).to_be_bytes());
        h.extend_from_slice(&map);
        let cmd = decode_binary_header(&h).unwrap();
        assert_eq!(cmd.ext("k"), Some("\u{fffd}v"));
        assert_eq!(cmd.ext("topic"), Some("T"));
    }

    #[test]
    fn binary_lengths_past_the_end_fail() {
        let mut h = vec![0, 105, 0, 1, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0];
        h.extend_from_slice(&100i32.to_be_bytes());
        assert_eq!(decode_binary_header(&h), Err(HeaderError::Truncated("remark")));
        h.truncate(13);
        h.extend_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(decode_binary_header(&h), Err(HeaderError::NegativeLength("remark")));
    }

    #[test]
    fn json_is_lenient_like_java() {
        let cmd = decode_json_header(
            br#"{"code":"105","extFields":{"topic":"T","n":5,"b":true,"z":null},"flag":0,"language":"KLINGON","opaque":7,"remark":"","version":317,"extra":[1]}"#,
        )
        .unwrap();
        assert_eq!(cmd.code, 105);
        assert_eq!(cmd.language, None);
        assert_eq!(cmd.ext("n"), Some("5"));
        assert_eq!(cmd.ext("b"), Some("true"));
        assert_eq!(cmd.ext("z"), None);
        assert_eq!(cmd.remark.as_deref(), Some(""));
        assert!(decode_json_header(br#"{"code":"abc"}"#).is_err());
        assert!(decode_json_header(b"{not json").is_err());
    }

    #[test]
    fn round_trip_both_encodings() {
        let mut cmd = RemotingCommand::request(103, [("brokerName", "b"), ("brokerId", "0")].into_iter().collect());
        cmd.opaque = 9;
        cmd.remark = Some("hi".into());
        cmd.body = Bytes::from_static(b"body");
        for ty in [SerializeType::Json, SerializeType::RocketMq] {
            let mut buf = bytes::BytesMut::new();
            cmd.encode(ty, &mut buf);
            let frame = tokio_util::codec::Decoder::decode(&mut super::super::frame::FrameDecoder::default(), &mut buf)
                .unwrap()
                .unwrap();
            assert_eq!(decode_command(frame).unwrap(), cmd);
        }
    }

    /// Decoded into a command that held another request, a header leaves nothing of the other behind:
    /// every field is the header's (or absent), whichever reader took it. Made to fail by leaving the
    /// remark as it was.
    #[test]
    fn decoding_into_a_used_command_replaces_all_of_it() {
        let frame = |header: &'static [u8], body: &'static [u8]| RawFrame {
            serialize_type: SerializeType::Json,
            header: Bytes::from_static(header),
            body: Bytes::from_static(body),
        };
        let full =
            br#"{"code":103,"extFields":{"a":"1"},"flag":0,"language":"GO","opaque":4,"remark":"r","version":9}"#;
        // The plain reader takes the first two; the third (a nested value) is the general reader's.
        let bare: [&'static [u8]; 3] = [b"{}", br#"{"code":105,"opaque":7}"#, br#"{"code":105,"x":{"y":[1]}}"#];
        for header in bare {
            let mut cmd = RemotingCommand::blank();
            decode_command_into(frame(full, b"old body"), &mut cmd).expect("decoded");
            assert_eq!((cmd.remark.as_deref(), cmd.ext("a")), (Some("r"), Some("1")));
            decode_command_into(frame(header, b""), &mut cmd).expect("decoded");
            assert_eq!(
                cmd,
                decode_command(frame(header, b"")).expect("decoded"),
                "{}",
                String::from_utf8_lossy(header)
            );
            assert_eq!(
                (cmd.language, cmd.remark.as_deref(), cmd.ext_fields.is_none(), cmd.opaque == 4),
                (None, None, true, false)
            );
            assert!(cmd.body.is_empty());
        }
    }
}
