//! The route snapshot file of warm restart: the route tables (brokers, clusters, topics' queue data, filter
//! servers, static-topic mappings) and each broker's DataVersion and timeout, but no timestamps: a restored
//! broker starts a fresh liveness timer, so one that never comes back expires on the usual timeout.
//!
//! The writer hands out the routes and the live entries of one batch boundary (`RoutesToSave`), so a file
//! never holds a broker without its live entry or the other way round; and `restore` reconciles whatever a
//! file holds (an older one, one edited by hand), so every routed address expires unless it comes back.
//!
//! Plain JSON with a format tag; a file that does not parse, or carries another format, is ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::protocol::{DataVersion, QueueData, TopicQueueMappingInfo};
use crate::route::builder::{BrokerTopicIndex, RouteBuilder};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveInfo, BrokerLiveTable, DEFAULT_BROKER_TIMEOUT};
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
    pub queue_datas: Vec<QueueData>,
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

/// The routes and the live entries of one moment of the writer's, for the route snapshot file.
#[derive(Debug, Clone)]
pub struct RoutesToSave {
    pub snapshot: std::sync::Arc<RouteSnapshot>,
    pub live: Vec<(BrokerAddrKey, BrokerLiveInfo)>,
}

impl RoutesToSave {
    /// No routes: nothing to serve after a restart.
    pub fn is_empty(&self) -> bool {
        self.snapshot.topics.is_empty() && self.snapshot.brokers.is_empty()
    }
}

/// The file's content.
pub fn dump(routes: &RoutesToSave) -> Vec<u8> {
    let snapshot = &routes.snapshot;
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
        .map(|(topic, route)| TopicDump { topic: topic.to_string(), queue_datas: route.queue_datas.clone() })
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
        live_brokers: routes
            .live
            .iter()
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
/// connection) in `live`, reconciled with the routes (see [`reconcile_live`]).
pub(crate) fn restore(
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
    let (next, live_changes) = builder.finish();
    live_changes.commit(live);
    let restored = next.unwrap_or_else(|| initial.clone());
    reconcile_live(&restored, live, now);
    Ok(restored)
}

/// Makes the live table agree with the routes: every (cluster, address) that a route names gets a live entry
/// if it has none (stamped `now`, the default timeout, no DataVersion, so its first registration is applied
/// in full), and entries that no route names are dropped. Expiry walks the live table only, so without the
/// first a broker missing from it would be routed for ever; the second keeps the table from holding brokers
/// that nothing routes.
fn reconcile_live(snapshot: &RouteSnapshot, live: &BrokerLiveTable, now: Instant) {
    let routed: std::collections::HashSet<BrokerAddrKey> = snapshot
        .brokers
        .values()
        .flat_map(|b| b.broker_addrs.values().map(|addr| BrokerAddrKey::new(&b.cluster, addr)))
        .collect();
    for (key, _) in live.entries() {
        if !routed.contains(&key) {
            tracing::warn!(cluster = %key.cluster, broker = %key.addr, "route snapshot file: live entry of a broker no route names, dropped");
            live.remove(&key);
        }
    }
    for key in routed {
        if live.get(&key).is_none() {
            tracing::warn!(cluster = %key.cluster, broker = %key.addr, "route snapshot file: routed broker without a live entry, given one");
            live.insert(
                key,
                BrokerLiveInfo {
                    last_update: now,
                    timeout: DEFAULT_BROKER_TIMEOUT,
                    data_version: DataVersion::default(),
                    conn_id: 0,
                    ha_server_addr: "".into(),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::builder::test_registration;

    /// A snapshot with brokers `a` (a:1) and `b` (b:1), and the live entries the writer made for them.
    fn two_brokers() -> (RoutesToSave, BrokerLiveTable) {
        let live = BrokerLiveTable::new();
        let mut index = BrokerTopicIndex::default();
        let mut builder = RouteBuilder::new(&RouteSnapshot::default(), &mut index, &live);
        builder.register_broker(&test_registration("a", 0, "a:1", 1, &["ta", "ta2"])).unwrap();
        builder.register_broker(&test_registration("b", 0, "b:1", 1, &["tb", "tb2"])).unwrap();
        let (next, changes) = builder.finish();
        changes.commit(&live);
        let snapshot = std::sync::Arc::new(next.unwrap());
        (RoutesToSave { snapshot, live: live.entries() }, live)
    }

    fn restored(routes: &RoutesToSave, now: Instant) -> (RouteSnapshot, BrokerLiveTable) {
        let live = BrokerLiveTable::new();
        let snapshot =
            restore(&dump(routes), &RouteSnapshot::default(), &mut BrokerTopicIndex::default(), &live, now).unwrap();
        (snapshot, live)
    }

    #[test]
    fn a_saved_table_comes_back_with_every_broker_live() {
        let (routes, _) = two_brokers();
        let now = Instant::now();
        let (snapshot, live) = restored(&routes, now);
        assert_eq!(snapshot.topics.len(), 4);
        let a = live.get(&BrokerAddrKey::new("c", "a:1")).expect("a is live");
        assert_eq!(a.data_version.counter, 1, "its DataVersion is kept");
        assert_eq!(a.last_update, now, "on a fresh timer");
        assert_eq!(live.len(), 2);
    }

    /// A file whose routes name a broker without a live entry: the broker is given one, so it expires.
    #[test]
    fn a_routed_broker_without_a_live_entry_gets_one_and_expires() {
        let (mut routes, _) = two_brokers();
        routes.live.retain(|(k, _)| &*k.addr != "b:1");
        let now = Instant::now();
        let (_, live) = restored(&routes, now);
        let b = BrokerAddrKey::new("c", "b:1");
        let info = live.get(&b).expect("b has a live entry");
        assert_eq!(info.data_version, DataVersion::default(), "no DataVersion: its next registration is applied");
        assert!(live.expired(now + DEFAULT_BROKER_TIMEOUT).is_empty());
        assert!(live.expired(now + DEFAULT_BROKER_TIMEOUT + Duration::from_millis(1)).contains(&b));
    }

    /// A file with a live entry that no route names: dropped.
    #[test]
    fn a_live_entry_no_route_names_is_dropped() {
        let (mut routes, live) = two_brokers();
        let stray = BrokerAddrKey::new("c", "gone:1");
        live.insert(stray.clone(), live.get(&BrokerAddrKey::new("c", "a:1")).unwrap());
        routes.live = live.entries();
        let (_, restored_live) = restored(&routes, Instant::now());
        assert!(restored_live.get(&stray).is_none());
        assert_eq!(restored_live.len(), 2);
    }
}
