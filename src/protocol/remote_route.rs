//! A TopicRouteData another NameServer sent (cluster-test mode's product environment, a peer's routes copied
//! at start), read as Java's `TopicRouteData.decode` reads it (either JSON style, lenient values) and written
//! again as its `encode()` writes it: fastjson's default style, lists in the order received. And a peer's
//! ClusterInfo, read the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::protocol::json::JsonStyle;
use crate::protocol::lenient;
use crate::protocol::route_data::{MASTER_ID, QueueDataJson, TopicRouteParts};
use crate::protocol::{BrokerData, QueueData, TopicQueueMappingInfo};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RouteJson {
    #[serde(default, deserialize_with = "lenient::opt_string")]
    order_topic_conf: Option<String>,
    #[serde(default)]
    queue_datas: Option<Vec<QueueDataJson>>,
    #[serde(default)]
    broker_datas: Option<Vec<BrokerDataJson>>,
    #[serde(default)]
    filter_server_table: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    topic_queue_mapping_by_broker: Option<BTreeMap<String, TopicQueueMappingInfo>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrokerDataJson {
    #[serde(default, deserialize_with = "lenient::opt_string")]
    cluster: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    broker_name: Option<String>,
    #[serde(default)]
    broker_addrs: Option<BTreeMap<i64, String>>,
    #[serde(default, deserialize_with = "lenient::opt_string")]
    zone_name: Option<String>,
    #[serde(default)]
    enable_acting_master: Option<bool>,
}

impl BrokerDataJson {
    fn into_broker(self) -> BrokerData {
        BrokerData {
            cluster: Arc::from(self.cluster.as_deref().unwrap_or_default()),
            broker_name: Arc::from(self.broker_name.as_deref().unwrap_or_default()),
            broker_addrs: self.broker_addrs.unwrap_or_default().into_iter().map(|(id, a)| (id, Arc::from(a))).collect(),
            zone_name: self.zone_name.map(Arc::from),
            enable_acting_master: self.enable_acting_master.unwrap_or(false),
        }
    }
}

/// A ClusterInfo (GET_BROKER_CLUSTER_INFO's body) another NameServer sent: its brokers and clusters.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RemoteClusterInfo {
    pub brokers: Vec<BrokerData>,
    pub clusters: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterInfoJson {
    #[serde(default)]
    broker_addr_table: Option<BTreeMap<String, BrokerDataJson>>,
    #[serde(default)]
    cluster_addr_table: Option<BTreeMap<String, Vec<String>>>,
}

impl RemoteClusterInfo {
    pub fn decode(body: &[u8]) -> serde_json::Result<RemoteClusterInfo> {
        let json: ClusterInfoJson = lenient::from_fastjson_slice(body)?;
        Ok(RemoteClusterInfo {
            brokers: json
                .broker_addr_table
                .unwrap_or_default()
                .into_values()
                .map(BrokerDataJson::into_broker)
                .collect(),
            clusters: json.cluster_addr_table.unwrap_or_default(),
        })
    }
}

/// The route, as this server re-encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRoute {
    pub order_topic_conf: Option<String>,
    pub queue_datas: Vec<QueueData>,
    pub broker_datas: Vec<BrokerData>,
    pub filter_servers: BTreeMap<String, Vec<String>>,
    pub mappings: Option<BTreeMap<String, TopicQueueMappingInfo>>,
}

impl RemoteRoute {
    pub fn decode(body: &[u8]) -> serde_json::Result<RemoteRoute> {
        let json: RouteJson = lenient::from_fastjson_slice(body)?;
        let queue_datas = json
            .queue_datas
            .unwrap_or_default()
            .into_iter()
            .map(|q| QueueData {
                broker_name: Arc::from(q.broker_name.as_deref().unwrap_or_default()),
                read_queue_nums: q.read_queue_nums,
                write_queue_nums: q.write_queue_nums,
                perm: q.perm,
                topic_sys_flag: q.topic_sys_flag,
            })
            .collect();
        let broker_datas = json.broker_datas.unwrap_or_default().into_iter().map(BrokerDataJson::into_broker).collect();
        Ok(RemoteRoute {
            order_topic_conf: json.order_topic_conf,
            queue_datas,
            broker_datas,
            filter_servers: json.filter_server_table.unwrap_or_default(),
            mappings: json.topic_queue_mapping_by_broker,
        })
    }

    /// Java's `ZoneRouteRPCHook#filterByZoneName`: broker groups of another zone that have a master go,
    /// with their queues and filter servers.
    pub fn filter_by_zone(&mut self, zone: &str) {
        let (kept, removed): (Vec<BrokerData>, Vec<BrokerData>) =
            std::mem::take(&mut self.broker_datas).into_iter().partition(|b| {
                !b.broker_addrs.contains_key(&MASTER_ID)
                    || b.zone_name.as_deref().is_some_and(|z| z.eq_ignore_ascii_case(zone))
            });
        self.broker_datas = kept;
        self.queue_datas.retain(|q| !removed.iter().any(|b| b.broker_name == q.broker_name));
        for addr in removed.iter().flat_map(|b| b.broker_addrs.values()) {
            self.filter_servers.remove(&**addr);
        }
    }

    /// `TopicRouteData#encode()`.
    pub fn encode(&self) -> Vec<u8> {
        let brokers: Vec<&BrokerData> = self.broker_datas.iter().collect();
        let queues: Vec<&QueueData> = self.queue_datas.iter().collect();
        let filter_servers: Vec<(&str, &[String])> =
            self.filter_servers.iter().map(|(a, s)| (a.as_str(), s.as_slice())).collect();
        let mappings: Option<Vec<(&str, &TopicQueueMappingInfo)>> =
            self.mappings.as_ref().map(|m| m.iter().map(|(b, info)| (b.as_str(), info)).collect());
        TopicRouteParts {
            broker_datas: &brokers,
            filter_servers: &filter_servers,
            order_topic_conf: self.order_topic_conf.as_deref(),
            queue_datas: &queues,
            mappings: mappings.as_deref(),
        }
        .encode(JsonStyle::Fastjson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Java 5.3.3 NameServer's standard-JSON route, as a 5.x client receives it, comes out in fastjson's
    /// default style (what `TopicRouteData#encode()` writes), everything else as it was.
    #[test]
    fn a_standard_route_is_written_again_in_fastjson_style() {
        let standard = r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10915"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
        let route = RemoteRoute::decode(standard.as_bytes()).unwrap();
        let fastjson = standard.replace(r#"{"0":"127.0.0.1:10911","1""#, r#"{0:"127.0.0.1:10911",1"#);
        assert_eq!(String::from_utf8(route.encode()).unwrap(), fastjson);
        assert_eq!(RemoteRoute::decode(fastjson.as_bytes()).unwrap(), route);
    }

    #[test]
    fn the_zone_filter_drops_other_zones_groups_with_a_master() {
        let body = r#"{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"a","cluster":"C","zoneName":"z1"},{"brokerAddrs":{0:"b:1"},"brokerName":"b","cluster":"C","zoneName":"z2"},{"brokerAddrs":{1:"c:1"},"brokerName":"c","cluster":"C","zoneName":"z2"}],"filterServerTable":{"b:1":["f:1"]},"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1},{"brokerName":"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}"#;
        let mut route = RemoteRoute::decode(body.as_bytes()).unwrap();
        route.filter_by_zone("Z1");
        let names: Vec<&str> = route.broker_datas.iter().map(|b| &*b.broker_name).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(route.queue_datas.len(), 1);
        assert!(route.filter_servers.is_empty());
    }
}
