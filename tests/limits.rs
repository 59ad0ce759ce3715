//! Resource limits and faults: a connection cap, a client that never reads, a broker whose connection is
//! reset, writes during heavy lookup load, and the longest timeouts. Large frames and the memory budget:
//! tests/large_frames.rs and tests/memory_budget.rs.

mod common;

use std::time::Duration;

use common::*;
use rocketns::remoting::SerializeType;
use tokio::io::AsyncWriteExt;

const TOPICS: &[(&str, i32, i32)] = &[("TopicA", 8, 6), ("TopicB", 8, 6)];

#[tokio::test]
async fn connections_beyond_the_limit_are_closed() {
    let mut config = test_config();
    config.server_max_connections = 3;
    let server = start_with(config).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut c = Client::connect(server.addr).await;
        assert_eq!(c.request(request(106, &[])).await.code, 0);
        open.push(c);
    }
    let mut extra = Client::connect(server.addr).await;
    extra.assert_closed_without_reply(Duration::from_secs(5)).await;
    for c in &mut open {
        assert_eq!(c.request(request(106, &[])).await.code, 0, "the others are unaffected");
    }
    drop(open.pop());
    // The slot comes back once the server has seen the close: until then a new connection is closed again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = Client::connect(server.addr).await;
        let opaque = again.send(request(106, &[]), SerializeType::Json).await;
        if let Some(reply) = again.read_response().await {
            assert_eq!((reply.opaque, reply.code), (opaque, 0), "room again after one closed");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no room after one connection closed");
    }
}

/// A client that sends without ever reading stops being read from once its replies cannot be written: the
/// server answers only what the socket buffers hold (a few megabytes of replies), not every request sent,
/// so its memory for that client stays bounded; everyone else is served as usual. Without the backpressure
/// the server would read and answer all 200,000 requests, holding their replies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_does_not_hurt_others() {
    const SENT: usize = 200_000;
    let mut config = test_config();
    let metrics_port = free_port();
    config.metrics_port = metrics_port;
    let server = start_with(config).await;
    let mut good = Client::connect(server.addr).await;
    register(&mut good, &Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), TOPICS).await;
    let answered = move || {
        let text = metrics_text(metrics_port);
        metric_in(&text, "rocketns_requests_total{code=\"105\",result=\"success\"}").unwrap_or(0.0) as usize
    };
    let mut all = bytes::BytesMut::new();
    for _ in 0..SENT {
        route_request("TopicA", 479).encode(SerializeType::Json, &mut all);
    }
    let mut greedy = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let writer = tokio::spawn(async move {
        // Never reads: once both socket buffers are full of replies, the server stops reading, and then
        // these writes stop completing too.
        let _ = greedy.write_all(&all).await;
        greedy
    });
    // Wait until the server's count of answered lookups stops moving (polled, bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (mut last, mut still) = (usize::MAX, 0);
    while still < 10 {
        assert!(std::time::Instant::now() < deadline, "the count never settled");
        let now = tokio::task::spawn_blocking(answered).await.unwrap();
        (still, last) = if now == last { (still + 1, now) } else { (0, now) };
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(last < SENT / 2, "the server answered {last} of {SENT} requests from a client that reads none");
    assert!(!writer.is_finished(), "the client's writes are held back");
    for _ in 0..100 {
        assert!(route(&mut good, "TopicA").await.is_some());
    }
    writer.abort();
}

/// A broker process killed: its connection is reset and its routes disappear within a second.
#[tokio::test]
async fn reset_broker_connection_removes_routes_within_a_second() {
    let server = start().await;
    let mut observer = Client::connect(server.addr).await;
    let mut broker = Client::connect(server.addr).await;
    register(&mut broker, &Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), TOPICS).await;
    broker.stream.set_zero_linger().unwrap();
    drop(broker);
    let started = std::time::Instant::now();
    wait_route_gone(&mut observer, "TopicA").await;
    assert!(started.elapsed() < Duration::from_secs(1), "gone in {:?}", started.elapsed());
}

/// Registrations, topic registrations and KV writes made during heavy lookup load are all there afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_during_lookup_load_lose_nothing() {
    let server = start().await;
    let mut admin = Client::connect(server.addr).await;
    register(&mut admin, &Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), TOPICS).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (addr, stop) = (server.addr, stop.clone());
        load.push(tokio::spawn(async move {
            let mut c = Client::connect(addr).await;
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(route(&mut c, "TopicA").await.is_some(), "a live topic is never missing");
                n += 1;
            }
            n
        }));
    }
    let broker = Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    let mut topics: Vec<String> = TOPICS.iter().map(|t| t.0.to_string()).collect();
    for i in 0..50 {
        topics.push(format!("added-{i}"));
        let list: Vec<(&str, i32, i32)> = topics.iter().map(|t| (t.as_str(), 8, 6)).collect();
        register(&mut admin, &broker, dv(2 + i), &list).await;
        let resp = admin.request(kv_put("load", &format!("k{i}"), &format!("v{i}"))).await;
        assert_eq!(resp.code, 0);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut lookups = 0;
    for l in load {
        lookups += l.await.unwrap();
    }
    assert!(lookups > 100, "{lookups} lookups during the writes");
    for i in 0..50 {
        assert!(route(&mut admin, &format!("added-{i}")).await.is_some(), "added-{i}");
        let resp = admin.request(kv_get("load", &format!("k{i}"))).await;
        assert_eq!(resp.ext("value"), Some(format!("v{i}").as_str()));
    }
}

/// The longest idle time and large-frame time a config can hold (a Java long's largest value): an instant
/// that far ahead cannot be computed (it panicked the connection's task on `Instant +`), so both are
/// capped at a century. A lookup and a large frame are answered, and the server lives on.
#[test]
fn the_longest_timeouts_a_config_can_hold_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let max = i64::MAX;
    let extra = format!("serverChannelMaxIdleTimeSeconds={max}\nlargeFrameTimeoutMillis={max}\n");
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &extra));
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    assert_eq!(blocking_request(&mut c, &route_request("T", 479)).expect("answered").code, 17);
    let names: Vec<String> = (0..1_000).map(|i| format!("topic-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 6)).collect();
    let large = register_request(&Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), &topics);
    assert_eq!(blocking_request(&mut c, &large).expect("answered").code, 0);
    assert_eq!(blocking_request(&mut c, &route_request("topic-999", 479)).expect("answered").code, 0);
    assert!(server.try_wait().unwrap().is_none(), "the server lives on");
    server.kill().unwrap();
    server.wait().unwrap();
}
