//! `--big-brokers`: brokers with very large topic tables that keep changing the route table while the
//! lookups are measured (perf/compare.sh's `bigchurn`), to show what a lookup waits for while a registration
//! of 100,000 topics is parsed, applied and encoded beside it. Their topics are their own: no lookup asks for
//! them.
//!
//! They run on a thread of their own with its own runtime, so that writing a 15 MB frame never holds up the
//! generator's lookup tasks (the generator's latencies must be the server's, not its own).

use std::sync::mpsc;
use std::time::Duration;

use bytes::BytesMut;
use clap::ValueEnum;
use hdrhistogram::Histogram;
use tokio::net::TcpStream;
use tokio::time::Instant;

use tokio::io::AsyncWriteExt;

use crate::{encode, read_reply, wire};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BigMode {
    /// Registered once before the lookups start, then silent: the baseline with the same table.
    Static,
    /// Re-registration with an unchanged DataVersion (a real broker's 30 s heartbeat): parse and compare.
    Same,
    /// Re-registration with a new DataVersion: every topic re-applied and re-encoded.
    Bump,
    /// The broker leaves (its connection closes) and a new broker with the same topics joins in its place.
    Join,
}

impl BigMode {
    pub fn name(self) -> &'static str {
        match self {
            BigMode::Static => "static",
            BigMode::Same => "same",
            BigMode::Bump => "bump",
            BigMode::Join => "join",
        }
    }
}

#[derive(Clone)]
pub struct BigSpec {
    pub addr: String,
    pub brokers: usize,
    pub topics: usize,
    pub period: Duration,
    pub mode: BigMode,
    /// Bytes a second a frame is sent at (0: unpaced).
    pub rate_bytes_per_s: u64,
}

/// The registrations made while the lookups ran.
pub struct BigReport {
    pub registrations: u64,
    pub failures: u64,
    /// Round trips of the registrations, from the frame's last byte sent to the reply, in microseconds.
    pub round_trip: Histogram<u64>,
    /// Each registration: its broker slot, when its last byte was sent, and its round trip.
    pub events: Vec<(usize, Instant, Duration)>,
}

/// One slot: a broker (or, with `join`, the broker of the moment) and the frames it sends in turn.
struct Slot {
    frames: Vec<(String, BytesMut)>,
    stream: Option<TcpStream>,
}

/// Starts the big brokers' thread: it encodes every frame up front, registers the brokers (not with `join`),
/// then answers `ready` and, from then until `until` answers, changes the table every period, staggered
/// across the brokers. The thread returns what it measured.
pub fn start(
    spec: BigSpec,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
    until: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<BigReport> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
        runtime.block_on(run(spec, ready, until))
    })
}

async fn run(
    spec: BigSpec,
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
    until: mpsc::Receiver<()>,
) -> BigReport {
    let mut report = BigReport {
        registrations: 0,
        failures: 0,
        round_trip: Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds"),
        events: Vec::new(),
    };
    let mut slots: Vec<Slot> = (0..spec.brokers).map(|s| slot(&spec, s)).collect();
    if spec.mode != BigMode::Join {
        for (s, slot) in slots.iter_mut().enumerate() {
            if let Err(e) = register(&spec, slot, 0, true).await {
                let _ = ready.send(Err(format!("big broker {s}: {e}")));
                return report;
            }
        }
    }
    let _ = ready.send(Ok(()));
    if spec.mode == BigMode::Static || spec.brokers == 0 {
        let _ = tokio::task::spawn_blocking(move || until.recv()).await;
        return report;
    }
    let start = Instant::now();
    let step = spec.period / spec.brokers as u32;
    let mut round = 0usize;
    loop {
        for (s, slot) in slots.iter_mut().enumerate() {
            tokio::time::sleep_until(start + spec.period * round as u32 + step * (s as u32 + 1)).await;
            if !matches!(until.try_recv(), Err(mpsc::TryRecvError::Empty)) {
                return report;
            }
            let frame = match spec.mode {
                BigMode::Same => 0,
                _ => 1 + round % 2,
            };
            match register(&spec, slot, frame, spec.mode == BigMode::Join).await {
                Ok((sent, took)) => {
                    report.registrations += 1;
                    let _ = report.round_trip.record(took.as_micros().max(1) as u64);
                    report.events.push((s, sent, took));
                }
                Err(e) => {
                    report.failures += 1;
                    eprintln!("big broker {s}: {e}");
                }
            }
        }
        round += 1;
    }
}

/// Slot `s`'s frames: its first registration (DataVersion 1), then two others taken in turn: with `bump`
/// the same broker with DataVersions 2 and 3; with `join` two brokers of other names (each joining when
/// the other has left); `same` re-sends the first.
fn slot(spec: &BigSpec, s: usize) -> Slot {
    let topics: Vec<String> = (0..spec.topics).map(|k| format!("t{s}-{k}")).collect();
    let addr = format!("10.1.{s}.1:10911");
    let frame = |name: &str, counter: i64| {
        (name.to_string(), encode(&wire::register_request(name, 0, &addr, &topics, counter, false)))
    };
    let base = format!("big-broker-{s}");
    let mut frames = vec![frame(&base, 1)];
    match spec.mode {
        BigMode::Bump => frames.extend([frame(&base, 2), frame(&base, 3)]),
        BigMode::Join => frames.extend([frame(&format!("{base}-a"), 1), frame(&format!("{base}-b"), 1)]),
        BigMode::Static | BigMode::Same => {}
    }
    Slot { frames, stream: None }
}

/// Sends frame `i` of the slot, paced, and waits for its SUCCESS; returns when its last byte was sent and
/// how long the reply took from then. `fresh` closes the slot's connection first (a NameServer removes the
/// brokers of a closed connection) and registers over a new one.
async fn register(spec: &BigSpec, slot: &mut Slot, i: usize, fresh: bool) -> Result<(Instant, Duration), String> {
    if fresh {
        slot.stream = None;
    }
    let stream = match &mut slot.stream {
        Some(s) => s,
        None => {
            let s = TcpStream::connect(&spec.addr).await.map_err(|e| format!("connect: {e}"))?;
            let _ = s.set_nodelay(true);
            slot.stream.insert(s)
        }
    };
    let (name, frame) = &slot.frames[i];
    send_paced(stream, frame, spec.rate_bytes_per_s).await.map_err(|e| format!("register {name}: {e}"))?;
    let sent = Instant::now();
    let reply = tokio::time::timeout(Duration::from_secs(60), read_reply(stream))
        .await
        .map_err(|_| format!("register {name}: no reply within 60 s"))?
        .map_err(|e| format!("register {name}: {e}"))?;
    if reply.code != 0 {
        return Err(format!("register {name}: code {} {:?}", reply.code, reply.remark));
    }
    Ok((sent, sent.elapsed()))
}

/// Writes `frame` in 64 KiB pieces at `rate` bytes a second (all at once when 0).
async fn send_paced(stream: &mut TcpStream, frame: &[u8], rate: u64) -> std::io::Result<()> {
    if rate == 0 {
        return stream.write_all(frame).await;
    }
    let start = Instant::now();
    let mut sent = 0usize;
    for piece in frame.chunks(64 * 1024) {
        tokio::time::sleep_until(start + Duration::from_secs_f64(sent as f64 / rate as f64)).await;
        stream.write_all(piece).await?;
        sent += piece.len();
    }
    Ok(())
}
