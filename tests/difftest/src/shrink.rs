//! Shrinking a sequence that shows a difference to the smallest that still shows it: delta debugging over
//! the steps (Zeller's ddmin: drop chunks, then single steps, for as long as the difference stays), then
//! over fields (each step made simpler in one way at a time: a topic fewer, default queue counts and perms,
//! an unsplit JSON body, the plainest client). Generic over the check, so that it is tested without servers.

use crate::model::{BodyForm, Op, RouteClient, TopicSpec};

/// Something that has simpler versions of itself.
pub trait Simplify: Sized {
    /// Each a little simpler than `self`, in one way; empty when it is as simple as it gets.
    fn simpler(&self) -> Vec<Self>;
}

/// The smallest sublist of `items` (by ddmin; 1-minimal: no single item can go) for which `fails` holds.
/// `fails(items)` must hold to begin with.
pub fn steps<T: Clone>(items: Vec<T>, mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut items = items;
    let mut chunks = 2usize;
    while items.len() >= 2 {
        let size = items.len().div_ceil(chunks);
        let mut reduced = false;
        let mut start = 0;
        while start < items.len() {
            let end = (start + size).min(items.len());
            let candidate: Vec<T> = items[..start].iter().chain(&items[end..]).cloned().collect();
            if !candidate.is_empty() && fails(&candidate) {
                items = candidate;
                chunks = (chunks - 1).max(2);
                reduced = true;
                break;
            }
            start = end;
        }
        if !reduced {
            if chunks >= items.len() {
                break;
            }
            chunks = (chunks * 2).min(items.len());
        }
    }
    items
}

/// Each item made as simple as it can be while `fails` holds, one simplification at a time.
pub fn fields<T: Clone + Simplify>(mut items: Vec<T>, mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..items.len() {
            for simpler in items[i].simpler() {
                let mut candidate = items.clone();
                candidate[i] = simpler;
                if fails(&candidate) {
                    items = candidate;
                    changed = true;
                    break;
                }
            }
        }
    }
    items
}

fn plain_topic(t: &TopicSpec) -> TopicSpec {
    TopicSpec { name: t.name.clone(), read: 4, write: 4, perm: 6, sys_flag: 0 }
}

/// Each topic list with one topic fewer, and with one topic made plain.
fn simpler_topics(topics: &[TopicSpec]) -> Vec<Vec<TopicSpec>> {
    let mut out = Vec::new();
    for i in 0..topics.len() {
        let mut fewer = topics.to_vec();
        fewer.remove(i);
        out.push(fewer);
    }
    for (i, t) in topics.iter().enumerate() {
        if *t != plain_topic(t) {
            let mut plain = topics.to_vec();
            plain[i] = plain_topic(t);
            out.push(plain);
        }
    }
    out
}

impl Simplify for Op {
    fn simpler(&self) -> Vec<Op> {
        let mut out = Vec::new();
        match self {
            Op::Register { broker, topics, dv, form, parts } => {
                let with = |topics: Vec<TopicSpec>| Op::Register {
                    broker: *broker,
                    topics,
                    dv: *dv,
                    form: *form,
                    parts: *parts,
                };
                out.extend(simpler_topics(topics).into_iter().map(with));
                if *form != BodyForm::Json {
                    out.push(Op::Register {
                        broker: *broker,
                        topics: topics.clone(),
                        dv: *dv,
                        form: BodyForm::Json,
                        parts: *parts,
                    });
                }
                if *parts > 1 {
                    out.push(Op::Register { broker: *broker, topics: topics.clone(), dv: *dv, form: *form, parts: 1 });
                }
                if dv.state != 0 {
                    let dv = crate::model::Dv { state: 0, ..*dv };
                    out.push(Op::Register { broker: *broker, topics: topics.clone(), dv, form: *form, parts: *parts });
                }
            }
            Op::Expire { broker, topics, dv } => {
                out.extend(simpler_topics(topics).into_iter().map(|topics| Op::Expire {
                    broker: *broker,
                    topics,
                    dv: *dv,
                }));
            }
            Op::RegisterTopic { topic, queues } if queues.len() > 1 => {
                for i in 0..queues.len() {
                    let mut fewer = queues.clone();
                    fewer.remove(i);
                    out.push(Op::RegisterTopic { topic: topic.clone(), queues: fewer });
                }
            }
            Op::DeleteTopic { topic, cluster: Some(_) } => {
                out.push(Op::DeleteTopic { topic: topic.clone(), cluster: None })
            }
            Op::Route { topic, client } => {
                let plain = RouteClient { version: 479, standard_only: false, binary: false, zone: None };
                if *client != plain {
                    for simpler in [
                        RouteClient { zone: None, ..client.clone() },
                        RouteClient { binary: false, ..client.clone() },
                        RouteClient { standard_only: false, ..client.clone() },
                        RouteClient { version: 479, ..client.clone() },
                    ] {
                        if simpler != *client {
                            out.push(Op::Route { topic: topic.clone(), client: simpler });
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{Target, sequence};
    use crate::model::Dv;

    #[test]
    fn ddmin_finds_the_only_steps_that_matter() {
        // Fails when 3, then 17, then 40 are all present, in that order.
        let items: Vec<u32> = (0..60).collect();
        let mut runs = 0;
        let fails = |s: &[u32]| {
            runs += 1;
            let pos = |x| s.iter().position(|v| *v == x);
            matches!((pos(3), pos(17), pos(40)), (Some(a), Some(b), Some(c)) if a < b && b < c)
        };
        assert_eq!(steps(items, fails), vec![3, 17, 40]);
        assert!(runs < 200, "{runs} runs");
    }

    /// A planted difference, as a server that forgets a wiped broker's perms would show: a registration of
    /// Planted by broker 0, later a wipe of broker-a, later a route of Planted.
    fn planted(s: &[Op]) -> bool {
        let reg = s.iter().position(
            |o| matches!(o, Op::Register { broker: 0, topics, .. } if topics.iter().any(|t| t.name == "Planted")),
        );
        let wipe = s.iter().position(|o| matches!(o, Op::WipeWritePerm { broker_name } if broker_name == "broker-a"));
        let route = s.iter().position(|o| matches!(o, Op::Route { topic, .. } if topic == "Planted"));
        matches!((reg, wipe, route), (Some(a), Some(b), Some(c)) if a < b && b < c)
    }

    #[test]
    fn a_planted_difference_shrinks_to_its_three_plain_steps() {
        let mut seq = sequence(3, 40, Target::Java5);
        // Plant it among the generated steps.
        let topics = vec![
            TopicSpec { name: "TopicA".into(), read: 8, write: 2, perm: 7, sys_flag: 1 },
            TopicSpec { name: "Planted".into(), read: 3, write: 3, perm: 2, sys_flag: 2 },
        ];
        let dv = Dv { counter: 3, state: 2, timestamp: 1_700_000_000_003 };
        seq.steps.insert(5, Op::Register { broker: 0, topics, dv, form: BodyForm::Compressed, parts: 2 });
        seq.steps.insert(40, Op::WipeWritePerm { broker_name: "broker-a".into() });
        let client = RouteClient { version: 399, standard_only: true, binary: true, zone: Some("z1".into()) };
        seq.steps.push(Op::Route { topic: "Planted".into(), client });
        assert!(planted(&seq.steps));

        let shrunk = fields(steps(seq.steps, planted), planted);
        let plain = vec![TopicSpec { name: "Planted".into(), read: 4, write: 4, perm: 6, sys_flag: 0 }];
        let expected = vec![
            Op::Register { broker: 0, topics: plain, dv: Dv { state: 0, ..dv }, form: BodyForm::Json, parts: 1 },
            Op::WipeWritePerm { broker_name: "broker-a".into() },
            Op::Route {
                topic: "Planted".into(),
                client: RouteClient { version: 479, standard_only: false, binary: false, zone: None },
            },
        ];
        assert_eq!(shrunk, expected);
    }
}
