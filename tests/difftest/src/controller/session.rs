//! One controller as a controller sequence sees it: a connection per broker (its heartbeats' identity is
//! the connection's, as the controller keeps it) and one for the admin, the ids each broker was given, and
//! each step's requests built as a 5.3.3 broker (ReplicasManager, BrokerOuterAPI) or mqadmin builds them.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rocketns::remoting::{RemotingCommand, SerializeType};
use rocketns::testing::reply::Reply;
use rocketns::testing::wire::request;

use super::generate::UNKNOWN_GROUP;
use super::model::{CtlBroker, CtlOp};
use crate::session::{Connection, failure};

/// The heartbeat timeout of every 904: longer than any sequence, so that no broker expires inside one (the
/// moment a scan finds it would be each server's own).
pub const HEARTBEAT_TIMEOUT_MS: &str = "60000";
/// The `invokeTime` and `registerCheckCode` time of every request: the same for both servers.
const INVOKE_TIME: &str = "1764892800000";

/// The step name of the pseudo-reply of a step a broker would not send (its remark says why).
pub const NOT_SENT: &str = "not sent";

/// CONTROLLER_BROKER_METADATA_NOT_EXIST: a leader's answer for a group it does not know.
const METADATA_NOT_EXIST: i32 = 2008;

/// One controller's side of a run.
pub struct CtlSession {
    addr: SocketAddr,
    brokers: Vec<CtlBroker>,
    conns: HashMap<Option<usize>, Connection>,
    /// The id each broker was given (APPLY_BROKER_ID answered 0).
    ids: HashMap<usize, i64>,
    /// The brokers that have beaten since they were given their id.
    beaten: HashSet<usize>,
}

impl CtlSession {
    pub fn new(addr: SocketAddr, brokers: Vec<CtlBroker>) -> CtlSession {
        CtlSession { addr, brokers, conns: HashMap::new(), ids: HashMap::new(), beaten: HashSet::new() }
    }

    /// The id broker `b` was given; one it never was otherwise (a made-up broker, as the server sees it).
    fn id(&self, b: usize) -> i64 {
        self.ids.get(&b).copied().unwrap_or(100 + b as i64)
    }

    fn ids_of(&self, brokers: &[usize]) -> Vec<i64> {
        let mut ids: Vec<i64> = brokers.iter().map(|b| self.id(*b)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    async fn call(&mut self, conn: Option<usize>, cmd: RemotingCommand) -> Reply {
        let step = format!("[{}]", cmd.code);
        if !self.conns.contains_key(&conn) {
            match Connection::open(self.addr).await {
                Ok(c) => drop(self.conns.insert(conn, c)),
                Err(e) => return failure(&step, &format!("connect: {e}")),
            }
        }
        let Some(c) = self.conns.get_mut(&conn) else { return failure(&step, "no connection") };
        match c.call(&step, cmd, SerializeType::Json).await {
            Ok(reply) => reply,
            Err(reply) => {
                self.conns.remove(&conn);
                reply
            }
        }
    }

    /// Until the controller takes requests as the leader (a one-node group elects itself after start; Java's
    /// answers NOT_LEADER for a while after its 1005 says `isLeader=true`), at most `within`.
    pub async fn until_leader(&mut self, within: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let reply = self.call(None, request(1004, &[("brokerName", UNKNOWN_GROUP)])).await;
            if reply.code == METADATA_NOT_EXIST {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("{}: no leader within {within:?} (last 1004: {reply:?})", self.addr));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn broker_request(&self, code: i32, b: usize, fields: &[(&str, &str)]) -> RemotingCommand {
        let s = &self.brokers[b];
        let mut all = vec![("clusterName", s.cluster.as_str()), ("brokerName", s.name.as_str())];
        all.extend_from_slice(fields);
        request(code, &all)
    }

    /// Why a Java 5.3.3 broker would not send `op` now, if it would not: a broker sends nothing before it
    /// was given an id (its start stops at a failed APPLY_BROKER_ID), and asks for an election (or is
    /// designated by an operator who saw it run) only once it beats (COMPATIBILITY.md,
    /// `controller-first-election`, where the two differ on purpose otherwise).
    fn not_sent(&self, op: &CtlOp) -> Option<&'static str> {
        let b = match op {
            CtlOp::Beat { broker, .. } | CtlOp::Elect { broker, .. } | CtlOp::Alter { broker, .. } => *broker,
            _ => return None,
        };
        if !self.ids.contains_key(&b) {
            Some("not started: it was given no id")
        } else if matches!(op, CtlOp::Elect { .. }) && !self.beaten.contains(&b) {
            Some("no election: it has not beaten since it was given its id")
        } else {
            None
        }
    }

    /// Runs one step; its replies (a pseudo-reply saying why nothing was sent, where a broker would not).
    pub async fn apply(&mut self, op: &CtlOp) -> Vec<Reply> {
        if let Some(why) = self.not_sent(op) {
            return vec![Reply { code: 0, ..failure(NOT_SENT, why) }];
        }
        let conn = op.broker();
        match op {
            CtlOp::Join { broker: b, id } => {
                let next = self.call(conn, self.broker_request(1012, *b, &[])).await;
                let Some(applied) = id.or_else(|| next.ext_fields.get("nextBrokerId").and_then(|v| v.parse().ok()))
                else {
                    return vec![next];
                };
                let check = format!("{};{INVOKE_TIME}", self.brokers[*b].addr);
                let applied_text = applied.to_string();
                let cmd =
                    self.broker_request(1013, *b, &[("appliedBrokerId", &applied_text), ("registerCheckCode", &check)]);
                let apply = self.call(conn, cmd).await;
                if apply.code != 0 {
                    return vec![next, apply];
                }
                self.ids.insert(*b, applied);
                self.beaten.remove(b);
                let addr = self.brokers[*b].addr.clone();
                let cmd = self.broker_request(
                    1003,
                    *b,
                    &[("brokerId", &applied_text), ("brokerAddress", &addr), ("invokeTime", INVOKE_TIME)],
                );
                vec![next, apply, self.call(conn, cmd).await]
            }
            CtlOp::Beat { broker: b, epoch, max_offset, priority } => {
                let (id, epoch, offset, priority) =
                    (self.id(*b).to_string(), epoch.to_string(), max_offset.to_string(), priority.to_string());
                let addr = self.brokers[*b].addr.clone();
                let cmd = self.broker_request(
                    904,
                    *b,
                    &[
                        ("brokerAddr", &addr),
                        ("brokerId", &id),
                        ("epoch", &epoch),
                        ("maxOffset", &offset),
                        ("confirmOffset", &offset),
                        ("heartbeatTimeoutMills", HEARTBEAT_TIMEOUT_MS),
                        ("electionPriority", &priority),
                    ],
                );
                let reply = self.call(conn, cmd).await;
                if reply.code == 0 {
                    self.beaten.insert(*b);
                }
                vec![reply]
            }
            CtlOp::Elect { broker: b, designate } => {
                let id = self.id(*b).to_string();
                let designate = designate.to_string();
                let cmd = self.broker_request(
                    1002,
                    *b,
                    &[("brokerId", &id), ("designateElect", &designate), ("invokeTime", INVOKE_TIME)],
                );
                vec![self.call(conn, cmd).await]
            }
            CtlOp::Alter { broker: b, members, as_self, stale } => {
                let name = self.brokers[*b].name.clone();
                let info = self.call(conn, request(1004, &[("brokerName", &name)])).await;
                let master = if *as_self {
                    self.id(*b).to_string()
                } else {
                    info.ext_fields.get("masterBrokerId").cloned().unwrap_or_else(|| "-1".into())
                };
                let master_epoch = info.ext_fields.get("masterEpoch").cloned().unwrap_or_else(|| "0".into());
                let set_epoch = serde_json::from_slice::<serde_json::Value>(&info.body_bytes())
                    .ok()
                    .and_then(|v| v.get("syncStateSetEpoch").and_then(serde_json::Value::as_i64))
                    .unwrap_or(0)
                    - i64::from(*stale);
                let mut cmd = request(
                    1001,
                    &[
                        ("brokerName", &name),
                        ("masterBrokerId", &master),
                        ("masterEpoch", &master_epoch),
                        ("invokeTime", INVOKE_TIME),
                    ],
                );
                let set = serde_json::json!({"syncStateSet": self.ids_of(members), "syncStateSetEpoch": set_epoch});
                cmd.body = Bytes::from(set.to_string());
                vec![info, self.call(conn, cmd).await]
            }
            CtlOp::Clean { broker_name, brokers, living } => {
                let ids = self.ids_of(brokers).iter().map(i64::to_string).collect::<Vec<_>>().join(";");
                let living = living.to_string();
                let mut fields = vec![
                    ("clusterName", "DefaultCluster"),
                    ("brokerName", broker_name.as_str()),
                    ("isCleanLivingBroker", living.as_str()),
                    ("invokeTime", INVOKE_TIME),
                ];
                if !ids.is_empty() {
                    fields.push(("brokerControllerIdsToClean", &ids));
                }
                let reply = self.call(conn, request(1011, &fields)).await;
                if reply.code == 0 {
                    // A clean that leaves the group's SyncStateSet empty drops it, and the next APPLY_BROKER_ID
                    // then replaces the whole group: its other brokers' ids are gone too, and Java would still
                    // elect them (COMPATIBILITY.md, `controller-first-election`). The session cannot see the
                    // set, so every broker of a cleaned group is modelled as one that must start again.
                    for b in (0..self.brokers.len()).filter(|b| self.brokers[*b].name == *broker_name) {
                        self.ids.remove(&b);
                        self.beaten.remove(&b);
                    }
                }
                vec![reply]
            }
            CtlOp::ReplicaInfo { broker_name } => {
                vec![self.call(conn, request(1004, &[("brokerName", broker_name)])).await]
            }
            CtlOp::SyncStateData { names } => {
                let mut cmd = request(1006, &[]);
                cmd.body = Bytes::from(serde_json::to_vec(names).unwrap_or_default());
                vec![self.call(conn, cmd).await]
            }
        }
    }
}
