//! Shared helpers of the wire tests: an in-process rocketns on 127.0.0.1 port 0, a raw client, the real
//! binary killed when a test ends, and the requests brokers and clients send. What other crates of the
//! workspace need too (requests, frames, ports, the in-process server) lives in `rocketns::testing`, and
//! is re-exported here.
// Each test binary uses a part of these.
#![allow(dead_code, unused_imports)]

pub mod controller;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rocketns::config::ClientProperties;
use rocketns::protocol::{DataVersion, TopicConfig};
use rocketns::remoting::{ExtFields, FrameDecoder, RemotingCommand, SerializeType, decode_command};
pub use rocketns::testing::wire::{
    BrokerIdentity, broker_request, free_port, properties_file, raw_frame, request, split_frame,
};
use rocketns::{NameServer, NamesrvConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::Decoder;

/// A server running inside the test's runtime; stopped when dropped.
pub type TestServer = rocketns::testing::server::InProcessServer;

/// 127.0.0.1, port 0, and a KV file in a fresh temporary folder, kept after the test (restarts read it back);
/// tests/run-all.sh points TMPDIR at a folder it removes at the end.
pub fn test_config() -> NamesrvConfig {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    NamesrvConfig {
        bind_address: "127.0.0.1".into(),
        listen_port: 0,
        kv_config_path: dir.join("kvConfig.json").display().to_string(),
        ..NamesrvConfig::default()
    }
}

/// The temporary folder of a `test_config` (for the files a test adds beside the KV file).
pub fn config_dir(config: &NamesrvConfig) -> std::path::PathBuf {
    std::path::Path::new(&config.kv_config_path).parent().expect("kv file in a folder").to_path_buf()
}

pub async fn start() -> TestServer {
    start_with(test_config()).await
}

pub async fn start_with(config: NamesrvConfig) -> TestServer {
    start_with_file(config, None).await
}

/// Starts with a `-c` file, where runtime config updates are written back.
pub async fn start_with_file(config: NamesrvConfig, config_file: Option<std::path::PathBuf>) -> TestServer {
    let server = NameServer::bind(config, config_file).await.expect("bind 127.0.0.1:0");
    run(server)
}

/// Starts with the system properties a Java NameServer's JVM would have (cluster-test mode reads them).
pub async fn start_with_properties(config: NamesrvConfig, properties: ClientProperties) -> TestServer {
    run(NameServer::bind_with(config, None, properties).await.expect("bind 127.0.0.1:0"))
}

fn run(server: NameServer) -> TestServer {
    TestServer::run(server).expect("local addr")
}

/// A raw remoting client, over plain TCP unless made `over` another stream (TLS).
pub struct Client<S = TcpStream> {
    pub stream: S,
    buf: BytesMut,
    next_opaque: i32,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Client::over(TcpStream::connect(addr).await.expect("connect"))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    pub fn over(stream: S) -> Client<S> {
        Client { stream, buf: BytesMut::new(), next_opaque: 1 }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Sends `cmd` with a fresh opaque (returned), in the given header encoding.
    pub async fn send(&mut self, mut cmd: RemotingCommand, ty: SerializeType) -> i32 {
        cmd.opaque = self.next_opaque;
        self.next_opaque += 1;
        let mut out = BytesMut::new();
        cmd.encode(ty, &mut out);
        self.send_raw(&out).await;
        cmd.opaque
    }

    /// The next whole frame, as raw bytes (prefix included); `None` when the server closed the connection.
    pub async fn read_frame_bytes(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = split_frame(&mut self.buf) {
                return Some(frame.freeze());
            }
            let n = tokio::time::timeout(Duration::from_secs(10), self.stream.read_buf(&mut self.buf))
                .await
                .expect("no reply within 10 s")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    pub async fn read_response(&mut self) -> Option<RemotingCommand> {
        let bytes = self.read_frame_bytes().await?;
        Some(decode_frame(&bytes))
    }

    /// Sends a JSON request and returns its reply.
    pub async fn request(&mut self, cmd: RemotingCommand) -> RemotingCommand {
        let opaque = self.send(cmd, SerializeType::Json).await;
        let resp = self.read_response().await.expect("connection closed before the reply");
        assert_eq!(resp.opaque, opaque, "reply matches the request");
        assert!(resp.is_response());
        resp
    }

    /// Asserts that the server closes the connection within `within` without sending anything first (no
    /// reply, no partial frame; replies read earlier do not count). A reset counts as a close.
    pub async fn assert_closed_without_reply(&mut self, within: Duration) {
        assert!(self.buf.is_empty(), "{} unread bytes were already waiting", self.buf.len());
        match tokio::time::timeout(within, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => panic!("the connection is still open after {within:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => panic!("the server sent {n} bytes instead of closing: {:?}", &self.buf[..n.min(64)]),
        }
    }
}

pub fn ext(pairs: &[(&str, &str)]) -> ExtFields {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// KV_CONFIG's three writes and reads (PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG).
pub fn kv_put(namespace: &str, key: &str, value: &str) -> RemotingCommand {
    request(100, &[("namespace", namespace), ("key", key), ("value", value)])
}

pub fn kv_get(namespace: &str, key: &str) -> RemotingCommand {
    request(101, &[("namespace", namespace), ("key", key)])
}

pub fn kv_delete(namespace: &str, key: &str) -> RemotingCommand {
    request(102, &[("namespace", namespace), ("key", key)])
}

/// GET_ROUTEINFO_BY_TOPIC as a client of `version` sends it.
pub fn route_request(topic: &str, version: i32) -> RemotingCommand {
    let mut r = request(105, &[("topic", topic)]);
    r.version = version;
    r
}

/// A broker in a registration.
#[derive(Clone)]
pub struct Broker<'a> {
    pub cluster: &'a str,
    pub name: &'a str,
    pub id: i64,
    pub addr: &'a str,
    pub ha_addr: &'a str,
    /// `None`: a 4.x broker, which sends no `enableActingMaster`.
    pub acting_master: Option<bool>,
}

impl<'a> Broker<'a> {
    pub fn new(cluster: &'a str, name: &'a str, id: i64, addr: &'a str) -> Self {
        Broker { cluster, name, id, addr, ha_addr: "", acting_master: Some(false) }
    }

    pub fn identity(&self) -> BrokerIdentity<'a> {
        BrokerIdentity { cluster: self.cluster, name: self.name, id: self.id, addr: self.addr }
    }
}

/// A topic config: (name, read/write queues, perm).
pub type Topic<'a> = (&'a str, i32, i32);

/// RegisterBrokerBody JSON as a 5.x broker writes it.
pub fn register_body(dv: DataVersion, topics: &[(&str, i32, i32)]) -> Vec<u8> {
    let configs: Vec<TopicConfig> =
        topics.iter().map(|(name, queues, perm)| TopicConfig::new(*name, *queues, *queues, *perm)).collect();
    rocketns::testing::register_body_json(&dv, &configs)
}

pub fn dv(counter: i64) -> DataVersion {
    DataVersion { counter, state_version: 0, timestamp: 1_700_000_000_000 }
}

/// REGISTER_BROKER with a JSON body and its masked CRC, as a 5.x broker sends it (a 4.x broker, with
/// `acting_master` `None`, sends no `enableActingMaster`).
pub fn register_request(b: &Broker<'_>, dv: DataVersion, topics: &[(&str, i32, i32)]) -> RemotingCommand {
    let mut r = rocketns::testing::wire::register_request(b.identity(), b.ha_addr, register_body(dv, topics), false);
    if let (Some(am), Some(fields)) = (b.acting_master, r.ext_fields.as_mut()) {
        fields.insert("enableActingMaster", am.to_string());
    }
    r
}

pub fn unregister_request(b: &Broker<'_>) -> RemotingCommand {
    broker_request(104, b.identity())
}

/// Registers and asserts SUCCESS; returns the reply.
pub async fn register(c: &mut Client, b: &Broker<'_>, dv: DataVersion, topics: &[(&str, i32, i32)]) -> RemotingCommand {
    let resp = c.request(register_request(b, dv, topics)).await;
    assert_eq!(resp.code, 0, "registration of {} failed: {:?}", b.addr, resp.remark);
    resp
}

/// The standard-JSON route of `topic`, parsed, or `None` on TOPIC_NOT_EXIST.
pub async fn route(c: &mut Client, topic: &str) -> Option<serde_json::Value> {
    let resp = c.request(route_request(topic, 479)).await;
    match resp.code {
        0 => Some(serde_json::from_slice(&resp.body).expect("standard route JSON parses")),
        17 => None,
        other => panic!("unexpected code {other}: {:?}", resp.remark),
    }
}

/// Polls until `topic`'s route is absent (unregistration is asynchronous, as in Java).
pub async fn wait_route_gone(c: &mut Client, topic: &str) {
    for _ in 0..200 {
        if route(c, topic).await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("route of {topic} still present");
}

/// Polls until `topic`'s route exists and passes `check` (changes through the writer's queue are asynchronous).
pub async fn wait_for<F: Fn(&serde_json::Value) -> bool>(c: &mut Client, topic: &str, check: F) -> serde_json::Value {
    for _ in 0..200 {
        if let Some(r) = route(c, topic).await
            && check(&r)
        {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("route of {topic} never reached the expected state");
}

/// UPDATE_NAMESRV_CONFIG with a properties text.
pub fn update_config(text: &str) -> RemotingCommand {
    let mut r = request(318, &[]);
    r.body = Bytes::copy_from_slice(text.as_bytes());
    r
}

/// `brokerAddrs` of the route's BrokerData named `name`, as (id, addr) pairs.
pub fn broker_addrs(route: &serde_json::Value, name: &str) -> Vec<(i64, String)> {
    let datas = route["brokerDatas"].as_array().expect("brokerDatas");
    let b = datas.iter().find(|b| b["brokerName"] == name).expect("broker data present");
    let mut v: Vec<(i64, String)> = b["brokerAddrs"]
        .as_object()
        .expect("brokerAddrs")
        .iter()
        .map(|(k, a)| (k.parse().expect("numeric id"), a.as_str().expect("address").to_string()))
        .collect();
    v.sort();
    v
}

/// `perm` of the route's QueueData for broker `name`.
pub fn queue_perm(route: &serde_json::Value, name: &str) -> i64 {
    let q = route["queueDatas"].as_array().expect("queueDatas");
    q.iter().find(|q| q["brokerName"] == name).expect("queue data present")["perm"].as_i64().expect("perm")
}

/// A process this test started, killed and reaped when dropped: a test that fails leaves no server
/// running behind it.
pub struct Spawned(pub std::process::Child);

impl std::ops::Deref for Spawned {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to exit, at most `within`.
pub fn exited(child: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The real `rocketns` binary, started with a `-c` file holding `properties` (which should say
/// `bindAddress=127.0.0.1` and `listenPort=0`); returns it with the address from its boot line.
pub fn spawn_binary(config_file: &std::path::Path) -> (Spawned, String) {
    let (child, addr, _logs) = spawn_binary_with_logs(config_file);
    (child, addr)
}

/// The log lines of a spawned binary after its boot line, appended by a thread as they come.
pub type Logs = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// The first of `logs` that contains `text`, waiting up to `within` for it to come.
pub fn log_line(logs: &Logs, text: &str, within: Duration) -> String {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(line) = logs.lock().expect("log lines").iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no log line with {text:?} in {:?}",
            logs.lock().expect("log lines")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `spawn_binary`, with the log lines that follow the boot line, as they come.
pub fn spawn_binary_with_logs(config_file: &std::path::Path) -> (Spawned, String, Logs) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rocketns"));
    command.arg("-c").arg(config_file);
    spawn_command_with_logs(command)
}

/// Starts `command`, which runs the real binary (directly or through a wrapper such as `unshare`), and
/// returns it with the address from its boot line and the log lines that follow, as they come.
pub fn spawn_command_with_logs(command: std::process::Command) -> (Spawned, String, Logs) {
    spawn_until_boot_line(command, "The Name Server boot success. serializeType=JSON, address ")
}

/// Starts `command` logging at info, its stderr to be read.
pub fn spawn_logging(mut command: std::process::Command) -> (Spawned, std::process::ChildStderr) {
    let mut child = Spawned(
        command
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn rocketns"),
    );
    let stderr = child.stderr.take().expect("stderr");
    (child, stderr)
}

/// `spawn_command_with_logs`, for a boot line that ends with `boot` and the address.
pub fn spawn_until_boot_line(command: std::process::Command, boot: &str) -> (Spawned, String, Logs) {
    use std::io::BufRead;
    let (child, stderr) = spawn_logging(command);
    // A thread reads the lines, so that a binary that never prints the boot line fails the test (after a
    // minute, the time a debug build may take to start under load) rather than hanging it; it keeps
    // draining them after, so that the server never blocks on a full pipe.
    let (lines, boot_lines) = std::sync::mpsc::channel();
    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = logs.clone();
    let wanted = boot.to_string();
    std::thread::spawn(move || {
        let mut booted = false;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if booted {
                kept.lock().expect("log lines").push(line);
            } else if let Some(rest) = line.split(wanted.as_str()).nth(1) {
                // The address ends the text line, or the message of a JSON one (`logFormat=json`).
                let addr = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || ".:[]".contains(*c)).collect();
                booted = lines.send(Ok(addr)).is_ok();
            } else {
                let _ = lines.send(Err(line));
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut before = Vec::new();
    let addr = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match boot_lines.recv_timeout(left) {
            Ok(Ok(addr)) => break addr,
            Ok(Err(line)) => before.push(line),
            Err(_) => panic!("no boot line ({boot:?}) within a minute; the binary said: {before:#?}"),
        }
    };
    (child, addr, logs)
}

/// Polls `check` every 20 ms until it holds; fails the test, naming `what`, if it does not within
/// `within` (for what a spawned process does in its own time; in-process waits use tokio's clock).
pub fn wait_until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + within;
    while !check() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of the metrics port's `/metrics`.
pub fn metrics_text(metrics_port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).expect("metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").expect("ask");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read metrics");
    text
}

/// The value of the sample `name` (labels included, as written) in a metrics text, `None` when absent.
pub fn metric_in(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The value of the sample `name` on the metrics port, `None` when absent.
pub fn metric(metrics_port: u16, name: &str) -> Option<f64> {
    metric_in(&metrics_text(metrics_port), name)
}

/// One request over a blocking socket; `None` when the connection broke.
pub fn blocking_request(stream: &mut std::net::TcpStream, cmd: &RemotingCommand) -> Option<RemotingCommand> {
    use std::io::Write;
    stream.write_all(&frame_bytes(cmd)).ok()?;
    blocking_reply(stream)
}

/// `cmd` as a frame, JSON header.
pub fn frame_bytes(cmd: &RemotingCommand) -> Vec<u8> {
    let mut out = BytesMut::new();
    cmd.encode(SerializeType::Json, &mut out);
    out.to_vec()
}

/// A field of `/proc/PID/status`, in kB (`VmRSS:`, the resident set now; `VmHWM:`, its peak).
pub fn proc_status_kb(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = text.lines().find(|l| l.starts_with(field)).expect("status field");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number of kB")
}

/// Resets the peak resident set (`VmHWM:`) of process `pid` to its current size, so that a peak measured
/// next is the next step's own (Linux's `/proc/PID/clear_refs`, value 5).
pub fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak resident set");
}

/// The next reply on a blocking socket; `None` when the connection broke.
pub fn blocking_reply(stream: &mut std::net::TcpStream) -> Option<RemotingCommand> {
    use std::io::Read;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut frame = BytesMut::from(&len[..]);
    frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
    stream.read_exact(&mut frame[4..]).ok()?;
    let raw = FrameDecoder::default().decode(&mut frame).ok()??;
    decode_command(raw).ok()
}

/// One whole frame's bytes (prefix included) decoded.
pub fn decode_frame(bytes: &[u8]) -> RemotingCommand {
    let mut b = BytesMut::from(bytes);
    let frame = FrameDecoder::default().decode(&mut b).expect("valid frame").expect("whole frame");
    decode_command(frame).expect("valid header")
}

/// Fields of /proc's stat of each of this process's threads named `name` (as /proc's comm gives it, its
/// first 15 bytes), from field 3 on.
pub fn thread_stats(name: &str) -> Vec<Vec<u64>> {
    let mut stats = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis start at field 3.
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        stats.push(after.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect());
    }
    stats
}

/// The scheduling policy (/proc's stat, field 41) of each of this process's threads named `name`.
pub fn thread_policies(name: &str) -> Vec<u32> {
    thread_stats(name).iter().filter_map(|f| f.get(41 - 3).map(|p| *p as u32)).collect()
}

/// A NameServer that answers each request with `answer`'s code and body, on a blocking thread.
pub fn scripted_peer(answer: fn(&RemotingCommand) -> (i32, &'static str)) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::Write;
                while let Some(asked) = blocking_reply(&mut stream) {
                    let (code, body) = answer(&asked);
                    let mut reply = RemotingCommand::response(code, None);
                    reply.opaque = asked.opaque;
                    reply.body = bytes::Bytes::from_static(body.as_bytes());
                    if stream.write_all(&frame_bytes(&reply)).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// An HTTP GET of `path` on the operator's port: the status and the body.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("HTTP port open");
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut s, &mut resp).await.unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}
