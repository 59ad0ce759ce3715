//! Length-prefixed framing of the remoting protocol: cuts a byte stream into frames.
//!
//! A frame is `int32 L | int32 (type << 24 | H) | H header bytes | L - 4 - H body bytes`, all big-endian.
//! Every length is checked against the configured cap before a single byte is reserved for it, and a frame
//! that is not complete yet is simply `Ok(None)`.

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// The Java default for `com.rocketmq.remoting.frameMaxLength`: the whole frame, prefix included.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// How the header of a frame is serialized (the high byte of the second word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerializeType {
    Json,
    RocketMq,
}

impl SerializeType {
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }
}

/// One frame cut out of the stream; header and body share the read buffer's memory.
#[derive(Debug, Clone)]
pub struct RawFrame {
    pub serialize_type: SerializeType,
    pub header: Bytes,
    pub body: Bytes,
}

/// A frame that cannot be decoded: the connection that sent it is closed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame length {0} is below the 4-byte minimum")]
    TooShort(i64),
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLong { len: i64, max: usize },
    #[error("header length {header} exceeds frame length {frame}")]
    HeaderPastFrame { header: usize, frame: usize },
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("i/o error: {0}")]
    Io(String),
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        FrameError::Io(e.to_string())
    }
}

/// Splits frames off a buffer. `max_frame_len` counts the 4-byte prefix, as Netty's decoder does.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame_len: usize,
}

impl FrameDecoder {
    pub fn new(max_frame_len: usize) -> Self {
        FrameDecoder { max_frame_len }
    }
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl Decoder for FrameDecoder {
    type Item = RawFrame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RawFrame>, FrameError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([src[0], src[1], src[2], src[3]]) as i64;
        if len < 4 {
            return Err(FrameError::TooShort(len));
        }
        if len as u64 + 4 > self.max_frame_len as u64 {
            return Err(FrameError::TooLong { len, max: self.max_frame_len });
        }
        let len = len as usize;
        if src.len() < 8 {
            return Ok(None);
        }
        let word = u32::from_be_bytes([src[4], src[5], src[6], src[7]]);
        let serialize_type = match (word >> 24) as u8 {
            0 => SerializeType::Json,
            1 => SerializeType::RocketMq,
            other => return Err(FrameError::UnknownSerializeType(other)),
        };
        let header_len = (word & 0x00FF_FFFF) as usize;
        if header_len > len - 4 {
            return Err(FrameError::HeaderPastFrame { header: header_len, frame: len });
        }
        if src.len() < 4 + len {
            // Room for the rest is the caller's to reserve: a large frame waits for the large-frame budget.
            return Ok(None);
        }
        src.advance(8);
        let mut frame = src.split_to(len - 4).freeze();
        let header = frame.split_to(header_len);
        Ok(Some(RawFrame { serialize_type, header, body: frame }))
    }
}

/// The whole length (prefix included) of the frame that `src` starts with, once its length prefix is there.
/// Meant for a buffer that `FrameDecoder::decode` has just answered `Ok(None)` for, which checked the length.
pub fn announced_frame_len(src: &[u8]) -> Option<usize> {
    let prefix: [u8; 4] = src.get(..4)?.try_into().ok()?;
    usize::try_from(i32::from_be_bytes(prefix)).ok().map(|len| len + 4)
}

/// The 8-byte frame prefix for a header of `header_len` and a body of `body_len` bytes.
pub fn frame_prefix(ty: SerializeType, header_len: usize, body_len: usize) -> [u8; 8] {
    let mut prefix = [0u8; 8];
    prefix[..4].copy_from_slice(&((4 + header_len + body_len) as u32).to_be_bytes());
    prefix[4..].copy_from_slice(&(((ty.code() as u32) << 24) | (header_len as u32 & 0x00FF_FFFF)).to_be_bytes());
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8], max: usize) -> Result<Option<RawFrame>, FrameError> {
        let mut buf = BytesMut::from(bytes);
        FrameDecoder::new(max).decode(&mut buf)
    }

    #[test]
    fn partial_frames_are_not_errors() {
        let full = [0, 0, 0, 6, 0, 0, 0, 1, b'{', b'x'];
        for cut in 0..full.len() {
            assert!(decode_all(&full[..cut], 1024).unwrap().is_none(), "cut at {cut}");
        }
        let f = decode_all(&full, 1024).unwrap().unwrap();
        assert_eq!(&f.header[..], b"{");
        assert_eq!(&f.body[..], b"x");
    }

    #[test]
    fn rejects_bad_lengths_before_buffering() {
        assert_eq!(decode_all(&[0xff, 0xff, 0xff, 0xff], 1024).unwrap_err(), FrameError::TooShort(-1));
        assert_eq!(decode_all(&[0, 0, 0, 3], 1024).unwrap_err(), FrameError::TooShort(3));
        assert_eq!(decode_all(&[0, 0, 4, 0], 1024).unwrap_err(), FrameError::TooLong { len: 1024, max: 1024 });
        assert_eq!(
            decode_all(&[0, 0, 0, 8, 0, 0, 0, 5], 1024).unwrap_err(),
            FrameError::HeaderPastFrame { header: 5, frame: 8 }
        );
        assert_eq!(decode_all(&[0, 0, 0, 8, 2, 0, 0, 1], 1024).unwrap_err(), FrameError::UnknownSerializeType(2));
    }

    #[test]
    fn largest_frame_allowed_is_cap_minus_prefix() {
        let max = DEFAULT_MAX_FRAME_LEN;
        let ok = ((max - 4) as u32).to_be_bytes();
        assert!(decode_all(&ok, max).unwrap().is_none());
        let too_big = ((max - 3) as u32).to_be_bytes();
        assert!(matches!(decode_all(&too_big, max), Err(FrameError::TooLong { .. })));
    }

    #[test]
    fn announced_length_counts_the_prefix() {
        assert_eq!(announced_frame_len(&[0, 0, 0]), None);
        assert_eq!(announced_frame_len(&[0, 0x10, 0, 0, 0]), Some(0x10_0004));
        assert_eq!(announced_frame_len(&[0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn prefix_matches_java_type_marking() {
        assert_eq!(&frame_prefix(SerializeType::Json, 261, 0)[4..], &[0x00, 0x00, 0x01, 0x05]);
        assert_eq!(&frame_prefix(SerializeType::RocketMq, 0xFF_FFFF, 0)[4..], &[0x01, 0xFF, 0xFF, 0xFF]);
        assert_eq!(&frame_prefix(SerializeType::Json, 131, 0)[..], &[0, 0, 0, 0x87, 0, 0, 0, 0x83]);
    }
}
