//! Each controller request decided against the replicated state, as Java's ReplicasInfoManager decides
//! it: the answer (code, remark, header, body) and the events to replicate before it is sent. Deciding
//! changes nothing; only applying the events does (`replicas`), once the log has them.

use std::collections::BTreeSet;

use super::FIRST_BROKER_CONTROLLER_ID;
use super::elect::{self, BrokerLiveness};
use super::replicas::{ControllerEvent, ReplicasInfo};
use crate::protocol::codes::{controller as code, response};

/// A request that would take the state past its bounds: CONTROLLER_INVALID_REQUEST.
fn over_bounds(what: &str) -> Decision {
    Decision::refused(code::INVALID_REQUEST, format!("{what}: over the controller's bounds (SECURITY.md)"))
}

/// A group's master as the answers give it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasterInfo {
    pub master_broker_id: Option<i64>,
    pub master_address: Option<String>,
    pub master_epoch: Option<i32>,
    pub sync_state_set_epoch: Option<i32>,
}

/// What an answer's body holds, encoded at the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Java's SyncStateSet.
    SyncStateSet { set: BTreeSet<i64>, epoch: i32 },
    /// Java's ElectMasterResponseBody: the new SyncStateSet and, for a new master, the group's members.
    Elected { set: BTreeSet<i64>, members: Option<BrokerMemberGroup> },
}

/// Java's BrokerMemberGroup: a group's brokers, sent with a new master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerMemberGroup {
    pub cluster: String,
    pub broker_name: String,
    pub broker_addrs: Vec<(i64, String)>,
}

/// A decision: the answer and the events that must be in the log before it is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub code: i32,
    pub remark: Option<String>,
    pub master: MasterInfo,
    /// CONTROLLER_GET_NEXT_BROKER_ID's answer.
    pub next_broker_id: Option<i64>,
    pub body: Option<Body>,
    pub events: Vec<ControllerEvent>,
}

impl Decision {
    pub fn ok() -> Self {
        Decision {
            code: response::SUCCESS,
            remark: None,
            master: MasterInfo::default(),
            next_broker_id: None,
            body: None,
            events: Vec::new(),
        }
    }

    fn refused(code: i32, remark: impl Into<String>) -> Self {
        Decision { code, remark: Some(remark.into()), ..Decision::ok() }
    }

    fn with_event(mut self, event: ControllerEvent) -> Self {
        self.events.push(event);
        self
    }
}

/// CONTROLLER_ELECT_MASTER's fields: `broker_id` -1 when the controller itself asks (its scan found the
/// master gone); `designate` when an admin names the broker to elect. Its cluster is not read: the
/// group's own is (as Java's).
pub struct ElectRequest<'a> {
    pub broker_name: &'a str,
    pub broker_id: i64,
    pub designate: bool,
}

/// Elects a master for the group (CONTROLLER_ELECT_MASTER, and the controller's own re-elections).
pub fn elect_master(
    state: &ReplicasInfo,
    req: &ElectRequest<'_>,
    live: &dyn BrokerLiveness,
    unclean: bool,
) -> Decision {
    let Some((replicas, sync)) = state.group(req.broker_name) else {
        return Decision::refused(code::BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered");
    };
    // The first election takes the broker that asks, as Java's does, if it is one of the group's and
    // beats (Java takes any id: a made-up group elected so would never be released; SECURITY.md).
    let asking = (req.broker_id != -1
        && replicas.brokers.contains_key(&req.broker_id)
        && live.is_alive(&replicas.cluster, req.broker_name, req.broker_id))
    .then_some(req.broker_id);
    let first = asking.filter(|_| sync.first_election());
    let new_master = first.or_else(|| {
        let designated = req.designate.then_some(req.broker_id);
        let all: Option<BTreeSet<i64>> = unclean.then(|| replicas.brokers.keys().copied().collect());
        let group = (replicas.cluster.as_str(), req.broker_name);
        elect::elect(live, group, &sync.sync_state_set, all.as_ref(), sync.master, designated)
    });
    let master = |id: Option<i64>, master_epoch, set_epoch| MasterInfo {
        master_broker_id: id,
        master_address: replicas.address(id).map(str::to_string),
        master_epoch: Some(master_epoch),
        sync_state_set_epoch: Some(set_epoch),
    };
    match new_master {
        Some(id) if Some(id) == sync.master => Decision {
            master: master(sync.master, sync.master_epoch, sync.sync_state_set_epoch),
            body: Some(Body::Elected { set: sync.sync_state_set.clone(), members: None }),
            ..Decision::refused(
                code::MASTER_STILL_EXIST,
                format!(
                    "The old master {id} is still alive, not need to elect new master for broker {}",
                    req.broker_name
                ),
            )
        },
        Some(id) => {
            let group = BrokerMemberGroup {
                cluster: replicas.cluster.clone(),
                broker_name: req.broker_name.to_string(),
                broker_addrs: replicas.brokers.iter().map(|(i, b)| (*i, b.address.clone())).collect(),
            };
            tracing::info!(broker = %crate::error::shown(req.broker_name, 128), master = id, "new master elected");
            Decision {
                master: master(Some(id), sync.master_epoch + 1, sync.sync_state_set_epoch + 1),
                body: Some(Body::Elected { set: BTreeSet::from([id]), members: Some(group) }),
                ..Decision::ok()
            }
            .with_event(ControllerEvent::ElectMaster { broker_name: req.broker_name.to_string(), new_master: Some(id) })
        }
        // Asked by the controller: the master is gone and none could follow; the state says so.
        None if req.broker_id == -1 => {
            Decision::refused(code::MASTER_NOT_AVAILABLE, "Old master has down and failed to elect a new broker master")
                .with_event(ControllerEvent::ElectMaster { broker_name: req.broker_name.to_string(), new_master: None })
        }
        None => Decision::refused(code::ELECT_MASTER_FAILED, "Failed to elect a new master"),
    }
}

/// CONTROLLER_ALTER_SYNC_STATE_SET: the master reports which replicas keep up with it.
pub fn alter_sync_state_set(
    state: &ReplicasInfo,
    (broker_name, master_id, master_epoch): (&str, i64, i32),
    (new_set, set_epoch): (&BTreeSet<i64>, i32),
    live: &dyn BrokerLiveness,
) -> Decision {
    let Some((replicas, sync)) = state.group(broker_name) else {
        return Decision::refused(code::ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed");
    };
    if *new_set == sync.sync_state_set {
        let err = "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet";
        return Decision::refused(code::ALTER_SYNC_STATE_SET_FAILED, err);
    }
    if sync.master != Some(master_id) {
        let current = sync.master.map_or_else(|| "null".to_string(), |m| m.to_string());
        let err = format!(
            "Rejecting alter syncStateSet request because the current leader is:{{{current}}}, not {{{master_id}}}"
        );
        return Decision::refused(code::INVALID_MASTER, err);
    }
    if master_epoch != sync.master_epoch {
        let err = format!(
            "Rejecting alter syncStateSet request because the current master epoch is:{{{}}}, not {{{master_epoch}}}",
            sync.master_epoch
        );
        return Decision::refused(code::FENCED_MASTER_EPOCH, err);
    }
    if set_epoch != sync.sync_state_set_epoch {
        let err = format!(
            "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{}}}, not {{{set_epoch}}}",
            sync.sync_state_set_epoch
        );
        return Decision::refused(code::FENCED_SYNC_STATE_SET_EPOCH, err);
    }
    for replica in new_set {
        if !replicas.brokers.contains_key(replica) {
            let err = format!("Rejecting alter syncStateSet request because the replicas {{{replica}}} don't exist");
            return Decision::refused(code::INVALID_REPLICAS, err);
        }
        if !live.is_alive(&replicas.cluster, broker_name, *replica) {
            let err = format!("Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive");
            return Decision::refused(code::BROKER_NOT_ALIVE, err);
        }
    }
    if !new_set.contains(&master_id) {
        let err = format!(
            "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader {{{master_id}}}"
        );
        return Decision::refused(code::ALTER_SYNC_STATE_SET_FAILED, err);
    }
    let epoch = sync.sync_state_set_epoch + 1;
    Decision {
        master: MasterInfo { sync_state_set_epoch: Some(epoch), ..MasterInfo::default() },
        body: Some(Body::SyncStateSet { set: new_set.clone(), epoch }),
        ..Decision::ok()
    }
    .with_event(ControllerEvent::AlterSyncStateSet {
        broker_name: broker_name.to_string(),
        sync_state_set: new_set.clone(),
    })
}

/// CONTROLLER_GET_NEXT_BROKER_ID.
pub fn next_broker_id(state: &ReplicasInfo, broker_name: &str) -> Decision {
    let next = state.replicas(broker_name).map_or(FIRST_BROKER_CONTROLLER_ID, |r| r.next_broker_id);
    Decision { next_broker_id: Some(next), ..Decision::ok() }
}

/// The address a register check code (`address;timestamp`) names.
fn address_of(check_code: &str) -> String {
    check_code.split(';').next().unwrap_or_default().to_string()
}

/// CONTROLLER_APPLY_BROKER_ID: a broker takes an id, or takes its own back with the same check code.
pub fn apply_broker_id(
    state: &ReplicasInfo,
    (cluster, broker_name): (&str, &str),
    id: i64,
    check_code: &str,
) -> Decision {
    let address = address_of(check_code);
    let event = ControllerEvent::ApplyBrokerId {
        cluster: cluster.to_string(),
        broker_name: broker_name.to_string(),
        address,
        broker_id: id,
        check_code: check_code.to_string(),
    };
    if let Some(what) = state.past_bounds(&event) {
        return over_bounds(what);
    }
    let Some(replicas) = state.replicas(broker_name) else {
        if id == FIRST_BROKER_CONTROLLER_ID {
            return Decision::ok().with_event(event);
        }
        let err = format!(
            "Broker-set: {broker_name} hasn't been registered in controller, but broker try to apply brokerId: {id}"
        );
        return Decision::refused(code::BROKER_ID_INVALID, err);
    };
    match replicas.brokers.get(&id) {
        Some(known) if known.check_code != check_code => Decision::refused(
            code::BROKER_ID_INVALID,
            format!("Fail to apply brokerId: {id} in broker-set: {broker_name}"),
        ),
        _ => Decision::ok().with_event(event),
    }
}

/// CONTROLLER_REGISTER_BROKER: a broker with an id says where it is; it learns the live master.
pub fn register_broker(
    state: &ReplicasInfo,
    (cluster, broker_name): (&str, &str),
    (id, address): (i64, &str),
    live: &dyn BrokerLiveness,
) -> Decision {
    let Some((replicas, sync)) = state.group(broker_name) else {
        let err = format!("Broker-set: {broker_name} hasn't been registered in controller");
        return Decision::refused(code::BROKER_NEED_TO_BE_REGISTERED, err);
    };
    let Some(known) = replicas.brokers.get(&id) else {
        let err = format!("BrokerId: {id} hasn't been registered in broker-set: {broker_name}");
        return Decision::refused(code::BROKER_NEED_TO_BE_REGISTERED, err);
    };
    let event = ControllerEvent::UpdateBrokerAddress {
        broker_name: broker_name.to_string(),
        address: address.to_string(),
        broker_id: id,
    };
    if let Some(what) = state.past_bounds(&event) {
        return over_bounds(what);
    }
    let mut decision = Decision::ok();
    if let Some(master) = sync.master.filter(|m| live.is_alive(cluster, broker_name, *m)) {
        decision.master = MasterInfo {
            master_broker_id: Some(master),
            master_address: replicas.address(Some(master)).map(str::to_string),
            master_epoch: Some(sync.master_epoch),
            sync_state_set_epoch: Some(sync.sync_state_set_epoch),
        };
    }
    decision.body = Some(Body::SyncStateSet { set: sync.sync_state_set.clone(), epoch: sync.sync_state_set_epoch });
    if known.address != address {
        decision = decision.with_event(event);
    }
    decision
}

/// CONTROLLER_GET_REPLICA_INFO.
pub fn replica_info(state: &ReplicasInfo, broker_name: &str) -> Decision {
    let Some((replicas, sync)) = state.group(broker_name) else {
        return Decision::refused(code::BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed");
    };
    Decision {
        master: MasterInfo {
            master_broker_id: sync.master,
            master_address: replicas.address(sync.master).map(str::to_string),
            master_epoch: Some(sync.master_epoch),
            sync_state_set_epoch: None,
        },
        body: Some(Body::SyncStateSet { set: sync.sync_state_set.clone(), epoch: sync.sync_state_set_epoch }),
        ..Decision::ok()
    }
}

/// CLEAN_BROKER_DATA: an admin removes a group, or some of its ids, that are no longer alive (all of them
/// at once with `clean_living`).
pub fn clean_broker_data(
    state: &ReplicasInfo,
    (cluster, broker_name): (&str, &str),
    ids_to_clean: Option<&str>,
    clean_living: bool,
    live: &dyn BrokerLiveness,
) -> Decision {
    let ids_to_clean = ids_to_clean.filter(|ids| !ids.trim().is_empty());
    let mut ids = None;
    if !clean_living {
        let master = state.sync_state(broker_name).and_then(|sync| sync.master);
        if ids_to_clean.is_none() && master.is_some() {
            let remark = format!("Broker {broker_name} is still alive, clean up failure");
            return Decision::refused(code::INVALID_CLEAN_BROKER_METADATA, remark);
        }
        if let Some(text) = ids_to_clean {
            // Java's String.split drops the empty pieces at the end ("1;2;" is two ids).
            let pieces: Vec<&str> = text.split(';').collect();
            let kept = pieces.iter().rposition(|p| !p.is_empty()).map_or(0, |last| last + 1);
            let parsed: Result<BTreeSet<i64>, _> = pieces[..kept].iter().map(|id| id.parse::<i64>()).collect();
            let parsed = match parsed {
                Ok(ids) => ids,
                Err(e) => {
                    let remark = format!(
                        "Please set the option <brokerControllerIdsToClean> according to the format, exception: {e}"
                    );
                    return Decision::refused(code::INVALID_CLEAN_BROKER_METADATA, remark);
                }
            };
            if let Some(alive) = parsed.iter().find(|id| live.is_alive(cluster, broker_name, **id)) {
                let remark = format!("Broker [{broker_name},  {alive}] is still alive, clean up failure");
                return Decision::refused(code::INVALID_CLEAN_BROKER_METADATA, remark);
            }
            ids = Some(parsed);
        }
    }
    if state.group(broker_name).is_none() {
        let remark = format!("Broker {broker_name} is not existed,clean broker data failure.");
        return Decision::refused(code::INVALID_CLEAN_BROKER_METADATA, remark);
    }
    Decision::ok()
        .with_event(ControllerEvent::CleanBrokerData { broker_name: broker_name.to_string(), broker_ids: ids })
}

/// The groups whose master is no longer alive while another of their brokers is: the controller asks for
/// an election in each (Java's scanNeedReelectBrokerSets).
pub fn groups_needing_election(state: &ReplicasInfo, live: &dyn BrokerLiveness) -> Vec<String> {
    let mut needing = Vec::new();
    for (broker_name, sync) in state.sync_states() {
        let Some(master) = sync.master else { continue };
        if live.is_alive(&sync.cluster, broker_name, master) {
            continue;
        }
        let any_alive = state
            .replicas(broker_name)
            .is_some_and(|r| r.brokers.keys().any(|id| live.is_alive(&sync.cluster, broker_name, *id)));
        if any_alive {
            needing.push(broker_name.clone());
        }
    }
    needing
}
