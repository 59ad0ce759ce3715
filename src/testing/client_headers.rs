//! GET_ROUTEINFO_BY_TOPIC as each client family really writes it: field order, language, version, extFields
//! and trailing bytes, each taken from that client's source (named beside it). The load generator sends
//! these, the header benches decode them, and the decoder's tests check that every one reads the same.

use bytes::BufMut;

/// A client family's request header (also the load generator's `--header` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientHeader {
    /// The Java client (4.x and 5.x): fastjson, keys in alphabetical order, `serializeTypeCurrentRPC` from
    /// its getter, nulls left out (apache/rocketmq `RemotingCommand`, `RemotingSerializable`).
    Java,
    /// rocketmq-client-go v2: jsoniter over the struct, in field order, `remark` always written, version 317
    /// (`internal/remote/codec.go`).
    Go,
    /// rocketmq-rust's client: its direct JSON writer, struct order, `remark` null, then
    /// `serializeTypeCurrentRPC`; version V5_3_1_SNAPSHOT (474) (rocketmq-protocol 1.0.0,
    /// `remoting_command/encode/json.rs`).
    Rust,
    /// rocketmq-client-cpp 2.x: jsoncpp's FastWriter (keys sorted, a trailing newline), the credential
    /// fields always present and empty when unsigned, version V4_6_0 (333) (`src/protocol/RemotingCommand.cpp`).
    Cpp,
    /// ali-ons, the Node.js client: `JSON.stringify` of an object literal (insertion order), language JAVA,
    /// version V3_4_9 (121), `remark` undefined so left out (`lib/protocol/command/remoting_command.js`).
    Node,
    /// The ROCKETMQ binary header (`rocketmq.serialize.type=ROCKETMQ` in the Java client; the Go client's
    /// RocketMQCodecs): fixed fields, then a length-prefixed map.
    Binary,
}

impl ClientHeader {
    pub const ALL: [ClientHeader; 6] = [
        ClientHeader::Java,
        ClientHeader::Go,
        ClientHeader::Rust,
        ClientHeader::Cpp,
        ClientHeader::Node,
        ClientHeader::Binary,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ClientHeader::Java => "java",
            ClientHeader::Go => "go",
            ClientHeader::Rust => "rust",
            ClientHeader::Cpp => "cpp",
            ClientHeader::Node => "node",
            ClientHeader::Binary => "binary",
        }
    }

    /// The version the client puts in its header.
    pub fn version(self) -> i32 {
        match self {
            ClientHeader::Java | ClientHeader::Binary => 479,
            ClientHeader::Go => 317,
            ClientHeader::Rust => 474,
            ClientHeader::Cpp => 333,
            ClientHeader::Node => 121,
        }
    }

    /// Appends the header of a GET_ROUTEINFO_BY_TOPIC for `topic` (a plain name: no character JSON escapes).
    pub fn put_route_header<B: BufMut>(self, out: &mut B, topic: &str, opaque: i32) {
        let mut digits = itoa::Buffer::new();
        let opaque_text = digits.format(opaque).as_bytes();
        let topic = topic.as_bytes();
        let pieces: [&[u8]; 5] = match self {
            ClientHeader::Java => [
                br#"{"code":105,"extFields":{"topic":""#,
                topic,
                br#""},"flag":0,"language":"JAVA","opaque":"#,
                opaque_text,
                br#","serializeTypeCurrentRPC":"JSON","version":479}"#,
            ],
            ClientHeader::Go => [
                br#"{"code":105,"language":"GO","version":317,"opaque":"#,
                opaque_text,
                br#","flag":0,"remark":"","extFields":{"topic":""#,
                topic,
                br#""}}"#,
            ],
            ClientHeader::Rust => [
                br#"{"code":105,"language":"RUST","version":474,"opaque":"#,
                opaque_text,
                br#","flag":0,"remark":null,"extFields":{"topic":""#,
                topic,
                br#""},"serializeTypeCurrentRPC":"JSON"}"#,
            ],
            ClientHeader::Cpp => [
                br#"{"code":105,"extFields":{"AccessKey":"","OnsChannel":"","Signature":"","topic":""#,
                topic,
                br#""},"flag":0,"language":"CPP","opaque":"#,
                opaque_text,
                b",\"remark\":\"\",\"version\":333}\n",
            ],
            ClientHeader::Node => [
                br#"{"code":105,"language":"JAVA","opaque":"#,
                opaque_text,
                br#","flag":0,"version":121,"extFields":{"topic":""#,
                topic,
                br#""}}"#,
            ],
            ClientHeader::Binary => {
                out.put_i16(105);
                out.put_u8(0); // JAVA
                out.put_i16(479);
                out.put_i32(opaque);
                out.put_i32(0); // flag
                out.put_i32(0); // no remark
                out.put_i32((2 + 5 + 4 + topic.len()) as i32);
                out.put_i16(5);
                out.put_slice(b"topic");
                out.put_i32(topic.len() as i32);
                out.put_slice(topic);
                return;
            }
        };
        for piece in pieces {
            out.put_slice(piece);
        }
    }

    /// Appends a whole GET_ROUTEINFO_BY_TOPIC frame (no body).
    pub fn put_route_request(self, out: &mut Vec<u8>, topic: &str, opaque: i32) {
        let start = out.len();
        out.extend_from_slice(&[0; 8]);
        self.put_route_header(out, topic, opaque);
        let header_len = out.len() - start - 8;
        let ty = if self == ClientHeader::Binary { 1u32 } else { 0 };
        out[start..start + 4].copy_from_slice(&((4 + header_len) as u32).to_be_bytes());
        out[start + 4..start + 8].copy_from_slice(&((ty << 24) | header_len as u32).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::{LanguageCode, decode_command};

    /// Every shape reads as the same request, whatever its opaque's width and sign.
    #[test]
    fn every_client_header_decodes_to_the_same_request() {
        for shape in ClientHeader::ALL {
            for opaque in [1, 999_999_999, 1_000_000_000, i32::MAX, -1, i32::MIN] {
                let mut frame = Vec::new();
                shape.put_route_request(&mut frame, "topic-517", opaque);
                let mut buf = bytes::BytesMut::from(&frame[..]);
                let raw = tokio_util::codec::Decoder::decode(&mut crate::remoting::FrameDecoder::default(), &mut buf)
                    .expect("a valid frame")
                    .expect("a whole frame");
                let cmd = decode_command(raw).unwrap_or_else(|e| panic!("{shape:?} {opaque}: {e}"));
                assert_eq!((cmd.code, cmd.opaque, cmd.flag), (105, opaque, 0), "{shape:?}");
                assert_eq!(cmd.ext("topic"), Some("topic-517"), "{shape:?}");
                assert_eq!(cmd.version, shape.version(), "{shape:?}");
                let language = match shape {
                    ClientHeader::Go => LanguageCode::Go,
                    ClientHeader::Rust => LanguageCode::Rust,
                    ClientHeader::Cpp => LanguageCode::Cpp,
                    _ => LanguageCode::Java,
                };
                assert_eq!(cmd.language, Some(language), "{shape:?}");
            }
        }
    }
}
