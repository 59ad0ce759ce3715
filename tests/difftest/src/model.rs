//! What a generated sequence is made of: the brokers of its world and the steps it takes, each a request
//! (or a connection closed, or a broker left to expire) that both NameServers get. Sequences are data, so
//! that a shrunk one is saved as a fixture and printed as a readable script.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A broker process: the identity it registers under. Each one has a connection of its own on each server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerSpec {
    pub cluster: String,
    pub name: String,
    pub id: i64,
    pub addr: String,
    /// A 4.x broker: 4.x bodies and headers (no `enableActingMaster`, no heartbeat timeout), version 4.9.7.
    pub v4: bool,
    /// `enableActingMaster=true` in its registrations (5.x).
    #[serde(default)]
    pub acting_master: bool,
    /// `__ZONE_NAME` in its registrations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

impl BrokerSpec {
    pub fn ha_addr(&self) -> String {
        match self.addr.rsplit_once(':') {
            Some((host, port)) => format!("{host}:{}", port.parse::<u32>().unwrap_or(0) + 1),
            None => self.addr.clone(),
        }
    }
}

/// A topic as a broker registers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSpec {
    pub name: String,
    pub read: i32,
    pub write: i32,
    pub perm: i32,
    #[serde(default)]
    pub sys_flag: i32,
}

/// How a registration's body travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyForm {
    /// The JSON body of the broker's version.
    Json,
    /// `compressed=true`: the zlib form (5.x brokers with `compressedRegister`).
    Compressed,
}

/// A broker's DataVersion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dv {
    pub counter: i64,
    pub state: i64,
    pub timestamp: i64,
}

/// A client's GET_ROUTEINFO_BY_TOPIC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteClient {
    /// The version in its header: below 401 (4.9.4) Java answers in fastjson's own style.
    pub version: i32,
    /// `acceptStandardJsonOnly=true`.
    #[serde(default)]
    pub standard_only: bool,
    /// The ROCKETMQ binary header instead of JSON.
    #[serde(default)]
    pub binary: bool,
    /// `__ZONE_MODE=true` with this `__ZONE_NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Op {
    /// REGISTER_BROKER over the broker's connection; `parts` > 1 splits the topics over that many requests
    /// with the same DataVersion, as a 5.x broker with `enableSplitRegistration` does.
    Register {
        broker: usize,
        topics: Vec<TopicSpec>,
        dv: Dv,
        form: BodyForm,
        parts: usize,
    },
    /// UNREGISTER_BROKER, then until the broker's address has left both servers (bounded).
    Unregister {
        broker: usize,
    },
    /// The broker's connection closes; then until its address has left (bounded).
    Close {
        broker: usize,
    },
    /// The broker re-registers with a heartbeat timeout of 500 ms and falls silent: until the scan has
    /// removed it (bounded). 5.x brokers only.
    Expire {
        broker: usize,
        topics: Vec<TopicSpec>,
        dv: Dv,
    },
    /// BROKER_HEARTBEAT (904). Brokers send it one-way; here it is a request, so that the replies compare.
    Heartbeat {
        broker: usize,
    },
    /// QUERY_DATA_VERSION with the broker's current DataVersion or another.
    QueryDataVersion {
        broker: usize,
        dv: Dv,
    },
    WipeWritePerm {
        broker_name: String,
    },
    AddWritePerm {
        broker_name: String,
    },
    /// REGISTER_TOPIC_IN_NAMESRV: (broker name, queues, perm) per QueueData.
    RegisterTopic {
        topic: String,
        queues: Vec<(String, i32, i32)>,
    },
    DeleteTopic {
        topic: String,
        cluster: Option<String>,
    },
    PutKv {
        namespace: String,
        key: String,
        value: String,
    },
    GetKv {
        namespace: String,
        key: String,
    },
    DeleteKv {
        namespace: String,
        key: String,
    },
    KvList {
        namespace: String,
    },
    UpdateConfig {
        key: String,
        value: String,
    },
    GetConfig,
    Route {
        topic: String,
        client: RouteClient,
    },
    ClusterInfo,
    AllTopics,
    TopicsByCluster {
        cluster: String,
    },
    SystemTopics,
    /// 311, 312 or 313.
    UnitTopics {
        code: i32,
    },
    MemberGroup {
        cluster: String,
        broker_name: String,
    },
}

impl Op {
    /// The broker whose connection the step uses, if any.
    pub fn broker(&self) -> Option<usize> {
        match self {
            Op::Register { broker, .. }
            | Op::Unregister { broker }
            | Op::Close { broker }
            | Op::Expire { broker, .. }
            | Op::Heartbeat { broker }
            | Op::QueryDataVersion { broker, .. } => Some(*broker),
            _ => None,
        }
    }

    /// A read: changes nothing on either server.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            Op::GetKv { .. }
                | Op::KvList { .. }
                | Op::GetConfig
                | Op::Route { .. }
                | Op::ClusterInfo
                | Op::AllTopics
                | Op::TopicsByCluster { .. }
                | Op::SystemTopics
                | Op::UnitTopics { .. }
                | Op::MemberGroup { .. }
        )
    }

    /// The request codes the step sends (none for a closed connection).
    pub fn codes(&self) -> &'static [i32] {
        match self {
            Op::Register { .. } | Op::Expire { .. } => &[103],
            Op::Unregister { .. } => &[104],
            Op::Close { .. } => &[],
            Op::Heartbeat { .. } => &[904],
            Op::QueryDataVersion { .. } => &[322],
            Op::WipeWritePerm { .. } => &[205],
            Op::AddWritePerm { .. } => &[327],
            Op::RegisterTopic { .. } => &[217],
            Op::DeleteTopic { .. } => &[216],
            Op::PutKv { .. } => &[100],
            Op::GetKv { .. } => &[101],
            Op::DeleteKv { .. } => &[102],
            Op::KvList { .. } => &[219],
            Op::UpdateConfig { .. } => &[318],
            Op::GetConfig => &[319],
            Op::Route { .. } => &[105],
            Op::ClusterInfo => &[106],
            Op::AllTopics => &[206],
            Op::TopicsByCluster { .. } => &[224],
            Op::SystemTopics => &[304],
            Op::UnitTopics { code } => match code {
                311 => &[311],
                312 => &[312],
                _ => &[313],
            },
            Op::MemberGroup { .. } => &[901],
        }
    }
}

/// A generated sequence: its world of brokers and its steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    pub brokers: Vec<BrokerSpec>,
    pub steps: Vec<Op>,
}

fn topics(list: &[TopicSpec]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|t| {
            let flag = if t.sys_flag != 0 { format!(" sysFlag {}", t.sys_flag) } else { String::new() };
            format!("{} r{}/w{} perm {}{flag}", t.name, t.read, t.write, t.perm)
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn dv(d: &Dv) -> String {
    format!("dv {}/{}@{}", d.counter, d.state, d.timestamp - 1_700_000_000_000)
}

impl Sequence {
    fn who(&self, broker: usize) -> String {
        match self.brokers.get(broker) {
            Some(b) => format!("{} {}#{} ({})", b.cluster, b.name, b.id, b.addr),
            None => format!("broker {broker}?"),
        }
    }

    /// One step as a line of the readable script.
    pub fn describe(&self, op: &Op) -> String {
        match op {
            Op::Register { broker, topics: t, dv: d, form, parts } => {
                let split = if *parts > 1 { format!(" in {parts} parts") } else { String::new() };
                let compressed = if *form == BodyForm::Compressed { " compressed" } else { "" };
                format!("register {} {} {}{compressed}{split}", self.who(*broker), dv(d), topics(t))
            }
            Op::Unregister { broker } => format!("unregister {}", self.who(*broker)),
            Op::Close { broker } => format!("close the connection of {}", self.who(*broker)),
            Op::Expire { broker, topics: t, dv: d } => {
                format!("register {} {} {} with a 500 ms timeout, then silence", self.who(*broker), dv(d), topics(t))
            }
            Op::Heartbeat { broker } => format!("heartbeat of {}", self.who(*broker)),
            Op::QueryDataVersion { broker, dv: d } => {
                format!("query data version of {} with {}", self.who(*broker), dv(d))
            }
            Op::WipeWritePerm { broker_name } => format!("wipe write perm of {broker_name}"),
            Op::AddWritePerm { broker_name } => format!("add write perm of {broker_name}"),
            Op::RegisterTopic { topic, queues } => format!("register topic {topic} on {queues:?}"),
            Op::DeleteTopic { topic, cluster } => match cluster {
                Some(c) => format!("delete topic {topic} in cluster {c}"),
                None => format!("delete topic {topic}"),
            },
            Op::PutKv { namespace, key, value } => format!("put kv {namespace}/{key} = {value}"),
            Op::GetKv { namespace, key } => format!("get kv {namespace}/{key}"),
            Op::DeleteKv { namespace, key } => format!("delete kv {namespace}/{key}"),
            Op::KvList { namespace } => format!("kv list of {namespace}"),
            Op::UpdateConfig { key, value } => format!("update config {key}={value}"),
            Op::GetConfig => "get config".into(),
            Op::Route { topic, client } => {
                let mut how = format!("version {}", client.version);
                if client.standard_only {
                    how += ", acceptStandardJsonOnly";
                }
                if client.binary {
                    how += ", binary header";
                }
                if let Some(z) = &client.zone {
                    how += &format!(", zone {z}");
                }
                format!("route of {topic} ({how})")
            }
            Op::ClusterInfo => "cluster info".into(),
            Op::AllTopics => "all topics".into(),
            Op::TopicsByCluster { cluster } => format!("topics of cluster {cluster}"),
            Op::SystemTopics => "system topics".into(),
            Op::UnitTopics { code } => format!("unit topic list {code}"),
            Op::MemberGroup { cluster, broker_name } => format!("member group {cluster}/{broker_name}"),
        }
    }
}

impl fmt::Display for Sequence {
    /// The readable script: the world, then one numbered line per step.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.brokers.iter().enumerate() {
            let zone = b.zone.as_deref().map(|z| format!(" zone {z}")).unwrap_or_default();
            let version = match (b.v4, b.acting_master) {
                (true, _) => "4.x",
                (false, true) => "5.x, enableActingMaster",
                (false, false) => "5.x",
            };
            writeln!(f, "# broker {i}: {} {}#{} at {} ({version}{zone})", b.cluster, b.name, b.id, b.addr)?;
        }
        for (i, op) in self.steps.iter().enumerate() {
            writeln!(f, "{:3}. {}", i + 1, self.describe(op))?;
        }
        Ok(())
    }
}
