//! Topic administration and 5.x routing over the wire: write permissions, topic deletion, topic lists,
//! broker member groups, the acting-master rewrite, zone routing, static topics, the readiness gate, and
//! batch unregistration. Each test names the Java test it mirrors, where one exists.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketns::protocol::DataVersion;
use rocketns::remoting::{RemotingCommand, SerializeType};

const TOPICS: &[(&str, i32, i32)] = &[("unit-test0", 8, 6), ("unit-test1", 8, 6)];

fn broker_a() -> Broker<'static> {
    Broker::new("default-cluster", "default-broker", 0, "127.0.0.1:10911")
}

fn list(resp: &RemotingCommand) -> serde_json::Value {
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    serde_json::from_slice(&resp.body).expect("TopicList JSON")
}

/// RouteInfoManagerTest#testWipeWritePermOfBrokerByLock / #testAddWritePermOfBrokerByLock,
/// RouteInfoManagerNewTest#wipeWritePermOfBrokerByLock, RouteInfoManagerBrokerPermTest (both cases),
/// RequestProcessorTest#testWipeWritePermOfBroker / #testAddWritePermOfBroker.
#[tokio::test]
async fn wipe_and_add_write_permission() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker_a(), dv(1), &[("unit-test0", 8, 6), ("unit-test1", 8, 7)]).await;
    let wipe = || request(205, &[("brokerName", "default-broker")]);
    let resp = c.request(wipe()).await;
    assert_eq!((resp.code, resp.ext("wipeTopicCount")), (0, Some("2")));
    assert_eq!(queue_perm(&route(&mut c, "unit-test0").await.unwrap(), "default-broker"), 4);
    assert_eq!(queue_perm(&route(&mut c, "unit-test1").await.unwrap(), "default-broker"), 5);
    assert_eq!(c.request(wipe()).await.ext("wipeTopicCount"), Some("2"), "already read-only still counts");
    // A periodic re-registration with the same DataVersion keeps the operator's change.
    register(&mut c, &broker_a(), dv(1), &[("unit-test0", 8, 6), ("unit-test1", 8, 7)]).await;
    assert_eq!(queue_perm(&route(&mut c, "unit-test0").await.unwrap(), "default-broker"), 4);
    let resp = c.request(request(327, &[("brokerName", "default-broker")])).await;
    assert_eq!((resp.code, resp.ext("addTopicCount")), (0, Some("2")));
    assert_eq!(queue_perm(&route(&mut c, "unit-test0").await.unwrap(), "default-broker"), 6);
    assert_eq!(queue_perm(&route(&mut c, "unit-test1").await.unwrap(), "default-broker"), 6, "exactly RW");
    let resp = c.request(request(205, &[("brokerName", "unknown")])).await;
    assert_eq!(resp.ext("wipeTopicCount"), Some("0"));
    // A new DataVersion re-applies the broker's own permissions.
    c.request(wipe()).await;
    register(&mut c, &broker_a(), dv(2), &[("unit-test0", 8, 6), ("unit-test1", 8, 7)]).await;
    assert_eq!(queue_perm(&route(&mut c, "unit-test1").await.unwrap(), "default-broker"), 7);
    let resp = c.request(request(205, &[])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("missing header field brokerName")));
}

/// RouteInfoManagerNewTest#deleteTopic, RouteInfoManagerStaticRegisterTest#testDeleteTopic,
/// RequestProcessorTest#testDeleteTopicInNamesrv.
#[tokio::test]
async fn delete_topic_everywhere_or_per_cluster() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let a = Broker::new("cluster-1", "broker-a", 0, "127.0.0.1:10911");
    let b = Broker::new("cluster-2", "broker-b", 0, "127.0.0.1:10921");
    register(&mut c, &a, dv(1), &[("Shared", 8, 6), ("OnlyA", 8, 6)]).await;
    register(&mut c, &b, dv(1), &[("Shared", 8, 6), ("OnlyB", 8, 6)]).await;
    assert_eq!(c.request(request(216, &[("topic", "Shared"), ("clusterName", "unknown")])).await.code, 0);
    assert_eq!(route(&mut c, "Shared").await.unwrap()["queueDatas"].as_array().unwrap().len(), 2);
    assert_eq!(c.request(request(216, &[("topic", "Shared"), ("clusterName", "cluster-1")])).await.code, 0);
    let r = route(&mut c, "Shared").await.unwrap();
    assert_eq!(r["queueDatas"].as_array().unwrap().len(), 1);
    assert_eq!(r["queueDatas"][0]["brokerName"], "broker-b");
    assert_eq!(c.request(request(216, &[("topic", "OnlyA")])).await.code, 0);
    assert!(route(&mut c, "OnlyA").await.is_none());
    assert_eq!(c.request(request(216, &[("topic", "NeverExisted")])).await.code, 0);
    // A broker that still has the topic brings it back with its next registration.
    register(&mut c, &a, dv(1), &[("Shared", 8, 6), ("OnlyA", 8, 6)]).await;
    assert!(route(&mut c, "OnlyA").await.is_some());
    assert_eq!(list(&c.request(request(206, &[])).await)["topicList"], serde_json::json!(["OnlyA", "OnlyB", "Shared"]));
}

/// RouteInfoManagerTest#testGetTopicsByCluster, RouteInfoManagerStaticRegisterTest#testGetTopicsByCluster,
/// RequestProcessorTest#testGetTopicsByCluster.
#[tokio::test]
async fn topics_by_cluster() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker::new("cluster-1", "broker-a", 0, "127.0.0.1:10911"), dv(1), &[("A", 8, 6), ("S", 8, 6)])
        .await;
    register(&mut c, &Broker::new("cluster-2", "broker-b", 0, "127.0.0.1:10921"), dv(1), &[("B", 8, 6), ("S", 8, 6)])
        .await;
    assert_eq!(
        list(&c.request(request(224, &[("cluster", "cluster-1")])).await)["topicList"],
        serde_json::json!(["A", "S"])
    );
    assert_eq!(
        list(&c.request(request(224, &[("cluster", "cluster-2")])).await)["topicList"],
        serde_json::json!(["B", "S"])
    );
    assert_eq!(&c.request(request(224, &[("cluster", "nope")])).await.body[..], br#"{"topicList":[]}"#);
    let resp = c.request(request(224, &[("clusterName", "cluster-1")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("missing header field cluster")), "the key is `cluster`");
}

/// RouteInfoManagerTest#testGetSystemTopicList, RequestProcessorTest#testGetSystemTopicListFromNs.
#[tokio::test]
async fn system_topic_list() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(&c.request(request(304, &[])).await.body[..], br#"{"topicList":[]}"#);
    register(&mut c, &Broker::new("DefaultCluster", "broker-b", 0, "192.168.0.2:10911"), dv(1), TOPICS).await;
    register(&mut c, &Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911"), dv(1), TOPICS).await;
    assert_eq!(
        &c.request(request(304, &[])).await.body[..],
        br#"{"brokerAddr":"192.168.0.1:10911","topicList":["DefaultCluster","broker-a","broker-b"]}"#
    );
}

/// REGISTER_TOPIC_IN_NAMESRV stores queue data as sent, topicSysFlag included: used to set up unit topics.
async fn register_topic_with_flag(c: &mut Client, topic: &str, flag: i32) {
    let mut r = request(217, &[("topic", topic)]);
    r.body = Bytes::from(format!(
        r#"{{"queueDatas":[{{"brokerName":"default-broker","perm":6,"readQueueNums":4,"topicSysFlag":{flag},"writeQueueNums":4}}]}}"#
    ));
    assert_eq!(c.request(r).await.code, 0);
}

/// RouteInfoManagerTest#testGetUnitTopics / #testGetHasUnitSubTopicList / #testGetHasUnitSubUnUnitTopicList,
/// RequestProcessorTest#testGetUnitTopicList / #testGetHasUnitSubTopicList / #testGetHasUnitSubUnUnitTopicList.
#[tokio::test]
async fn unit_topic_lists() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker_a(), dv(1), TOPICS).await;
    for (topic, flag) in [("unit", 1), ("unit-sub", 2), ("unit-and-sub", 3)] {
        register_topic_with_flag(&mut c, topic, flag).await;
    }
    assert_eq!(list(&c.request(request(311, &[])).await)["topicList"], serde_json::json!(["unit", "unit-and-sub"]));
    assert_eq!(list(&c.request(request(312, &[])).await)["topicList"], serde_json::json!(["unit-and-sub", "unit-sub"]));
    assert_eq!(list(&c.request(request(313, &[])).await)["topicList"], serde_json::json!(["unit-sub"]));
    assert_eq!(c.request(update_config("enableTopicList=false")).await.code, 0);
    for code in [224, 311, 312, 313] {
        let resp = c.request(request(code, &[("cluster", "default-cluster")])).await;
        assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("disable")), "code {code}");
    }
    assert_eq!(c.request(request(304, &[])).await.code, 0, "304 has no switch");
}

/// RequestProcessorTest#testGetBrokerMemberBroker; protocol.md §3.7 for the body, §2.20 for the remark.
#[tokio::test]
async fn broker_member_group() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911"), dv(1), TOPICS).await;
    register(&mut c, &Broker::new("DefaultCluster", "broker-a", 1, "192.168.0.2:10911"), dv(1), TOPICS).await;
    let resp = c.request(request(901, &[("clusterName", "DefaultCluster"), ("brokerName", "broker-a")])).await;
    assert_eq!(resp.code, 0);
    assert_eq!(resp.remark.as_deref(), Some("not set any response code"), "Java leaves its initial remark");
    assert_eq!(
        &resp.body[..],
        br#"{"brokerMemberGroup":{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}"#
    );
    let resp = c.request(request(901, &[("clusterName", "c"), ("brokerName", "nope")])).await;
    assert_eq!(&resp.body[..], br#"{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"nope","cluster":"c"}}"#);
}

fn acting_config() -> rocketns::NamesrvConfig {
    let mut config = test_config();
    config.support_acting_master = true;
    config
}

fn member(name: &'static str, id: i64, addr: &'static str) -> Broker<'static> {
    Broker { acting_master: Some(true), ..Broker::new("Default_Cluster", name, id, addr) }
}

/// RouteInfoManagerNewTest#unRegisterMasterBroker and #pickupPartitionOrderTopicRouteData: with
/// `supportActingMaster`, a group without master shows its lowest slave as id 0, read-only.
#[tokio::test]
async fn acting_master_is_shown_as_id_zero() {
    let server = start_with(acting_config()).await;
    let mut c = Client::connect(server.addr).await;
    let topics = &[("baseTopic", 16, 6), ("TopicA", 8, 6)];
    register(&mut c, &member("broker-a", 0, "127.0.0.1:10911"), dv(1), topics).await;
    register(&mut c, &member("broker-a", 1, "127.0.0.1:30911"), dv(1), topics).await;
    register(&mut c, &member("broker-b", 0, "127.0.0.1:10921"), dv(1), topics).await;
    register(&mut c, &member("broker-b", 1, "127.0.0.1:30921"), dv(1), topics).await;
    c.request(unregister_request(&member("broker-a", 0, "127.0.0.1:10911"))).await;
    let r = wait_for(&mut c, "TopicA", |r| broker_addrs(r, "broker-a").len() == 1).await;
    assert_eq!(broker_addrs(&r, "broker-a"), vec![(0, "127.0.0.1:30911".into())]);
    assert_eq!(queue_perm(&r, "broker-a"), 4);
    assert_eq!(broker_addrs(&r, "broker-b"), vec![(0, "127.0.0.1:10921".into()), (1, "127.0.0.1:30921".into())]);
    assert_eq!(queue_perm(&r, "broker-b"), 6);
    // The cluster table itself still has the slave under id 1: only routes are rewritten.
    let info = String::from_utf8(c.request(request(106, &[])).await.body.to_vec()).unwrap();
    assert!(info.contains(r#""brokerAddrs":{1:"127.0.0.1:30911"}"#), "{info}");
    // The master comes back: ids 0 and 1, writable.
    register(&mut c, &member("broker-a", 0, "127.0.0.1:10911"), dv(1), topics).await;
    let r = route(&mut c, "TopicA").await.unwrap();
    assert_eq!(broker_addrs(&r, "broker-a"), vec![(0, "127.0.0.1:10911".into()), (1, "127.0.0.1:30911".into())]);
    assert_eq!(queue_perm(&r, "broker-a"), 6);
}

/// RouteInfoManagerNewTest#pickupGlobalOrderTopicRouteData and #registerOnlySlaveBroker (with the rewrite),
/// and the member-group sync topics, which are never rewritten.
#[tokio::test]
async fn lone_slave_acts_as_master_except_on_sync_topics() {
    let server = start_with(acting_config()).await;
    let mut c = Client::connect(server.addr).await;
    let topics = &[("GlobalOrder", 1, 6), ("rmq_sys_SYNC_BROKER_MEMBER_broker-a", 1, 6)];
    register(&mut c, &member("broker-a", 1, "127.0.0.1:30911"), dv(1), topics).await;
    let r = route(&mut c, "GlobalOrder").await.unwrap();
    assert_eq!(broker_addrs(&r, "broker-a"), vec![(0, "127.0.0.1:30911".into())]);
    assert_eq!(queue_perm(&r, "broker-a"), 4);
    let r = route(&mut c, "rmq_sys_SYNC_BROKER_MEMBER_broker-a").await.unwrap();
    assert_eq!(broker_addrs(&r, "broker-a"), vec![(1, "127.0.0.1:30911".into())]);
}

fn zoned(b: Broker<'_>, zone: &str) -> RemotingCommand {
    let mut r = register_request(&b, dv(1), &[("ZoneTopic", 8, 6), ("Other", 8, 6)]);
    r.ext_fields.as_mut().unwrap().insert("__ZONE_NAME", zone);
    r
}

fn zone_request(mode: Option<&str>, zone: Option<&str>) -> RemotingCommand {
    let mut r = route_request("ZoneTopic", 479);
    let ext = r.ext_fields.as_mut().unwrap();
    if let Some(m) = mode {
        ext.insert("__ZONE_MODE", m);
    }
    if let Some(z) = zone {
        ext.insert("__ZONE_NAME", z);
    }
    r
}

/// ZoneRouteRPCHookTest (#testDoAfterResponseWithNoZoneMode, #...WithNoZoneName, #...WithNoResponse,
/// #...WithValidZoneFiltering) and ZoneRouteRPCHookMoreTest (the three cases).
#[tokio::test]
async fn zone_routing() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(zoned(Broker::new("c", "broker-1", 0, "127.0.0.1:10911"), "zone1")).await.code, 0);
    assert_eq!(c.request(zoned(Broker::new("c", "broker-2", 0, "127.0.0.1:10921"), "zone2")).await.code, 0);
    // A group of zone2 without master is kept: "master down, consume from slave".
    let slave_only = Broker { acting_master: Some(true), ..Broker::new("c", "broker-3", 1, "127.0.0.1:10932") };
    assert_eq!(c.request(zoned(slave_only, "zone2")).await.code, 0);
    let unfiltered = c.request(route_request("ZoneTopic", 479)).await.body;
    for (mode, zone) in
        [(None, Some("zone1")), (Some("false"), Some("zone1")), (Some("true"), None), (Some("true"), Some("  "))]
    {
        assert_eq!(c.request(zone_request(mode, zone)).await.body, unfiltered, "{mode:?} {zone:?}: not filtered");
    }
    let resp = c.request(zone_request(Some("TRUE"), Some("ZONE1"))).await;
    assert_eq!(resp.code, 0);
    let text = std::str::from_utf8(&resp.body).unwrap();
    assert!(text.contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#), "fastjson style, as Java re-encodes: {text}");
    let r: serde_json::Value =
        serde_json::from_slice(&rocketns::protocol::lenient::quote_bare_keys(&resp.body).unwrap()).unwrap();
    let names: Vec<&str> =
        r["brokerDatas"].as_array().unwrap().iter().map(|b| b["brokerName"].as_str().unwrap()).collect();
    assert_eq!(names, ["broker-1", "broker-3"]);
    let queues: Vec<&str> =
        r["queueDatas"].as_array().unwrap().iter().map(|q| q["brokerName"].as_str().unwrap()).collect();
    assert_eq!(queues, ["broker-1", "broker-3"]);
    assert_eq!(r["brokerDatas"][0]["zoneName"], "zone1");
    let resp = c
        .request({
            let mut r = zone_request(Some("true"), Some("zone1"));
            r.ext_fields.as_mut().unwrap().insert("topic", "Missing");
            r
        })
        .await;
    assert_eq!(resp.code, 17, "errors are left alone");
}

/// Static topics: a registration's `topicQueueMappingInfoMap` appears in routes as `topicQueueMappingByBroker`.
#[tokio::test]
async fn static_topic_mappings_in_routes() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let mut r =
        register_request(&Broker::new("c", "broker-a", 0, "127.0.0.1:10911"), dv(1), &[("T", 4, 6), ("U", 4, 6)]);
    let body = String::from_utf8(r.body.to_vec()).unwrap().replace(
        r#""topicQueueMappingInfoMap":{}"#,
        r#""topicQueueMappingInfoMap":{"T":{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}}"#,
    );
    r.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
    r.body = Bytes::from(body);
    assert_eq!(c.request(r).await.code, 0);
    let standard = c.request(route_request("T", 479)).await.body;
    assert!(std::str::from_utf8(&standard).unwrap().ends_with(
        r#""topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{"0":0,"1":1},"dirty":false,"epoch":1,"scope":"__global__","topic":"T","totalQueues":4}}}"#
    ));
    let legacy = c.request(route_request("T", 317)).await.body;
    assert!(std::str::from_utf8(&legacy).unwrap().contains(r#""currIdMap":{0:0,1:1}"#));
    assert!(route(&mut c, "U").await.unwrap().get("topicQueueMappingByBroker").is_none());
}

/// A registration of `b`'s topics, with static-topic mappings: (topic, the mapping's `bname`).
fn register_with_mappings(
    b: &Broker<'_>,
    dv: DataVersion,
    topics: &[(&str, i32, i32)],
    mappings: &[(&str, &str)],
) -> RemotingCommand {
    let mut r = register_request(b, dv, topics);
    let infos: Vec<String> = mappings
        .iter()
        .map(|(topic, bname)| {
            format!(r#""{topic}":{{"bname":"{bname}","currIdMap":{{0:0}},"dirty":false,"epoch":1,"scope":"__global__","topic":"{topic}","totalQueues":4}}"#)
        })
        .collect();
    let body = String::from_utf8(r.body.to_vec())
        .unwrap()
        .replace(r#""topicQueueMappingInfoMap":{}"#, &format!(r#""topicQueueMappingInfoMap":{{{}}}"#, infos.join(",")));
    r.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
    r.body = Bytes::from(body);
    r
}

/// The brokers whose mappings a route shows.
async fn mapped_brokers(c: &mut Client, topic: &str) -> Vec<String> {
    let route = route(c, topic).await.expect("routed");
    let mappings = route.get("topicQueueMappingByBroker").and_then(|m| m.as_object().cloned()).unwrap_or_default();
    mappings.keys().cloned().collect()
}

/// Static-topic mappings are bounded by the queue data they belong to: a registration stores only its own
/// broker's share, of topics it has queues for; a broker's share goes with its queues (it leaves, or the
/// topic is deleted) and comes back with them. (Java keeps every mapping ever sent; COMPATIBILITY.md.)
#[tokio::test]
async fn static_topic_mappings_go_with_their_brokers_queues() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let a = Broker::new("c", "broker-a", 0, "127.0.0.1:10911");
    let topics = [("T", 4, 6), ("U", 4, 6)];
    let own_and_foreign = [("T", "broker-a"), ("U", "broker-z"), ("Ghost", "broker-a")];
    assert_eq!(c.request(register_with_mappings(&a, dv(1), &topics, &own_and_foreign)).await.code, 0);
    assert_eq!(mapped_brokers(&mut c, "T").await, ["broker-a"]);
    assert!(mapped_brokers(&mut c, "U").await.is_empty(), "another broker's name is not taken");
    assert!(route(&mut c, "Ghost").await.is_none());
    let b = Broker::new("c", "broker-b", 0, "127.0.0.1:10921");
    let mut broker_b = Client::connect(server.addr).await;
    assert_eq!(
        broker_b
            .request(register_with_mappings(&b, dv(1), &[("T", 4, 6), ("V", 4, 6)], &[("T", "broker-b")]))
            .await
            .code,
        0
    );
    assert_eq!(mapped_brokers(&mut c, "T").await, ["broker-a", "broker-b"]);
    assert_eq!(c.request(unregister_request(&b)).await.code, 0);
    wait_route_gone(&mut c, "V").await;
    assert_eq!(mapped_brokers(&mut c, "T").await, ["broker-a"], "broker-b's share left with it");
    // Deleted with its queues; a periodic registration (the same DataVersion) restores both.
    assert_eq!(c.request(request(216, &[("topic", "T")])).await.code, 0);
    assert!(route(&mut c, "T").await.is_none());
    assert_eq!(c.request(register_with_mappings(&a, dv(1), &topics, &own_and_foreign)).await.code, 0);
    assert_eq!(mapped_brokers(&mut c, "T").await, ["broker-a"]);
}

/// ClusterTestRequestProcessorTest#testNamesrvNotReady, #testNamesrv, #testNamesrvReady and
/// #testNamesrvNoNeedWaitForService: the readiness gate, on the paused clock.
#[tokio::test(start_paused = true)]
async fn readiness_gate() {
    let mut config = test_config();
    config.need_wait_for_service = true;
    config.wait_seconds_for_service = 3;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(route_request("TopicTest", 479)).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("name server not ready")));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(c.request(route_request("TopicTest", 479)).await.code, 17, "ready: an ordinary answer");
    for (need, secs) in [(true, 0), (false, 45)] {
        let mut config = test_config();
        config.need_wait_for_service = need;
        config.wait_seconds_for_service = secs;
        let server = start_with(config).await;
        let mut c = Client::connect(server.addr).await;
        assert_eq!(c.request(route_request("TopicTest", 479)).await.code, 17, "{need} {secs}");
    }
}

/// apache/rocketmq#11043: an unregistration queued before a registration never removes it.
#[tokio::test]
async fn queued_unregistration_never_removes_a_later_registration() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker_a(), dv(1), TOPICS).await;
    let broker_c = Broker::new("DefaultCluster", "broker-c", 0, "127.0.0.1:10931");
    register(&mut c, &broker_c, dv(1), &[("c-topic0", 8, 6), ("c-topic1", 8, 6)]).await;
    // broker-a unregistered and registered again, broker-c's unregistration between: once broker-c is gone,
    // the unregistrations were applied, whenever and however the server applies them.
    let mut pipelined = bytes::BytesMut::new();
    unregister_request(&broker_a()).encode(SerializeType::Json, &mut pipelined);
    unregister_request(&broker_c).encode(SerializeType::Json, &mut pipelined);
    register_request(&broker_a(), dv(2), TOPICS).encode(SerializeType::Json, &mut pipelined);
    c.send_raw(&pipelined).await;
    for _ in 0..3 {
        assert_eq!(c.read_response().await.unwrap().code, 0);
    }
    wait_route_gone(&mut c, "c-topic0").await;
    assert!(route(&mut c, "unit-test0").await.is_some(), "the later registration stands");

    // A broker that re-registered over a new connection survives the close of its old one. broker-b,
    // registered over the old connection only, goes with that close: once it is gone, the close was applied.
    let broker_b = Broker::new("DefaultCluster", "broker-b", 0, "127.0.0.1:10921");
    let mut old = Client::connect(server.addr).await;
    register(&mut old, &broker_a(), dv(3), TOPICS).await;
    register(&mut old, &broker_b, dv(1), &[("b-topic0", 8, 6), ("b-topic1", 8, 6)]).await;
    let mut new = Client::connect(server.addr).await;
    register(&mut new, &broker_a(), dv(3), TOPICS).await;
    drop(old);
    wait_route_gone(&mut c, "b-topic0").await;
    assert!(route(&mut c, "unit-test0").await.is_some(), "broker-a, now on the new connection, stays");
}

/// Java's batch unregistration queue: beyond `unRegisterBrokerQueueCapacity` waiting, SYSTEM_ERROR.
#[tokio::test]
async fn unregistration_queue_full() {
    let mut config = test_config();
    config.un_register_broker_queue_capacity = 2;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let mut pipelined = bytes::BytesMut::new();
    for _ in 0..10 {
        unregister_request(&broker_a()).encode(SerializeType::Json, &mut pipelined);
    }
    c.send_raw(&pipelined).await;
    let mut codes = Vec::new();
    for _ in 0..10 {
        let resp = c.read_response().await.unwrap();
        if resp.code != 0 {
            assert_eq!(resp.remark.as_deref(), Some("the route writer queue is full, try again later"));
        }
        codes.push(resp.code);
    }
    assert_eq!(codes[..2], [0, 0]);
    assert!(codes.contains(&1), "refused beyond the cap while the writer has not run: {codes:?}");
    // The writer applies its queue in order: once a later change is answered, the unregistrations are gone.
    assert_eq!(c.request(request(205, &[("brokerName", "nobody")])).await.code, 0);
    assert_eq!(c.request(unregister_request(&broker_a())).await.code, 0, "room again once drained");
}

/// RequestProcessorTest's fixture and #testGetRouteInfoByTopic: broker id 1234 is the group's lowest, so it
/// counts as a prime slave and its topics are routed (read-only: acting master is allowed by the header).
#[tokio::test]
async fn request_processor_fixture_routes() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let b = Broker {
        acting_master: Some(true),
        ..Broker::new("default-cluster", "default-broker", 1234, "127.0.0.1:10911")
    };
    register(&mut c, &b, dv(1), TOPICS).await;
    let r = route(&mut c, "unit-test0").await.expect("routed");
    assert_eq!(broker_addrs(&r, "default-broker"), vec![(1234, "127.0.0.1:10911".into())]);
    assert_eq!(queue_perm(&r, "default-broker"), 4);
    assert!(route(&mut c, "test").await.is_none());
}
