//! `controller-fleet`: what anyone who reaches a controller group's ports can send it (issue 43), all at
//! once for a bounded time, while a real broker group fails over again and again through it:
//! - `raft`: Raft frames (60001-60003) with absurd terms and a snapshot chunk 1 TiB in, from a peer's
//!   address and from strangers' (each must be refused, NO_PERMISSION);
//! - `idle`: idle connections from `--sources` strangers' addresses to every node, opened again as the
//!   nodes close them;
//! - `takeover`: a heartbeat in the real master's name from a connection of its own, then a close;
//! - `forever`: heartbeats for made-up brokers with a day's `heartbeatTimeoutMills`, 16 a connection;
//! - `names`: GET_SYNC_STATE_DATA naming 700,000 groups;
//! - `heavy`: broker ids taken for made-up groups with check codes of 500 control characters.
//!
//! The real group (two brokers, beating every 500 ms to every node) has its master's connections closed
//! every `--failover-ms`: the leader must elect the other within 10 s, and the old master rejoins the
//! SyncStateSet. It reports each node's peak RSS (`--server-pids`) beside its documented bound (the quiet RSS,
//! the NameServer's pools read from `--metrics-ports`, and SECURITY.md's controller term), the failovers that
//! worked, what each kind got, and whether every node names a leader at the end, as a JSON last line.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use rocketns::remoting::RemotingCommand;
use rocketns::testing::wire::request;
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use crate::call;
use crate::probe::{PeakRss, rss};

#[derive(Args)]
pub struct ControllerFleetArgs {
    /// The controller nodes' addresses, `;`-separated.
    #[arg(long)]
    addrs: String,
    /// Each node's process id, in the order of `--addrs` (RSS sampled every 50 ms).
    #[arg(long, value_delimiter = ',')]
    server_pids: Vec<u32>,
    /// Each node's metrics port (its NameServer's pools, for the bound).
    #[arg(long, value_delimiter = ',')]
    metrics_ports: Vec<u16>,
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Idle connections a stranger's address holds to each node.
    #[arg(long, default_value_t = 200)]
    idle: usize,
    /// Strangers' addresses (127.0.0.10 on): 8 of 128 connections fill a node's 992 places for strangers.
    #[arg(long, default_value_t = 8)]
    sources: usize,
    #[arg(long, default_value_t = 6000)]
    failover_ms: u64,
    /// The kinds of hostile connection to open, comma-separated (all six by default; `none`: the real
    /// group alone, the baseline).
    #[arg(long, value_delimiter = ',')]
    kinds: Vec<String>,
}

/// Tighter than SECURITY.md's controller term, which the fleet cannot reach: 1,024 connections' 64 KiB,
/// the heartbeat table, the state (64 MiB) and two more copies of it as JSON; not the peers' frame pool, a
/// third copy nor the log (the fleet has no frame of its taken, and the log stays short).
const CONTROLLER_TERM: u64 = 1024 * (64 << 10) + (4 << 20) + (64 << 20) + 2 * (65 << 20);

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

fn count(counts: &Counts, what: String) {
    *counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(what).or_default() += 1;
}

async fn connect_from(source: &str, addr: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    // Its TIME-WAIT must not keep a server from binding this port on the wildcard address later.
    socket.set_reuseaddr(true)?;
    socket.bind(format!("{source}:0").parse().map_err(std::io::Error::other)?)?;
    socket.connect(addr.parse().map_err(std::io::Error::other)?).await
}

fn with_body(code: i32, fields: &[(&str, &str)], body: String) -> RemotingCommand {
    let mut req = request(code, fields);
    req.body = body.into();
    req
}

fn heartbeat(name: &str, id: &str, addr: &str, timeout_ms: &str) -> RemotingCommand {
    let fields = [("clusterName", "c"), ("brokerName", name), ("brokerAddr", addr), ("brokerId", id)];
    let mut beat = request(904, &fields);
    let ext = beat.ext_fields.get_or_insert_with(Default::default);
    for (k, v) in [("epoch", "0"), ("maxOffset", "0"), ("heartbeatTimeoutMills", timeout_ms), ("electionPriority", "0")]
    {
        ext.insert(k, v);
    }
    beat
}

fn apply_id(name: &str, id: &str, check: &str) -> RemotingCommand {
    let mut apply = request(1013, &[("clusterName", "c"), ("brokerName", name), ("appliedBrokerId", id)]);
    apply.ext_fields.get_or_insert_with(Default::default).insert("registerCheckCode", check);
    apply
}

/// Hostile connection `n` of `kind` (to node `n % nodes`, from stranger `source`), in a loop until `end`,
/// counting what each reply was.
async fn attacker(kind: &'static str, n: usize, source: usize, addrs: Arc<Vec<String>>, counts: Counts, end: Instant) {
    let node = &addrs[n % addrs.len()];
    // The idle kind from 127.0.0.10 on, the others from 127.0.0.30 on.
    let source =
        if kind == "idle" { format!("127.0.0.{}", 10 + source % 20) } else { format!("127.0.0.{}", 30 + source % 200) };
    let raft = [
        with_body(60001, &[], r#"{"vote":{"leader_id":{"term":18446744073709551615,"node_id":7},"committed":true},"prev_log_id":null,"entries":[],"leader_commit":null}"#.into()),
        with_body(60002, &[], r#"{"vote":{"leader_id":{"term":9223372036854775807,"node_id":7},"committed":false},"last_log_id":null}"#.into()),
        with_body(60003, &[], r#"{"vote":{"leader_id":{"term":1000,"node_id":7},"committed":true},"meta":{"last_log_id":null,"last_membership":{"log_id":null,"membership":{"configs":[],"nodes":{}}},"snapshot_id":"evil"},"offset":1099511627776,"data":[1,2,3],"done":false}"#.into()),
    ];
    let names = if kind == "names" {
        let list: Vec<String> = (0..700_000).map(|k| format!("\"g{k}\"")).collect();
        with_body(1006, &[], format!("[{}]", list.join(",")))
    } else {
        request(1006, &[])
    };
    let mut i = 0u64;
    while Instant::now() < end {
        let from = if kind == "raft" && n.is_multiple_of(2) { "127.0.0.1".to_string() } else { source.clone() };
        let Ok(mut s) = connect_from(&from, node).await else {
            count(&counts, format!("{kind}: connect failed"));
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let requests: Vec<RemotingCommand> = match kind {
            "raft" => {
                // Twenty rounds a second a connection: the bounds, not the CPU of 2 cores, are measured.
                tokio::time::sleep(Duration::from_millis(50)).await;
                raft.to_vec()
            }
            "idle" => {
                // Held until the node closes it (10 s without a frame), then again.
                let (mut byte, opened) = ([0u8; 1], Instant::now());
                let held = tokio::time::timeout_at(end, tokio::io::AsyncReadExt::read(&mut s, &mut byte)).await;
                let what = match held {
                    Err(_) => "held to the end",
                    Ok(_) if opened.elapsed() < Duration::from_secs(1) => "refused",
                    Ok(_) => "closed by the node after a while",
                };
                count(&counts, format!("idle: {what}"));
                if what == "refused" {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
            "forever" => {
                (0..16).map(|k| heartbeat(&format!("forever-{n}-{i}-{k}"), "1", "127.0.0.1:1", "86400000")).collect()
            }
            "takeover" => {
                let beats = vec![
                    heartbeat("real-a", "1", "127.0.0.1:20911", "10000"),
                    heartbeat("real-a", "2", "127.0.0.1:20921", "10000"),
                ];
                tokio::time::sleep(Duration::from_millis(500)).await;
                beats
            }
            "names" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                vec![names.clone()]
            }
            "heavy" => {
                let check = format!("127.0.0.1:1;{}", "\u{1}".repeat(500));
                (0..20).map(|k| apply_id(&format!("heavy-{n}-{i}-{k}"), "1", &check)).collect()
            }
            _ => Vec::new(),
        };
        for req in &requests {
            match call(&mut s, req).await {
                Ok(reply) => count(&counts, format!("{kind}: code {}", reply.code)),
                Err(_) => {
                    // Refused (a cap reached) or closed: not again at once.
                    count(&counts, format!("{kind}: closed"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
            }
        }
        i += 1;
        if kind == "forever" {
            // Kept open: the identities live as long as the connection.
            let mut byte = [0u8; 1];
            let _ = tokio::time::timeout_at(end, tokio::io::AsyncReadExt::read(&mut s, &mut byte)).await;
        }
    }
}

/// The node that says it leads, by index.
async fn leader(addrs: &[String]) -> Option<usize> {
    for (i, addr) in addrs.iter().enumerate() {
        let Ok(mut s) = TcpStream::connect(addr).await else { continue };
        if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(3), call(&mut s, &request(1005, &[]))).await
            && reply.ext("isLeader") == Some("true")
        {
            return Some(i);
        }
    }
    None
}

/// `req` answered by the leader (on a new connection), if one answers within 3 s.
async fn on_leader(addrs: &[String], req: &RemotingCommand) -> Option<RemotingCommand> {
    let mut s = TcpStream::connect(&addrs[leader(addrs).await?]).await.ok()?;
    tokio::time::timeout(Duration::from_secs(3), call(&mut s, req)).await.ok()?.ok()
}

/// One real broker of group `real-a`: a connection to each node, which it beats on.
struct RealBroker {
    id: &'static str,
    addr: &'static str,
    conns: Vec<TcpStream>,
}

impl RealBroker {
    async fn connect(&mut self, addrs: &[String]) {
        self.conns.clear();
        for addr in addrs {
            if let Ok(s) = TcpStream::connect(addr).await {
                self.conns.push(s);
            }
        }
        self.beat().await;
    }

    async fn beat(&mut self) {
        let beat = heartbeat("real-a", self.id, self.addr, "10000");
        for s in &mut self.conns {
            let _ = tokio::time::timeout(Duration::from_secs(3), call(s, &beat)).await;
        }
    }
}

/// The group's master id, master epoch, SyncStateSet epoch and SyncStateSet size as the leader has them
/// (1004).
async fn master(addrs: &[String]) -> Option<(String, String, String, usize)> {
    let reply = on_leader(addrs, &request(1004, &[("brokerName", "real-a")])).await?;
    let body: serde_json::Value = serde_json::from_slice(&reply.body).ok()?;
    let set_epoch = body["syncStateSetEpoch"].to_string();
    let in_sync = body["syncStateSet"].as_array().map_or(0, Vec::len);
    Some((reply.ext("masterBrokerId")?.to_string(), reply.ext("masterEpoch")?.to_string(), set_epoch, in_sync))
}

/// The real group: ids 1 and 2, 1 elected, both in sync; then its master's connections are closed every
/// `every` and the other must be elected within 10 s. Returns (failovers that worked, that did not).
async fn real_group(addrs: Arc<Vec<String>>, every: Duration, end: Instant) -> (u64, u64) {
    let mut brokers = [
        RealBroker { id: "1", addr: "127.0.0.1:20911", conns: Vec::new() },
        RealBroker { id: "2", addr: "127.0.0.1:20921", conns: Vec::new() },
    ];
    // Each step again until the leader takes it: a group just started may still change its leader.
    let until_taken = |req: RemotingCommand| {
        let addrs = addrs.clone();
        async move {
            while Instant::now() < end {
                if on_leader(&addrs, &req).await.is_some_and(|r| r.code == 0) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    for b in &mut brokers {
        until_taken(apply_id("real-a", b.id, &format!("{};1", b.addr))).await;
        b.connect(&addrs).await;
        let fields = [("clusterName", "c"), ("brokerName", "real-a"), ("brokerId", b.id), ("brokerAddress", b.addr)];
        until_taken(request(1003, &fields)).await;
    }
    let elect = [("clusterName", "c"), ("brokerName", "real-a"), ("brokerId", "1"), ("designateElect", "false")];
    until_taken(request(1002, &elect)).await;
    let (mut ok, mut failed) = (0, 0);
    while Instant::now() + every < end {
        let Some((master_id, epoch, set_epoch, in_sync)) = master(&addrs).await else {
            for b in &mut brokers {
                b.beat().await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if in_sync < 2 {
            // The master takes the other broker back into its SyncStateSet (its 1001), until it is there:
            // only then can the other be elected.
            let fields =
                [("brokerName", "real-a"), ("masterBrokerId", master_id.as_str()), ("masterEpoch", epoch.as_str())];
            let body = format!(r#"{{"syncStateSet":[1,2],"syncStateSetEpoch":{set_epoch}}}"#);
            on_leader(&addrs, &with_body(1001, &fields, body)).await;
            for b in &mut brokers {
                b.beat().await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let next_failover = Instant::now() + every;
        while Instant::now() < next_failover {
            for b in &mut brokers {
                b.beat().await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (gone, other) = if master_id == "1" { (0, 1) } else { (1, 0) };
        brokers[gone].conns.clear();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut elected = false;
        while Instant::now() < deadline && !elected {
            brokers[other].beat().await;
            elected = master(&addrs).await.is_some_and(|(id, ..)| id == brokers[other].id);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if elected {
            ok += 1
        } else {
            failed += 1
        }
        brokers[gone].connect(&addrs).await;
    }
    (ok, failed)
}

async fn metric(port: u16, name: &str) -> Option<f64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let ask = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    tokio::io::AsyncWriteExt::write_all(&mut s, ask).await.ok()?;
    let mut text = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut text).await.ok()?;
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

const KINDS: [&str; 6] = ["raft", "idle", "takeover", "forever", "names", "heavy"];

pub async fn run(args: ControllerFleetArgs) -> i32 {
    let addrs: Arc<Vec<String>> = Arc::new(args.addrs.split(';').filter(|a| !a.is_empty()).map(String::from).collect());
    let waited = Instant::now() + Duration::from_secs(30);
    while leader(&addrs).await.is_none() {
        if Instant::now() > waited {
            eprintln!("controller-fleet: no node of {} leads within 30 s", args.addrs);
            return 2;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let quiet: Vec<u64> = args.server_pids.iter().map(|pid| rss(*pid).map_or(0, |r| r.0)).collect();
    for pid in &args.server_pids {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
    let samplers: Vec<PeakRss> =
        args.server_pids.iter().map(|pid| PeakRss::start(Some(*pid), Duration::from_millis(50))).collect();
    let end = Instant::now() + Duration::from_secs_f64(args.duration);
    let counts: Counts = Arc::default();
    // The real group on a thread and runtime of its own: the fleet's thousands of tasks must not delay
    // its heartbeats, only the nodes may.
    let (group_addrs, every) = (addrs.clone(), Duration::from_millis(args.failover_ms));
    let real = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(real_group(group_addrs, every, end))
    });
    let mut tasks = Vec::new();
    for kind in KINDS.into_iter().filter(|k| args.kinds.is_empty() || args.kinds.iter().any(|c| c == k)) {
        let connections = match kind {
            "idle" => args.idle * args.sources * addrs.len(),
            "forever" => 300 * addrs.len(),
            "raft" => 6,
            _ => 3,
        };
        for n in 0..connections {
            // Idle connections come from `--sources` addresses, `--idle` of them to each node from each.
            let source = if kind == "idle" { (n / addrs.len()) % args.sources } else { n };
            tasks.push(tokio::spawn(attacker(kind, n, source, addrs.clone(), counts.clone(), end)));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let (failovers, failovers_failed) =
        tokio::task::spawn_blocking(move || real.join().unwrap_or((0, 0))).await.unwrap_or((0, 0));
    let peaks: Vec<u64> = samplers.into_iter().map(PeakRss::stop).collect();
    let mut bounds = Vec::new();
    for (i, q) in quiet.iter().enumerate() {
        let port = args.metrics_ports.get(i).copied();
        let pool = |name: &'static str| async move {
            match port {
                Some(p) => metric(p, &format!("rocketns_memory_budget_capacity_bytes{{pool=\"{name}\"}}")).await,
                None => None,
            }
        };
        let pools = pool("requests").await.unwrap_or(0.0) + pool("replies").await.unwrap_or(0.0);
        bounds.push(q + pools as u64 + CONTROLLER_TERM);
    }
    let mut naming = 0;
    for addr in addrs.iter() {
        if let Ok(mut s) = TcpStream::connect(addr).await
            && let Ok(reply) = call(&mut s, &request(1005, &[])).await
            && reply.ext("controllerLeaderAddress").is_some()
        {
            naming += 1;
        }
    }
    let kinds = counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    for (what, n) in &kinds {
        println!("  {what}: {n}");
    }
    let mb = |b: &u64| format!("{:.1}", *b as f64 / f64::from(1 << 20));
    println!(
        "controller fleet: {:.0} s; failovers {failovers} worked, {failovers_failed} did not; nodes naming a leader {naming} of {}; peak RSS (MB) {:?} against bounds {:?}",
        args.duration,
        addrs.len(),
        peaks.iter().map(mb).collect::<Vec<_>>(),
        bounds.iter().map(mb).collect::<Vec<_>>(),
    );
    let report = serde_json::json!({
        "failovers": failovers, "failovers_failed": failovers_failed, "nodes_naming_a_leader": naming,
        "nodes": addrs.len(), "peak_rss": peaks, "bound": bounds, "kinds": kinds,
    });
    println!("{report}");
    0
}
