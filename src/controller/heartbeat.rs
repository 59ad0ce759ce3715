//! Which brokers are alive, from their BROKER_HEARTBEAT (904) to this node (Java's
//! DefaultBrokerHeartbeatManager): each node keeps its own table, since brokers beat to every node. A
//! broker is alive until its own `heartbeatTimeoutMills` passes without a beat, or its connection closes.
//!
//! An identity belongs to the connection that first beat for it, as in Java: a beat for it from another
//! connection keeps it alive but does not take it, so closing that other connection removes nothing (it
//! could otherwise depose a live master by beating in its name and hanging up), and closing its own
//! removes it whoever else beats for it (so that a beat in a dead master's name cannot hold off the
//! election its closed connection starts).
//!
//! Bounds: at most [`MAX_BROKERS`] identities, of which at most [`MAX_UNKNOWN`] without an id the
//! controller gave, at most [`PER_CONNECTION`] owned by one connection and [`PER_ADDRESS`] by the
//! connections from one address, each naming at most
//! [`MAX_IDENTITY`] bytes, kept at most [`MAX_TIMEOUT`] without a beat whatever the beat
//! asked; a beat beyond them is refused (anyone can send one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::elect::{BrokerLiveInfo, BrokerLiveness};
use super::wire::Heartbeat;
use crate::error::RequestError;
use crate::error::shown;
use crate::limits::throttle::client_log;

pub const MAX_BROKERS: usize = 4096;
/// Of those, brokers whose id is not in the replicated state (anyone can beat in a made-up name; a real
/// broker applies for its id first): they cannot take the room of the brokers the controller gave ids to.
pub const MAX_UNKNOWN: usize = 1024;
/// Identities one connection may own: a Java broker beats for its own alone.
pub const PER_CONNECTION: usize = 16;
/// Identities the connections from one address may own together: a host runs a few brokers, each
/// beating for itself. Anyone can take an id (1013) for a made-up broker in a group and beat for it, so
/// [`MAX_UNKNOWN`] alone did not keep room: two addresses (128 connections of 16) filled the table, and a
/// real master whose connection was new was refused.
pub const PER_ADDRESS: usize = 64;
/// The longest `heartbeatTimeoutMills` taken (brokers send 10 s by default, Java's
/// controllerHeartBeatTimeoutMills); a longer one is cut to it.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// Cluster, broker name and address together.
pub const MAX_IDENTITY: usize = 1024;
/// Java's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, for a beat that gives no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// cluster, broker name, broker id.
pub type BrokerIdentity = (String, String, i64);

struct Live {
    /// The connection that first beat for it.
    conn: u64,
    /// That connection's peer address.
    from: IpAddr,
    /// Whether its id was in the replicated state when it first beat.
    known: bool,
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

    /// Records a beat on connection `conn` from address `from`; `known` is whether the broker has its id
    /// in the replicated state (it applied for it), which gives it room beyond [`MAX_UNKNOWN`].
    pub fn beat(&self, hb: &Heartbeat, (conn, from): (u64, IpAddr), known: bool) -> Result<(), RequestError> {
        if hb.cluster.len() + hb.broker_name.len() + hb.broker_addr.len() > MAX_IDENTITY {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "a heartbeat's cluster, broker name and address are over {MAX_IDENTITY} bytes"
            )));
        }
        let timeout = hb
            .timeout_millis
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms).min(MAX_TIMEOUT));
        let info = BrokerLiveInfo {
            broker_id: hb.broker_id,
            epoch: hb.epoch.unwrap_or(-1),
            max_offset: hb.max_offset.unwrap_or(-1),
            election_priority: hb.election_priority.unwrap_or(i32::MAX),
        };
        let mut table = self.table();
        let key = (hb.cluster.clone(), hb.broker_name.clone(), hb.broker_id);
        let now = Instant::now();
        if let Some(live) = table.get_mut(&key) {
            live.last = now;
            // What the beat says (timeout, priority, epoch, offset) counts from the owning connection alone:
            // from another, a timeout of 1 ms would depose a live master, an offset would win it elections.
            if live.conn != conn {
                return Ok(());
            }
            live.timeout = timeout;
            live.info.election_priority = info.election_priority;
            let newer = info.epoch > live.info.epoch
                || (info.epoch == live.info.epoch && info.max_offset > live.info.max_offset);
            if newer {
                live.info.epoch = info.epoch;
                live.info.max_offset = info.max_offset;
            }
            return Ok(());
        }
        if table.len() >= MAX_BROKERS {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "the controller already follows {MAX_BROKERS} brokers"
            )));
        }
        if !known && table.values().filter(|live| !live.known).count() >= MAX_UNKNOWN {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "the controller already follows {MAX_UNKNOWN} brokers without an id it gave"
            )));
        }
        if table.values().filter(|live| live.conn == conn).count() >= PER_CONNECTION {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "this connection already beats for {PER_CONNECTION} brokers"
            )));
        }
        if table.values().filter(|live| live.from == from).count() >= PER_ADDRESS {
            return Err(RequestError::ControllerInvalidRequest(format!(
                "connections from this address already beat for {PER_ADDRESS} brokers"
            )));
        }
        client_log!(info, cluster = %shown(&key.0, 128), broker = %shown(&key.1, 128), id = key.2, "controller: new broker heartbeat");
        table.insert(key, Live { conn, from, last: now, timeout, info, known });
        Ok(())
    }

    /// Brokers followed.
    pub fn followed(&self) -> usize {
        self.table().len()
    }

    /// Removes and returns the brokers whose timeout has passed (Java's scanNotActiveBroker).
    pub fn expire(&self) -> Vec<BrokerIdentity> {
        let now = Instant::now();
        let mut gone = Vec::new();
        self.table().retain(|key, live| {
            let alive = now.duration_since(live.last) <= live.timeout;
            if !alive {
                client_log!(warn, cluster = %shown(&key.0, 128), broker = %shown(&key.1, 128), id = key.2, "controller: broker heartbeat expired");
                gone.push(key.clone());
            }
            alive
        });
        gone
    }

    /// Removes and returns the brokers that connection `conn`, which closed, first beat for.
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

    /// Connection `conn`, from an address of its own.
    fn at(conn: u64) -> (u64, IpAddr) {
        (conn, IpAddr::from([10, (conn >> 16) as u8, (conn >> 8) as u8, conn as u8]))
    }

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
        let conns = (MAX_BROKERS / PER_CONNECTION) as u64;
        for i in 0..MAX_BROKERS {
            table.beat(&beat(&format!("b{i}"), 1), at(i as u64 % conns), true).expect("room");
        }
        assert!(table.beat(&beat("one-more", 1), at(conns), true).is_err());
        // A broker already followed still beats.
        table.beat(&beat("b0", 1), at(0), true).expect("known");
        let long = beat(&"x".repeat(MAX_IDENTITY), 1);
        assert!(table.beat(&long, at(conns), true).is_err());
        let gone = table.connection_closed(1);
        assert_eq!(gone.len(), PER_CONNECTION);
        assert!(!table.is_alive("c", "b1", 1));
        assert!(table.is_alive("c", "b0", 1));
        table.beat(&beat("one-more", 1), at(1), true).expect("room again");
    }

    #[test]
    fn one_connection_owns_at_most_its_share_and_none_beats_a_day() {
        let table = HeartbeatTable::default();
        for i in 0..PER_CONNECTION {
            table.beat(&beat(&format!("b{i}"), 1), at(7), true).expect("room");
        }
        assert!(table.beat(&beat("b-more", 1), at(7), true).is_err(), "over the connection's share");
        table.beat(&beat("b-more", 1), at(8), true).expect("another connection has room");
        let mut forever = beat("forever", 1);
        forever.timeout_millis = Some(86_400_000);
        table.beat(&forever, at(9), true).unwrap();
        assert_eq!(table.table().get(&("c".into(), "forever".into(), 1)).map(|l| l.timeout), Some(MAX_TIMEOUT));
    }

    /// The connections from one address own at most its share together; another address has room.
    #[test]
    fn one_address_owns_at_most_its_share() {
        let table = HeartbeatTable::default();
        let host = IpAddr::from([10, 9, 9, 9]);
        for i in 0..PER_ADDRESS {
            table.beat(&beat(&format!("b{i}"), 1), ((i / PER_CONNECTION) as u64, host), true).expect("room");
        }
        let next_conn = (PER_ADDRESS / PER_CONNECTION) as u64;
        assert!(table.beat(&beat("b-more", 1), (next_conn, host), true).is_err(), "over the address's share");
        table.beat(&beat("b-more", 1), at(next_conn + 1), true).expect("another address has room");
    }

    /// Made-up names fill only their share: a broker the controller gave an id to still finds room.
    #[test]
    fn made_up_names_leave_room_for_known_brokers() {
        let table = HeartbeatTable::default();
        for i in 0..MAX_UNKNOWN {
            table.beat(&beat(&format!("made-up-{i}"), 1), at((i / PER_CONNECTION) as u64), false).expect("room");
        }
        assert!(table.beat(&beat("one-more", 1), at(9999), false).is_err());
        table.beat(&beat("real", 1), at(9999), true).expect("a known broker has room");
    }

    /// The identity stays with the connection that first beat for it: another that beats in its name and
    /// closes removes nothing; the first one's close removes it, whoever else beats for it.
    #[test]
    fn a_beat_in_anothers_name_takes_nothing() {
        let table = HeartbeatTable::default();
        table.beat(&beat("b", 1), at(1), true).unwrap();
        table.beat(&beat("b", 1), at(2), true).unwrap();
        assert!(table.connection_closed(2).is_empty(), "the impostor's close removes nothing");
        assert!(table.is_alive("c", "b", 1));
        let mut deposing = beat("b", 1);
        deposing.timeout_millis = Some(1);
        deposing.max_offset = Some(i64::MAX);
        table.beat(&deposing, at(3), true).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(table.is_alive("c", "b", 1), "another connection's timeout does not count");
        assert_eq!(table.live_info("c", "b", 1).map(|i| i.max_offset), Some(100), "nor its offset");
        assert_eq!(table.connection_closed(1), vec![("c".to_string(), "b".to_string(), 1)], "its own close removes it");
        assert!(!table.is_alive("c", "b", 1));
    }

    #[test]
    fn the_newest_epoch_and_offset_are_kept() {
        let table = HeartbeatTable::default();
        table.beat(&beat("b", 1), at(0), true).unwrap();
        let mut older = beat("b", 1);
        older.max_offset = Some(50);
        table.beat(&older, at(0), true).unwrap();
        assert_eq!(table.live_info("c", "b", 1).map(|i| (i.epoch, i.max_offset)), Some((1, 100)));
        let mut newer = beat("b", 1);
        newer.epoch = Some(2);
        newer.max_offset = Some(10);
        table.beat(&newer, at(0), true).unwrap();
        assert_eq!(table.live_info("c", "b", 1).map(|i| (i.epoch, i.max_offset)), Some((2, 10)));
    }
}
