//! The lockstep runner against two in-process rocketns servers (no JVM): the same server twice agrees on
//! generated sequences, and a server that differs is caught at the step that shows it and shrunk to it.

use rocketns_difftest::generate::{Target, sequence};
use rocketns_difftest::lockstep::run;
use rocketns_difftest::model::{BodyForm, Dv, Op, Sequence, TopicSpec};
use rocketns_difftest::servers::Rocketns;
use rocketns_difftest::shrink;

async fn outcome(seq: &Sequence, other: &str) -> rocketns_difftest::lockstep::Outcome {
    let (a, b) = (Rocketns::start().await.expect("a"), Rocketns::start_with(other).await.expect("b"));
    run(seq, a.addr, b.addr, ("a", "b"), None).await
}

#[tokio::test]
async fn the_same_server_twice_agrees_on_every_step() {
    for seed in 1..=3 {
        let seq = sequence(seed, 20, Target::Java5);
        let o = outcome(&seq, "").await;
        assert!(o.difference.is_none(), "seed {seed}: {:?}", o.difference);
        assert_eq!(o.reference.len(), seq.steps.len(), "every step ran");
        assert!(o.known.is_empty(), "rocketns keeps no stale entry");
    }
}

#[tokio::test]
async fn a_server_that_differs_is_caught_at_the_step_and_shrunk_to_it() {
    // The second server refuses the all-topics list, which the generated sequences ask for.
    let mut seq = sequence(4, 20, Target::Java5);
    seq.steps.retain(|op| !matches!(op, Op::UpdateConfig { key, .. } if key == "enableAllTopicList"));
    let topics = vec![TopicSpec { name: "TopicA".into(), read: 4, write: 4, perm: 6, sys_flag: 0 }];
    let dv = Dv { counter: 1, state: 0, timestamp: 1_700_000_000_001 };
    seq.steps.insert(3, Op::Register { broker: 0, topics, dv, form: BodyForm::Json, parts: 1 });
    seq.steps.insert(4, Op::AllTopics);
    let o = outcome(&seq, "enableAllTopicList=false\n").await;
    let diff = o.difference.expect("a difference");
    assert!(diff.step <= 4, "found at the first all-topics list, step {}", diff.step);
    assert_eq!(seq.steps[diff.step], Op::AllTopics);
    assert_eq!(diff.signature, "[206] code,remark,body");

    // Shrinking with the runner as the check: one step is enough (an empty list is refused too).
    let rt = tokio::runtime::Handle::current();
    let brokers = seq.brokers.clone();
    let steps: Vec<Op> = seq.steps[..=diff.step].to_vec();
    let shrunk = tokio::task::spawn_blocking(move || {
        shrink::steps(steps, |s| {
            let candidate = Sequence { brokers: brokers.clone(), steps: s.to_vec() };
            let o = rt.block_on(outcome(&candidate, "enableAllTopicList=false\n"));
            o.difference.is_some_and(|d| d.signature == "[206] code,remark,body")
        })
    })
    .await
    .expect("shrinking");
    assert_eq!(shrunk, vec![Op::AllTopics]);
}
