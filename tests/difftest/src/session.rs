//! One NameServer as the steps of a sequence see it: a connection per broker (so that closing one is the
//! broker going away), one for admin requests, one for clients, and one the runner watches the cluster
//! through while a broker leaves. Every step gives the list of replies it got, a missing reply or a closed
//! connection included, so that the two servers' lists can be compared.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use rocketns::remoting::{RemotingCommand, SerializeType};
use rocketns::testing::reply::Reply;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::model::{BrokerSpec, Dv, Op};
use crate::request;

/// How long a reply may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a broker may take to leave after an unregistration or a closed connection (both servers apply
/// these asynchronously), and after its heartbeat timeout.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(3);
const EXPIRE_TIMEOUT: Duration = Duration::from_secs(6);

/// The step name of the pseudo-reply that says whether a leaving broker left.
pub const LEFT: &str = "left";

/// The barrier's broker: its own name, cluster and address, which no generated broker has, and no topics.
const BARRIER: &str = "difftest-barrier";
const BARRIER_ADDR: &str = "127.0.0.1:1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ConnKey {
    Broker(usize),
    Admin,
    Client,
    Watch,
}

pub(crate) struct Connection {
    stream: TcpStream,
    buf: BytesMut,
    next_opaque: i32,
}

/// What went wrong with a request, as a reply the other server's can be compared with.
pub(crate) fn failure(step: &str, what: &str) -> Reply {
    Reply {
        step: step.into(),
        serialize_type: 255,
        code: -1,
        flag: 0,
        remark: Some(what.into()),
        ext_fields: Default::default(),
        body: None,
        body_base64: None,
    }
}

/// What the runner saw of a server between requests (whether a broker left), as a pseudo-reply.
fn note(what: String) -> Reply {
    Reply { code: 0, ..failure(LEFT, &what) }
}

impl Connection {
    pub(crate) async fn open(addr: SocketAddr) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection { stream, buf: BytesMut::new(), next_opaque: 1 })
    }

    /// Sends a request and waits for the reply with its opaque; `Err` says why there is none (the
    /// connection is then of no further use).
    pub(crate) async fn call(
        &mut self,
        step: &str,
        mut cmd: RemotingCommand,
        ty: SerializeType,
    ) -> Result<Reply, Reply> {
        cmd.opaque = self.next_opaque;
        self.next_opaque += 1;
        let mut out = BytesMut::new();
        cmd.encode(ty, &mut out);
        if self.stream.write_all(&out).await.is_err() {
            return Err(failure(step, "the connection was closed before the request was sent"));
        }
        loop {
            if let Some(frame) = rocketns::testing::wire::split_frame(&mut self.buf) {
                let (reply, opaque) = Reply::from_frame(step, &frame).map_err(|e| failure(step, &e.to_string()))?;
                // A request from the server (none is expected) or a stale reply is passed over.
                if opaque == cmd.opaque && reply.flag & 1 == 1 {
                    return Ok(reply);
                }
                continue;
            }
            match tokio::time::timeout(REPLY_TIMEOUT, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => return Err(failure(step, "no reply within 10 s")),
                Ok(Ok(0)) | Ok(Err(_)) => return Err(failure(step, "the connection was closed without a reply")),
                Ok(Ok(_)) => {}
            }
        }
    }
}

/// One server's side of a run.
pub struct Session {
    addr: SocketAddr,
    brokers: Vec<BrokerSpec>,
    conns: HashMap<ConnKey, Connection>,
    /// The connection each (cluster, address) last registered over successfully, as the server's
    /// channel table keeps it: a closed connection takes these addresses with it.
    live: HashMap<(String, String), usize>,
}

impl Session {
    pub fn new(addr: SocketAddr, brokers: Vec<BrokerSpec>) -> Session {
        Session { addr, brokers, conns: HashMap::new(), live: HashMap::new() }
    }

    async fn call(&mut self, key: ConnKey, step: &str, cmd: RemotingCommand, ty: SerializeType) -> Reply {
        if !self.conns.contains_key(&key) {
            match Connection::open(self.addr).await {
                Ok(c) => drop(self.conns.insert(key, c)),
                Err(e) => return failure(step, &format!("connect: {e}")),
            }
        }
        let Some(conn) = self.conns.get_mut(&key) else { return failure(step, "no connection") };
        match conn.call(step, cmd, ty).await {
            Ok(reply) => reply,
            Err(reply) => {
                self.conns.remove(&key);
                reply
            }
        }
    }

    /// Whether `addr` is in the cluster info's broker table.
    async fn registered(&mut self, addr: &str) -> Option<bool> {
        let reply = self.call(ConnKey::Watch, "watch", request::cluster_info(), SerializeType::Json).await;
        (reply.code == 0).then(|| String::from_utf8_lossy(&reply.body_bytes()).contains(&format!("\"{addr}\"")))
    }

    /// Until every address in `addrs` has left the broker table, at most `within`; a pseudo-reply says
    /// whether they did.
    async fn until_gone(&mut self, addrs: &[String], within: Duration) -> Reply {
        let deadline = tokio::time::Instant::now() + within;
        let mut left = true;
        for addr in addrs {
            loop {
                match self.registered(addr).await {
                    Some(false) => break,
                    _ if tokio::time::Instant::now() >= deadline => {
                        left = false;
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        }
        note(if left { format!("{addrs:?} left") } else { format!("{addrs:?} still registered") })
    }

    /// QUERY_DATA_VERSION of broker `b`'s address: whether the server still keeps its liveness entry (the
    /// DataVersion in the body). Asked over the watch connection, after the broker has gone.
    async fn kept_data_version(&mut self, b: usize) -> Reply {
        let cmd = request::query_data_version(&self.brokers[b], &Dv { counter: 0, state: 0, timestamp: 0 });
        self.call(ConnKey::Watch, "[322]", cmd, SerializeType::Json).await
    }

    /// Until the server keeps no DataVersion for broker `b`'s address, at most `within`; the last answer. A
    /// closed connection's broker can leave the group's table before (or, having been replaced there,
    /// without) its liveness entry going, and the runner compares what each server keeps only once both
    /// are done.
    async fn until_forgotten(&mut self, b: usize, within: Duration) -> Reply {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let kept = self.kept_data_version(b).await;
            if kept.body_bytes().is_empty() || tokio::time::Instant::now() >= deadline {
                return kept;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Until the server has applied every removal submitted before now. Both servers answer
    /// UNREGISTER_BROKER before they apply it, and apply removals in order (Java's
    /// BatchUnregistrationService queue, rocketns's writer); Java also queues a second removal of an expired
    /// broker when its closed channel's event finds the entry not yet removed. A removal with nothing to
    /// show (an address already gone, a group already empty) cannot be waited for by what it changes, and
    /// one applied after the next step's registration undoes it: so a barrier broker is registered and
    /// unregistered, and once it has left, everything queued before it has been applied (Java's generated
    /// difference of 2026-12-07: an unregistration of an absent address raced the next read). None when it
    /// passed; a pseudo-reply saying it did not otherwise.
    async fn barrier(&mut self) -> Option<Reply> {
        let spec = BrokerSpec {
            cluster: BARRIER.into(),
            name: BARRIER.into(),
            id: 0,
            addr: BARRIER_ADDR.into(),
            v4: false,
            acting_master: false,
            zone: None,
        };
        let dv = Dv { counter: 1, state: 0, timestamp: 1 };
        let register = request::register(&spec, &dv, &[], crate::model::BodyForm::Json, request::HEARTBEAT_TIMEOUT_MS);
        let registered = self.call(ConnKey::Watch, "barrier", register, SerializeType::Json).await;
        let unregistered = self.call(ConnKey::Watch, "barrier", request::unregister(&spec), SerializeType::Json).await;
        if registered.code != 0 || unregistered.code != 0 {
            return Some(note(format!("barrier refused: {} {}", registered.code, unregistered.code)));
        }
        let deadline = tokio::time::Instant::now() + LEAVE_TIMEOUT;
        loop {
            let reply = self.call(ConnKey::Watch, "watch", request::cluster_info(), SerializeType::Json).await;
            if reply.code == 0 && !String::from_utf8_lossy(&reply.body_bytes()).contains(BARRIER) {
                return None;
            }
            if tokio::time::Instant::now() >= deadline {
                return Some(note("barrier not passed".into()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// UNREGISTER_BROKER of broker `b`, over the watch connection, then until the server keeps no
    /// DataVersion for its address (bounded): how the runner brings the two servers' states together again
    /// after a difference kept on purpose (`stale-live-entry`).
    pub async fn forget(&mut self, b: usize) -> Vec<Reply> {
        let cmd = request::unregister(&self.brokers[b]);
        let unregistered = self.call(ConnKey::Watch, "[104]", cmd, SerializeType::Json).await;
        let gone = self.until_forgotten(b, LEAVE_TIMEOUT).await.body_bytes().is_empty();
        let mut replies = vec![unregistered, note(if gone { "forgotten".into() } else { "still kept".into() })];
        replies.extend(self.barrier().await);
        replies
    }

    /// Addresses whose last registration came over broker `b`'s connection; forgotten.
    fn take_live_of(&mut self, b: usize) -> Vec<String> {
        let mut gone = Vec::new();
        self.live.retain(|(_, addr), c| {
            let keep = *c != b;
            if !keep {
                gone.push(addr.clone());
            }
            keep
        });
        gone
    }

    /// Runs one step; its replies, and after a broker went, whether it left and what the server still keeps
    /// of it (QUERY_DATA_VERSION of its address).
    pub async fn apply(&mut self, op: &Op) -> Vec<Reply> {
        let label = format!("{:?}", op.codes());
        let key = match op.broker() {
            Some(b) => ConnKey::Broker(b),
            None if op.is_read() => ConnKey::Client,
            None => ConnKey::Admin,
        };
        let mut replies = Vec::new();
        for (cmd, ty) in request::requests(&self.brokers, op) {
            replies.push(self.call(key, &label, cmd, ty).await);
        }
        match op {
            Op::Register { broker, .. } if replies.iter().all(|r| r.code == 0) => {
                let b = &self.brokers[*broker];
                self.live.insert((b.cluster.clone(), b.addr.clone()), *broker);
            }
            Op::Unregister { broker } => {
                let b = self.brokers[*broker].clone();
                self.live.remove(&(b.cluster.clone(), b.addr.clone()));
                replies.push(self.until_gone(&[b.addr], LEAVE_TIMEOUT).await);
            }
            Op::Close { broker } => {
                self.conns.remove(&ConnKey::Broker(*broker));
                let addrs = self.take_live_of(*broker);
                replies.push(self.until_gone(&addrs, LEAVE_TIMEOUT).await);
                // Another broker's registration of the address over its own connection stays (and is kept).
                let kept = if addrs.is_empty() {
                    self.kept_data_version(*broker).await
                } else {
                    self.until_forgotten(*broker, LEAVE_TIMEOUT).await
                };
                replies.push(kept);
            }
            Op::Expire { broker, .. } => {
                // The broker falls silent with its connection open (a close would remove it at once); the
                // server expires it, and Java closes the connection then.
                let b = self.brokers[*broker].clone();
                self.live.remove(&(b.cluster.clone(), b.addr.clone()));
                replies.push(self.until_gone(&[b.addr], EXPIRE_TIMEOUT).await);
                replies.push(self.until_forgotten(*broker, LEAVE_TIMEOUT).await);
                self.conns.remove(&ConnKey::Broker(*broker));
            }
            _ => {}
        }
        if matches!(op, Op::Unregister { .. } | Op::Close { .. } | Op::Expire { .. }) {
            replies.extend(self.barrier().await);
        }
        replies
    }
}
