//! `idle`: what a fleet of mostly idle clients costs a NameServer. Every producer and consumer keeps one
//! connection to one NameServer and asks it once every 30 s, so a large deployment's NameServer holds tens of
//! thousands of connections that are, at any moment, waiting. This opens `--connections` of them, each
//! after one route lookup (a client's first poll), and with `--polls 2` (the default) asks again on each a
//! second later (its next poll: rocketns has then moved it to its lookups' runtime, as a deployment's
//! connections are), holds them open and reads the server's resident set before and after
//! (`--server-pid`): the bytes an idle connection costs. Each first lookup is timed from its connection's
//! start (connect and lookup) and from its request (the lookup alone): with `--opening` as large as
//! `--connections`, a fleet's restart, every connection opened at once.
//!
//! `run --idle N` holds N such connections open (`hold`) while it measures its lookups.

use std::time::Duration;

use clap::Args;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::probe::{lookup, rss};
use crate::wire::register_request;
use crate::{call_encoded, encode, read_reply};

#[derive(Args)]
pub struct IdleArgs {
    #[arg(long, default_value = "127.0.0.1:9876")]
    addr: String,
    /// Connections held idle, each after one lookup.
    #[arg(long, default_value_t = 18_000)]
    connections: usize,
    /// Connections being opened at once.
    #[arg(long, default_value_t = 256)]
    opening: usize,
    /// Lookups on each connection, the second and later a second and a tenth after the one before.
    #[arg(long, default_value_t = 2)]
    polls: usize,
    /// The server's process, whose resident set is read before and after.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Register a broker with the looked-up topic first (not for the echo, which answers anything).
    #[arg(long)]
    register: bool,
    #[arg(long, default_value = "")]
    label: String,
    /// Seconds the connections are still held after the resident set is read, reading it each second.
    #[arg(long, default_value_t = 0)]
    hold_s: u64,
}

const TOPIC: &str = "IdleTopic";
/// Past rocketns's `SETTLED_AFTER` (1 s): a lookup after it moves the connection off the intake.
const POLL_GAP: Duration = Duration::from_millis(1100);

/// How long the resident set must hold still to count as settled: longer than any server's own period of
/// handing freed memory back (rocketns's is 5 s: `main.rs`), which a shorter window read before it.
const SETTLE_WINDOW: Duration = Duration::from_secs(6);

/// The resident set once it has stopped moving (within 1 % over `SETTLE_WINDOW`, read each second, at most
/// 30 s): a server frees and a kernel accounts lazily.
fn settled_rss(pid: Option<u32>) -> u64 {
    let Some(pid) = pid else { return 0 };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let window = SETTLE_WINDOW.as_secs() as usize;
    let mut seen = vec![rss(pid).map_or(0, |r| r.0)];
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = rss(pid).map_or(0, |r| r.0);
        seen.push(now);
        let recent = &seen[seen.len().saturating_sub(window + 1)..];
        let (low, high) = (recent.iter().min().copied().unwrap_or(0), recent.iter().max().copied().unwrap_or(0));
        if (recent.len() > window && (high - low) * 100 <= low) || std::time::Instant::now() >= deadline {
            return now;
        }
    }
}

/// One client's first poll: connect, one lookup, its reply; the connection, to be held, with the
/// nanoseconds from the start to the reply and from the request to the reply.
async fn first_poll(addr: &str, frame: &[u8]) -> std::io::Result<(TcpStream, u64, u64)> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let asked = Instant::now();
    call_encoded(&mut stream, frame).await?;
    let nanos = |since: Instant| since.elapsed().as_nanos() as u64;
    Ok((stream, nanos(started), nanos(asked)))
}

/// What a fleet's first polls took: from each connection's start and from its request.
struct FirstPolls {
    whole: hdrhistogram::Histogram<u64>,
    lookup: hdrhistogram::Histogram<u64>,
}

/// Opens `connections` connections, `opening` at a time, each with a lookup (`frame`), and asks again on
/// each `polls - 1` times, `POLL_GAP` apart (moving it off rocketns's intake): the connections held, how
/// many failed, how long opening took and the first polls' times.
async fn open_idle(
    addr: &str,
    frame: &bytes::Bytes,
    connections: usize,
    opening: usize,
    polls: usize,
) -> (Vec<TcpStream>, usize, f64, FirstPolls) {
    let started = Instant::now();
    let (opened, mut failed) = in_batches(0..connections, opening, |_| {
        let (addr, frame) = (addr.to_string(), frame.clone());
        async move { first_poll(&addr, &frame).await }
    })
    .await;
    let opened_s = started.elapsed().as_secs_f64();
    let mut first = FirstPolls { whole: crate::driver::new_histogram(), lookup: crate::driver::new_histogram() };
    let mut held = Vec::with_capacity(opened.len());
    for (stream, whole, lookup) in opened {
        let _ = first.whole.record(whole);
        let _ = first.lookup.record(lookup);
        held.push(stream);
    }
    for _ in 1..polls {
        tokio::time::sleep(POLL_GAP).await;
        let again = in_batches(std::mem::take(&mut held), opening, |mut stream| {
            let frame = frame.clone();
            async move { call_encoded(&mut stream, &frame).await.map(|_| stream) }
        });
        let (kept, lost) = again.await;
        (held, failed) = (kept, failed + lost);
    }
    (held, failed, opened_s, first)
}

/// `run --idle`: `connections` connections held idle after two lookups of `topic` each (a client fleet's
/// first two polls), 256 opening at once; an error if any failed.
pub async fn hold(addr: &str, topic: &str, connections: usize) -> std::io::Result<Vec<TcpStream>> {
    let frame = encode(&lookup(topic)).freeze();
    let (held, failed, opened_s, _) = open_idle(addr, &frame, connections, 256, 2).await;
    println!("{} connections held idle after 2 lookups each, opened in {opened_s:.1} s", held.len());
    if failed > 0 {
        return Err(std::io::Error::other(format!("{failed} of {connections} idle connections failed")));
    }
    Ok(held)
}

/// Runs `poll` on each item, `opening` at a time: the connections it gives back, and how many failed.
async fn in_batches<T, K, F, Fut>(items: impl IntoIterator<Item = T>, opening: usize, poll: F) -> (Vec<K>, usize)
where
    K: Send + 'static,
    F: Fn(T) -> Fut,
    Fut: Future<Output = std::io::Result<K>> + Send + 'static,
{
    let (mut kept, mut failed) = (Vec::new(), 0);
    let mut items = items.into_iter();
    loop {
        let polls: Vec<_> = items.by_ref().take(opening).map(|item| tokio::spawn(poll(item))).collect();
        if polls.is_empty() {
            return (kept, failed);
        }
        for polled in polls {
            match polled.await {
                Ok(Ok(stream)) => kept.push(stream),
                _ => failed += 1,
            }
        }
    }
}

pub async fn run(args: IdleArgs) -> i32 {
    match held_idle(args).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("idle: {e}");
            1
        }
    }
}

async fn held_idle(args: IdleArgs) -> std::io::Result<()> {
    // The broker's connection stays open for the run: its close would remove the broker.
    let _broker = if args.register {
        let mut stream = TcpStream::connect(&args.addr).await?;
        // Two topics: a first registration of one topic is refused (Java's rule against a lone incremental one).
        let topics = [TOPIC.to_string(), format!("{TOPIC}2")];
        let frame = encode(&register_request("broker-idle", 0, "127.0.0.1:10911", &topics, 1, false));
        stream.write_all(&frame).await?;
        let reply = read_reply(&mut stream).await?;
        if reply.code != 0 {
            return Err(std::io::Error::other(format!("registration answered {}: {:?}", reply.code, reply.remark)));
        }
        Some(stream)
    } else {
        None
    };
    let frame = encode(&lookup(TOPIC)).freeze();
    // One lookup answered before the baseline, so that what a first request allocates for good is in it.
    drop(first_poll(&args.addr, &frame).await?);
    let before = settled_rss(args.server_pid);
    let (held, failed, opened_s, first) =
        open_idle(&args.addr, &frame, args.connections, args.opening, args.polls).await;
    let after = settled_rss(args.server_pid);
    let per_conn = if held.is_empty() { 0 } else { after.saturating_sub(before) / held.len() as u64 };
    println!(
        "{}: {} connections held idle after {} lookups each ({failed} failed), opened in {opened_s:.1} s; RSS {:.1} -> {:.1} MB, {:.2} KiB a connection",
        args.label,
        held.len(),
        args.polls,
        before as f64 / 1e6,
        after as f64 / 1e6,
        per_conn as f64 / 1024.0
    );
    for second in 1..=args.hold_s {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = args.server_pid.and_then(rss).map_or(0, |r| r.0);
        println!("{second} s later: RSS {:.1} MB", now as f64 / 1e6);
    }
    crate::probe::print_lookups("first (connect and lookup)", &first.whole);
    crate::probe::print_lookups("first (lookup alone)", &first.lookup);
    println!(
        r#"{{"label":"{}","connections":{},"opening":{},"polls":{},"failed":{failed},"opened_s":{opened_s:.3},"rss_before":{before},"rss_after":{after},"bytes_per_connection":{per_conn},"first_poll":{},"first_lookup":{}}}"#,
        args.label,
        held.len(),
        args.opening,
        args.polls,
        crate::probe::stats_json(&first.whole),
        crate::probe::stats_json(&first.lookup)
    );
    Ok(())
}
