//! The controller's replicated state: per broker group (keyed by broker name, as Java keys it) the
//! brokers' ids, addresses and register check codes, and the group's master, SyncStateSet and epochs.
//! Only [`ControllerEvent`]s change it, applied in the order the log holds them, so every node that
//! applies the same log holds the same state; a snapshot is the state itself (`machine`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::FIRST_BROKER_CONTROLLER_ID;

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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicasInfo {
    replicas: BTreeMap<String, BrokerReplicaInfo>,
    sync_states: BTreeMap<String, SyncStateInfo>,
}

impl ReplicasInfo {
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

    /// Applies one event of the log. Events are decided against the state they are applied to, so one
    /// that no longer fits (its group cleaned meanwhile) changes nothing, as in Java.
    pub fn apply(&mut self, event: &ControllerEvent) {
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
                    tracing::error!(broker = %broker_name, "an election for a group the controller does not know");
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
            ControllerEvent::CleanBrokerData { broker_name, broker_ids } => self.clean(broker_name, broker_ids.as_ref()),
            ControllerEvent::UpdateBrokerAddress { broker_name, address, broker_id } => {
                if let Some(entry) = self.replicas.get_mut(broker_name).and_then(|r| r.brokers.get_mut(broker_id)) {
                    entry.address = address.clone();
                }
            }
        }
    }

    fn apply_broker_id(&mut self, cluster: &str, broker_name: &str, address: &str, id: i64, check_code: &str) {
        let entry = BrokerEntry { address: address.to_string(), check_code: check_code.to_string() };
        if self.group(broker_name).is_some() {
            if let Some(replicas) = self.replicas.get_mut(broker_name)
                && !replicas.brokers.contains_key(&id)
            {
                replicas.brokers.insert(id, entry);
                replicas.next_broker_id += 1;
            }
            return;
        }
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
            self.replicas.remove(broker_name);
            self.sync_states.remove(broker_name);
            return;
        };
        if self.group(broker_name).is_none() {
            return;
        }
        if let Some(replicas) = self.replicas.get_mut(broker_name) {
            replicas.brokers.retain(|id, _| !ids.contains(id));
            if replicas.brokers.is_empty() {
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
