//! The memory budget (src/limits/budget.rs) on the real binary: whatever connections send, registered brokers or
//! not, the server holds no more than its pools beyond each connection's few kilobytes, and a broker
//! registered before a flood stays routed. Each bound here was switched off once (a pool of 1 GiB, the
//! decoder's meter unlimited, the keep-alive of a waiting broker removed) to see its test fail.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rocketns::remoting::RemotingCommand;

const MIB: u64 = 1 << 20;

/// A counter or gauge that must be there.
fn metric_of(port: u16, name: &str) -> u64 {
    let text = metrics_text(port);
    metric_in(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}")) as u64
}

fn broker_count(route: &RemotingCommand) -> usize {
    assert_eq!(route.code, 0, "{:?}", route.remark);
    let json: serde_json::Value = serde_json::from_slice(&route.body).expect("route JSON");
    json["brokerDatas"].as_array().expect("brokerDatas").len()
}

/// The start of a REGISTER_BROKER frame of `broker` announcing the largest frame accepted (16 MiB, prefix
/// included), padded to `len` bytes.
fn largest_frame_start(broker: &Broker<'_>, len: usize) -> Vec<u8> {
    let mut cmd = register_request(broker, dv(1), &[]);
    cmd.body = Default::default();
    let frame = frame_bytes(&cmd);
    let header_len = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]) as usize;
    let mut out = ((16u32 << 20) - 4).to_be_bytes().to_vec();
    out.extend_from_slice(&frame[4..8 + header_len]);
    out.resize(len, b'x');
    out
}

/// Twelve connections announce 16 MiB frames, send 15 MiB and then a byte every 100 ms; over half of them a
/// made-up broker registered first (anyone may). Two fit in the requests pool at a time (64 MiB, each
/// holding its frame and 3/4 more for its decoding); the others are not read meanwhile and wait their
/// turn, registered or not. Peak memory grows by about the pool, where without it (largeFrameBufferBytes
/// of 1 GiB) it grew by 12 × 15 MiB. Each flood frame, once it has room, must arrive within
/// largeFrameTimeoutMillis (2 s here), so all are closed and counted within seconds.
///
/// A broker registered before the flood, with a heartbeat timeout of 3 s (a 5.x broker's
/// `heartbeatTimeoutMillis`) and the scan every 200 ms, sends its next registration (750 kB) during the
/// flood: it waits its turn behind the flood, and is kept alive meanwhile (its routes are served all
/// along; with that keep-alive removed, it expired within the first seconds), then is answered.
#[test]
fn large_frames_wait_their_turn_within_the_budget() {
    const FLOOD: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("metricsPort={port}\nlargeFrameTimeoutMillis=2000\nscanNotActiveBrokerInterval=200\n");
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &extra));
    let broker = Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    let with_timeout = |mut cmd: RemotingCommand| {
        cmd.ext_fields.as_mut().unwrap().insert("heartbeatTimeoutMillis", "3000");
        cmd
    };
    let mut broker_conn = TcpStream::connect(&addr).unwrap();
    let first = with_timeout(register_request(&broker, dv(1), &[("TopicA", 8, 6), ("TopicB", 8, 6)]));
    assert_eq!(blocking_request(&mut broker_conn, &first).unwrap().code, 0);
    let mut client = TcpStream::connect(&addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    reset_peak_rss(server.id());
    let rss_before = proc_status_kb(server.id(), "VmRSS:");

    let flood: Vec<_> = (0..FLOOD)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).expect("connect");
                let (name, broker_addr) = (format!("made-up-{i}"), format!("10.9.0.{i}:10911"));
                let made_up = Broker::new("c", &name, 0, &broker_addr);
                if i % 2 == 0 {
                    let registered = register_request(&made_up, dv(1), &[("X", 1, 6), ("Y", 1, 6)]);
                    assert_eq!(blocking_request(&mut s, &registered).expect("registered").code, 0);
                }
                // Blocks while the server does not read; fails once the server closes the connection.
                if s.write_all(&largest_frame_start(&made_up, 15 << 20)).is_err() {
                    return;
                }
                // Until the server closes the connection.
                let deadline = Instant::now() + Duration::from_secs(90);
                while Instant::now() < deadline {
                    if s.write_all(b"x").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    // Every flood frame has room, or waits for it.
    let room = (16 << 20) / 4 * 7;
    wait_until("the flood is taken in", Duration::from_secs(60), || {
        let held = metric_of(port, "rocketns_memory_budget_bytes{pool=\"requests\"}");
        metric_of(port, "rocketns_large_frames_waiting") + held / room >= FLOOD as u64
    });

    // The registered broker's next registration waits its turn; its routes are served meanwhile.
    let names: Vec<String> = (0..5_000).map(|i| format!("more-{i}")).collect();
    let more: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 6)).collect();
    broker_conn.write_all(&frame_bytes(&with_timeout(register_request(&broker, dv(2), &more)))).unwrap();
    broker_conn.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let reply = loop {
        assert!(started.elapsed() < Duration::from_secs(90), "the broker's registration was never answered");
        let lookup = blocking_request(&mut client, &route_request("TopicA", 479)).expect("a lookup is answered");
        assert_eq!(broker_count(&lookup), 1, "the waiting broker stays routed after {:?}", started.elapsed());
        if let Some(reply) = blocking_reply(&mut broker_conn) {
            break reply;
        }
    };
    assert_eq!(reply.code, 0, "{:?}", reply.remark);
    let waited = started.elapsed();
    for t in flood {
        t.join().unwrap();
    }
    let growth = (proc_status_kb(server.id(), "VmHWM:").saturating_sub(rss_before)) * 1024;
    assert!(growth < 64 * MIB + 24 * MIB, "peak memory grew by {} MiB during the flood", growth / MIB);
    assert!(waited > Duration::from_secs(4), "it waited behind the flood ({waited:?})");
    assert_eq!(broker_count(&blocking_request(&mut client, &route_request("more-4999", 479)).unwrap()), 1);
    assert_eq!(metric_of(port, "rocketns_large_frames_refused_total{reason=\"too_slow\"}"), FLOOD as u64);
    wait_until("the pool is free again", Duration::from_secs(60), || {
        metric_of(port, "rocketns_memory_budget_bytes{pool=\"requests\"}") == 0
    });
    eprintln!("flood: peak memory +{} MiB, the broker waited {waited:?}", growth / MIB);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A zlib body of 2.5 million identical topic configs: 62 MB inflated (just under the inflate limit), a
/// few hundred kilobytes as sent.
fn zlib_bomb() -> Vec<u8> {
    use std::io::Write as _;
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
    z.write_all(&raw).unwrap();
    z.finish().unwrap()
}

/// Eight made-up brokers send a zlib bomb at once (`compressed=true`): what decoding one builds is known
/// before it is built (its topic configs, counted off the inflated stream without keeping them), more than
/// half the requests pool, so each is refused with a remark that says so, having held next to nothing.
/// The count stops where the need passes the limit (here at the announced count of topic configs): when
/// each refusal inflated the whole 62 MB, the eight took minutes of the work lane's CPU on a busy
/// machine, and half the senders had no answer within this test's two minutes.
/// With the decoder's meter unlimited, the eight decoded at once took the server's memory up by 1.5 GB.
#[test]
fn zlib_bombs_are_refused_before_they_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &format!("metricsPort={port}\n")));
    let bomb = Arc::new(zlib_bomb());
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    reset_peak_rss(server.id());
    let rss_before = proc_status_kb(server.id(), "VmRSS:");
    let senders: Vec<_> = (0..8)
        .map(|i| {
            let (addr, bomb) = (addr.clone(), bomb.clone());
            std::thread::spawn(move || {
                let (name, broker_addr) = (format!("bomb-{i}"), format!("10.8.0.{i}:10911"));
                let mut cmd = register_request(&Broker::new("c", &name, 0, &broker_addr), dv(1), &[]);
                cmd.ext_fields.as_mut().unwrap().insert("compressed", "true");
                cmd.ext_fields.as_mut().unwrap().insert("bodyCrc32", "0");
                cmd.body = bomb.to_vec().into();
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                blocking_request(&mut s, &cmd).expect("a reply")
            })
        })
        .collect();
    let replies: Vec<RemotingCommand> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    let growth = (proc_status_kb(server.id(), "VmHWM:").saturating_sub(rss_before)) * 1024;
    assert!(growth < 32 * MIB, "peak memory grew by {} MiB", growth / MIB);
    for reply in replies {
        assert_eq!(reply.code, 1, "{:?}", reply.remark);
        let remark = reply.remark.unwrap_or_default();
        assert!(remark.contains("needs more than 33554432 bytes to decode"), "{remark}");
    }
    assert_eq!(metric_of(port, "rocketns_registration_bodies_refused_total{reason=\"too_large\"}"), 8);
    eprintln!("bombs: peak memory +{} MiB", growth / MIB);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A broker of `topics` topics, registered over a connection kept open (closing it removes the broker).
fn big_broker(addr: &str, topics: usize) -> TcpStream {
    let names: Vec<String> = (0..topics).map(|i| format!("topic-{i}")).collect();
    let configs: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 6)).collect();
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let registered = register_request(&Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), &configs);
    assert_eq!(blocking_request(&mut conn, &registered).expect("registered").code, 0);
    conn
}

/// Lookups over one connection until `stop`, each checked; returns how many were answered.
fn lookups_until(addr: &str, stop: Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<usize> {
    let addr = addr.to_string();
    std::thread::spawn(move || {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut answered = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let reply = blocking_request(&mut c, &route_request("topic-99999", 479)).expect("a lookup is answered");
            assert_eq!(broker_count(&reply), 1);
            answered += 1;
        }
        answered
    })
}

/// Admin reads at 100,000 topics. 300 GET_TOPICS_BY_CLUSTER pipelined in one write are answered from one
/// encoding of the lists (it took 13 s of a worker's CPU when each was encoded anew, issue 31). Then 32
/// slow readers each ask for the topic list (1.3 MB) right after a change of the table, each once the one
/// before has its list encoded, so that each would hold a body of its own, and never read: their bodies are held within the replies pool (8 MiB
/// here; the kernel holds at most about 2 × 64 KiB a socket, with serverSocketSndBufSize), where without
/// it (1 GiB) memory grew by their 40 MB; readers beyond the pool wait holding nothing and are answered
/// from the table of the moment they get room. One that has not taken its reply within
/// largeFrameTimeoutMillis (8 s here) is closed, and counted. Lookups on another connection are answered
/// throughout.
#[test]
fn admin_reads_are_encoded_once_and_slow_readers_held_to_the_replies_pool() {
    const SLOW: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!(
        "metricsPort={port}\nlargeReplyBufferBytes=8388608\nlargeFrameTimeoutMillis=8000\nserverSocketSndBufSize=65536\n"
    );
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &extra));
    let _broker = big_broker(&addr, 100_000);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lookups = lookups_until(&addr, stop.clone());

    let encoded = || metric_of(port, "rocketns_table_bodies_encoded_total");
    let before = encoded();
    let mut admin = TcpStream::connect(&addr).unwrap();
    admin.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let asked: Vec<u8> = (0..300).flat_map(|_| frame_bytes(&request(224, &[("cluster", "c")]))).collect();
    admin.write_all(&asked).unwrap();
    let first = blocking_reply(&mut admin).expect("answered");
    assert!(first.body.len() > 1_000_000, "{} bytes", first.body.len());
    for _ in 1..300 {
        assert_eq!(blocking_reply(&mut admin).expect("answered").body, first.body);
    }
    assert_eq!(encoded() - before, 1, "300 requests, one encoding");

    reset_peak_rss(server.id());
    let rss_before = proc_status_kb(server.id(), "VmRSS:");
    let slow: Vec<TcpStream> = (0..SLOW)
        .map(|i| {
            let topic = format!("extra-{i}");
            let queues = r#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":1,"writeQueueNums":1}]}"#;
            let mut change = request(217, &[("topic", &topic)]);
            change.body = queues.as_bytes().to_vec().into();
            assert_eq!(blocking_request(&mut admin, &change).expect("registered").code, 0);
            let mut reader = TcpStream::connect(&addr).unwrap();
            let asked = encoded();
            reader.write_all(&frame_bytes(&request(206, &[]))).unwrap();
            // Its list is of this table, not shared with the next reader's.
            wait_until("the reader's list is encoded", Duration::from_secs(60), || encoded() > asked);
            reader
        })
        .collect();
    let growth = (proc_status_kb(server.id(), "VmHWM:").saturating_sub(rss_before)) * 1024;
    assert!(growth < 8 * MIB + 20 * MIB, "peak memory grew by {} MiB with the slow readers", growth / MIB);
    wait_until("the readers holding room are closed and counted", Duration::from_secs(60), || {
        metric_of(port, "rocketns_large_frames_refused_total{reason=\"reply_not_taken\"}") >= 4
    });
    // The others, answered since or waiting for room holding nothing, are closed by their peers.
    drop(slow);
    wait_until("every slow reader is closed", Duration::from_secs(60), || metric_of(port, "rocketns_connections") == 3);
    assert_eq!(metric_of(port, "rocketns_memory_budget_bytes{pool=\"replies\"}"), 0);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answered = lookups.join().expect("every lookup answered");
    eprintln!("slow readers: peak memory +{} MiB; {answered} lookups answered meanwhile", growth / MIB);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Forty connections each pipeline 300 GET_BROKER_CLUSTER_INFO in one write (a 14 kB reply, with 100
/// brokers registered: small enough to be copied into the connection's own reply buffer) and read
/// nothing. A connection writes its replies, and stops reading, once writeBufferHighWaterMark (16 KiB by
/// default) of them wait: the server holds a few tens of kilobytes for each (+1-2 MiB in all), where
/// without that bound (a high-water mark of 1 GiB) each held as many replies as its last read brought
/// requests (+11 MiB). Then every reply is read, and each is right.
#[test]
fn pipelined_replies_are_held_to_the_high_water_mark() {
    const CONNECTIONS: usize = 40;
    const REQUESTS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("metricsPort={port}\nserverSocketSndBufSize=65536\n");
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &extra));
    let mut brokers = TcpStream::connect(&addr).unwrap();
    for i in 0..100 {
        let (name, broker_addr) = (format!("broker-{i:03}"), format!("10.0.{}.{}:10911", i / 200, i % 200));
        let registered =
            register_request(&Broker::new("c", &name, 0, &broker_addr), dv(1), &[("T", 4, 6), ("U", 4, 6)]);
        assert_eq!(blocking_request(&mut brokers, &registered).unwrap().code, 0);
    }
    let mut probe = TcpStream::connect(&addr).unwrap();
    let expected = blocking_request(&mut probe, &request(106, &[])).unwrap().body;
    assert!((12_000..16_384).contains(&expected.len()), "{} bytes", expected.len());
    // A connection adds its counts after it has written its replies (on the work lane, whenever that runs).
    let counted = || metric_in(&metrics_text(port), "rocketns_requests_total{code=\"106\",result=\"success\"}");
    wait_until("the probe's request is counted", Duration::from_secs(60), || counted().is_some());

    reset_peak_rss(server.id());
    let rss_before = proc_status_kb(server.id(), "VmRSS:");
    let asked: Vec<u8> = (0..REQUESTS).flat_map(|_| frame_bytes(&request(106, &[]))).collect();
    let mut pipelining: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            c.write_all(&asked).unwrap();
            c
        })
        .collect();
    // Until every connection has stopped: nothing more is answered, no reply buffer grows any more.
    let answered = || metric_of(port, "rocketns_requests_total{code=\"106\",result=\"success\"}");
    let mut last = answered();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = answered();
        if now == last {
            break;
        }
        last = now;
    }
    let growth = (proc_status_kb(server.id(), "VmHWM:").saturating_sub(rss_before)) * 1024;
    assert!(growth < 6 * MIB, "peak memory grew by {} KiB with {CONNECTIONS} pipelining readers", growth / 1024);
    for c in &mut pipelining {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        for _ in 0..REQUESTS {
            assert_eq!(blocking_reply(c).expect("every reply comes").body, expected);
        }
    }
    eprintln!("pipelining: peak memory +{} KiB, {last} answered before the peers read", growth / 1024);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Eight connections each ask for the topic list twice in one write (20,000 topics: 280 kB a list) while
/// the replies pool has room for two lists, and read both replies. A connection writes a large reply
/// before its next request may wait for room: holding one unwritten while waiting for another, the eight
/// once waited for each other forever (the request that moves a connection to the work lane was answered
/// without that write).
#[test]
fn connections_waiting_for_reply_room_never_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "largeReplyBufferBytes=600000\n";
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, extra));
    let _broker = big_broker(&addr, 20_000);
    let twice: Vec<u8> = (0..2).flat_map(|_| frame_bytes(&request(206, &[]))).collect();
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (addr, twice) = (addr.clone(), twice.clone());
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(&addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                c.write_all(&twice).unwrap();
                (0..2).map(|_| blocking_reply(&mut c).expect("both replies come").body.len()).collect::<Vec<_>>()
            })
        })
        .collect();
    for r in readers {
        assert!(r.join().unwrap().iter().all(|len| *len > 250_000));
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
