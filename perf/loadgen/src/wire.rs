//! What the load generator writes and reads besides route requests (each client family's, from
//! `rocketns::testing::client_headers`): broker registrations, and a fast scan of reply headers.

use std::sync::LazyLock;

use memchr::memmem;
use rocketns::protocol::{DataVersion, TopicConfig};
use rocketns::remoting::RemotingCommand;

/// A header field the load generator and the echo read.
#[derive(Clone, Copy)]
pub enum Field {
    Code,
    Opaque,
}

/// `"code":` and `"opaque":`, each searched with one prepared SIMD substring search (this runs once or twice
/// per request and reply, in the echo too, which must not be slowed by its own search).
static CODE: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(br#""code":"#));
static OPAQUE: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(br#""opaque":"#));

/// The integer of a field in a JSON header (any field order), or of a binary header.
pub fn header_int(header: &[u8], binary: bool, field: Field) -> Option<i64> {
    if binary {
        return match field {
            Field::Code => header.get(0..2).map(|b| i16::from_be_bytes([b[0], b[1]]) as i64),
            Field::Opaque => header.get(5..9).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64),
        };
    }
    let finder = match field {
        Field::Code => &CODE,
        Field::Opaque => &OPAQUE,
    };
    let rest = &header[finder.find(header)? + finder.needle().len()..];
    let (negative, digits) = match rest.first() {
        Some(b'-') => (true, &rest[1..]),
        _ => (false, rest),
    };
    let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if len == 0 || len > 18 {
        return None;
    }
    let n = digits[..len].iter().fold(0i64, |n, d| n * 10 + (d - b'0') as i64);
    Some(if negative { -n } else { n })
}

/// A 5.x broker's REGISTER_BROKER for `topics` (8 read/write queues, perm 6), with a JSON body or, as with
/// `compressedRegister=true`, a zlib one (5.x brokers then leave the `compressed` header false).
pub fn register_request(
    broker: &str,
    id: i64,
    addr: &str,
    topics: &[String],
    counter: i64,
    compressed: bool,
) -> RemotingCommand {
    use rocketns::testing::{register_body_compressed, register_body_json, wire};
    let configs: Vec<TopicConfig> = topics.iter().map(|t| TopicConfig::new(t.as_str(), 8, 8, 6)).collect();
    let dv = DataVersion { counter, state_version: 0, timestamp: 1_700_000_000_000 };
    let body =
        if compressed { register_body_compressed(&dv, &configs, &[]) } else { register_body_json(&dv, &configs) };
    let identity = wire::BrokerIdentity { cluster: "DefaultCluster", name: broker, id, addr };
    let mut cmd = wire::register_request(identity, &addr.replace("10911", "10912"), body, compressed);
    if let Some(fields) = cmd.ext_fields.as_mut() {
        fields.insert("enableActingMaster", "false");
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_scan_reads_opaque_and_code() {
        let mut reply = rocketns::remoting::RemotingCommand::response(17, Some("No topic route info".into()));
        reply.opaque = -2_000_000_123;
        let mut out = bytes::BytesMut::new();
        reply.encode(rocketns::remoting::SerializeType::Json, &mut out);
        assert_eq!(header_int(&out[8..], false, Field::Opaque), Some(-2_000_000_123));
        assert_eq!(header_int(&out[8..], false, Field::Code), Some(17));
        out.clear();
        reply.encode(rocketns::remoting::SerializeType::RocketMq, &mut out);
        assert_eq!(header_int(&out[8..], true, Field::Opaque), Some(-2_000_000_123));
        assert_eq!(header_int(&out[8..], true, Field::Code), Some(17));
    }
}
