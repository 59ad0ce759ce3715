//! The requests of a step, built as the software that sends them builds them: 5.x and 4.x brokers
//! (header fields, JSON or zlib bodies, CRC), admin tools and clients of several versions.

use bytes::Bytes;
use rocketns::protocol::{DataVersion, TopicConfig};
use rocketns::remoting::{ExtFields, RemotingCommand, SerializeType};
use rocketns::testing::wire::{self, request};

use crate::model::{BodyForm, BrokerSpec, Dv, Op, RouteClient, TopicSpec};

/// The version a 4.9.7 broker puts in its header (`MQVersion.Version.V4_9_7`).
pub const V4_9_7: i32 = 404;
/// The heartbeat timeout a 5.x broker registers with (`brokerNotActiveTimeoutMillis`' order of magnitude,
/// long enough that no broker expires inside a sequence unless a step says so).
pub const HEARTBEAT_TIMEOUT_MS: &str = "60000";
/// The timeout of an `Expire` step's registration.
pub const EXPIRE_TIMEOUT_MS: &str = "500";

fn data_version(dv: &Dv) -> DataVersion {
    DataVersion { counter: dv.counter, state_version: dv.state, timestamp: dv.timestamp }
}

/// A 4.9.7 broker's body: the wrapper without mapping tables, TopicConfig without `attributes`.
fn body_v4(dv: &Dv, topics: &[TopicSpec]) -> Vec<u8> {
    let table: serde_json::Map<String, serde_json::Value> = topics
        .iter()
        .map(|t| {
            let config = serde_json::json!({
                "order": false, "perm": t.perm, "readQueueNums": t.read, "topicFilterType": "SINGLE_TAG",
                "topicName": t.name, "topicSysFlag": t.sys_flag, "writeQueueNums": t.write,
            });
            (t.name.clone(), config)
        })
        .collect();
    let dv: serde_json::Value = serde_json::from_slice(&data_version(dv).to_json()).unwrap_or_default();
    let body = serde_json::json!({
        "filterServerList": [],
        "topicConfigSerializeWrapper": {"dataVersion": dv, "topicConfigTable": table},
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

fn body(broker: &BrokerSpec, dv: &Dv, topics: &[TopicSpec], form: BodyForm) -> Vec<u8> {
    let configs: Vec<TopicConfig> = topics
        .iter()
        .map(|t| {
            let mut c = TopicConfig::new(t.name.clone(), t.read, t.write, t.perm);
            c.topic_sys_flag = t.sys_flag;
            c
        })
        .collect();
    match (form, broker.v4) {
        (BodyForm::Compressed, _) => rocketns::testing::register_body_compressed(&data_version(dv), &configs, &[]),
        (BodyForm::Json, true) => body_v4(dv, topics),
        (BodyForm::Json, false) => rocketns::testing::register_body_json(&data_version(dv), &configs),
    }
}

/// REGISTER_BROKER as the broker sends it.
pub fn register(broker: &BrokerSpec, dv: &Dv, topics: &[TopicSpec], form: BodyForm, timeout: &str) -> RemotingCommand {
    let body = body(broker, dv, topics, form);
    let mut r = wire::register_request(identity(broker), &broker.ha_addr(), body, form == BodyForm::Compressed);
    let ext = r.ext_fields.get_or_insert_with(ExtFields::new);
    if broker.v4 {
        r.version = V4_9_7;
    } else {
        ext.insert("enableActingMaster", if broker.acting_master { "true" } else { "false" });
        ext.insert("heartbeatTimeoutMillis", timeout);
    }
    if let Some(zone) = &broker.zone {
        ext.insert("__ZONE_NAME", zone);
    }
    r
}

fn identity(b: &BrokerSpec) -> wire::BrokerIdentity<'_> {
    wire::BrokerIdentity { cluster: &b.cluster, name: &b.name, id: b.id, addr: &b.addr }
}

/// UNREGISTER_BROKER of `b`.
pub fn unregister(b: &BrokerSpec) -> RemotingCommand {
    wire::broker_request(104, identity(b))
}

/// QUERY_DATA_VERSION of `b` with `dv` in the body.
pub fn query_data_version(b: &BrokerSpec, dv: &Dv) -> RemotingCommand {
    let mut r = wire::broker_request(322, identity(b));
    r.body = Bytes::from(data_version(dv).to_json());
    r
}

/// The requests of `op` over its connection, each with its header encoding.
pub fn requests(brokers: &[BrokerSpec], op: &Op) -> Vec<(RemotingCommand, SerializeType)> {
    let json = |cmd| vec![(cmd, SerializeType::Json)];
    let broker = |i: &usize| &brokers[*i];
    match op {
        Op::Register { broker: b, topics, dv, form, parts } => {
            let b = broker(b);
            let parts = (*parts).clamp(1, topics.len().max(1));
            let chunk = topics.len().div_ceil(parts).max(1);
            let chunks: Vec<&[TopicSpec]> = if topics.is_empty() { vec![&[]] } else { topics.chunks(chunk).collect() };
            chunks.into_iter().map(|c| (register(b, dv, c, *form, HEARTBEAT_TIMEOUT_MS), SerializeType::Json)).collect()
        }
        Op::Expire { broker: b, topics, dv } => {
            json(register(broker(b), dv, topics, BodyForm::Json, EXPIRE_TIMEOUT_MS))
        }
        Op::Unregister { broker: b } => json(unregister(broker(b))),
        Op::Close { .. } => vec![],
        Op::Heartbeat { broker: b } => json(wire::broker_request(904, identity(broker(b)))),
        Op::QueryDataVersion { broker: b, dv } => json(query_data_version(broker(b), dv)),
        Op::WipeWritePerm { broker_name } => json(request(205, &[("brokerName", broker_name)])),
        Op::AddWritePerm { broker_name } => json(request(327, &[("brokerName", broker_name)])),
        Op::RegisterTopic { topic, queues } => {
            let datas: Vec<serde_json::Value> = queues
                .iter()
                .map(|(name, q, perm)| {
                    serde_json::json!({"brokerName": name, "perm": perm, "readQueueNums": q, "topicSysFlag": 0, "writeQueueNums": q})
                })
                .collect();
            let mut r = request(217, &[("topic", topic)]);
            r.body = Bytes::from(serde_json::to_vec(&serde_json::json!({ "queueDatas": datas })).unwrap_or_default());
            json(r)
        }
        Op::DeleteTopic { topic, cluster } => match cluster {
            Some(c) => json(request(216, &[("topic", topic), ("clusterName", c)])),
            None => json(request(216, &[("topic", topic)])),
        },
        Op::PutKv { namespace, key, value } => {
            json(request(100, &[("namespace", namespace), ("key", key), ("value", value)]))
        }
        Op::GetKv { namespace, key } => json(request(101, &[("namespace", namespace), ("key", key)])),
        Op::DeleteKv { namespace, key } => json(request(102, &[("namespace", namespace), ("key", key)])),
        Op::KvList { namespace } => json(request(219, &[("namespace", namespace)])),
        Op::UpdateConfig { key, value } => {
            let mut r = request(318, &[]);
            r.body = Bytes::from(format!("{key}={value}"));
            json(r)
        }
        Op::GetConfig => json(request(319, &[])),
        Op::Route { topic, client } => vec![route(topic, client)],
        Op::ClusterInfo => json(request(106, &[])),
        Op::AllTopics => json(request(206, &[])),
        Op::TopicsByCluster { cluster } => json(request(224, &[("cluster", cluster)])),
        Op::SystemTopics => json(request(304, &[])),
        Op::UnitTopics { code } => json(request(*code, &[])),
        Op::MemberGroup { cluster, broker_name } => {
            json(request(901, &[("clusterName", cluster), ("brokerName", broker_name)]))
        }
    }
}

fn route(topic: &str, client: &RouteClient) -> (RemotingCommand, SerializeType) {
    let mut r = request(105, &[("topic", topic)]);
    r.version = client.version;
    let ext = r.ext_fields.get_or_insert_with(ExtFields::new);
    if client.standard_only {
        ext.insert("acceptStandardJsonOnly", "true");
    }
    if let Some(zone) = &client.zone {
        ext.insert("__ZONE_MODE", "true");
        ext.insert("__ZONE_NAME", zone);
    }
    (r, if client.binary { SerializeType::RocketMq } else { SerializeType::Json })
}

/// The cluster info request the runner polls with while a broker leaves.
pub fn cluster_info() -> RemotingCommand {
    request(106, &[])
}
