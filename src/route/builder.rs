//! `RouteBuilder`: applies route mutations to the next snapshot, the way Java's `RouteInfoManager` applies
//! them to its tables, and re-encodes only the topics whose route changed.
//!
//! Everything here is synchronous and pure: liveness changes are drafted and handed back with the snapshot,
//! for the writer to commit once it has published it. Only the writer (and the start-up restore) builds one,
//! so no lock is needed; nothing outside `route` can.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::protocol::route_data::{MASTER_ID, PERM_READ, PERM_WRITE};
use crate::protocol::{BrokerData, QueueConfig, QueueData, RegisterBrokerBody};
use crate::route::FastHasher;
use crate::route::encode::{SectionCache, shared_route};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveTable, ConnId, LiveChanges, LiveDraft};
use crate::route::min_broker_id::MinBrokerIdChange;
use crate::route::queue_lists::{QueueList, QueueLists};
use crate::route::snapshot::{RouteConfig, RouteSnapshot};

/// A REGISTER_BROKER request, decoded.
#[derive(Debug, Clone)]
pub struct BrokerRegistration {
    pub cluster: Arc<str>,
    pub broker_addr: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_id: i64,
    pub ha_server_addr: Arc<str>,
    pub zone_name: Option<Arc<str>>,
    pub heartbeat_timeout: Option<Duration>,
    /// `None` for 4.x brokers, which do not send the field.
    pub enable_acting_master: Option<bool>,
    pub body: RegisterBrokerBody,
    pub conn_id: ConnId,
    /// When the request arrived: the broker's heartbeat.
    pub now: Instant,
}

/// What the reply to a registration carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    pub master_addr: Option<Arc<str>>,
    pub ha_server_addr: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Java's rule against an incremental one-topic registration from a broker id not yet registered.
    #[error("register broker failed")]
    FirstRegistrationWithOneTopic,
}

/// An unregistration, from UNREGISTER_BROKER, a closed connection or expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnregisterRequest {
    pub cluster: Arc<str>,
    pub broker_addr: Arc<str>,
    pub broker_name: Arc<str>,
    pub broker_id: i64,
}

/// Broker name → topic → that broker's queue settings for the topic. Derived from the snapshot's queue
/// data and kept beside it by the writer: a registration compares its topic configs here (plain hash maps)
/// without touching the snapshot's tables, and a broker change finds its topics without a scan.
pub(in crate::route) type BrokerTopicIndex = HashMap<Arc<str>, HashMap<Arc<str>, QueueConfig, FastHasher>, FastHasher>;

type TopicSet = std::collections::HashSet<Arc<str>, FastHasher>;

pub(in crate::route) struct RouteBuilder<'a> {
    next: RouteSnapshot,
    index: &'a mut BrokerTopicIndex,
    live: LiveDraft<'a>,
    /// Queue data of the topics changed in this batch; written to the snapshot, encoded, once, by `finish`.
    lists: QueueLists,
    /// Topics to re-encode although their queue data did not change (order conf, mappings, settings).
    dirty_topics: TopicSet,
    /// Broker groups whose BrokerData or filter servers changed: all their topics are re-encoded.
    dirty_brokers: TopicSet,
    changed: bool,
    /// 905 notices, in order; and per group, the last broker that left it as its lowest id since the last
    /// registration (`notice_departures`).
    notices: Vec<MinBrokerIdChange>,
    left_as_lowest: HashMap<Arc<str>, Arc<str>, FastHasher>,
}

impl<'a> RouteBuilder<'a> {
    pub(in crate::route) fn new(
        current: &RouteSnapshot,
        index: &'a mut BrokerTopicIndex,
        live: &'a BrokerLiveTable,
    ) -> Self {
        RouteBuilder {
            next: current.clone(),
            index,
            live: LiveDraft::new(live),
            lists: QueueLists::default(),
            dirty_topics: TopicSet::default(),
            dirty_brokers: TopicSet::default(),
            changed: false,
            notices: Vec::new(),
            left_as_lowest: HashMap::default(),
        }
    }

    fn put_broker(&mut self, data: BrokerData) {
        let name = data.broker_name.clone();
        if self.next.brokers.get(&name).map(|b| **b != data).unwrap_or(true) {
            self.next.brokers.insert(name.clone(), Arc::new(data));
            self.dirty_brokers.insert(name);
            self.changed = true;
        }
    }

    /// The topic's queue data as this batch has it so far.
    fn queue_datas(&self, topic: &str) -> Option<&[QueueData]> {
        match self.lists.get_key_value(topic) {
            Some((_, list)) => Some(list),
            None => self.next.topics.get(topic).map(|t| t.queue_datas.as_slice()),
        }
    }

    fn queue_config(&self, topic: &str, broker: &str) -> Option<QueueConfig> {
        self.index.get(broker).and_then(|topics| topics.get(topic)).copied()
    }

    /// The topic's key and its list as this batch has it so far (an empty one for a new topic).
    fn current_list(&self, topic: &str) -> (Arc<str>, QueueList) {
        if let Some((key, list)) = self.lists.get_key_value(topic) {
            return (key.clone(), list.clone());
        }
        match self.next.topics.get(topic) {
            // The name as a broker's index holds it: the table keeps names in its entries, not as `Arc`s.
            Some(route) => {
                let indexed =
                    route.queue_datas.iter().find_map(|q| self.index.get(&*q.broker_name)?.get_key_value(topic));
                (indexed.map_or_else(|| Arc::from(topic), |(key, _)| key.clone()), route.queue_datas.clone())
            }
            None => (Arc::from(topic), self.lists.empty()),
        }
    }

    /// Inserts or replaces the queue data of `qd.broker_name` for `topic` when it differs.
    fn put_queue_data(&mut self, topic: &str, qd: QueueData) {
        let config = QueueConfig::from(&qd);
        if self.queue_config(topic, &qd.broker_name) == Some(config) {
            return;
        }
        let broker = qd.broker_name.clone();
        let (key, current) = self.current_list(topic);
        self.lists.put(key.clone(), &current, qd);
        self.index.entry(broker).or_default().insert(key, config);
        self.changed = true;
    }

    /// Removes the queue data of `broker` from `topic`; the topic goes when none is left.
    fn remove_queue_data(&mut self, topic: &str, broker: &str) {
        if self.queue_config(topic, broker).is_none() {
            return;
        }
        let Some((name, _)) = self.index.get_key_value(broker) else { return };
        let name = name.clone();
        let (key, current) = self.current_list(topic);
        self.lists.remove(key, &current, name);
        if let Some(topics) = self.index.get_mut(broker) {
            topics.remove(topic);
            if topics.is_empty() {
                self.index.remove(broker);
            }
        }
        self.drop_mapping(topic, broker);
        self.changed = true;
    }

    fn topics_of(&self, broker: &str) -> Vec<Arc<str>> {
        self.index.get(broker).map(|s| s.keys().cloned().collect()).unwrap_or_default()
    }

    /// `registerTopic` (REGISTER_TOPIC_IN_NAMESRV): stored as sent, but only for known broker names.
    pub(in crate::route) fn register_topic(&mut self, topic: &str, queue_datas: Vec<QueueData>) {
        let exists = self.queue_datas(topic).is_some_and(|q| !q.is_empty());
        if !exists && queue_datas.iter().any(|q| !self.next.brokers.contains_key(&q.broker_name)) {
            return;
        }
        for qd in queue_datas {
            if !self.next.brokers.contains_key(&qd.broker_name) {
                return;
            }
            self.put_queue_data(topic, qd);
        }
    }

    /// One unregistration of the batch service (protocol notes §4.5).
    pub(in crate::route) fn unregister_broker(&mut self, req: &UnregisterRequest) {
        let key = BrokerAddrKey { cluster: req.cluster.clone(), addr: req.broker_addr.clone() };
        self.live.remove(&key);
        if self.next.filter_servers.contains_key(&key) {
            Arc::make_mut(&mut self.next.filter_servers).remove(&key);
            self.dirty_brokers.insert(req.broker_name.clone());
            self.changed = true;
        }
        let Some(data) = self.next.brokers.get(&req.broker_name).cloned() else { return };
        let mut data = (*data).clone();
        // Java compares the request's id (not the address's) with the group's lowest.
        let lowest_left = data.broker_addrs.keys().next() == Some(&req.broker_id);
        data.broker_addrs.retain(|_, addr| *addr != req.broker_addr);
        if data.broker_addrs.is_empty() {
            self.next.brokers.remove(&req.broker_name);
            self.dirty_brokers.insert(req.broker_name.clone());
            let clusters = Arc::make_mut(&mut self.next.clusters);
            if let Some(names) = clusters.get_mut(&req.cluster) {
                names.remove(&req.broker_name);
                if names.is_empty() {
                    clusters.remove(&req.cluster);
                }
            }
            self.changed = true;
            let topics = self.topics_of(&req.broker_name);
            self.lists.reserve(topics.len());
            for topic in topics {
                self.remove_queue_data(&topic, &req.broker_name);
            }
        } else {
            if lowest_left {
                self.left_as_lowest.insert(req.broker_name.clone(), req.broker_addr.clone());
            }
            let acting_master = data.enable_acting_master;
            let masterless = data.broker_addrs.keys().next().is_some_and(|id| *id > MASTER_ID);
            self.put_broker(data);
            // A group that lost its master and may elect an acting one stops taking writes meanwhile.
            if acting_master && masterless {
                for topic in self.topics_of(&req.broker_name) {
                    if let Some(config) = self.queue_config(&topic, &req.broker_name)
                        && config.perm & PERM_WRITE != 0
                    {
                        let qd = QueueConfig { perm: config.perm & !PERM_WRITE, ..config };
                        self.put_queue_data(&topic, qd.for_broker(req.broker_name.clone()));
                    }
                }
            }
        }
    }

    /// Restores a table saved by `route::dump` (warm restart): the same state, encoded afresh.
    pub(in crate::route) fn restore(&mut self, dump: crate::route::dump::RouteDump) {
        for b in dump.brokers {
            let mut data = BrokerData::new(b.cluster.into(), b.broker_name.into());
            data.broker_addrs = b.broker_addrs.into_iter().map(|(id, a)| (id, Arc::from(a))).collect();
            data.zone_name = b.zone_name.map(Arc::from);
            data.enable_acting_master = b.enable_acting_master;
            self.put_broker(data);
        }
        let clusters = Arc::make_mut(&mut self.next.clusters);
        for (cluster, names) in dump.clusters {
            clusters.entry(cluster.into()).or_default().extend(names.into_iter().map(Arc::from));
        }
        // Topics of one list in the file become topics of one list here (`QueueLists` works each change
        // of a list out once).
        for t in dump.topics {
            let shared = t.queue_list.and_then(|l| dump.queue_lists.get(l)).into_iter().flatten();
            for qd in t.queue_datas.into_iter().chain(shared.cloned()) {
                self.put_queue_data(&t.topic, qd);
            }
        }
        let filters = Arc::make_mut(&mut self.next.filter_servers);
        for f in dump.filter_servers {
            filters.insert(BrokerAddrKey::new(&f.cluster, &f.broker_addr), f.servers);
        }
        for (topic, infos) in dump.mappings {
            for info in infos {
                self.put_mapping(&topic, &info);
            }
        }
        self.changed = true;
    }

    /// Stores a broker's share of a static topic, keyed by the mapping's own broker name as Java does, but
    /// only under a broker that has queues for the topic: it goes when they go (`remove_queue_data`), so
    /// mappings are never more than the queue data they belong to. (Java keeps every mapping ever sent,
    /// under whatever name it carries; COMPATIBILITY.md.)
    fn put_mapping(&mut self, topic: &str, info: &crate::protocol::TopicQueueMappingInfo) {
        let Some(bname) = info.bname.as_deref() else { return };
        if self.queue_config(topic, bname).is_none() {
            return;
        }
        let current = self.next.mappings.get(topic);
        if current.and_then(|m| m.get(bname)) == Some(info) {
            return;
        }
        let mut mappings = current.map(|m| (**m).clone()).unwrap_or_default();
        mappings.insert(Arc::from(bname), info.clone());
        let topic: Arc<str> = Arc::from(topic);
        self.next.mappings.insert(topic.clone(), Arc::new(mappings));
        self.dirty_topics.insert(topic);
        self.changed = true;
    }

    /// Removes `broker`'s share of the static topic `topic`, if it has one.
    fn drop_mapping(&mut self, topic: &str, broker: &str) {
        let Some((key, current)) = self.next.mappings.get_key_value(topic) else { return };
        if !current.contains_key(broker) {
            return;
        }
        let key = key.clone();
        let mut mappings = (**current).clone();
        mappings.remove(broker);
        if mappings.is_empty() {
            self.next.mappings.remove(&key);
        } else {
            self.next.mappings.insert(key.clone(), Arc::new(mappings));
        }
        self.dirty_topics.insert(key);
        self.changed = true;
    }

    /// WIPE_WRITE_PERM_OF_BROKER (`wipe`) or ADD_WRITE_PERM_OF_BROKER: clears the write bit of, or sets perm 6
    /// on, every queue data of `broker`. Returns how many topics it touched, changed or not, as Java counts.
    pub(in crate::route) fn operate_write_perm(&mut self, broker: &str, wipe: bool) -> usize {
        let Some((name, _)) = self.index.get_key_value(broker) else { return 0 };
        let name = name.clone();
        let topics = self.topics_of(broker);
        for topic in &topics {
            if let Some(config) = self.queue_config(topic, broker) {
                let perm = if wipe { config.perm & !PERM_WRITE } else { PERM_READ | PERM_WRITE };
                self.put_queue_data(topic, QueueConfig { perm, ..config }.for_broker(name.clone()));
            }
        }
        topics.len()
    }

    /// DELETE_TOPIC_IN_NAMESRV: the topic's queues on every broker of `cluster`, or the whole topic, with
    /// their static-topic mappings (Java keeps those; a broker's next registration restores both).
    pub(in crate::route) fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        let Some(queues) = self.queue_datas(topic) else { return };
        let brokers: Vec<Arc<str>> = match cluster {
            Some(cluster) => self.next.broker_names_of(cluster).cloned().collect(),
            None => queues.iter().map(|q| q.broker_name.clone()).collect(),
        };
        for broker in brokers {
            self.remove_queue_data(topic, &broker);
        }
    }

    /// A change of KV namespace ORDER_TOPIC_CONFIG: re-encodes that topic only.
    pub(in crate::route) fn set_order_topic_conf(&mut self, topic: &str, value: Option<&str>) {
        let current = self.next.order_topic_conf.get(topic).map(|v| &**v);
        if current == value {
            return;
        }
        let topic: Arc<str> = Arc::from(topic);
        match value {
            Some(v) => self.next.order_topic_conf.insert(topic.clone(), Arc::from(v)),
            None => self.next.order_topic_conf.remove(&topic),
        };
        self.changed = true;
        self.dirty_topics.insert(topic);
    }

    /// New switches; re-encodes the topics whose routes they change.
    pub(in crate::route) fn set_config(&mut self, config: RouteConfig) {
        let old = self.next.config;
        if old == config {
            return;
        }
        self.next.config = config;
        self.changed = true;
        if old.support_acting_master != config.support_acting_master {
            // Every topic, named by the brokers' index (the table keeps names in its entries, not as `Arc`s).
            self.dirty_topics.extend(self.index.values().flat_map(|topics| topics.keys().cloned()));
        } else if old.order_message_enable != config.order_message_enable {
            let ordered: Vec<Arc<str>> =
                self.next.order_topic_conf.keys().filter(|t| self.next.topics.contains_key(t)).cloned().collect();
            self.dirty_topics.extend(ordered);
        }
    }

    /// Builds the unregistration for a broker address found in the table (expiry and closed connections).
    pub(in crate::route) fn unregister_request_for(&self, key: &BrokerAddrKey) -> Option<UnregisterRequest> {
        self.next.brokers.values().find_map(|b| {
            if b.cluster != key.cluster {
                return None;
            }
            b.broker_addrs.iter().find(|(_, a)| **a == key.addr).map(|(id, _)| UnregisterRequest {
                cluster: key.cluster.clone(),
                broker_addr: key.addr.clone(),
                broker_name: b.broker_name.clone(),
                broker_id: *id,
            })
        })
    }

    /// Drops the live entry of an address no route names.
    pub(in crate::route) fn forget_live(&mut self, key: &BrokerAddrKey) {
        self.live.remove(key);
    }

    /// The 905 notices of the batch: its registrations' in order, then one per group whose lowest-id broker
    /// left, for the groups still there that allow an acting master.
    pub(in crate::route) fn take_notices(&mut self) -> Vec<MinBrokerIdChange> {
        self.notice_departures();
        std::mem::take(&mut self.notices)
    }

    /// Decides the notices of the unregistrations applied since the last registration: Java decides those
    /// of a batch of unregistrations once it is applied, from the groups as they are then.
    pub(super) fn notice_departures(&mut self) {
        for (name, offline) in std::mem::take(&mut self.left_as_lowest) {
            if let Some(group) = self.next.brokers.get(&name).filter(|g| g.enable_acting_master) {
                self.notices.extend(MinBrokerIdChange::new(&name, &group.broker_addrs, Some(offline), None));
            }
        }
    }

    /// The batch's view of the live table, its own changes included.
    pub(in crate::route) fn live(&self) -> &LiveDraft<'a> {
        &self.live
    }

    /// Writes the drafts into the snapshot and encodes every topic whose route changed, once each: the
    /// next snapshot (`None` when nothing visible changed) and the liveness changes to commit once it is
    /// published.
    pub(in crate::route) fn finish(mut self) -> (Option<RouteSnapshot>, LiveChanges) {
        let live = self.live.take_changes();
        if !self.changed {
            return (None, live);
        }
        let mut affected = std::mem::take(&mut self.dirty_topics);
        for broker in std::mem::take(&mut self.dirty_brokers) {
            if let Some(topics) = self.index.get(&broker) {
                affected.extend(topics.keys().cloned());
            }
        }
        let mut drafts = self.lists.take();
        let mut sections = SectionCache::default();
        affected.extend(drafts.keys().cloned());
        // In the table's order: each shard is copied once and filled while it is in the cache. In the set's
        // order, a batch of a few brokers' new topics read a cold slot of a 40 MB table for each (a million
        // routes' registration 1.2 x slower than hash maps, whose probes read a megabyte of control bytes).
        let mut affected: Vec<(u64, Arc<str>)> =
            affected.into_iter().map(|topic| (self.next.topics.layout_order(&topic), topic)).collect();
        affected.sort_unstable_by_key(|(order, _)| *order);
        for (_, topic) in affected {
            let queue_datas = match drafts.remove(&topic) {
                Some(draft) => draft,
                None => match self.next.topics.get(&topic) {
                    Some(route) => route.queue_datas.clone(),
                    None => continue,
                },
            };
            if queue_datas.is_empty() {
                self.next.topics.remove(&topic);
                continue;
            }
            let route = shared_route(&self.next, &topic, queue_datas, &mut sections);
            self.next.topics.insert(&topic, route);
        }
        self.next.version += 1;
        (Some(self.next), live)
    }
}

impl RouteBuilder<'_> {
    /// Finishes and commits the liveness changes at once, as the writer does after publishing: for tests
    /// that drive the builder without the writer.
    #[cfg(any(test, feature = "testing"))]
    pub(in crate::route) fn finish_committed(self) -> Option<RouteSnapshot> {
        let table = self.live.table();
        let (next, live) = self.finish();
        live.commit(table);
        next
    }
}

/// A 5.x broker's registration of `topics` (4/4 queues, perm 6) in cluster `c`, for unit tests.
#[cfg(test)]
pub(crate) fn test_registration(name: &str, id: i64, addr: &str, counter: i64, topics: &[&str]) -> BrokerRegistration {
    use crate::protocol::{DataVersion, TopicConfig};
    let body = RegisterBrokerBody {
        data_version: DataVersion { counter, ..Default::default() },
        topic_configs: topics.iter().map(|t| TopicConfig::new(*t, 4, 4, 6)).collect(),
        filter_server_list: Some(vec![]),
        topic_queue_mappings: Vec::new(),
    };
    crate::testing::registration("c", name, id, addr, body)
}

mod register;

#[cfg(test)]
mod tests;
