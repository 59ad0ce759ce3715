//! The hostile fleet (`rocketns-loadgen hostile`) against the real `rocketns` binary, at a size that fits the
//! test command: thirty connections of each of its twelve kinds at once for 15 s (the 905 notifier and the
//! HTTP port on, so that every kind has something to hit), and 1,100 trickling HTTP connections: more
//! descriptors than the process, limited to 1,024 files, has. Meanwhile four real brokers (one of 20,000
//! topics) re-register every 5 s and lookups are answered, on settled connections and each on a new one. The
//! server's peak memory stays under the bound SECURITY.md documents, every real broker is still routed at
//! the end, no lookup failed, every new connection was answered, a health probe on the HTTP port never
//! failed for 15 s in a row, the log stayed within its rate and quoted no long address whole, and the
//! server still serves. The full-size runs (1,050 connections, 100,000
//! topics, rocketns and the Java NameServer) are perf/README.md's.

mod common;

use std::process::{Command, Stdio};

use common::{server_binary, wait_for};
use rocketns::testing::wire::free_port;

/// What the fleet's `long-address` kind pads its addresses with (perf/loadgen/src/hostile_ports.rs).
fn rocketns_loadgen_padding() -> &'static str {
    "the-whole-address-was-quoted-"
}

#[test]
fn the_hostile_fleet_is_held_to_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics_port) = (free_port(), free_port());
    let config = dir.path().join("namesrv.properties");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort={port}\nmetricsPort={metrics_port}\nkvConfigPath={}\nnotifyMinBrokerIdChanged=true\nserverMaxConnections=500\n",
        dir.path().join("kvConfig.json").display()
    );
    std::fs::write(&config, text).unwrap();
    // The process may open 1,024 files and serves 500 remoting connections, as issue 44's probe ran it (the
    // shipped unit's 65,536 and 50,000 at a smaller scale). The fleet tries to hold 1,160 HTTP connections,
    // 270 remoting ones and the notifier's 16 sends to its blackhole, more than the 1,024 together (issue
    // 44's 1,128 trickling HTTP connections took every descriptor); lookups on new connections must still
    // be answered and no accept fail.
    let mut server = Command::new("sh")
        .args(["-c", "ulimit -n 1024 && exec \"$0\" -c \"$1\""])
        .arg(server_binary())
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap())
        .spawn()
        .expect("start rocketns");
    let started = std::time::Instant::now();
    let addr = format!("127.0.0.1:{port}");
    wait_for(&addr);
    let out = Command::new(env!("CARGO_BIN_EXE_rocketns-loadgen"))
        .args(["hostile", "--addr", &addr, "--server-pid", &server.id().to_string()])
        .args(["--metrics-port", &metrics_port.to_string(), "--per-kind", "30", "--quiet", "3", "--duration", "15"])
        .args(["--real-topics", "20000", "--reregister-ms", "5000", "--lookups", "4", "--churn-rate", "200"])
        .args(["--per-kind-of", "http-trickle=1100"])
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
    let count = |kind: &str, what: &str| kinds[kind][what].as_u64().unwrap_or(0);
    for kind in ["churn", "admin", "long-address", "config-flood", "http-cluster"] {
        assert!(count(kind, "ok") > 0, "{kind} was answered: {kinds}");
    }
    assert!(count("http-trickle", "closed_by_server") > 0, "trickled headers closed: {kinds}");
    // The HTTP port's cap turned most of the 1,100 away (some more wait in its full accept queue until
    // their connect times out, counted as failed connects), and every remoting connection the fleet opened
    // got a descriptor (the fleet's own limit raised, so that the attempt is real).
    assert!(count("http-trickle", "refused") > 1_000, "the HTTP port's places refused: {kinds}");
    for kind in ["trickle", "zlib", "audit", "churn"] {
        assert_eq!(count(kind, "connect_failed"), 0, "{kind}'s connects failed: {kinds}");
    }
    let refused_metric = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("rocketns_http_connections_refused_total "))
        .and_then(|n| n.parse::<f64>().ok());
    assert!(refused_metric.is_some_and(|n| n > 1_000.0), "the server's count of refusals: {refused_metric:?}");
    assert_eq!(report["fresh_failed"], 0, "every new connection's lookup answered");
    // An orchestrator's health probe from an address of its own is answered while the HTTP kinds hold
    // every place they can, never failing for 15 s in a row (Kubernetes restarts a container after 3
    // failures 10 s apart, 20 s at least). Before the places were shared fairly, 60 of 61 probes failed,
    // for the whole attack; now those that fail wait in the port's full accept queue (SYNs retried after 1
    // and 3 s) while 1,100 connections flood it: 1.0 to 4.0 s in a row here.
    assert!(report["healthz"]["n"].as_u64().unwrap() > 0, "/healthz answered under the attack");
    let failing = report["healthz_failing_ms"].as_u64().unwrap();
    assert!(failing < 15_000, "/healthz failed for {failing} ms in a row ({} in all)", report["healthz_failed"]);
    assert!(report["fresh_attack"]["n"].as_u64().unwrap() > 0, "lookups on new connections under the attack");

    // The log: within its rate (SECURITY.md: 200 lines a second, 2,000 at once), and no address quoted whole.
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    if std::env::var_os("HOSTILE_LOG").is_some() {
        eprintln!("{log}");
    }
    let allowed = 2_000 + 200 * started.elapsed().as_secs() as usize;
    assert!(log.lines().count() <= allowed, "{} log lines in {:?}", log.lines().count(), started.elapsed());
    let whole = rocketns_loadgen_padding().repeat(5);
    assert!(
        !log.contains(&whole),
        "a long address quoted whole: {}",
        log.lines().find(|l| l.contains(&whole)).unwrap()
    );
    assert!(log.lines().all(|l| l.len() <= 16 * 1024), "a log line over 16 KiB");
    // Every accept found a descriptor: the others' caps left remoting's reserve alone.
    assert!(!log.contains("accept failed"), "{}", log.lines().find(|l| l.contains("accept failed")).unwrap());
    assert!(server.try_wait().unwrap().is_none(), "the server still runs");
    let probe = std::net::TcpStream::connect(&addr).expect("the server still serves");
    probe.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
}
