//! Broker liveness (`brokerLiveTable`): last heartbeat, DataVersion, connection and HA address per
//! (cluster, broker address).
//!
//! It lives outside the route snapshot so that heartbeats (QUERY_DATA_VERSION, BROKER_HEARTBEAT) and no-op
//! re-registrations touch one map entry and publish nothing.
//!
//! Who is live changes only in the route writer, and only at the end of a batch: the batch's builder
//! records its changes in a [`LiveDraft`] (reading through it sees them), and the writer commits them right
//! after it publishes the batch's snapshot, before it answers anyone. A batch that panics leaves the table
//! as it was. Between the publish and the commit (no I/O, no allocation beyond the table's) a reader can
//! see the new routes with the old liveness; every such read is harmless: a heartbeat of a broker not yet
//! entered is ignored (its registration enters it with the same time a moment later), QUERY_DATA_VERSION
//! answers "changed" (the broker re-registers, as it would after any doubt), and an expiry found in the old
//! entries is checked again by the writer when it applies it. Everything else gets a [`LiveView`], which can
//! read and refresh a known broker's heartbeat and nothing more.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

use crate::protocol::DataVersion;

/// `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`: a broker silent this long is removed.
pub const DEFAULT_BROKER_TIMEOUT: Duration = Duration::from_secs(120);

/// Identifies one TCP connection to the server.
pub type ConnId = u64;

/// `BrokerAddrInfo`: one address is alive per cluster, so the same address may be alive in two clusters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrKey {
    pub cluster: Arc<str>,
    pub addr: Arc<str>,
}

impl BrokerAddrKey {
    pub fn new(cluster: &str, addr: &str) -> Self {
        BrokerAddrKey { cluster: cluster.into(), addr: addr.into() }
    }
}

#[derive(Debug, Clone)]
pub struct BrokerLiveInfo {
    pub last_update: Instant,
    pub timeout: Duration,
    pub data_version: DataVersion,
    pub conn_id: ConnId,
    pub ha_server_addr: Arc<str>,
}

impl BrokerLiveInfo {
    pub fn is_expired(&self, now: Instant) -> bool {
        self.last_update + self.timeout < now
    }
}

/// The table itself: changed by the route writer alone (its mutators are private to `route`).
#[derive(Debug, Default)]
pub(crate) struct BrokerLiveTable {
    map: DashMap<BrokerAddrKey, BrokerLiveInfo>,
    /// Entries put or removed so far (a heartbeat's touch is not a change): what the versions told to a
    /// peer were encoded at.
    changes: std::sync::atomic::AtomicU64,
    /// The last versions told to a peer (`protocol::broker_versions`), and at what `changes`.
    told: arc_swap::ArcSwapOption<(u64, Arc<str>)>,
}

/// The entries (for a table driven directly, `route::direct`); the versions told are encoded anew.
impl Clone for BrokerLiveTable {
    fn clone(&self) -> Self {
        BrokerLiveTable { map: self.map.clone(), ..Default::default() }
    }
}

impl BrokerLiveTable {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn get(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        self.map.get(key).map(|e| e.value().clone())
    }

    pub(super) fn insert(&self, key: BrokerAddrKey, info: BrokerLiveInfo) {
        self.map.insert(key, info);
        self.changes.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    pub(super) fn remove(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        let removed = self.map.remove(key).map(|(_, v)| v);
        self.changes.fetch_add(1, std::sync::atomic::Ordering::Release);
        removed
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// `isBrokerTopicConfigChanged`: true when the broker is unknown or its stored DataVersion differs.
    pub(crate) fn is_data_version_changed(&self, key: &BrokerAddrKey, dv: Option<&DataVersion>) -> bool {
        data_version_changed(self.data_version(key), dv)
    }

    pub(crate) fn data_version(&self, key: &BrokerAddrKey) -> Option<DataVersion> {
        self.map.get(key).map(|e| e.data_version)
    }

    /// Whether the broker is known only from the route file or a peer's copy: on no connection yet.
    pub(crate) fn is_restored(&self, key: &BrokerAddrKey) -> bool {
        self.map.get(key).is_some_and(|e| e.conn_id == 0)
    }

    /// Refreshes the heartbeat of a known broker; unknown brokers are ignored. Returns whether it was known.
    pub(crate) fn touch(&self, key: &BrokerAddrKey, now: Instant) -> bool {
        match self.map.get_mut(key) {
            Some(mut e) => {
                e.last_update = now;
                true
            }
            None => false,
        }
    }

    /// Every entry (for the route snapshot file).
    pub(crate) fn entries(&self) -> Vec<(BrokerAddrKey, BrokerLiveInfo)> {
        self.map.iter().map(|e| (e.key().clone(), e.value().clone())).collect()
    }

    /// Brokers whose heartbeat is older than their timeout.
    pub(crate) fn expired(&self, now: Instant) -> Vec<BrokerAddrKey> {
        self.map.iter().filter(|e| e.value().is_expired(now)).map(|e| e.key().clone()).collect()
    }

    /// Brokers whose last registration came over connection `conn`.
    fn registered_over(&self, conn: ConnId) -> Vec<BrokerAddrKey> {
        self.map.iter().filter(|e| e.value().conn_id == conn).map(|e| e.key().clone()).collect()
    }
}

/// The rule of `isBrokerTopicConfigChanged`, for the table and a batch's draft alike: changed unless both the
/// stored and the reported DataVersion are known and equal.
fn data_version_changed(stored: Option<DataVersion>, reported: Option<&DataVersion>) -> bool {
    !matches!((stored, reported), (Some(stored), Some(reported)) if stored == *reported)
}

/// One batch's changes to the live table, seen by the batch as if applied, committed by the writer after
/// it publishes the batch's snapshot (module doc).
pub(super) struct LiveDraft<'a> {
    table: &'a BrokerLiveTable,
    /// The entry a key has after this batch: `None` for removed.
    changes: HashMap<BrokerAddrKey, Option<BrokerLiveInfo>>,
}

/// What a batch changed in the live table, to be committed once its snapshot is published.
#[must_use = "a batch's liveness changes are lost unless committed"]
pub(super) struct LiveChanges(HashMap<BrokerAddrKey, Option<BrokerLiveInfo>>);

impl<'a> LiveDraft<'a> {
    pub(super) fn new(table: &'a BrokerLiveTable) -> Self {
        LiveDraft { table, changes: HashMap::new() }
    }

    pub(super) fn get(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        match self.changes.get(key) {
            Some(change) => change.clone(),
            None => self.table.get(key),
        }
    }

    pub(super) fn insert(&mut self, key: BrokerAddrKey, info: BrokerLiveInfo) {
        self.changes.insert(key, Some(info));
    }

    pub(super) fn remove(&mut self, key: &BrokerAddrKey) {
        if self.get(key).is_some() {
            self.changes.insert(key.clone(), None);
        }
    }

    /// See [`BrokerLiveTable::is_data_version_changed`].
    pub(super) fn is_data_version_changed(&self, key: &BrokerAddrKey, dv: Option<&DataVersion>) -> bool {
        data_version_changed(self.get(key).map(|e| e.data_version), dv)
    }

    /// Brokers whose last registration came over connection `conn`, this batch's included.
    pub(super) fn registered_over(&self, conn: ConnId) -> Vec<BrokerAddrKey> {
        let mut keys: Vec<BrokerAddrKey> =
            self.table.registered_over(conn).into_iter().filter(|k| !self.changes.contains_key(k)).collect();
        keys.extend(
            self.changes.iter().filter(|(_, v)| v.as_ref().is_some_and(|i| i.conn_id == conn)).map(|(k, _)| k.clone()),
        );
        keys
    }

    /// The table the changes are for.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn table(&self) -> &'a BrokerLiveTable {
        self.table
    }

    pub(super) fn take_changes(&mut self) -> LiveChanges {
        LiveChanges(std::mem::take(&mut self.changes))
    }
}

impl LiveChanges {
    pub(super) fn commit(self, table: &BrokerLiveTable) {
        for (key, change) in self.0 {
            match change {
                Some(info) => table.insert(key, info),
                None => {
                    table.remove(&key);
                }
            }
        }
    }
}

/// What everything but the route writer may do with the live table: read it, and refresh a known broker's
/// heartbeat in place (QUERY_DATA_VERSION, BROKER_HEARTBEAT). Which brokers are live, their DataVersions
/// and connections change only in the writer; this view has no way to.
#[derive(Debug, Clone)]
pub struct LiveView(Arc<BrokerLiveTable>);

impl LiveView {
    pub(crate) fn new(table: Arc<BrokerLiveTable>) -> Self {
        LiveView(table)
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn get(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        self.0.get(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// See [`BrokerLiveTable::is_data_version_changed`].
    pub fn is_data_version_changed(&self, key: &BrokerAddrKey, dv: Option<&DataVersion>) -> bool {
        self.0.is_data_version_changed(key, dv)
    }

    pub fn data_version(&self, key: &BrokerAddrKey) -> Option<DataVersion> {
        self.0.data_version(key)
    }

    /// See [`BrokerLiveTable::is_restored`].
    pub fn is_restored(&self, key: &BrokerAddrKey) -> bool {
        self.0.is_restored(key)
    }

    /// Refreshes the heartbeat of a known broker; unknown brokers are ignored. Returns whether it was known.
    pub fn touch(&self, key: &BrokerAddrKey, now: Instant) -> bool {
        self.0.touch(key, now)
    }

    /// Every live broker's DataVersion as a peer NameServer that compares is told them
    /// (`broker_versions`): encoded once for each state of the table, however many ask.
    pub fn data_versions_told(&self) -> Arc<str> {
        use std::sync::atomic::Ordering;
        let t = &self.0;
        let at = t.changes.load(Ordering::Acquire);
        if let Some(told) = t.told.load().as_ref().filter(|told| told.0 == at) {
            return told.1.clone();
        }
        let versions = t.map.iter().map(|e| crate::protocol::broker_versions::BrokerVersion {
            cluster: e.key().cluster.to_string(),
            addr: e.key().addr.to_string(),
            version: e.value().data_version,
        });
        let text: Arc<str> = crate::protocol::broker_versions::encode(versions).into();
        t.told.store(Some(Arc::new((at, text.clone()))));
        text
    }

    /// The heartbeat timeout of the broker at `key`, if it last registered over connection `conn`.
    pub fn timeout_if_registered_over(&self, key: &BrokerAddrKey, conn: ConnId) -> Option<Duration> {
        self.0.get(key).filter(|live| live.conn_id == conn).map(|live| live.timeout)
    }

    /// Brokers whose heartbeat is older than their timeout (the expiry scan asks the writer to remove them).
    pub fn expired(&self, now: Instant) -> Vec<BrokerAddrKey> {
        self.0.expired(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(now: Instant, timeout: Duration) -> BrokerLiveInfo {
        BrokerLiveInfo {
            last_update: now,
            timeout,
            data_version: DataVersion { counter: 1, ..Default::default() },
            conn_id: 7,
            ha_server_addr: "h".into(),
        }
    }

    #[test]
    fn expiry_is_strictly_after_timeout() {
        let t = BrokerLiveTable::new();
        let now = Instant::now();
        let key = BrokerAddrKey::new("c", "a:1");
        t.insert(key.clone(), info(now, DEFAULT_BROKER_TIMEOUT));
        assert!(t.expired(now + DEFAULT_BROKER_TIMEOUT).is_empty());
        assert_eq!(t.expired(now + DEFAULT_BROKER_TIMEOUT + Duration::from_millis(1)), vec![key.clone()]);
        assert!(t.touch(&key, now + DEFAULT_BROKER_TIMEOUT));
        assert!(t.expired(now + DEFAULT_BROKER_TIMEOUT + Duration::from_millis(1)).is_empty());
        assert!(!t.touch(&BrokerAddrKey::new("other", "a:1"), now));
    }

    /// Mirrors RouteInfoManagerNewTest#isBrokerTopicConfigChanged.
    #[test]
    fn data_version_change_detection() {
        let t = BrokerLiveTable::new();
        let key = BrokerAddrKey::new("c", "a:1");
        let dv = DataVersion { counter: 1, ..Default::default() };
        assert!(t.is_data_version_changed(&key, Some(&dv)));
        t.insert(key.clone(), info(Instant::now(), DEFAULT_BROKER_TIMEOUT));
        assert!(!t.is_data_version_changed(&key, Some(&dv)));
        assert!(t.is_data_version_changed(&key, Some(&DataVersion { timestamp: 9, ..dv })));
        assert!(t.is_data_version_changed(&key, Some(&DataVersion { counter: 2, ..dv })));
        assert!(t.is_data_version_changed(&key, None));
        assert_eq!(t.registered_over(7), vec![key]);
    }

    /// The versions told to peers are encoded once for each state of the table: a heartbeat changes
    /// nothing, a registration or a removal does.
    #[test]
    fn versions_told_are_encoded_once_a_change() {
        let table = Arc::new(BrokerLiveTable::new());
        let view = LiveView::new(table.clone());
        let key = BrokerAddrKey::new("c", "a:1");
        table.insert(key.clone(), info(Instant::now(), DEFAULT_BROKER_TIMEOUT));
        let first = view.data_versions_told();
        assert_eq!(&*first, r#"[["c","a:1",0,0,1]]"#);
        view.touch(&key, Instant::now());
        assert!(Arc::ptr_eq(&first, &view.data_versions_told()), "encoded once");
        table.remove(&key);
        assert_eq!(&*view.data_versions_told(), "[]");
    }
}
