//! Every shrunk difference kept in tests/difftest/fixtures, replayed against an in-process rocketns and
//! compared with the Java NameServer's recorded replies, step by step (no JVM needed). A fixture without a
//! `row` is a difference that was fixed: every step must answer as Java did. One with a `row` is kept on
//! purpose: every step but the last must answer as Java did, the last must still differ, and COMPATIBILITY.md
//! must have the row.

use rocketns_difftest::fixture::{Fixture, committed};
use rocketns_difftest::lockstep::{compare_step, replies};
use rocketns_difftest::servers::Rocketns;

#[tokio::test]
async fn rocketns_answers_every_kept_sequence_as_java_did() {
    let paths = committed();
    assert!(!paths.is_empty(), "tests/difftest/fixtures holds the shrunk differences");
    let table = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../COMPATIBILITY.md"))
        .expect("COMPATIBILITY.md");
    let mut report = Vec::new();
    for path in paths {
        let fixture = Fixture::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        assert_eq!(fixture.replies.len(), fixture.sequence.steps.len(), "{name}: one reply list per step");
        if let Some(row) = &fixture.row {
            assert!(table.contains(&format!("| `{row}` |")), "{name}: COMPATIBILITY.md has no row {row}");
        }
        let server = Rocketns::start().await.expect("rocketns starts");
        let ours = replies(&fixture.sequence, server.addr).await;
        let last = fixture.sequence.steps.len() - 1;
        for (i, op) in fixture.sequence.steps.iter().enumerate() {
            let diff = compare_step(op, &fixture.replies[i], &ours[i], ("Java", "rocketns"));
            if i == last && fixture.row.is_some() {
                // The row must stay true: the difference it keeps is still there.
                if diff.is_empty() {
                    report.push(format!("{name}: the last step now answers as Java did; drop the row"));
                }
                continue;
            }
            if !diff.is_empty() {
                let step = fixture.sequence.describe(op);
                report.push(format!("{name}, step {} ({step}):\n  {}", i + 1, diff.join("\n  ")));
                break;
            }
        }
    }
    assert!(report.is_empty(), "rocketns differs from the recorded Java replies:\n{}", report.join("\n"));
}
