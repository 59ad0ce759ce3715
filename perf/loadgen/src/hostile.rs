//! `hostile`: every kind of connection a client can use to make a NameServer spend memory or CPU, all at
//! once for a bounded time, while real brokers re-register and clients look routes up (issue 31):
//! - `trickle-registered`: registers a made-up broker (anyone may), then announces a 16 MiB frame, sends
//!   15 MiB of it and a byte every 100 ms, again and again;
//! - `trickle`: the same without registering first;
//! - `zlib`: REGISTER_BROKER bodies of a few hundred kilobytes that inflate to 62 MB of topic configs;
//! - `admin`: cluster info and topic lists (224, 206, 106, 311) pipelined 200 at a time, at the real
//!   table's 100,000 topics;
//! - `slow-reader`: asks for ten topic lists and a hundred routes, and never reads;
//! - `audit`: audited requests with a 64 KiB key and sixty fields of a kilobyte;
//! - `churn`: connects, asks one route, closes (`--churn-rate` connections a second in all).
//!
//! Each kind runs on a thread and runtime of its own, and the lookups on another at a higher priority (as
//! root), so that one kind's own work (the fleet's, not the server's) slows neither the others nor the
//! lookups.
//!
//! It reports the server's peak RSS (sampled from /proc, `--server-pid`) beside the bound SECURITY.md
//! documents, lookups' latency during the attack against a quiet phase before it, how many of the real
//! brokers' re-registrations were answered, and what each kind of connection got: answers by code, and
//! closes by the server. It runs against any NameServer (`perf/hostile.sh`); with `--metrics-port`
//! it also reads rocketns's own counts and pool sizes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Args;
use rocketns::remoting::RemotingCommand;
use rocketns::testing::wire::request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::driver::new_histogram;
use crate::probe::{PeakRss, lookup, lookup_thread, paced_lookups, print_lookups, rss, stats_json};
use crate::wire::register_request;
use crate::{encode, read_reply, write_in_pieces};

/// Run the hostile fleet.
#[derive(Args)]
pub struct HostileArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    addr: String,
    /// The server's process id: its RSS is sampled every 50 ms (Linux).
    #[arg(long)]
    server_pid: Option<u32>,
    /// rocketns's metrics port: its pools' sizes (for the bound) and its own counts are read at the end.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Hostile connections of each kind.
    #[arg(long, default_value_t = 150)]
    per_kind: usize,
    /// Kinds with another count than `--per-kind`, comma-separated `kind=connections` (`http-trickle=1100`:
    /// more HTTP connections than a process limited to 1,024 files has descriptors).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind_count)]
    per_kind_of: Vec<(String, usize)>,
    /// Seconds of quiet lookups before the attack (the baseline), and of the attack.
    #[arg(long, default_value_t = 10.0)]
    quiet: f64,
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Topics of the big real broker (the other three have 100).
    #[arg(long, default_value_t = 100_000)]
    real_topics: usize,
    /// Milliseconds between a real broker's re-registrations (a Java broker's default is 30,000).
    #[arg(long, default_value_t = 30_000)]
    reregister_ms: u64,
    /// Connections asking routes of the real brokers, one request in flight each.
    #[arg(long, default_value_t = 16)]
    lookups: usize,
    /// Lookups a second, all those connections together, the same in the quiet phase and the attack: as
    /// fast as the server answers would leave the attackers, on the same core, no CPU at all.
    #[arg(long, default_value_t = 20_000)]
    lookup_rate: u64,
    /// The kinds of hostile connection to open, comma-separated (by default all of them; the `http-` kinds
    /// only with `--metrics-port`).
    #[arg(long, value_delimiter = ',')]
    kinds: Vec<String>,
    /// New connections a second of the churn kind, all its connections together (0: as fast as they can).
    #[arg(long, default_value_t = 1000)]
    churn_rate: u64,
    /// Where the churn kind connects instead of `--addr` (another server on the same core): what churn
    /// costs the lookups through the machine, apart from what it costs them through the server.
    #[arg(long)]
    churn_addr: Option<String>,
}

fn parse_kind_count(text: &str) -> Result<(String, usize), String> {
    let (kind, count) = text.split_once('=').ok_or("kind=connections")?;
    if !KINDS.contains(&kind) {
        return Err(format!("no kind {kind:?}; the kinds: {}", KINDS.join(", ")));
    }
    Ok((kind.to_string(), count.parse().map_err(|e| format!("{count:?}: {e}"))?))
}

/// The remoting port's kinds, then `hostile_ports`'s.
const KINDS: [&str; 12] = [
    "trickle-registered",
    "trickle",
    "zlib",
    "admin",
    "slow-reader",
    "audit",
    "churn",
    "long-address",
    "config-flood",
    "http-trickle",
    "http-nonreader",
    "http-cluster",
];

/// What one kind of hostile connection got.
#[derive(Default)]
struct KindCounts {
    sessions: AtomicU64,
    /// Replies with code 0, and with any other code.
    success: AtomicU64,
    refused: AtomicU64,
    /// Connections the server closed (or reset) under it.
    closed_by_server: AtomicU64,
    connect_failed: AtomicU64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The frames the fleet sends, built once.
struct Frames {
    /// The start of a 16 MiB REGISTER_BROKER frame, 15 MiB of it.
    trickle: Vec<u8>,
    zlib: Vec<u8>,
    admin: Vec<u8>,
    slow: Vec<u8>,
    audit: Vec<u8>,
    lookup: Vec<u8>,
    /// Where `long-address` slaves wait for their notices.
    blackhole: Option<std::net::SocketAddr>,
}

impl Frames {
    fn new() -> Frames {
        let mut start = register_request("made-up", 0, "10.9.0.1:10911", &[], 1, false);
        start.body = Default::default();
        let header = encode(&start);
        let header_len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let mut trickle = ((16u32 << 20) - 4).to_be_bytes().to_vec();
        trickle.extend_from_slice(&header[4..8 + header_len]);
        trickle.resize(15 << 20, b'x');
        let mut zlib = register_request("bomb", 0, "10.8.0.1:10911", &[], 1, false);
        let fields = zlib.ext_fields.get_or_insert_with(Default::default);
        fields.insert("compressed", "true");
        fields.insert("bodyCrc32", "0");
        zlib.body = zlib_bomb().into();
        let admin_requests =
            [request(224, &[("cluster", "DefaultCluster")]), request(206, &[]), request(106, &[]), request(311, &[])];
        let admin: Vec<u8> = (0..50).flat_map(|_| admin_requests.iter().flat_map(|r| encode(r).to_vec())).collect();
        let mut slow: Vec<u8> = (0..10).flat_map(|_| encode(&request(206, &[])).to_vec()).collect();
        slow.extend((0..100).flat_map(|i| encode(&lookup(&format!("t0-{i}"))).to_vec()));
        let key = "k".repeat(64 * 1024);
        let fillers: Vec<(String, String)> = (0..60).map(|i| (format!("f{i}"), "x".repeat(1024))).collect();
        let mut audited = request(102, &[("namespace", "hostile"), ("key", &key)]);
        let fields = audited.ext_fields.get_or_insert_with(Default::default);
        for (k, v) in &fillers {
            fields.insert(k, v);
        }
        Frames {
            trickle,
            zlib: encode(&zlib).to_vec(),
            admin,
            slow,
            audit: encode(&audited).to_vec(),
            lookup: encode(&lookup("t0-0")).to_vec(),
            blackhole: None,
        }
    }
}

/// 2.5 million identical topic configs: 62 MB inflated, a few hundred kilobytes sent.
fn zlib_bomb() -> Vec<u8> {
    use std::io::Write;
    let item = b"t 1 1 6 SINGLE_TAG";
    let dv = br#"{"counter":1,"stateVersion":0,"timestamp":1}"#;
    let mut raw = Vec::with_capacity(64 << 20);
    raw.extend_from_slice(&(dv.len() as i32).to_be_bytes());
    raw.extend_from_slice(dv);
    raw.extend_from_slice(&2_500_000i32.to_be_bytes());
    for _ in 0..2_500_000 {
        raw.extend_from_slice(&(item.len() as i32).to_be_bytes());
        raw.extend_from_slice(item);
    }
    raw.extend_from_slice(&2i32.to_be_bytes());
    raw.extend_from_slice(b"[]");
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let _ = z.write_all(&raw);
    z.finish().unwrap_or_default()
}

/// One hostile connection of `kind`, session after session, until `end`, a session every `pace` at most.
async fn hostile(
    (kind, n, pace): (usize, usize, Duration),
    addr: String,
    frames: Arc<Frames>,
    counts: Arc<KindCounts>,
    end: Instant,
) {
    let mut next = Instant::now();
    while Instant::now() < end {
        tokio::time::sleep_until(next).await;
        next += pace;
        let connect = crate::hostile_ports::connect(KINDS[kind], n, &addr);
        let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(5), connect).await else {
            add(&counts.connect_failed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        add(&counts.sessions);
        let outcome = tokio::time::timeout_at(end, session(kind, n, &mut s, &frames, &counts, end)).await;
        if let Ok(Err(_)) = outcome {
            add(&counts.closed_by_server);
        }
    }
}

/// One session; `Err` when the server closed the connection under it.
async fn session(
    kind: usize,
    n: usize,
    s: &mut TcpStream,
    frames: &Frames,
    counts: &KindCounts,
    end: Instant,
) -> std::io::Result<()> {
    let reply = |r: RemotingCommand| add(if r.code == 0 { &counts.success } else { &counts.refused });
    match KINDS[kind] {
        "trickle-registered" | "trickle" => {
            if kind == 0 {
                let name = format!("made-up-{n}");
                let topics = ["x".to_string(), "y".to_string()];
                s.write_all(&encode(&register_request(
                    &name,
                    0,
                    &format!("10.9.{}.{}:10911", n / 250, n % 250),
                    &topics,
                    1,
                    false,
                )))
                .await?;
                reply(read_reply(s).await?);
            }
            write_in_pieces(s, &frames.trickle).await?;
            loop {
                s.write_all(b"x").await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        "zlib" => loop {
            write_in_pieces(s, &frames.zlib).await?;
            reply(read_reply(s).await?);
        },
        "admin" => loop {
            write_in_pieces(s, &frames.admin).await?;
            for _ in 0..200 {
                reply(read_reply(s).await?);
            }
        },
        "slow-reader" => {
            write_in_pieces(s, &frames.slow).await?;
            // Never reads; finds out that the server closed the connection by writing.
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                s.write_all(&frames.lookup).await?;
            }
        }
        "audit" => loop {
            write_in_pieces(s, &frames.audit).await?;
            reply(read_reply(s).await?);
        },
        "churn" => {
            s.write_all(&frames.lookup).await?;
            reply(read_reply(s).await?);
            let _ = end;
            Ok(())
        }
        other => crate::hostile_ports::session(other, n, s, frames.blackhole, reply).await,
    }
}

/// A real broker: registered once, then again every `period`, over its own connection, until `end`.
struct RealBroker {
    frame: Vec<u8>,
    stream: TcpStream,
}

#[derive(Default)]
struct RealCounts {
    sent: AtomicU64,
    applied: AtomicU64,
    failed: AtomicU64,
    /// Still waiting for their turn when the run ended (five seconds after the attack).
    unanswered: AtomicU64,
    slowest_ms: AtomicU64,
}

async fn real_broker(addr: &str, b: usize, topics: usize) -> Result<RealBroker, String> {
    let names: Vec<String> = (0..topics).map(|i| format!("t{b}-{i}")).collect();
    let frame =
        encode(&register_request(&format!("real-{b}"), 0, &format!("10.0.0.{}:10911", b + 1), &names, 1, false));
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    stream.write_all(&frame).await.map_err(|e| format!("register real-{b}: {e}"))?;
    let reply = read_reply(&mut stream).await.map_err(|e| format!("register real-{b}: {e}"))?;
    if reply.code != 0 {
        return Err(format!("register real-{b}: code {} {:?}", reply.code, reply.remark));
    }
    Ok(RealBroker { frame: frame.to_vec(), stream })
}

async fn reregister(mut broker: RealBroker, period: Duration, counts: Arc<RealCounts>, end: Instant) -> RealBroker {
    let mut next = Instant::now() + period;
    while next < end {
        tokio::time::sleep_until(next).await;
        next += period;
        add(&counts.sent);
        let started = Instant::now();
        let answered = async {
            write_in_pieces(&mut broker.stream, &broker.frame).await?;
            read_reply(&mut broker.stream).await
        };
        match tokio::time::timeout_at(end + Duration::from_secs(5), answered).await {
            Ok(Ok(r)) if r.code == 0 => add(&counts.applied),
            Ok(_) => add(&counts.failed),
            Err(_) => {
                add(&counts.unanswered);
                break;
            }
        }
        counts.slowest_ms.fetch_max(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    broker
}

/// Lookups of the real brokers' topics, one at a time, into the quiet or the attack histogram.
struct LookupStats {
    quiet: hdrhistogram::Histogram<u64>,
    attack: hdrhistogram::Histogram<u64>,
    failed: u64,
    /// Each lookup on a new connection, its connect included.
    fresh: bool,
}

type BoxedStats = std::pin::Pin<Box<dyn std::future::Future<Output = LookupStats> + Send>>;

/// A new connection every [`FRESH_EVERY`], one lookup on it, then closed: what a client that has just
/// started, or a new NameServer address, gets while the fleet holds every other kind of input.
async fn fresh_lookups(addr: String, real_topics: usize, attack_from: Instant, end: Instant) -> LookupStats {
    let mut stats = LookupStats { quiet: new_histogram(), attack: new_histogram(), failed: 0, fresh: true };
    let mut next = Instant::now();
    let mut i = 0usize;
    while Instant::now() < end {
        tokio::time::sleep_until(next).await;
        next += FRESH_EVERY;
        i += 1;
        let topic = format!("t{}-{}", i % 4, i % if i.is_multiple_of(4) { real_topics } else { 100 });
        let asked = Instant::now();
        let answered = async {
            let mut s = TcpStream::connect(&addr).await?;
            s.write_all(&encode(&lookup(&topic))).await?;
            read_reply(&mut s).await
        };
        match tokio::time::timeout(Duration::from_secs(10), answered).await {
            Ok(Ok(r)) if r.code == 0 => {
                let h = if asked < attack_from { &mut stats.quiet } else { &mut stats.attack };
                let _ = h.record((asked.elapsed().as_nanos() as u64).max(1_000));
            }
            _ => stats.failed += 1,
        }
    }
    stats
}

/// How often `fresh_lookups` opens a connection.
const FRESH_EVERY: Duration = Duration::from_millis(20);

async fn lookups(
    (addr, seed, pace): (String, u64, Duration),
    real_topics: usize,
    attack_from: Instant,
    end: Instant,
) -> LookupStats {
    let mut stats = LookupStats { quiet: new_histogram(), attack: new_histogram(), failed: 0, fresh: false };
    let mut i = seed;
    let topic = || {
        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = (i >> 33) % 4;
        format!("t{b}-{}", (i >> 40) as usize % if b == 0 { real_topics } else { 100 })
    };
    let (quiet, attack) = (&mut stats.quiet, &mut stats.attack);
    let record = |asked: Instant, took: Duration| {
        let h = if asked < attack_from { &mut *quiet } else { &mut *attack };
        let _ = h.record((took.as_nanos() as u64).max(1_000));
    };
    stats.failed = paced_lookups(&addr, pace, topic, record, || Instant::now() >= end).await;
    stats
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn metrics_text(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).await.ok()?;
    Some(text)
}

/// What each connection may hold of its own, by SECURITY.md: its read buffer, reply buffer, the decode
/// its connection lends, its task.
const PER_CONNECTION: u64 = 96 * 1024;
/// What the two whole-table encodes at once and a save of the route file hold, per topic of the table (the
/// save's 48 bytes a distinct queue list counted as if each topic had its own).
const TABLE_PER_TOPIC: u64 = 2 * 48 + 16 + 48;
/// With `notifyMinBrokerIdChanged` and the HTTP port, their terms of the sum: the 905 notices' queue, and
/// 80 HTTP connections of 48 KiB each, 64 and 16 closing (counted whether or not they are on).
const NOTICES_AND_HTTP: u64 = (4 << 20) + 80 * 48 * 1024;
/// The audit queue's bytes, and the route file's write buffer.
const AUDIT_QUEUE_AND_SAVE: u64 = (4 << 20) + (64 << 10);

pub async fn run(args: HostileArgs) -> i32 {
    let chosen = |kind: &str| {
        let wanted = args.kinds.is_empty() || args.kinds.iter().any(|k| k == kind);
        wanted && (args.metrics_port.is_some() || !kind.starts_with("http-"))
    };
    let per_kind = |kind: &str| {
        let count = args.per_kind_of.iter().rev().find(|(k, _)| k == kind).map_or(args.per_kind, |(_, n)| *n);
        if chosen(kind) { count } else { 0 }
    };
    // The fleet may hold more connections than its own default limit of open files allows.
    if let Err(e) = rocketns::service::descriptors::raise_limit() {
        eprintln!("hostile: the open-files limit stays as it was: {e}");
    }
    let mut frames = Frames::new();
    let blackhole = match chosen("long-address") {
        true => match crate::hostile_ports::Blackhole::open().await {
            Ok(hole) => Some(hole),
            Err(e) => {
                eprintln!("hostile: no blackhole for long-address ({e})");
                return 2;
            }
        },
        false => None,
    };
    frames.blackhole = blackhole.as_ref().map(|hole| hole.addr);
    let frames = Arc::new(frames);
    let mut real = Vec::new();
    for (b, topics) in [args.real_topics, 100, 100, 100].into_iter().enumerate() {
        match real_broker(&args.addr, b, topics).await {
            Ok(broker) => real.push(broker),
            Err(e) => {
                eprintln!("hostile: {e}");
                return 2;
            }
        }
    }
    let start = Instant::now();
    let attack_from = start + Duration::from_secs_f64(args.quiet);
    let end = attack_from + Duration::from_secs_f64(args.duration);
    let real_counts = Arc::new(RealCounts::default());
    let reregistering: Vec<_> = real
        .into_iter()
        .map(|b| tokio::spawn(reregister(b, Duration::from_millis(args.reregister_ms), real_counts.clone(), end)))
        .collect();
    let (addr, count, real_topics) = (args.addr.clone(), args.lookups, args.real_topics);
    let pace = Duration::from_secs_f64(count as f64 / args.lookup_rate.max(1) as f64);
    // One more task than the settled connections: lookups each on a new connection (`fresh_lookups`).
    let lookup_thread = lookup_thread(count + 1, None, move |i| -> BoxedStats {
        match i == count {
            true => Box::pin(fresh_lookups(addr.clone(), real_topics, attack_from, end)),
            false => Box::pin(lookups((addr.clone(), i as u64 + 1, pace), real_topics, attack_from, end)),
        }
    });
    tokio::time::sleep_until(attack_from).await;
    // The quiet resident set holds the route table; the peak is the attack's own from here.
    let quiet_rss = args.server_pid.and_then(rss).map_or(0, |r| r.0);
    if let Some(pid) = args.server_pid {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
    let counts: Vec<Arc<KindCounts>> = KINDS.iter().map(|_| Arc::default()).collect();
    let mut attackers = Vec::new();
    for (kind, kind_counts) in counts.iter().enumerate() {
        if !chosen(KINDS[kind]) {
            continue;
        }
        let churn = KINDS[kind] == "churn" && args.churn_rate > 0;
        let count = per_kind(KINDS[kind]);
        let pace = if churn { Duration::from_secs_f64(count as f64 / args.churn_rate as f64) } else { Duration::ZERO };
        let addr = match (churn, args.metrics_port) {
            (true, _) => args.churn_addr.clone().unwrap_or_else(|| args.addr.clone()),
            (false, Some(port)) if KINDS[kind].starts_with("http-") => format!("127.0.0.1:{port}"),
            _ => args.addr.clone(),
        };
        let (frames, kind_counts) = (frames.clone(), kind_counts.clone());
        attackers.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            rt.block_on(async move {
                let tasks: Vec<_> = (0..count)
                    .map(|n| {
                        tokio::spawn(hostile((kind, n, pace), addr.clone(), frames.clone(), kind_counts.clone(), end))
                    })
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            })
        }));
    }
    let health = args.metrics_port.map(|port| tokio::spawn(crate::hostile_ports::health_probes(port, end)));
    let sampler = PeakRss::start(args.server_pid, Duration::from_millis(50));
    let _ = tokio::task::spawn_blocking(move || attackers.into_iter().for_each(|a| drop(a.join()))).await;
    let peak = sampler.stop();
    let (mut quiet, mut attack) = (new_histogram(), new_histogram());
    let (mut fresh_quiet, mut fresh_attack) = (new_histogram(), new_histogram());
    let (mut lookups_failed, mut fresh_failed) = (0, 0);
    for s in tokio::task::spawn_blocking(move || lookup_thread.join().unwrap_or_default()).await.unwrap_or_default() {
        let (q, a, failed) = match s.fresh {
            true => (&mut fresh_quiet, &mut fresh_attack, &mut fresh_failed),
            false => (&mut quiet, &mut attack, &mut lookups_failed),
        };
        let _ = q.add(&s.quiet);
        let _ = a.add(&s.attack);
        *failed += s.failed;
    }
    let (health, health_failed, health_failing_ms) = match health {
        Some(probes) => probes.await.unwrap_or_else(|_| (new_histogram(), 0, 0)),
        None => (new_histogram(), 0, 0),
    };
    let mut brokers = Vec::new();
    for r in reregistering {
        if let Ok(b) = r.await {
            brokers.push(b);
        }
    }
    // After the attack: every real broker still routed, and the server answering.
    let mut probe = TcpStream::connect(&args.addr).await.ok();
    let mut routed = 0;
    for b in 0..4 {
        if let Some(s) = probe.as_mut()
            && s.write_all(&encode(&lookup(&format!("t{b}-0")))).await.is_ok()
            && read_reply(s).await.is_ok_and(|r| r.code == 0)
        {
            routed += 1;
        }
    }
    let metrics = match args.metrics_port {
        Some(port) => metrics_text(port).await,
        None => None,
    };
    let pool = |name: &str| {
        metrics.as_deref().and_then(|t| metric(t, &format!("rocketns_memory_budget_capacity_bytes{{pool=\"{name}\"}}")))
    };
    let hostile_connections = KINDS.iter().map(|k| per_kind(k)).sum::<usize>() as u64;
    // The HTTP port's connections are NOTICES_AND_HTTP's, at most 64 however many the fleet opens.
    let remoting_connections =
        KINDS.iter().filter(|k| !k.starts_with("http-")).map(|k| per_kind(k)).sum::<usize>() as u64;
    let bound = match (pool("requests"), pool("replies")) {
        (Some(requests), Some(replies)) => Some(
            quiet_rss
                + requests as u64
                + replies as u64
                + AUDIT_QUEUE_AND_SAVE
                + PER_CONNECTION * (remoting_connections + args.lookups as u64 + 8)
                + TABLE_PER_TOPIC * (args.real_topics as u64 + 300)
                + NOTICES_AND_HTTP,
        ),
        _ => None,
    };
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "hostile fleet: {hostile_connections} hostile connections, {:.0} s of attack after {:.0} s quiet",
        args.duration, args.quiet
    );
    println!(
        "server RSS: quiet {:.1} MB, peak under attack {:.1} MB, documented bound {}",
        mb(quiet_rss),
        mb(peak),
        bound.map_or("n/a (no metrics port)".to_string(), |b| format!("{:.1} MB", mb(b)))
    );
    for (name, h) in [("quiet", &quiet), ("attack", &attack)] {
        print_lookups(name, h);
    }
    for (name, h) in [("quiet, new connections", &fresh_quiet), ("attack, new connections", &fresh_attack)] {
        print_lookups(name, h);
    }
    if args.metrics_port.is_some() {
        print_lookups("attack, GET /healthz", &health);
        println!("  /healthz failed or over 1 s: {health_failed}, for at most {health_failing_ms} ms in a row");
    }
    let rc = &real_counts;
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "real brokers: {} re-registrations sent, {} applied, {} failed, {} still waiting at the end, slowest {} ms; {routed} of 4 routed at the end; {lookups_failed} lookups failed",
        load(&rc.sent),
        load(&rc.applied),
        load(&rc.failed),
        load(&rc.unanswered),
        load(&rc.slowest_ms)
    );
    let mut kinds_json = Vec::new();
    for (name, c) in KINDS.iter().zip(&counts) {
        println!(
            "  {name:<19} sessions {:>6}  answered ok {:>7}  refused {:>6}  closed by the server {:>6}  connect failed {:>4}",
            load(&c.sessions),
            load(&c.success),
            load(&c.refused),
            load(&c.closed_by_server),
            load(&c.connect_failed)
        );
        kinds_json.push(format!(
            r#""{name}":{{"sessions":{},"ok":{},"refused":{},"closed_by_server":{},"connect_failed":{}}}"#,
            load(&c.sessions),
            load(&c.success),
            load(&c.refused),
            load(&c.closed_by_server),
            load(&c.connect_failed)
        ));
    }
    if let Some(text) = &metrics {
        let show = [
            "rocketns_large_frames_refused_total{reason=\"too_slow\"}",
            "rocketns_large_frames_refused_total{reason=\"reply_not_taken\"}",
            "rocketns_registration_bodies_refused_total{reason=\"too_large\"}",
            "rocketns_registration_bodies_refused_total{reason=\"no_room\"}",
            "rocketns_table_bodies_encoded_total",
            "rocketns_audit_lines_lost_total",
            "rocketns_client_log_lines_dropped_total",
            "rocketns_log_lines_dropped_total",
            "rocketns_http_connections_refused_total",
            "rocketns_http_connections_evicted_total",
            "rocketns_min_broker_id_notices_dropped_total",
        ];
        for name in show {
            println!("  {name} {}", metric(text, name).unwrap_or(f64::NAN));
        }
    }
    println!(
        r#"{{"hostile_connections":{hostile_connections},"quiet_rss":{quiet_rss},"peak_rss":{peak},"bound":{},"lookups_quiet":{},"lookups_attack":{},"lookups_failed":{lookups_failed},"fresh_quiet":{},"fresh_attack":{},"fresh_failed":{fresh_failed},"healthz":{},"healthz_failed":{health_failed},"healthz_failing_ms":{health_failing_ms},"reregistrations":{{"sent":{},"applied":{},"failed":{},"unanswered":{},"slowest_ms":{}}},"real_routed":{routed},"kinds":{{{}}}}}"#,
        bound.map_or("null".to_string(), |b| b.to_string()),
        stats_json(&quiet),
        stats_json(&attack),
        stats_json(&fresh_quiet),
        stats_json(&fresh_attack),
        stats_json(&health),
        load(&rc.sent),
        load(&rc.applied),
        load(&rc.failed),
        load(&rc.unanswered),
        load(&rc.slowest_ms),
        kinds_json.join(",")
    );
    drop(brokers);
    0
}
