//! Controller sequences by seed: brokers start and apply for ids (now and then with an id an old id file
//! kept, which may be taken), beat with changing epochs and offsets, ask for elections once they have
//! started and beaten (what a Java broker does before it asks: COMPATIBILITY.md's
//! `controller-first-election`), change SyncStateSets in the master's name and others', stale or not, and
//! an admin designates masters and cleans groups; after each change a read.

use super::model::{CtlBroker, CtlOp, CtlSequence};

/// The world: `broker-a` of three brokers and `broker-b` of two, in one cluster, as the quick-start's
/// controller-mode brokers are set up.
pub fn world() -> Vec<CtlBroker> {
    let broker = |name: &str, port: u32| CtlBroker {
        cluster: "DefaultCluster".into(),
        name: name.into(),
        addr: format!("127.0.0.1:{port}"),
    };
    vec![
        broker("broker-a", 30911),
        broker("broker-a", 30921),
        broker("broker-a", 30931),
        broker("broker-b", 30941),
        broker("broker-b", 30951),
    ]
}

/// A group name none of the brokers has, for reads of what is not there.
pub const UNKNOWN_GROUP: &str = "broker-z";

fn group_of(brokers: &[CtlBroker], b: usize) -> Vec<usize> {
    (0..brokers.len()).filter(|&o| brokers[o].name == brokers[b].name).collect()
}

/// Some of `from`, in their order (maybe none).
fn some_of(rng: &mut fastrand::Rng, from: &[usize]) -> Vec<usize> {
    from.iter().copied().filter(|_| rng.bool()).collect()
}

fn read(rng: &mut fastrand::Rng, brokers: &[CtlBroker], b: usize) -> CtlOp {
    let name = brokers[b].name.clone();
    match rng.u8(0..4) {
        0 => CtlOp::SyncStateData { names: vec![name, UNKNOWN_GROUP.into()] },
        1 => CtlOp::SyncStateData { names: vec!["broker-a".into(), "broker-b".into()] },
        2 if rng.u8(0..4) == 0 => CtlOp::ReplicaInfo { broker_name: UNKNOWN_GROUP.into() },
        _ => CtlOp::ReplicaInfo { broker_name: name },
    }
}

/// The sequence of `seed` with `writes` changes.
pub fn sequence(seed: u64, writes: usize) -> CtlSequence {
    let mut rng = fastrand::Rng::with_seed(seed);
    let brokers = world();
    let mut joined = vec![false; brokers.len()];
    let mut beaten = vec![false; brokers.len()];
    let mut steps = Vec::new();
    for _ in 0..writes {
        // Mostly broker-a, where three brokers make elections and set changes interesting.
        let b = if rng.u8(0..10) < 7 { rng.usize(0..3) } else { rng.usize(3..brokers.len()) };
        let roll = rng.u8(0..100);
        let op = if !joined[b] && rng.u8(0..3) > 0 {
            joined[b] = true;
            beaten[b] = false;
            CtlOp::Join { broker: b, id: (rng.u8(0..5) == 0).then(|| rng.i64(1..5)) }
        } else if roll < 8 {
            // A restart: the same broker applies again, for its own id or another.
            beaten[b] = false;
            CtlOp::Join { broker: b, id: (rng.u8(0..3) == 0).then(|| rng.i64(1..5)) }
        } else if (35..60).contains(&roll) && joined[b] && beaten[b] {
            CtlOp::Elect { broker: b, designate: rng.u8(0..4) == 0 }
        } else if roll < 60 {
            beaten[b] = true;
            CtlOp::Beat {
                broker: b,
                epoch: rng.i32(0..4),
                max_offset: [0, 0, 100, 200, 200][rng.usize(0..5)],
                priority: rng.i32(0..3),
            }
        } else if roll < 88 {
            CtlOp::Alter {
                broker: b,
                members: some_of(&mut rng, &group_of(&brokers, b)),
                as_self: rng.u8(0..6) == 0,
                stale: rng.u8(0..6) == 0,
            }
        } else if roll < 95 {
            CtlOp::Clean {
                broker_name: brokers[b].name.clone(),
                brokers: some_of(&mut rng, &group_of(&brokers, b)),
                living: rng.bool(),
            }
        } else {
            read(&mut rng, &brokers, b)
        };
        steps.push(op);
        let r = rng.usize(0..brokers.len());
        steps.push(read(&mut rng, &brokers, r));
    }
    CtlSequence { brokers, steps }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_sequence_and_another_seed_another() {
        let a = sequence(7, 20);
        assert_eq!(a, sequence(7, 20));
        assert_ne!(a, sequence(8, 20));
        assert_eq!(a.steps.len(), 40, "each change is followed by a read");
    }

    #[test]
    fn sequences_reach_every_request_and_elect_only_after_a_beat() {
        let seqs: Vec<CtlSequence> = (1..=8).map(|s| sequence(s, 20)).collect();
        let mut codes: Vec<i32> = seqs.iter().flat_map(|s| s.steps.iter()).flat_map(|o| o.codes().to_vec()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes, [904, 1001, 1002, 1003, 1004, 1006, 1011, 1012, 1013]);
        let ops = || seqs.iter().flat_map(|s| s.steps.iter());
        assert!(ops().any(|o| matches!(o, CtlOp::Join { id: Some(_), .. })), "an id from an id file");
        assert!(ops().any(|o| matches!(o, CtlOp::Elect { designate: true, .. })), "an admin's designation");
        assert!(ops().any(|o| matches!(o, CtlOp::Alter { stale: true, .. })), "a stale alter");
        assert!(ops().any(|o| matches!(o, CtlOp::Clean { living: true, .. })), "a clean of living brokers");
        for s in &seqs {
            let mut beaten = vec![false; s.brokers.len()];
            for op in &s.steps {
                match op {
                    CtlOp::Join { broker, .. } => beaten[*broker] = false,
                    CtlOp::Beat { broker, .. } => beaten[*broker] = true,
                    CtlOp::Elect { broker, .. } => assert!(beaten[*broker], "#{broker} asks before it beats"),
                    _ => {}
                }
            }
        }
    }
}
