//! `fleet`: a client fleet that keeps running while the NameServer behind one address is replaced
//! (the zero-downtime upgrade test, tests/ops/upgrade.sh): brokers re-registering every second, long-lived
//! client connections asking routes, and short-lived ones opening, asking a few routes and closing, all the
//! time. It counts what a client of an upgraded NameServer must never see: a refused (or reset) connection,
//! a request sent and never answered, and a route that disappears.
//!
//! A reply of GO_AWAY (1500) is an answer: the client closes that connection and opens a new one, as the
//! Java client does. A connection the server closed while the client was not waiting for a reply is a
//! clean close: the client finds it closed before sending (a read that returns end of file) and reconnects.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use clap::Args;
use rocketns::testing::client_headers::ClientHeader;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::wire::register_request;
use crate::{encode, read_reply};

const GO_AWAY: i32 = 1500;
const TOPIC_NOT_EXIST: i32 = 17;
/// Failures of each kind shown on stderr; the rest are counted only.
const SHOWN: u64 = 5;
/// The longest a request waits for its reply before it counts as unanswered.
const REPLY_WAIT: Duration = Duration::from_secs(5);

/// Run a client fleet against one address for a while (until `--duration` has passed, or SIGTERM), and say
/// whether any client saw a failure.
#[derive(Args)]
pub struct FleetArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    addr: String,
    /// Seconds to run at most; SIGTERM stops the fleet sooner (its summary is printed either way).
    #[arg(long, default_value_t = 20.0)]
    duration: f64,
    #[arg(long, default_value_t = 4)]
    brokers: usize,
    /// Topics of each broker.
    #[arg(long, default_value_t = 8)]
    topics: usize,
    /// Milliseconds between one broker's registrations (a Java broker's default is 30,000).
    #[arg(long, default_value_t = 1000)]
    register_interval_ms: u64,
    /// Connections kept open for the whole run, each asking a route every `--ask-interval-ms`.
    #[arg(long, default_value_t = 16)]
    long_lived: usize,
    #[arg(long, default_value_t = 20)]
    ask_interval_ms: u64,
    /// Tasks that each open a connection, ask `--short-requests` routes and close it, over and over.
    #[arg(long, default_value_t = 8)]
    short_lived: usize,
    #[arg(long, default_value_t = 3)]
    short_requests: usize,
}

#[derive(Default)]
struct Counts {
    connects: AtomicU64,
    refused: AtomicU64,
    requests: AtomicU64,
    answered: AtomicU64,
    go_away: AtomicU64,
    unanswered: AtomicU64,
    clean_closes: AtomicU64,
    route_missing: AtomicU64,
    other_codes: AtomicU64,
    registrations: AtomicU64,
}

impl Counts {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What one request on a connection came to.
enum Asked {
    Answered(i32),
    /// The server had closed the connection before the request was sent.
    Closed,
    Unanswered(String),
}

/// A client connection that reconnects when the server closes it or tells it to go.
struct Client {
    addr: String,
    stream: Option<TcpStream>,
    counts: Arc<Counts>,
}

impl Client {
    fn new(addr: &str, counts: &Arc<Counts>) -> Self {
        Client { addr: addr.to_string(), stream: None, counts: counts.clone() }
    }

    /// Sends one frame and reads its reply, connecting first when there is no open connection.
    async fn ask(&mut self, frame: &[u8]) -> Option<i32> {
        loop {
            if self.stream.is_none() {
                Counts::add(&self.counts.connects);
                match TcpStream::connect(&self.addr).await {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        self.stream = Some(s);
                    }
                    Err(e) => {
                        if self.counts.refused.fetch_add(1, Ordering::Relaxed) < SHOWN {
                            eprintln!("fleet: connection to {} failed: {e}", self.addr);
                        }
                        // As a client's reconnect timer: no busy loop against a closed port.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        return None;
                    }
                }
            }
            let stream = self.stream.as_mut()?;
            match ask_on(stream, frame).await {
                Asked::Closed => {
                    Counts::add(&self.counts.clean_closes);
                    self.stream = None;
                }
                Asked::Unanswered(why) => {
                    Counts::add(&self.counts.requests);
                    if self.counts.unanswered.fetch_add(1, Ordering::Relaxed) < SHOWN {
                        eprintln!("fleet: a request was not answered: {why}");
                    }
                    self.stream = None;
                    return None;
                }
                Asked::Answered(code) => {
                    Counts::add(&self.counts.requests);
                    Counts::add(&self.counts.answered);
                    if code == GO_AWAY {
                        Counts::add(&self.counts.go_away);
                        self.stream = None;
                    }
                    return Some(code);
                }
            }
        }
    }

    fn close(&mut self) {
        self.stream = None;
    }
}

async fn ask_on(stream: &mut TcpStream, frame: &[u8]) -> Asked {
    // A server that closed the connection while no request was on it has left an end of file to read.
    let mut probe = [0u8; 1];
    match stream.try_read(&mut probe) {
        Ok(0) => return Asked::Closed,
        Ok(_) => return Asked::Unanswered("bytes nobody asked for".into()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(_) => return Asked::Closed,
    }
    if let Err(e) = stream.write_all(frame).await {
        return Asked::Unanswered(format!("write: {e}"));
    }
    match tokio::time::timeout(REPLY_WAIT, read_reply(stream)).await {
        Ok(Ok(reply)) => Asked::Answered(reply.code),
        Ok(Err(e)) => Asked::Unanswered(format!("read: {e}")),
        Err(_) => Asked::Unanswered(format!("no reply within {REPLY_WAIT:?}")),
    }
}

fn topic(broker: usize, t: usize) -> String {
    format!("fleet-{broker}-{t}")
}

pub async fn fleet(args: FleetArgs) -> i32 {
    let counts = Arc::new(Counts::default());
    let started = Instant::now();
    let stopped = stop_at(started + Duration::from_secs_f64(args.duration));
    let topics: Arc<Vec<String>> =
        Arc::new((0..args.brokers).flat_map(|b| (0..args.topics).map(move |t| topic(b, t))).collect());
    // The brokers register once before any client asks, so that every route asked for exists.
    let mut brokers = Vec::new();
    for b in 0..args.brokers {
        let own: Vec<String> = (0..args.topics).map(|t| topic(b, t)).collect();
        let frame =
            encode(&register_request(&format!("fleet-broker-{b}"), 0, &format!("10.1.{b}.1:10911"), &own, 1, false));
        let mut client = Client::new(&args.addr, &counts);
        if client.ask(&frame).await != Some(0) {
            eprintln!("fleet: broker {b} could not register");
            return 2;
        }
        Counts::add(&counts.registrations);
        brokers.push((client, frame));
    }
    let mut tasks = tokio::task::JoinSet::new();
    let interval = Duration::from_millis(args.register_interval_ms);
    for (mut client, frame) in brokers {
        let (counts, stopped) = (counts.clone(), stopped.clone());
        tasks.spawn(async move {
            while !stopped.load(Ordering::Relaxed) {
                tokio::time::sleep(interval).await;
                match client.ask(&frame).await {
                    Some(0) => Counts::add(&counts.registrations),
                    Some(GO_AWAY) | None => {}
                    Some(_) => Counts::add(&counts.other_codes),
                }
            }
        });
    }
    for c in 0..args.long_lived {
        let (counts, topics, addr, stopped) = (counts.clone(), topics.clone(), args.addr.clone(), stopped.clone());
        let every = Duration::from_millis(args.ask_interval_ms);
        tasks.spawn(async move {
            let mut client = Client::new(&addr, &counts);
            let mut n = c;
            while !stopped.load(Ordering::Relaxed) {
                lookup(&mut client, &topics, &mut n, &counts).await;
                tokio::time::sleep(every).await;
            }
        });
    }
    for c in 0..args.short_lived {
        let (counts, topics, addr, stopped) = (counts.clone(), topics.clone(), args.addr.clone(), stopped.clone());
        let requests = args.short_requests;
        tasks.spawn(async move {
            let mut client = Client::new(&addr, &counts);
            let mut n = c * 7;
            while !stopped.load(Ordering::Relaxed) {
                for _ in 0..requests {
                    lookup(&mut client, &topics, &mut n, &counts).await;
                }
                client.close();
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    report(&counts, started.elapsed())
}

/// Set at `deadline`, or sooner on SIGTERM: a script stops the fleet once what it waits for has happened
/// (tests/ops/upgrade.sh: the brokers at the newest process), not after a guessed time.
fn stop_at(deadline: Instant) -> Arc<AtomicBool> {
    let stopped = Arc::new(AtomicBool::new(false));
    let flag = stopped.clone();
    // Installed before the fleet starts: a SIGTERM from then on stops it, never kills it unreported.
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    tokio::spawn(async move {
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                eprintln!("fleet: no SIGTERM handler ({e}); running until the deadline");
                tokio::time::sleep_until(deadline).await;
            }
        }
        flag.store(true, Ordering::Relaxed);
    });
    stopped
}

/// Asks the route of the next topic; a missing route is counted.
async fn lookup(client: &mut Client, topics: &[String], n: &mut usize, counts: &Counts) {
    *n = n.wrapping_add(1);
    let mut frame = Vec::new();
    ClientHeader::Java.put_route_request(&mut frame, &topics[*n % topics.len()], (*n % 1_000_000) as i32);
    match client.ask(&frame).await {
        Some(0 | GO_AWAY) | None => {}
        Some(TOPIC_NOT_EXIST) => Counts::add(&counts.route_missing),
        Some(_) => Counts::add(&counts.other_codes),
    }
}

fn report(c: &Counts, ran: Duration) -> i32 {
    let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let summary = serde_json::json!({
        "seconds": (ran.as_secs_f64() * 10.0).round() / 10.0,
        "connects": get(&c.connects),
        "refused": get(&c.refused),
        "requests": get(&c.requests),
        "answered": get(&c.answered),
        "go_away": get(&c.go_away),
        "unanswered": get(&c.unanswered),
        "clean_closes": get(&c.clean_closes),
        "route_missing": get(&c.route_missing),
        "other_codes": get(&c.other_codes),
        "registrations": get(&c.registrations),
    });
    println!("{summary}");
    let failed = get(&c.refused) + get(&c.unanswered) + get(&c.route_missing) + get(&c.other_codes);
    i32::from(failed > 0 || get(&c.answered) == 0)
}
