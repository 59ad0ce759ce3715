//! `storm`: a NameServer's hardest minutes, a restart in a big deployment (issue 32). Every broker registers
//! its whole table at once, each over a connection of its own and in one frame, as default Java brokers
//! do (`enableSplitRegistration=false`), and waits for its answer as long as a 5.x broker does
//! (`registerBrokerTimeoutMills`, 24 s); meanwhile lookups of a probe broker's topics, registered before
//! the storm, are measured against a quiet phase before it.
//!
//! It reports, for each broker, whether its first try was answered SUCCESS and when (from the storm's
//! start), what the others got (an error code, a closed connection, no answer in time), the server's RSS
//! before, at the peak and a while after the storm (`--server-pid`), lookups' latency in the three phases,
//! and how many of the brokers' topics are routed at the end. Against a server restarted over its route
//! file (`perf/storm.sh`, warm) the same frames find their tables already there.
//!
//! Frames are encoded before the storm starts (the generator's encoding is not the server's time), and the
//! lookups run on a thread and runtime of their own, ahead of the brokers where allowed (as in `hostile`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clap::Args;
use hdrhistogram::Histogram;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::driver::new_histogram;
use crate::probe::{PeakRss, lookup, lookup_thread, paced_lookups, print_lookups, rss, stats_json};
use crate::wire::register_request;
use crate::{encode, read_reply, write_in_pieces};

/// Run a registration storm.
#[derive(Args)]
pub struct StormArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    addr: String,
    /// The server's process id: its RSS is sampled every 10 ms (Linux).
    #[arg(long)]
    server_pid: Option<u32>,
    #[arg(long, default_value_t = 1000)]
    brokers: usize,
    /// Topics of each broker, its own (`s{broker}-{k}`): B x T routes in all.
    #[arg(long, default_value_t = 1000)]
    topics: usize,
    /// Every broker registers the same T topics (`s-{k}`; a cluster whose topics are on every broker): T
    /// routes of B queue datas each.
    #[arg(long)]
    shared_topics: bool,
    /// How long a broker waits for its answer (a 5.x broker's `registerBrokerTimeoutMills`).
    #[arg(long, default_value_t = 24_000)]
    reply_timeout_ms: u64,
    /// The brokers' first bytes spread evenly over this many milliseconds (0: all at once).
    #[arg(long, default_value_t = 0)]
    spread_ms: u64,
    /// The DataVersion counter the brokers send: the same on a warm run as on the cold one before it.
    #[arg(long, default_value_t = 1)]
    data_version: i64,
    /// Seconds of quiet lookups before the storm, and of lookups after it (over the storm's own topics too).
    #[arg(long, default_value_t = 3.0)]
    quiet: f64,
    #[arg(long, default_value_t = 3.0)]
    after: f64,
    /// Connections asking routes of the probe broker's topics, one request in flight each, and their rate.
    #[arg(long, default_value_t = 4)]
    lookups: usize,
    #[arg(long, default_value_t = 2000)]
    lookup_rate: u64,
    /// The probe broker's topics: 100 make a frame of about 16.6 KB, over the 16 KiB that a registration
    /// reads without waiting for room in the requests pool (what a hostile fleet holds: perf/controller-steady.sh
    /// asks 50).
    #[arg(long, default_value_t = 100)]
    probe_topics: usize,
    /// The core the lookups run on, alone (the rest of the generator `taskset` elsewhere): see
    /// perf/storm.sh for why the storm's sender shares the server's core.
    #[arg(long)]
    lookup_cpu: Option<usize>,
    /// A label for the JSON summary.
    #[arg(long, default_value = "storm")]
    label: String,
    /// After the summary, keep the brokers' connections open until the server closes them (at most ten
    /// minutes): a server stopped then saves every broker in its route file, for a warm storm next.
    #[arg(long)]
    hold: bool,
}

/// What one broker's first try came to.
enum Outcome {
    /// SUCCESS, this long after the storm started.
    Registered(Duration),
    Code(i32),
    Closed,
    NoAnswer,
}

/// Lookups into the histogram of the phase they were asked in.
struct Phases {
    quiet: Histogram<u64>,
    storm: Histogram<u64>,
    after: Histogram<u64>,
    failed: u64,
}

/// Where the run is: the storm's start and end, in nanoseconds after `base` (0: not yet).
struct Clock {
    base: Instant,
    storm_from: AtomicU64,
    storm_to: AtomicU64,
    stop: AtomicBool,
}

impl Clock {
    fn mark(&self, at: &AtomicU64) {
        at.store(self.base.elapsed().as_nanos().max(1) as u64, Ordering::Relaxed);
    }

    fn phase<'a>(&self, asked: Instant, p: &'a mut Phases) -> &'a mut Histogram<u64> {
        let t = asked.duration_since(self.base).as_nanos() as u64;
        let (from, to) = (self.storm_from.load(Ordering::Relaxed), self.storm_to.load(Ordering::Relaxed));
        match (from, to) {
            (0, _) => &mut p.quiet,
            (f, _) if t < f => &mut p.quiet,
            (_, 0) => &mut p.storm,
            (_, e) if t < e => &mut p.storm,
            _ => &mut p.after,
        }
    }
}

/// The probe broker: registered before the storm, over a connection kept open, its topics the lookups'.
async fn probe_broker(addr: &str, topics: usize) -> Result<TcpStream, String> {
    let names: Vec<String> = (0..topics).map(|i| format!("probe-{i}")).collect();
    let frame = encode(&register_request("probe", 0, "10.255.0.1:10911", &names, 1, false));
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    stream.write_all(&frame).await.map_err(|e| format!("register probe: {e}"))?;
    match read_reply(&mut stream).await {
        Ok(r) if r.code == 0 => Ok(stream),
        Ok(r) => Err(format!("register probe: code {} {:?}", r.code, r.remark)),
        Err(e) => Err(format!("register probe: {e}")),
    }
}

async fn lookups(addr: String, seed: u64, pace: Duration, clock: Arc<Clock>, probe_topics: usize) -> Phases {
    let mut phases = Phases { quiet: new_histogram(), storm: new_histogram(), after: new_histogram(), failed: 0 };
    let mut i = seed;
    let topic = || {
        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        format!("probe-{}", (i >> 33) as usize % probe_topics)
    };
    let record = |asked: Instant, took: Duration| {
        let _ = clock.phase(asked, &mut phases).record((took.as_nanos() as u64).max(1_000));
    };
    let failed = paced_lookups(&addr, pace, topic, record, || clock.stop.load(Ordering::Relaxed)).await;
    phases.failed = failed;
    phases
}

/// One broker's first try: connect, send the whole frame, wait for the answer.
async fn first_try(
    addr: String,
    frame: Arc<Vec<u8>>,
    start: Instant,
    timeout: Duration,
) -> (Outcome, Option<TcpStream>) {
    let attempt = async {
        let mut s = TcpStream::connect(&addr).await?;
        let _ = s.set_nodelay(true);
        // In pieces a NIC would hand over at once: one write of megabytes is copied in the sender's system
        // call without a pause, and with `--lookup-cpu` the sender shares the server's core.
        write_in_pieces(&mut s, &frame).await?;
        let reply = read_reply(&mut s).await?;
        Ok::<_, std::io::Error>((reply.code, s))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok((0, s))) => (Outcome::Registered(start.elapsed()), Some(s)),
        Ok(Ok((code, s))) => (Outcome::Code(code), Some(s)),
        Ok(Err(_)) => (Outcome::Closed, None),
        Err(_) => (Outcome::NoAnswer, None),
    }
}

fn topic_name(shared: bool, broker: usize, k: usize) -> String {
    if shared { format!("s-{k}") } else { format!("s{broker}-{k}") }
}

/// How many of the brokers have their last topic routed (one lookup each, over one connection), and with
/// shared topics, whether the last topic's route lists every broker.
async fn routed(addr: &str, brokers: usize, topics: usize, shared: bool) -> usize {
    let Ok(mut s) = TcpStream::connect(addr).await else { return 0 };
    let mut n = 0;
    for b in 0..brokers {
        let frame = encode(&lookup(&topic_name(shared, b, topics.saturating_sub(1))));
        if s.write_all(&frame).await.is_err() {
            break;
        }
        match read_reply(&mut s).await {
            Ok(r) if r.code == 0 && (!shared || lists_broker(&r.body, b)) => n += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    n
}

/// Whether a route body names broker `b` (`"brokerName":"storm-b"`).
fn lists_broker(body: &[u8], b: usize) -> bool {
    memchr::memmem::find(body, format!(r#""brokerName":"storm-{b}""#).as_bytes()).is_some()
}

pub async fn run(args: StormArgs) -> i32 {
    let probe = match probe_broker(&args.addr, args.probe_topics.max(1)).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("storm: {e}");
            return 2;
        }
    };
    let encoding = Instant::now();
    let frames: Vec<Arc<Vec<u8>>> = (0..args.brokers)
        .map(|b| {
            let names: Vec<String> = (0..args.topics).map(|k| topic_name(args.shared_topics, b, k)).collect();
            let addr = format!("10.{}.{}.1:10911", 1 + b / 250, b % 250);
            let cmd = register_request(&format!("storm-{b}"), 0, &addr, &names, args.data_version, false);
            Arc::new(encode(&cmd).to_vec())
        })
        .collect();
    let frame_bytes: usize = frames.iter().map(|f| f.len()).sum();
    eprintln!(
        "storm: {} frames, {:.1} MB, encoded in {:.1} s",
        frames.len(),
        frame_bytes as f64 / 1e6,
        encoding.elapsed().as_secs_f64()
    );

    let clock = Arc::new(Clock {
        base: Instant::now(),
        storm_from: AtomicU64::new(0),
        storm_to: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let (addr, count, lookup_clock, probe_topics) =
        (args.addr.clone(), args.lookups, clock.clone(), args.probe_topics.max(1));
    let pace = Duration::from_secs_f64(count as f64 / args.lookup_rate.max(1) as f64);
    let lookup_thread = lookup_thread(count, args.lookup_cpu, move |i| {
        lookups(addr.clone(), i as u64 + 1, pace, lookup_clock.clone(), probe_topics)
    });
    tokio::time::sleep(Duration::from_secs_f64(args.quiet)).await;
    let quiet_rss = args.server_pid.and_then(rss).map_or(0, |r| r.0);
    // Routed before any broker spoke: a server restarted over its route file already has them (warm).
    let routed_before = routed(&args.addr, args.brokers, args.topics, args.shared_topics).await;

    let sampler = PeakRss::start(args.server_pid, Duration::from_millis(10));
    let start = Instant::now();
    clock.mark(&clock.storm_from);
    let timeout = Duration::from_millis(args.reply_timeout_ms);
    let step = Duration::from_millis(args.spread_ms) / args.brokers.max(1) as u32;
    let tasks: Vec<_> = frames
        .iter()
        .enumerate()
        .map(|(b, frame)| {
            let (addr, frame) = (args.addr.clone(), frame.clone());
            tokio::spawn(async move {
                tokio::time::sleep_until(start + step * b as u32).await;
                first_try(addr, frame, start, timeout).await
            })
        })
        .collect();
    let mut outcomes = Vec::with_capacity(tasks.len());
    let mut streams = Vec::with_capacity(tasks.len());
    for t in tasks {
        match t.await {
            Ok((outcome, stream)) => {
                outcomes.push(outcome);
                streams.extend(stream);
            }
            Err(_) => outcomes.push(Outcome::NoAnswer),
        }
    }
    clock.mark(&clock.storm_to);
    let storm_s = start.elapsed().as_secs_f64();
    drop(frames);
    tokio::time::sleep(Duration::from_secs_f64(args.after)).await;
    let peak = sampler.stop();
    let after_rss = args.server_pid.and_then(rss).map_or(0, |r| r.0);
    clock.stop.store(true, Ordering::Relaxed);
    let routed = routed(&args.addr, args.brokers, args.topics, args.shared_topics).await;

    let mut times = Histogram::<u64>::new_with_bounds(1, 3_600_000, 3).expect("valid histogram bounds");
    let (mut codes, mut closed, mut no_answer, mut first_code) = (0, 0, 0, None);
    for o in &outcomes {
        match o {
            Outcome::Registered(t) => {
                let _ = times.record((t.as_millis() as u64).max(1));
            }
            Outcome::Code(c) => {
                codes += 1;
                first_code.get_or_insert(*c);
            }
            Outcome::Closed => closed += 1,
            Outcome::NoAnswer => no_answer += 1,
        }
    }
    let mut phases = Phases { quiet: new_histogram(), storm: new_histogram(), after: new_histogram(), failed: 0 };
    for p in tokio::task::spawn_blocking(move || lookup_thread.join().unwrap_or_default()).await.unwrap_or_default() {
        let _ = phases.quiet.add(&p.quiet);
        let _ = phases.storm.add(&p.storm);
        let _ = phases.after.add(&p.after);
        phases.failed += p.failed;
    }
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let registered = times.len();
    println!(
        "storm {}: {} brokers x {} topics ({:.1} MB of frames): {registered} registered at the first try, {codes} answered with an error (the first: {first_code:?}), {closed} closed, {no_answer} unanswered in {} ms",
        args.label,
        args.brokers,
        args.topics,
        frame_bytes as f64 / 1e6,
        args.reply_timeout_ms
    );
    println!(
        "answers: p50 {} ms, p99 {} ms, last {} ms after the start; the storm took {storm_s:.2} s; {routed_before} brokers routed before it, {routed} of {} after it",
        times.value_at_quantile(0.5),
        times.value_at_quantile(0.99),
        times.max(),
        args.brokers
    );
    println!(
        "server RSS: before {:.1} MB, peak {:.1} MB, {:.0} s after {:.1} MB",
        mb(quiet_rss),
        mb(peak),
        args.after,
        mb(after_rss)
    );
    for (name, h) in [("quiet", &phases.quiet), ("storm", &phases.storm), ("after", &phases.after)] {
        print_lookups(name, h);
    }
    println!(
        r#"{{"label":"{}","brokers":{},"topics":{},"shared_topics":{},"frame_bytes":{frame_bytes},"registered":{registered},"error_codes":{codes},"closed":{closed},"unanswered":{no_answer},"answer_p50_ms":{},"answer_p99_ms":{},"answer_max_ms":{},"storm_s":{storm_s:.3},"routed_before":{routed_before},"routed":{routed},"quiet_rss":{quiet_rss},"peak_rss":{peak},"after_rss":{after_rss},"lookups_quiet":{},"lookups_storm":{},"lookups_after":{},"lookups_failed":{}}}"#,
        args.label,
        args.brokers,
        args.topics,
        args.shared_topics,
        times.value_at_quantile(0.5),
        times.value_at_quantile(0.99),
        times.max(),
        stats_json(&phases.quiet),
        stats_json(&phases.storm),
        stats_json(&phases.after),
        phases.failed
    );
    if args.hold {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let mut probe = probe;
        let mut byte = [0u8; 1];
        let closed = tokio::io::AsyncReadExt::read(&mut probe, &mut byte);
        let _ = tokio::time::timeout(Duration::from_secs(600), closed).await;
    }
    drop(streams);
    0
}
