//! Broker liveness (`brokerLiveTable`): last heartbeat, DataVersion, connection and HA address per
//! (cluster, broker address).
//!
//! It lives outside the route snapshot so that heartbeats (QUERY_DATA_VERSION, BROKER_HEARTBEAT) and no-op
//! re-registrations touch one map entry and publish nothing.

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

#[derive(Debug, Default)]
pub struct BrokerLiveTable {
    map: DashMap<BrokerAddrKey, BrokerLiveInfo>,
}

impl BrokerLiveTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        self.map.get(key).map(|e| e.value().clone())
    }

    pub fn insert(&self, key: BrokerAddrKey, info: BrokerLiveInfo) {
        self.map.insert(key, info);
    }

    pub fn remove(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        self.map.remove(key).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// `isBrokerTopicConfigChanged`: true when the broker is unknown or its stored DataVersion differs.
    pub fn is_data_version_changed(&self, key: &BrokerAddrKey, dv: Option<&DataVersion>) -> bool {
        match (self.map.get(key), dv) {
            (Some(e), Some(dv)) => e.data_version != *dv,
            _ => true,
        }
    }

    pub fn data_version(&self, key: &BrokerAddrKey) -> Option<DataVersion> {
        self.map.get(key).map(|e| e.data_version)
    }

    /// Refreshes the heartbeat of a known broker; unknown brokers are ignored. Returns whether it was known.
    pub fn touch(&self, key: &BrokerAddrKey, now: Instant) -> bool {
        match self.map.get_mut(key) {
            Some(mut e) => {
                e.last_update = now;
                true
            }
            None => false,
        }
    }

    pub fn clear(&self) {
        self.map.clear();
    }

    /// Every entry (for the route snapshot file).
    pub fn entries(&self) -> Vec<(BrokerAddrKey, BrokerLiveInfo)> {
        self.map.iter().map(|e| (e.key().clone(), e.value().clone())).collect()
    }

    /// Brokers whose heartbeat is older than their timeout.
    pub fn expired(&self, now: Instant) -> Vec<BrokerAddrKey> {
        self.map.iter().filter(|e| e.value().is_expired(now)).map(|e| e.key().clone()).collect()
    }

    /// Brokers whose last registration came over connection `conn`.
    pub fn registered_over(&self, conn: ConnId) -> Vec<BrokerAddrKey> {
        self.map.iter().filter(|e| e.value().conn_id == conn).map(|e| e.key().clone()).collect()
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

    pub fn get(&self, key: &BrokerAddrKey) -> Option<BrokerLiveInfo> {
        self.0.get(key)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// See [`BrokerLiveTable::is_data_version_changed`].
    pub fn is_data_version_changed(&self, key: &BrokerAddrKey, dv: Option<&DataVersion>) -> bool {
        self.0.is_data_version_changed(key, dv)
    }

    pub fn data_version(&self, key: &BrokerAddrKey) -> Option<DataVersion> {
        self.0.data_version(key)
    }

    /// Refreshes the heartbeat of a known broker; unknown brokers are ignored. Returns whether it was known.
    pub fn touch(&self, key: &BrokerAddrKey, now: Instant) -> bool {
        self.0.touch(key, now)
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
}
