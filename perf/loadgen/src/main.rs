//! `rocketns-loadgen`: load for any RocketMQ NameServer, and the echo server that sets the limit.
//!
//! - `run`: registers B brokers × T topics, then drives GET_ROUTEINFO_BY_TOPIC over C connections with P
//!   requests in flight each (uniform or Zipf topics, a miss ratio), optionally while every broker keeps
//!   re-registering (churn), verifies every reply, and prints requests/s and p50/p99/p99.9 latency, then a
//!   one-line JSON summary;
//!   (`--big-brokers`: brokers of 100,000 topics changing the table meanwhile, `big.rs`);
//! - `echo`: the yardstick, answering every frame with a real route reply's bytes and the request's opaque (plain, or
//!   `--rocketns-shaped`);
//! - `startup`: runs a server command and measures the time from start to its first answer;
//! - `fleet`: brokers and short- and long-lived clients that must see no failure while the server behind the
//!   address is upgraded (`fleet.rs`);
//! - `hostile`: every kind of connection that makes a NameServer spend memory or CPU, at once, while real
//!   brokers re-register and lookups are measured (`hostile.rs`);
//! - `storm`: a restart storm, every broker registering its whole table at once, with the server's RSS and
//!   lookups measured throughout (`storm.rs`);
//! - `idle`: connections held open after one lookup each, as a client fleet holds them, and the bytes each
//!   costs the server's resident set (`idle.rs`).
//!
//! See perf/README.md for how the comparison uses them.

// One unsafe call, the lookups' scheduling policy (probe.rs).
#![deny(unsafe_code)]

mod big;
mod controller_fleet;
mod driver;
mod echo;
mod fleet;
mod hostile;
mod hostile_ports;
mod idle;
mod probe;
mod storm;
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use rocketns::remoting::{RemotingCommand, SerializeType};
use rocketns::testing::client_headers::ClientHeader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

#[derive(Parser)]
#[command(name = "rocketns-loadgen", about = "Load generator for RocketMQ NameServers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Run(RunArgs),
    Echo(EchoArgs),
    Startup(StartupArgs),
    Fleet(fleet::FleetArgs),
    Hostile(hostile::HostileArgs),
    Storm(storm::StormArgs),
    /// Connections held idle after one lookup each, and what they cost the server's resident set.
    Idle(idle::IdleArgs),
    /// What anyone who reaches a controller group's ports can send it, while a real group fails over.
    ControllerFleet(controller_fleet::ControllerFleetArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Churn {
    Off,
    /// Re-register with the same DataVersion (a periodic, no-op registration).
    Same,
    /// Re-register with a new DataVersion each time.
    Bump,
}

/// Register brokers and drive route lookups.
#[derive(Args)]
struct RunArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    addr: String,
    #[arg(long, default_value_t = 4)]
    brokers: usize,
    #[arg(long, default_value_t = 1000)]
    topics: usize,
    /// Each broker registers `--topics` topics of its own (`b{broker}-topic-{i}`) and lookups ask for all of
    /// them: 1,000 x 1,000 is a million routes of one broker each. Without it every broker has the same.
    #[arg(long)]
    own_topics: bool,
    /// Register a slave (broker id 1) beside each master.
    #[arg(long)]
    slaves: bool,
    /// Topics per REGISTER_BROKER, 0 for the whole table in one frame. A Java broker on its defaults sends one
    /// frame (`enableSplitRegistration=false`; 4.x brokers never split); with `enableSplitRegistration=true`
    /// it sends parts of `splitRegistrationSize` (800) topics, which a table too large for one 16 MiB frame
    /// needs.
    #[arg(long, default_value_t = 0)]
    split: usize,
    /// Send the bodies zlib-compressed, as a broker with `compressedRegister=true` does.
    #[arg(long)]
    compressed: bool,
    #[arg(long, default_value_t = 4)]
    connections: usize,
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// The client whose request header the lookups carry: java, go, rust, cpp, node or binary
    /// (`rocketns::testing::client_headers` says where each comes from).
    #[arg(long, default_value = "java", value_parser = parse_header)]
    header: ClientHeader,
    /// Each connection's first opaque: 1 is a fresh client; 2147000000 a long-lived Java client, whose
    /// opaques have ten digits and turn negative when the counter wraps.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    opaque_start: i32,
    /// A start-up storm instead of steady load: this many new connections, opened evenly within one second,
    /// each asking `--storm-requests` routes (`--in-flight` at a time) and then closing. Every request must be
    /// answered; throughput is not the point, latency is.
    #[arg(long, default_value_t = 0)]
    storm: usize,
    #[arg(long, default_value_t = 20)]
    storm_requests: u64,
    /// Seconds of measured load (0: only register).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Connections held idle meanwhile, each after two lookups (a client fleet's connections between
    /// polls: `idle.rs`), opened before the warm-up.
    #[arg(long, default_value_t = 0)]
    idle: usize,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    #[arg(long)]
    zipf: bool,
    #[arg(long, default_value_t = 0.0)]
    miss_ratio: f64,
    #[arg(long, value_enum, default_value_t = Churn::Off)]
    churn: Churn,
    /// Milliseconds between one broker's re-registrations under churn (0: back to back).
    #[arg(long, default_value_t = 100)]
    churn_interval_ms: u64,
    /// Brokers of `--big-topics` topics each, on a thread of their own, that change the table while the
    /// lookups run (`--big-mode`); their topics are their own, so no lookup asks for them.
    #[arg(long, default_value_t = 0)]
    big_brokers: usize,
    #[arg(long, default_value_t = 100_000)]
    big_topics: usize,
    /// Milliseconds between one big broker's changes; the brokers take turns, evenly spread.
    #[arg(long, default_value_t = 3000)]
    big_period_ms: u64,
    #[arg(long, value_enum, default_value_t = big::BigMode::Bump)]
    big_mode: big::BigMode,
    /// The big brokers send their frames at this many megabits a second, as over a network (0: as fast as
    /// loopback takes them, which makes the kernel's TCP work a burst that both machines' cores feel).
    #[arg(long, default_value_t = 1000)]
    big_rate_mbps: u64,
    /// Print every lookup slower than this many milliseconds, with when it was sent, beside the big brokers'
    /// registrations (to see what a slow lookup waited for).
    #[arg(long)]
    trace_slow_ms: Option<u64>,
    /// Worker threads of the load generator.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// A label for the JSON summary.
    #[arg(long, default_value = "run")]
    label: String,
    /// The server's process id (Linux): its CPU time over the measured window is reported per request
    /// (`server_cpu_us_per_req`), the figure that stays meaningful when the load generator, not the server,
    /// sets the throughput.
    #[arg(long)]
    server_pid: Option<u32>,
}

impl RunArgs {
    fn shape(&self) -> Shape {
        Shape { split: self.split, compressed: self.compressed }
    }

    fn request_shape(&self) -> driver::RequestShape {
        driver::RequestShape {
            header: self.header,
            opaque_start: self.opaque_start,
            in_flight: self.in_flight,
            trace_slow: self.trace_slow_ms.map(Duration::from_millis),
        }
    }
}

/// Serve the echo limit.
#[derive(Args)]
struct EchoArgs {
    #[arg(long, default_value = "127.0.0.1:9875")]
    listen: String,
    /// Size the reply like the route of a topic on this many broker groups.
    #[arg(long, default_value_t = 4)]
    brokers: usize,
    #[arg(long)]
    slaves: bool,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Read and write exactly as rocketns does (its frame decoder, reply queue and vectored writes) instead
    /// of the plain echo: shows how much of a gap is rocketns's I/O.
    #[arg(long)]
    rocketns_shaped: bool,
}

/// Measure start-to-serving of a server command.
#[derive(Args)]
struct StartupArgs {
    /// Where the server will answer.
    #[arg(long)]
    addr: String,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    command: Vec<String>,
}

fn parse_header(name: &str) -> Result<ClientHeader, String> {
    ClientHeader::ALL.into_iter().find(|h| h.name() == name).ok_or_else(|| {
        let names: Vec<&str> = ClientHeader::ALL.iter().map(|h| h.name()).collect();
        format!("unknown client header {name:?}; one of {}", names.join(", "))
    })
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    let mut b = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    b.enable_all().build().expect("tokio runtime")
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => runtime(args.threads).block_on(run(args)),
        Command::Echo(args) => runtime(args.threads).block_on(echo_server(args)),
        Command::Startup(args) => runtime(1).block_on(startup(args)),
        Command::Fleet(args) => runtime(1).block_on(fleet::fleet(args)),
        Command::Hostile(args) => runtime(1).block_on(hostile::run(args)),
        Command::Storm(args) => runtime(1).block_on(storm::run(args)),
        Command::Idle(args) => runtime(1).block_on(idle::run(args)),
        Command::ControllerFleet(args) => runtime(2).block_on(controller_fleet::run(args)),
    };
    std::process::exit(code);
}

/// Sends one request and waits for its reply (registration and probing, not the measured load).
async fn call(stream: &mut TcpStream, cmd: &RemotingCommand) -> std::io::Result<RemotingCommand> {
    call_encoded(stream, &encode(cmd)).await
}

fn encode(cmd: &RemotingCommand) -> bytes::BytesMut {
    let mut out = bytes::BytesMut::new();
    cmd.encode(SerializeType::Json, &mut out);
    out
}

async fn call_encoded(stream: &mut TcpStream, frame: &[u8]) -> std::io::Result<RemotingCommand> {
    stream.write_all(frame).await?;
    read_reply(stream).await
}

/// The most one send hands the kernel. Over loopback a send also does the receiving side's work, in the
/// sender's context: 4 MB of a hostile trickle's 15 MiB frame kept the generator's core in the kernel for
/// 6-11 ms at a time (traced, on a kernel without preemption), and the lookups' thread waited for it
/// however high its priority, so the generator's own sending was measured as the server's latency. The
/// server reads the same stream either way.
const PIECE: usize = 64 * 1024;

/// `write_all` at most [`PIECE`] bytes a send.
async fn write_in_pieces(s: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    for piece in bytes.chunks(PIECE) {
        s.write_all(piece).await?;
    }
    Ok(())
}

/// The next frame on `stream`, decoded.
async fn read_reply(stream: &mut TcpStream) -> std::io::Result<RemotingCommand> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let mut frame = bytes::BytesMut::from(&len[..]);
    frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
    stream.read_exact(&mut frame[4..]).await?;
    let raw = tokio_util::codec::Decoder::decode(&mut rocketns::remoting::FrameDecoder::default(), &mut frame)
        .map_err(std::io::Error::other)?
        .ok_or_else(|| std::io::Error::other("short frame"))?;
    rocketns::remoting::decode_command(raw).map_err(std::io::Error::other)
}

struct BrokerConn {
    name: String,
    id: i64,
    addr: String,
    topics: Arc<Vec<String>>,
    stream: TcpStream,
}

/// How a broker sends its topic table: whole (`split` 0) or in parts of `split` topics, JSON or zlib.
#[derive(Clone, Copy)]
struct Shape {
    split: usize,
    compressed: bool,
}

impl Shape {
    /// The REGISTER_BROKER requests of one full registration.
    fn requests(self, name: &str, id: i64, addr: &str, topics: &[String], counter: i64) -> Vec<RemotingCommand> {
        let per_frame = if self.split == 0 { topics.len().max(1) } else { self.split };
        topics.chunks(per_frame).map(|c| wire::register_request(name, id, addr, c, counter, self.compressed)).collect()
    }
}

/// Registers every broker (and slave) over its own connection, all at once as after a NameServer restart,
/// and keeps the connections open: a NameServer drops the brokers of a closed connection.
async fn populate(args: &RunArgs, topics: &[Arc<Vec<String>>]) -> Result<Vec<BrokerConn>, String> {
    let mut registrations = tokio::task::JoinSet::new();
    for b in 0..args.brokers {
        for id in 0..if args.slaves { 2 } else { 1 } {
            let (server, topics, shape) = (args.addr.clone(), topics[b % topics.len()].clone(), args.shape());
            registrations.spawn(async move {
                let name = format!("broker-{b}");
                let addr = format!("10.0.{b}.{}:10911", id + 1);
                let mut stream = TcpStream::connect(&server).await.map_err(|e| format!("connect: {e}"))?;
                let _ = stream.set_nodelay(true);
                for request in shape.requests(&name, id, &addr, &topics, 1) {
                    let reply = call(&mut stream, &request).await.map_err(|e| format!("register {name}/{id}: {e}"))?;
                    if reply.code != 0 {
                        return Err(format!("register {name}/{id}: code {} {:?}", reply.code, reply.remark));
                    }
                }
                Ok(BrokerConn { name, id, addr, topics, stream })
            });
        }
    }
    let mut conns = Vec::new();
    while let Some(done) = registrations.join_next().await {
        conns.push(done.map_err(|e| format!("registration task: {e}"))??);
    }
    conns.sort_by(|a, b| (&a.name, a.id).cmp(&(&b.name, b.id)));
    Ok(conns)
}

/// Every broker re-registers its whole table, every `interval` (back to back when zero), until `deadline`.
/// Returns the connection, which must stay open until the lookups are done.
async fn churn(
    mut conn: BrokerConn,
    shape: Shape,
    bump: bool,
    interval: Duration,
    deadline: Instant,
    count: Arc<AtomicU64>,
) -> BrokerConn {
    // Encoded up front, so that churn costs the generator nothing: with `bump`, two DataVersions taken in
    // turn, each new to the server when it arrives.
    let versions: &[i64] = if bump { &[2, 3] } else { &[1] };
    let frames: Vec<Vec<bytes::BytesMut>> = versions
        .iter()
        .map(|v| shape.requests(&conn.name, conn.id, &conn.addr, &conn.topics, *v).iter().map(encode).collect())
        .collect();
    let mut next = Instant::now();
    let mut round = 0;
    while Instant::now() < deadline {
        if !interval.is_zero() {
            next += interval;
            tokio::time::sleep_until(next).await;
        }
        round += 1;
        for frame in &frames[round % frames.len()] {
            match call_encoded(&mut conn.stream, frame).await {
                Ok(r) if r.code == 0 => {}
                other => {
                    eprintln!("churn registration of {} failed: {:?}", conn.name, other.map(|r| (r.code, r.remark)));
                    return conn;
                }
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
    }
    conn
}

/// Lookups for `seconds` over `--connections` (none: the time passes with only the brokers at work, for
/// their registration round trips on an idle server).
async fn lookups(args: &RunArgs, picker: &Arc<driver::TopicPicker>, seconds: f64) -> Vec<driver::ConnStats> {
    let stop = driver::Stop::At(Instant::now() + Duration::from_secs_f64(seconds));
    if args.connections == 0 {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    }
    let tasks: Vec<_> = (0..args.connections)
        .map(|c| {
            tokio::spawn(driver::drive(args.addr.clone(), c as u64 + 1, args.request_shape(), picker.clone(), stop))
        })
        .collect();
    join_all(tasks).await
}

/// `--storm`: new connections opened evenly over one second, each asking its routes and closing.
async fn storm(args: &RunArgs, picker: &Arc<driver::TopicPicker>) -> Vec<driver::ConnStats> {
    let start = Instant::now();
    let stop = driver::Stop::After(args.storm_requests);
    let mut tasks = Vec::with_capacity(args.storm);
    for c in 0..args.storm {
        tokio::time::sleep_until(start + Duration::from_secs_f64(c as f64 / args.storm as f64)).await;
        tasks.push(tokio::spawn(driver::drive(
            args.addr.clone(),
            c as u64 + 1,
            args.request_shape(),
            picker.clone(),
            stop,
        )));
    }
    join_all(tasks).await
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<driver::ConnStats>>) -> Vec<driver::ConnStats> {
    let mut stats = Vec::new();
    for t in tasks {
        if let Ok(s) = t.await {
            stats.push(s);
        }
    }
    stats
}

async fn run(args: RunArgs) -> i32 {
    // One table every broker has, or one of its own for each.
    let tables: Vec<Arc<Vec<String>>> = if args.own_topics {
        (0..args.brokers).map(|b| Arc::new((0..args.topics).map(|i| format!("b{b}-topic-{i}")).collect())).collect()
    } else {
        vec![Arc::new((0..args.topics).map(|i| format!("topic-{i}")).collect())]
    };
    let topics: Vec<String> = tables.iter().flat_map(|t| t.iter().cloned()).collect();
    let routes = topics.len();
    let started = std::time::Instant::now();
    let conns = match populate(&args, &tables).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("populate failed: {e}");
            return 2;
        }
    };
    let populate_s = started.elapsed().as_secs_f64();
    println!("registered {} brokers x {} topics in {populate_s:.2}s ({} routes)", conns.len(), args.topics, routes);
    if args.duration <= 0.0 {
        println!(r#"{{"label":"{}","populate_s":{populate_s:.3}}}"#, args.label);
        return 0;
    }
    let (big_stop, big) = match start_big(&args).await {
        Ok(started) => started.unzip(),
        Err(e) => {
            eprintln!("big brokers failed: {e}");
            return 2;
        }
    };
    let idle = match args.idle {
        0 => Vec::new(),
        n => match idle::hold(&args.addr, &topics[0], n).await {
            Ok(held) => held,
            Err(e) => {
                eprintln!("idle connections failed: {e}");
                return 2;
            }
        },
    };
    let picker = Arc::new(driver::TopicPicker::new(topics, args.zipf, args.miss_ratio));
    let registrations = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs_f64(args.warmup + args.duration);
    let mut kept = Vec::new();
    let mut churning = Vec::new();
    let interval = Duration::from_millis(args.churn_interval_ms);
    for conn in conns {
        if args.churn == Churn::Off {
            kept.push(conn);
        } else {
            let bump = args.churn == Churn::Bump;
            churning.push(tokio::spawn(churn(conn, args.shape(), bump, interval, end, registrations.clone())));
        }
    }
    if args.warmup > 0.0 && args.storm == 0 {
        lookups(&args, &picker, args.warmup).await;
    }
    let before = registrations.load(Ordering::Relaxed);
    let cpu_before = args.server_pid.and_then(process_cpu_seconds);
    let t0 = std::time::Instant::now();
    let stats = if args.storm > 0 { storm(&args, &picker).await } else { lookups(&args, &picker, args.duration).await };
    let elapsed = t0.elapsed().as_secs_f64();
    let server_cpu = cpu_before.zip(args.server_pid.and_then(process_cpu_seconds)).map(|(a, b)| b - a);
    let regs = registrations.load(Ordering::Relaxed) - before;
    drop(big_stop);
    let big = big.and_then(|thread| thread.join().ok());
    for task in churning {
        if let Ok(conn) = task.await {
            kept.push(conn);
        }
    }
    let mut latency = driver::new_histogram();
    let (mut ok, mut errors) = (0, 0);
    for s in &stats {
        ok += s.ok;
        errors += s.errors;
        let _ = latency.add(&s.latency);
        if let Some(e) = &s.first_error {
            eprintln!("error: {e}");
        }
    }
    if args.trace_slow_ms.is_some() {
        trace_slow(t0, &stats, big.as_ref());
    }
    let rps = ok as f64 / elapsed;
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    let max_us = latency.max() as f64 / 1000.0;
    let big_summary = big.as_ref().map(|b| {
        let ms = |q: f64| b.round_trip.value_at_quantile(q) as f64 / 1000.0;
        (
            format!(
                ", {} big-broker changes ({}), round trip p50 {:.1} ms, max {:.1} ms",
                b.registrations,
                args.big_mode.name(),
                ms(0.5),
                b.round_trip.max() as f64 / 1000.0
            ),
            format!(
                r#","big_brokers":{},"big_topics":{},"big_mode":"{}","big_registrations":{},"big_failures":{},"big_reg_p50_ms":{:.1},"big_reg_max_ms":{:.1}"#,
                args.big_brokers,
                args.big_topics,
                args.big_mode.name(),
                b.registrations,
                b.failures,
                ms(0.5),
                b.round_trip.max() as f64 / 1000.0
            ),
        )
    });
    let (big_text, big_json) = big_summary.unwrap_or_default();
    println!(
        "{}: {ok} replies verified, {errors} errors, {rps:.0} requests/s, p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, max {max_us:.0} us{}{big_text}",
        args.label,
        us(0.5),
        us(0.99),
        us(0.999),
        if args.churn == Churn::Off { String::new() } else { format!(", {regs} full re-registrations") }
    );
    println!(
        r#"{{"label":"{}","connections":{},"idle":{},"in_flight":{},"brokers":{},"topics":{},"ok":{ok},"errors":{errors},"seconds":{elapsed:.3},"rps":{rps:.0},"p50_us":{:.1},"p99_us":{:.1},"p999_us":{:.1},"max_us":{max_us:.1},"registrations":{regs},"populate_s":{populate_s:.3},"routes":{},"header":"{}","opaque_start":{},"storm":{}{big_json}{}}}"#,
        args.label,
        args.connections,
        args.idle,
        args.in_flight,
        args.brokers,
        args.topics,
        us(0.5),
        us(0.99),
        us(0.999),
        routes,
        args.header.name(),
        args.opaque_start,
        args.storm,
        server_cpu
            .filter(|_| ok > 0)
            .map(|cpu| format!(r#","server_cpu_us_per_req":{:.3}"#, cpu * 1e6 / ok as f64))
            .unwrap_or_default()
    );
    drop((kept, idle));
    if errors > 0 || (ok == 0 && args.connections > 0) { 1 } else { 0 }
}

/// `--trace-slow-ms`: the slow lookups and the big brokers' registrations on one timeline, in ms from `t0`.
fn trace_slow(t0: std::time::Instant, stats: &[driver::ConnStats], big: Option<&big::BigReport>) {
    let t0 = Instant::from_std(t0);
    let at = |t: Instant| t.checked_duration_since(t0).map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let mut events: Vec<(f64, String)> = stats
        .iter()
        .flat_map(|s| s.slow.iter())
        .map(|(sent, took)| (at(*sent), format!("lookup took {:.1} ms", took.as_secs_f64() * 1000.0)))
        .collect();
    for (slot, started, took) in big.map(|b| b.events.as_slice()).unwrap_or_default() {
        let ms = took.as_secs_f64() * 1000.0;
        events.push((at(*started), format!("big broker {slot}: registration sent, answered after {ms:.1} ms")));
        events.push((at(*started + *took), format!("big broker {slot}: registration answered")));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (ms, what) in events {
        eprintln!("{ms:9.1} ms  {what}");
    }
}

type BigBrokers = (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<big::BigReport>);

/// Starts the `--big-brokers`, once they have registered: the sender stops them (when dropped), the thread
/// returns what they measured.
async fn start_big(args: &RunArgs) -> Result<Option<BigBrokers>, String> {
    if args.big_brokers == 0 {
        return Ok(None);
    }
    let spec = big::BigSpec {
        addr: args.addr.clone(),
        brokers: args.big_brokers,
        topics: args.big_topics,
        period: Duration::from_millis(args.big_period_ms.max(1)),
        mode: args.big_mode,
        rate_bytes_per_s: args.big_rate_mbps * 1_000_000 / 8,
    };
    let (ready, registered) = tokio::sync::oneshot::channel();
    let (stop, until) = std::sync::mpsc::channel();
    let thread = big::start(spec, ready, until);
    registered.await.map_err(|_| "the big brokers' thread ended".to_string())??;
    Ok(Some((stop, thread)))
}

/// User and system CPU seconds a process has used so far (fields 14 and 15 of /proc/PID/stat, in clock
/// ticks of 1/100 s, the value on Linux).
fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

async fn echo_server(args: EchoArgs) -> i32 {
    let listener = match tokio::net::TcpListener::bind(&args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot listen on {}: {e}", args.listen);
            return 2;
        }
    };
    let body = echo::route_body(args.brokers, args.slaves);
    let shape = if args.rocketns_shaped { "rocketns-shaped" } else { "plain" };
    println!("{shape} echo listening on {}, {} byte replies", args.listen, body.len());
    echo::serve(listener, body, args.rocketns_shaped).await;
    0
}

async fn startup(args: StartupArgs) -> i32 {
    let t0 = std::time::Instant::now();
    let mut child =
        match tokio::process::Command::new(&args.command[0]).args(&args.command[1..]).kill_on_drop(true).spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cannot start {:?}: {e}", args.command);
                return 2;
            }
        };
    let probe = RemotingCommand::request(106, Default::default());
    let ms = loop {
        if let Ok(mut s) = TcpStream::connect(&args.addr).await
            && let Ok(reply) = call(&mut s, &probe).await
            && reply.code == 0
        {
            break t0.elapsed().as_secs_f64() * 1000.0;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            eprintln!("no answer within 30 s");
            return 1;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    };
    println!(r#"{{"startup_ms":{ms:.1}}}"#);
    let _ = child.start_kill();
    let _ = child.wait().await;
    0
}
