//! Stopping and starting again: graceful shutdown with GO_AWAY, and warm restart (routes saved at shutdown
//! and served at once on the next start, each broker on a fresh liveness timer).

mod common;

use std::time::Duration;

use common::*;
use rocketns::protocol::DataVersion;

const TOPICS: &[(&str, i32, i32)] = &[("TopicA", 8, 6), ("TopicB", 8, 6)];

fn broker() -> Broker<'static> {
    Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911")
}

/// While a graceful shutdown lasts, clients newer than 5.3.1 are told GO_AWAY (1500, `please go away`),
/// older ones are still answered, and no new connection is accepted.
#[tokio::test]
async fn graceful_shutdown_says_go_away() {
    let mut config = test_config();
    config.enable_shutdown_gracefully = true;
    config.shutdown_wait_time_seconds = 2;
    let mut server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker(), dv(1), TOPICS).await;
    server.begin_shutdown();
    // The shutdown starts as soon as the server's task sees it: answered normally until then.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let resp = loop {
        let resp = c.request(route_request("TopicA", 479)).await;
        if resp.code != 0 || std::time::Instant::now() > deadline {
            break resp;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!((resp.code, resp.remark.as_deref()), (1500, Some("please go away")));
    let resp = c.request(route_request("TopicA", 475)).await;
    assert_eq!(resp.code, 0, "5.3.1 and older clients are still served");
    assert!(tokio::net::TcpStream::connect(server.addr).await.is_err(), "no new connections");
    let started = std::time::Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(3), "bounded by shutdownWaitTimeSeconds");
    c.assert_closed_without_reply(Duration::from_secs(5)).await;
}

/// Routes come back at once after a restart; the broker's DataVersion too, so its next periodic
/// registration changes nothing.
#[tokio::test]
async fn warm_restart_serves_routes_at_once() {
    let config = test_config();
    let file = config.route_snapshot_file();
    let server = start_with(config.clone()).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker(), dv(7), TOPICS).await;
    c.request(kv_put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:8")).await;
    let before = c.request(route_request("TopicA", 479)).await.body;
    let info_before = c.request(request(106, &[])).await.body;
    server.shutdown().await;
    assert!(file.exists(), "saved at shutdown");

    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(route_request("TopicA", 479)).await.body, before, "the same route, at once");
    assert_eq!(c.request(request(106, &[])).await.body, info_before);
    let query = |dv: DataVersion| {
        let mut r = request(
            322,
            &[
                ("clusterName", "DefaultCluster"),
                ("brokerAddr", "127.0.0.1:10911"),
                ("brokerName", "broker-a"),
                ("brokerId", "0"),
            ],
        );
        r.body = bytes::Bytes::from(dv.to_json());
        r
    };
    // Known only from the file, the broker is told to register (as Java, starting empty, tells it), so that
    // one with forceRegister=false comes back over a connection; made to fail once by answering from the
    // file's DataVersion alone ("false": such a master stayed unnamed to its slaves for good).
    assert_eq!(c.request(query(dv(7))).await.ext("changed"), Some("true"));
    // The broker comes back over a new connection: a no-op for its routes; then it is current; once that
    // connection closes, it is removed.
    let mut b = Client::connect(server.addr).await;
    register(&mut b, &broker(), dv(7), TOPICS).await;
    assert_eq!(b.request(query(dv(7))).await.ext("changed"), Some("false"));
    drop(b);
    wait_route_gone(&mut c, "TopicA").await;
}

/// A master restored from the route file, on no connection yet, is not named to a slave (Java, starting
/// empty, does not know it): it may be a dead one that nothing will remove for 120 s, and a Java slave told
/// its HA address kept replicating from it after it came back as a slave. Once the master registers on a
/// connection, the slave is told again. Made to fail once by naming restored masters whose HA address is
/// known (as before the fix): the slave was told 127.0.0.1:10912.
#[tokio::test]
async fn a_restored_master_is_not_named_to_a_slave_until_it_registers() {
    let config = test_config();
    let master = Broker { ha_addr: "127.0.0.1:10912", ..broker() };
    let slave =
        Broker { ha_addr: "127.0.0.1:10922", ..Broker::new("DefaultCluster", "broker-a", 1, "127.0.0.1:10921") };
    let server = start_with(config.clone()).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &master, dv(1), TOPICS).await;
    let told = register(&mut c, &slave, dv(1), TOPICS).await;
    assert_eq!((told.ext("masterAddr"), told.ext("haServerAddr")), (Some("127.0.0.1:10911"), Some("127.0.0.1:10912")));
    server.shutdown().await;
    drop(c);

    let server = start_with(config).await;
    let mut s = Client::connect(server.addr).await;
    let told = register(&mut s, &slave, dv(1), TOPICS).await;
    assert_eq!((told.ext("masterAddr"), told.ext("haServerAddr")), (None, None), "restored, not registered");
    let mut m = Client::connect(server.addr).await;
    register(&mut m, &master, dv(1), TOPICS).await;
    let told = register(&mut s, &slave, dv(1), TOPICS).await;
    assert_eq!((told.ext("masterAddr"), told.ext("haServerAddr")), (Some("127.0.0.1:10911"), Some("127.0.0.1:10912")));
}

/// A restored broker that never comes back expires on the usual timeout.
#[tokio::test(start_paused = true)]
async fn restored_broker_that_never_returns_expires() {
    let mut config = test_config();
    config.server_channel_max_idle_time_seconds = 24 * 3600;
    let server = start_with(config.clone()).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker(), dv(1), TOPICS).await;
    server.shutdown().await;
    drop(c);

    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    tokio::time::sleep(Duration::from_secs(100)).await;
    assert!(route(&mut c, "TopicA").await.is_some(), "served from the file for its timeout");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(route(&mut c, "TopicA").await.is_none(), "expired: 120 s and one scan");
}

/// A corrupt or old-format route snapshot file is ignored with a warning; the server starts empty.
#[tokio::test]
async fn unreadable_route_snapshot_files_are_ignored() {
    for content in [
        &b"{\"format\":\"rocketns-routes/1\",\"brokers\":["[..],
        b"\x00\xff garbage",
        br#"{"format":"rocketns-routes/0","brokers":[]}"#,
    ] {
        let config = test_config();
        std::fs::write(config.route_snapshot_file(), content).unwrap();
        let server = start_with(config).await;
        let mut c = Client::connect(server.addr).await;
        assert_eq!(&c.request(request(106, &[])).await.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
        register(&mut c, &broker(), dv(1), TOPICS).await;
        assert!(route(&mut c, "TopicA").await.is_some(), "serving normally");
    }
}

/// `warmRestart=false` is Java's behaviour: nothing saved, an empty start.
#[tokio::test]
async fn warm_restart_can_be_turned_off() {
    let mut config = test_config();
    config.warm_restart = false;
    let server = start_with(config.clone()).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &broker(), dv(1), TOPICS).await;
    server.shutdown().await;
    assert!(!config.route_snapshot_file().exists());
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    assert!(route(&mut c, "TopicA").await.is_none());
}
