//! The Java NameServer as the reference: one corpus of requests, sent in order over one connection, whose
//! replies (code, remark, extFields, body, and the reply's header encoding) must be what the Java
//! NameServer 5.3.3 answers to the same requests.
//!
//! - `rocketns_answers_the_corpus_as_java_does` (plain `cargo test`, no JVM): an in-process rocketns against
//!   the replies recorded from Java in `tests/fixtures/java-5.3.3/corpus.jsonl` (origin in
//!   tests/fixtures/README.md). A step whose reply differs on purpose says so (`Compare::Differs`) with the
//!   id of its row in COMPATIBILITY.md, and only that step's reply is let through.
//! - `java_answers_the_corpus_as_recorded` (ignored; tests/java/reference.sh runs it in the test command):
//!   the live Java NameServer at `ROCKETNS_JAVA_NAMESRV` against the same fixture, so that the fixture stays
//!   Java's own; with `ROCKETNS_JAVA_RECORD=1` it writes the fixture instead, and with
//!   `ROCKETNS_JAVA_REPORT_ONLY=1` it prints the differences without failing (for newer Java versions).

mod common;

use std::path::PathBuf;

use bytes::Bytes;
use common::{
    Broker, Client, dv, kv_delete, kv_get, kv_put, register_request, request, route_request, unregister_request,
};
use rocketns::protocol::TopicConfig;
use rocketns::remoting::{ExtFields, RemotingCommand, SerializeType};
use rocketns::testing::reply::{Compare, HASH_ORDER, Reply, differences};

struct Step {
    label: &'static str,
    cmd: RemotingCommand,
    ty: SerializeType,
    compare: Compare,
    /// Unregistrations are applied asynchronously by both servers: repeat the request until its reply
    /// shows them (at most a few seconds), and keep the last reply.
    until: Option<Until>,
}

/// What a reply shows once an asynchronous change is applied.
#[derive(Clone, Copy)]
enum Until {
    Code(i32),
    /// The body no longer mentions this text (an address that left).
    Gone(&'static str),
}

impl Until {
    fn reached(self, reply: &Reply) -> bool {
        match self {
            Until::Code(code) => reply.code == code,
            Until::Gone(text) => !String::from_utf8_lossy(&reply.body_bytes()).contains(text),
        }
    }
}

fn step(label: &'static str, cmd: RemotingCommand) -> Step {
    Step { label, cmd, ty: SerializeType::Json, compare: Compare::Exact, until: None }
}

impl Step {
    fn binary(mut self) -> Self {
        self.ty = SerializeType::RocketMq;
        self
    }
    fn compare(mut self, compare: Compare) -> Self {
        self.compare = compare;
        self
    }
    fn until(mut self, until: Until) -> Self {
        self.until = Some(until);
        self
    }
}

fn versioned(mut cmd: RemotingCommand, version: i32) -> RemotingCommand {
    cmd.version = version;
    cmd
}

fn with_body(mut cmd: RemotingCommand, body: impl Into<Bytes>) -> RemotingCommand {
    cmd.body = body.into();
    cmd
}

const A: Broker<'static> = Broker {
    cluster: "DefaultCluster",
    name: "broker-a",
    id: 0,
    addr: "127.0.0.1:10911",
    ha_addr: "127.0.0.1:10912",
    acting_master: Some(false),
};
const A_SLAVE: Broker<'static> = Broker { id: 1, addr: "127.0.0.1:10921", ha_addr: "127.0.0.1:10922", ..A };
const B: Broker<'static> =
    Broker { name: "broker-b", addr: "127.0.0.1:10931", ha_addr: "127.0.0.1:10932", acting_master: None, ..A };
const C: Broker<'static> = Broker { name: "broker-c", addr: "127.0.0.1:10941", ha_addr: "127.0.0.1:10942", ..A };
const D: Broker<'static> =
    Broker { name: "broker-d", addr: "127.0.0.1:10951", ha_addr: "127.0.0.1:10952", acting_master: None, ..A };

fn with_ext(mut cmd: RemotingCommand, pairs: &[(&str, &str)]) -> RemotingCommand {
    let ext = cmd.ext_fields.get_or_insert_with(ExtFields::new);
    for (k, v) in pairs {
        ext.insert(*k, *v);
    }
    cmd
}

/// What a broker older than 3.0.11 sends: the bare TopicConfigSerializeWrapper.
const OLD_BROKER_BODY: &str = r#"{"dataVersion":{"counter":1,"timestamp":1700000000000},"topicConfigTable":{"TopicD":{"perm":6,"readQueueNums":2,"topicName":"TopicD","writeQueueNums":2},"TopicD2":{"perm":4,"readQueueNums":1,"topicName":"TopicD2","writeQueueNums":1}}}"#;

/// A registration with another body, and that body's CRC.
fn register_with_body(cmd: RemotingCommand, body: impl Into<Bytes>) -> RemotingCommand {
    let body = body.into();
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF).to_string();
    with_ext(with_body(cmd, body), &[("bodyCrc32", &crc)])
}

/// QUERY_DATA_VERSION from broker `b`, reporting DataVersion `counter`.
fn query_data_version(b: &Broker<'_>, counter: i64) -> RemotingCommand {
    let id = b.id.to_string();
    let ext = [("brokerAddr", b.addr), ("clusterName", b.cluster), ("brokerName", b.name), ("brokerId", &id)];
    with_body(request(322, &ext), dv(counter).to_json())
}

fn state_version(counter: i64, state: i64) -> rocketns::protocol::DataVersion {
    rocketns::protocol::DataVersion { state_version: state, ..dv(counter) }
}

fn route(topic: &str, version: i32) -> RemotingCommand {
    route_request(topic, version)
}

/// REGISTER_BROKER with a zlib body, as a broker with `compressedRegister=true` sends it.
fn compressed_register(b: &Broker<'_>, counter: i64, topics: &[(&str, i32, i32)]) -> RemotingCommand {
    let configs: Vec<TopicConfig> = topics.iter().map(|(n, q, p)| TopicConfig::new(*n, *q, *q, *p)).collect();
    let body = rocketns::testing::register_body_compressed(&dv(counter), &configs, &[]);
    let cmd = with_ext(register_request(b, dv(counter), topics), &[("compressed", "true")]);
    register_with_body(cmd, body)
}

fn corpus() -> Vec<Step> {
    let topics_a = [("TopicA", 8, 6), ("TopicShared", 4, 6)];
    let topics_b = [("TopicB", 4, 6), ("TopicShared", 4, 6), ("%RETRY%group-b", 1, 6)];
    let mut wrong_crc = register_request(&B, dv(1), &topics_b);
    wrong_crc.ext_fields.get_or_insert_with(ExtFields::new).insert("bodyCrc32", "12345");
    vec![
        // An empty NameServer.
        step("route of an unknown topic", route("NoSuchTopic", 479)),
        step("route of an unknown topic, binary header", route("NoSuchTopic", 479)).binary(),
        step("cluster info, empty", request(106, &[])),
        step("all topics, empty", request(206, &[])),
        step("unknown request code", request(9999, &[])),
        step("unknown request code, binary header", request(9999, &[])).binary(),
        // A master registers.
        step("register master a, one topic first", register_request(&A, dv(1), &[("TopicA", 8, 6)])),
        step("register master a", register_request(&A, dv(1), &topics_a)),
        step("route of TopicA, 4.9.4 and later", route("TopicA", 479)),
        step("route of TopicA, before 4.9.4", route("TopicA", 399)),
        step("route of TopicA, binary header", route("TopicA", 479)).binary(),
        step("register a slave of a", register_request(&A_SLAVE, dv(1), &topics_a)),
        step("route of TopicA with the slave", route("TopicA", 479)),
        step("route of TopicA with the slave, before 4.9.4", route("TopicA", 399)),
        step("register master b (4.x, compressed)", versioned(compressed_register(&B, 1, &topics_b), 399)),
        step("route of TopicShared", route("TopicShared", 479)).compare(HASH_ORDER),
        step("route of TopicShared, before 4.9.4", route("TopicShared", 399)).compare(HASH_ORDER),
        step("cluster info", request(106, &[])).compare(HASH_ORDER),
        step("all topics", request(206, &[])).compare(HASH_ORDER),
        step("topics of the cluster", request(224, &[("cluster", "DefaultCluster")])).compare(HASH_ORDER),
        step("system topics", request(304, &[]))
            .compare(Compare::Unordered { ignore: &["brokerAddr"], row: "system-topics-broker" }),
        step("unit topics", request(311, &[])),
        step("has-unit-sub topics", request(312, &[])),
        step("has-unit-sub-ununit topics", request(313, &[])),
        step("broker member group", request(901, &[("clusterName", "DefaultCluster"), ("brokerName", "broker-a")])),
        // Broker bookkeeping.
        step("query data version, same", query_data_version(&A, 1)),
        step("query data version, changed", query_data_version(&A, 2)),
        step("register master b with a wrong CRC", wrong_crc),
        step(
            "register without brokerName",
            request(103, &[("brokerAddr", "127.0.0.1:1"), ("clusterName", "c"), ("brokerId", "0")]),
        )
        .compare(Compare::Differs("missing-header-field")),
        // Write permission.
        step("wipe write perm of a", request(205, &[("brokerName", "broker-a")])),
        step("route of TopicA, write perm wiped", route("TopicA", 479)),
        step("add write perm of a", request(327, &[("brokerName", "broker-a")])),
        step("route of TopicA, write perm back", route("TopicA", 479)),
        step("wipe write perm of an unknown broker", request(205, &[("brokerName", "nobody")])),
        // Topics registered and deleted by name.
        step(
            "register topic TopicNew on a",
            with_body(
                request(217, &[("topic", "TopicNew")]),
                r#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#,
            ),
        ),
        step("route of TopicNew", route("TopicNew", 479)),
        step("delete TopicNew", request(216, &[("topic", "TopicNew")])),
        step("route of TopicNew, deleted", route("TopicNew", 479)),
        // KV config.
        step("put kv", kv_put("ns1", "k1", "v1")),
        step("get kv", kv_get("ns1", "k1")),
        step("get kv, missing key", kv_get("ns1", "nope")),
        step("kv list of a namespace", request(219, &[("namespace", "ns1")])),
        step("kv list of an unknown namespace", request(219, &[("namespace", "nope")])),
        step("delete kv", kv_delete("ns1", "k1")),
        step("get kv, deleted", kv_get("ns1", "k1")),
        // Ordered topics.
        step("put order conf of TopicA", kv_put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:8")),
        step("route of TopicA, orderMessageEnable off", route("TopicA", 479)),
        step("turn orderMessageEnable on", with_body(request(318, &[]), "orderMessageEnable=true")),
        step("route of TopicA, ordered", route("TopicA", 479)),
        step("re-register a, order conf in the reply", register_request(&A, dv(3), &topics_a)),
        step("turn orderMessageEnable off", with_body(request(318, &[]), "orderMessageEnable=false")),
        step("update a config path", with_body(request(318, &[]), "kvConfigPath=/tmp/elsewhere.json")),
        // The paths and the address are the test's own.
        step("namesrv config", request(319, &[])).compare(Compare::Properties {
            ignore: &["rocketmqHome", "kvConfigPath", "configStorePath", "bindAddress", "listenPort"],
            row: "namesrv-config-keys",
        }),
        // Clients that read only standard JSON, and zones.
        step(
            "route of TopicA, before 4.9.4, acceptStandardJsonOnly",
            with_ext(route("TopicA", 399), &[("acceptStandardJsonOnly", "true")]),
        ),
        step(
            "register master c in zone z1",
            with_ext(register_request(&C, dv(1), &[("TopicZ", 4, 6), ("TopicShared", 4, 6)]), &[("__ZONE_NAME", "z1")]),
        ),
        step(
            "route of TopicShared in zone z1",
            with_ext(route("TopicShared", 479), &[("__ZONE_MODE", "true"), ("__ZONE_NAME", "z1")]),
        )
        .compare(HASH_ORDER),
        step("route of TopicShared, no zone", route("TopicShared", 479)).compare(HASH_ORDER),
        // The stateVersion guard: an older state does not replace a newer one.
        step(
            "register c with stateVersion 5",
            register_request(&C, state_version(2, 5), &[("TopicZ", 4, 6), ("TopicShared", 4, 6), ("TopicC5", 4, 6)]),
        ),
        step(
            "register c with stateVersion 3",
            register_request(&C, state_version(3, 3), &[("TopicZ", 4, 6), ("TopicShared", 4, 6), ("TopicC3", 4, 6)]),
        ),
        step("route of TopicC5", route("TopicC5", 479)),
        step("route of TopicC3", route("TopicC3", 479)),
        // A broker older than 3.0.11 sends the bare topic config wrapper.
        step(
            "register d, a broker before 3.0.11",
            versioned(register_with_body(register_request(&D, dv(1), &[]), OLD_BROKER_BODY), 0),
        ),
        step("route of TopicD", route("TopicD", 479)),
        step(
            "heartbeat of c",
            request(
                904,
                &[("clusterName", C.cluster), ("brokerAddr", C.addr), ("brokerName", C.name), ("brokerId", "0")],
            ),
        ),
        step("delete TopicD2 in the cluster", request(216, &[("topic", "TopicD2"), ("clusterName", "DefaultCluster")])),
        step("route of TopicD2, deleted", route("TopicD2", 479)),
        // Unregistration.
        step("unregister master b", unregister_request(&B)),
        step("route of TopicB after b left", route("TopicB", 479)).until(Until::Code(17)),
        step("route of TopicShared after b left", route("TopicShared", 479)).compare(HASH_ORDER),
        step("unregister the slave of a", unregister_request(&A_SLAVE)),
        step("route of TopicA after the slave left", route("TopicA", 479)).until(Until::Gone(A_SLAVE.addr)),
        // Java's clusterAddrTable keeps the cluster "c" of the registration without brokerName, with a null name.
        step("cluster info at the end", request(106, &[]))
            .compare(Compare::Unordered { ignore: &["clusterAddrTable"], row: "missing-header-field" }),
    ]
}

/// Sends the corpus over one connection and collects the replies.
async fn run_corpus(addr: std::net::SocketAddr) -> Vec<Reply> {
    let mut client = Client::connect(addr).await;
    let mut replies = Vec::new();
    for s in corpus() {
        let mut tries = 0;
        let reply = loop {
            let opaque = client.send(s.cmd.clone(), s.ty).await;
            let frame = client.read_frame_bytes().await.unwrap_or_else(|| panic!("{}: connection closed", s.label));
            let (reply, reply_opaque) = Reply::from_frame(s.label, &frame).expect("a valid reply frame");
            assert_eq!(reply_opaque, opaque, "{}: the reply carries the request's opaque", s.label);
            tries += 1;
            match s.until {
                Some(until) if !until.reached(&reply) && tries < 200 => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await
                }
                _ => break reply,
            }
        };
        replies.push(reply);
    }
    replies
}

fn fixture_path(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/java-{version}/corpus.jsonl"))
}

fn read_fixture(version: &str) -> Vec<Reply> {
    let text = std::fs::read_to_string(fixture_path(version)).expect("the recorded Java replies");
    text.lines().map(|l| serde_json::from_str(l).expect("a fixture line")).collect()
}

/// Compares `got` (from `who`) with the recorded Java replies, step by step; one paragraph per differing step.
/// Java against its own recording is held to every step, `Differs` ones included.
fn compare_all(want: &[Reply], got: &[Reply], who: &str, java: bool) -> Vec<String> {
    let steps = corpus();
    assert_eq!(want.len(), steps.len(), "the fixture has one reply per step of the corpus (re-record it)");
    let mut report = Vec::new();
    for ((s, w), g) in steps.iter().zip(want).zip(got) {
        assert_eq!(w.step, s.label, "the fixture follows the corpus (re-record it)");
        let compare = match s.compare {
            Compare::Differs(_) if java => Compare::Exact,
            other => other,
        };
        let diff = differences(compare, w, g, ("Java 5.3.3", who));
        if !diff.is_empty() {
            report.push(format!("step {:?}:\n  {}", s.label, diff.join("\n  ")));
        }
    }
    report
}

#[tokio::test]
async fn rocketns_answers_the_corpus_as_java_does() {
    let server = common::start().await;
    let ours = run_corpus(server.addr).await;
    let report = compare_all(&read_fixture("5.3.3"), &ours, "rocketns", false);
    assert!(report.is_empty(), "rocketns differs from Java 5.3.3:\n{}", report.join("\n"));
    // Every difference on purpose is explained in COMPATIBILITY.md.
    let table = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("COMPATIBILITY.md"))
        .expect("COMPATIBILITY.md");
    for s in corpus() {
        if let Some(id) = s.compare.row() {
            assert!(table.contains(&format!("| `{id}` |")), "COMPATIBILITY.md has no row {id} for {:?}", s.label);
        }
    }
}

#[tokio::test]
#[ignore = "needs a Java NameServer: tests/java/reference.sh"]
async fn java_answers_the_corpus_as_recorded() {
    let addr: std::net::SocketAddr = std::env::var("ROCKETNS_JAVA_NAMESRV")
        .expect("ROCKETNS_JAVA_NAMESRV=host:port of a fresh Java NameServer")
        .parse()
        .expect("an address");
    let version = std::env::var("ROCKETNS_JAVA_VERSION").unwrap_or_else(|_| "5.3.3".into());
    let java = run_corpus(addr).await;
    if std::env::var("ROCKETNS_JAVA_RECORD").is_ok() {
        let path = fixture_path(&version);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let lines: Vec<String> = java.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        eprintln!("recorded {} replies of Java {version} in {}", java.len(), path.display());
        return;
    }
    let report = compare_all(&read_fixture("5.3.3"), &java, &format!("Java {version}"), true);
    if std::env::var("ROCKETNS_JAVA_REPORT_ONLY").is_ok() {
        println!("Java {version} against the 5.3.3 fixture: {} steps differ", report.len());
        for r in &report {
            println!("{r}");
        }
        return;
    }
    assert!(report.is_empty(), "the live Java NameServer differs from its recorded replies:\n{}", report.join("\n"));
}
