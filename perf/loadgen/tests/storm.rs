//! Restart storms (`rocketns-loadgen storm`) against the real `rocketns` binary, at sizes that fit the test
//! command (the full-size runs, 1,000 x 1,000 and 50 x 100,000, and Java beside them, are perf/README.md's):
//! - 200 brokers of 1,000 topics each register at once on a fresh server, then again on the same server
//!   restarted over the route file the first storm left (warm): every broker answered SUCCESS at its first
//!   try, none closed, all routed;
//! - 10 brokers of the same 20,000 topics (3 MB frames, whole tables) at once: the same, and the last topic
//!   routed through all ten.
//!
//! The server has the smallest requests pool the config allows and a 1 s large-frame deadline, so frames
//! wait for room for longer than the deadline: only their bytes' arrival counts toward it (SECURITY.md).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::server_binary;
use rocketns::testing::wire::{free_port, wait_for_listener};

/// The smallest requests pool the config allows (28 MiB: one 16 MiB frame and what it builds) and a 1 s
/// large-frame deadline: the storms' frames wait for room, and a wait counted as lateness would close them.
/// Returns the config file and the address the server will listen on.
fn write_config(dir: &Path) -> (std::path::PathBuf, String) {
    let port = free_port();
    let config = dir.join("namesrv.properties");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort={port}\nkvConfigPath={}\nlargeFrameBufferBytes={}\nlargeFrameTimeoutMillis=1000\n",
        dir.join("kv.json").display(),
        28 << 20
    );
    std::fs::write(&config, text).unwrap();
    (config, format!("127.0.0.1:{port}"))
}

/// Starts the server, its log appended to `server.log` beside its config (a failed storm shows it).
fn start(config: &Path, addr: &str) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(server_log(config)).unwrap();
    let mut server = Command::new(server_binary())
        .arg("-c")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start rocketns");
    let listening = wait_for_listener(addr, std::time::Duration::from_secs(10));
    let exited = server.try_wait();
    if !listening || !matches!(exited, Ok(None)) {
        let log = std::fs::read_to_string(server_log(config)).unwrap_or_default();
        panic!("the server does not serve at {addr} (a listener: {listening}, exited: {exited:?}), its log:\n{log}");
    }
    server
}

fn server_log(config: &Path) -> std::path::PathBuf {
    config.with_file_name("server.log")
}

/// Starts a storm; with `hold`, its brokers stay connected after its summary until the server stops.
fn spawn_storm(addr: &str, server: &Child, args: &[&str], hold: bool) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rocketns-loadgen"))
        .args(["storm", "--addr", addr, "--server-pid", &server.id().to_string()])
        .args(["--quiet", "1", "--after", "1", "--lookups", "2", "--lookup-rate", "200"])
        .args(args)
        .args(hold.then_some("--hold"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run the storm")
}

/// Runs a storm to its end; its summary.
fn storm_to_end(addr: &str, server: &mut Child, config: &Path, args: &[&str]) -> serde_json::Value {
    let mut generator = spawn_storm(addr, server, args, false);
    let report = summary(&mut generator, server, config);
    generator.wait().unwrap();
    report
}

/// The storm's summary, once it is out; without one, the test fails with the server's log and state.
fn summary(generator: &mut Child, server: &mut Child, config: &Path) -> serde_json::Value {
    let mut out = std::io::BufReader::new(generator.stdout.take().unwrap());
    let mut text = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        if n == 0 {
            let log = std::fs::read_to_string(server_log(config)).unwrap_or_default();
            panic!("the storm ended without a summary:\n{text}\nthe server: {:?}, its log:\n{log}", server.try_wait());
        }
        text.push_str(&line);
        if line.starts_with('{') {
            eprint!("{text}");
            return serde_json::from_str(&line).unwrap();
        }
    }
}

fn assert_nobody_refused(report: &serde_json::Value, brokers: u64) {
    assert_eq!(report["registered"], brokers, "every broker registered at its first try: {report}");
    assert_eq!((&report["error_codes"], &report["closed"], &report["unanswered"]), (&0.into(), &0.into(), &0.into()));
    assert_eq!(report["routed"], brokers, "every broker routed after the storm");
    assert_eq!(report["lookups_failed"], 0);
    assert!(report["lookups_storm"]["n"].as_u64().unwrap() > 0, "lookups answered during the storm");
}

#[test]
fn a_restart_storm_refuses_no_one_cold_or_warm() {
    let dir = tempfile::tempdir().unwrap();
    let (config, addr) = write_config(dir.path());
    let args = ["--brokers", "200", "--topics", "1000", "--label", "cold"];

    let mut server = start(&config, &addr);
    let mut held = spawn_storm(&addr, &server, &args, true);
    let cold = summary(&mut held, &mut server, &config);
    assert_nobody_refused(&cold, 200);
    assert_eq!(cold["routed_before"], 0, "a fresh server knows no broker");
    // Stopped with its brokers connected, the server saves them all; restarted, it routes them at once.
    let stopped = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(stopped.success());
    server.wait().unwrap();
    held.wait().unwrap();

    let mut server = start(&config, &addr);
    let warm = storm_to_end(&addr, &mut server, &config, &args);
    assert_eq!(warm["routed_before"], 200, "restarted over its route file, the server routes every broker at once");
    assert_nobody_refused(&warm, 200);
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn brokers_of_one_shared_table_all_register_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (config, addr) = write_config(dir.path());
    let mut server = start(&config, &addr);
    let report =
        storm_to_end(&addr, &mut server, &config, &["--brokers", "10", "--topics", "20000", "--shared-topics"]);
    assert_nobody_refused(&report, 10);
    assert!(report["frame_bytes"].as_u64().unwrap() > 10 * 2_000_000, "whole tables in one frame each");
    server.kill().unwrap();
    server.wait().unwrap();
}
