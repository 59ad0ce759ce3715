//! A controller sequence against two controllers in lockstep, as `crate::lockstep` runs the NameServer's:
//! each step to both at once, the replies compared before the next, the first difference ends the run.

use std::net::SocketAddr;
use std::time::Duration;

use rocketns::testing::reply::{Compare, HASH_ORDER, Reply, differences};

use super::model::CtlSequence;
use super::session::CtlSession;
use crate::lockstep::{Difference, Outcome};

/// How long a fresh one-node group may take to elect itself (DLedger's first election takes seconds).
const LEADER_TIMEOUT: Duration = Duration::from_secs(60);

/// The comparison for a reply to `code`: 1006's table of groups is a HashMap in Java (COMPATIBILITY.md,
/// hashmap-order); every other reply byte for byte.
pub fn compare_for(code: i32) -> Compare {
    match code {
        1006 => HASH_ORDER,
        _ => Compare::Exact,
    }
}

fn compare_step(reference: &[Reply], ours: &[Reply], names: (&str, &str)) -> Vec<String> {
    if reference.len() != ours.len() {
        return vec![format!("replies: {} {}, {} {}", names.0, reference.len(), names.1, ours.len())];
    }
    reference
        .iter()
        .zip(ours)
        .flat_map(|(r, o)| {
            let code = r.step.trim_matches(['[', ']']).parse().unwrap_or(0);
            differences(compare_for(code), r, o, names)
        })
        .collect()
}

/// Runs `seq` against the reference controller and ours, both fresh one-node groups.
pub async fn run(
    seq: &CtlSequence,
    reference: SocketAddr,
    ours: SocketAddr,
    names: (&str, &str),
) -> Result<Outcome, String> {
    let mut theirs = CtlSession::new(reference, seq.brokers.clone());
    let mut mine = CtlSession::new(ours, seq.brokers.clone());
    let (a, b) = tokio::join!(theirs.until_leader(LEADER_TIMEOUT), mine.until_leader(LEADER_TIMEOUT));
    a.and(b)?;
    let mut replies = Vec::new();
    for (i, op) in seq.steps.iter().enumerate() {
        let (r, o) = tokio::join!(theirs.apply(op), mine.apply(op));
        let report = compare_step(&r, &o, names);
        replies.push(r);
        if !report.is_empty() {
            let parts: Vec<&str> = report.iter().map(|l| l.split(':').next().unwrap_or("")).collect();
            let signature = format!("{:?} {}", op.codes(), parts.join(","));
            let difference = Difference { step: i, report, signature };
            return Ok(Outcome { reference: replies, difference: Some(difference), known: Vec::new() });
        }
    }
    Ok(Outcome { reference: replies, difference: None, known: Vec::new() })
}
