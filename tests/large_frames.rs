//! Large frames on the real binary, with its defaults: brokers that send their whole topic table in one
//! REGISTER_BROKER (a default Java broker does: `enableSplitRegistration=false`) register at first try over a
//! fresh connection. Floods of large frames and the memory budget: tests/memory_budget.rs.

mod common;

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::{Broker, blocking_request, dv, register_request, route_request, spawn_binary};

fn broker_count(route: &rocketns::remoting::RemotingCommand) -> usize {
    assert_eq!(route.code, 0, "{:?}", route.remark);
    let json: serde_json::Value = serde_json::from_slice(&route.body).expect("route JSON");
    json["brokerDatas"].as_array().expect("brokerDatas").len()
}

/// Four brokers of 100,000 topics each send their whole table in one frame of about 15.5 MB, all at once,
/// each over a fresh connection; every registration succeeds at first try, though only two of them fit in
/// the requests pool at a time. The others wait for room, unread, however long the debug build takes to
/// decode and apply the ones before: waiting does not count toward `largeFrameTimeoutMillis`, only the
/// bytes' arrival once there is room.
#[test]
fn four_brokers_register_whole_tables_of_100k_topics_at_first_try() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = spawn_binary(&common::properties_file(dir.path(), 0, ""));
    let names: Arc<Vec<String>> = Arc::new((0..100_000).map(|i| format!("topic-{i}")).collect());
    let brokers: Vec<_> = (0..4)
        .map(|b| {
            let (addr, names) = (addr.clone(), names.clone());
            std::thread::spawn(move || {
                let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 6)).collect();
                let (name, broker_addr) = (format!("broker-{b}"), format!("10.0.{b}.1:10911"));
                let request = register_request(&Broker::new("c", &name, 0, &broker_addr), dv(1), &topics);
                assert!(request.body.len() > 15_000_000, "{} bytes", request.body.len());
                let mut stream = TcpStream::connect(&addr).unwrap();
                // A stalled server fails the test instead of hanging it.
                stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                let reply = blocking_request(&mut stream, &request).expect("a reply, not a closed connection");
                assert_eq!(reply.code, 0, "{name}: {:?}", reply.remark);
                // The connection stays open: closing it would remove the broker.
                stream
            })
        })
        .collect();
    let _open: Vec<TcpStream> = brokers.into_iter().map(|t| t.join().expect("registered")).collect();
    let mut client = TcpStream::connect(&addr).unwrap();
    for topic in ["topic-0", "topic-54321", "topic-99999"] {
        let reply = blocking_request(&mut client, &route_request(topic, 479)).expect("answered");
        assert_eq!(broker_count(&reply), 4, "{topic} is routed to the four brokers");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A route over the 16 KiB that replies are copied up to (a topic on 120 brokers, about 24 KB) is answered
/// whole, over a settled connection (the lookup threads' path, `processor::dispatch_lookup`, hands it to
/// the general one for room of its own): every broker in it, and the next small lookup after it. Made to
/// fail by answering such a lookup as done without queueing it (no reply came).
#[test]
fn a_route_over_the_copy_limit_is_answered_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = spawn_binary(&common::properties_file(dir.path(), 0, ""));
    let mut broker = TcpStream::connect(&addr).unwrap();
    for b in 0..120 {
        let (name, broker_addr) = (format!("broker-{b}"), format!("10.0.{b}.1:10911"));
        let topics: &[(&str, i32, i32)] =
            if b == 0 { &[("Small", 4, 6), ("Wide", 4, 6)] } else { &[("Wide", 4, 6), ("Other", 4, 6)] };
        let request = register_request(&Broker::new("c", &name, 0, &broker_addr), dv(1), topics);
        let reply = blocking_request(&mut broker, &request).expect("registered");
        assert_eq!(reply.code, 0, "{:?}", reply.remark);
    }
    let mut client = TcpStream::connect(&addr).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // Past the intake's 16 requests: the connection has settled by the last rounds.
    for round in 0..20 {
        let wide = blocking_request(&mut client, &route_request("Wide", 479)).expect("the wide route answered");
        assert!(wide.body.len() > 16 * 1024, "round {round}: {} bytes", wide.body.len());
        assert_eq!(broker_count(&wide), 120, "round {round}");
        let small = blocking_request(&mut client, &route_request("Small", 479)).expect("the small route answered");
        assert_eq!(broker_count(&small), 1, "round {round}");
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
