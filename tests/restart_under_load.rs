//! Warm restart of the real binary under lookup load: a client that keeps asking for a live topic while the
//! NameServer is stopped (SIGTERM) and started again never gets TOPIC_NOT_EXIST, although the broker does
//! not register again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Broker, blocking_request, dv, register_request, route_request, spawn_binary};

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    not_exist: AtomicU64,
    go_away: AtomicU64,
    other: AtomicU64,
}

fn lookups(addr: String, stop: Arc<AtomicBool>, counts: Arc<Counts>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = std::net::TcpStream::connect(&addr) else {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        while !stop.load(Ordering::Relaxed) {
            let Some(reply) = blocking_request(&mut stream, &route_request("TopicA", 479)) else { break };
            let counter = match reply.code {
                0 => &counts.ok,
                17 => &counts.not_exist,
                1500 => &counts.go_away,
                _ => &counts.other,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn no_topic_not_exist_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::properties_file(dir.path(), common::free_port(), "");
    let (mut first, addr) = spawn_binary(&config);
    let mut broker = std::net::TcpStream::connect(&addr).unwrap();
    let b = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911");
    let reply =
        blocking_request(&mut broker, &register_request(&b, dv(1), &[("TopicA", 8, 6), ("TopicB", 8, 6)])).unwrap();
    assert_eq!(reply.code, 0);

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let load = {
        let (addr, stop, counts) = (addr.clone(), stop.clone(), counts.clone());
        std::thread::spawn(move || lookups(addr, stop, counts))
    };
    std::thread::sleep(Duration::from_millis(300));
    let before = counts.ok.load(Ordering::Relaxed);
    std::process::Command::new("kill").arg("-TERM").arg(first.id().to_string()).status().unwrap();
    assert!(first.wait().unwrap().success());
    drop(broker);
    let (mut second, _) = spawn_binary(&config);
    let restarted = counts.ok.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    second.kill().unwrap();
    second.wait().unwrap();

    let ok = counts.ok.load(Ordering::Relaxed);
    assert!(
        before > 0 && ok > restarted,
        "lookups succeeded before ({before}) and after ({}) the restart",
        ok - restarted
    );
    assert_eq!(counts.not_exist.load(Ordering::Relaxed), 0, "no TOPIC_NOT_EXIST for a live topic");
    assert_eq!(counts.other.load(Ordering::Relaxed), 0);
}
