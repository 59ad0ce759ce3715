//! Random sequences, deterministic by seed, weighted towards what the route table's rules care about: the
//! brokers of one group re-registering with changed topics, DataVersions and perms, the same topics on
//! several brokers, switches flipped mid-way, and reads after every change by clients of several versions.

use fastrand::Rng;

use crate::model::{BodyForm, BrokerSpec, Dv, Op, RouteClient, Sequence, TopicSpec};

/// Topic names a sequence draws from: few, so that brokers share them.
const TOPICS: &[&str] = &["TopicA", "TopicB", "TopicC", "%RETRY%group1", "%DLQ%group1"];
const NAMESPACES: &[&str] = &["ORDER_TOPIC_CONFIG", "ns1"];
/// The switches UPDATE_NAMESRV_CONFIG flips: each changes what a later request is answered.
pub const SWITCHES: &[&str] = &[
    "orderMessageEnable",
    "returnOrderTopicConfigToBroker",
    "enableAllTopicList",
    "enableTopicList",
    "deleteTopicWithBrokerRegistration",
    "supportActingMaster",
];
/// Switches a Java 4.9.7 NameServer does not have.
const SWITCHES_5X_ONLY: &[&str] = &["deleteTopicWithBrokerRegistration", "supportActingMaster"];

/// Which NameServer the sequences are for: a 4.x one lacks some codes and headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Java5,
    Java4,
}

/// What the generator believes of a broker (only to make plausible next requests; the servers decide).
#[derive(Clone, Default)]
struct Actor {
    topics: Vec<TopicSpec>,
    dv: Option<Dv>,
}

pub struct Generator {
    rng: Rng,
    target: Target,
    brokers: Vec<BrokerSpec>,
    actors: Vec<Actor>,
    /// The broker group most steps are about.
    focus: String,
}

fn pick<'a, T>(rng: &mut Rng, items: &'a [T]) -> &'a T {
    &items[rng.usize(..items.len())]
}

/// An index drawn by weight.
fn weighted(rng: &mut Rng, weights: &[u32]) -> usize {
    let total: u32 = weights.iter().sum();
    let mut n = rng.u32(..total.max(1));
    for (i, w) in weights.iter().enumerate() {
        if n < *w {
            return i;
        }
        n -= w;
    }
    weights.len() - 1
}

impl Generator {
    pub fn new(seed: u64, target: Target) -> Generator {
        let mut rng = Rng::with_seed(seed);
        let mut brokers = Vec::new();
        for (i, name) in ["broker-a", "broker-b", "broker-c"].iter().enumerate() {
            let cluster = match i {
                0 => "DefaultCluster",
                1 if rng.bool() => "DefaultCluster",
                _ => "c2",
            };
            let v4 = rng.u8(..4) == 0;
            // Zones and acting masters are 5.x NameServer features.
            let v5_features = !v4 && target == Target::Java5;
            let zone = (v5_features && rng.u8(..3) == 0).then(|| pick(&mut rng, &["z1", "z2"]).to_string());
            let acting_master = v5_features && rng.u8(..3) == 0;
            let port = 10911 + 100 * i as u32;
            let spec = |id: i64, port: u32| BrokerSpec {
                cluster: cluster.into(),
                name: name.to_string(),
                id,
                addr: format!("127.0.0.1:{port}"),
                v4,
                acting_master,
                zone: zone.clone(),
            };
            brokers.push(spec(0, port));
            brokers.push(spec(1, port + 10));
            // A slave that took over as master: id 0 at the slave's address (5.x failover).
            if !v4 && rng.u8(..4) == 0 {
                brokers.push(spec(0, port + 10));
            }
        }
        let focus = pick(&mut rng, &["broker-a", "broker-b", "broker-c"]).to_string();
        let actors = vec![Actor::default(); brokers.len()];
        Generator { rng, target, brokers, actors, focus }
    }

    /// A sequence of `writes` changes, each followed by one to three reads.
    pub fn sequence(mut self, writes: usize) -> Sequence {
        let mut steps = Vec::new();
        for _ in 0..writes {
            steps.push(self.write());
            for _ in 0..self.rng.usize(1..=3) {
                steps.push(self.read());
            }
        }
        Sequence { brokers: self.brokers, steps }
    }

    fn broker(&mut self) -> usize {
        let focused: Vec<usize> = (0..self.brokers.len()).filter(|i| self.brokers[*i].name == self.focus).collect();
        if self.rng.u8(..10) < 7 && !focused.is_empty() {
            *pick(&mut self.rng, &focused)
        } else {
            self.rng.usize(..self.brokers.len())
        }
    }

    fn broker_5x(&mut self) -> Option<usize> {
        let b = self.broker();
        (!self.brokers[b].v4).then_some(b)
    }

    fn topic_name(&mut self) -> String {
        pick(&mut self.rng, TOPICS).to_string()
    }

    fn topic(&mut self, name: String) -> TopicSpec {
        let read = self.rng.i32(1..=8);
        let write = if self.rng.u8(..4) == 0 { self.rng.i32(1..=8) } else { read };
        let perm = *pick(&mut self.rng, &[6, 6, 6, 6, 4, 2, 7]);
        let sys_flag = if self.rng.u8(..8) == 0 { self.rng.i32(1..=3) } else { 0 };
        TopicSpec { name, read, write, perm, sys_flag }
    }

    /// The broker's topics, changed a little from last time.
    fn next_topics(&mut self, b: usize) -> Vec<TopicSpec> {
        let mut topics = self.actors[b].topics.clone();
        if topics.is_empty() {
            for _ in 0..self.rng.usize(1..=3) {
                let name = self.topic_name();
                if !topics.iter().any(|t: &TopicSpec| t.name == name) {
                    let t = self.topic(name);
                    topics.push(t);
                }
            }
        } else {
            match weighted(&mut self.rng, &[5, 2, 2, 2]) {
                0 => {}
                1 => {
                    let name = self.topic_name();
                    if !topics.iter().any(|t| t.name == name) {
                        let t = self.topic(name);
                        topics.push(t);
                    }
                }
                2 => drop(topics.remove(self.rng.usize(..topics.len()))),
                _ => {
                    let i = self.rng.usize(..topics.len());
                    topics[i] = self.topic(topics[i].name.clone());
                }
            }
        }
        self.actors[b].topics = topics.clone();
        topics
    }

    fn next_dv(&mut self, b: usize) -> Dv {
        let dv = match self.actors[b].dv {
            None => Dv { counter: 1, state: 0, timestamp: 1_700_000_000_001 },
            Some(mut dv) => {
                if self.rng.u8(..10) < 7 {
                    dv.counter += 1;
                    dv.timestamp += 1;
                }
                match self.rng.u8(..20) {
                    0 | 1 => dv.state += 1,
                    2 => dv.state -= 1,
                    _ => {}
                }
                dv
            }
        };
        self.actors[b].dv = Some(dv);
        dv
    }

    fn write(&mut self) -> Op {
        let v5 = self.target == Target::Java5;
        // register, unregister, close, expire, heartbeat, query dv, wipe, add, register topic, delete topic,
        // put kv, get kv, delete kv, update config, get config
        let weights = [30, 4, 4, if v5 { 1 } else { 0 }, if v5 { 3 } else { 0 }, 4, 4, 4, 3, 4, 5, 1, 3, 5, 1];
        match weighted(&mut self.rng, &weights) {
            0 => {
                let b = self.broker();
                let topics = self.next_topics(b);
                let dv = self.next_dv(b);
                // The compressed form is a 5.x broker's, which a 4.x NameServer cannot read.
                let form = if v5 && !self.brokers[b].v4 && self.rng.u8(..5) == 0 {
                    BodyForm::Compressed
                } else {
                    BodyForm::Json
                };
                let parts = if !self.brokers[b].v4 && topics.len() >= 2 && self.rng.u8(..6) == 0 {
                    self.rng.usize(2..=3)
                } else {
                    1
                };
                Op::Register { broker: b, topics, dv, form, parts }
            }
            1 => Op::Unregister { broker: self.broker() },
            2 => Op::Close { broker: self.broker() },
            3 => match self.broker_5x() {
                Some(b) => {
                    let topics = self.next_topics(b);
                    let dv = self.next_dv(b);
                    self.actors[b] = Actor::default();
                    Op::Expire { broker: b, topics, dv }
                }
                None => Op::ClusterInfo,
            },
            4 => match self.broker_5x() {
                Some(b) => Op::Heartbeat { broker: b },
                None => Op::ClusterInfo,
            },
            5 => {
                let b = self.broker();
                let dv = match self.actors[b].dv {
                    Some(dv) if self.rng.u8(..5) < 3 => dv,
                    _ => {
                        Dv { counter: self.rng.i64(0..5), state: 0, timestamp: 1_700_000_000_000 + self.rng.i64(0..5) }
                    }
                };
                Op::QueryDataVersion { broker: b, dv }
            }
            6 => Op::WipeWritePerm { broker_name: self.broker_name() },
            7 => Op::AddWritePerm { broker_name: self.broker_name() },
            8 => {
                let topic = if self.rng.bool() { self.topic_name() } else { "TopicNew".into() };
                let mut queues = Vec::new();
                for _ in 0..self.rng.usize(1..=2) {
                    let name = self.broker_name();
                    queues.push((name, self.rng.i32(1..=8), *pick(&mut self.rng, &[6, 4, 2])));
                }
                Op::RegisterTopic { topic, queues }
            }
            9 => {
                let topic = self.topic_name();
                let cluster = match self.rng.u8(..4) {
                    0 | 1 => None,
                    2 => {
                        let b = self.broker();
                        Some(self.brokers[b].cluster.clone())
                    }
                    _ => Some("nocluster".into()),
                };
                Op::DeleteTopic { topic, cluster }
            }
            10 => {
                let (namespace, key) = self.kv_key();
                let value = if namespace == "ORDER_TOPIC_CONFIG" {
                    let names = ["broker-a:4", "broker-a:4;broker-b:8", "broker-c:2"];
                    pick(&mut self.rng, &names).to_string()
                } else {
                    format!("v{}", self.rng.u8(..10))
                };
                Op::PutKv { namespace, key, value }
            }
            11 => {
                let (namespace, key) = self.kv_key();
                Op::GetKv { namespace, key }
            }
            12 => {
                let (namespace, key) = self.kv_key();
                Op::DeleteKv { namespace, key }
            }
            13 => {
                let switches: Vec<&str> =
                    SWITCHES.iter().copied().filter(|s| v5 || !SWITCHES_5X_ONLY.contains(s)).collect();
                let key = pick(&mut self.rng, &switches).to_string();
                Op::UpdateConfig { key, value: self.rng.bool().to_string() }
            }
            _ => Op::GetConfig,
        }
    }

    fn broker_name(&mut self) -> String {
        if self.rng.u8(..10) == 0 {
            "nobody".into()
        } else {
            let b = self.broker();
            self.brokers[b].name.clone()
        }
    }

    fn kv_key(&mut self) -> (String, String) {
        let namespace = pick(&mut self.rng, NAMESPACES).to_string();
        let key = if namespace == "ORDER_TOPIC_CONFIG" {
            self.topic_name()
        } else {
            pick(&mut self.rng, &["k1", "k2", "k3"]).to_string()
        };
        (namespace, key)
    }

    fn read(&mut self) -> Op {
        let v5 = self.target == Target::Java5;
        // route, cluster info, all topics, topics by cluster, system topics, unit lists, member group, kv list
        match weighted(&mut self.rng, &[50, 15, 8, 6, 5, 5, if v5 { 6 } else { 0 }, 5]) {
            0 => {
                let topic = self.topic_name();
                let version = *pick(&mut self.rng, &[479, 479, 399, 317, 121]);
                let client = RouteClient {
                    version,
                    standard_only: self.rng.u8(..7) == 0,
                    binary: self.rng.u8(..10) == 0,
                    zone: (v5 && self.rng.u8(..8) == 0).then(|| pick(&mut self.rng, &["z1", "z2"]).to_string()),
                };
                Op::Route { topic, client }
            }
            1 => Op::ClusterInfo,
            2 => Op::AllTopics,
            3 => {
                let b = self.broker();
                Op::TopicsByCluster { cluster: self.brokers[b].cluster.clone() }
            }
            4 => Op::SystemTopics,
            5 => Op::UnitTopics { code: *pick(&mut self.rng, &[311, 312, 313]) },
            6 => {
                let b = self.broker();
                Op::MemberGroup { cluster: self.brokers[b].cluster.clone(), broker_name: self.brokers[b].name.clone() }
            }
            _ => Op::KvList { namespace: pick(&mut self.rng, NAMESPACES).to_string() },
        }
    }
}

/// The sequence of `seed`.
pub fn sequence(seed: u64, writes: usize, target: Target) -> Sequence {
    Generator::new(seed, target).sequence(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_sequence_and_another_seed_another() {
        let a = sequence(7, 30, Target::Java5);
        assert_eq!(a, sequence(7, 30, Target::Java5));
        assert_ne!(a, sequence(8, 30, Target::Java5));
        assert!(a.steps.len() >= 60, "each write is followed by reads");
    }

    #[test]
    fn sequences_hit_the_rules_that_matter() {
        // Over a few seeds: one group re-registers, some registrations keep their DataVersion, splits and
        // compressed bodies occur, and every switch is flipped.
        let seqs: Vec<Sequence> = (0..20).map(|s| sequence(s, 40, Target::Java5)).collect();
        let ops = || seqs.iter().flat_map(|s| s.steps.iter());
        let registers = ops().filter(|o| matches!(o, Op::Register { .. })).count();
        assert!(registers > 150, "{registers} registrations");
        assert!(ops().any(|o| matches!(o, Op::Register { parts: 2.., .. })));
        assert!(ops().any(|o| matches!(o, Op::Register { form: BodyForm::Compressed, .. })));
        assert!(ops().any(|o| matches!(o, Op::Expire { .. })));
        assert!(seqs.iter().any(|s| s.brokers.iter().any(|b| b.acting_master)), "some groups allow an acting master");
        for s in SWITCHES {
            assert!(ops().any(|o| matches!(o, Op::UpdateConfig { key, .. } if key == s)), "{s} is flipped");
        }
        let same_dv = seqs.iter().any(|s| {
            let regs: Vec<(usize, Dv)> = s
                .steps
                .iter()
                .filter_map(|o| match o {
                    Op::Register { broker, dv, .. } => Some((*broker, *dv)),
                    _ => None,
                })
                .collect();
            regs.windows(2).any(|w| w[0] == w[1])
        });
        assert!(same_dv, "a broker re-registers with an unchanged DataVersion");
    }

    #[test]
    fn a_4x_target_gets_no_5x_only_requests() {
        for seed in 0..20 {
            let s = sequence(seed, 40, Target::Java4);
            assert!(s.brokers.iter().all(|b| b.zone.is_none() && !b.acting_master));
            for op in &s.steps {
                assert!(!matches!(op, Op::Heartbeat { .. } | Op::Expire { .. } | Op::MemberGroup { .. }), "{op:?}");
                assert!(!matches!(op, Op::Register { form: BodyForm::Compressed, .. }), "{op:?}");
                assert!(!matches!(op, Op::Route { client, .. } if client.zone.is_some()), "{op:?}");
                if let Op::UpdateConfig { key, .. } = op {
                    assert!(!SWITCHES_5X_ONLY.contains(&key.as_str()));
                }
            }
        }
    }
}
