//! A few seconds of the load generator in every mode, so that the performance tooling cannot rot: lookups
//! with Zipf topics, misses, split and compressed registrations and registration churn against the real
//! `rocketns` binary, the echo limit, and the start-up probe. The real measurements are perf/compare.sh's (perf/README.md).

mod common;

use std::process::{Command, Stdio};

use common::{server_binary, wait_for};
use rocketns::testing::wire::{free_port, properties_file};

fn loadgen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocketns-loadgen"))
}

/// Runs `loadgen run` and returns its JSON summary, asserting that every reply was verified.
fn run(addr: &str, extra: &[&str]) -> serde_json::Value {
    let topics: &[&str] = if extra.contains(&"--topics") { &[] } else { &["--topics", "50"] };
    let out = loadgen()
        .args(["run", "--addr", addr, "--brokers", "2", "--duration", "1", "--warmup", "0"])
        .args(topics)
        .args(extra)
        .output()
        .expect("run the load generator");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["errors"], 0, "{summary}");
    assert!(summary["ok"].as_u64().unwrap() > 100, "{summary}");
    summary
}

#[test]
fn load_generator_against_rocketns_and_echo() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Command::new(server_binary())
        .arg("-c")
        .arg(properties_file(dir.path(), port, ""))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start rocketns");
    wait_for(&addr);
    run(&addr, &["--zipf", "--miss-ratio", "0.1"]);
    // A broker's other registration shapes: split into parts (`enableSplitRegistration`), and zlib bodies
    // (`compressedRegister`).
    run(&addr, &["--split", "20", "--compressed"]);
    let churn = run(&addr, &["--churn", "bump", "--churn-interval-ms", "20", "--slaves"]);
    assert!(churn["registrations"].as_u64().unwrap() > 0, "{churn}");
    // Every client family's header, with opaques that pass ten digits and wrap to negative within the run.
    for header in ["java", "go", "rust", "cpp", "node", "binary"] {
        let summary = run(&addr, &["--header", header, "--opaque-start", "2147483600"]);
        assert_eq!(summary["header"], header);
    }
    // A start-up storm: every request of every new connection answered.
    let storm = run(&addr, &["--storm", "200", "--storm-requests", "5", "--miss-ratio", "0.1"]);
    assert_eq!(storm["ok"], 1000, "{storm}");
    server.kill().unwrap();
    server.wait().unwrap();

    // Both echoes, the plain one and the rocketns-shaped one; their replies are verified like rocketns's,
    // whole-table registrations of 5,000 topics (frames larger than a read) included.
    for shape in [&[][..], &["--rocketns-shaped"][..]] {
        let port = free_port().to_string();
        let echo_addr = format!("127.0.0.1:{port}");
        let mut echo = loadgen()
            .args(["echo", "--listen", &echo_addr, "--brokers", "2"])
            .args(shape)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&echo_addr);
        run(&echo_addr, &[]);
        run(&echo_addr, &["--topics", "5000"]);
        echo.kill().unwrap();
        echo.wait().unwrap();
    }

    let port = free_port();
    let config = properties_file(dir.path(), port, "");
    let out = loadgen()
        .args(["startup", "--addr", &format!("127.0.0.1:{port}"), "--"])
        .arg(server_binary())
        .arg("-c")
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success());
    let startup: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert!(startup["startup_ms"].as_f64().unwrap() > 0.0);
}
