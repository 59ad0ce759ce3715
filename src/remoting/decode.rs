//! Decoding of request headers, JSON (`T = 0`) and ROCKETMQ binary (`T = 1`), as leniently as Java does.

use bytes::{Buf, Bytes};
use compact_str::CompactString;

use super::command::{ExtFields, LanguageCode, RemotingCommand};
use super::frame::{RawFrame, SerializeType};
pub use super::json_header::decode_json_header;

/// A header that cannot be decoded; like Java, the connection is then closed without a reply.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("malformed JSON header: {0}")]
    Json(String),
    #[error("binary header truncated at {0}")]
    Truncated(&'static str),
    #[error("binary header field {0} has a negative length")]
    NegativeLength(&'static str),
}

/// Turns a frame into a command; the body is shared, not copied.
pub fn decode_command(frame: RawFrame) -> Result<RemotingCommand, HeaderError> {
    let mut cmd = match frame.serialize_type {
        SerializeType::Json => decode_json_header(&frame.header)?,
        SerializeType::RocketMq => decode_binary_header(frame.header)?,
    };
    cmd.body = frame.body;
    Ok(cmd)
}

fn take_len(buf: &mut Bytes, size: usize, field: &'static str) -> Result<(), HeaderError> {
    if buf.remaining() < size { Err(HeaderError::Truncated(field)) } else { Ok(()) }
}

/// Reads `len` bytes as text; Java decodes with replacement characters, so invalid UTF-8 is not fatal.
fn take_string(buf: &mut Bytes, len: i64, field: &'static str) -> Result<Option<CompactString>, HeaderError> {
    if len < 0 {
        return Err(HeaderError::NegativeLength(field));
    }
    let len = len as usize;
    take_len(buf, len, field)?;
    let bytes = buf.split_to(len);
    // A zero-length string is null in Java's binary decoder.
    Ok((len > 0).then(|| match std::str::from_utf8(&bytes) {
        Ok(text) => CompactString::from(text),
        Err(_) => CompactString::from(String::from_utf8_lossy(&bytes)),
    }))
}

pub fn decode_binary_header(mut buf: Bytes) -> Result<RemotingCommand, HeaderError> {
    take_len(&mut buf, 17, "fixed fields")?;
    let code = buf.get_i16() as i32;
    let language = LanguageCode::from_code(buf.get_u8());
    let version = buf.get_i16() as i32;
    let opaque = buf.get_i32();
    let flag = buf.get_i32();
    let remark_len = buf.get_i32() as i64;
    let remark = take_string(&mut buf, remark_len, "remark")?.map(String::from);
    take_len(&mut buf, 4, "extFields length")?;
    let ext_len = buf.get_i32() as i64;
    if ext_len < 0 {
        return Err(HeaderError::NegativeLength("extFields"));
    }
    take_len(&mut buf, ext_len as usize, "extFields")?;
    let mut map = buf.split_to(ext_len as usize);
    let ext_fields = if ext_len == 0 {
        None
    } else {
        let mut ext = ExtFields::new();
        while map.has_remaining() {
            take_len(&mut map, 2, "extFields key length")?;
            let key_len = map.get_i16() as i64;
            let key = take_string(&mut map, key_len, "extFields key")?;
            take_len(&mut map, 4, "extFields value length")?;
            let val_len = map.get_i32() as i64;
            let value = take_string(&mut map, val_len, "extFields value")?;
            if let (Some(k), Some(v)) = (key, value) {
                ext.push(k, v);
            }
        }
        Some(ext)
    };
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body_prefix: Bytes::new(),
        body: Bytes::new(),
    })
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
        let cmd = decode_binary_header(Bytes::from_static(header)).unwrap();
        assert_eq!((cmd.code, cmd.version, cmd.opaque, cmd.flag), (105, 479, 1, 0));
        assert_eq!(cmd.language, Some(LanguageCode::Java));
        assert_eq!(cmd.ext("topic"), Some("TopicTest"));
        assert_eq!(cmd.remark, None);
    }

    #[test]
    fn binary_lengths_past_the_end_fail() {
        let mut h = vec![0, 105, 0, 1, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0];
        h.extend_from_slice(&100i32.to_be_bytes());
        assert_eq!(decode_binary_header(Bytes::from(h.clone())), Err(HeaderError::Truncated("remark")));
        h.truncate(13);
        h.extend_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(decode_binary_header(Bytes::from(h)), Err(HeaderError::NegativeLength("remark")));
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
}
