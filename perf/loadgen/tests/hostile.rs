//! The hostile fleet (`rocketns-loadgen hostile`) against the real `rocketns` binary, at a size that fits the
//! test command: twenty connections of each of its seven kinds at once for 15 s, while four real brokers
//! (one of 20,000 topics) re-register every 5 s and lookups are answered. The server's peak memory stays
//! under the bound SECURITY.md documents, every real broker is still routed at the end, no lookup failed,
//! and the server still serves. The full-size runs (1,050 connections, 100,000 topics, rocketns and the
//! Java NameServer) are perf/README.md's.

mod common;

use std::process::{Command, Stdio};

use common::{server_binary, wait_for};
use rocketns::testing::wire::free_port;

#[test]
fn the_hostile_fleet_is_held_to_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics_port) = (free_port(), free_port());
    let config = dir.path().join("namesrv.properties");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort={port}\nmetricsPort={metrics_port}\nkvConfigPath={}\n",
        dir.path().join("kvConfig.json").display()
    );
    std::fs::write(&config, text).unwrap();
    let mut server = Command::new(server_binary())
        .arg("-c")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rocketns");
    let addr = format!("127.0.0.1:{port}");
    wait_for(&addr);
    let out = Command::new(env!("CARGO_BIN_EXE_rocketns-loadgen"))
        .args(["hostile", "--addr", &addr, "--server-pid", &server.id().to_string()])
        .args(["--metrics-port", &metrics_port.to_string(), "--per-kind", "20", "--quiet", "3", "--duration", "15"])
        .args(["--real-topics", "20000", "--reregister-ms", "5000", "--lookups", "4", "--churn-rate", "200"])
        .output()
        .expect("run the fleet");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    eprintln!("{stdout}");
    let (peak, bound) = (report["peak_rss"].as_u64().unwrap(), report["bound"].as_u64().expect("a bound"));
    assert!(peak > 0 && peak <= bound, "peak RSS {peak} over the documented bound {bound}");
    assert_eq!(report["real_routed"], 4, "every real broker still routed");
    assert_eq!(report["lookups_failed"], 0);
    assert!(report["lookups_attack"]["n"].as_u64().unwrap() > 0, "lookups were answered under the attack");
    assert!(report["reregistrations"]["applied"].as_u64().unwrap() > 0, "real re-registrations were applied");
    // Each kind got what the budget allows: the trickles and slow readers closed, the bombs refused.
    let kinds = &report["kinds"];
    assert!(kinds["churn"]["ok"].as_u64().unwrap() > 0 && kinds["admin"]["ok"].as_u64().unwrap() > 0, "{kinds}");
    assert!(server.try_wait().unwrap().is_none(), "the server still runs");
    let probe = std::net::TcpStream::connect(&addr).expect("the server still serves");
    probe.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
}
