//! A sequence against two servers in lockstep: each step goes to both at once, and their replies are
//! compared (compare.rs) before the next step; the first step whose replies differ ends the run.

use std::net::SocketAddr;

use rocketns::testing::reply::{Compare, Reply, differences};

use crate::compare::compare_for;
use crate::model::{Op, Sequence};
use crate::session::{LEFT, Session};

/// Where a run found the two servers apart.
#[derive(Clone, Debug)]
pub struct Difference {
    /// The step (0-based).
    pub step: usize,
    /// What differed, in words.
    pub report: Vec<String>,
    /// What kind of difference: the step's request codes and the parts of the reply that differ. Shrinking
    /// keeps a candidate only when it shows the same kind.
    pub signature: String,
}

/// A run's result: the reference's replies to each step run, and the first difference, if any.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub reference: Vec<Vec<Reply>>,
    pub difference: Option<Difference>,
    /// Steps after which the two servers' states differed on purpose, with the COMPATIBILITY.md row that
    /// says why; the runner brought them together again and went on.
    pub known: Vec<(usize, &'static str)>,
}

impl Outcome {
    /// How many steps show the difference `signature` names, when this outcome differs that way (what a
    /// shrinking candidate is kept for, cut to those steps).
    pub fn shows(&self, signature: &str) -> Option<usize> {
        self.difference.as_ref().filter(|d| d.signature == signature).map(|d| d.step + 1)
    }
}

/// `stale-live-entry` (COMPATIBILITY.md): after a broker's connection closed or it expired, Java still
/// answers QUERY_DATA_VERSION for its address with its last DataVersion (its liveness entry is never
/// removed when the address had left its group's table first); rocketns removed the entry.
fn stale_live_entry(reference: &Reply, ours: &Reply) -> bool {
    reference.code == 0 && ours.code == 0 && !reference.body_bytes().is_empty() && ours.body_bytes().is_empty()
}

/// The differences between the two servers' replies to one step; empty when they agree.
pub fn compare_step(op: &Op, reference: &[Reply], ours: &[Reply], names: (&str, &str)) -> Vec<String> {
    if reference.len() != ours.len() {
        return vec![format!("replies: {} {}, {} {}", names.0, reference.len(), names.1, ours.len())];
    }
    let code = op.codes().first().copied();
    reference
        .iter()
        .zip(ours)
        .flat_map(|(r, o)| {
            // Whether a leaving broker left is compared as it is.
            let compare = match code {
                Some(code) if r.step != LEFT => compare_for(code),
                _ => Compare::Exact,
            };
            differences(compare, r, o, names)
        })
        .collect()
}

fn signature(seq: &Sequence, step: usize, report: &[String]) -> String {
    let parts: Vec<&str> = report.iter().map(|l| l.split(':').next().unwrap_or("")).collect();
    format!("{:?} {}", seq.steps[step].codes(), parts.join(","))
}

/// Runs `seq` against the reference server and ours, which must be fresh; `adapt` reshapes our replies
/// before they are compared (`compare::as_4x` against a 4.x NameServer).
pub async fn run(
    seq: &Sequence,
    reference: SocketAddr,
    ours: SocketAddr,
    names: (&str, &str),
    adapt: Option<fn(&Reply) -> Reply>,
) -> Outcome {
    let mut theirs = Session::new(reference, seq.brokers.clone());
    let mut mine = Session::new(ours, seq.brokers.clone());
    let mut replies = Vec::new();
    let mut known = Vec::new();
    for (i, op) in seq.steps.iter().enumerate() {
        let (r, mut o) = tokio::join!(theirs.apply(op), mine.apply(op));
        if let Some(adapt) = adapt {
            o = o.iter().map(adapt).collect();
        }
        let mut report = compare_step(op, &r, &o, names);
        // After a close or an expiry, the last reply says what each server still keeps of the broker.
        if let Op::Close { broker } | Op::Expire { broker, .. } = op
            && !report.is_empty()
            && r.len() == o.len()
            && compare_step(op, &r[..r.len() - 1], &o[..o.len() - 1], names).is_empty()
            && r.last().zip(o.last()).is_some_and(|(r, o)| stale_live_entry(r, o))
        {
            known.push((i, "stale-live-entry"));
            let (r, o) = tokio::join!(theirs.forget(*broker), mine.forget(*broker));
            report = compare_step(&Op::Unregister { broker: *broker }, &r, &o, names);
            if !report.is_empty() {
                report.insert(0, "then forgetting the address kept on purpose:".into());
            }
        }
        replies.push(r);
        if !report.is_empty() {
            let signature = signature(seq, i, &report);
            return Outcome { reference: replies, difference: Some(Difference { step: i, report, signature }), known };
        }
    }
    Outcome { reference: replies, difference: None, known }
}

/// Runs `seq` against one server and returns its replies, step by step (fixture replays).
pub async fn replies(seq: &Sequence, server: SocketAddr) -> Vec<Vec<Reply>> {
    let mut session = Session::new(server, seq.brokers.clone());
    let mut out = Vec::new();
    for op in &seq.steps {
        out.push(session.apply(op).await);
    }
    out
}
