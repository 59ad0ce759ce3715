//! Registration over the wire: REGISTER_BROKER, UNREGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV, QUERY_DATA_VERSION,
//! BROKER_HEARTBEAT, cluster info and topic lists. Each test says which Java test (namesrv module, 5.3) it
//! mirrors, where one exists.

mod common;

use bytes::Bytes;
use common::*;
use rocketns::protocol::DataVersion;

const CLUSTER_INFO: &[u8] = include_bytes!("fixtures/cluster_info.json");

/// RouteInfoManagerNewTest's fixture: acting master enabled on both members.
fn master() -> Broker<'static> {
    Broker {
        ha_addr: "127.0.0.1:20911",
        acting_master: Some(true),
        ..Broker::new("Default_Cluster", "Default_Broker", 0, "127.0.0.1:10911")
    }
}

fn slave() -> Broker<'static> {
    Broker {
        ha_addr: "127.0.0.1:40911",
        acting_master: Some(true),
        ..Broker::new("Default_Cluster", "Default_Broker", 1, "127.0.0.1:30911")
    }
}

fn without_acting_master(b: Broker<'static>) -> Broker<'static> {
    Broker { acting_master: Some(false), ..b }
}

const TOPICS: &[(&str, i32, i32)] = &[("baseTopic", 16, 6), ("TopicA", 8, 6)];

/// RouteInfoManagerNewTest#registerBroker: a master gets no master address; a slave gets its master's
/// address and HA address.
#[tokio::test]
async fn slave_learns_its_master() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = register(&mut c, &master(), dv(1), TOPICS).await;
    assert_eq!(resp.ext_fields, Some(ext(&[])), "Java attaches an empty header to a master's reply");
    assert!(resp.body.is_empty());
    let resp = register(&mut c, &slave(), dv(1), TOPICS).await;
    assert_eq!(resp.ext("masterAddr"), Some("127.0.0.1:10911"));
    assert_eq!(resp.ext("haServerAddr"), Some("127.0.0.1:20911"));
}

/// RouteInfoManagerNewTest#registerSlaveBroker and #createNewTopic.
#[tokio::test]
async fn slave_joins_route_and_new_topics_carry_both() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &master(), dv(1), TOPICS).await;
    register(&mut c, &slave(), dv(1), TOPICS).await;
    let r = route(&mut c, "TopicA").await.unwrap();
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(0, "127.0.0.1:10911".into()), (1, "127.0.0.1:30911".into())]);
    register(&mut c, &master(), dv(2), &[("baseTopic", 16, 6), ("TopicA", 8, 6), ("NewTopic", 8, 6)]).await;
    let r = route(&mut c, "NewTopic").await.unwrap();
    assert_eq!(broker_addrs(&r, "Default_Broker").len(), 2);
    assert_eq!(r["queueDatas"][0]["readQueueNums"], 8);
}

/// RouteInfoManagerNewTest#switchBrokerRole (acting master off).
#[tokio::test]
async fn switch_broker_role() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let (m, s) = (without_acting_master(master()), without_acting_master(slave()));
    register(&mut c, &m, dv(1), TOPICS).await;
    register(&mut c, &s, dv(1), TOPICS).await;
    assert_eq!(c.request(unregister_request(&m)).await.code, 0);
    let mut addrs = vec![];
    for _ in 0..100 {
        addrs = broker_addrs(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker");
        if addrs.len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(addrs, vec![(1, "127.0.0.1:30911".into())]);
    // The slave comes back as master with a newer DataVersion.
    register(&mut c, &Broker { id: 0, ..s.clone() }, dv(2), TOPICS).await;
    assert_eq!(
        broker_addrs(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker"),
        vec![(0, "127.0.0.1:30911".into())]
    );
    // The old master rejoins as a slave.
    register(&mut c, &Broker { id: 1, ..m }, dv(2), TOPICS).await;
    assert_eq!(
        broker_addrs(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker"),
        vec![(0, "127.0.0.1:30911".into()), (1, "127.0.0.1:10911".into())]
    );
}

async fn wait_addrs(c: &mut Client, topic: &str, want: usize) -> serde_json::Value {
    wait_for(c, topic, |r| broker_addrs(r, "Default_Broker").len() == want).await
}

/// Master `m` and slave `s` register TOPICS, then `leaving` (one of them) unregisters: TopicA's route once
/// it has left.
async fn pair_after_one_left(
    c: &mut Client,
    m: &Broker<'_>,
    s: &Broker<'_>,
    leaving: &Broker<'_>,
) -> serde_json::Value {
    register(c, m, dv(1), TOPICS).await;
    register(c, s, dv(1), TOPICS).await;
    c.request(unregister_request(leaving)).await;
    wait_addrs(c, "TopicA", 1).await
}

/// RouteInfoManagerNewTest#unRegisterSlaveBroker.
#[tokio::test]
async fn unregister_slave_keeps_master() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let r = pair_after_one_left(&mut c, &master(), &slave(), &slave()).await;
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(0, "127.0.0.1:10911".into())]);
    assert_eq!(queue_perm(&r, "Default_Broker"), 6);
}

/// RouteInfoManagerNewTest#unRegisterMasterBroker (the perm part; the id-0 rewrite needs
/// `supportActingMaster`, which comes with the protocol issue) and #unRegisterMasterBrokerOldVersion.
#[tokio::test]
async fn master_leaving_stops_writes_only_with_acting_master() {
    for (acting, want_perm) in [(true, 4), (false, 6)] {
        let server = start().await;
        let mut c = Client::connect(server.addr).await;
        let (m, s) = if acting {
            (master(), slave())
        } else {
            (without_acting_master(master()), without_acting_master(slave()))
        };
        let r = pair_after_one_left(&mut c, &m, &s, &m).await;
        assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(1, "127.0.0.1:30911".into())]);
        assert_eq!(queue_perm(&r, "Default_Broker"), want_perm, "acting master {acting}");
    }
}

/// RouteInfoManagerNewTest#pickupTopicRouteDataWithSlave and #registerOnlySlaveBroker.
#[tokio::test]
async fn lone_slave_is_read_only_until_master_returns() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &slave(), dv(1), TOPICS).await;
    let r = route(&mut c, "TopicA").await.expect("a prime slave creates the route");
    assert_eq!(queue_perm(&r, "Default_Broker"), 4);
    register(&mut c, &master(), dv(1), TOPICS).await;
    assert_eq!(queue_perm(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker"), 6);
    c.request(unregister_request(&master())).await;
    let r = wait_addrs(&mut c, "TopicA", 1).await;
    assert_eq!(queue_perm(&r, "Default_Broker"), 4);
    register(&mut c, &master(), dv(1), TOPICS).await;
    let r = route(&mut c, "TopicA").await.unwrap();
    assert_eq!(broker_addrs(&r, "Default_Broker").len(), 2);
    assert_eq!(queue_perm(&r, "Default_Broker"), 6);
}

/// 4.x brokers send no `enableActingMaster`: only their master defines queues.
#[tokio::test]
async fn old_version_slave_alone_creates_no_route() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker { acting_master: None, ..slave() }, dv(1), TOPICS).await;
    assert!(route(&mut c, "TopicA").await.is_none());
}

/// RouteInfoManagerNewTest#pickupTopicRouteData and #submitMultiUnRegisterRequests.
#[tokio::test]
async fn two_broker_groups_and_batch_unregistration() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let a = Broker::new("Default_Cluster", "broker-a", 0, "127.0.0.1:10911");
    let b = Broker::new("Default_Cluster", "broker-b", 0, "127.0.0.1:10921");
    register(&mut c, &a, dv(1), &[("baseTopic", 8, 6), ("TopicA", 8, 6)]).await;
    let r = route(&mut c, "baseTopic").await.unwrap();
    assert_eq!(
        r["queueDatas"],
        serde_json::json!([{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}])
    );
    register(&mut c, &b, dv(1), &[("baseTopic", 8, 6), ("TopicB", 8, 6)]).await;
    let r = route(&mut c, "baseTopic").await.unwrap();
    assert_eq!(r["brokerDatas"].as_array().unwrap().len(), 2);
    assert_eq!(r["queueDatas"].as_array().unwrap().len(), 2);
    c.send(unregister_request(&a), rocketns::remoting::SerializeType::Json).await;
    c.send(unregister_request(&b), rocketns::remoting::SerializeType::Json).await;
    assert_eq!(c.read_response().await.unwrap().code, 0);
    assert_eq!(c.read_response().await.unwrap().code, 0);
    for t in ["TopicA", "TopicB", "baseTopic"] {
        wait_route_gone(&mut c, t).await;
    }
    assert_eq!(&c.request(request(106, &[])).await.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
}

/// RouteInfoManagerNewTest#onChannelDestroy: a closed connection removes the brokers registered over it.
#[tokio::test]
async fn closed_connection_removes_its_brokers() {
    let server = start().await;
    let mut observer = Client::connect(server.addr).await;
    let mut m = Client::connect(server.addr).await;
    let mut s = Client::connect(server.addr).await;
    register(&mut m, &master(), dv(1), TOPICS).await;
    register(&mut s, &slave(), dv(1), TOPICS).await;
    drop(m);
    let r = wait_addrs(&mut observer, "TopicA", 1).await;
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(1, "127.0.0.1:30911".into())]);
    drop(s);
    wait_route_gone(&mut observer, "TopicA").await;
}

/// BrokerHousekeepingServiceTest#testOnChannelClose (and, with the idle test of wire_liveness.rs,
/// #testOnChannelIdle): a connection that registered no broker closing changes nothing.
#[tokio::test]
async fn client_connection_close_is_harmless() {
    let server = start().await;
    let mut broker = Client::connect(server.addr).await;
    register(&mut broker, &master(), dv(1), TOPICS).await;
    for _ in 0..5 {
        let mut client = Client::connect(server.addr).await;
        assert!(route(&mut client, "TopicA").await.is_some());
    }
    assert!(route(&mut broker, "TopicA").await.is_some());
}

/// RouteInfoManagerNewTest#keepTopicWithBrokerRegistration, #deleteTopicWithBrokerRegistration and
/// #deleteTopicWithBrokerRegistration2.
#[tokio::test]
async fn topics_missing_from_a_registration() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &master(), dv(1), &[("baseTopic", 8, 6), ("Dropped", 8, 6)]).await;
    register(&mut c, &master(), dv(2), &[("baseTopic", 8, 6), ("Other", 8, 6)]).await;
    assert!(route(&mut c, "Dropped").await.is_some(), "kept by default");

    let mut config = test_config();
    config.delete_topic_with_broker_registration = true;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let a = Broker::new("c", "broker-a", 0, "127.0.0.1:10911");
    let b = Broker::new("c", "broker-b", 0, "127.0.0.1:10921");
    register(&mut c, &a, dv(1), &[("baseTopic", 8, 6), ("Shared", 8, 6)]).await;
    register(&mut c, &b, dv(1), &[("baseTopic", 8, 6), ("Shared", 8, 6)]).await;
    register(&mut c, &a, dv(2), &[("baseTopic", 8, 6), ("Other", 8, 6)]).await;
    let r = route(&mut c, "Shared").await.expect("broker-b still has it");
    assert_eq!(r["queueDatas"].as_array().unwrap().len(), 1);
    assert_eq!(r["queueDatas"][0]["brokerName"], "broker-b");
    register(&mut c, &b, dv(2), &[("baseTopic", 8, 6), ("Other", 8, 6)]).await;
    assert!(route(&mut c, "Shared").await.is_none());
}

fn register_topic_request(topic: &str, broker: &str) -> rocketns::remoting::RemotingCommand {
    let mut r = request(217, &[("topic", topic)]);
    r.body = Bytes::from(format!(
        r#"{{"brokerDatas":[],"filterServerTable":{{}},"queueDatas":[{{"brokerName":"{broker}","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}}]}}"#
    ));
    r
}

/// RouteInfoManagerNewTest#registerSingleTopicWithBrokerRegistration.
#[tokio::test]
async fn register_topic_in_namesrv() {
    let mut config = test_config();
    config.delete_topic_with_broker_registration = true;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(register_topic_request("Single", "Default_Broker")).await;
    assert_eq!(resp.code, 0, "always SUCCESS, even when ignored");
    assert!(route(&mut c, "Single").await.is_none(), "unknown broker name: ignored");
    register(&mut c, &master(), dv(1), TOPICS).await;
    assert_eq!(c.request(register_topic_request("Single", "Default_Broker")).await.code, 0);
    let r = route(&mut c, "Single").await.expect("registered");
    assert_eq!(r["queueDatas"][0]["readQueueNums"], 4);
    register(&mut c, &master(), dv(2), TOPICS).await;
    assert!(route(&mut c, "Single").await.is_none(), "a full registration without it deletes it");
    assert_eq!(c.request(register_topic_request("Single", "Default_Broker")).await.code, 0);
    c.request(unregister_request(&master())).await;
    for t in ["Single", "TopicA", "baseTopic"] {
        wait_route_gone(&mut c, t).await;
    }
}

/// Code 217 was GET_KV_CONFIG_BY_VALUE for old clients: `namespace`/`key` and no `topic` never register.
#[tokio::test]
async fn old_get_kv_config_by_value_registers_nothing() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &master(), dv(1), TOPICS).await;
    let mut r = register_topic_request("ignored", "Default_Broker");
    r.ext_fields = Some(ext(&[("namespace", "ORDER_TOPIC_CONFIG"), ("key", "Default_Broker")]));
    assert_eq!(c.request(r).await.code, 0);
    let list: serde_json::Value = serde_json::from_slice(&c.request(request(206, &[])).await.body).unwrap();
    assert_eq!(list, serde_json::json!({"topicList": ["TopicA", "baseTopic"]}));
}

/// §4.2 step 7: an unknown broker id may not start with a one-topic (incremental) registration.
#[tokio::test]
async fn first_registration_with_one_topic_fails() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(register_request(&master(), dv(1), &[("Only", 8, 6)])).await;
    assert_eq!(resp.code, 1);
    assert_eq!(resp.remark.as_deref(), Some("register broker failed"));
    assert!(route(&mut c, "Only").await.is_none());
    let info = c.request(request(106, &[])).await;
    assert_eq!(
        std::str::from_utf8(&info.body).unwrap(),
        r#"{"brokerAddrTable":{"Default_Broker":{"brokerAddrs":{},"brokerName":"Default_Broker","cluster":"Default_Cluster","enableActingMaster":true}},"clusterAddrTable":{"Default_Cluster":["Default_Broker"]}}"#
    );
    // Once registered, a one-topic registration (a topic created on the broker) is accepted.
    register(&mut c, &master(), dv(1), TOPICS).await;
    register(&mut c, &master(), dv(2), &[("Only", 8, 6)]).await;
    assert!(route(&mut c, "Only").await.is_some());
}

/// §4.2 step 6: a registration whose stateVersion is older than the live holder of its id is ignored.
#[tokio::test]
async fn stale_state_version_is_ignored() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let newer = DataVersion { state_version: 5, ..dv(1) };
    register(&mut c, &master(), newer, TOPICS).await;
    let usurper = Broker { addr: "127.0.0.1:50911", ..master() };
    let stale = DataVersion { state_version: 3, ..dv(9) };
    register(&mut c, &usurper, stale, TOPICS).await;
    assert_eq!(
        broker_addrs(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker"),
        vec![(0, "127.0.0.1:10911".into())]
    );
    let q = c
        .request(request(
            322,
            &[
                ("clusterName", "Default_Cluster"),
                ("brokerAddr", "127.0.0.1:50911"),
                ("brokerName", "Default_Broker"),
                ("brokerId", "0"),
            ],
        ))
        .await;
    assert_eq!(q.ext("changed"), Some("true"), "the rejected address is not live");
}

/// RouteInfoManagerBrokerRegisterTest#testMasterChangeFromSlave and #testUnregisterBroker.
#[tokio::test]
async fn master_change_from_slave_and_unregister_by_id() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let ids = [(0, "cluster-broker-0:0"), (1, "cluster-broker-0:1"), (2, "cluster-broker-0:2")];
    for (id, addr) in ids {
        register(&mut c, &Broker::new("cluster", "broker-0", id, addr), dv(1), &[("topic-0", 8, 6), ("topic-1", 8, 6)])
            .await;
    }
    register(
        &mut c,
        &Broker::new("cluster", "broker-0", 0, "cluster-broker-0:1"),
        dv(2),
        &[("topic-0", 8, 6), ("topic-1", 8, 6)],
    )
    .await;
    let r = route(&mut c, "topic-0").await.unwrap();
    assert_eq!(broker_addrs(&r, "broker-0"), vec![(0, "cluster-broker-0:1".into()), (2, "cluster-broker-0:2".into())]);
    c.request(unregister_request(&Broker::new("cluster", "broker-0", 2, "cluster-broker-0:2"))).await;
    for _ in 0..100 {
        let r = route(&mut c, "topic-0").await.unwrap();
        if broker_addrs(&r, "broker-0") == vec![(0, "cluster-broker-0:1".to_string())] {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("id 2 was not removed");
}

/// RouteInfoManagerStaticRegisterTest: 3 broker names × ids 0,1,2 × 10 topics.
#[tokio::test]
async fn static_register_fixture() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let names = ["broker-0", "broker-1", "broker-2"];
    let topic_names: Vec<String> = (0..10).map(|i| format!("topic-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = topic_names.iter().map(|t| (t.as_str(), 8, 6)).collect();
    let addrs: Vec<Vec<String>> =
        names.iter().map(|n| (0..3).map(|id| format!("cluster-{n}:{id}")).collect()).collect();
    for (n, name) in names.iter().enumerate() {
        for id in 0..3 {
            register(&mut c, &Broker::new("cluster", name, id, &addrs[n][id as usize]), dv(1), &topics).await;
        }
    }
    let info: serde_json::Value = serde_json::from_slice(
        &rocketns::protocol::lenient::quote_bare_keys(&c.request(request(106, &[])).await.body).unwrap(),
    )
    .unwrap();
    assert_eq!(info["clusterAddrTable"], serde_json::json!({"cluster": names}));
    let list: serde_json::Value = serde_json::from_slice(&c.request(request(206, &[])).await.body).unwrap();
    let mut sorted = topic_names.clone();
    sorted.sort();
    assert_eq!(list["topicList"], serde_json::json!(sorted));
    for t in &topic_names {
        let r = route(&mut c, t).await.unwrap();
        let datas = r["brokerDatas"].as_array().unwrap();
        assert_eq!(datas.iter().map(|b| b["brokerName"].as_str().unwrap()).collect::<Vec<_>>(), names);
        for (n, name) in names.iter().enumerate() {
            let want: Vec<(i64, String)> = (0..3).map(|id| (id, addrs[n][id as usize].clone())).collect();
            assert_eq!(broker_addrs(&r, name), want);
        }
        for q in r["queueDatas"].as_array().unwrap() {
            assert_eq!(
                (
                    q["readQueueNums"].as_i64(),
                    q["writeQueueNums"].as_i64(),
                    q["perm"].as_i64(),
                    q["topicSysFlag"].as_i64()
                ),
                (Some(8), Some(8), Some(6), Some(0))
            );
        }
    }
}

#[tokio::test]
async fn cluster_info_matches_java() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(&c.request(request(106, &[])).await.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
    register(&mut c, &Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911"), dv(1), TOPICS).await;
    let resp = c.request(request(106, &[])).await;
    assert_eq!(resp.code, 0);
    assert_eq!(&resp.body[..], CLUSTER_INFO);
}

#[tokio::test]
async fn crc_is_checked_unless_zero() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let mut bad = register_request(&master(), dv(1), TOPICS);
    bad.ext_fields.as_mut().unwrap().insert("bodyCrc32", "12345");
    let resp = c.request(bad).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("crc32 not match")));
    assert_eq!(resp.ext_fields, Some(ext(&[])));
    assert!(route(&mut c, "TopicA").await.is_none());
    let mut unchecked = register_request(&master(), dv(1), TOPICS);
    unchecked.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
    assert_eq!(c.request(unchecked).await.code, 0);
    assert!(route(&mut c, "TopicA").await.is_some());
}

/// The compressed body of protocol.md §2.4.1, with and without the `compressed` flag (5.x brokers never set it).
#[tokio::test]
async fn compressed_registration() {
    use rocketns::protocol::TopicConfig;
    let topic = |n: &str| TopicConfig::new(n, 4, 4, 6);
    let body = rocketns::testing::register_body_compressed(&dv(1), &[topic("TopicTest"), topic("T2")], &[]);
    for compressed in ["true", "false"] {
        let server = start().await;
        let mut c = Client::connect(server.addr).await;
        let mut r = register_request(&master(), dv(1), &[]);
        r.ext_fields.as_mut().unwrap().insert("compressed", compressed);
        r.ext_fields.as_mut().unwrap().insert("bodyCrc32", (crc32fast::hash(&body) & 0x7FFF_FFFF).to_string());
        r.body = Bytes::from(body.clone());
        assert_eq!(c.request(r).await.code, 0, "compressed={compressed}");
        let route = route(&mut c, "TopicTest").await.expect("registered");
        assert_eq!(route["queueDatas"][0]["writeQueueNums"], 4);
    }
}

#[tokio::test]
async fn bad_registrations_get_clear_errors_and_change_nothing() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &master(), dv(1), TOPICS).await;
    type Mutate = Box<dyn Fn(&mut rocketns::remoting::RemotingCommand)>;
    let cases: Vec<(&str, Mutate, &str)> = vec![
        (
            "no brokerId",
            Box::new(|r| {
                r.ext_fields = Some(ext(&[("brokerName", "x"), ("brokerAddr", "1.1.1.1:1"), ("clusterName", "c")]));
            }),
            "missing header field brokerId",
        ),
        (
            "brokerId not a number",
            Box::new(|r| {
                r.ext_fields.as_mut().unwrap().insert("brokerId", "abc");
            }),
            "header field brokerId has an invalid value \"abc\"",
        ),
        (
            "no clusterName",
            Box::new(|r| {
                r.ext_fields = Some(ext(&[("brokerName", "x"), ("brokerAddr", "1.1.1.1:1"), ("brokerId", "0")]));
            }),
            "missing header field clusterName",
        ),
        (
            "garbage body",
            Box::new(|r| {
                r.body = Bytes::from_static(b"{not json");
                r.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
            }),
            "invalid registration body JSON",
        ),
    ];
    for (what, mutate, remark) in cases {
        let mut r = register_request(&Broker::new("c", "x", 0, "1.1.1.1:1"), dv(1), TOPICS);
        mutate(&mut r);
        let resp = c.request(r).await;
        assert_eq!(resp.code, 1, "{what}");
        assert!(resp.remark.as_deref().unwrap_or("").starts_with(remark), "{what}: {:?}", resp.remark);
    }
    assert_eq!(broker_addrs(&route(&mut c, "TopicA").await.unwrap(), "Default_Broker").len(), 1);
    let list: serde_json::Value = serde_json::from_slice(&c.request(request(206, &[])).await.body).unwrap();
    assert_eq!(list, serde_json::json!({"topicList": ["TopicA", "baseTopic"]}));
}

/// RouteInfoManagerNewTest#isBrokerTopicConfigChanged / #queryBrokerTopicConfig over QUERY_DATA_VERSION,
/// and RouteInfoManagerTest#testQueryBrokerTopicConfig (one address in two clusters).
#[tokio::test]
async fn query_data_version() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let query = |cluster: &str, body: Option<DataVersion>| {
        let mut r = request(
            322,
            &[
                ("clusterName", cluster),
                ("brokerAddr", "127.0.0.1:10911"),
                ("brokerName", "Default_Broker"),
                ("brokerId", "0"),
            ],
        );
        if let Some(dv) = body {
            r.body = Bytes::from(dv.to_json());
        }
        r
    };
    let resp = c.request(query("Default_Cluster", None)).await;
    assert_eq!((resp.code, resp.ext("changed")), (0, Some("true")));
    assert!(resp.body.is_empty());
    register(&mut c, &master(), dv(1), TOPICS).await;
    let resp = c.request(query("Default_Cluster", Some(dv(1)))).await;
    assert_eq!(resp.ext("changed"), Some("false"));
    assert_eq!(&resp.body[..], br#"{"counter":1,"stateVersion":0,"timestamp":1700000000000}"#);
    assert_eq!(
        c.request(query("Default_Cluster", Some(DataVersion { timestamp: 1, ..dv(1) }))).await.ext("changed"),
        Some("true")
    );
    assert_eq!(c.request(query("Default_Cluster", Some(dv(2)))).await.ext("changed"), Some("true"));
    // The same address in a second cluster keeps its own DataVersion.
    register(&mut c, &Broker { cluster: "Default_Cluster_1", ..master() }, dv(7), TOPICS).await;
    assert_eq!(c.request(query("Default_Cluster_1", Some(dv(7)))).await.ext("changed"), Some("false"));
    assert_eq!(c.request(query("Default_Cluster", Some(dv(1)))).await.ext("changed"), Some("false"));
    c.request(unregister_request(&Broker { cluster: "Default_Cluster_1", ..master() })).await;
    for _ in 0..100 {
        if c.request(query("Default_Cluster_1", Some(dv(7)))).await.ext("changed") == Some("true") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(c.request(query("Default_Cluster_1", Some(dv(7)))).await.ext("changed"), Some("true"));
    assert_eq!(c.request(query("Default_Cluster", Some(dv(1)))).await.ext("changed"), Some("false"));
}

/// RequestProcessorTest#testBrokerHeartBeat, #testProcessRequest_UnregisterBroker (SUCCESS at once),
/// #testGetAllTopicList and #testProcessRequest_RegisterBroker (a request version 0 body without topics).
#[tokio::test]
async fn request_processor_cases() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let hb = request(904, &[("clusterName", "c"), ("brokerAddr", "a"), ("brokerName", "b")]);
    assert_eq!(c.request(hb).await.code, 0);
    let mut old = request(
        103,
        &[
            ("brokerName", "broker"),
            ("brokerAddr", "10.10.1.1"),
            ("clusterName", "cluster"),
            ("brokerId", "2333"),
            ("haServerAddr", "10.10.1.2"),
        ],
    );
    old.version = 0;
    old.body = Bytes::from_static(br#"{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{}}"#);
    assert_eq!(c.request(old).await.code, 0);
    let info = String::from_utf8(c.request(request(106, &[])).await.body.to_vec()).unwrap();
    assert!(info.contains(r#""brokerAddrs":{2333:"10.10.1.1"}"#), "{info}");
    let resp = c.request(unregister_request(&Broker::new("cluster", "broker", 2333, "10.10.1.1"))).await;
    assert_eq!((resp.code, resp.remark), (0, None));
    let resp = c.request(request(206, &[])).await;
    assert_eq!((resp.code, &resp.body[..]), (0, &br#"{"topicList":[]}"#[..]));
    let mut disabled = test_config();
    disabled.enable_all_topic_list = false;
    let server = start_with(disabled).await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(request(206, &[])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("disable")));
}

/// RouteInfoManagerNewTest#switchBrokerRole_ChannelDestroy: the role switch driven by a closed connection.
#[tokio::test]
async fn switch_broker_role_by_connection_close() {
    let server = start().await;
    let mut observer = Client::connect(server.addr).await;
    let (m, s) = (without_acting_master(master()), without_acting_master(slave()));
    let mut master_conn = Client::connect(server.addr).await;
    let mut slave_conn = Client::connect(server.addr).await;
    register(&mut master_conn, &m, dv(1), TOPICS).await;
    register(&mut slave_conn, &s, dv(1), TOPICS).await;
    drop(master_conn);
    let r = wait_addrs(&mut observer, "TopicA", 1).await;
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(1, "127.0.0.1:30911".into())]);
    register(&mut slave_conn, &Broker { id: 0, ..s }, dv(2), TOPICS).await;
    let r = route(&mut observer, "TopicA").await.unwrap();
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(0, "127.0.0.1:30911".into())]);
    let mut old_master = Client::connect(server.addr).await;
    register(&mut old_master, &Broker { id: 1, ..m }, dv(2), TOPICS).await;
    let r = route(&mut observer, "TopicA").await.unwrap();
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(0, "127.0.0.1:30911".into()), (1, "127.0.0.1:10911".into())]);
}

/// RouteInfoManagerNewTest#getAllClusterInfo: two clusters, their broker names and master addresses.
#[tokio::test]
async fn cluster_info_with_two_clusters() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker::new("cluster-1", "broker-1", 0, "127.0.0.1:10911"), dv(1), TOPICS).await;
    register(&mut c, &Broker::new("cluster-2", "broker-2", 0, "127.0.0.1:10921"), dv(1), TOPICS).await;
    let body = c.request(request(106, &[])).await.body;
    let info: serde_json::Value =
        serde_json::from_slice(&rocketns::protocol::lenient::quote_bare_keys(&body).expect("bare ids")).unwrap();
    assert_eq!(info["clusterAddrTable"], serde_json::json!({"cluster-1": ["broker-1"], "cluster-2": ["broker-2"]}));
    assert_eq!(info["brokerAddrTable"]["broker-1"]["brokerAddrs"]["0"], "127.0.0.1:10911");
    assert_eq!(info["brokerAddrTable"]["broker-2"]["cluster"], "cluster-2");
}

/// Filter servers of a registration appear in the routes of its topics, and an empty list removes them.
/// Also RequestProcessorTest#testProcessRequest_RegisterBrokerWithFilterServer: topic configs without a
/// `topicName` are skipped and the registration still succeeds.
#[tokio::test]
async fn filter_servers_follow_registrations() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let b = Broker::new("c", "broker-a", 0, "127.0.0.1:10911");
    let with_filters = |list: &str| {
        let mut r = register_request(&b, dv(1), TOPICS);
        let body = String::from_utf8(r.body.to_vec()).unwrap().replace(r#""filterServerList":[]"#, list);
        r.ext_fields
            .as_mut()
            .unwrap()
            .insert("bodyCrc32", (crc32fast::hash(body.as_bytes()) & 0x7FFF_FFFF).to_string());
        r.body = Bytes::from(body);
        r
    };
    assert_eq!(c.request(with_filters(r#""filterServerList":["127.0.0.1:30000"]"#)).await.code, 0);
    let r = route(&mut c, "TopicA").await.unwrap();
    assert_eq!(r["filterServerTable"], serde_json::json!({"127.0.0.1:10911": ["127.0.0.1:30000"]}));
    assert_eq!(c.request(with_filters(r#""filterServerList":[]"#)).await.code, 0);
    assert_eq!(route(&mut c, "TopicA").await.unwrap()["filterServerTable"], serde_json::json!({}));

    let mut nameless = register_request(&Broker::new("c", "broker-b", 0, "127.0.0.1:10921"), dv(1), &[]);
    nameless.body = Bytes::from_static(
        br#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"unit-test0":{"readQueueNums":8},"unit-test1":{"perm":6}}}}"#,
    );
    nameless.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
    assert_eq!(c.request(nameless).await.code, 0);
    let info = String::from_utf8(c.request(request(106, &[])).await.body.to_vec()).unwrap();
    assert!(info.contains(r#""broker-b":{"brokerAddrs":{0:"127.0.0.1:10921"}"#), "{info}");
}

/// `supportActingMaster` changed while running (UPDATE_NAMESRV_CONFIG, as Java allows; found by the
/// generated sequences): the master-less group's route shows its slave as the acting master (id 0) at once,
/// and as id 1 again when the switch goes off.
#[tokio::test]
async fn acting_master_follows_a_live_config_update() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let r = pair_after_one_left(&mut c, &master(), &slave(), &master()).await;
    assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(1, "127.0.0.1:30911".into())], "switch off");
    for (on, want_id) in [(true, 0), (false, 1)] {
        let resp = c.request(update_config(&format!("supportActingMaster={on}"))).await;
        assert_eq!(resp.code, 0, "{:?}", resp.remark);
        let r = wait_for(&mut c, "TopicA", |r| broker_addrs(r, "Default_Broker")[0].0 == want_id).await;
        assert_eq!(broker_addrs(&r, "Default_Broker"), vec![(want_id, "127.0.0.1:30911".into())]);
    }
}

/// A registration whose `brokerAddr` or `haServerAddr` is longer than any host name and port (261 bytes) is
/// refused, naming the field and the bound, and nothing of it is kept: Java takes any (COMPATIBILITY.md
/// `broker-address-length`), and a 4 MB address, quoted by every notice and every route, had made 24 MB of
/// log a notice cycle (issue 44). The longest that fits registers.
#[tokio::test]
async fn a_broker_address_longer_than_a_host_and_port_is_refused() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let long = "x".repeat(100_000);
    let b = Broker::new("DefaultCluster", "broker-a", 0, &long);
    let refused = c.request(register_request(&b, dv(1), &[("t", 8, 8), ("u", 8, 8)])).await;
    assert_eq!(refused.code, 1, "{refused:?}");
    assert_eq!(refused.remark.as_deref(), Some("header field brokerAddr of 100000 bytes: at most 261"));
    let mut ha = register_request(&master(), dv(1), &[("t", 8, 8), ("u", 8, 8)]);
    ha.ext_fields.as_mut().unwrap().insert("haServerAddr", "h".repeat(262));
    let refused = c.request(ha).await;
    assert_eq!(refused.remark.as_deref(), Some("header field haServerAddr of 262 bytes: at most 261"));
    assert_eq!(&c.request(request(106, &[])).await.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);

    let longest = format!("{}:10911", "h".repeat(255));
    let b = Broker::new("DefaultCluster", "broker-a", 0, &longest);
    let registered = c.request(register_request(&b, dv(1), &[("t", 8, 8), ("u", 8, 8)])).await;
    assert_eq!(registered.code, 0, "{registered:?}");
}
