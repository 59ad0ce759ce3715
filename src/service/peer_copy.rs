//! The route table copied from a peer NameServer (`namesrvPeers`) by a node that starts without a route
//! file, before it opens its port: a new node, a replaced machine or a lost disk would otherwise answer
//! "topic not exist" until every broker's next registration, up to 30 s, and a Java client stays with the
//! NameServer it picked. Until the copy is in the port is closed: a Java 5.3.3 client whose lookup finds it
//! closed fails that send and goes to another NameServer on its next call (a Go client within the call),
//! where one answered "topic not exist" or SYSTEM_ERROR stays and fails every send (tests/java/migration.sh).
//! So a node that replaces another on its port is started beside it (`--wait-for-port`): it copies while
//! the other still serves, and the port is closed for about a millisecond.
//!
//! Only codes the Java NameServer answers: GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
//! each topic's GET_ROUTEINFO_BY_TOPIC, [`IN_FLIGHT`] at a time on one connection. The peers are tried in
//! order until one gives a whole table; all of them within [`COPY_WITHIN`]. What is copied is installed as
//! a warm restart's route file is (`route::dump`, without going through JSON again): every broker it names
//! must register within its timeout (120 s) or expires, and its first registration replaces what was
//! copied. So only what such an entry expires is kept: brokers with an address, queues on those brokers.
//!
//! A peer is a stranger until it has answered: at most [`MAX_TOPICS`] topics and [`MAX_KEPT`] bytes kept
//! (topic names, and each distinct queue list, filter-server table and static-topic mapping once: topics
//! that share their brokers share one list, as in the route file), or that peer's copy is dropped and the
//! next one tried. Replies are taken as they arrive, each at most 16 MiB, [`IN_FLIGHT`] asked at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

use crate::outbound::client::PeerConnection;
use crate::protocol::codes::{request, response};
use crate::protocol::lenient;
use crate::protocol::remote_route::{RemoteClusterInfo, RemoteRoute};
use crate::protocol::{QueueData, TopicQueueMappingInfo};
use crate::remoting::{ExtFields, RemotingCommand};
use crate::route::dump::{BrokerDump, FORMAT, FilterServerDump, LiveBrokerDump, RouteDump, TopicDump};
use crate::route::liveness::DEFAULT_BROKER_TIMEOUT;

/// All peers together: a node with unreachable peers starts empty after this, as it would without them.
pub const COPY_WITHIN: Duration = Duration::from_secs(10);
/// Connecting to one peer (Java's `connectTimeoutMillis`), and each of its replies: a peer that stalls
/// leaves the others time.
const CONNECT_WITHIN: Duration = Duration::from_secs(3);
const REPLY_WITHIN: Duration = Duration::from_secs(3);
/// Topics' routes asked for at once: what a peer can make the copy hold before it is read is this many
/// replies of at most 16 MiB each.
pub const IN_FLIGHT: usize = 16;
/// Topics copied at most (a million routes, issue 32's largest table).
pub const MAX_TOPICS: usize = 1 << 20;
/// A topic's route at most: a route of a thousand brokers is about 300 KB. Decoding takes up to about 20
/// times a body's size (`{}` is 3 bytes, a queue data 64), so a larger one is refused before it is decoded.
pub const MAX_ROUTE: usize = 1 << 20;
/// What one peer's copy keeps, in bytes of the replies it came from.
pub const MAX_KEPT: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(transparent)]
    Outbound(#[from] crate::outbound::client::OutboundError),
    #[error("{what}: code {code}")]
    Refused { what: &'static str, code: i32 },
    #[error("{what}: {error}")]
    Body { what: &'static str, error: String },
    #[error("more than {MAX_TOPICS} topics")]
    TooManyTopics,
    #[error("the route of {topic:?} has {len} bytes, more than {MAX_ROUTE}")]
    RouteTooLarge { topic: String, len: usize },
    #[error("more than {MAX_KEPT} bytes to keep")]
    TooLarge,
    #[error("not done within {} s", COPY_WITHIN.as_secs())]
    TimedOut,
    #[error("a request's task ended: {0}")]
    Task(String),
}

/// The routes of the first of `peers` (`host:port`) that gives a whole table, as a route file's
/// content; `None` when none does within [`COPY_WITHIN`], each failure logged.
pub async fn copy_from_peers(peers: &[String]) -> Option<RouteDump> {
    let deadline = Instant::now() + COPY_WITHIN;
    for peer in peers.iter().map(String::as_str) {
        let started = std::time::Instant::now();
        match tokio::time::timeout_at(deadline, copy_from(peer, deadline)).await.unwrap_or(Err(CopyError::TimedOut)) {
            Ok(dump) => {
                tracing::info!(
                    peer,
                    topics = dump.topics.len(),
                    brokers = dump.brokers.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "routes copied from a peer NameServer"
                );
                return Some(dump);
            }
            Err(e) => tracing::warn!(peer, error = %e, "cannot copy the routes of a peer NameServer"),
        }
    }
    None
}

/// One peer's whole table.
async fn copy_from(peer: &str, deadline: Instant) -> Result<RouteDump, CopyError> {
    let conn = Arc::new(PeerConnection::connect(peer, CONNECT_WITHIN).await?);
    let left = move || deadline.saturating_duration_since(Instant::now()).min(REPLY_WITHIN);
    let info = ask(&conn, request::GET_BROKER_CLUSTER_INFO, left(), "cluster info").await?;
    let mut copied = Copied::new(RemoteClusterInfo::decode(&info).map_err(|e| body_error("cluster info", e))?);
    copied.keep(info.len())?;
    let list = ask(&conn, request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, left(), "topic list").await?;
    let topics = TopicListJson::decode(&list)?;
    let mut asked = tokio::task::JoinSet::new();
    let mut next = topics.into_iter();
    loop {
        while asked.len() < IN_FLIGHT
            && let Some(topic) = next.next()
        {
            let mut ext = ExtFields::new();
            ext.insert("topic", topic.as_str());
            let (conn, within) = (conn.clone(), left());
            asked.spawn(async move {
                (topic, conn.request(RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC, ext), within).await)
            });
        }
        let Some(done) = asked.join_next().await else { break };
        let (topic, reply) = done.map_err(|e| CopyError::Task(e.to_string()))?;
        let reply = reply?;
        // Deleted since the list was taken: not copied, as a lookup now would not find it.
        if reply.code == response::TOPIC_NOT_EXIST {
            continue;
        }
        let body = accept(reply, "a topic's route")?;
        if body.len() > MAX_ROUTE {
            return Err(CopyError::RouteTooLarge { topic, len: body.len() });
        }
        let route = RemoteRoute::decode(&body).map_err(|e| body_error("a topic's route", e))?;
        copied.add(topic, route, body.len())?;
    }
    Ok(copied.into_dump())
}

/// Sends one request and takes its reply's body.
async fn ask(
    conn: &PeerConnection,
    code: i32,
    within: Duration,
    what: &'static str,
) -> Result<bytes::Bytes, CopyError> {
    accept(conn.request(RemotingCommand::request(code, ExtFields::new()), within).await?, what)
}

fn accept(reply: RemotingCommand, what: &'static str) -> Result<bytes::Bytes, CopyError> {
    if reply.code != response::SUCCESS {
        return Err(CopyError::Refused { what, code: reply.code });
    }
    Ok(reply.body)
}

fn body_error(what: &'static str, e: serde_json::Error) -> CopyError {
    CopyError::Body { what, error: e.to_string() }
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicListJson {
    #[serde(default)]
    topic_list: Vec<String>,
}

impl TopicListJson {
    /// The list's names, each once. Topic names have no commas, so a body with more than [`MAX_TOPICS`] of
    /// them is refused before it is decoded.
    fn decode(body: &[u8]) -> Result<Vec<String>, CopyError> {
        if body.iter().filter(|b| **b == b',').count() >= MAX_TOPICS {
            return Err(CopyError::TooManyTopics);
        }
        let list: TopicListJson = lenient::from_fastjson_slice(body).map_err(|e| body_error("topic list", e))?;
        if list.topic_list.len() > MAX_TOPICS {
            return Err(CopyError::TooManyTopics);
        }
        let mut seen = std::collections::HashSet::with_capacity(list.topic_list.len());
        Ok(list.topic_list.into_iter().filter(|t| seen.insert(t.clone())).collect())
    }
}

/// A peer's table as it arrives, kept as the route file keeps it: each distinct queue list once.
struct Copied {
    info: RemoteClusterInfo,
    /// Each broker address's cluster, and the brokers' names, from the cluster info.
    cluster_of: BTreeMap<String, String>,
    brokers: HashSet<String>,
    lists: HashMap<Vec<QueueData>, usize>,
    topics: Vec<TopicDump>,
    filter_servers: BTreeMap<String, FilterServerDump>,
    mappings: BTreeMap<String, Vec<TopicQueueMappingInfo>>,
    kept: usize,
}

impl Copied {
    /// Only what can expire is kept: brokers with an address (each gets a live entry), and clusters' names
    /// of those brokers.
    fn new(mut info: RemoteClusterInfo) -> Self {
        info.brokers.retain(|b| !b.broker_addrs.is_empty());
        let known: HashSet<&str> = info.brokers.iter().map(|b| &*b.broker_name).collect();
        for names in info.clusters.values_mut() {
            names.retain(|n| known.contains(n.as_str()));
        }
        info.clusters.retain(|_, names| !names.is_empty());
        let cluster_of = info
            .brokers
            .iter()
            .flat_map(|b| b.broker_addrs.values().map(|a| (a.to_string(), b.cluster.to_string())))
            .collect();
        let brokers = info.brokers.iter().map(|b| b.broker_name.to_string()).collect();
        Copied {
            info,
            cluster_of,
            brokers,
            lists: HashMap::new(),
            topics: Vec::new(),
            filter_servers: BTreeMap::new(),
            mappings: BTreeMap::new(),
            kept: 0,
        }
    }

    fn keep(&mut self, bytes: usize) -> Result<(), CopyError> {
        self.kept += bytes;
        if self.kept > MAX_KEPT { Err(CopyError::TooLarge) } else { Ok(()) }
    }

    /// One topic's route, from a reply of `len` bytes. Only queues on brokers of the cluster info are kept,
    /// one a broker (anything else would be routed with no live entry to expire it); a topic left with none
    /// is not copied. Counted by its name, and whole (the reply's length, or what its queues take decoded,
    /// whichever is more) when it brings anything new: a queue list, filter servers, mappings.
    fn add(&mut self, topic: String, mut route: RemoteRoute, len: usize) -> Result<(), CopyError> {
        let mut on = HashSet::new();
        route.queue_datas.retain(|q| self.brokers.contains(&*q.broker_name) && on.insert(q.broker_name.clone()));
        if route.queue_datas.is_empty() {
            return Ok(());
        }
        let decoded: usize = route.queue_datas.iter().map(|q| size_of::<QueueData>() + q.broker_name.len()).sum();
        let lists = self.lists.len();
        let list = *self.lists.entry(route.queue_datas).or_insert(lists);
        let new = self.lists.len() > lists || !route.filter_servers.is_empty() || route.mappings.is_some();
        self.keep(topic.len() + if new { len.max(decoded) } else { 0 })?;
        for (addr, servers) in route.filter_servers {
            if let Some(cluster) = self.cluster_of.get(&addr) {
                let cluster = cluster.clone();
                self.filter_servers.insert(addr.clone(), FilterServerDump { cluster, broker_addr: addr, servers });
            }
        }
        if let Some(by_broker) = route.mappings {
            self.mappings.insert(topic.clone(), by_broker.into_values().collect());
        }
        self.topics.push(TopicDump { topic, queue_datas: Vec::new(), queue_list: Some(list) });
        Ok(())
    }

    /// The route file's content: the brokers and clusters, the topics, and a live entry for each broker
    /// address (no DataVersion, so its next registration is applied in full; the default timeout).
    fn into_dump(self) -> RouteDump {
        let live_brokers = self
            .cluster_of
            .iter()
            .map(|(addr, cluster)| LiveBrokerDump {
                cluster: cluster.clone(),
                broker_addr: addr.clone(),
                ha_server_addr: String::new(),
                data_version: Default::default(),
                timeout_millis: DEFAULT_BROKER_TIMEOUT.as_millis() as u64,
            })
            .collect();
        let mut queue_lists = vec![Vec::new(); self.lists.len()];
        for (list, place) in self.lists {
            queue_lists[place] = list;
        }
        RouteDump {
            format: FORMAT.to_string(),
            brokers: self
                .info
                .brokers
                .into_iter()
                .map(|b| BrokerDump {
                    cluster: b.cluster.to_string(),
                    broker_name: b.broker_name.to_string(),
                    broker_addrs: b.broker_addrs.into_iter().map(|(id, a)| (id, a.to_string())).collect(),
                    zone_name: b.zone_name.map(|z| z.to_string()),
                    enable_acting_master: b.enable_acting_master,
                })
                .collect(),
            clusters: self.info.clusters,
            queue_lists,
            topics: self.topics,
            filter_servers: self.filter_servers.into_values().collect(),
            mappings: self.mappings,
            live_brokers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(brokers: &[&str]) -> RemoteRoute {
        let queues: Vec<String> = brokers
            .iter()
            .map(|b| {
                format!(r#"{{"brokerName":"{b}","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}}"#)
            })
            .collect();
        RemoteRoute::decode(format!(r#"{{"brokerDatas":[],"queueDatas":[{}]}}"#, queues.join(",")).as_bytes())
            .expect("a route")
    }

    /// Brokers a (a:1) and b (b:1) of cluster c, a broker with no address, and a cluster name of no broker.
    fn empty() -> Copied {
        let info = r#"{"brokerAddrTable":{"a":{"brokerAddrs":{0:"a:1"},"brokerName":"a","cluster":"c"},"b":{"brokerAddrs":{0:"b:1"},"brokerName":"b","cluster":"c"},"ghost":{"brokerAddrs":{},"brokerName":"ghost","cluster":"c"}},"clusterAddrTable":{"c":["a","b","ghost","phantom"],"d":["phantom"]}}"#;
        Copied::new(RemoteClusterInfo::decode(info.as_bytes()).expect("a cluster info"))
    }

    #[test]
    fn topics_on_the_same_brokers_share_one_list_and_cost_their_names() {
        let mut copied = empty();
        copied.add("t1".into(), route(&["a", "b"]), 1000).unwrap();
        copied.add("t2".into(), route(&["a", "b"]), 1000).unwrap();
        copied.add("t3".into(), route(&["b"]), 1000).unwrap();
        assert_eq!(copied.kept, 2 + 1000 + 2 + 2 + 1000);
        let dump = copied.into_dump();
        assert_eq!(dump.queue_lists.len(), 2);
        let places: Vec<Option<usize>> = dump.topics.iter().map(|t| t.queue_list).collect();
        assert_eq!(places, [Some(0), Some(0), Some(1)]);
        assert_eq!(dump.queue_lists[1][0].broker_name.as_ref(), "b");
    }

    /// What a live entry could not expire is not copied: a broker with no address, a cluster's name of no
    /// broker, queues on a broker the cluster info lacks (a broker that registered with the peer between the
    /// two requests, or a made-up one), a second queue data of one broker. Made to fail once without the
    /// filter on queues (the ghost topic was copied).
    #[test]
    fn only_what_can_expire_is_copied() {
        let mut copied = empty();
        copied.add("ghostT".into(), route(&["ghost", "nobody"]), 100).unwrap();
        copied.add("t".into(), route(&["a", "a", "nobody"]), 100).unwrap();
        let dump = copied.into_dump();
        let brokers: Vec<&str> = dump.brokers.iter().map(|b| b.broker_name.as_str()).collect();
        assert_eq!(brokers, ["a", "b"]);
        assert_eq!(dump.clusters, BTreeMap::from([("c".to_string(), vec!["a".to_string(), "b".to_string()])]));
        let topics: Vec<&str> = dump.topics.iter().map(|t| t.topic.as_str()).collect();
        assert_eq!(topics, ["t"]);
        assert_eq!(dump.queue_lists, [route(&["a"]).queue_datas]);
        assert_eq!(dump.live_brokers.len(), 2);
    }

    /// Made to fail once with the bound taken out of `keep`.
    #[test]
    fn a_peer_whose_every_route_is_new_is_cut_off_at_the_bound() {
        let mut copied = empty();
        copied.add("t1".into(), route(&["a"]), MAX_KEPT / 2).unwrap();
        assert!(matches!(copied.add("t2".into(), route(&["b"]), MAX_KEPT / 2 + 1), Err(CopyError::TooLarge)));
    }

    #[test]
    fn a_topic_list_over_the_bound_is_refused() {
        let names: Vec<String> = (0..=MAX_TOPICS).map(|i| format!("\"{i}\"")).collect();
        let body = format!(r#"{{"topicList":[{}]}}"#, names.join(","));
        assert!(matches!(TopicListJson::decode(body.as_bytes()), Err(CopyError::TooManyTopics)));
    }
}
