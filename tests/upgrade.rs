//! Zero-downtime upgrade with the real binary: `rocketns --take-over` takes the listening socket from the
//! running process, which exits; routes and KV carry over. tests/ops/upgrade.sh runs a client fleet across
//! two upgrades in a row.

mod common;

use std::time::Duration;

use common::*;

fn take_over(config_file: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rocketns"));
    command.arg("-c").arg(config_file).arg("--take-over");
    command
}

#[test]
fn a_new_process_takes_the_port_routes_and_kv_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let socket = dir.path().join("upgrade.sock");
    let file = properties_file(dir.path(), port, &format!("upgradeSocketPath={}\n", socket.display()));
    let (mut old, addr, _) = spawn_binary_with_logs(&file);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&socket).expect("the upgrade socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "only its owner may take the port over");
    let mut broker = std::net::TcpStream::connect(&addr).expect("connect");
    let b = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911");
    let registration = register_request(&b, dv(1), &[("T", 8, 6), ("U", 8, 6)]);
    assert_eq!(blocking_request(&mut broker, &registration).map(|r| r.code), Some(0));
    let put = kv_put("ns", "k", "v");
    assert_eq!(blocking_request(&mut broker, &put).map(|r| r.code), Some(0));

    let (mut new, new_addr, _) = spawn_command_with_logs(take_over(&file));
    assert_eq!(new_addr, addr, "the same socket");
    let status = exited(&mut old, Duration::from_secs(30)).expect("the old process exits after draining");
    assert!(status.success(), "{status}");
    // The broker's connection was the old process's: it is gone, and a new one reaches the new process,
    // which serves the route at once and has the KV entry.
    let mut client = std::net::TcpStream::connect(&addr).expect("connect to the new process");
    let route = blocking_request(&mut client, &route_request("T", 479)).expect("a reply");
    assert_eq!(route.code, 0, "the route carried over: {:?}", route.remark);
    let get = kv_get("ns", "k");
    let kv = blocking_request(&mut client, &get).expect("a reply");
    assert_eq!((kv.code, kv.ext("value")), (0, Some("v")));
    assert_eq!(blocking_request(&mut client, &registration).map(|r| r.code), Some(0), "brokers register anew");

    // And again, from the new process to a third.
    let _third = spawn_command_with_logs(take_over(&file)).0;
    assert!(exited(&mut new, Duration::from_secs(30)).expect("the second exits").success());
    let mut client = std::net::TcpStream::connect(&addr).expect("connect to the third process");
    assert_eq!(blocking_request(&mut client, &route_request("T", 479)).map(|r| r.code), Some(0));
}

/// A new process that gets the sockets but cannot start (here its KV file is not JSON) never says it
/// serves: the old one keeps serving, takes changes again, and can still be taken over.
#[test]
fn a_failed_take_over_leaves_the_old_process_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("upgrade.sock");
    let file = properties_file(dir.path(), free_port(), &format!("upgradeSocketPath={}\n", socket.display()));
    let (mut old, addr, _) = spawn_binary_with_logs(&file);
    let broken = tempfile::tempdir().expect("temp dir");
    std::fs::write(broken.path().join("kvConfig.json"), "not json").expect("write");
    let broken_file = properties_file(broken.path(), 0, &format!("upgradeSocketPath={}\n", socket.display()));
    let out = take_over(&broken_file).output().expect("run");
    assert!(!out.status.success(), "the new process fails: {}", String::from_utf8_lossy(&out.stderr));
    let mut client = std::net::TcpStream::connect(&addr).expect("connect");
    let put = kv_put("ns", "k", "v");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // The old one notices the new one's socket close, then takes changes again.
    loop {
        let code = blocking_request(&mut client, &put).expect("the old process answers").code;
        if code == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "changes are refused still: {code}");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(old.0.try_wait().expect("try_wait").is_none(), "the old process still runs");
    let _new = spawn_command_with_logs(take_over(&file)).0;
    assert!(exited(&mut old, Duration::from_secs(30)).expect("the old one exits after a good take-over").success());
}

#[test]
fn take_over_with_no_running_process_fails_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("upgrade.sock");
    let file = properties_file(dir.path(), 0, &format!("upgradeSocketPath={}\n", socket.display()));
    let out = take_over(&file).output().expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no running rocketns to take over from"), "{stderr}");
    let file = properties_file(dir.path(), 0, "");
    let out = take_over(&file).output().expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--take-over needs upgradeSocketPath"));
}
