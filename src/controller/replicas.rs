//! The controller's replicated state: per broker group (keyed by broker name, as Java keys it) the
//! brokers' ids, addresses and register check codes, and the group's master, SyncStateSet and epochs.
//! Only [`ControllerEvent`]s change it, applied in the order the log holds them, so every node that
//! applies the same log holds the same state; a snapshot is the state itself (`machine`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::FIRST_BROKER_CONTROLLER_ID;
use crate::limits::throttle::client_log;

/// A change decided by the leader and replicated before it is applied (Java's EventMessage kinds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerEvent {
    /// A new SyncStateSet for the group; its epoch goes up by one.
    AlterSyncStateSet { broker_name: String, sync_state_set: BTreeSet<i64> },
    /// A broker took an id (the group is created with its first broker).
    ApplyBrokerId { cluster: String, broker_name: String, address: String, broker_id: i64, check_code: String },
    /// `Some(id)`: a new master, alone in the SyncStateSet. `None`: the master is gone and no replica could
    /// take over; the SyncStateSet is kept for when one comes back.
    ElectMaster { broker_name: String, new_master: Option<i64> },
    /// The group's data removed: the ids named, or all of it when `None`.
    CleanBrokerData { broker_name: String, broker_ids: Option<BTreeSet<i64>> },
    /// A known broker registered from a new address.
    UpdateBrokerAddress { broker_name: String, address: String, broker_id: i64 },
}

/// One broker of a group, as the controller knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEntry {
    pub address: String,
    /// `address;timestamp` as the broker made it when it applied for its id: a broker that restarts with
    /// the same code gets its id back.
    pub check_code: String,
}

/// Java's BrokerReplicaInfo: the group's brokers by id, and the id the next broker is offered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerReplicaInfo {
    pub cluster: String,
    pub brokers: BTreeMap<i64, BrokerEntry>,
    pub next_broker_id: i64,
}

impl BrokerReplicaInfo {
    pub fn address(&self, id: Option<i64>) -> Option<&str> {
        id.and_then(|id| self.brokers.get(&id)).map(|b| b.address.as_str())
    }
}

/// Java's SyncStateInfo: the master, the replicas in sync with it, and the two epochs that fence stale
/// requests (each goes up by one with every change it counts).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStateInfo {
    pub cluster: String,
    pub master: Option<i64>,
    pub master_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    pub sync_state_set_epoch: i32,
}

impl SyncStateInfo {
    /// No master was ever elected for the group.
    pub fn first_election(&self) -> bool {
        self.master_epoch == 0
    }
}

/// The whole replicated state. Java keeps the two tables apart, and so does this: cleaning some ids can
/// empty one and not the other, and a group counts as known only while both have it.
///
/// It also counts what it holds in bytes as its snapshot's JSON writes them ([`ReplicasInfo::bytes`], not
/// itself written: counted again when a snapshot is read), which decisions keep under
/// [`MAX_STATE_BYTES`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReplicasInfo {
    replicas: BTreeMap<String, BrokerReplicaInfo>,
    sync_states: BTreeMap<String, SyncStateInfo>,
    #[serde(skip)]
    bytes: usize,
}

impl PartialEq for ReplicasInfo {
    fn eq(&self, other: &Self) -> bool {
        self.replicas == other.replicas && self.sync_states == other.sync_states
    }
}

impl Eq for ReplicasInfo {}

/// What the replicated state may hold, whoever asks (SECURITY.md): groups, brokers in a group, the bytes
/// of each name, address and check code a broker gives, and in all, in bytes of its snapshot's JSON.
pub const MAX_GROUPS: usize = 10_000;
pub const MAX_BROKERS_PER_GROUP: usize = 64;
pub const MAX_TEXT: usize = 512;
pub const MAX_STATE_BYTES: usize = 64 << 20;

/// The bytes `text` takes as a JSON string (quotes and escapes included): a control character is six.
pub fn json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// What one broker entry adds (its id, address and check code, and the JSON around them, and its id once
/// more in the SyncStateSet).
pub fn entry_bytes(address: &str, check_code: &str) -> usize {
    96 + json_len(address) + json_len(check_code)
}

/// What a group's brokers and the group itself count.
fn replicas_bytes(broker_name: &str, replicas: &BrokerReplicaInfo) -> usize {
    group_bytes(&replicas.cluster, broker_name)
        + replicas.brokers.values().map(|b| entry_bytes(&b.address, &b.check_code)).sum::<usize>()
}

/// What a new group adds besides its brokers (its name twice, its cluster twice, both halves' fields).
pub fn group_bytes(cluster: &str, broker_name: &str) -> usize {
    256 + 2 * (json_len(cluster) + json_len(broker_name))
}

impl ReplicasInfo {
    /// What it holds, in bytes of JSON (see [`MAX_STATE_BYTES`]); the bound itself reads the field.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counts [`Self::bytes`] again, for a state read from a snapshot.
    pub fn recount(&mut self) {
        self.bytes = self.replicas.iter().map(|(name, replicas)| replicas_bytes(name, replicas)).sum();
    }

    /// Whether a state read from elsewhere (a snapshot a peer sent), recounted, is within the bounds its
    /// decisions keep.
    pub fn within_bounds(&self) -> bool {
        self.bytes <= MAX_STATE_BYTES
            && self.groups() <= MAX_GROUPS
            && self.replicas.values().all(|r| r.brokers.len() <= MAX_BROKERS_PER_GROUP)
    }

    /// How many groups it holds.
    pub fn groups(&self) -> usize {
        self.replicas.len()
    }

    /// The group's two halves, when both are there (Java's `isContainsBroker`).
    pub fn group(&self, broker_name: &str) -> Option<(&BrokerReplicaInfo, &SyncStateInfo)> {
        Some((self.replicas.get(broker_name)?, self.sync_states.get(broker_name)?))
    }

    /// The group's brokers, even when its sync state is gone (what the next id is counted from).
    pub fn replicas(&self, broker_name: &str) -> Option<&BrokerReplicaInfo> {
        self.replicas.get(broker_name)
    }

    /// The group's sync state, even when its brokers are gone.
    pub fn sync_state(&self, broker_name: &str) -> Option<&SyncStateInfo> {
        self.sync_states.get(broker_name)
    }

    pub fn sync_states(&self) -> impl Iterator<Item = (&String, &SyncStateInfo)> {
        self.sync_states.iter()
    }

    /// Which bound `event` would take the state past, applied now; `None` when it fits (or changes
    /// nothing). The leader's decisions refuse such a request before it is replicated, and applying asks
    /// again: an entry no decision made (appended by whoever speaks Raft from a peer's address) cannot
    /// take the state past its bounds either, and every node skips the same entries, so they stay equal.
    pub fn past_bounds(&self, event: &ControllerEvent) -> Option<&'static str> {
        match event {
            ControllerEvent::ApplyBrokerId { cluster, broker_name, address, broker_id, check_code } => {
                if [cluster, broker_name, address, check_code].iter().any(|t| t.len() > MAX_TEXT) {
                    return Some("a cluster, broker name, address or check code over 512 bytes");
                }
                let added = entry_bytes(address, check_code);
                if let Some((replicas, _)) = self.group(broker_name) {
                    return match replicas.brokers.contains_key(broker_id) {
                        true => None,
                        false if replicas.brokers.len() >= MAX_BROKERS_PER_GROUP => Some("a new broker in the group"),
                        false if self.bytes + added > MAX_STATE_BYTES => Some("a new broker past the state's 64 MiB"),
                        false => None,
                    };
                }
                // A new group, or one that replaces the brokers a clean left without their sync state.
                let replaced = self.replicas.get(broker_name).map(|old| replicas_bytes(broker_name, old));
                if replaced.is_none() && self.groups() >= MAX_GROUPS {
                    return Some("a new group");
                }
                let after =
                    self.bytes.saturating_sub(replaced.unwrap_or(0)) + group_bytes(cluster, broker_name) + added;
                (after > MAX_STATE_BYTES).then_some("a new group past the state's 64 MiB")
            }
            ControllerEvent::UpdateBrokerAddress { broker_name, address, broker_id } => {
                if address.len() > MAX_TEXT {
                    return Some("an address over 512 bytes");
                }
                let known = self.replicas.get(broker_name)?.brokers.get(broker_id)?;
                let grown = json_len(address).saturating_sub(json_len(&known.address));
                (self.bytes + grown > MAX_STATE_BYTES).then_some("a new address past the state's 64 MiB")
            }
            // Counted in the bytes as a copy of the group's ids (`entry_bytes`), which a decision's set is.
            ControllerEvent::AlterSyncStateSet { sync_state_set, .. } => {
                (sync_state_set.len() > MAX_BROKERS_PER_GROUP).then_some("a SyncStateSet of more than 64 brokers")
            }
            ControllerEvent::ElectMaster { .. } | ControllerEvent::CleanBrokerData { .. } => None,
        }
    }

    /// Applies one event of the log. Events are decided against the state they are applied to, so one
    /// that no longer fits (its group cleaned meanwhile) changes nothing, as in Java; nor does one past
    /// the state's bounds ([`Self::past_bounds`]).
    pub fn apply(&mut self, event: &ControllerEvent) {
        if let Some(what) = self.past_bounds(event) {
            client_log!(error, bound = what, "controller: an entry of the log past the state's bounds, not applied");
            return;
        }
        match event {
            ControllerEvent::AlterSyncStateSet { broker_name, sync_state_set } => {
                if self.group(broker_name).is_some()
                    && let Some(sync) = self.sync_states.get_mut(broker_name)
                {
                    sync.sync_state_set = sync_state_set.clone();
                    sync.sync_state_set_epoch += 1;
                }
            }
            ControllerEvent::ApplyBrokerId { cluster, broker_name, address, broker_id, check_code } => {
                self.apply_broker_id(cluster, broker_name, address, *broker_id, check_code);
            }
            ControllerEvent::ElectMaster { broker_name, new_master } => {
                if self.group(broker_name).is_none() {
                    tracing::error!(broker = %crate::error::shown(broker_name, 128), "an election for a group the controller does not know");
                    return;
                }
                if let Some(sync) = self.sync_states.get_mut(broker_name) {
                    sync.master = *new_master;
                    sync.master_epoch += 1;
                    if let Some(master) = new_master {
                        sync.sync_state_set = BTreeSet::from([*master]);
                        sync.sync_state_set_epoch += 1;
                    }
                }
            }
            ControllerEvent::CleanBrokerData { broker_name, broker_ids } => {
                self.clean(broker_name, broker_ids.as_ref())
            }
            ControllerEvent::UpdateBrokerAddress { broker_name, address, broker_id } => {
                if let Some(entry) = self.replicas.get_mut(broker_name).and_then(|r| r.brokers.get_mut(broker_id)) {
                    self.bytes -= entry_bytes(&entry.address, &entry.check_code);
                    entry.address = address.clone();
                    self.bytes += entry_bytes(&entry.address, &entry.check_code);
                }
            }
        }
    }

    fn apply_broker_id(&mut self, cluster: &str, broker_name: &str, address: &str, id: i64, check_code: &str) {
        let entry = BrokerEntry { address: address.to_string(), check_code: check_code.to_string() };
        let added = entry_bytes(address, check_code);
        if self.group(broker_name).is_some() {
            if let Some(replicas) = self.replicas.get_mut(broker_name)
                && !replicas.brokers.contains_key(&id)
            {
                replicas.brokers.insert(id, entry);
                replicas.next_broker_id += 1;
                self.bytes += added;
            }
            return;
        }
        // A group whose sync state was cleaned apart from its brokers is replaced whole.
        if let Some(old) = self.replicas.remove(broker_name) {
            self.bytes -= replicas_bytes(broker_name, &old);
        }
        self.bytes += group_bytes(cluster, broker_name) + added;
        // The group's first broker: both halves start afresh.
        let brokers = BTreeMap::from([(id, entry)]);
        let replicas =
            BrokerReplicaInfo { cluster: cluster.to_string(), brokers, next_broker_id: FIRST_BROKER_CONTROLLER_ID + 1 };
        self.replicas.insert(broker_name.to_string(), replicas);
        let sync = SyncStateInfo { cluster: cluster.to_string(), ..SyncStateInfo::default() };
        self.sync_states.insert(broker_name.to_string(), sync);
    }

    fn clean(&mut self, broker_name: &str, ids: Option<&BTreeSet<i64>>) {
        let Some(ids) = ids.filter(|ids| !ids.is_empty()) else {
            if let Some(old) = self.replicas.remove(broker_name) {
                self.bytes -= replicas_bytes(broker_name, &old);
            }
            self.sync_states.remove(broker_name);
            return;
        };
        if self.group(broker_name).is_none() {
            return;
        }
        if let Some(replicas) = self.replicas.get_mut(broker_name) {
            let before = replicas_bytes(broker_name, replicas);
            replicas.brokers.retain(|id, _| !ids.contains(id));
            self.bytes -= before - replicas_bytes(broker_name, replicas);
            if replicas.brokers.is_empty() {
                self.bytes -= group_bytes(&replicas.cluster, broker_name);
                self.replicas.remove(broker_name);
            }
        }
        if let Some(sync) = self.sync_states.get_mut(broker_name) {
            sync.sync_state_set.retain(|id| !ids.contains(id));
            if sync.sync_state_set.is_empty() {
                self.sync_states.remove(broker_name);
            }
        }
    }
}
