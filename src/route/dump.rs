//! The route snapshot file of warm restart: the route tables (brokers, clusters, topics' queue data, filter
//! servers, static-topic mappings) and each broker's DataVersion and timeout, but no timestamps: a restored
//! broker starts a fresh liveness timer, so one that never comes back expires on the usual timeout.
//!
//! The writer hands out the routes and the live entries of one batch boundary (`RoutesToSave`), so a file
//! never holds a broker without its live entry or the other way round; and `restore` reconciles whatever a
//! file holds (an older one, one edited by hand), so every routed address expires unless it comes back.
//!
//! Plain JSON with a format tag; a file that does not parse, or carries another format, is ignored. Each
//! distinct queue list is written once and topics name theirs (format 2): 50 brokers that share 100,000
//! topics wrote every topic's fifty queue datas in format 1, a file of hundreds of megabytes, and parsing
//! it back held all of them at once. Format 1 files are still read, so an upgrade restarts warm.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::protocol::{BrokerData, DataVersion, QueueData, TopicQueueMappingInfo};
use crate::route::FastHasher;
use crate::route::builder::{BrokerTopicIndex, RouteBuilder};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveInfo, BrokerLiveTable, DEFAULT_BROKER_TIMEOUT};
use crate::route::snapshot::{RouteSnapshot, TopicMappings, TopicRoute};
use crate::route::topic_table::TopicEntry;

/// Bumped whenever the layout changes; a file of a format not in [`READS`] is then ignored, never misread.
pub const FORMAT: &str = "rocketns-routes/2";
/// The formats `restore` reads: 1 has each topic's queue datas in the topic.
pub const READS: [&str; 2] = [FORMAT, "rocketns-routes/1"];

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteDump {
    pub format: String,
    pub brokers: Vec<BrokerDump>,
    pub clusters: BTreeMap<String, Vec<String>>,
    /// Each distinct queue list once (format 2), sorted by broker name.
    #[serde(default)]
    pub queue_lists: Vec<Vec<QueueData>>,
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
    /// Format 1: the topic's own queue datas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_datas: Vec<QueueData>,
    /// Format 2: its list's place in [`RouteDump::queue_lists`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_list: Option<usize>,
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
    #[error("the route snapshot file has format {found:?}, this rocketns reads {READS:?}")]
    Format { found: String },
    #[error("topic {topic:?} names queue list {list}, the file has {lists}")]
    NoSuchList { topic: String, list: usize, lists: usize },
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

/// Writes the file's content to `out` as it is encoded. Nothing of the table is copied first: a save holds
/// the write buffer, a sorted list of references to the topics (16 bytes each) and the place of each
/// distinct queue list (up to 48 bytes a list), not a second table and a file's worth of JSON (25 MiB at
/// 100,000 topics when it did). It runs after every change, whatever clients do, so its peak adds to every
/// other (tests/route_file_memory.rs).
pub fn write(routes: &RoutesToSave, out: impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer(out, &FileView(routes)).map_err(std::io::Error::from)
}

/// [`RouteDump`] as views of a snapshot: the same fields in the same order, so the same bytes.
struct FileView<'a>(&'a RoutesToSave);

impl Serialize for FileView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (snapshot, live) = (&self.0.snapshot, &self.0.live);
        let mut brokers: Vec<&BrokerData> = snapshot.brokers.values().map(|b| &**b).collect();
        brokers.sort_unstable_by(|a, b| a.broker_name.cmp(&b.broker_name));
        let mut topics: Vec<TopicEntry<'_, Arc<TopicRoute>>> = Vec::with_capacity(snapshot.topics.len());
        topics.extend(snapshot.topics.entries());
        topics.sort_unstable();
        let mut mappings: Vec<(&Arc<str>, &Arc<TopicMappings>)> = snapshot.mappings.iter().collect();
        mappings.sort_unstable_by(|a, b| a.0.cmp(b.0));
        // Lists are numbered in the order of the first topic that has each: the same table, the same file.
        let mut places: HashMap<*const Vec<QueueData>, usize, FastHasher> = HashMap::default();
        let mut lists: Vec<&[QueueData]> = Vec::new();
        for route in topics.iter().map(|t| t.value()) {
            places.entry(Arc::as_ptr(&route.queue_datas)).or_insert_with(|| {
                lists.push(&route.queue_datas);
                lists.len() - 1
            });
        }
        let place = |route: &TopicRoute| places.get(&Arc::as_ptr(&route.queue_datas)).copied().unwrap_or_default();

        let mut file = s.serialize_struct("RouteDump", 8)?;
        file.serialize_field("format", FORMAT)?;
        file.serialize_field("brokers", &Seq(|| brokers.iter().map(|b| BrokerView(b))))?;
        file.serialize_field("clusters", &*snapshot.clusters)?;
        file.serialize_field("queueLists", &lists)?;
        file.serialize_field(
            "topics",
            &Seq(|| topics.iter().map(|t| TopicView { topic: t.name(), queue_list: place(t.value()) })),
        )?;
        file.serialize_field(
            "filterServers",
            &Seq(|| {
                snapshot.filter_servers.iter().map(|(k, servers)| FilterServerView {
                    cluster: &k.cluster,
                    broker_addr: &k.addr,
                    servers,
                })
            }),
        )?;
        file.serialize_field("mappings", &MapOf(|| mappings.iter().map(|(topic, m)| (topic, Seq(|| m.values())))))?;
        file.serialize_field(
            "liveBrokers",
            &Seq(|| {
                live.iter().map(|(k, info)| LiveBrokerView {
                    cluster: &k.cluster,
                    broker_addr: &k.addr,
                    ha_server_addr: &info.ha_server_addr,
                    data_version: info.data_version,
                    timeout_millis: info.timeout.as_millis() as u64,
                })
            }),
        )?;
        file.end()
    }
}

/// A sequence written from an iterator made when it is serialized, so nothing is collected for it.
struct Seq<F>(F);

impl<F: Fn() -> I, I: Iterator<Item: Serialize>> Serialize for Seq<F> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// [`Seq`] for a map.
struct MapOf<F>(F);

impl<F: Fn() -> I, I: Iterator<Item = (K, V)>, K: Serialize, V: Serialize> Serialize for MapOf<F> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map((self.0)())
    }
}

/// [`BrokerDump`] of a snapshot's BrokerData.
struct BrokerView<'a>(&'a BrokerData);

impl Serialize for BrokerView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let b = self.0;
        let mut out = s.serialize_struct("BrokerDump", 5)?;
        out.serialize_field("cluster", &b.cluster)?;
        out.serialize_field("brokerName", &b.broker_name)?;
        out.serialize_field("brokerAddrs", &b.broker_addrs)?;
        out.serialize_field("zoneName", &b.zone_name)?;
        out.serialize_field("enableActingMaster", &b.enable_acting_master)?;
        out.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TopicView<'a> {
    topic: &'a str,
    queue_list: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FilterServerView<'a> {
    cluster: &'a str,
    broker_addr: &'a str,
    servers: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveBrokerView<'a> {
    cluster: &'a str,
    broker_addr: &'a str,
    ha_server_addr: &'a str,
    data_version: DataVersion,
    timeout_millis: u64,
}

/// A route file's content, checked: its format is one this build reads and every topic's list is there.
pub fn parse(bytes: &[u8]) -> Result<RouteDump, DumpError> {
    let file: RouteDump = serde_json::from_slice(bytes).map_err(|e| DumpError::Parse(e.to_string()))?;
    if !READS.contains(&file.format.as_str()) {
        return Err(DumpError::Format { found: file.format });
    }
    if let Some((t, list)) =
        file.topics.iter().find_map(|t| t.queue_list.filter(|l| *l >= file.queue_lists.len()).map(|l| (t, l)))
    {
        return Err(DumpError::NoSuchList { topic: t.topic.clone(), list, lists: file.queue_lists.len() });
    }
    Ok(file)
}

/// Rebuilds the route table from a route file's content ([`parse`]d, or a peer's copy) on top of `initial`
/// (empty, with the switches and ordered topics of this start): the snapshot to start from, its index, and
/// live entries (stamped `now`, on no connection) in `live`, reconciled with the routes (see
/// [`reconcile_live`]).
pub(crate) fn restore(
    file: RouteDump,
    initial: &RouteSnapshot,
    index: &mut BrokerTopicIndex,
    live: &BrokerLiveTable,
    now: Instant,
) -> RouteSnapshot {
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
    restored
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

    fn dump(routes: &RoutesToSave) -> Vec<u8> {
        let mut out = Vec::new();
        write(routes, &mut out).expect("written to memory");
        out
    }

    /// The file as written from views of the snapshot is [`RouteDump`] (what `restore` reads) byte for byte:
    /// every table in it, filter servers and static-topic mappings included.
    #[test]
    fn the_written_file_is_a_route_dump_byte_for_byte() {
        let text = r#"{"format":"rocketns-routes/2",
            "brokers":[{"cluster":"c","brokerName":"a","brokerAddrs":{"0":"a:1"},"zoneName":"z","enableActingMaster":true}],
            "clusters":{"c":["a"]},
            "queueLists":[[{"brokerName":"a","readQueueNums":8,"writeQueueNums":4,"perm":6,"topicSysFlag":1}],
                          [{"brokerName":"a","readQueueNums":1,"writeQueueNums":1,"perm":2,"topicSysFlag":0}]],
            "topics":[{"topic":"ta","queueList":0},{"topic":"ta2","queueList":1},{"topic":"ta3","queueList":0}],
            "filterServers":[{"cluster":"c","brokerAddr":"a:1","servers":["f:1","f:2"]}],
            "mappings":{"ta":[{"topic":"ta","scope":"s","totalQueues":2,"bname":"a","epoch":3,"dirty":false,"currIdMap":{"0":1}}]},
            "liveBrokers":[{"cluster":"c","brokerAddr":"a:1","haServerAddr":"a:3","dataVersion":{"stateVersion":1,"timestamp":2,"counter":3},"timeoutMillis":5000}]}"#;
        let original: RouteDump = serde_json::from_str(text).expect("a RouteDump");
        let canonical = serde_json::to_vec(&original).unwrap();
        let live = BrokerLiveTable::new();
        let snapshot = from_bytes(&canonical, &live, Instant::now()).expect("restored");
        assert_eq!(snapshot.mappings.len(), 1, "the mapping is restored");
        let (ta, ta3) =
            (&snapshot.topics.get("ta").unwrap().queue_datas, &snapshot.topics.get("ta3").unwrap().queue_datas);
        assert!(Arc::ptr_eq(ta, ta3), "topics of one list in the file share one list");
        let routes = RoutesToSave { snapshot: std::sync::Arc::new(snapshot), live: live.entries() };
        assert_eq!(String::from_utf8(dump(&routes)).unwrap(), String::from_utf8(canonical).unwrap());
    }

    /// A file of format 1 (each topic's queue datas in the topic, as rocketns wrote before) is read: an
    /// upgrade restarts warm. A topic that names a list the file lacks makes the file unreadable.
    #[test]
    fn format_1_files_are_read_and_missing_lists_refused() {
        let v1 = r#"{"format":"rocketns-routes/1",
            "brokers":[{"cluster":"c","brokerName":"a","brokerAddrs":{"0":"a:1"},"zoneName":null,"enableActingMaster":false}],
            "clusters":{"c":["a"]},
            "topics":[{"topic":"ta","queueDatas":[{"brokerName":"a","readQueueNums":8,"writeQueueNums":4,"perm":6,"topicSysFlag":1}]}],
            "filterServers":[],"mappings":{},"liveBrokers":[]}"#;
        let read = |text: &str| {
            let live = BrokerLiveTable::new();
            from_bytes(text.as_bytes(), &live, Instant::now())
        };
        let snapshot = read(v1).expect("format 1 is read");
        assert_eq!(snapshot.topics.get("ta").unwrap().queue_datas[0].read_queue_nums, 8);
        let dangling = v1.replace("rocketns-routes/1", "rocketns-routes/2").replace(
            r#""queueDatas":[{"brokerName":"a","readQueueNums":8,"writeQueueNums":4,"perm":6,"topicSysFlag":1}]"#,
            r#""queueList":0"#,
        );
        assert!(matches!(read(&dangling), Err(DumpError::NoSuchList { list: 0, lists: 0, .. })), "{dangling}");
    }

    fn restored(routes: &RoutesToSave, now: Instant) -> (RouteSnapshot, BrokerLiveTable) {
        let live = BrokerLiveTable::new();
        let snapshot = from_bytes(&dump(routes), &live, now).unwrap();
        (snapshot, live)
    }

    /// A file's bytes, parsed and restored on an empty table.
    fn from_bytes(bytes: &[u8], live: &BrokerLiveTable, now: Instant) -> Result<RouteSnapshot, DumpError> {
        parse(bytes).map(|file| restore(file, &RouteSnapshot::default(), &mut BrokerTopicIndex::default(), live, now))
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
