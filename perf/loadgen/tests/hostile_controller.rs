//! The controller fleet (`rocketns-loadgen controller-fleet`) against three real `rocketns` processes with
//! `enableControllerInNamesrv`, at a size that fits the test command, twice for 16 s: Raft frames from
//! strangers and from a peer's address with absurd terms and snapshot offsets, heartbeats in a live master's
//! name, made-up brokers with a day's heartbeat timeout, 700,000-name GET_SYNC_STATE_DATA and byte-heavy
//! broker ids; then the same with 150 idle connections from each of 8 strangers' addresses to each node;
//! all the while a real broker group has its master's connections closed every 4 s. Every failover works,
//! every node names a leader at the end, no Raft frame of the fleet is taken, each kind reaches its bound,
//! each node's peak memory stays under the bound SECURITY.md documents, and every process still runs.

mod common;

use std::process::{Child, Command, Stdio};

use common::server_binary;

struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn the_controller_fleet_is_held_to_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    // Nine ports held at once while they are chosen, so that no two are the same.
    let held: Vec<std::net::TcpListener> =
        (0..9).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let port = |i: usize| held[i].local_addr().unwrap().port();
    let ports: Vec<(u16, u16, u16)> = (0..3).map(|i| (port(3 * i), port(3 * i + 1), port(3 * i + 2))).collect();
    drop(held);
    let peers: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("n{i}-127.0.0.1:{}", p.1)).collect();
    let mut nodes = Nodes(Vec::new());
    // Signed Raft frames between the nodes, as a group of several must have: the fleet's own are refused
    // all the same (16), before their bodies are read.
    let secret = dir.path().join("peer-secret");
    std::fs::write(&secret, "the fleet test's peer secret\n").unwrap();
    for (i, (port, controller_port, metrics_port)) in ports.iter().enumerate() {
        let config = dir.path().join(format!("n{i}.properties"));
        let text = format!(
            "bindAddress=127.0.0.1\nlistenPort={port}\nmetricsPort={metrics_port}\nkvConfigPath={}\nenableControllerInNamesrv=true\n\
             controllerDLegerGroup=g\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\ncontrollerStorePath={}\n\
             controllerPeerSecretFile={}\n",
            dir.path().join(format!("kv-{i}.json")).display(),
            peers.join(";"),
            dir.path().join(format!("store-{i}")).display(),
            secret.display()
        );
        std::fs::write(&config, text).unwrap();
        let log = std::fs::File::create(dir.path().join(format!("n{i}.log"))).unwrap();
        let child = Command::new(server_binary())
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start rocketns");
        nodes.0.push(child);
        let listening = rocketns::testing::wire::wait_for_listener(
            &format!("127.0.0.1:{controller_port}"),
            std::time::Duration::from_secs(10),
        );
        let log = std::fs::read_to_string(dir.path().join(format!("n{i}.log"))).unwrap_or_default();
        assert!(listening, "node {i} does not listen: {log}");
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{}", p.1)).collect();
    let pids: Vec<String> = nodes.0.iter().map(|c| c.id().to_string()).collect();
    let metrics: Vec<String> = ports.iter().map(|p| p.2.to_string()).collect();
    let fleet = |kinds: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rocketns-loadgen"))
            .args(["controller-fleet", "--addrs", &addrs.join(";"), "--server-pids", &pids.join(",")])
            .args(["--metrics-ports", &metrics.join(","), "--duration", "16", "--idle", "150", "--sources", "8"])
            .args(["--failover-ms", "4000", "--kinds", kinds])
            .output()
            .expect("run the fleet");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        eprintln!("{kinds}:\n{stdout}");
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert!(report["failovers"].as_u64().unwrap() >= 2, "{report}");
        assert_eq!(report["failovers_failed"], 0, "{report}");
        assert_eq!(report["nodes_naming_a_leader"], 3, "{report}");
        for (peak, bound) in report["peak_rss"].as_array().unwrap().iter().zip(report["bound"].as_array().unwrap()) {
            let (peak, bound) = (peak.as_u64().unwrap(), bound.as_u64().unwrap());
            assert!(peak > 0 && peak <= bound, "peak RSS {peak} over the documented bound {bound}");
        }
        let kinds = report["kinds"].as_object().unwrap().clone();
        let taken: Vec<&String> =
            kinds.keys().filter(|k| k.starts_with("raft: code") && *k != "raft: code 16").collect();
        assert!(taken.is_empty(), "a Raft frame answered otherwise than NO_PERMISSION: {kinds:?}");
        kinds
    };
    // Without the idle kind, every other kind reaches the node and its own bound.
    let kinds = fleet("raft,takeover,forever,names,heavy");
    for reached in ["raft: code 16", "forever: code 2005", "names: code 1", "heavy: code 0", "takeover: code 0"] {
        assert!(kinds.contains_key(reached), "{reached}: {kinds:?}");
    }
    // With it: 8 addresses fill the places strangers may take (the rest are refused as they come), and the
    // real group, from the peers' address, still fails over.
    let kinds = fleet("raft,idle,takeover,forever,names,heavy");
    for reached in ["idle: refused", "idle: closed by the node after a while"] {
        assert!(kinds.contains_key(reached), "{reached}: {kinds:?}");
    }
    for (i, child) in nodes.0.iter_mut().enumerate() {
        assert!(child.try_wait().unwrap().is_none(), "node {i} still runs");
    }
}
