//! Hostile input over real TCP: each case asserts the answer (a clear error reply, silence, or the
//! connection closed) and that another client's routes are still served, byte for byte.

mod common;

use bytes::Bytes;
use common::*;
use rocketns::remoting::{RemotingCommand, SerializeType};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

const ROUTE_STANDARD: &[u8] = include_bytes!("fixtures/route_standard.json");

enum Expect {
    Closed,
    /// A reply with this code whose remark starts with this text; `""`: a reply without a remark (Java's
    /// success replies have none).
    Reply(i32, &'static str),
    /// TopicTest's route, byte for byte.
    Route,
    /// No reply: the next request on the connection is answered first.
    Silent,
}

fn json(header: &str) -> Vec<u8> {
    raw_frame(0, header.as_bytes(), b"")
}

fn encoded(cmd: RemotingCommand, ty: SerializeType) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    cmd.encode(ty, &mut b);
    b.to_vec()
}

/// A binary header: code 105, JAVA, version 479, opaque 1, flag 0, then `rest` (remark and extFields).
fn binary(rest: &[u8]) -> Vec<u8> {
    let mut h = vec![0, 105, 0, 1, 0xdf, 0, 0, 0, 1, 0, 0, 0, 0];
    h.extend_from_slice(rest);
    raw_frame(1, &h, b"")
}

fn registration_with(body: Vec<u8>, crc: Option<&str>, ext: &[(&str, &str)]) -> Vec<u8> {
    let mut r = register_request(&Broker::new("c", "evil", 0, "10.9.9.9:10911"), dv(1), &[]);
    r.body = Bytes::from(body);
    let fields = r.ext_fields.as_mut().unwrap();
    fields.insert("bodyCrc32", crc.unwrap_or("0"));
    for (k, v) in ext {
        fields.insert(*k, *v);
    }
    encoded(r, SerializeType::Json)
}

fn zlib_bomb() -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..100 {
        enc.write_all(&zeros).unwrap();
    }
    enc.finish().unwrap()
}

fn cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    use Expect::*;
    let deep = format!("{{\"code\":105,\"x\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    let big_topic = format!(
        r#"{{"code":105,"extFields":{{"topic":"{}"}},"flag":0,"language":"JAVA","opaque":1,"version":479}}"#,
        "a".repeat(1 << 20)
    );
    let many_fields: String = (0..10_000).map(|i| format!(",\"k{i}\":\"v{i}\"")).collect();
    let many_json =
        format!(r#"{{"code":105,"extFields":{{"topic":"TopicTest"{many_fields}}},"flag":0,"opaque":1,"version":479}}"#);
    let mut many_binary =
        RemotingCommand::request(105, (0..10_000).map(|i| (format!("k{i}"), format!("v{i}"))).collect());
    many_binary.ext_fields.as_mut().unwrap().insert("topic", "TopicTest");
    // Over `ExtFields::MAX` (65,536): undecodable, as a malformed header is.
    let too_many_fields: String = (0..70_000).map(|i| format!(",\"k{i}\":\"v\"")).collect();
    let too_many_json = format!(
        r#"{{"code":105,"extFields":{{"topic":"TopicTest"{too_many_fields}}},"flag":0,"opaque":1,"version":479}}"#
    );
    let mut too_many_binary = vec![0, 0, 0, 0];
    let fields: Vec<u8> =
        (0..70_000u32).flat_map(|i| [&[0, 4][..], &i.to_be_bytes(), &[0, 0, 0, 1, b'v']].concat()).collect();
    too_many_binary.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    too_many_binary.extend_from_slice(&fields);
    let mut big_update = request(318, &[]);
    big_update.body = Bytes::from(format!("enableTopicList=true\n#{}\n", "x".repeat(100_000)));
    let long_topic = "t".repeat(200);
    let mut half_close = encoded(route_request("TopicTest", 479), SerializeType::Json);
    half_close.truncate(half_close.len() - 5);
    vec![
        ("negative length", vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], Closed),
        ("zero length", vec![0, 0, 0, 0], Closed),
        ("length 3", vec![0, 0, 0, 3, 0, 0, 0], Closed),
        ("2 GiB length", vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 2], Closed),
        ("length one past the cap", [16_777_213u32.to_be_bytes(), [0, 0, 0, 2]].concat(), Closed),
        ("header length beyond the frame", vec![0, 0, 0, 8, 0, 0, 0, 9, b'{', b'}', 0, 0], Closed),
        ("header length 16M in a small frame", vec![0, 0, 0, 8, 0, 0xff, 0xff, 0xff, b'{', b'}', 0, 0], Closed),
        ("serialize type 2", raw_frame(2, b"{}", b""), Closed),
        ("serialize type 255", raw_frame(255, b"{}", b""), Closed),
        ("truncated frame, then end of stream", half_close, Closed),
        ("invalid UTF-8 in a JSON header", raw_frame(0, b"{\"code\":105,\"remark\":\"\xc3\x28\"}", b""), Closed),
        ("deeply nested JSON", json(&deep), Closed),
        ("JSON header that is an array", json("[1,2]"), Closed),
        ("JSON header with trailing bytes", json(r#"{"code":105} {}"#), Closed),
        ("JSON code that is not a number", json(r#"{"code":"abc"}"#), Closed),
        (
            "JSON with a 1 MB topic",
            json(&big_topic),
            Reply(17, "No topic route info in name server for the topic: aaaa"),
        ),
        ("10k extFields, JSON", json(&many_json), Route),
        ("10k extFields, binary", encoded(many_binary, SerializeType::RocketMq), Route),
        ("70k extFields, JSON", json(&too_many_json), Closed),
        ("70k extFields, binary", binary(&too_many_binary), Closed),
        (
            "a config update of 100 kB",
            encoded(big_update, SerializeType::Json),
            Reply(1, "config update of 100023 bytes refused: at most 65536 are taken"),
        ),
        ("binary remark past the end", binary(&[0, 0, 0, 50]), Closed),
        ("binary extFields past the end", binary(&[0, 0, 0, 0, 0, 0, 1, 0]), Closed),
        ("binary negative key length", binary(&[0, 0, 0, 0, 0, 0, 0, 4, 0xff, 0xff, 0, 0]), Closed),
        ("binary header too short", raw_frame(1, &[0, 105, 0, 1, 0xdf], b""), Closed),
        (
            "binary value with invalid UTF-8",
            binary(&[0, 0, 0, 0, 0, 0, 0, 12, 0, 5, b't', b'o', b'p', b'i', b'c', 0, 0, 0, 1, 0xff]),
            Reply(17, "No topic route info"),
        ),
        (
            "unknown code",
            encoded(request(12345, &[]), SerializeType::Json),
            Reply(3, " request type 12345 not supported"),
        ),
        (
            "negative code",
            json(r#"{"code":-7,"flag":0,"opaque":1,"version":479}"#),
            Reply(3, " request type -7 not supported"),
        ),
        ("a response frame sent to the server", json(r#"{"code":0,"flag":1,"opaque":1,"version":479}"#), Silent),
        (
            "registration with a wrong CRC",
            registration_with(register_body(dv(1), &[("X", 4, 6), ("Y", 4, 6)]), Some("12345"), &[]),
            Reply(1, "crc32 not match"),
        ),
        (
            "registration body that is not JSON",
            registration_with(b"{\"topicConfigSerializeWrapper\":".to_vec(), None, &[]),
            Reply(1, "invalid registration body JSON"),
        ),
        (
            "registration body nested too deep",
            registration_with(format!("{}{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(), None, &[]),
            Reply(1, "invalid registration body JSON"),
        ),
        (
            "zlib bomb",
            registration_with(zlib_bomb(), None, &[("compressed", "true")]),
            Reply(1, "compressed registration body inflates beyond"),
        ),
        (
            "broker id not a number",
            registration_with(register_body(dv(1), &[("X", 4, 6), ("Y", 4, 6)]), None, &[("brokerId", "zero")]),
            Reply(1, "header field brokerId has an invalid value"),
        ),
        (
            "217 with a topic name too long",
            encoded(
                {
                    let mut r = request(217, &[("topic", &long_topic)]);
                    r.body = Bytes::from_static(br#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}"#);
                    r
                },
                SerializeType::Json,
            ),
            Reply(1, "header field topic has an invalid value"),
        ),
        (
            "217 with illegal characters",
            encoded(
                {
                    let mut r = request(217, &[("topic", "a b/c")]);
                    r.body = Bytes::from_static(br#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}"#);
                    r
                },
                SerializeType::Json,
            ),
            Reply(1, "header field topic has an invalid value"),
        ),
        (
            "217 with KV-style headers",
            encoded(
                {
                    let mut r = request(217, &[("namespace", "ORDER_TOPIC_CONFIG"), ("key", "broker-a")]);
                    r.body = Bytes::from_static(b"garbage");
                    r
                },
                SerializeType::Json,
            ),
            Reply(0, ""),
        ),
        (
            "QUERY_DATA_VERSION with a garbage body",
            encoded(
                {
                    let mut r = request(
                        322,
                        &[("clusterName", "c"), ("brokerAddr", "a"), ("brokerName", "b"), ("brokerId", "0")],
                    );
                    r.body = Bytes::from_static(b"\x00\x01");
                    r
                },
                SerializeType::Json,
            ),
            Reply(1, "invalid DataVersion body: "),
        ),
        (
            "UPDATE_NAMESRV_CONFIG aiming at a file",
            encoded(
                {
                    let mut r = request(318, &[]);
                    r.body = Bytes::from_static(b"configStorePath=/etc/cron.d/x\n");
                    r
                },
                SerializeType::Json,
            ),
            Reply(16, "Can not update config in black list."),
        ),
    ]
}

#[tokio::test]
async fn hostile_inputs_get_clear_answers_and_harm_no_one() {
    let server = start().await;
    let mut good = Client::connect(server.addr).await;
    register(
        &mut good,
        &Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911"),
        dv(1),
        &[("TopicTest", 8, 6), ("Other", 8, 6)],
    )
    .await;
    register(
        &mut good,
        &Broker::new("DefaultCluster", "broker-a", 1, "192.168.0.2:10911"),
        dv(1),
        &[("TopicTest", 8, 6), ("Other", 8, 6)],
    )
    .await;
    let cases = cases();
    assert!(cases.len() >= 30);
    for (what, bytes, expect) in cases {
        let mut bad = Client::connect(server.addr).await;
        bad.send_raw(&bytes).await;
        match expect {
            Expect::Closed => {
                if what.contains("end of stream") {
                    bad.stream.shutdown().await.unwrap();
                }
                bad.assert_closed_without_reply(Duration::from_secs(5)).await;
            }
            Expect::Reply(code, remark) => {
                let reply = bad.read_response().await.unwrap_or_else(|| panic!("{what}: closed instead of answered"));
                assert_eq!(reply.code, code, "{what}: {:?}", reply.remark);
                match remark {
                    "" => assert_eq!(reply.remark, None, "{what}"),
                    _ => {
                        assert!(reply.remark.as_deref().unwrap_or("").starts_with(remark), "{what}: {:?}", reply.remark)
                    }
                }
            }
            Expect::Route => {
                let reply = bad.read_response().await.unwrap_or_else(|| panic!("{what}: closed instead of answered"));
                assert_eq!((reply.code, &reply.body[..]), (0, ROUTE_STANDARD), "{what}: {:?}", reply.remark);
            }
            Expect::Silent => {
                let opaque = bad.send(request(106, &[]), SerializeType::Json).await;
                assert_eq!(bad.read_response().await.expect("still open").opaque, opaque, "{what}");
            }
        }
        let resp = good.request(route_request("TopicTest", 479)).await;
        assert_eq!((resp.code, &resp.body[..]), (0, ROUTE_STANDARD), "{what}: routes intact");
    }
    // Nothing a hostile client sent was registered.
    assert!(route(&mut good, "X").await.is_none());
    let info = String::from_utf8(good.request(request(106, &[])).await.body.to_vec()).unwrap();
    assert!(!info.contains("10.9.9.9"), "{info}");
}

/// A request sent right before a half-close (the client shuts its write side) is still answered.
#[tokio::test]
async fn request_before_a_half_close_is_answered() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let opaque = c.send(request(106, &[]), SerializeType::Json).await;
    c.stream.shutdown().await.unwrap();
    assert_eq!(c.read_response().await.expect("answered").opaque, opaque);
    c.assert_closed_without_reply(Duration::from_secs(5)).await;
}

/// Invalid topic names in a registration are skipped; the valid ones are registered.
#[tokio::test]
async fn invalid_topic_names_in_a_registration_are_skipped() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let long = "t".repeat(128);
    let topics = [("ok-topic", 4, 6), ("", 4, 6), ("a b", 4, 6), (long.as_str(), 4, 6), ("a/b", 4, 6)];
    register(&mut c, &Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), &topics).await;
    let list: serde_json::Value = serde_json::from_slice(&c.request(request(206, &[])).await.body).unwrap();
    assert_eq!(list, serde_json::json!({"topicList": ["ok-topic"]}));
}

/// SECURITY.md counts these inputs: the count it gives is checked against the list, not kept by hand.
#[test]
fn security_md_counts_every_hostile_input() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SECURITY.md")).expect("SECURITY.md");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let claim = format!("`tests/hostile_input.rs` checks {} such inputs", cases().len());
    assert!(text.contains(&claim), "SECURITY.md should say: {claim}");
}
