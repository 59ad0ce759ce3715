//! NameServers that know each other (`namesrvPeers`, src/service/peer_copy.rs): a node that starts without
//! a route file copies the first answering peer's routes before it opens its port, and answers them byte
//! for byte as the peer does before any broker has registered with it. A peer that stalls or answers
//! garbage is given up and the next one tried. Made to fail once by not installing the copy (the new node
//! answered TOPIC_NOT_EXIST, code 17).

mod common;

use std::time::Duration;

use common::*;
use rocketns::NamesrvConfig;
use rocketns::service::peer_copy::COPY_WITHIN;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CLUSTER_INFO: i32 = 106;
const TOPIC_LIST: i32 = 206;

/// A node with two brokers of one cluster, one of them with a slave, and three topics; and the brokers'
/// connection, which must stay open (brokers whose connection closes are removed).
async fn peer_with_routes() -> (TestServer, Client) {
    let peer = start().await;
    let mut broker = Client::connect(peer.addr).await;
    for (name, id, addr, topics) in [
        ("broker-a", 0, "10.0.0.1:10911", &[("T1", 4, 4), ("T2", 8, 8)][..]),
        ("broker-a", 1, "10.0.0.2:10911", &[("T1", 4, 4), ("T2", 8, 8)][..]),
        ("broker-b", 0, "10.0.0.3:10911", &[("T2", 2, 2), ("T3", 1, 1)][..]),
    ] {
        let reply = broker.request(register_request(&Broker::new("c", name, id, addr), dv(1), topics)).await;
        assert_eq!(reply.code, 0, "{:?}", reply.remark);
    }
    (peer, broker)
}

fn with_peers(peers: &str) -> NamesrvConfig {
    NamesrvConfig { namesrv_peers: peers.into(), warm_restart: false, ..test_config() }
}

/// What a client reads from each: every topic's route, the cluster info and the topic list.
async fn answers(node: &TestServer) -> Vec<(i32, bytes::Bytes)> {
    let mut client = Client::connect(node.addr).await;
    let mut answers = Vec::new();
    for topic in ["T1", "T2", "T3"] {
        let reply = client.request(route_request(topic, 99)).await;
        answers.push((reply.code, reply.body));
    }
    for code in [CLUSTER_INFO, TOPIC_LIST] {
        let reply = client.request(request(code, &[])).await;
        answers.push((reply.code, reply.body));
    }
    answers
}

#[tokio::test]
async fn a_new_node_answers_its_peers_routes_byte_for_byte_before_any_registration() {
    let (peer, _brokers) = peer_with_routes().await;
    let expected = answers(&peer).await;
    assert!(expected.iter().all(|(code, _)| *code == 0));
    let node = start_with(with_peers(&peer.addr.to_string())).await;
    assert_eq!(answers(&node).await, expected);
}

#[tokio::test]
async fn without_peers_a_new_node_starts_empty() {
    let (_peer, _brokers) = peer_with_routes().await;
    let node = start_with(with_peers("")).await;
    let mut client = Client::connect(node.addr).await;
    assert_eq!(client.request(route_request("T1", 99)).await.code, 17);
}

/// A peer that accepts and never answers, then one that answers garbage: both are given up, within the
/// bound, and the third one's routes are copied.
#[tokio::test]
async fn a_stalled_peer_and_a_garbage_peer_are_given_up_for_the_next() {
    let stalled = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_addr = stalled.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = stalled.accept().await {
            held.push(stream);
        }
    });
    let garbage = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let garbage_addr = garbage.local_addr().unwrap();
    let answered = tokio::spawn(async move {
        while let Ok((mut stream, _)) = garbage.accept().await {
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            // A frame that claims 8 bytes of header in 4 bytes, then noise.
            let _ = stream.write_all(&[0, 0, 0, 4, 0, 0, 0, 8, 0xff, 0xfe]).await;
        }
    });
    let (peer, _brokers) = peer_with_routes().await;
    let expected = answers(&peer).await;
    let started = std::time::Instant::now();
    let node = start_with(with_peers(&format!("{stalled_addr};{garbage_addr};{}", peer.addr))).await;
    assert!(started.elapsed() < COPY_WITHIN, "within the copy's bound: {:?}", started.elapsed());
    assert_eq!(answers(&node).await, expected);
    held.abort();
    answered.abort();
}

/// No peer answers: the node starts empty once the bound has passed, as it would without peers.
#[tokio::test]
async fn with_no_peer_answering_it_starts_empty_within_the_bound() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let started = std::time::Instant::now();
    let node = start_with(with_peers(&closed_addr.to_string())).await;
    assert!(started.elapsed() < COPY_WITHIN + Duration::from_secs(1));
    let mut client = Client::connect(node.addr).await;
    assert_eq!(client.request(route_request("T1", 99)).await.code, 17);
}

const ONE_BROKER: &str = r#"{"brokerAddrTable":{"b":{"brokerAddrs":{0:"10.0.0.9:10911"},"brokerName":"b","cluster":"c"}},"clusterAddrTable":{"c":["b"]}}"#;
const ROUTE: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.9:10911"},"brokerName":"b","cluster":"c","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;

/// A topic the list names but whose route is gone by the time it is asked for (deleted meanwhile) is not
/// copied; the others are.
#[tokio::test]
async fn a_topic_deleted_during_the_copy_is_left_out() {
    let peer = scripted_peer(|asked| match (asked.code, asked.ext_fields.as_ref().and_then(|e| e.get("topic"))) {
        (CLUSTER_INFO, _) => (0, ONE_BROKER),
        (TOPIC_LIST, _) => (0, r#"{"topicList":["kept","gone"]}"#),
        (105, Some("kept")) => (0, ROUTE),
        _ => (17, ""),
    });
    let node = start_with(with_peers(&peer.to_string())).await;
    let mut client = Client::connect(node.addr).await;
    let kept = client.request(route_request("kept", 99)).await;
    assert_eq!((kept.code, std::str::from_utf8(&kept.body).unwrap()), (0, ROUTE));
    assert_eq!(client.request(route_request("gone", 99)).await.code, 17);
}

/// A topic list cut short is not a table: nothing of that peer is copied, and the next one is.
#[tokio::test]
async fn a_truncated_topic_list_is_no_copy() {
    let truncated = scripted_peer(|asked| match asked.code {
        CLUSTER_INFO => (0, ONE_BROKER),
        TOPIC_LIST => (0, r#"{"topicList":["kept","#),
        _ => (0, ROUTE),
    });
    let whole = scripted_peer(|asked| match asked.code {
        CLUSTER_INFO => (0, ONE_BROKER),
        TOPIC_LIST => (0, r#"{"topicList":["other"]}"#),
        _ => (0, ROUTE),
    });
    let node = start_with(with_peers(&format!("{truncated};{whole}"))).await;
    let mut client = Client::connect(node.addr).await;
    assert_eq!(client.request(route_request("kept", 99)).await.code, 17);
    assert_eq!(client.request(route_request("other", 99)).await.code, 0);
}

/// A slave that registers with the new node before its master has: the master is known only from the copy
/// (without its HA address, which a peer's answers do not carry), so the slave is told no master (as Java,
/// which would not know the master yet, tells it), not an empty HA address to replicate from. Made to fail
/// once by answering copied masters as registered ones (`haServerAddr` was "").
#[tokio::test]
async fn a_slave_is_not_told_a_copied_masters_unknown_ha_address() {
    let (peer, _brokers) = peer_with_routes().await;
    let node = start_with(with_peers(&peer.addr.to_string())).await;
    let mut slave = Client::connect(node.addr).await;
    let reply = slave
        .request(register_request(&Broker::new("c", "broker-a", 1, "10.0.0.2:10911"), dv(2), &[("T1", 4, 4)]))
        .await;
    assert_eq!(reply.code, 0, "{:?}", reply.remark);
    let ext = reply.ext_fields.unwrap_or_default();
    assert_eq!((ext.get("masterAddr"), ext.get("haServerAddr")), (None, None), "{ext:?}");
}

/// A topic's route over 1 MiB is refused before it is decoded (decoding takes up to 20 times a body), and
/// nothing of that peer is copied. Made to fail once without the bound: the topic was copied.
#[tokio::test]
async fn a_route_over_a_mebibyte_is_refused_before_it_is_decoded() {
    fn huge() -> &'static str {
        static HUGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        HUGE.get_or_init(|| {
            let queue = r#"{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}"#;
            format!(r#"{{"queueDatas":[{}]}}"#, vec![queue; 15_000].join(","))
        })
    }
    assert!(huge().len() > 1 << 20);
    let peer = scripted_peer(|asked| match asked.code {
        CLUSTER_INFO => (0, ONE_BROKER),
        TOPIC_LIST => (0, r#"{"topicList":["big"]}"#),
        _ => (0, huge()),
    });
    let node = start_with(with_peers(&peer.to_string())).await;
    let mut client = Client::connect(node.addr).await;
    assert_eq!(client.request(route_request("big", 99)).await.code, 17);
}
