//! The `controller` command's runs: each seed's sequence against a fresh Java controller and a fresh
//! rocketns one, a difference shrunk (ddmin over the steps, `crate::shrink`) within a budget and printed
//! as a script with the step's two replies.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::generate;
use super::lockstep;
use super::model::{CtlOp, CtlSequence};
use super::session::NOT_SENT;
use crate::lockstep::Outcome;
use crate::servers::{JavaLauncher, Rocketns};
use crate::shrink;

/// The Java launcher and the runtime the runs share, and what they ran.
pub struct CtlRunner {
    rt: tokio::runtime::Runtime,
    java: JavaLauncher,
    sequences: usize,
    requests: usize,
    /// Steps no broker would have sent then (`CtlSession::apply`'s pseudo-replies).
    not_sent: usize,
}

impl CtlRunner {
    pub fn new(rt: tokio::runtime::Runtime, jars: &Path) -> CtlRunner {
        CtlRunner { rt, java: JavaLauncher::with_controller(jars), sequences: 0, requests: 0, not_sent: 0 }
    }

    fn run(&mut self, seq: &CtlSequence) -> Result<Outcome, String> {
        let java = self.java.take().map_err(|e| e.to_string())?;
        let theirs = java.controller.ok_or("the Java NameServer runs no controller")?;
        let outcome = self.rt.block_on(async {
            let ours = Rocketns::start_controller().await.map_err(|e| format!("rocketns: {e}"))?;
            let at = ours.controller.ok_or("rocketns runs no controller")?;
            lockstep::run(seq, theirs, at, ("Java 5.3.3", "rocketns")).await
        })?;
        self.sequences += 1;
        let replies = outcome.reference.iter().flatten();
        let (skipped, sent): (Vec<_>, Vec<_>) = replies.partition(|r| r.step == NOT_SENT);
        self.requests += sent.len();
        self.not_sent += skipped.len();
        Ok(outcome)
    }

    /// The smallest sequence that still differs as `outcome` does, within `budget`.
    fn shrink(&mut self, seq: &CtlSequence, outcome: Outcome, budget: Duration) -> (CtlSequence, Outcome) {
        let Some(diff) = outcome.difference.clone() else { return (seq.clone(), outcome) };
        let started = Instant::now();
        let mut best = (seq.clone(), outcome);
        best.0.steps.truncate(diff.step + 1);
        let steps = best.0.steps.clone();
        shrink::steps(steps, |steps: &[CtlOp]| {
            if started.elapsed() > budget {
                return false;
            }
            let candidate = CtlSequence { brokers: seq.brokers.clone(), steps: steps.to_vec() };
            let Ok(o) = self.run(&candidate) else { return false };
            let Some(end) = o.shows(&diff.signature) else { return false };
            let mut candidate = candidate;
            candidate.steps.truncate(end);
            best = (candidate, o);
            true
        });
        best
    }

    /// Runs every seed; fails when any differs (each kind shrunk once) or a server cannot be started.
    pub fn run_all(&mut self, seeds: &[u64], writes: usize, shrink_budget: Duration) -> ExitCode {
        let started = Instant::now();
        let mut kinds: Vec<String> = Vec::new();
        let mut differing = 0;
        for &seed in seeds {
            let seq = generate::sequence(seed, writes);
            let outcome = match self.run(&seq) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("difftest controller: seed {seed}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let Some(diff) = outcome.difference.clone() else { continue };
            differing += 1;
            println!("difftest controller: seed {seed}: step {} differs ({})", diff.step + 1, diff.signature);
            if kinds.contains(&diff.signature) {
                println!("  {}\n  {} (shrunk above)", seq.describe(&seq.steps[diff.step]), diff.report.join("\n  "));
                continue;
            }
            let (shrunk, outcome) = self.shrink(&seq, outcome, shrink_budget);
            let step = outcome.difference.as_ref().map_or(diff.step, |d| d.step);
            let report = outcome.difference.map_or(diff.report, |d| d.report);
            println!("difftest controller: seed {seed}, shrunk to {} steps:\n{shrunk}", shrunk.steps.len());
            println!("  step {}: {}", step + 1, report.join("\n  "));
            kinds.push(diff.signature);
        }
        println!(
            "difftest controller: {} sequences, {} requests against Java 5.3.3's controller ({} steps not sent) in {:.0} s; {differing} differ ({} kinds)",
            self.sequences,
            self.requests,
            self.not_sent,
            started.elapsed().as_secs_f64(),
            kinds.len()
        );
        if kinds.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    }
}
