//! Wire tests of the codec: golden frames in both header encodings, oneway silence, unknown codes, and frames
//! that close only their own connection.

mod common;

use common::*;
use rocketns::remoting::{RemotingCommand, SerializeType};
use std::time::Duration;

const ROUTE_STANDARD: &[u8] = include_bytes!("fixtures/route_standard.json");
const ROUTE_FASTJSON: &[u8] = include_bytes!("fixtures/route_fastjson.json");
const REQUEST_HEADER: &[u8] = include_bytes!("fixtures/request_header.json");
const RESPONSE_HEADER: &[u8] = include_bytes!("fixtures/response_header.json");

/// The route of protocol.md §3.1: TopicTest on broker-a, master 192.168.0.1 and slave 192.168.0.2, 8/8 queues.
async fn register_topic_test(c: &mut Client) {
    let master = Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911");
    let slave = Broker::new("DefaultCluster", "broker-a", 1, "192.168.0.2:10911");
    let topics = [("TopicTest", 8, 6), ("Other", 8, 6)];
    register(c, &master, dv(1), &topics).await;
    register(c, &slave, dv(1), &topics).await;
}

#[tokio::test]
async fn json_request_gets_javas_exact_reply_bytes() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    let request = raw_frame(0, REQUEST_HEADER, b"");
    assert_eq!(&request[..8], &[0, 0, 0, 0x87, 0, 0, 0, 0x83], "protocol.md §1.3 byte-exact example");
    c.send_raw(&request).await;
    let reply = c.read_frame_bytes().await.expect("reply");
    assert_eq!(&reply[..], &raw_frame(0, RESPONSE_HEADER, ROUTE_STANDARD)[..]);
}

#[tokio::test]
async fn binary_request_is_answered_in_json() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    // protocol.md §1.4 worked example: code 105, JAVA, version 479, opaque 1, topic=TopicTest.
    let request: &[u8] = &[
        0x00, 0x00, 0x00, 0x2d, 0x01, 0x00, 0x00, 0x29, 0x00, 0x69, 0x00, 0x01, 0xdf, 0x00, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x05, 0x74, 0x6f, 0x70, 0x69, 0x63,
        0x00, 0x00, 0x00, 0x09, 0x54, 0x6f, 0x70, 0x69, 0x63, 0x54, 0x65, 0x73, 0x74,
    ];
    c.send_raw(request).await;
    let reply = c.read_frame_bytes().await.expect("reply");
    // 5.x answers in the server's serialization (JSON), which every client reads.
    assert_eq!(&reply[..], &raw_frame(0, RESPONSE_HEADER, ROUTE_STANDARD)[..]);
}

#[tokio::test]
async fn old_clients_get_fastjson_routes_unless_they_ask_for_standard() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    for (version, body) in [(317, ROUTE_FASTJSON), (333, ROUTE_FASTJSON), (400, ROUTE_FASTJSON), (401, ROUTE_STANDARD)]
    {
        let resp = c.request(route_request("TopicTest", version)).await;
        assert_eq!(resp.code, 0);
        assert_eq!(&resp.body[..], body, "version {version}");
    }
    let mut asks = route_request("TopicTest", 317);
    asks.ext_fields.as_mut().unwrap().insert("acceptStandardJsonOnly", "true");
    assert_eq!(&c.request(asks).await.body[..], ROUTE_STANDARD);
}

#[tokio::test]
async fn go_and_cpp_style_headers_are_accepted() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    // Go: remark "", language GO, version 317, no serializeTypeCurrentRPC. C++: numbers in extFields.
    for header in [
        &br#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"GO","opaque":5,"remark":"","version":317}"#[..],
        &br#"{"code":"105","extFields":{"topic":"TopicTest","n":1},"flag":0,"language":"KLINGON","opaque":"5","version":333}"#[..],
    ] {
        c.send_raw(&raw_frame(0, header, b"")).await;
        let resp = c.read_response().await.expect("reply");
        assert_eq!((resp.code, resp.opaque), (0, 5));
        assert_eq!(&resp.body[..], ROUTE_FASTJSON);
    }
}

#[tokio::test]
async fn missing_topic_is_topic_not_exist_with_javas_remark() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(route_request("NoSuchTopic", 479)).await;
    assert_eq!(resp.code, 17);
    assert_eq!(
        resp.remark.as_deref(),
        Some(
            "No topic route info in name server for the topic: NoSuchTopic\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
        )
    );
    assert!(resp.body.is_empty());
    let resp = c.request(request(105, &[])).await;
    assert_eq!(resp.code, 17);
    assert!(resp.remark.unwrap().starts_with("No topic route info in name server for the topic: null\n"));
}

#[tokio::test]
async fn unknown_code_is_not_supported() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(request(99999, &[])).await;
    assert_eq!(resp.code, 3);
    assert_eq!(resp.remark.as_deref(), Some(" request type 99999 not supported"));
}

#[tokio::test]
async fn oneway_requests_are_processed_but_never_answered() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let mut oneway = request(99999, &[]);
    oneway.flag = 2;
    c.send(oneway, SerializeType::Json).await;
    // A oneway UNREGISTER_BROKER is still applied.
    let broker = Broker::new("c", "b", 0, "10.0.0.1:10911");
    register(&mut c, &broker, dv(1), &[("T1", 4, 6), ("T2", 4, 6)]).await;
    let mut unregister = unregister_request(&broker);
    unregister.flag = 2;
    c.send(unregister, SerializeType::RocketMq).await;
    let opaque = c.send(route_request("T1", 479), SerializeType::Json).await;
    let first = c.read_response().await.expect("reply");
    assert_eq!(first.opaque, opaque, "the first reply belongs to the normal request");
    wait_route_gone(&mut c, "T1").await;
}

#[tokio::test]
async fn response_frames_from_peers_are_ignored() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let mut stray = RemotingCommand::response(0, None);
    stray.opaque = 777;
    c.send(stray, SerializeType::Json).await;
    let opaque = c.send(request(106, &[]), SerializeType::Json).await;
    assert_eq!(c.read_response().await.expect("reply").opaque, opaque);
}

#[tokio::test]
async fn frames_split_byte_by_byte_and_pipelined_requests() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    for b in raw_frame(0, REQUEST_HEADER, b"") {
        c.send_raw(&[b]).await;
    }
    assert_eq!(&c.read_frame_bytes().await.unwrap()[..], &raw_frame(0, RESPONSE_HEADER, ROUTE_STANDARD)[..]);
    // 100 requests in one write: 100 replies, in order.
    let mut batch = Vec::new();
    for opaque in 1000..1100 {
        let mut r = route_request("TopicTest", 479);
        r.opaque = opaque;
        let mut b = bytes::BytesMut::new();
        r.encode(SerializeType::Json, &mut b);
        batch.extend_from_slice(&b);
    }
    c.send_raw(&batch).await;
    for opaque in 1000..1100 {
        let resp = c.read_response().await.expect("reply");
        assert_eq!((resp.opaque, resp.code), (opaque, 0));
        assert_eq!(&resp.body[..], ROUTE_STANDARD);
    }
}

/// Each of these closes its own connection without a reply; another client's routes keep being served.
/// (BrokerHousekeepingServiceTest#testOnChannelException: a connection failing is harmless to the rest.)
#[tokio::test]
async fn undecodable_frames_close_only_their_connection() {
    let server = start().await;
    let mut good = Client::connect(server.addr).await;
    register_topic_test(&mut good).await;
    let mut oversized = 16_777_213u32.to_be_bytes().to_vec();
    oversized.extend_from_slice(&[0, 0, 0, 2, b'{', b'}']);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("frame over 16 MiB", oversized),
        ("negative length", vec![0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0]),
        ("length below 4", vec![0, 0, 0, 2, 0, 0]),
        ("header longer than frame", vec![0, 0, 0, 8, 0, 0, 0, 100, b'{', b'}', 0, 0]),
        ("unknown serialize type", vec![0, 0, 0, 6, 7, 0, 0, 2, b'{', b'}']),
        ("malformed JSON header", raw_frame(0, b"{\"code\":", b"")),
        ("invalid UTF-8 JSON header", raw_frame(0, b"{\"code\":105,\"remark\":\"\xff\xfe\"}", b"")),
        (
            "binary header with remark past the end",
            vec![0, 0, 0, 25, 1, 0, 0, 21, 0, 105, 0, 1, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 0, 0],
        ),
    ];
    for (what, bytes) in cases {
        let mut bad = Client::connect(server.addr).await;
        bad.send_raw(&bytes).await;
        bad.assert_closed_without_reply(Duration::from_secs(5)).await;
        let resp = good.request(route_request("TopicTest", 479)).await;
        assert_eq!(resp.code, 0, "{what}: other clients are still served");
        assert_eq!(&resp.body[..], ROUTE_STANDARD, "{what}: routes intact");
    }
}

#[tokio::test]
async fn frame_cap_is_configurable() {
    let mut config = test_config();
    config.frame_max_length = 1024;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let mut big = request(106, &[]);
    big.body = bytes::Bytes::from(vec![b'x'; 2000]);
    c.send(big, SerializeType::Json).await;
    c.assert_closed_without_reply(Duration::from_secs(5)).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(request(106, &[])).await.code, 0);
}

/// With `serializeType=ROCKETMQ` (Java's `rocketmq.serialize.type`) replies use the binary header: the
/// 21-byte success header of protocol.md §1.4, then the body.
#[tokio::test]
async fn rocketmq_binary_replies_when_configured() {
    let mut config = test_config();
    config.serialize_type = "ROCKETMQ".into();
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    register_topic_test(&mut c).await;
    c.send_raw(&raw_frame(0, REQUEST_HEADER, b"")).await;
    let reply = c.read_frame_bytes().await.expect("reply");
    let header: [u8; 21] = [0, 0, 0, 0x01, 0xdf, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut want = ((4 + header.len() + ROUTE_STANDARD.len()) as u32).to_be_bytes().to_vec();
    want.extend_from_slice(&(0x0100_0000u32 | header.len() as u32).to_be_bytes());
    want.extend_from_slice(&header);
    want.extend_from_slice(ROUTE_STANDARD);
    assert_eq!(&reply[..], &want[..]);
}

/// The close assertion the tests above rely on can fail: a reply is not a close.
#[tokio::test]
#[should_panic(expected = "instead of closing")]
async fn close_assertion_fails_on_a_reply() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    c.send(request(106, &[]), SerializeType::Json).await;
    c.assert_closed_without_reply(Duration::from_secs(5)).await;
}

/// …and a connection left open is not closed.
#[tokio::test]
#[should_panic(expected = "still open")]
async fn close_assertion_fails_on_an_open_connection() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    c.assert_closed_without_reply(Duration::from_millis(300)).await;
}
