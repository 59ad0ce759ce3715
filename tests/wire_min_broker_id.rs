//! NOTIFY_MIN_BROKER_ID_CHANGE (905) with `notifyMinBrokerIdChanged=true`: test brokers listen on the
//! addresses they register, and receive what rocketns sends them when their group's lowest broker id changes
//! (registration, UNREGISTER_BROKER, a closed connection, expiry), with the header fields Java 5.3.3's
//! `RouteInfoManager` sets (tests/java/min_broker_id.py compares the same triggers with the Java NameServer).

mod common;

use std::time::Duration;

use common::{Broker, Client, dv, register};
use rocketns::remoting::{FrameDecoder, RemotingCommand, decode_command};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::codec::Decoder;

/// A broker's listening port, and what the NameServer sends to it.
struct TestBroker {
    addr: String,
    received: mpsc::UnboundedReceiver<RemotingCommand>,
}

impl TestBroker {
    async fn listen() -> TestBroker {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let (mut decoder, mut buf) = (FrameDecoder::new(1 << 20), bytes::BytesMut::new());
                    loop {
                        while let Ok(Some(frame)) = decoder.decode(&mut buf) {
                            let _ = tx.send(decode_command(frame).expect("a 905 header decodes"));
                        }
                        if matches!(stream.read_buf(&mut buf).await, Ok(0) | Err(_)) {
                            return;
                        }
                    }
                });
            }
        });
        TestBroker { addr, received }
    }

    /// The next frame, within 10 s: its header fields, sorted.
    async fn next_notice(&mut self) -> Vec<(String, String)> {
        let cmd = tokio::time::timeout(Duration::from_secs(10), self.received.recv())
            .await
            .expect("a 905 within 10 s")
            .expect("listener running");
        assert_eq!(cmd.code, 905);
        assert!(cmd.is_oneway(), "905 is sent one-way");
        let mut fields: Vec<(String, String)> =
            cmd.ext_fields.unwrap().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        fields.sort();
        fields
    }
}

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn notifying_server() -> common::TestServer {
    let mut config = common::test_config();
    config.notify_min_broker_id_changed = true;
    config.scan_not_active_broker_interval = 100;
    common::start_with(config).await
}

#[tokio::test]
async fn every_trigger_notifies_the_group_as_java_does() {
    let server = notifying_server().await;
    let (mut master, mut slave) = (TestBroker::listen().await, TestBroker::listen().await);
    let (master_addr, slave_addr) = (master.addr.clone(), slave.addr.clone());
    let mut m = Broker::new("DefaultCluster", "broker-a", 0, &master_addr);
    m.acting_master = Some(true);
    m.ha_addr = "127.0.0.1:10912";
    let mut s = Broker::new("DefaultCluster", "broker-a", 1, &slave_addr);
    s.acting_master = Some(true);
    let mut slave_conn = Client::connect(server.addr).await;
    register(&mut slave_conn, &s, dv(1), &[]).await;

    // Registration: the master lowers the group's id; the others (the slave) are told, with its HA address.
    let mut master_conn = Client::connect(server.addr).await;
    register(&mut master_conn, &m, dv(1), &[]).await;
    let expected = [("haBrokerAddr", "127.0.0.1:10912"), ("minBrokerAddr", &master_addr), ("minBrokerId", "0")];
    assert_eq!(slave.next_notice().await, fields(&expected));

    // UNREGISTER_BROKER of the lowest id: every remaining member is told who left.
    assert_eq!(master_conn.request(common::unregister_request(&m)).await.code, 0);
    let offline = [("minBrokerAddr", &*slave_addr), ("minBrokerId", "1"), ("offlineBrokerAddr", &master_addr)];
    assert_eq!(slave.next_notice().await, fields(&offline));

    // The master's connection closes.
    register(&mut master_conn, &m, dv(2), &[]).await;
    assert_eq!(slave.next_notice().await, fields(&expected));
    drop(master_conn);
    assert_eq!(slave.next_notice().await, fields(&offline));

    // The master expires (a 300 ms heartbeat timeout, scans every 100 ms).
    let mut master_conn = Client::connect(server.addr).await;
    let mut r = common::register_request(&m, dv(3), &[]);
    r.ext_fields.as_mut().unwrap().insert("heartbeatTimeoutMillis", "300");
    assert_eq!(master_conn.request(r).await.code, 0);
    assert_eq!(slave.next_notice().await, fields(&expected));
    assert_eq!(slave.next_notice().await, fields(&offline));

    // The master itself was never told anything: a registration tells the others, a departure the rest.
    assert!(master.received.try_recv().is_err());
    drop(slave_conn);
}

#[tokio::test]
async fn without_an_acting_master_only_registrations_notify() {
    let server = notifying_server().await;
    let mut slave = TestBroker::listen().await;
    let slave_addr = slave.addr.clone();
    let m = Broker::new("DefaultCluster", "broker-b", 0, "127.0.0.1:1");
    let s = Broker::new("DefaultCluster", "broker-b", 1, &slave_addr);
    let mut conn = Client::connect(server.addr).await;
    register(&mut conn, &s, dv(1), &[]).await;
    register(&mut conn, &m, dv(1), &[]).await;
    let expected = [("minBrokerAddr", "127.0.0.1:1"), ("minBrokerId", "0")];
    assert_eq!(slave.next_notice().await, fields(&expected));
    // The master leaves (no notice: the group does not allow an acting master) and comes back (a notice):
    // the next frame is the comeback's.
    assert_eq!(conn.request(common::unregister_request(&m)).await.code, 0);
    register(&mut conn, &m, dv(2), &[]).await;
    assert_eq!(slave.next_notice().await, fields(&expected));
}

/// The notifier's lines clip what a broker sent (issue 44: a 4 MB `brokerAddr` without a port, every send
/// failing at once, made 24 MB of log a register/unregister cycle). A slave registered with the longest
/// address a registration takes (261 bytes; a 100,000-byte one, before that bound, made a 200,158-byte
/// line), then a master that registers and leaves: the notices are logged, and no line is over 2 KB.
#[test]
fn the_notifiers_lines_clip_what_a_broker_sent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = common::properties_file(dir.path(), 0, "notifyMinBrokerIdChanged=true\n");
    let (_server, addr, logs) = common::spawn_binary_with_logs(&file);
    let long = "x".repeat(261);
    let mut s = Broker::new("DefaultCluster", "broker-a", 1, &long);
    s.acting_master = Some(true);
    let mut m = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:1");
    m.acting_master = Some(true);
    let mut slave = std::net::TcpStream::connect(&addr).expect("connect");
    let registered = common::blocking_request(&mut slave, &common::register_request(&s, dv(1), &[]));
    assert_eq!(registered.map(|r| r.code), Some(0));
    let mut master = std::net::TcpStream::connect(&addr).expect("connect");
    let registered = common::blocking_request(&mut master, &common::register_request(&m, dv(1), &[]));
    assert_eq!(registered.map(|r| r.code), Some(0));
    let left = common::blocking_request(&mut master, &common::unregister_request(&m));
    assert_eq!(left.map(|r| r.code), Some(0));
    common::log_line(&logs, "min broker id changed, notifying", Duration::from_secs(10));
    common::log_line(&logs, "NOTIFY_MIN_BROKER_ID_CHANGE not sent", Duration::from_secs(10));
    let longest = logs.lock().expect("log lines").iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 2048, "a log line of {longest} bytes");
}
