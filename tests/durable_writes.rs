//! Acknowledged means on disk, and a write that fails changes nothing: the KV store, the config file written
//! back on UPDATE_NAMESRV_CONFIG and the warm-restart route file, under real faults. A folder where no file
//! can be created (immutable as root, read-only otherwise), a full filesystem (a small tmpfs in a private
//! mount namespace, as root: skipped with a message otherwise), and a folder that cannot be synced after the
//! rename (the server as a user who may write it but not read it). After each fault the server still
//! serves, the files hold what was acknowledged before it, and once the fault is gone the next write
//! succeeds.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use rocketns::remoting::RemotingCommand;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The server over one blocking connection.
struct Wire(std::net::TcpStream);

impl Wire {
    fn connect(addr: &str) -> Wire {
        let stream = std::net::TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Wire(stream)
    }

    fn ask(&mut self, cmd: &RemotingCommand) -> RemotingCommand {
        blocking_request(&mut self.0, cmd).expect("a reply")
    }

    fn value(&mut self, ns: &str, key: &str) -> Option<String> {
        let reply = self.ask(&kv_get(ns, key));
        (reply.code == 0).then(|| reply.ext("value").expect("value").to_string())
    }

    fn order_conf(&mut self, topic: &str) -> Option<String> {
        let reply = self.ask(&route_request(topic, 479));
        assert_eq!(reply.code, 0, "{topic} is routed");
        let route: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        route.get("orderTopicConf").map(|v| v.as_str().unwrap().to_string())
    }

    fn config_value(&mut self, key: &str) -> String {
        let reply = self.ask(&request(319, &[]));
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        text.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).unwrap_or_default().to_string()
    }

    /// A broker with topic T, over a connection of its own kept open (closing it would remove the broker).
    fn broker(addr: &str) -> Wire {
        let mut broker = Wire::connect(addr);
        let b = Broker::new("c", "broker-a", 0, "127.0.0.1:10911");
        assert_eq!(broker.ask(&register_request(&b, dv(1), &[("T", 4, 6), ("T2", 4, 6)])).code, 0);
        broker
    }
}

/// Whether a route file write that failed may still have left its newer content (whole) in place: it may
/// when only the folder's sync failed after the rename. The route file is no client's acknowledged write (a
/// failed one is counted and tried again), so it is not put back as the KV and config files are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RouteFile {
    Untouched,
    MayBeNewer,
}

/// What every fault test checks, on a server whose files are `kv`, `conf` and `routes`, while `fault` is in
/// place and after `clear` removed it.
fn check_writes_under_a_fault(
    addr: &str,
    metrics_port: u16,
    files: [&Path; 3],
    route_file: RouteFile,
    fault: impl FnOnce(),
    clear: impl FnOnce(),
) {
    let [kv, conf, routes] = files;
    let failures = |file: &str| metric(metrics_port, &format!("rocketns_file_write_failures_total{{file=\"{file}\"}}"));
    let _broker = Wire::broker(addr);
    let mut c = Wire::connect(addr);
    assert_eq!(c.ask(&kv_put("ns", "k", "v1")).code, 0);
    assert_eq!(c.ask(&kv_put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")).code, 0);
    assert_eq!(c.ask(&update_config("scanNotActiveBrokerInterval=6000")).code, 0);
    wait_until("the route file is written", Duration::from_secs(20), || {
        routes.exists() && read(routes).contains("\"T\"")
    });
    let (kv_before, conf_before, routes_before) = (read(kv), read(conf), read(routes));
    assert!(kv_before.contains("v1") && conf_before.contains("scanNotActiveBrokerInterval=6000"));

    fault();
    let refused = c.ask(&kv_put("ns", "k", "v2"));
    assert_eq!(refused.code, 1, "SYSTEM_ERROR");
    assert!(refused.remark.as_deref().unwrap_or("").contains("cannot write KV config file"), "{:?}", refused.remark);
    assert_eq!(c.value("ns", "k").as_deref(), Some("v1"), "the refused put is not visible");
    assert_eq!(c.ask(&kv_delete("ns", "k")).code, 1);
    assert_eq!(c.value("ns", "k").as_deref(), Some("v1"), "the refused delete is not visible");
    assert_eq!(c.ask(&kv_put("ORDER_TOPIC_CONFIG", "T", "broker-a:8")).code, 1);
    assert_eq!(c.value("ORDER_TOPIC_CONFIG", "T").as_deref(), Some("broker-a:4"));
    assert_eq!(c.order_conf("T").as_deref(), Some("broker-a:4"), "the routes did not take the refused value");
    let refused = c.ask(&update_config("scanNotActiveBrokerInterval=7000"));
    assert_eq!(refused.code, 1);
    assert!(refused.remark.as_deref().unwrap_or("").contains("cannot write the config file"), "{:?}", refused.remark);
    assert_eq!(c.config_value("scanNotActiveBrokerInterval"), "6000", "the refused update is not applied");
    // A route change the saver cannot write: counted, and the file written last stays whole.
    let mut late = Wire::connect(addr);
    let b = Broker::new("c", "broker-b", 0, "127.0.0.1:10921");
    assert_eq!(late.ask(&register_request(&b, dv(1), &[("U", 4, 6), ("U2", 4, 6)])).code, 0);
    wait_until("a failed route file write is counted", Duration::from_secs(20), || {
        failures("routes").unwrap_or(0.0) >= 1.0
    });
    assert_eq!((read(kv), read(conf)), (kv_before, conf_before), "files untouched");
    let routes_now = read(routes);
    if route_file == RouteFile::MayBeNewer && routes_now != routes_before {
        let dump: serde_json::Value = serde_json::from_str(&routes_now).expect("a whole route file");
        assert!(routes_now.contains("\"U\"") && dump["topics"].is_array(), "the newer routes: {routes_now}");
    } else {
        assert_eq!(routes_now, routes_before, "route file untouched");
    }
    assert!(failures("kv").unwrap() >= 3.0 && failures("config").unwrap() >= 1.0);
    assert!(c.ask(&route_request("U", 479)).code == 0, "the server still serves");

    clear();
    assert_eq!(c.ask(&kv_put("ns", "k", "v2")).code, 0);
    assert_eq!(c.value("ns", "k").as_deref(), Some("v2"));
    assert!(read(kv).contains("v2"));
    assert_eq!(c.ask(&kv_put("ORDER_TOPIC_CONFIG", "T", "broker-a:8")).code, 0);
    assert_eq!(c.order_conf("T").as_deref(), Some("broker-a:8"));
    assert_eq!(c.ask(&update_config("scanNotActiveBrokerInterval=7000")).code, 0);
    assert!(read(conf).contains("scanNotActiveBrokerInterval=7000"));
    wait_until("the route file is written again, with U", Duration::from_secs(20), || read(routes).contains("\"U\""));
}

/// The server's files as seen from this process.
struct Files {
    kv: PathBuf,
    conf: PathBuf,
    routes: PathBuf,
}

impl Files {
    fn in_dir(dir: &Path) -> Files {
        Files {
            kv: dir.join("kvConfig.json"),
            conf: dir.join("namesrv.properties"),
            routes: dir.join("routeSnapshot.json"),
        }
    }

    fn all(&self) -> [&Path; 3] {
        [&self.kv, &self.conf, &self.routes]
    }
}

/// The settings of a server whose files are all in `dir` (the KV store named here, the route file beside
/// the `-c` file), saving routes every second.
fn settings(dir: &Path, metrics_port: u16) -> String {
    format!(
        "bindAddress=127.0.0.1\nlistenPort=0\nmetricsPort={metrics_port}\nkvConfigPath={}\norderMessageEnable=true\n\
         routeSnapshotIntervalSeconds=1\n",
        dir.join("kvConfig.json").display()
    )
}

/// The real binary, from `program` and its arguments; returns it with its address (from its boot line).
fn spawn(program: &str, args: &[&str]) -> (Spawned, String) {
    let mut command = Command::new(program);
    command.args(args);
    let (child, addr, _logs) = spawn_command_with_logs(command);
    (child, addr)
}

/// No write can create its temporary file (`fsutil::write_atomically`'s `.NAME.tmp-PID-N`, one per write):
/// the folder is made immutable (`chattr +i`, which stops root too) or, for another user, read-only.
#[test]
fn writes_that_cannot_create_their_file_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = Files::in_dir(dir.path());
    let metrics_port = free_port();
    std::fs::write(&files.conf, settings(dir.path(), metrics_port)).unwrap();
    let (mut server, addr) = spawn(env!("CARGO_BIN_EXE_rocketns"), &["-c", files.conf.to_str().unwrap()]);
    let folder = dir.path().to_path_buf();
    let lock = |locked: bool| {
        if is_root() {
            let flag = if locked { "+i" } else { "-i" };
            let done = Command::new("chattr").arg(flag).arg(&folder).status().expect("chattr");
            assert!(done.success(), "chattr {flag} (the test folder's filesystem must support it)");
        } else {
            use std::os::unix::fs::PermissionsExt;
            let mode = if locked { 0o555 } else { 0o755 };
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    check_writes_under_a_fault(&addr, metrics_port, files.all(), RouteFile::Untouched, || lock(true), || lock(false));
    server.kill().unwrap();
    server.wait().unwrap();
}

/// Every write's folder sync after its rename fails: the server runs as a user who may write the folder
/// (create, rename) but not read it, and so cannot open it to sync it (as root, the server is started as
/// `nobody` with `setpriv`). The new content was already renamed into place: it is put back as it was, and
/// the change refused, so that a change reported as failed has changed nothing, on disk or in memory.
#[test]
fn writes_whose_folder_cannot_be_synced_change_nothing() {
    use std::os::unix::fs::PermissionsExt;
    // Outside the tests' own temporary folder, which only root may enter.
    let dir = tempfile::Builder::new().prefix("rocketns-sync-").tempdir_in("/tmp").unwrap();
    let files = Files::in_dir(dir.path());
    let metrics_port = free_port();
    std::fs::write(&files.conf, settings(dir.path(), metrics_port)).unwrap();
    let conf = files.conf.to_str().unwrap().to_string();
    let bin = env!("CARGO_BIN_EXE_rocketns");
    let (mut server, addr) = if is_root() {
        let nobody = Command::new("chown").args(["-R", "65534:65534"]).arg(dir.path()).status().expect("chown");
        assert!(nobody.success());
        spawn("setpriv", &["--reuid=65534", "--regid=65534", "--clear-groups", bin, "-c", &conf])
    } else {
        spawn(bin, &["-c", &conf])
    };
    let folder = dir.path().to_path_buf();
    let mode = |mode: u32| std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode)).unwrap();
    let (fault, clear) = (|| mode(0o300), || mode(0o755));
    check_writes_under_a_fault(&addr, metrics_port, files.all(), RouteFile::MayBeNewer, fault, clear);
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The effective user is root (read from /proc, so that the test needs no unsafe call).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Uid:").map(|u| u.split_whitespace().nth(1) == Some("0"))))
        .unwrap_or(false)
}

/// The server's files on a 1 MiB tmpfs, mounted in a mount namespace of the server's own, then filled up.
/// The test reaches that mount through `/proc/PID/root`.
#[test]
fn writes_on_a_full_filesystem_change_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root for a private mount namespace and a tmpfs (CI runs as root)");
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let mount = tempfile::tempdir().unwrap();
    let metrics_port = free_port();
    let seed = outside.path().join("namesrv.properties");
    std::fs::write(&seed, settings(mount.path(), metrics_port)).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=1m rocketns-test {m} && cp {seed} {m}/namesrv.properties && exec {bin} -c {m}/namesrv.properties",
        m = mount.path().display(),
        seed = seed.display(),
        bin = env!("CARGO_BIN_EXE_rocketns"),
    );
    let (mut server, addr) = spawn("unshare", &["--mount", "--propagation", "private", "sh", "-c", &script]);
    let inside = PathBuf::from(format!("/proc/{}/root{}", server.id(), mount.path().display()));
    let files = Files::in_dir(&inside);
    let filler = inside.join("filler");
    check_writes_under_a_fault(
        &addr,
        metrics_port,
        files.all(),
        RouteFile::Untouched,
        || {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).unwrap();
            let block = vec![0u8; 4096];
            while f.write_all(&block).is_ok() {}
            let _ = f.sync_all();
        },
        || std::fs::remove_file(&filler).unwrap(),
    );
    server.kill().unwrap();
    server.wait().unwrap();
}
