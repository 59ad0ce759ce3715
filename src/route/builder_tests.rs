//! Unit tests of the route builder: what a registration publishes, and what it re-encodes.
use super::*;
use crate::json::JsonStyle;

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
        match b.finish() {
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
    let next = b.finish().unwrap();
    for name in ["x", "y", "z"] {
        assert_eq!(Arc::ptr_eq(before.topic(name).unwrap(), next.topic(name).unwrap()), name != "y", "{name}");
    }
    let body = next.route_body("y", JsonStyle::Standard).unwrap().to_vec();
    assert!(std::str::from_utf8(&body).unwrap().contains(r#""orderTopicConf":"b:4""#));
    let mut b = RouteBuilder::new(&next, &mut t.index, &t.live);
    b.set_config(RouteConfig { order_message_enable: false, ..next.config });
    let off = b.finish().unwrap();
    assert!(Arc::ptr_eq(next.topic("x").unwrap(), off.topic("x").unwrap()));
    assert!(
        !std::str::from_utf8(&off.route_body("y", JsonStyle::Standard).unwrap().to_vec())
            .unwrap()
            .contains("orderTopicConf")
    );
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
    let next = b.finish().unwrap();
    assert!(next.topics.is_empty() && next.brokers.is_empty() && next.clusters.is_empty());
    assert!(t.index.is_empty());
    assert!(t.live.is_empty());
}
