//! Requests and frames as brokers, clients and hostile peers put them on the wire, and a whole frame taken
//! off a read buffer: one definition for this crate's tests, the differential tester and the load
//! generator.

use bytes::{Bytes, BytesMut};

use crate::remoting::{ExtFields, RemotingCommand};

/// A request with these header fields, in this order.
pub fn request(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
    RemotingCommand::request(code, fields.iter().map(|(k, v)| (*k, *v)).collect())
}

/// A broker as its requests name it: the four fields every broker request header shares.
#[derive(Clone, Copy, Debug)]
pub struct BrokerIdentity<'a> {
    pub cluster: &'a str,
    pub name: &'a str,
    pub id: i64,
    pub addr: &'a str,
}

/// A request that names `broker` (UNREGISTER_BROKER, QUERY_DATA_VERSION, BROKER_HEARTBEAT, ...), with the
/// fields in the order a Java broker's header class lists them.
pub fn broker_request(code: i32, broker: BrokerIdentity<'_>) -> RemotingCommand {
    let id = broker.id.to_string();
    request(
        code,
        &[("brokerAddr", broker.addr), ("brokerId", &id), ("brokerName", broker.name), ("clusterName", broker.cluster)],
    )
}

/// REGISTER_BROKER with the fields every broker version sends: who it is, its HA address, whether `body`
/// is compressed, and the body's CRC32 masked to 31 bits as the broker computes it. Version-specific
/// fields (`enableActingMaster`, `heartbeatTimeoutMillis`, `__ZONE_NAME`) are the caller's to add.
pub fn register_request(broker: BrokerIdentity<'_>, ha_addr: &str, body: Vec<u8>, compressed: bool) -> RemotingCommand {
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF).to_string();
    let mut r = broker_request(103, broker);
    let ext = r.ext_fields.get_or_insert_with(ExtFields::new);
    ext.insert("haServerAddr", ha_addr);
    ext.insert("compressed", if compressed { "true" } else { "false" });
    ext.insert("bodyCrc32", &crc);
    r.body = Bytes::from(body);
    r
}

/// A frame from its parts, whatever they hold: the length prefix, the serialize type in the header
/// length's top byte (0 JSON, 1 RocketMQ's binary form), the header and the body.
pub fn raw_frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut f = ((4 + header.len() + body.len()) as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&((u32::from(serialize_type) << 24) | header.len() as u32).to_be_bytes());
    f.extend_from_slice(header);
    f.extend_from_slice(body);
    f
}

/// The first whole frame in `buf` (length prefix included), split off it; `None` until one has come in.
pub fn split_frame(buf: &mut BytesMut) -> Option<BytesMut> {
    let prefix: [u8; 4] = buf.get(..4)?.try_into().ok()?;
    let len = 4 + u32::from_be_bytes(prefix) as usize;
    (buf.len() >= len).then(|| buf.split_to(len))
}

/// A port free on 127.0.0.1 right now, for a server that must be told its port before it starts. Drawn at
/// random below the kernel's ephemeral range (`ip_local_port_range`): a port the kernel hands out (port 0)
/// is also one it gives the outbound connections other tests open meanwhile (10,000 at once in some), and
/// one of them took a server's port between this check and its bind ("Address already in use").
pub fn free_port() -> u16 {
    use std::hash::BuildHasher;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOWEST: u16 = 10_000;
    if ephemeral > LOWEST {
        for _ in 0..1000 {
            let drawn = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
            let port = LOWEST + (drawn % u64::from(ephemeral - LOWEST)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// Waits up to `within` until something accepts connections at `addr`; says whether it did. A connection
/// to itself does not count: a port in the ephemeral range (`free_port`'s fallback) can be the one the
/// kernel picks for the connect, which then succeeds with nothing listening (TCP's simultaneous open).
pub fn wait_for_listener(addr: &str, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    let listened = || {
        std::net::TcpStream::connect(addr)
            .is_ok_and(|s| matches!((s.local_addr(), s.peer_addr()), (Ok(l), Ok(p)) if l != p))
    };
    while !listened() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Writes `dir/namesrv.properties` for the real binary: 127.0.0.1, `port` (0: any), the KV store in
/// `dir`, then `extra` lines. Panics, failing the test, when it cannot be written.
pub fn properties_file(dir: &std::path::Path, port: u16, extra: &str) -> std::path::PathBuf {
    let path = dir.join("namesrv.properties");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort={port}\nkvConfigPath={}\n{extra}",
        dir.join("kvConfig.json").display()
    );
    if let Err(e) = std::fs::write(&path, text) {
        panic!("cannot write {}: {e}", path.display());
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_split_whole_and_only_whole() {
        let one = raw_frame(0, b"{}", b"body");
        let mut buf = BytesMut::from(&one[..one.len() - 1]);
        assert!(split_frame(&mut buf).is_none());
        buf.extend_from_slice(&one[one.len() - 1..]);
        buf.extend_from_slice(&raw_frame(1, b"h", b"")[..3]);
        assert_eq!(split_frame(&mut buf).as_deref(), Some(&one[..]));
        assert_eq!(buf.len(), 3);
        assert!(split_frame(&mut buf).is_none());
        let mut exact = BytesMut::from(&one[..]);
        assert_eq!(split_frame(&mut exact).as_deref(), Some(&one[..]));
        assert!(exact.is_empty());
    }

    #[test]
    fn registrations_carry_the_masked_crc_of_their_body() {
        let broker = BrokerIdentity { cluster: "c", name: "b", id: 0, addr: "10.0.0.1:10911" };
        let r = register_request(broker, "10.0.0.1:10912", b"{}".to_vec(), false);
        let fields = r.ext_fields.expect("fields");
        let crc = (crc32fast::hash(b"{}") & 0x7FFF_FFFF).to_string();
        assert_eq!(fields.get("bodyCrc32"), Some(crc.as_str()));
        assert_eq!(fields.get("brokerAddr"), Some("10.0.0.1:10911"));
        assert_eq!(fields.get("compressed"), Some("false"));
    }
}
