//! TopicRouteData and its parts (QueueData, BrokerData), and their fastjson encodings.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::protocol::json::{self, JsonStyle};
use crate::protocol::lenient;
use crate::protocol::static_topic::TopicQueueMappingInfo;

/// The master's broker id (`MixAll.MASTER_ID`).
pub const MASTER_ID: i64 = 0;
pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;

/// A topic's queues on one broker group. Also the shape of queue data in the route snapshot file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: Arc<str>,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

/// A topic's queue settings on one broker: QueueData without the broker name, as the route builder
/// indexes them per broker and a broker's TopicConfig carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

impl QueueConfig {
    pub fn for_broker(self, broker_name: Arc<str>) -> QueueData {
        let QueueConfig { read_queue_nums, write_queue_nums, perm, topic_sys_flag } = self;
        QueueData { broker_name, read_queue_nums, write_queue_nums, perm, topic_sys_flag }
    }
}

impl From<&QueueData> for QueueConfig {
    fn from(q: &QueueData) -> Self {
        QueueConfig {
            read_queue_nums: q.read_queue_nums,
            write_queue_nums: q.write_queue_nums,
            perm: q.perm,
            topic_sys_flag: q.topic_sys_flag,
        }
    }
}

impl From<&crate::protocol::TopicConfig> for QueueConfig {
    fn from(t: &crate::protocol::TopicConfig) -> Self {
        QueueConfig {
            read_queue_nums: t.read_queue_nums,
            write_queue_nums: t.write_queue_nums,
            perm: t.perm,
            topic_sys_flag: t.topic_sys_flag,
        }
    }
}

impl QueueData {
    pub fn is_writable(&self) -> bool {
        self.perm & PERM_WRITE != 0
    }

    pub fn write_json(&self, out: &mut Vec<u8>, style: JsonStyle) {
        out.extend_from_slice(b"{\"brokerName\":");
        json::write_str(out, &self.broker_name, style);
        out.extend_from_slice(b",\"perm\":");
        json::write_int(out, self.perm as i64);
        out.extend_from_slice(b",\"readQueueNums\":");
        json::write_int(out, self.read_queue_nums as i64);
        out.extend_from_slice(b",\"topicSysFlag\":");
        json::write_int(out, self.topic_sys_flag as i64);
        out.extend_from_slice(b",\"writeQueueNums\":");
        json::write_int(out, self.write_queue_nums as i64);
        out.push(b'}');
    }
}

/// A broker group: its name, cluster and the address of each member by broker id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerData {
    pub cluster: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_addrs: BTreeMap<i64, Arc<str>>,
    pub zone_name: Option<Arc<str>>,
    pub enable_acting_master: bool,
}

impl BrokerData {
    pub fn new(cluster: Arc<str>, broker_name: Arc<str>) -> Self {
        BrokerData { cluster, broker_name, broker_addrs: BTreeMap::new(), zone_name: None, enable_acting_master: false }
    }

    pub fn write_json(&self, out: &mut Vec<u8>, style: JsonStyle) {
        out.extend_from_slice(b"{\"brokerAddrs\":");
        write_broker_addrs(out, &self.broker_addrs, style);
        out.extend_from_slice(b",\"brokerName\":");
        json::write_str(out, &self.broker_name, style);
        out.extend_from_slice(b",\"cluster\":");
        json::write_str(out, &self.cluster, style);
        out.extend_from_slice(b",\"enableActingMaster\":");
        json::write_bool(out, self.enable_acting_master);
        if let Some(zone) = &self.zone_name {
            out.extend_from_slice(b",\"zoneName\":");
            json::write_str(out, zone, style);
        }
        out.push(b'}');
    }
}

/// `{0:"addr",1:"addr"}` (fastjson) or `{"0":"addr","1":"addr"}` (standard), ids ascending.
pub fn write_broker_addrs(out: &mut Vec<u8>, addrs: &BTreeMap<i64, Arc<str>>, style: JsonStyle) {
    out.push(b'{');
    for (i, (id, addr)) in addrs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_int_key(out, *id, style);
        json::write_str(out, addr, style);
    }
    out.push(b'}');
}

/// What a TopicRouteData body is made of; the encoder writes it in fastjson's property order.
pub struct TopicRouteParts<'a> {
    pub broker_datas: &'a [&'a BrokerData],
    /// Broker address → its filter servers, sorted by address.
    pub filter_servers: &'a [(&'a str, &'a [String])],
    pub order_topic_conf: Option<&'a str>,
    pub queue_datas: &'a [&'a QueueData],
    /// `topicQueueMappingByBroker`, by broker name; `None` omits the property.
    pub mappings: Option<&'a [(&'a str, &'a TopicQueueMappingInfo)]>,
}

impl TopicRouteParts<'_> {
    /// The whole body.
    pub fn encode(&self, style: JsonStyle) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + 160 * self.broker_datas.len() + 96 * self.queue_datas.len());
        self.write_broker_section(&mut out, style);
        self.write_topic_section(&mut out, style);
        out
    }

    /// `{"brokerDatas":[…],"filterServerTable":{…}`: the same for every topic on the same brokers, so
    /// routes can share it.
    pub fn write_broker_section(&self, out: &mut Vec<u8>, style: JsonStyle) {
        out.extend_from_slice(b"{\"brokerDatas\":[");
        for (i, b) in self.broker_datas.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            b.write_json(out, style);
        }
        out.extend_from_slice(b"],\"filterServerTable\":{");
        for (i, (addr, servers)) in self.filter_servers.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json::write_str(out, addr, style);
            out.push(b':');
            json::write_str_array(out, servers.iter().map(String::as_str), style);
        }
        out.push(b'}');
    }

    /// `,"orderTopicConf":…,"queueDatas":[…],"topicQueueMappingByBroker":{…}}`: the topic's own part.
    pub fn write_topic_section(&self, out: &mut Vec<u8>, style: JsonStyle) {
        if let Some(conf) = self.order_topic_conf {
            out.extend_from_slice(b",\"orderTopicConf\":");
            json::write_str(out, conf, style);
        }
        out.extend_from_slice(b",\"queueDatas\":[");
        for (i, q) in self.queue_datas.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            q.write_json(out, style);
        }
        out.push(b']');
        if let Some(mappings) = self.mappings {
            out.extend_from_slice(b",\"topicQueueMappingByBroker\":{");
            for (i, (broker, info)) in mappings.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_str(out, broker, style);
                out.push(b':');
                info.write_json(out, style);
            }
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// The part of a TopicRouteData body that REGISTER_TOPIC_IN_NAMESRV uses: its queue datas.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueDatasOnly {
    #[serde(default, deserialize_with = "crate::protocol::meter::opt_vec")]
    pub queue_datas: Option<Vec<QueueDataJson>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueDataJson {
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub broker_name: Option<String>,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub read_queue_nums: i32,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub write_queue_nums: i32,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub perm: i32,
    #[serde(default, deserialize_with = "lenient::i32_or_zero")]
    pub topic_sys_flag: i32,
}

/// Queue data as REGISTER_TOPIC_IN_NAMESRV sends it has to name its broker.
impl TryFrom<QueueDataJson> for QueueData {
    type Error = &'static str;

    fn try_from(q: QueueDataJson) -> Result<Self, Self::Error> {
        let broker_name = q.broker_name.ok_or("queue data without brokerName")?;
        let config = QueueConfig {
            read_queue_nums: q.read_queue_nums,
            write_queue_nums: q.write_queue_nums,
            perm: q.perm,
            topic_sys_flag: q.topic_sys_flag,
        };
        Ok(config.for_broker(broker_name.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerData {
        let mut b = BrokerData::new("DefaultCluster".into(), "broker-a".into());
        b.broker_addrs.insert(0, "192.168.0.1:10911".into());
        b.broker_addrs.insert(1, "192.168.0.2:10911".into());
        b
    }

    fn queue() -> QueueData {
        QueueData {
            broker_name: "broker-a".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_sys_flag: 0,
        }
    }

    /// fastjson 1.2.83 output recorded in protocol.md §3.1.
    #[test]
    fn route_bodies_match_fastjson() {
        let (b, q) = (broker(), queue());
        let parts = TopicRouteParts {
            broker_datas: &[&b],
            filter_servers: &[],
            order_topic_conf: None,
            queue_datas: &[&q],
            mappings: None,
        };
        assert_eq!(
            String::from_utf8(parts.encode(JsonStyle::Fastjson)).unwrap(),
            r#"{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
        );
        assert_eq!(
            String::from_utf8(parts.encode(JsonStyle::Standard)).unwrap(),
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
        );
    }

    /// "Everything filled in" of protocol.md §3.1, in both styles.
    #[test]
    fn everything_filled_in() {
        let mut b = broker();
        b.enable_acting_master = true;
        b.zone_name = Some("zone1".into());
        let q = queue();
        let fs = vec!["192.168.0.1:30000".to_string()];
        let info: TopicQueueMappingInfo = lenient::from_fastjson_slice(
            br#"{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}"#,
        )
        .unwrap();
        let parts = TopicRouteParts {
            broker_datas: &[&b],
            filter_servers: &[("192.168.0.1:10911", &fs)],
            order_topic_conf: Some("broker-a:8"),
            queue_datas: &[&q],
            mappings: Some(&[("broker-a", &info)]),
        };
        let standard = r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":true,"zoneName":"zone1"}],"filterServerTable":{"192.168.0.1:10911":["192.168.0.1:30000"]},"orderTopicConf":"broker-a:8","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{"0":0},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}}}"#;
        assert_eq!(String::from_utf8(parts.encode(JsonStyle::Standard)).unwrap(), standard);
        let fastjson = standard
            .replace(
                r#"{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"}"#,
                r#"{0:"192.168.0.1:10911",1:"192.168.0.2:10911"}"#,
            )
            .replace(r#"{"0":0}"#, "{0:0}");
        assert_eq!(String::from_utf8(parts.encode(JsonStyle::Fastjson)).unwrap(), fastjson);
    }
}
