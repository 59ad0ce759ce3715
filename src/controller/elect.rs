//! Choosing a new master (Java's DefaultElectPolicy): among the live replicas of the SyncStateSet, then,
//! with `enableElectUncleanMaster`, among all live replicas; the old master if it is still there, the one
//! an admin designated if it is live, else the best by the last heartbeat's epoch, then max offset, then
//! election priority (lower first).

use std::collections::BTreeSet;

/// What a broker's last heartbeat said (Java's BrokerLiveInfo fields the election reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerLiveInfo {
    pub broker_id: i64,
    /// The epoch of the last message it has.
    pub epoch: i32,
    pub max_offset: i64,
    /// Lower is preferred (`brokerElectionPriority`).
    pub election_priority: i32,
}

/// Which brokers are live, and what they last said: the heartbeat manager's view.
pub trait BrokerLiveness {
    fn is_alive(&self, cluster: &str, broker_name: &str, broker_id: i64) -> bool;
    fn live_info(&self, cluster: &str, broker_name: &str, broker_id: i64) -> Option<BrokerLiveInfo>;
}

/// Elects among `in_sync`, then among `all` when given (unclean election). `None`: no live candidate, or
/// the designated broker is not one.
pub fn elect(
    live: &dyn BrokerLiveness,
    (cluster, broker_name): (&str, &str),
    in_sync: &BTreeSet<i64>,
    all: Option<&BTreeSet<i64>>,
    old_master: Option<i64>,
    designated: Option<i64>,
) -> Option<i64> {
    let group = (cluster, broker_name);
    try_elect(live, group, in_sync, old_master, designated)
        .or_else(|| all.and_then(|all| try_elect(live, group, all, old_master, designated)))
}

fn try_elect(
    live: &dyn BrokerLiveness,
    (cluster, broker_name): (&str, &str),
    brokers: &BTreeSet<i64>,
    old_master: Option<i64>,
    designated: Option<i64>,
) -> Option<i64> {
    let alive: BTreeSet<i64> = brokers.iter().copied().filter(|id| live.is_alive(cluster, broker_name, *id)).collect();
    if alive.is_empty() {
        return None;
    }
    if let Some(old) = old_master
        && alive.contains(&old)
        && designated.is_none_or(|d| d == old)
    {
        return Some(old);
    }
    if let Some(designated) = designated {
        return alive.contains(&designated).then_some(designated);
    }
    // Java sorts live infos with a comparator that makes ties equal (the first id seen wins, its hash
    // set's order: the lowest for small ids) and compares offsets through an int cast that overflows when
    // they differ by 2^31 or more; here the order is total and exact.
    let best = alive.iter().filter_map(|id| live.live_info(cluster, broker_name, *id)).min_by_key(|info| {
        (std::cmp::Reverse(info.epoch), std::cmp::Reverse(info.max_offset), info.election_priority, info.broker_id)
    });
    best.map(|info| info.broker_id).or_else(|| alive.first().copied())
}
