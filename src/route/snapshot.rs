//! `RouteSnapshot`: the whole route table at one instant, immutable once published.
//!
//! Pure data, no I/O. Readers get it from an `ArcSwap` without locking; each routable topic carries its
//! TopicRouteData body already encoded in both JSON styles, so a route lookup is a map lookup and a copy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::json::{self, JsonStyle};
use crate::protocol::{BrokerData, QueueData, TopicQueueMappingInfo};
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
    /// Sorted by broker name.
    pub queue_datas: Vec<QueueData>,
    /// `None` when no broker of the topic is known: Java keeps the topic but answers TOPIC_NOT_EXIST.
    pub encoded: Option<EncodedRoute>,
}

/// Bodies derived from the whole table, encoded on first use and dropped with the snapshot.
#[derive(Debug, Default)]
struct Derived {
    cluster_info: OnceLock<Bytes>,
    topic_list: OnceLock<Bytes>,
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

    /// ClusterInfo JSON (GET_BROKER_CLUSTER_INFO), always in fastjson's default style like Java.
    pub fn cluster_info_body(&self) -> Bytes {
        self.derived.cluster_info.get_or_init(|| Bytes::from(self.encode_cluster_info())).clone()
    }

    /// Broker names of `cluster` (empty when unknown).
    pub fn broker_names_of(&self, cluster: &str) -> impl Iterator<Item = &Arc<str>> {
        self.clusters.get(cluster).into_iter().flatten()
    }

    /// TopicList JSON of every topic (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
    pub fn topic_list_body(&self) -> Bytes {
        self.derived
            .topic_list
            .get_or_init(|| {
                let mut names: Vec<&str> = self.topics.keys().map(|k| &**k).collect();
                names.sort_unstable();
                Bytes::from(encode_topic_list(names, None))
            })
            .clone()
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

/// TopicList JSON: `{"brokerAddr":"…","topicList":[…]}`, `brokerAddr` omitted when absent.
pub fn encode_topic_list<'a>(topics: impl IntoIterator<Item = &'a str>, broker_addr: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    if let Some(addr) = broker_addr {
        json::write_key(&mut out, "brokerAddr");
        json::write_str(&mut out, addr, JsonStyle::Fastjson);
        out.push(b',');
    }
    json::write_key(&mut out, "topicList");
    json::write_str_array(&mut out, topics, JsonStyle::Fastjson);
    out.push(b'}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_snapshot_bodies() {
        let s = RouteSnapshot::default();
        assert_eq!(&s.cluster_info_body()[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
        assert_eq!(&s.topic_list_body()[..], br#"{"topicList":[]}"#);
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
            std::str::from_utf8(&s.cluster_info_body()).unwrap(),
            r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
        );
        assert_eq!(
            encode_topic_list(["broker-a", "DefaultCluster"], Some("192.168.0.1:10911")),
            br#"{"brokerAddr":"192.168.0.1:10911","topicList":["broker-a","DefaultCluster"]}"#
        );
    }
}
