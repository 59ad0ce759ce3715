//! 10,000 idle connections to the real binary: lookups on another connection keep their throughput, and
//! the metrics count every connection.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{Broker, blocking_request, dv, register_request, route_request, spawn_binary};

const IDLE: usize = 10_000;

fn lookups_per_second(stream: &mut std::net::TcpStream) -> f64 {
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_millis(500) {
        let reply = blocking_request(stream, &route_request("TopicA", 479)).expect("answered");
        assert_eq!(reply.code, 0);
        n += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn metric(port: u16, name: &str) -> f64 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok())).unwrap_or(-1.0)
}

#[test]
fn ten_thousand_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_port = common::free_port();
    let config =
        common::properties_file(dir.path(), 0, &format!("serverSocketBacklog=4096\nmetricsPort={metrics_port}\n"));
    let (mut server, addr) = spawn_binary(&config);
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    let broker = Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    assert_eq!(
        blocking_request(&mut client, &register_request(&broker, dv(1), &[("TopicA", 8, 6), ("TopicB", 8, 6)]))
            .unwrap()
            .code,
        0
    );
    let before = lookups_per_second(&mut client);

    let idle: Vec<std::net::TcpStream> =
        (0..IDLE).map(|_| std::net::TcpStream::connect(&addr).expect("connect")).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(metrics_port, "rocketns_connections ") < (IDLE + 1) as f64 {
        assert!(Instant::now() < deadline, "the server did not accept all connections");
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = lookups_per_second(&mut client);
    drop(idle);
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(during >= 0.5 * before, "{during:.0} lookups/s with {IDLE} idle connections, {before:.0} without");
}
