//! Which brokers are alive, from their BROKER_HEARTBEAT (904) to this node (Java's
//! DefaultBrokerHeartbeatManager): each node keeps its own table, since brokers beat to every node. A
//! broker is alive until its own `heartbeatTimeoutMills` passes without a beat, or its connection closes.
//!
//! Bounds: at most [`MAX_BROKERS`] identities, each naming at most [`MAX_IDENTITY`] bytes; a beat beyond
//! them is refused (anyone can send one, and each is kept until its connection closes).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::elect::{BrokerLiveInfo, BrokerLiveness};
use super::wire::Heartbeat;
use crate::error::RequestError;

pub const MAX_BROKERS: usize = 4096;
/// Cluster, broker name and address together.
pub const MAX_IDENTITY: usize = 1024;
/// Java's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, for a beat that gives no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// cluster, broker name, broker id.
pub type BrokerIdentity = (String, String, i64);

struct Live {
    conn: u64,
    last: Instant,
    timeout: Duration,
    info: BrokerLiveInfo,
}

#[derive(Default)]
pub struct HeartbeatTable {
    brokers: Mutex<HashMap<BrokerIdentity, Live>>,
}

impl HeartbeatTable {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<BrokerIdentity, Live>> {
        self.brokers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a beat on connection `conn`; the newest epoch and offset are kept, as Java keeps them.
    pub fn beat(&self, hb: &Heartbeat, conn: u64) -> Result<(), RequestError> {
        if hb.cluster.len() + hb.broker_name.len() + hb.broker_addr.len() > MAX_IDENTITY {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "a heartbeat's cluster, broker name and address are over {MAX_IDENTITY} bytes"
            )));
        }
        let timeout =
            hb.timeout_millis.and_then(|ms| u64::try_from(ms).ok()).map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        let info = BrokerLiveInfo {
            broker_id: hb.broker_id,
            epoch: hb.epoch.unwrap_or(-1),
            max_offset: hb.max_offset.unwrap_or(-1),
            election_priority: hb.election_priority.unwrap_or(i32::MAX),
        };
        let mut table = self.table();
        let key = (hb.cluster.clone(), hb.broker_name.clone(), hb.broker_id);
        let now = Instant::now();
        let full = table.len() >= MAX_BROKERS;
        match table.get_mut(&key) {
            Some(live) => {
                live.last = now;
                live.timeout = timeout;
                live.conn = conn;
                live.info.election_priority = info.election_priority;
                let newer = info.epoch > live.info.epoch
                    || (info.epoch == live.info.epoch && info.max_offset > live.info.max_offset);
                if newer {
                    live.info.epoch = info.epoch;
                    live.info.max_offset = info.max_offset;
                }
            }
            None if full => {
                return Err(RequestError::ControllerInvalidRequest(format!(
                    "the controller already follows {MAX_BROKERS} brokers"
                )));
            }
            None => {
                tracing::info!(cluster = %key.0, broker = %key.1, id = key.2, "controller: new broker heartbeat");
                table.insert(key, Live { conn, last: now, timeout, info });
            }
        }
        Ok(())
    }

    /// Removes and returns the brokers whose timeout has passed (Java's scanNotActiveBroker).
    pub fn expire(&self) -> Vec<BrokerIdentity> {
        let now = Instant::now();
        let mut gone = Vec::new();
        self.table().retain(|key, live| {
            let alive = now.duration_since(live.last) <= live.timeout;
            if !alive {
                tracing::warn!(cluster = %key.0, broker = %key.1, id = key.2, "controller: broker heartbeat expired");
                gone.push(key.clone());
            }
            alive
        });
        gone
    }

    /// Removes and returns the brokers that beat on connection `conn`, which closed.
    pub fn connection_closed(&self, conn: u64) -> Vec<BrokerIdentity> {
        let mut gone = Vec::new();
        self.table().retain(|key, live| {
            let keep = live.conn != conn;
            if !keep {
                gone.push(key.clone());
            }
            keep
        });
        gone
    }

}

impl BrokerLiveness for HeartbeatTable {
    fn is_alive(&self, cluster: &str, broker_name: &str, broker_id: i64) -> bool {
        let key = (cluster.to_string(), broker_name.to_string(), broker_id);
        self.table().get(&key).is_some_and(|live| live.last.elapsed() <= live.timeout)
    }

    fn live_info(&self, cluster: &str, broker_name: &str, broker_id: i64) -> Option<BrokerLiveInfo> {
        let key = (cluster.to_string(), broker_name.to_string(), broker_id);
        self.table().get(&key).map(|live| live.info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(name: &str, id: i64) -> Heartbeat {
        Heartbeat {
            cluster: "c".into(),
            broker_name: name.into(),
            broker_addr: "127.0.0.1:10911".into(),
            broker_id: id,
            timeout_millis: Some(60_000),
            epoch: Some(1),
            max_offset: Some(100),
            confirm_offset: None,
            election_priority: None,
        }
    }

    #[test]
    fn at_most_max_brokers_are_followed_and_a_closed_connection_forgets_its_own() {
        let table = HeartbeatTable::default();
        for i in 0..MAX_BROKERS {
            table.beat(&beat(&format!("b{i}"), 1), (i % 2) as u64).expect("room");
        }
        assert!(table.beat(&beat("one-more", 1), 0).is_err());
        // A broker already followed still beats.
        table.beat(&beat("b0", 1), 0).expect("known");
        let long = beat(&"x".repeat(MAX_IDENTITY), 1);
        assert!(table.beat(&long, 0).is_err());
        let gone = table.connection_closed(1);
        assert_eq!(gone.len(), MAX_BROKERS / 2);
        assert!(!table.is_alive("c", "b1", 1));
        assert!(table.is_alive("c", "b0", 1));
        table.beat(&beat("one-more", 1), 0).expect("room again");
    }

    #[test]
    fn the_newest_epoch_and_offset_are_kept() {
        let table = HeartbeatTable::default();
        table.beat(&beat("b", 1), 0).unwrap();
        let mut older = beat("b", 1);
        older.max_offset = Some(50);
        table.beat(&older, 0).unwrap();
        assert_eq!(table.live_info("c", "b", 1).map(|i| (i.epoch, i.max_offset)), Some((1, 100)));
        let mut newer = beat("b", 1);
        newer.epoch = Some(2);
        newer.max_offset = Some(10);
        table.beat(&newer, 0).unwrap();
        assert_eq!(table.live_info("c", "b", 1).map(|i| (i.epoch, i.max_offset)), Some((2, 10)));
    }
}
