//! The `rocketns` binary: `-p`, `--help`, `-c` files, start-up on the configured address, and a clean stop on
//! SIGTERM and SIGINT. Runs the real executable; it listens on 127.0.0.1 with port 0. These stand for Java's
//! NamesrvStartupTest (#testBuildCommandlineOptions, #testGetProperties, #testStart, #testShutdown).

mod common;

use std::process::Command;
use std::time::Duration;

fn rocketns() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocketns"))
}

/// A `-c` file holding `text`, removed when dropped.
fn temp_config_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut f, text.as_bytes()).expect("write");
    f
}

#[test]
fn print_config_shows_effective_values_and_exits() {
    let file = temp_config_file(
        "listenPort=9911\norderMessageEnable=true\nnotAJavaKey=1\nkvConfigPath=/srv/ns/kv.json\nclusterTest=yes\n",
    );
    let out = rocketns().arg("-c").arg(file.path()).arg("-p").output().expect("run");
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("listenPort=9911\n"), "{stdout}");
    assert!(stdout.contains("orderMessageEnable=true\n"));
    assert!(stdout.contains("routeSnapshotPath=/srv/ns/routeSnapshot.json\n"), "derived paths are spelled out");
    assert!(stdout.contains("clusterTest=false\n"), "Java's reading of a boolean that is not true");
    assert!(stdout.contains("scanNotActiveBrokerInterval=5000\n"));
    assert!(stdout.contains(&format!("configStorePath={}\n", file.path().display())), "-c becomes configStorePath");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("notAJavaKey"), "unknown keys are warned about: {stderr}");
    assert!(stderr.contains("clusterTest") && stderr.contains("read as false"), "doubtful booleans too: {stderr}");
}

#[test]
fn defaults_listen_on_9876() {
    let out = rocketns().arg("-p").output().expect("run");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("listenPort=9876\n") && stdout.contains("bindAddress=0.0.0.0\n"), "{stdout}");
}

#[test]
fn help_and_bad_values() {
    let out = rocketns().arg("--help").output().expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout).unwrap().contains("--configFile"));
    let file = temp_config_file("listenPort=not-a-port\n");
    let out = rocketns().arg("-c").arg(file.path()).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("listenPort"));
    let file = temp_config_file("listenPort=70000\n");
    let out = rocketns().arg("-c").arg(file.path()).output().expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("listenPort") && stderr.contains("from 0 to 65535"), "the range is named: {stderr}");
    let out = rocketns().arg("-c").arg("/nonexistent/namesrv.properties").output().expect("run");
    assert!(!out.status.success());
}

/// Runs `command`, which should refuse to start: its standard error once it has exited unsuccessfully
/// (the test fails if it still serves after 10 s, `how` saying with what).
fn refused_to_start(command: &mut Command, how: &str) -> String {
    let mut child =
        command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().expect("run");
    let Some(status) = common::exited(&mut child, Duration::from_secs(10)) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("started {how} and served for 10 s");
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    stderr
}

/// A controller group of several nodes proves its Raft frames with `controllerPeerSecretFile`: without one
/// (nor `controllerAllowUnsignedPeers=true`) the node refuses to start and says what to set.
#[test]
fn several_controller_nodes_without_a_secret_refuse_to_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = format!(
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n\
         controllerDLegerPeers=n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3\ncontrollerDLegerSelfId=n0\n\
         controllerStorePath={}\n",
        dir.path().join("controller").display()
    );
    let file = common::properties_file(dir.path(), 0, &extra);
    let stderr = refused_to_start(rocketns().arg("-c").arg(&file), "without a secret");
    assert!(
        stderr.contains("controllerPeerSecretFile") && stderr.contains("controllerAllowUnsignedPeers=true"),
        "{stderr}"
    );
}

/// `--controller-only` with fewer open files than the controller may hold (its 1,024 connections) refuses to
/// start and says what it needs: a stranger's connections would otherwise take the descriptors its peers'
/// accepts need (before, nothing was checked).
#[test]
fn controller_only_refuses_too_few_open_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let extra = format!(
        "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{}\ncontrollerDLegerSelfId=n0\n\
         controllerStorePath={}\n",
        common::free_port(),
        dir.path().join("controller").display()
    );
    let file = common::properties_file(dir.path(), common::free_port(), &extra);
    // The hard limit too, so that the server cannot raise it.
    let mut command = Command::new("sh");
    command.args(["-c", "ulimit -n 1024 && exec \"$0\" --controller-only -c \"$1\""]);
    let stderr = refused_to_start(command.arg(env!("CARGO_BIN_EXE_rocketns")).arg(&file), "with 1,024 files");
    assert!(stderr.contains("RLIMIT_NOFILE") && stderr.contains("the controller needs"), "{stderr}");
}

/// The kernel's table of the process's descriptors is sized for the whole budget at start, not grown as
/// connections come: growing it waits for an RCU grace period, and so does every thread that opens a
/// descriptor meanwhile (the intake's accepts waited 13-15 ms each time under the hostile fleet).
#[test]
fn the_descriptor_table_is_sized_at_start() {
    // A child starts with a table as large as this process's (exec keeps it): the limit is four times that,
    // so that only the server's own sizing can reach it.
    let limit = (common::proc_status_kb(std::process::id(), "FDSize:") * 4).max(1024);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = common::properties_file(dir.path(), 0, "");
    let mut command = Command::new("sh");
    command.args(["-c", "ulimit -n \"$2\" && exec \"$0\" -c \"$1\""]);
    command.arg(env!("CARGO_BIN_EXE_rocketns")).arg(&file).arg(limit.to_string());
    let (child, _addr, _logs) = common::spawn_command_with_logs(command);
    let size = common::proc_status_kb(child.id(), "FDSize:");
    assert!(
        size >= limit,
        "a table of {size} descriptors under a limit of {limit}, grown later by bursts of connections"
    );
}

/// Starts the binary, answers a request at the wire, and stops cleanly on the given signal. The client has
/// gone by then: the shutdown log counts no open connection, and with no broker ever registered no route
/// file is written.
fn serve_and_stop(signal: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics_port = common::free_port();
    let file = common::properties_file(dir.path(), 0, &format!("metricsPort={metrics_port}\n"));
    let (mut child, addr, logs) = common::spawn_binary_with_logs(&file);
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let reply = common::blocking_request(&mut stream, &common::request(106, &[])).expect("a reply");
    assert_eq!(&reply.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while common::metric(metrics_port, "rocketns_connections") != Some(0.0) {
        assert!(std::time::Instant::now() < deadline, "the closed connection is never counted as closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
    let code = child.wait().expect("wait");
    assert!(code.success(), "clean exit on SIG{signal}: {code:?}");
    // The log reader may still be taking the last lines.
    let shutdown = common::log_line(&logs, "shutting down", Duration::from_secs(10));
    assert!(shutdown.contains("connections=0"), "{shutdown}");
    assert!(!dir.path().join("routeSnapshot.json").exists(), "no routes, no route file");
}

#[test]
fn stops_cleanly_on_sigterm() {
    serve_and_stop("TERM");
}

#[test]
fn stops_cleanly_on_sigint() {
    serve_and_stop("INT");
}

/// `--controller-only` (Java's `mqcontroller`): a one-node controller group on the peer port of the `-c`
/// file, which elects itself and hands out broker ids; the NameServer's port is never opened; SIGTERM stops
/// it cleanly. A broker's `controllerAddr` is this port, as with Java's.
#[test]
fn controller_only_serves_the_controller_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (controller_port, namesrv_port) = (common::free_port(), common::free_port());
    let extra = format!(
        "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:{controller_port}\ncontrollerDLegerSelfId=n0\n\
         controllerStorePath={}\n",
        dir.path().join("controller").display()
    );
    let file = common::properties_file(dir.path(), namesrv_port, &extra);
    let mut command = rocketns();
    command.arg("--controller-only").arg("-c").arg(&file);
    let (mut child, addr, _logs) =
        common::spawn_until_boot_line(command, "The Controller Server boot success. serializeType=JSON, address ");
    assert_eq!(addr, format!("127.0.0.1:{controller_port}"));
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = common::blocking_request(&mut stream, &common::request(1005, &[])).expect("a reply");
        if reply.ext("isLeader") == Some("true") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the lone node never leads: {reply:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let next = common::request(1012, &[("clusterName", "c"), ("brokerName", "b")]);
    let reply = common::blocking_request(&mut stream, &next).expect("a reply");
    assert_eq!((reply.code, reply.ext("nextBrokerId")), (0, Some("1")), "{reply:?}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", namesrv_port)).is_err(),
        "no NameServer port with --controller-only"
    );
    drop(stream);
    let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(status.success());
    assert!(child.wait().expect("wait").success(), "clean exit on SIGTERM");
}

/// The real binary started with its stderr read into lines as they come, boot line or not.
fn spawn_reading(command: Command) -> (common::Spawned, common::Logs) {
    use std::io::BufRead;
    let (child, stderr) = common::spawn_logging(command);
    let logs = common::Logs::default();
    let kept = logs.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            kept.lock().expect("log lines").push(line);
        }
    });
    (child, logs)
}

/// `--wait-for-port`: a node started on the port another NameServer holds copies that one's routes
/// (namesrvPeers names it), waits, and serves them once the other is killed; a signal stops the wait.
/// Made to fail once by not waiting (it exited: address in use).
#[test]
fn a_node_waits_for_the_port_of_the_one_it_replaces_and_serves_its_routes() {
    let port = common::free_port();
    let old_dir = tempfile::tempdir().expect("temp dir");
    let (mut old, addr, _) = common::spawn_binary_with_logs(&common::properties_file(old_dir.path(), port, ""));
    let mut broker = std::net::TcpStream::connect(&addr).expect("connect");
    broker.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let b = common::Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    let registered = common::blocking_request(
        &mut broker,
        &common::register_request(&b, common::dv(1), &[("T1", 4, 4), ("T2", 4, 4)]),
    );
    assert_eq!(registered.map(|r| r.code), Some(0));

    let new_dir = tempfile::tempdir().expect("temp dir");
    let file = common::properties_file(new_dir.path(), port, &format!("namesrvPeers=127.0.0.1:{port}\n"));
    let mut command = rocketns();
    command.arg("-c").arg(&file).args(["--wait-for-port", "60"]);
    let (mut new, logs) = spawn_reading(command);
    common::log_line(&logs, "routes copied from a peer NameServer", Duration::from_secs(60));
    common::log_line(&logs, "the port is in use", Duration::from_secs(60));
    assert!(new.try_wait().expect("try_wait").is_none(), "still waiting");

    old.kill().expect("kill the old one");
    old.wait().expect("reaped");
    drop(broker);
    common::log_line(&logs, "The Name Server boot success", Duration::from_secs(60));
    let mut client = std::net::TcpStream::connect(&addr).expect("the new node listens");
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let route = common::blocking_request(&mut client, &common::route_request("T1", 99)).expect("a reply");
    assert_eq!(route.code, 0, "the old node's routes, copied while waiting");

    // A signal while waiting ends the wait, as a stop asked for: exit status 0.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = rocketns();
    command.arg("-c").arg(common::properties_file(dir.path(), port, "")).args(["--wait-for-port", "600"]);
    let (mut waiting, waiting_logs) = spawn_reading(command);
    common::log_line(&waiting_logs, "the port is in use", Duration::from_secs(60));
    assert!(Command::new("kill").arg("-TERM").arg(waiting.id().to_string()).status().unwrap().success());
    let status = common::exited(&mut waiting, Duration::from_secs(10)).expect("stopped by SIGTERM while waiting");
    assert!(status.success(), "{status:?}");
    common::log_line(&waiting_logs, "stopped before it served", Duration::from_secs(5));
    drop(new);
}

/// With `--wait-for-port`, a metrics port another process holds is waited for before the remoting port
/// opens: clients never reach a node that does not serve them yet. Made to fail once by binding the
/// remoting port first (a client connected while the node waited).
#[test]
fn the_remoting_port_opens_only_once_the_metrics_port_is_had() {
    let (port, metrics_port) = (common::free_port(), common::free_port());
    let holder = std::net::TcpListener::bind(("127.0.0.1", metrics_port)).expect("hold the metrics port");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = common::properties_file(dir.path(), port, &format!("metricsPort={metrics_port}\n"));
    let mut command = rocketns();
    command.arg("-c").arg(&file).args(["--wait-for-port", "60"]);
    let (_node, logs) = spawn_reading(command);
    common::log_line(&logs, "the port is in use", Duration::from_secs(60));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the remoting port is closed meanwhile");
    drop(holder);
    common::log_line(&logs, "The Name Server boot success", Duration::from_secs(60));
    let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("open now");
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(common::blocking_request(&mut client, &common::request(106, &[])).map(|r| r.code), Some(0));
}
