//! `RouteSnapshot`: the whole route table at one instant, immutable once published.
//!
//! Pure data, no I/O. Readers get it from an `ArcSwap` without locking; each routable topic carries its
//! TopicRouteData body already encoded in both JSON styles (one route shared by the topics whose routes are
//! the same), so a route lookup is a map lookup and a copy.
//! Bodies derived from the whole table (cluster info, topic lists) are encoded at most once per snapshot,
//! on first use ([`TableBody`]): encoding them is O(table), so whoever asks first runs [`RouteSnapshot::encode`]
//! off the threads that answer lookups, and everyone else shares its bytes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OnceCell;

use crate::protocol::codes::request;
use crate::protocol::json::{self, JsonStyle};
use crate::protocol::{BrokerData, TopicQueueMappingInfo, java_hash};
use crate::route::liveness::BrokerAddrKey;

/// Route behaviour switches from the NameServer config; they shape the encoded routes, so they live in the
/// snapshot and a change re-encodes what it affects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteConfig {
    /// `deleteTopicWithBrokerRegistration`: a full registration drops the broker's topics it no longer lists.
    pub delete_topic_with_broker_registration: bool,
    /// `supportActingMaster`: a master-less group with acting master enabled shows its lowest slave as id 0.
    pub support_acting_master: bool,
    /// `orderMessageEnable`: routes carry `orderTopicConf` from KV namespace ORDER_TOPIC_CONFIG.
    pub order_message_enable: bool,
}

/// A persistent map keyed by topic or broker name: O(1) to clone, O(log n) to change.
pub type NameMap<V> = imbl::GenericHashMap<Arc<str>, V, crate::route::FastHasher, imbl::shared_ptr::DefaultSharedPtr>;

/// Static-topic mappings of one topic, by broker name.
pub type TopicMappings = BTreeMap<Arc<str>, TopicQueueMappingInfo>;

/// A TopicRouteData body as it goes on the wire: `shared` (the broker section, the same for every topic on
/// the same brokers) followed by `own` (the topic's queues and the rest).
#[derive(Debug, Clone, Default)]
pub struct RouteBody {
    pub shared: Bytes,
    pub own: Bytes,
}

impl RouteBody {
    /// The body in one piece (for tests and tools; replies copy the two parts into the write buffer).
    pub fn to_vec(&self) -> Vec<u8> {
        [&self.shared[..], &self.own[..]].concat()
    }
}

/// The pre-encoded TopicRouteData of one topic.
#[derive(Debug, Clone)]
pub struct EncodedRoute {
    /// fastjson's default output, for clients older than 4.9.4 (bare numeric `brokerAddrs` keys).
    pub fastjson: RouteBody,
    /// Standard JSON, for version ≥ 4.9.4 or `acceptStandardJsonOnly=true`.
    pub standard: RouteBody,
}

/// One topic: its queue data per broker name, and its encoded route.
#[derive(Debug, Clone, Default)]
pub struct TopicRoute {
    /// Sorted by broker name; shared by the topics whose queue datas are the same.
    pub queue_datas: crate::route::queue_lists::QueueList,
    /// `None` when no broker of the topic is known: Java keeps the topic but answers TOPIC_NOT_EXIST.
    pub encoded: Option<EncodedRoute>,
}

/// A body derived from the whole table: the reply of an admin read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableBody {
    /// GET_BROKER_CLUSTER_INFO (106).
    ClusterInfo,
    /// The same as standard JSON, a newline after it: the HTTP port's `/cluster`.
    ClusterInfoStandard,
    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).
    TopicList,
    /// GET_SYSTEM_TOPIC_LIST_FROM_NS (304).
    SystemTopics,
    /// GET_UNIT_TOPIC_LIST (311), GET_HAS_UNIT_SUB_TOPIC_LIST (312), GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313):
    /// the request code.
    UnitTopics(i32),
    /// GET_TOPICS_BY_CLUSTER (224): every cluster's list, encoded in one pass.
    TopicsByCluster,
}

/// An encoded [`TableBody`].
#[derive(Debug, Clone)]
pub enum Encoded {
    One(Bytes),
    ByCluster(Arc<HashMap<Arc<str>, Bytes>>),
}

/// `TopicSysFlag`: unit topic, and topic with a unit subscription.
const FLAG_UNIT: i32 = 0x1;
const FLAG_UNIT_SUB: i32 = 0x2;

/// The bodies derived from this snapshot's table, encoded on first use and dropped with the snapshot.
#[derive(Debug, Default)]
struct Derived {
    cluster_info: OnceCell<Encoded>,
    cluster_info_standard: OnceCell<Encoded>,
    topic_list: OnceCell<Encoded>,
    system_topics: OnceCell<Encoded>,
    unit_topics: [OnceCell<Encoded>; 3],
    by_cluster: OnceCell<Encoded>,
}

impl Clone for Derived {
    /// A clone starts a new snapshot, whose tables are about to change: it starts empty.
    fn clone(&self) -> Self {
        Derived::default()
    }
}

#[derive(Debug, Clone, Default)]
pub struct RouteSnapshot {
    /// Bumped on every publish.
    pub version: u64,
    /// `topicQueueTable`, with encoded routes.
    pub topics: crate::route::topic_table::TopicTable<Arc<TopicRoute>>,
    /// `brokerAddrTable`: broker name → BrokerData.
    pub brokers: NameMap<Arc<BrokerData>>,
    /// `clusterAddrTable`: cluster → broker names.
    pub clusters: Arc<BTreeMap<Arc<str>, BTreeSet<Arc<str>>>>,
    /// `filterServerTable`: (cluster, broker address) → filter server addresses.
    pub filter_servers: Arc<BTreeMap<BrokerAddrKey, Vec<String>>>,
    /// `topicQueueMappingInfoTable`: static-topic mappings; kept apart from queue data, as in Java.
    pub mappings: NameMap<Arc<TopicMappings>>,
    /// KV namespace ORDER_TOPIC_CONFIG: topic → `brokerName:queueCount;…`.
    pub order_topic_conf: NameMap<Arc<str>>,
    pub config: RouteConfig,
    derived: Derived,
}

impl RouteSnapshot {
    /// An empty table with these switches and ordered-topic configs (loaded from the KV store at start).
    pub fn new(config: RouteConfig, order_topic_conf: impl IntoIterator<Item = (String, String)>) -> Self {
        RouteSnapshot {
            config,
            order_topic_conf: order_topic_conf.into_iter().map(|(k, v)| (Arc::from(k), Arc::from(v))).collect(),
            ..Default::default()
        }
    }

    pub fn topic(&self, topic: &str) -> Option<&Arc<TopicRoute>> {
        self.topics.get(topic)
    }

    /// The GET_ROUTEINFO_BY_TOPIC body, or `None` for TOPIC_NOT_EXIST.
    pub fn route_body(&self, topic: &str, style: JsonStyle) -> Option<&RouteBody> {
        let encoded = self.topics.get(topic)?.encoded.as_ref()?;
        Some(match style {
            JsonStyle::Fastjson => &encoded.fastjson,
            JsonStyle::Standard => &encoded.standard,
        })
    }

    /// Where this snapshot keeps `body` once encoded.
    pub fn derived(&self, body: TableBody) -> &OnceCell<Encoded> {
        let d = &self.derived;
        match body {
            TableBody::ClusterInfo => &d.cluster_info,
            TableBody::ClusterInfoStandard => &d.cluster_info_standard,
            TableBody::TopicList => &d.topic_list,
            TableBody::SystemTopics => &d.system_topics,
            TableBody::UnitTopics(request::GET_UNIT_TOPIC_LIST) => &d.unit_topics[0],
            TableBody::UnitTopics(request::GET_HAS_UNIT_SUB_TOPIC_LIST) => &d.unit_topics[1],
            TableBody::UnitTopics(_) => &d.unit_topics[2],
            TableBody::TopicsByCluster => &d.by_cluster,
        }
    }

    /// Encodes `body` from the whole table: O(table); see [`TableBody`] for who calls it.
    pub fn encode(&self, body: TableBody) -> Encoded {
        match body {
            TableBody::ClusterInfo => Encoded::One(Bytes::from(self.encode_cluster_info())),
            TableBody::ClusterInfoStandard => {
                // The wire form has fastjson's bare numeric keys; tools want standard JSON. It is reused
                // where the remoting port has encoded it for this snapshot already.
                let wire = match self.derived.cluster_info.get() {
                    Some(Encoded::One(wire)) => wire.to_vec(),
                    _ => self.encode_cluster_info(),
                };
                let mut json = crate::protocol::lenient::quote_bare_keys(&wire).unwrap_or(wire);
                json.push(b'\n');
                Encoded::One(Bytes::from(json))
            }
            TableBody::TopicList => {
                let mut names: Vec<&str> = Vec::with_capacity(self.topics.len());
                names.extend(self.topics.keys());
                names.sort_unstable();
                Encoded::One(Bytes::from(encode_topic_list(&names, None)))
            }
            TableBody::SystemTopics => Encoded::One(Bytes::from(self.encode_system_topics())),
            TableBody::UnitTopics(code) => Encoded::One(Bytes::from(self.encode_unit_topics(code))),
            TableBody::TopicsByCluster => Encoded::ByCluster(Arc::new(self.encode_topics_by_cluster())),
        }
    }

    /// [`RouteSnapshot::encode`], where the caller may wait (tests, tools).
    #[cfg(any(test, feature = "testing"))]
    pub fn body_now(&self, body: TableBody) -> Bytes {
        match self.encode(body) {
            Encoded::One(b) => b,
            Encoded::ByCluster(_) => panic!("a per-cluster body has no single form"),
        }
    }

    /// Broker names of `cluster` (empty when unknown).
    pub fn broker_names_of(&self, cluster: &str) -> impl Iterator<Item = &Arc<str>> {
        self.clusters.get(cluster).into_iter().flatten()
    }

    /// Every cluster's topics: those with queues on any of its brokers.
    fn encode_topics_by_cluster(&self) -> HashMap<Arc<str>, Bytes> {
        let mut clusters_of: HashMap<&str, Vec<&Arc<str>>> = HashMap::new();
        for (cluster, names) in self.clusters.iter() {
            for name in names {
                clusters_of.entry(&**name).or_default().push(cluster);
            }
        }
        let mut lists: HashMap<&Arc<str>, Vec<&str>> = self.clusters.keys().map(|c| (c, Vec::new())).collect();
        let mut of_topic: Vec<&Arc<str>> = Vec::new();
        for (topic, route) in self.topics.iter() {
            of_topic.clear();
            for q in route.queue_datas.iter() {
                of_topic.extend(clusters_of.get(&*q.broker_name).into_iter().flatten());
            }
            of_topic.sort_unstable();
            of_topic.dedup();
            for cluster in &of_topic {
                if let Some(list) = lists.get_mut(cluster) {
                    list.push(topic);
                }
            }
        }
        lists
            .into_iter()
            .map(|(cluster, mut topics)| {
                topics.sort_unstable();
                (cluster.clone(), Bytes::from(encode_topic_list(&topics, None)))
            })
            .collect()
    }

    /// Every cluster and broker name (brokers create topics named after them), and one broker address to
    /// ask for the rest.
    fn encode_system_topics(&self) -> Vec<u8> {
        let mut names: Vec<&str> = Vec::new();
        for (cluster, brokers) in self.clusters.iter() {
            names.push(cluster);
            names.extend(brokers.iter().map(|b| &**b));
        }
        names.sort_unstable();
        names.dedup();
        let first_broker = self.brokers.iter().min_by(|a, b| a.0.cmp(b.0));
        let broker_addr = first_broker.and_then(|(_, b)| b.broker_addrs.values().next().map(|a| &**a));
        encode_topic_list(&names, broker_addr)
    }

    /// 311 (unit topics), 312 (topics with a unit subscription), 313 (those, but not unit topics themselves),
    /// judged by one queue data of each topic, as Java does: the one its HashMap of them yields first.
    fn encode_unit_topics(&self, code: i32) -> Vec<u8> {
        let wanted = |flag: i32| match code {
            request::GET_UNIT_TOPIC_LIST => flag & FLAG_UNIT != 0,
            request::GET_HAS_UNIT_SUB_TOPIC_LIST => flag & FLAG_UNIT_SUB != 0,
            _ => flag & FLAG_UNIT_SUB != 0 && flag & FLAG_UNIT == 0,
        };
        let mut topics: Vec<&str> = self
            .topics
            .iter()
            .filter(|(_, r)| {
                let n = r.queue_datas.len();
                let first = r.queue_datas.iter().min_by_key(|q| (java_hash::bucket(&q.broker_name, n), &q.broker_name));
                first.is_some_and(|q| wanted(q.topic_sys_flag))
            })
            .map(|(t, _)| t)
            .collect();
        topics.sort_unstable();
        encode_topic_list(&topics, None)
    }

    fn encode_cluster_info(&self) -> Vec<u8> {
        let mut brokers: Vec<_> = self.brokers.iter().collect();
        brokers.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = Vec::with_capacity(64 + brokers.len() * 160);
        out.extend_from_slice(b"{\"brokerAddrTable\":{");
        for (i, (name, data)) in brokers.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json::write_key(&mut out, name);
            data.write_json(&mut out, JsonStyle::Fastjson);
        }
        out.extend_from_slice(b"},\"clusterAddrTable\":{");
        for (i, (cluster, names)) in self.clusters.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json::write_key(&mut out, cluster);
            json::write_str_array(&mut out, names.iter().map(|n| &**n), JsonStyle::Fastjson);
        }
        out.extend_from_slice(b"}}");
        out
    }

    /// The filter servers of every address of `broker`, for its routes; empty unless filter servers exist.
    pub fn filter_servers_of<'a>(&'a self, broker: &BrokerData, out: &mut Vec<(&'a str, &'a [String])>) {
        if self.filter_servers.is_empty() {
            return;
        }
        for addr in broker.broker_addrs.values() {
            let key = BrokerAddrKey { cluster: broker.cluster.clone(), addr: addr.clone() };
            if let Some((k, servers)) = self.filter_servers.get_key_value(&key) {
                out.push((&k.addr, servers.as_slice()));
            }
        }
    }
}

/// TopicList JSON: `{"brokerAddr":"…","topicList":[…]}`, `brokerAddr` omitted when absent. Sized at once
/// for names that need no escaping: a buffer grown by doubling would hold up to twice the body, and the
/// bytes handed out keep the whole buffer.
pub fn encode_topic_list(topics: &[&str], broker_addr: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    out.reserve_exact(64 + broker_addr.map_or(0, str::len) + topics.iter().map(|t| t.len() + 3).sum::<usize>());
    out.push(b'{');
    if let Some(addr) = broker_addr {
        json::write_key(&mut out, "brokerAddr");
        json::write_str(&mut out, addr, JsonStyle::Fastjson);
        out.push(b',');
    }
    json::write_key(&mut out, "topicList");
    json::write_str_array(&mut out, topics.iter().copied(), JsonStyle::Fastjson);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_snapshot_bodies() {
        let s = RouteSnapshot::default();
        assert_eq!(&s.body_now(TableBody::ClusterInfo)[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
        assert_eq!(&s.body_now(TableBody::TopicList)[..], br#"{"topicList":[]}"#);
        assert!(s.route_body("TopicTest", JsonStyle::Standard).is_none());
    }

    /// protocol.md §3.2 and §3.3.
    #[test]
    fn cluster_info_and_topic_list_match_fastjson() {
        let mut s = RouteSnapshot::default();
        let mut b = BrokerData::new("DefaultCluster".into(), "broker-a".into());
        b.broker_addrs.insert(0, "192.168.0.1:10911".into());
        s.brokers.insert("broker-a".into(), Arc::new(b));
        Arc::make_mut(&mut s.clusters).entry("DefaultCluster".into()).or_default().insert("broker-a".into());
        assert_eq!(
            std::str::from_utf8(&s.body_now(TableBody::ClusterInfo)).unwrap(),
            r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
        );
        assert_eq!(
            encode_topic_list(&["broker-a", "DefaultCluster"], Some("192.168.0.1:10911")),
            br#"{"brokerAddr":"192.168.0.1:10911","topicList":["broker-a","DefaultCluster"]}"#
        );
    }
}
