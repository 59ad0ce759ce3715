//! The intake (src/net/intake.rs) on the real binary: new connections are served where they were accepted until
//! they settle, then move, socket and all, to the runtime that answers lookups. Made to fail once each by
//! having the move fail (the connection is closed: the pipelined lookups after the 16th are not answered)
//! and by never settling (`rocketns_connections_settled_total` stays 0).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

fn settled(port: u16) -> f64 {
    metric_in(&metrics_text(port), "rocketns_connections_settled_total").expect("the settled counter")
}

/// A client pipelines 200 lookups in one write: the first 16 are answered on the intake, the connection
/// moves with the rest half read (some in its buffer, some still in the socket), and every one is answered,
/// in order, with the route. Connections of one lookup each (churn) close before they settle.
#[test]
fn a_connection_settles_in_the_middle_of_pipelined_lookups_and_answers_every_one() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &format!("metricsPort={port}\n")));
    let mut broker = TcpStream::connect(&addr).unwrap();
    let registered =
        register_request(&Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), &[("T", 4, 6), ("U", 4, 6)]);
    let reply = blocking_request(&mut broker, &registered).expect("registered");
    assert_eq!(reply.code, 0, "{:?}", reply.remark);

    for _ in 0..20 {
        let mut once = TcpStream::connect(&addr).unwrap();
        assert_eq!(blocking_request(&mut once, &route_request("T", 479)).expect("answered").code, 0);
    }
    assert_eq!(settled(port), 0.0, "a connection of one lookup does not settle, nor does the broker's");

    let mut client = TcpStream::connect(&addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let asked: Vec<u8> = (0..200)
        .flat_map(|i| {
            let mut lookup = route_request("T", 479);
            lookup.opaque = 1000 + i;
            frame_bytes(&lookup)
        })
        .collect();
    client.write_all(&asked).unwrap();
    for i in 0..200 {
        let reply = blocking_reply(&mut client).unwrap_or_else(|| panic!("lookup {i} answered"));
        assert_eq!((reply.opaque, reply.code), (1000 + i, 0), "lookup {i}");
        let route: serde_json::Value = serde_json::from_slice(&reply.body).expect("route JSON");
        assert_eq!(route["brokerDatas"][0]["brokerName"], "broker-a", "lookup {i}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while settled(port) < 1.0 {
        assert!(Instant::now() < deadline, "the pipelining connection never settled");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(settled(port), 1.0);
    assert_eq!(blocking_request(&mut client, &route_request("T", 479)).expect("answered after it moved").code, 0);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The connections each lookup thread serves, by the metrics port (src/net/cores.rs).
fn per_core(port: u16, cores: usize) -> Vec<f64> {
    let text = metrics_text(port);
    (0..cores)
        .map(|core| {
            metric_in(&text, &format!("rocketns_lookup_core_connections{{core=\"{core}\"}}")).expect("a core's gauge")
        })
        .collect()
}

/// Settles a fresh connection: 17 lookups answered (it moves after the 16th, at its next request).
fn settle(addr: &str) -> TcpStream {
    let mut client = TcpStream::connect(addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for i in 0..=16 {
        assert_eq!(blocking_request(&mut client, &route_request("T", i)).expect("answered").code, 0);
    }
    client
}

/// Waits until `check` holds of the per-core gauges.
fn until(port: u16, cores: usize, what: &str, check: impl Fn(&[f64]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check(&per_core(port, cores)) {
        assert!(Instant::now() < deadline, "{what}: {:?}", per_core(port, cores));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The binary answers settled connections on a single-threaded runtime a core, each connection on the one
/// with the fewest when it settled: twice as many connections as cores settle two a core; one closes and
/// the next to settle takes its core. Made to fail once each by always choosing the first core (4 and 0 on
/// two cores) and by not counting a connection out when it closes (the fifth went to core 0: 3 and 2).
#[test]
fn settled_connections_are_spread_over_a_runtime_a_core() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut server, addr) = spawn_binary(&properties_file(dir.path(), 0, &format!("metricsPort={port}\n")));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lookup_threads = std::fs::read_dir(format!("/proc/{}/task", server.id()))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("rocketns-lookup"))
        .count();
    assert_eq!(lookup_threads, cores, "a lookup thread a core");
    let mut broker = TcpStream::connect(&addr).unwrap();
    // Two topics: Java refuses a broker's first registration of one (an incremental one).
    let registered =
        register_request(&Broker::new("c", "broker-a", 0, "10.0.0.1:10911"), dv(1), &[("T", 4, 6), ("U", 4, 6)]);
    let reply = blocking_request(&mut broker, &registered).expect("registered");
    assert_eq!(reply.code, 0, "{:?}", reply.remark);

    let mut clients: Vec<TcpStream> = (0..2 * cores).map(|_| settle(&addr)).collect();
    until(port, cores, "two connections a core", |live| live.iter().all(|&n| n == 2.0));
    drop(clients.pop());
    until(port, cores, "one connection counted out", |live| live.iter().sum::<f64>() == (2 * cores - 1) as f64);
    clients.push(settle(&addr));
    until(port, cores, "the new one on the core left with one", |live| live.iter().all(|&n| n == 2.0));
    for client in &mut clients {
        assert_eq!(blocking_request(client, &route_request("T", 99)).expect("answered where it settled").code, 0);
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
