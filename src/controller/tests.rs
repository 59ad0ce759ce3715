//! The controller's rules, after Java's ReplicasInfoManagerTest: a group of three brokers registered,
//! one elected, the others brought into sync, then elections by epoch, offset and priority, a master
//! lost with nobody in sync, admin elections and clean-ups; each decision's events applied as the log
//! would apply them.

use std::collections::{BTreeMap, BTreeSet};

use super::elect::{BrokerLiveInfo, BrokerLiveness};
use super::manager::{self, Body, ElectRequest};
use super::replicas::{self, ControllerEvent, ReplicasInfo};
use crate::protocol::codes::controller as code;

const CLUSTER: &str = "cluster-a";
const GROUP: &str = "broker-set-a";
const ADDRS: [&str; 3] = ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"];

/// Liveness from a predicate over ids, with the heartbeats' (epoch, offset, priority) when given.
struct Live<F: Fn(i64) -> bool> {
    alive: F,
    infos: BTreeMap<i64, (i32, i64, i32)>,
}

impl<F: Fn(i64) -> bool> BrokerLiveness for Live<F> {
    fn is_alive(&self, _: &str, _: &str, id: i64) -> bool {
        (self.alive)(id)
    }
    fn live_info(&self, _: &str, _: &str, id: i64) -> Option<BrokerLiveInfo> {
        let (epoch, max_offset, election_priority) = *self.infos.get(&id)?;
        Some(BrokerLiveInfo { broker_id: id, epoch, max_offset, election_priority })
    }
}

fn live(alive: impl Fn(i64) -> bool) -> Live<impl Fn(i64) -> bool> {
    Live { alive, infos: BTreeMap::new() }
}

fn all_alive() -> Live<impl Fn(i64) -> bool> {
    live(|_| true)
}

fn apply(state: &mut ReplicasInfo, decision: &manager::Decision) {
    for event in &decision.events {
        state.apply(event);
    }
}

fn set(ids: &[i64]) -> BTreeSet<i64> {
    ids.iter().copied().collect()
}

/// Asks for the next id, applies for it, registers: as a broker starting in controller mode does.
fn register_new_broker(state: &mut ReplicasInfo, address: &str, expected_id: i64, expected_master: Option<i64>) {
    let next = manager::next_broker_id(state, GROUP);
    assert_eq!((next.code, next.next_broker_id), (0, Some(expected_id)));
    let check_code = format!("{address};1700000000000");
    let applied = manager::apply_broker_id(state, (CLUSTER, GROUP), expected_id, &check_code);
    assert_eq!(applied.code, 0, "{:?}", applied.remark);
    apply(state, &applied);
    let registered = manager::register_broker(state, (CLUSTER, GROUP), (expected_id, address), &all_alive());
    assert_eq!(registered.code, 0, "{:?}", registered.remark);
    assert_eq!(registered.master.master_broker_id, expected_master);
    apply(state, &registered);
}

fn broker_elect(state: &mut ReplicasInfo, id: i64, live: &dyn BrokerLiveness) -> manager::Decision {
    let req = ElectRequest { broker_name: GROUP, broker_id: id, designate: false };
    let decision = manager::elect_master(state, &req, live, false);
    apply(state, &decision);
    decision
}

fn controller_elect(state: &ReplicasInfo, live: &dyn BrokerLiveness) -> manager::Decision {
    let req = ElectRequest { broker_name: GROUP, broker_id: -1, designate: false };
    manager::elect_master(state, &req, live, false)
}

fn alter(state: &mut ReplicasInfo, master: (i64, i32), new_set: &[i64], set_epoch: i32) {
    let decision =
        manager::alter_sync_state_set(state, (GROUP, master.0, master.1), (&set(new_set), set_epoch), &all_alive());
    assert_eq!(decision.code, 0, "{:?}", decision.remark);
    apply(state, &decision);
    let info = manager::replica_info(state, GROUP);
    assert_eq!(info.body, Some(Body::SyncStateSet { set: set(new_set), epoch: set_epoch + 1 }));
}

/// Three brokers; the first elected, the other two refused (the master is alive), all three in sync.
fn three_in_sync() -> ReplicasInfo {
    let mut state = ReplicasInfo::default();
    for (i, addr) in ADDRS.iter().enumerate() {
        register_new_broker(&mut state, addr, i as i64 + 1, None);
    }
    let first = broker_elect(&mut state, 1, &all_alive());
    assert_eq!(first.code, 0);
    assert_eq!((first.master.master_epoch, first.master.sync_state_set_epoch), (Some(1), Some(1)));
    assert_eq!(first.master.master_address.as_deref(), Some(ADDRS[0]));
    for id in [2, 3] {
        assert_eq!(broker_elect(&mut state, id, &all_alive()).code, code::MASTER_STILL_EXIST);
    }
    alter(&mut state, (1, 1), &[1, 2, 3], 1);
    state
}

fn master_of(state: &ReplicasInfo) -> (Option<i64>, i32, i32, BTreeSet<i64>) {
    let (_, sync) = state.group(GROUP).expect("the group");
    (sync.master, sync.master_epoch, sync.sync_state_set_epoch, sync.sync_state_set.clone())
}

#[test]
fn brokers_register_and_the_first_is_master_with_all_in_sync() {
    let state = three_in_sync();
    assert_eq!(master_of(&state), (Some(1), 1, 2, set(&[1, 2, 3])));
}

#[test]
fn a_broker_registering_later_learns_the_live_master() {
    let mut state = ReplicasInfo::default();
    register_new_broker(&mut state, ADDRS[0], 1, None);
    register_new_broker(&mut state, ADDRS[1], 2, None);
    broker_elect(&mut state, 1, &all_alive());
    broker_elect(&mut state, 2, &all_alive());
    register_new_broker(&mut state, ADDRS[2], 3, Some(1));
    assert_eq!(broker_elect(&mut state, 3, &all_alive()).code, code::MASTER_STILL_EXIST);
    assert_eq!(master_of(&state), (Some(1), 1, 1, set(&[1])));
}

#[test]
fn the_only_live_replica_in_sync_takes_over() {
    let mut state = three_in_sync();
    let decision = broker_elect(&mut state, 3, &live(|id| id == 3));
    assert_eq!((decision.code, decision.master.master_address.as_deref()), (0, Some(ADDRS[2])));
    assert_eq!(master_of(&state), (Some(3), 2, 3, set(&[3])));
}

#[test]
fn the_controller_keeps_a_master_that_is_alive() {
    let state = three_in_sync();
    assert_eq!(controller_elect(&state, &all_alive()).code, code::MASTER_STILL_EXIST);
}

/// Master 1 gone; the others' heartbeats decide: higher epoch, then higher offset, then lower priority.
#[test]
fn elections_prefer_epoch_then_offset_then_priority() {
    let state = three_in_sync();
    let cases = [
        ([(1, 3, 0), (2, 2, 0), (0, 3, 0)], 2, "higher epoch"),
        ([(1, 3, 0), (1, 2, 0), (1, 3, 0)], 3, "higher offset at the same epoch"),
        ([(1, 3, 3), (1, 3, 2), (1, 3, 1)], 3, "lower priority at the same epoch and offset"),
    ];
    for (heartbeats, expected, why) in cases {
        let infos = (1..=3).zip(heartbeats).collect();
        let decision = controller_elect(&state, &Live { alive: |id| id != 1, infos });
        assert_eq!(decision.master.master_broker_id, Some(expected), "{why}");
        assert_eq!(decision.master.master_epoch, Some(2), "{why}");
    }
}

/// Offsets 2^32 apart: Java's comparator casts their difference to int (0 here) and would call them
/// equal; the higher offset wins here.
#[test]
fn offsets_far_apart_are_compared_exactly() {
    let state = three_in_sync();
    let infos = BTreeMap::from([(2, (1, 1, 0)), (3, (1, 1 + (1 << 32), 1))]);
    let decision = controller_elect(&state, &Live { alive: |id| id != 1, infos });
    assert_eq!(decision.master.master_broker_id, Some(3));
}

#[test]
fn admins_elect_a_designated_live_broker_only() {
    let mut state = three_in_sync();
    let decision = controller_elect(&state, &live(|id| id != 1));
    apply(&mut state, &decision);
    let (new_master, epoch) =
        (decision.master.master_broker_id.expect("elected"), decision.master.master_epoch.expect("epoch"));
    assert_ne!(new_master, 1);
    assert_eq!(epoch, 2);
    alter(&mut state, (new_master, epoch), &[1, 2, 3], decision.master.sync_state_set_epoch.expect("epoch"));
    let admin = |id| ElectRequest { broker_name: GROUP, broker_id: id, designate: true };
    let dead = manager::elect_master(&state, &admin(1), &live(|id| id != 1), false);
    assert_eq!(dead.code, code::ELECT_MASTER_FAILED);
    let same = manager::elect_master(&state, &admin(new_master), &all_alive(), false);
    assert_eq!(same.code, code::MASTER_STILL_EXIST);
    let moved = manager::elect_master(&state, &admin(1), &live(|id| id != new_master), false);
    assert_eq!(moved.code, 0);
    assert_eq!(moved.master.master_broker_id, Some(1));
    assert_eq!(moved.master.master_address.as_deref(), Some(ADDRS[0]));
    assert_eq!(moved.master.master_epoch, Some(3));
}

/// Nobody but the master in sync and the master gone: no election, and the state records the master
/// gone (its epoch moves on) while keeping the SyncStateSet for when it returns.
#[test]
fn a_master_lost_with_nobody_in_sync_is_recorded_gone() {
    let mut state = three_in_sync();
    alter(&mut state, (1, 1), &[1], 2);
    let decision = controller_elect(&state, &live(|id| id != 1));
    assert_eq!(decision.code, code::MASTER_NOT_AVAILABLE);
    assert_eq!(decision.events, [ControllerEvent::ElectMaster { broker_name: GROUP.into(), new_master: None }]);
    apply(&mut state, &decision);
    let info = manager::replica_info(&state, GROUP);
    assert_eq!((info.master.master_address, info.master.master_epoch), (None, Some(2)));
    assert_eq!(master_of(&state).3, set(&[1]));
    // With unclean elections on, a live replica out of sync takes over.
    let req = ElectRequest { broker_name: GROUP, broker_id: -1, designate: false };
    let unclean = manager::elect_master(&state, &req, &live(|id| id != 1), true);
    assert_eq!((unclean.code, unclean.master.master_broker_id), (0, Some(2)));
}

#[test]
fn stale_sync_state_set_changes_are_fenced() {
    let state = three_in_sync();
    let alter = |master: i64, epoch: i32, ids: &[i64], set_epoch: i32| {
        manager::alter_sync_state_set(&state, (GROUP, master, epoch), (&set(ids), set_epoch), &live(|id| id != 9)).code
    };
    assert_eq!(alter(1, 1, &[1, 2, 3], 2), code::ALTER_SYNC_STATE_SET_FAILED, "the same set");
    assert_eq!(alter(2, 1, &[1, 2], 2), code::INVALID_MASTER);
    assert_eq!(alter(1, 0, &[1, 2], 2), code::FENCED_MASTER_EPOCH);
    assert_eq!(alter(1, 1, &[1, 2], 1), code::FENCED_SYNC_STATE_SET_EPOCH);
    assert_eq!(alter(1, 1, &[1, 4], 2), code::INVALID_REPLICAS);
    assert_eq!(alter(2, 1, &[2, 3], 2), code::INVALID_MASTER);
    assert_eq!(alter(1, 1, &[2, 3], 2), code::ALTER_SYNC_STATE_SET_FAILED, "without the master");
    assert_eq!(alter(1, 1, &[1, 2], 2), 0);
}

#[test]
fn broker_ids_are_taken_with_their_check_code() {
    let mut state = ReplicasInfo::default();
    let refused = manager::apply_broker_id(&state, (CLUSTER, GROUP), 2, "127.0.0.1:9001;1");
    assert_eq!(refused.code, code::BROKER_ID_INVALID);
    register_new_broker(&mut state, ADDRS[0], 1, None);
    let again = manager::apply_broker_id(&state, (CLUSTER, GROUP), 1, &format!("{};1700000000000", ADDRS[0]));
    assert_eq!(again.code, 0, "the same broker takes its id back");
    let other = manager::apply_broker_id(&state, (CLUSTER, GROUP), 1, "10.0.0.9:9000;5");
    assert_eq!(other.code, code::BROKER_ID_INVALID);
    // A known broker registering from a new address is recorded there.
    let moved = manager::register_broker(&state, (CLUSTER, GROUP), (1, "10.0.0.1:9000"), &all_alive());
    apply(&mut state, &moved);
    assert_eq!(state.group(GROUP).expect("group").0.address(Some(1)), Some("10.0.0.1:9000"));
}

#[test]
fn broker_data_is_cleaned_only_when_not_alive() {
    let state = three_in_sync();
    let clean = |group: &str, ids: Option<&str>, living: bool, alive: bool| {
        manager::clean_broker_data(&state, (CLUSTER, group), ids, living, &live(|_| alive))
    };
    assert_eq!(clean(GROUP, Some("1"), false, true).code, code::INVALID_CLEAN_BROKER_METADATA);
    let master_alive = clean(GROUP, None, false, true);
    assert_eq!(master_alive.code, code::INVALID_CLEAN_BROKER_METADATA);
    assert_eq!(master_alive.remark.as_deref(), Some("Broker broker-set-a is still alive, clean up failure"));
    assert_eq!(clean(GROUP, Some("1"), false, false).code, 0);
    assert_eq!(clean(GROUP, Some("1;2;3"), false, false).code, 0);
    assert_eq!(clean(GROUP, Some("1;x"), false, false).code, code::INVALID_CLEAN_BROKER_METADATA);
    let unknown = clean("broker12", Some("1;2;3"), true, false);
    assert_eq!(unknown.remark.as_deref(), Some("Broker broker12 is not existed,clean broker data failure."));
    let all = clean(GROUP, Some("1;2;3"), true, false);
    assert_eq!(all.events, [ControllerEvent::CleanBrokerData { broker_name: GROUP.into(), broker_ids: None }]);
    let mut cleaned = state.clone();
    apply(&mut cleaned, &clean(GROUP, Some("1;2;3;"), false, false));
    assert!(cleaned.group(GROUP).is_none() && cleaned.replicas(GROUP).is_none());
}

#[test]
fn groups_whose_master_died_are_found_for_election() {
    let state = three_in_sync();
    assert!(manager::groups_needing_election(&state, &all_alive()).is_empty());
    assert_eq!(manager::groups_needing_election(&state, &live(|id| id != 1)), [GROUP]);
    assert!(manager::groups_needing_election(&state, &live(|_| false)).is_empty(), "nobody to elect");
}

/// A snapshot holds the whole state: a node restored from it decides as the one that wrote it.
#[test]
fn the_state_survives_a_snapshot() {
    let state = three_in_sync();
    let bytes = serde_json::to_vec(&state).expect("a snapshot is written");
    let restored: ReplicasInfo = serde_json::from_slice(&bytes).expect("a snapshot reads back");
    assert_eq!(restored, state);
    assert_eq!(manager::next_broker_id(&restored, GROUP).next_broker_id, Some(4));
}

/// Anyone may take broker ids: the state holds at most MAX_GROUPS groups of MAX_BROKERS_PER_GROUP, with
/// names, addresses and check codes of at most MAX_TEXT bytes; beyond, CONTROLLER_INVALID_REQUEST and no
/// event.
#[test]
fn the_state_is_bounded_whoever_asks() {
    let mut state = ReplicasInfo::default();
    for i in 0..replicas::MAX_GROUPS {
        let applied = manager::apply_broker_id(&state, (CLUSTER, &format!("g{i}")), 1, "127.0.0.1:1;1");
        assert_eq!(applied.code, 0);
        apply(&mut state, &applied);
    }
    let refused = manager::apply_broker_id(&state, (CLUSTER, "one-more"), 1, "127.0.0.1:1;1");
    assert_eq!((refused.code, refused.events.len()), (code::INVALID_REQUEST, 0));
    // An id a group already has is taken again with its check code, however full the state.
    assert_eq!(manager::apply_broker_id(&state, (CLUSTER, "g0"), 1, "127.0.0.1:1;1").code, 0);

    let mut state = ReplicasInfo::default();
    for id in 1..=replicas::MAX_BROKERS_PER_GROUP as i64 {
        let next = manager::next_broker_id(&state, GROUP).next_broker_id.unwrap();
        let applied = manager::apply_broker_id(&state, (CLUSTER, GROUP), next, &format!("127.0.0.1:{id};1"));
        assert_eq!(applied.code, 0, "{:?}", applied.remark);
        apply(&mut state, &applied);
    }
    let next = manager::next_broker_id(&state, GROUP).next_broker_id.unwrap();
    let refused = manager::apply_broker_id(&state, (CLUSTER, GROUP), next, "127.0.0.1:65;1");
    assert_eq!((refused.code, refused.events.len()), (code::INVALID_REQUEST, 0));

    let long = "x".repeat(replicas::MAX_TEXT + 1);
    let refused = manager::apply_broker_id(&ReplicasInfo::default(), (CLUSTER, &long), 1, "127.0.0.1:1;1");
    assert_eq!(refused.code, code::INVALID_REQUEST);
    let refused = manager::register_broker(&state, (CLUSTER, GROUP), (1, &long), &all_alive());
    assert_eq!((refused.code, refused.events.len()), (code::INVALID_REQUEST, 0));
}

/// Entries that no decision made (whoever speaks Raft from a peer's address appends what it likes) are
/// held to the same bounds when applied: past them, an entry changes nothing, on every node alike.
#[test]
fn entries_past_the_bounds_are_not_applied() {
    let id = |group: &str, id: i64, address: &str, check_code: &str| ControllerEvent::ApplyBrokerId {
        cluster: CLUSTER.into(),
        broker_name: group.into(),
        address: address.into(),
        broker_id: id,
        check_code: check_code.into(),
    };
    let mut state = ReplicasInfo::default();
    for g in 0..replicas::MAX_GROUPS {
        state.apply(&id(&format!("g{g}"), 1, "127.0.0.1:1", "c"));
    }
    let full = state.clone();
    let long = "x".repeat(replicas::MAX_TEXT + 1);
    for event in [
        id("one-more", 1, "127.0.0.1:1", "c"),
        id("g0", 2, &long, "c"),
        id("g0", 2, "127.0.0.1:2", &long),
        ControllerEvent::UpdateBrokerAddress { broker_name: "g0".into(), address: long.clone(), broker_id: 1 },
        ControllerEvent::AlterSyncStateSet { broker_name: "g0".into(), sync_state_set: (0..65).collect() },
    ] {
        state.apply(&event);
        assert_eq!(state, full, "{event:?} was applied");
    }
    for b in 2..=100 {
        state.apply(&id("g0", b, "127.0.0.1:1", "c"));
    }
    assert_eq!(state.replicas("g0").map(|r| r.brokers.len()), Some(replicas::MAX_BROKERS_PER_GROUP));
    // Check codes of control characters (six bytes each as JSON) stop at the state's bytes.
    let heavy = "\u{1}".repeat(replicas::MAX_TEXT);
    'fill: for g in 1..replicas::MAX_GROUPS {
        for b in 2..=replicas::MAX_BROKERS_PER_GROUP as i64 {
            let before = state.bytes();
            state.apply(&id(&format!("g{g}"), b, "127.0.0.1:1", &heavy));
            if state.bytes() == before {
                break 'fill;
            }
        }
    }
    let written = serde_json::to_vec(&state).expect("a snapshot is written").len();
    assert!(written <= replicas::MAX_STATE_BYTES, "{written} bytes written");
    assert!(written > replicas::MAX_STATE_BYTES / 2, "only {written} bytes: the bound is too loose");
}

/// The state is bounded in the bytes its snapshot takes, not only in items: check codes of 500 control
/// characters (six bytes each as JSON) fill it to MAX_STATE_BYTES and no further, its count of its bytes
/// is never under what the snapshot writes, and a state read back counts the same. (Counted in items,
/// ~640k such ids had made a ~4 GB snapshot.)
#[test]
fn the_state_is_bounded_in_bytes() {
    let heavy = format!("127.0.0.1:1;{}", "\u{1}".repeat(500));
    let mut state = ReplicasInfo::default();
    let mut refused = None;
    'fill: for g in 0..replicas::MAX_GROUPS {
        for id in 1..=replicas::MAX_BROKERS_PER_GROUP as i64 {
            let decision = manager::apply_broker_id(&state, (CLUSTER, &format!("g{g}")), id, &heavy);
            if decision.code != 0 {
                refused = Some(decision);
                break 'fill;
            }
            apply(&mut state, &decision);
        }
    }
    let refused = refused.expect("refused before the item bounds");
    assert_eq!((refused.code, refused.events.len()), (code::INVALID_REQUEST, 0), "{:?}", refused.remark);
    let written = serde_json::to_vec(&state).expect("a snapshot is written").len();
    assert!(written <= super::replicas::MAX_STATE_BYTES, "{written} bytes written");
    assert!(state.bytes() >= written, "counted {} under the {written} written", state.bytes());
    assert!(written > super::replicas::MAX_STATE_BYTES / 2, "only {written} bytes: the bound is too loose");
    let mut restored: ReplicasInfo = serde_json::from_slice(&serde_json::to_vec(&state).unwrap()).unwrap();
    restored.recount();
    assert_eq!(restored.bytes(), state.bytes());
    let first = state.replicas("g0").map(|r| r.brokers.len()).unwrap_or_default() as i64;
    let cleaned = manager::clean_broker_data(&state, (CLUSTER, "g0"), Some("1"), true, &all_alive());
    assert_eq!(cleaned.code, 0, "{:?}", cleaned.remark);
    apply(&mut state, &cleaned);
    let mut recounted = state.clone();
    recounted.recount();
    assert_eq!(recounted.bytes(), state.bytes(), "cleaning g0 (of {first} ids) counted as a recount does");
}

/// The first election takes the broker that asks only if it is one of the group's and beats: an id the
/// group never gave out, or one whose broker does not beat, elects nobody (Java takes any: a made-up group
/// elected so would be kept for good).
#[test]
fn a_first_election_takes_a_member_that_beats() {
    let mut state = ReplicasInfo::default();
    register_new_broker(&mut state, ADDRS[0], 1, None);
    let ask = |id| ElectRequest { broker_name: GROUP, broker_id: id, designate: false };
    let unknown = manager::elect_master(&state, &ask(99), &all_alive(), false);
    assert!(unknown.code != 0 && unknown.events.is_empty(), "{:?}", unknown.remark);
    let silent = manager::elect_master(&state, &ask(1), &live(|_| false), false);
    assert!(silent.code != 0 && silent.events.is_empty(), "{:?}", silent.remark);
    let elected = manager::elect_master(&state, &ask(1), &all_alive(), false);
    assert_eq!((elected.code, elected.master.master_broker_id), (0, Some(1)));
}
