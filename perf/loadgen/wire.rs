//! What the load generator writes and reads besides route requests (each client family's, from
//! `rocketns::testing::client_headers`): broker registrations, and a fast scan of reply headers.

use bytes::Bytes;
use rocketns::protocol::{DataVersion, TopicConfig};
use rocketns::remoting::{ExtFields, RemotingCommand};

/// The integer after `"key":` in a JSON header, or the field of a binary header.
pub fn header_int(header: &[u8], binary: bool, key: &str) -> Option<i64> {
    if binary {
        return match key {
            "code" => header.get(0..2).map(|b| i16::from_be_bytes([b[0], b[1]]) as i64),
            "opaque" => header.get(5..9).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64),
            _ => None,
        };
    }
    // `"key":`, found without building the pattern (this runs once or twice per request and reply).
    let key = key.as_bytes();
    let at = header
        .windows(key.len() + 3)
        .position(|w| w[0] == b'"' && &w[1..=key.len()] == key && w[key.len() + 1..] == *b"\":")?
        + key.len()
        + 3;
    let rest = &header[at..];
    let end = rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'-')).unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
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
    use rocketns::testing::{register_body_compressed, register_body_json};
    let configs: Vec<TopicConfig> = topics.iter().map(|t| TopicConfig::new(t.as_str(), 8, 8, 6)).collect();
    let dv = DataVersion { counter, state_version: 0, timestamp: 1_700_000_000_000 };
    let body =
        if compressed { register_body_compressed(&dv, &configs, &[]) } else { register_body_json(&dv, &configs) };
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF).to_string();
    let ext: ExtFields = [
        ("brokerAddr", addr.to_string()),
        ("brokerId", id.to_string()),
        ("brokerName", broker.to_string()),
        ("clusterName", "DefaultCluster".to_string()),
        ("haServerAddr", addr.replace("10911", "10912")),
        ("compressed", "false".to_string()),
        ("bodyCrc32", crc),
        ("enableActingMaster", "false".to_string()),
    ]
    .into_iter()
    .collect();
    let mut cmd = RemotingCommand::request(103, ext);
    cmd.body = Bytes::from(body);
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
        assert_eq!(header_int(&out[8..], false, "opaque"), Some(-2_000_000_123));
        assert_eq!(header_int(&out[8..], false, "code"), Some(17));
        out.clear();
        reply.encode(rocketns::remoting::SerializeType::RocketMq, &mut out);
        assert_eq!(header_int(&out[8..], true, "opaque"), Some(-2_000_000_123));
        assert_eq!(header_int(&out[8..], true, "code"), Some(17));
    }
}
