//! 10,000 idle connections to the real binary: every one is accepted and counted, and lookups on another
//! connection go on being answered. (How fast they are then is a benchmark's question, not a test's: a
//! loaded machine would make any throughput ratio flaky.)

mod common;

use std::time::{Duration, Instant};

use common::{Broker, blocking_request, dv, register_request, route_request, spawn_binary};

const IDLE: usize = 10_000;
const LOOKUPS: usize = 1_000;

/// `LOOKUPS` lookups, each answered with the route; returns the slowest.
fn lookups(stream: &mut std::net::TcpStream) -> Duration {
    let mut slowest = Duration::ZERO;
    for _ in 0..LOOKUPS {
        let asked = Instant::now();
        let reply = blocking_request(stream, &route_request("TopicA", 479)).expect("answered");
        assert_eq!(reply.code, 0);
        slowest = slowest.max(asked.elapsed());
    }
    slowest
}

#[test]
fn ten_thousand_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_port = common::free_port();
    let config =
        common::properties_file(dir.path(), 0, &format!("serverSocketBacklog=4096\nmetricsPort={metrics_port}\n"));
    let (mut server, addr) = spawn_binary(&config);
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    // A stalled server fails the test instead of hanging it.
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let broker = Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    assert_eq!(
        blocking_request(&mut client, &register_request(&broker, dv(1), &[("TopicA", 8, 6), ("TopicB", 8, 6)]))
            .unwrap()
            .code,
        0
    );

    let idle: Vec<std::net::TcpStream> =
        (0..IDLE).map(|_| std::net::TcpStream::connect(&addr).expect("connect")).collect();
    // Bounded so that a server that never accepts them all fails instead of hanging; generous for a loaded
    // machine.
    let deadline = Instant::now() + Duration::from_secs(120);
    while common::metric(metrics_port, "rocketns_connections") < Some((IDLE + 1) as f64) {
        assert!(Instant::now() < deadline, "the server did not accept all connections");
        std::thread::sleep(Duration::from_millis(50));
    }
    let slowest = lookups(&mut client);
    eprintln!("{LOOKUPS} lookups with {IDLE} idle connections open, the slowest in {slowest:?}");
    assert_eq!(common::metric(metrics_port, "rocketns_connections"), Some((IDLE + 1) as f64), "all still open");
    drop(idle);
    server.kill().unwrap();
    server.wait().unwrap();
}
