//! The route snapshot file of warm restart: the route tables (brokers, clusters, topics' queue data, filter
//! servers, static-topic mappings) and each broker's DataVersion and timeout, but no timestamps: a restored
//! broker starts a fresh liveness timer, so one that never comes back expires on the usual timeout.
//!
//! Plain JSON with a format tag; a file that does not parse, or carries another format, is ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::protocol::{DataVersion, TopicQueueMappingInfo};
use crate::route::builder::{BrokerTopicIndex, RouteBuilder};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveInfo, BrokerLiveTable};
use crate::route::snapshot::RouteSnapshot;

/// Bumped whenever the layout changes; an older file is then ignored, never misread.
pub const FORMAT: &str = "rocketns-routes/1";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteDump {
    pub format: String,
    pub brokers: Vec<BrokerDump>,
    pub clusters: BTreeMap<String, Vec<String>>,
    pub topics: Vec<TopicDump>,
    pub filter_servers: Vec<FilterServerDump>,
    pub mappings: BTreeMap<String, Vec<TopicQueueMappingInfo>>,
    pub live_brokers: Vec<LiveBrokerDump>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerDump {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: BTreeMap<i64, String>,
    pub zone_name: Option<String>,
    pub enable_acting_master: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicDump {
    pub topic: String,
    pub queue_datas: Vec<QueueDump>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueDump {
    pub broker_name: String,
    pub read_queue_nums: i32,
    pub write_queue_nums: i32,
    pub perm: i32,
    pub topic_sys_flag: i32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterServerDump {
    pub cluster: String,
    pub broker_addr: String,
    pub servers: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveBrokerDump {
    pub cluster: String,
    pub broker_addr: String,
    pub ha_server_addr: String,
    pub data_version: DataVersion,
    pub timeout_millis: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("cannot parse the route snapshot file: {0}")]
    Parse(String),
    #[error("the route snapshot file has format {found:?}, this rocketns reads {FORMAT:?}")]
    Format { found: String },
}

/// The file's content for `snapshot` and the live brokers.
pub fn dump(snapshot: &RouteSnapshot, live: &BrokerLiveTable) -> Vec<u8> {
    let mut brokers: Vec<BrokerDump> = snapshot
        .brokers
        .values()
        .map(|b| BrokerDump {
            cluster: b.cluster.to_string(),
            broker_name: b.broker_name.to_string(),
            broker_addrs: b.broker_addrs.iter().map(|(id, a)| (*id, a.to_string())).collect(),
            zone_name: b.zone_name.as_deref().map(str::to_string),
            enable_acting_master: b.enable_acting_master,
        })
        .collect();
    brokers.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut topics: Vec<TopicDump> = snapshot
        .topics
        .iter()
        .map(|(topic, route)| TopicDump {
            topic: topic.to_string(),
            queue_datas: route
                .queue_datas
                .iter()
                .map(|q| QueueDump {
                    broker_name: q.broker_name.to_string(),
                    read_queue_nums: q.read_queue_nums,
                    write_queue_nums: q.write_queue_nums,
                    perm: q.perm,
                    topic_sys_flag: q.topic_sys_flag,
                })
                .collect(),
        })
        .collect();
    topics.sort_by(|a, b| a.topic.cmp(&b.topic));
    let file = RouteDump {
        format: FORMAT.to_string(),
        brokers,
        clusters: snapshot
            .clusters
            .iter()
            .map(|(c, names)| (c.to_string(), names.iter().map(|n| n.to_string()).collect()))
            .collect(),
        topics,
        filter_servers: snapshot
            .filter_servers
            .iter()
            .map(|(k, servers)| FilterServerDump {
                cluster: k.cluster.to_string(),
                broker_addr: k.addr.to_string(),
                servers: servers.clone(),
            })
            .collect(),
        mappings: snapshot.mappings.iter().map(|(t, m)| (t.to_string(), m.values().cloned().collect())).collect(),
        live_brokers: live
            .entries()
            .into_iter()
            .map(|(k, info)| LiveBrokerDump {
                cluster: k.cluster.to_string(),
                broker_addr: k.addr.to_string(),
                ha_server_addr: info.ha_server_addr.to_string(),
                data_version: info.data_version,
                timeout_millis: info.timeout.as_millis() as u64,
            })
            .collect(),
    };
    serde_json::to_vec(&file).unwrap_or_default()
}

/// Rebuilds the route table from a file's content on top of `initial` (empty, with the switches and ordered
/// topics of this start): the snapshot to start from, its index, and live entries (stamped `now`, on no
/// connection) in `live`.
pub fn restore(
    bytes: &[u8],
    initial: &RouteSnapshot,
    index: &mut BrokerTopicIndex,
    live: &BrokerLiveTable,
    now: Instant,
) -> Result<RouteSnapshot, DumpError> {
    let file: RouteDump = serde_json::from_slice(bytes).map_err(|e| DumpError::Parse(e.to_string()))?;
    if file.format != FORMAT {
        return Err(DumpError::Format { found: file.format });
    }
    for b in &file.live_brokers {
        live.insert(
            BrokerAddrKey::new(&b.cluster, &b.broker_addr),
            BrokerLiveInfo {
                last_update: now,
                timeout: Duration::from_millis(b.timeout_millis.max(1)),
                data_version: b.data_version,
                conn_id: 0,
                ha_server_addr: b.ha_server_addr.as_str().into(),
            },
        );
    }
    let mut builder = RouteBuilder::new(initial, index, live);
    builder.restore(file);
    Ok(builder.finish().unwrap_or_else(|| initial.clone()))
}
