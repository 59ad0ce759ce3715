//! `rocketns-difftest`: generated sequences against a Java NameServer and rocketns in lockstep
//! (tests/difftest/README.md).
//!
//!   rocketns-difftest run --jars DIR [--seeds 1,2] [--random N] [--writes 30] [--save DIR] [--report-only]
//!   rocketns-difftest print --seed S [--writes 30]
//!   rocketns-difftest controller --jars DIR [--seeds 1,2] [--random N] [--writes 20] [--print]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rocketns::testing::reply::Reply;
use rocketns_difftest::compare;
use rocketns_difftest::controller;
use rocketns_difftest::fixture::Fixture;
use rocketns_difftest::generate::{self, Target};
use rocketns_difftest::lockstep::{self, Outcome};
use rocketns_difftest::model::{Op, Sequence};
use rocketns_difftest::servers::{JavaLauncher, Rocketns};
use rocketns_difftest::session::LEFT;
use rocketns_difftest::shrink;

#[derive(Parser)]
#[command(about = "Generated request sequences against the Java NameServer and rocketns, differences shrunk")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs sequences against a fresh Java NameServer and a fresh rocketns each.
    Run {
        /// The Java RocketMQ jars (tests/java/fetch.sh VERSION prints the folder).
        #[arg(long)]
        jars: PathBuf,
        /// The Java version, for the reports; 4.x gets no 5.x-only requests.
        #[arg(long, default_value = "5.3.3")]
        java_version: String,
        /// Seeds to run, comma-separated.
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        /// Sequences from seeds drawn now (printed first, so that a failure can be run again).
        #[arg(long, default_value_t = 0)]
        random: u64,
        /// Changes per sequence (each followed by one to three reads).
        #[arg(long, default_value_t = 30)]
        writes: usize,
        /// Saves each shrunk difference here as a fixture.
        #[arg(long)]
        save: Option<PathBuf>,
        /// Prints the differences (each kind shrunk once) without failing.
        #[arg(long)]
        report_only: bool,
        /// The longest a difference is shrunk, in seconds.
        #[arg(long, default_value_t = 300)]
        shrink_seconds: u64,
    },
    /// Runs controller sequences against a fresh Java controller and a fresh rocketns one each (one-node
    /// groups beside their NameServers); a difference is shrunk and fails the run.
    Controller {
        #[arg(long)]
        jars: PathBuf,
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        #[arg(long, default_value_t = 0)]
        random: u64,
        #[arg(long, default_value_t = 20)]
        writes: usize,
        #[arg(long, default_value_t = 300)]
        shrink_seconds: u64,
        /// Prints each seed's sequence instead of running it (no jars needed then).
        #[arg(long)]
        print: bool,
    },
    /// Prints the sequence of a seed as a script.
    Print {
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value_t = 30)]
        writes: usize,
        /// 4 for a 4.x NameServer's sequence.
        #[arg(long, default_value_t = 5)]
        major: u8,
    },
}

/// The Java launcher and the runtime the runs share.
struct Runner {
    rt: tokio::runtime::Runtime,
    java: JavaLauncher,
    names: (String, String),
    /// Our replies in a 4.x NameServer's shapes, against one.
    adapt: Option<fn(&Reply) -> Reply>,
    steps_run: usize,
    requests_run: usize,
    sequences_run: usize,
}

impl Runner {
    fn run(&mut self, seq: &Sequence) -> Result<Outcome, String> {
        let java = self.java.take().map_err(|e| e.to_string())?;
        let names = (self.names.0.as_str(), self.names.1.as_str());
        let outcome = self.rt.block_on(async {
            let ours = Rocketns::start().await.map_err(|e| format!("rocketns: {e}"))?;
            Ok::<_, String>(lockstep::run(seq, java.addr, ours.addr, names, self.adapt).await)
        })?;
        self.sequences_run += 1;
        self.steps_run += outcome.reference.len();
        self.requests_run += outcome.reference.iter().flatten().filter(|r| r.step != LEFT).count();
        Ok(outcome)
    }

    /// The smallest sequence that still shows `signature`, with its outcome, within `budget`.
    fn shrink(&mut self, seq: &Sequence, outcome: Outcome, budget: Duration) -> (Sequence, Outcome) {
        let Some(diff) = outcome.difference.clone() else { return (seq.clone(), outcome) };
        let started = Instant::now();
        let mut best = (seq.clone(), outcome);
        best.0.steps.truncate(diff.step + 1);
        let brokers = seq.brokers.clone();
        let mut check = |steps: &[Op], best: &mut (Sequence, Outcome)| -> bool {
            if started.elapsed() > budget || steps.is_empty() {
                return false;
            }
            let candidate = Sequence { brokers: brokers.clone(), steps: steps.to_vec() };
            let Ok(o) = self.run(&candidate) else { return false };
            let Some(end) = o.shows(&diff.signature) else { return false };
            let mut candidate = candidate;
            candidate.steps.truncate(end);
            *best = (candidate, o);
            true
        };
        // Reads change nothing: all but the differing step go first, in one try.
        let last = best.0.steps.len() - 1;
        let writes: Vec<Op> = best
            .0
            .steps
            .iter()
            .enumerate()
            .filter(|(i, op)| *i == last || !op.is_read())
            .map(|(_, op)| op.clone())
            .collect();
        if writes.len() < best.0.steps.len() {
            check(&writes, &mut best);
        }
        // Each candidate that still differs the same way becomes the best so far.
        let steps = best.0.steps.clone();
        shrink::steps(steps, |s| check(s, &mut best));
        let steps = best.0.steps.clone();
        shrink::fields(steps, |s| check(s, &mut best));
        best
    }
}

fn target_of(version: &str) -> Target {
    if version.starts_with('4') { Target::Java4 } else { Target::Java5 }
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("difftest: runtime: {e}");
            None
        }
    }
}

fn draw(n: u64) -> Vec<u64> {
    let drawn: Vec<u64> = (0..n).map(|_| fastrand::u64(..1_000_000_000)).collect();
    if !drawn.is_empty() {
        println!("difftest: seeds drawn now: {}", drawn.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
    }
    drawn
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Controller { jars, seeds, random, writes, shrink_seconds, print } => {
            let seeds: Vec<u64> = seeds.into_iter().chain(draw(random)).collect();
            if print {
                for seed in seeds {
                    print!("seed {seed}:\n{}", controller::generate::sequence(seed, writes));
                }
                return std::process::ExitCode::SUCCESS;
            }
            let Some(rt) = runtime() else { return std::process::ExitCode::FAILURE };
            let mut runner = controller::runner::CtlRunner::new(rt, &jars);
            runner.run_all(&seeds, writes, Duration::from_secs(shrink_seconds))
        }
        Cmd::Print { seed, writes, major } => {
            let target = if major == 4 { Target::Java4 } else { Target::Java5 };
            print!("{}", generate::sequence(seed, writes, target));
            std::process::ExitCode::SUCCESS
        }
        Cmd::Run { jars, java_version, seeds, random, writes, save, report_only, shrink_seconds } => {
            let drawn = draw(random);
            let Some(rt) = runtime() else { return std::process::ExitCode::FAILURE };
            let mut runner = Runner {
                rt,
                java: JavaLauncher::new(&jars),
                names: (format!("Java {java_version}"), "rocketns".into()),
                adapt: (target_of(&java_version) == Target::Java4).then_some(compare::as_4x as fn(&Reply) -> Reply),
                steps_run: 0,
                requests_run: 0,
                sequences_run: 0,
            };
            let started = Instant::now();
            let target = target_of(&java_version);
            let mut found = Vec::new();
            let mut known = 0;
            let mut differing = 0;
            for seed in seeds.iter().chain(&drawn) {
                let seq = generate::sequence(*seed, writes, target);
                let outcome = match runner.run(&seq) {
                    Ok(o) => o,
                    Err(e) => {
                        eprintln!("difftest: seed {seed}: {e}");
                        return std::process::ExitCode::FAILURE;
                    }
                };
                for (step, row) in &outcome.known {
                    println!(
                        "difftest: seed {seed}: after step {}, the states differed on purpose ({row}); brought together",
                        step + 1
                    );
                    known += 1;
                }
                let Some(diff) = outcome.difference.clone() else { continue };
                println!("difftest: seed {seed}: step {} differs ({})", diff.step + 1, diff.signature);
                differing += 1;
                if found.iter().any(|(signature, _)| *signature == diff.signature) {
                    println!(
                        "  {}\n  {} (shrunk above)",
                        seq.describe(&seq.steps[diff.step]),
                        diff.report.join("\n  ")
                    );
                    continue;
                }
                let (shrunk, outcome) = runner.shrink(&seq, outcome, Duration::from_secs(shrink_seconds));
                let Some(diff) = outcome.difference.clone() else { continue };
                println!("difftest: seed {seed}, shrunk to {} steps:\n{shrunk}", shrunk.steps.len());
                println!("  step {}: {}", diff.step + 1, diff.report.join("\n  "));
                if let Some(dir) = &save {
                    let path = dir.join(format!("seed-{seed}.json"));
                    let fixture = Fixture {
                        about: format!("step {} differs: {}", diff.step + 1, diff.signature),
                        java: java_version.clone(),
                        found: format!("seed {seed}, {writes} writes"),
                        row: None,
                        sequence: shrunk,
                        replies: outcome.reference,
                    };
                    match fixture.write(&path) {
                        Ok(()) => println!("difftest: saved {}", path.display()),
                        Err(e) => eprintln!("difftest: {}: {e}", path.display()),
                    }
                }
                found.push((diff.signature, format!("seed {seed} step {}", diff.step + 1)));
            }
            // Where each kind was found, on the summary line: the line a CI log's tail keeps.
            let kinds = found.iter().map(|(signature, at)| format!("{at}: {signature}")).collect::<Vec<_>>().join("; ");
            println!(
                "difftest: {} sequences, {} steps, {} requests against Java {java_version} in {:.0} s; {differing} differ ({} kinds{}{kinds}), \
                 {known} times the states differed on purpose",
                runner.sequences_run,
                runner.steps_run,
                runner.requests_run,
                started.elapsed().as_secs_f64(),
                found.len(),
                if found.is_empty() { "" } else { ": " }
            );
            if found.is_empty() || report_only {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}
