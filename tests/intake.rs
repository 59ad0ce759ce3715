//! The intake (src/intake.rs) on the real binary: new connections are served where they were accepted until
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
