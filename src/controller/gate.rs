//! Who may speak Raft to this node (codes 60001-60003), and what a Raft message may ask: the one place
//! that lets another node's frame reach openraft.
//!
//! Two fences. The address: a Raft frame is taken only from an address that one of
//! `controllerDLegerPeers` resolves to. The secret, with `controllerPeerSecretFile`: every Raft request
//! carries an HMAC-SHA256, keyed by the file's content, over the receiving node's id, the code, a time and
//! the body, and every reply one over the request's MAC, its code and its body; a frame without a valid
//! one, or whose time is more than [`WINDOW`] away, is refused before its body is parsed. Without the file
//! only the address fence stands, and the node says so at start (SECURITY.md).
//!
//! And whatever its sender: a term that cannot come next ([`MAX_TERM_JUMP`] above ours, or near the
//! top of `u64`, where openraft would overflow), a snapshot chunk reaching past [`MAX_SNAPSHOT`], or
//! entries past [`MAX_UNPURGED`] beyond the last purge are refused, and openraft never sees them.

use std::net::{IpAddr, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::hmac;

use super::settings::Peer;
use crate::remoting::RemotingCommand;

/// How far a request's time may be from this node's clock.
pub const WINDOW: Duration = Duration::from_secs(60);
/// A term more than this above the node's own is refused: a node cut off for a year campaigns some
/// 30 million times; 2^32 is no term a real group reaches.
pub const MAX_TERM_JUMP: u64 = 1 << 32;
/// The largest snapshot a node takes in: the state's own bound in bytes, and an eighth more for what the
/// count leaves out (the metadata, epochs).
pub const MAX_SNAPSHOT: u64 = (super::replicas::MAX_STATE_BYTES + super::replicas::MAX_STATE_BYTES / 8) as u64;
/// Entries a node keeps past its last purge: the leader purges after every 1,000, so a real group keeps
/// a few thousand; a peer that appends this many without a snapshot is refused.
pub const MAX_UNPURGED: u64 = 100_000;

/// The log's file may grow to this between purges: a real group's decisions are a few hundred bytes each,
/// and it purges after every 1,000.
pub const MAX_LOG_BYTES: u64 = 256 << 20;

const TIME: &str = "raftTime";
const MAC: &str = "raftMac";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    #[error("a Raft frame from {0}, which is none of controllerDLegerPeers")]
    Stranger(IpAddr),
    #[error("a Raft frame without a valid MAC (controllerPeerSecretFile)")]
    BadMac,
    #[error("a Raft frame whose time is over {}s away", WINDOW.as_secs())]
    Stale,
    #[error("term {asked} cannot follow term {ours}")]
    Term { asked: u64, ours: u64 },
    #[error("a snapshot chunk reaching byte {0}, over {MAX_SNAPSHOT}")]
    Snapshot(u64),
    #[error("entries up to index {0}, over {MAX_UNPURGED} past the last purge")]
    Unpurged(u64),
    #[error("entries that do not follow one another from the previous log id")]
    Gap,
    #[error("entries past the log's {} MiB since its last purge", MAX_LOG_BYTES >> 20)]
    LogFull,
    #[error("a snapshot whose chunks are not in order, or whose data is no snapshot")]
    BadSnapshot,
    #[error("entries at index {0} that are not the ones this node committed there")]
    Rewrite(u64),
}

/// How often the peers' names are resolved again: a peer whose address changes (a replaced host, a pod
/// rescheduled) or whose name did not resolve at start is let in within this, not refused for good.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(30);

/// This node's fences: the key, read once at start, and the peers' addresses, resolved at start and
/// again every [`RESOLVE_EVERY`] ([`PeerGate::resolve_again`]).
pub struct PeerGate {
    key: Option<hmac::Key>,
    peers: Vec<Peer>,
    /// Each peer's addresses, IPv4-mapped ones as IPv4: the last that its name resolved to.
    addrs: ArcSwap<Vec<Vec<IpAddr>>>,
}

/// What `addr` resolves to now, with the port it names (no lookup for an address given as an IP).
fn resolve(addr: &str) -> std::io::Result<Vec<IpAddr>> {
    Ok(addr.to_socket_addrs()?.map(|a| canonical(a.ip())).collect())
}

impl PeerGate {
    /// `secret` is the content of `controllerPeerSecretFile`, if one is set.
    pub fn new(peers: &[Peer], secret: Option<&[u8]>) -> PeerGate {
        let gate = PeerGate {
            key: secret.map(|s| hmac::Key::new(hmac::HMAC_SHA256, s)),
            peers: peers.to_vec(),
            addrs: ArcSwap::from_pointee(vec![Vec::new(); peers.len()]),
        };
        gate.resolve_with(resolve);
        gate
    }

    /// Resolves the peers' names again, on a blocking thread (a lookup may wait on DNS).
    pub async fn resolve_again(self: &std::sync::Arc<Self>) {
        let gate = self.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || gate.resolve_with(resolve)).await {
            tracing::warn!(error = %e, "controller: resolving the peers' addresses failed");
        }
    }

    /// Takes each peer's addresses from `lookup`. A peer whose name does not resolve now keeps the
    /// addresses it had (a DNS outage must not lock the group's own nodes out); a change is logged.
    fn resolve_with(&self, lookup: impl Fn(&str) -> std::io::Result<Vec<IpAddr>>) {
        let old = self.addrs.load();
        let mut new = old.as_ref().clone();
        for (i, peer) in self.peers.iter().enumerate() {
            match lookup(&peer.addr) {
                Ok(mut addrs) if !addrs.is_empty() => {
                    addrs.sort();
                    addrs.dedup();
                    if addrs != new[i] {
                        tracing::info!(peer = %peer.id, addr = %peer.addr, ?addrs, "controller: a peer's addresses");
                        new[i] = addrs;
                    }
                }
                Ok(_) | Err(_) if !new[i].is_empty() => {}
                Ok(_) => {
                    tracing::warn!(peer = %peer.id, addr = %peer.addr, "controller: a peer's address resolves to nothing; its Raft frames are refused")
                }
                Err(e) => {
                    tracing::warn!(peer = %peer.id, addr = %peer.addr, error = %e, "controller: a peer's address does not resolve; its Raft frames are refused")
                }
            }
        }
        if new != *old.as_ref() {
            self.addrs.store(std::sync::Arc::new(new));
        }
    }

    /// Whether `ip` is one of the peers' addresses.
    pub fn is_peer_address(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.addrs.load().iter().any(|addrs| addrs.contains(&ip))
    }

    pub fn authenticates(&self) -> bool {
        self.key.is_some()
    }

    /// Signs a request to the node whose DLedger id is `to`.
    pub fn sign_request(&self, to: &str, req: &mut RemotingCommand) {
        let Some(key) = &self.key else { return };
        let time = now_millis().to_string();
        let tag = hmac::sign(key, &request_message(to, req.code, &time, &req.body));
        let ext = req.ext_fields.get_or_insert_with(Default::default);
        ext.insert(TIME, &time);
        ext.insert(MAC, BASE64.encode(tag.as_ref()));
    }

    /// Checks a Raft request that came from `from` to this node, whose DLedger id is `me`.
    pub fn check_request(&self, me: &str, from: IpAddr, req: &RemotingCommand) -> Result<(), Refused> {
        if !self.is_peer_address(from) {
            return Err(Refused::Stranger(canonical(from)));
        }
        let Some(key) = &self.key else { return Ok(()) };
        let (Some(time), Some(mac)) = (req.ext(TIME), req.ext(MAC)) else { return Err(Refused::BadMac) };
        let tag = BASE64.decode(mac).map_err(|_| Refused::BadMac)?;
        hmac::verify(key, &request_message(me, req.code, time, &req.body), &tag).map_err(|_| Refused::BadMac)?;
        let sent: u64 = time.parse().map_err(|_| Refused::BadMac)?;
        if now_millis().abs_diff(sent) > WINDOW.as_millis() as u64 {
            return Err(Refused::Stale);
        }
        Ok(())
    }

    /// Signs the reply to a request that carried `request_mac`.
    pub fn sign_response(&self, request_mac: &str, resp: &mut RemotingCommand) {
        let Some(key) = &self.key else { return };
        let tag = hmac::sign(key, &response_message(request_mac, resp.code, &resp.body));
        resp.ext_fields.get_or_insert_with(Default::default).insert(MAC, BASE64.encode(tag.as_ref()));
    }

    /// Checks the reply to a request that carried `request_mac` (signed by [`Self::sign_request`]): only
    /// a node with the secret could write it.
    pub fn check_response(&self, request_mac: Option<&str>, resp: &RemotingCommand) -> Result<(), Refused> {
        let Some(key) = &self.key else { return Ok(()) };
        let (Some(request_mac), Some(mac)) = (request_mac, resp.ext(MAC)) else { return Err(Refused::BadMac) };
        let tag = BASE64.decode(mac).map_err(|_| Refused::BadMac)?;
        hmac::verify(key, &response_message(request_mac, resp.code, &resp.body), &tag).map_err(|_| Refused::BadMac)
    }
}

/// The MAC of the request a reply answers, to sign the reply with.
pub fn request_mac(req: &RemotingCommand) -> Option<&str> {
    req.ext(MAC)
}

/// A term this node may move to: not past [`MAX_TERM_JUMP`] above its own, and far from overflow.
pub fn check_term(asked: u64, ours: u64) -> Result<(), Refused> {
    if asked > ours.saturating_add(MAX_TERM_JUMP) || asked >= u64::MAX / 2 {
        return Err(Refused::Term { asked, ours });
    }
    Ok(())
}

/// A snapshot chunk of `len` bytes at `offset`.
pub fn check_chunk(offset: u64, len: usize) -> Result<(), Refused> {
    let end = offset.saturating_add(len as u64);
    if end > MAX_SNAPSHOT {
        return Err(Refused::Snapshot(end));
    }
    Ok(())
}

/// Indexes that run on one by one from `prev` (none: from 0).
pub fn check_consecutive(prev: Option<u64>, indexes: impl Iterator<Item = u64>) -> Result<(), Refused> {
    let first = prev.map_or(0, |p| p.saturating_add(1));
    if (first..).zip(indexes).any(|(expected, index)| index != expected) {
        return Err(Refused::Gap);
    }
    Ok(())
}

/// Entries up to `last` when the log was last purged at `purged`.
pub fn check_unpurged(last: u64, purged: u64) -> Result<(), Refused> {
    if last > purged.saturating_add(MAX_UNPURGED) {
        return Err(Refused::Unpurged(last));
    }
    Ok(())
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// What a MAC is over: a label saying what is signed, the parts each ended by a NUL, then the body.
fn signed(label: &[u8], parts: &[&[u8]], body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(label.len() + 64 + body.len());
    m.extend_from_slice(label);
    for part in parts {
        m.extend_from_slice(part);
        m.push(0);
    }
    m.extend_from_slice(body);
    m
}

fn request_message(to: &str, code: i32, time: &str, body: &[u8]) -> Vec<u8> {
    signed(b"rocketns-raft-request-v1\0", &[to.as_bytes(), code.to_string().as_bytes(), time.as_bytes()], body)
}

fn response_message(request_mac: &str, code: i32, body: &[u8]) -> Vec<u8> {
    signed(b"rocketns-raft-response-v1\0", &[request_mac.as_bytes(), code.to_string().as_bytes()], body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::ExtFields;

    fn gate(secret: Option<&[u8]>) -> PeerGate {
        let peers = [Peer { id: "n0".into(), addr: "127.0.0.1:9878".into() }];
        PeerGate::new(&peers, secret)
    }

    /// A peer's name that did not resolve at start is let in once it does; one that stops resolving
    /// keeps its addresses; one that moves is let in at its new address and no longer at its old.
    #[test]
    fn peers_are_resolved_again() {
        let peers = [
            Peer { id: "n0".into(), addr: "127.0.0.1:9878".into() },
            Peer { id: "n1".into(), addr: "controller-1.test.invalid:9878".into() },
        ];
        // No DNS is asked: n1's lookups are `named`'s (as new() does, with that lookup).
        let named = |to: Option<IpAddr>| {
            move |addr: &str| match (addr.starts_with("controller-1"), to) {
                (true, Some(ip)) => Ok(vec![ip]),
                (true, None) => Err(std::io::Error::other("no such host")),
                (false, _) => resolve(addr),
            }
        };
        let gate = PeerGate { key: None, peers: peers.to_vec(), addrs: ArcSwap::from_pointee(vec![Vec::new(); 2]) };
        gate.resolve_with(named(None));
        let (old, new): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert!(gate.is_peer_address("127.0.0.1".parse().unwrap()));
        assert!(!gate.is_peer_address(old), "n1's name resolves to nothing yet");
        gate.resolve_with(named(Some(old)));
        assert!(gate.is_peer_address(old));
        assert!(gate.is_peer_address(IpAddr::V6(std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped())));
        gate.resolve_with(named(None));
        assert!(gate.is_peer_address(old), "a DNS outage locks no peer out");
        gate.resolve_with(named(Some(new)));
        assert!(gate.is_peer_address(new) && !gate.is_peer_address(old));
        assert!(gate.is_peer_address("127.0.0.1".parse().unwrap()));
    }

    fn raft_request() -> RemotingCommand {
        let mut req = RemotingCommand::request(60001, ExtFields::new());
        req.body = bytes::Bytes::from_static(b"{\"vote\":1}");
        req
    }

    #[test]
    fn a_signed_request_passes_and_any_change_to_it_does_not() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let (ours, theirs) = (gate(Some(b"s3cret")), gate(Some(b"other")));
        let mut req = raft_request();
        ours.sign_request("n0", &mut req);
        assert_eq!(ours.check_request("n0", local, &req), Ok(()));
        assert_eq!(ours.check_request("n1", local, &req), Err(Refused::BadMac), "signed for another node");
        assert_eq!(theirs.check_request("n0", local, &req), Err(Refused::BadMac), "another secret");
        let mut changed = req.clone();
        changed.body = bytes::Bytes::from_static(b"{\"vote\":2}");
        assert_eq!(ours.check_request("n0", local, &changed), Err(Refused::BadMac));
        assert_eq!(
            ours.check_request("n0", "127.0.0.2".parse().unwrap(), &req),
            Err(Refused::Stranger("127.0.0.2".parse().unwrap()))
        );
        assert_eq!(ours.check_request("n0", local, &raft_request()), Err(Refused::BadMac), "unsigned");
        assert_eq!(gate(None).check_request("n0", local, &raft_request()), Ok(()), "address fence only");
    }

    #[test]
    fn a_reply_is_bound_to_its_request() {
        let ours = gate(Some(b"s3cret"));
        let (mut first, mut second) = (raft_request(), raft_request());
        ours.sign_request("n0", &mut first);
        std::thread::sleep(Duration::from_millis(2));
        ours.sign_request("n0", &mut second);
        let mut resp = RemotingCommand::response(0, None);
        ours.sign_response(request_mac(&first).unwrap(), &mut resp);
        assert_eq!(ours.check_response(request_mac(&first), &resp), Ok(()));
        assert_eq!(ours.check_response(request_mac(&second), &resp), Err(Refused::BadMac));
        assert_eq!(ours.check_response(request_mac(&first), &RemotingCommand::response(0, None)), Err(Refused::BadMac));
    }

    #[test]
    fn terms_chunks_and_appends_have_bounds() {
        assert_eq!(check_term(5, 4), Ok(()));
        assert!(check_term(u64::MAX, 4).is_err());
        assert!(check_term(4 + MAX_TERM_JUMP + 1, 4).is_err());
        assert!(check_chunk(1 << 40, 3).is_err());
        assert_eq!(check_chunk(0, 3), Ok(()));
        assert!(check_unpurged(MAX_UNPURGED + 11, 10).is_err());
        assert_eq!(check_unpurged(MAX_UNPURGED + 10, 10), Ok(()));
    }
}
