//! Unit tests of the route builder: what a registration publishes, and what it re-encodes.
use super::*;
use crate::protocol::json::JsonStyle;

fn registration(id: i64, addr: &str, counter: i64, topics: &[&str]) -> BrokerRegistration {
    test_registration("b", id, addr, counter, topics)
}

struct Table {
    snapshot: RouteSnapshot,
    index: BrokerTopicIndex,
    live: BrokerLiveTable,
}

impl Table {
    fn new() -> Self {
        Table { snapshot: RouteSnapshot::default(), index: BrokerTopicIndex::default(), live: BrokerLiveTable::new() }
    }

    /// Applies one registration; returns whether a snapshot was published.
    fn register(&mut self, r: &BrokerRegistration) -> bool {
        let mut b = RouteBuilder::new(&self.snapshot, &mut self.index, &self.live);
        b.register_broker(r).unwrap();
        match b.finish_committed() {
            Some(next) => {
                self.snapshot = next;
                true
            }
            None => false,
        }
    }
}

fn topics(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("topic-{i}")).collect()
}

#[test]
fn periodic_reregistration_publishes_nothing() {
    let names = topics(100);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut t = Table::new();
    assert!(t.register(&registration(0, "a:1", 1, &names)));
    assert_eq!(t.snapshot.version, 1);
    assert!(!t.register(&registration(0, "a:1", 1, &names)), "same DataVersion, same routes");
    assert!(!t.register(&registration(0, "a:1", 2, &names)), "bumped DataVersion, same topic configs");
    assert_eq!(t.snapshot.version, 1);
}

#[test]
fn one_changed_topic_is_the_only_one_reencoded() {
    let names = topics(100);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut t = Table::new();
    t.register(&registration(0, "a:1", 1, &names));
    let before = t.snapshot.clone();
    let mut r = registration(0, "a:1", 2, &names);
    r.body.topic_configs[7].write_queue_nums = 8;
    assert!(t.register(&r));
    for name in &names {
        let same = Arc::ptr_eq(before.topic(name).unwrap(), t.snapshot.topic(name).unwrap());
        assert_eq!(same, *name != "topic-7", "{name}");
    }
    let body = t.snapshot.route_body("topic-7", JsonStyle::Standard).unwrap().to_vec();
    assert!(std::str::from_utf8(&body).unwrap().contains("\"writeQueueNums\":8"));
}

/// A KV change of ORDER_TOPIC_CONFIG re-encodes that topic only; switching `orderMessageEnable` re-encodes
/// the ordered topics only.
#[test]
fn order_topic_conf_reencodes_one_topic() {
    let mut t = Table::new();
    t.snapshot.config.order_message_enable = true;
    t.register(&registration(0, "a:1", 1, &["x", "y", "z"]));
    let before = t.snapshot.clone();
    let mut b = RouteBuilder::new(&t.snapshot, &mut t.index, &t.live);
    b.set_order_topic_conf("y", Some("b:4"));
    let next = b.finish_committed().unwrap();
    for name in ["x", "y", "z"] {
        assert_eq!(Arc::ptr_eq(before.topic(name).unwrap(), next.topic(name).unwrap()), name != "y", "{name}");
    }
    let body = next.route_body("y", JsonStyle::Standard).unwrap().to_vec();
    assert!(std::str::from_utf8(&body).unwrap().contains(r#""orderTopicConf":"b:4""#));
    let mut b = RouteBuilder::new(&next, &mut t.index, &t.live);
    b.set_config(RouteConfig { order_message_enable: false, ..next.config });
    let off = b.finish_committed().unwrap();
    assert!(Arc::ptr_eq(next.topic("x").unwrap(), off.topic("x").unwrap()));
    assert!(
        !std::str::from_utf8(&off.route_body("y", JsonStyle::Standard).unwrap().to_vec())
            .unwrap()
            .contains("orderTopicConf")
    );
}

/// Topics with the same route share one `TopicRoute`, encoded once (a million topics of a thousand brokers
/// are a thousand routes); a topic whose route shows its own `orderTopicConf`, or that the acting-master
/// rewrite skips, has its own.
#[test]
fn equal_routes_are_one_route() {
    let sync_topic = "rmq_sys_SYNC_BROKER_MEMBER_b";
    let mut t = Table::new();
    t.snapshot.config.order_message_enable = true;
    t.snapshot.order_topic_conf.insert("y".into(), "b:4".into());
    t.register(&registration(0, "a:1", 1, &["x", "y", "z", sync_topic]));
    let route = |name: &str| t.snapshot.topic(name).unwrap().clone();
    let body = |name: &str| t.snapshot.route_body(name, JsonStyle::Standard).unwrap().to_vec();
    assert!(Arc::ptr_eq(&route("x"), &route("z")));
    assert!(!Arc::ptr_eq(&route("x"), &route("y")));
    assert!(!Arc::ptr_eq(&route("x"), &route(sync_topic)));
    assert!(std::str::from_utf8(&body("y")).unwrap().contains(r#""orderTopicConf":"b:4""#));
    assert!(!std::str::from_utf8(&body("x")).unwrap().contains("orderTopicConf"));
    assert_eq!(body("x"), body(sync_topic));
}

#[test]
fn a_slave_joining_reencodes_its_brokers_topics_only() {
    let mut t = Table::new();
    t.register(&registration(0, "a:1", 1, &["x", "y"]));
    t.register(&test_registration("other", 0, "o:1", 1, &["z", "w"]));
    let before = t.snapshot.clone();
    assert!(t.register(&registration(1, "a:2", 1, &["x", "y"])));
    assert!(!Arc::ptr_eq(before.topic("x").unwrap(), t.snapshot.topic("x").unwrap()));
    assert!(Arc::ptr_eq(before.topic("z").unwrap(), t.snapshot.topic("z").unwrap()));
    let body = t.snapshot.route_body("x", JsonStyle::Fastjson).unwrap().to_vec();
    assert!(std::str::from_utf8(&body).unwrap().contains(r#"{0:"a:1",1:"a:2"}"#));
}

#[test]
fn unregistering_last_member_clears_every_table() {
    let mut t = Table::new();
    t.register(&registration(0, "a:1", 1, &["x", "y"]));
    let mut b = RouteBuilder::new(&t.snapshot, &mut t.index, &t.live);
    b.unregister_broker(&UnregisterRequest {
        cluster: "c".into(),
        broker_addr: "a:1".into(),
        broker_name: "b".into(),
        broker_id: 0,
    });
    let next = b.finish_committed().unwrap();
    assert!(next.topics.is_empty() && next.brokers.is_empty() && next.clusters.is_empty());
    assert!(t.index.is_empty());
    assert_eq!(t.live.len(), 0);
}

// The steps of `register_broker` (route/register.rs), one rule each.

impl Table {
    /// Applies one registration and keeps whatever it published; returns the registration's result.
    fn apply(&mut self, r: &BrokerRegistration) -> Result<RegisterResult, RegisterError> {
        let mut b = RouteBuilder::new(&self.snapshot, &mut self.index, &self.live);
        let result = b.register_broker(r);
        if let Some(next) = b.finish_committed() {
            self.snapshot = next;
        }
        result
    }

    fn wipe_write_perm(&mut self, broker: &str) {
        let mut b = RouteBuilder::new(&self.snapshot, &mut self.index, &self.live);
        b.operate_write_perm(broker, true);
        if let Some(next) = b.finish_committed() {
            self.snapshot = next;
        }
    }

    fn addrs(&self, broker: &str) -> Vec<(i64, String)> {
        self.snapshot
            .brokers
            .get(broker)
            .map(|b| b.broker_addrs.iter().map(|(id, a)| (*id, a.to_string())).collect())
            .unwrap_or_default()
    }

    fn perm(&self, topic: &str) -> Option<i32> {
        self.snapshot.topics.get(topic).and_then(|t| t.queue_datas.first()).map(|q| q.perm)
    }
}

fn with_state_version(mut r: BrokerRegistration, state_version: i64) -> BrokerRegistration {
    r.body.data_version.state_version = state_version;
    r
}

#[test]
fn admit_member_lists_each_broker_name_once_in_its_cluster() {
    let mut t = Table::new();
    t.apply(&test_registration("a", 0, "a:1", 1, &["t1", "t2"])).unwrap();
    t.apply(&test_registration("b", 0, "b:1", 1, &["t3", "t4"])).unwrap();
    t.apply(&test_registration("a", 1, "a:2", 1, &["t1", "t2"])).unwrap();
    let names: Vec<&str> = t.snapshot.clusters["c"].iter().map(|n| &**n).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn an_address_that_changes_id_gives_up_its_old_one() {
    let mut t = Table::new();
    t.apply(&registration(1, "x:1", 1, &["t1", "t2"])).unwrap();
    t.apply(&registration(0, "x:1", 2, &["t1", "t2"])).unwrap();
    assert_eq!(t.addrs("b"), [(0, "x:1".to_string())]);
}

#[test]
fn a_registration_older_than_the_live_holder_of_its_id_is_refused_quietly() {
    let mut t = Table::new();
    t.apply(&with_state_version(registration(0, "new:1", 1, &["t1", "t2"]), 5)).unwrap();
    let stale = with_state_version(registration(0, "old:1", 1, &["t1", "t2"]), 3);
    assert_eq!(t.apply(&stale), Ok(RegisterResult::default()));
    assert_eq!(t.addrs("b"), [(0, "new:1".to_string())]);
    assert!(t.live.get(&BrokerAddrKey::new("c", "old:1")).is_none());
    // A newer one takes the id over.
    t.apply(&with_state_version(registration(0, "newer:1", 1, &["t1", "t2"]), 6)).unwrap();
    assert_eq!(t.addrs("b"), [(0, "newer:1".to_string())]);
}

#[test]
fn an_unknown_broker_id_may_not_start_with_one_topic() {
    let mut t = Table::new();
    assert_eq!(t.apply(&registration(0, "a:1", 1, &["t1"])), Err(RegisterError::FirstRegistrationWithOneTopic));
    assert!(t.addrs("b").is_empty());
    assert!(t.snapshot.topics.get("t1").is_none());
    t.apply(&registration(0, "a:1", 1, &["t1", "t2"])).unwrap();
    t.apply(&registration(0, "a:1", 2, &["t3"])).expect("a known id may send one topic");
    assert!(t.snapshot.topics.get("t3").is_some());
}

#[test]
fn topic_configs_are_reapplied_only_on_a_new_data_version() {
    let mut t = Table::new();
    t.apply(&registration(0, "a:1", 1, &["t1", "t2"])).unwrap();
    assert_eq!(t.perm("t1"), Some(6));
    t.wipe_write_perm("b");
    assert_eq!(t.perm("t1"), Some(4));
    t.apply(&registration(0, "a:1", 1, &["t1", "t2"])).unwrap();
    assert_eq!(t.perm("t1"), Some(4), "the same DataVersion leaves the operator's change");
    t.apply(&registration(0, "a:1", 2, &["t1", "t2"])).unwrap();
    assert_eq!(t.perm("t1"), Some(6), "a new DataVersion re-applies the broker's config");
}

#[test]
fn a_prime_slave_of_an_acting_master_group_defines_read_only_queues() {
    let mut t = Table::new();
    let mut slave = registration(1, "s:1", 1, &["t1", "t2"]);
    slave.enable_acting_master = Some(true);
    t.apply(&slave).unwrap();
    assert_eq!(t.perm("t1"), Some(4), "no write permission while no master is registered");
    assert!(t.snapshot.brokers["b"].enable_acting_master);
}

#[test]
fn a_4x_slave_never_defines_queues() {
    let mut t = Table::new();
    let mut slave = registration(1, "s:1", 1, &["t1", "t2"]);
    slave.enable_acting_master = None;
    t.apply(&slave).unwrap();
    assert_eq!(t.addrs("b"), [(1, "s:1".to_string())]);
    assert!(t.snapshot.topics.get("t1").is_none());
}

#[test]
fn filter_servers_absent_are_kept_and_empty_are_cleared() {
    let mut t = Table::new();
    let key = BrokerAddrKey::new("c", "a:1");
    let mut r = registration(0, "a:1", 1, &["t1", "t2"]);
    r.body.filter_server_list = Some(vec!["f:1".into()]);
    t.apply(&r).unwrap();
    assert_eq!(t.snapshot.filter_servers.get(&key), Some(&vec!["f:1".to_string()]));
    r.body.filter_server_list = None;
    t.apply(&r).unwrap();
    assert_eq!(t.snapshot.filter_servers.get(&key), Some(&vec!["f:1".to_string()]), "absent: kept");
    r.body.filter_server_list = Some(vec![]);
    t.apply(&r).unwrap();
    assert!(t.snapshot.filter_servers.get(&key).is_none(), "empty: cleared");
}

#[test]
fn a_slave_learns_its_live_master_and_its_ha_address() {
    let mut t = Table::new();
    let slave = registration(1, "s:1", 1, &["t1", "t2"]);
    assert_eq!(t.apply(&slave), Ok(RegisterResult::default()), "no master yet");
    let mut master = registration(0, "m:1", 1, &["t1", "t2"]);
    master.ha_server_addr = "m:2".into();
    assert_eq!(t.apply(&master), Ok(RegisterResult::default()), "a master is told nothing");
    let result = t.apply(&slave).unwrap();
    assert_eq!(result.master_addr.as_deref(), Some("m:1"));
    assert_eq!(result.ha_server_addr.as_deref(), Some("m:2"));
    t.live.remove(&BrokerAddrKey::new("c", "m:1"));
    assert_eq!(t.apply(&slave), Ok(RegisterResult::default()), "a master that is not live is not named");
}

/// The 905 notices of one batch: a slave, then its master, then the master leaving, with the group's
/// acting-master flag as given. Java decides the same (tests/java/min_broker_id.py compares the wire).
fn notices_of_a_master_coming_and_going(acting_master: bool) -> (Vec<MinBrokerIdChange>, Vec<MinBrokerIdChange>) {
    let (snapshot, mut index, live) = (RouteSnapshot::default(), BrokerTopicIndex::default(), BrokerLiveTable::new());
    let mut b = RouteBuilder::new(&snapshot, &mut index, &live);
    let mut slave = registration(1, "s:1", 1, &[]);
    let mut master = registration(0, "m:1", 1, &[]);
    slave.enable_acting_master = Some(acting_master);
    master.enable_acting_master = Some(acting_master);
    master.ha_server_addr = "m:2".into();
    b.register_broker(&slave).unwrap();
    b.register_broker(&master).unwrap();
    let registered = b.take_notices();
    b.unregister_broker(&UnregisterRequest {
        cluster: "c".into(),
        broker_addr: "m:1".into(),
        broker_name: "b".into(),
        broker_id: 0,
    });
    (registered, b.take_notices())
}

#[test]
fn a_lower_id_registering_is_noticed_whatever_the_acting_master_flag() {
    for acting_master in [false, true] {
        let (registered, _) = notices_of_a_master_coming_and_going(acting_master);
        assert_eq!(registered.len(), 1);
        let n = &registered[0];
        assert_eq!((n.min_broker_id, &*n.min_broker_addr, n.ha_broker_addr.as_deref()), (0, "m:1", Some("m:2")));
        assert_eq!(n.notify, vec![Arc::from("s:1")]);
    }
}

#[test]
fn the_lowest_id_leaving_is_noticed_only_in_an_acting_master_group() {
    let (_, left) = notices_of_a_master_coming_and_going(true);
    assert_eq!(left.len(), 1);
    assert_eq!((left[0].min_broker_id, left[0].offline_broker_addr.as_deref()), (1, Some("m:1")));
    let (_, left) = notices_of_a_master_coming_and_going(false);
    assert!(left.is_empty(), "{left:?}");
}
