//! Broker expiry on tokio's paused clock: a broker silent for its heartbeat timeout (120 s by default, or
//! its own `heartbeatTimeoutMillis`) is removed by the scan that runs every `scanNotActiveBrokerInterval`;
//! QUERY_DATA_VERSION and BROKER_HEARTBEAT keep it alive. No real sleeps: time is advanced by tokio.

mod common;

use std::time::Duration;

use common::*;

const TOPICS: &[(&str, i32, i32)] = &[("TopicA", 8, 6), ("TopicB", 8, 6)];

fn broker() -> Broker<'static> {
    Broker::new("c", "broker-a", 0, "127.0.0.1:10911")
}

/// Idle connections are closed after 120 s too; these tests keep them open to see the scan alone at work.
fn config() -> rocketns::NamesrvConfig {
    let mut c = test_config();
    c.server_channel_max_idle_time_seconds = 24 * 3600;
    c
}

#[tokio::test(start_paused = true)]
async fn silent_broker_expires_after_default_timeout() {
    let server = start_with(config()).await;
    let mut b = Client::connect(server.addr).await;
    register(&mut b, &broker(), dv(1), TOPICS).await;
    let mut client = Client::connect(server.addr).await;
    tokio::time::sleep(Duration::from_secs(110)).await;
    assert!(route(&mut client, "TopicA").await.is_some(), "alive at 110 s");
    // Past 120 s, the next scan (every 5 s) removes it.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(route(&mut client, "TopicA").await.is_none(), "removed by 130 s");
    assert!(route(&mut client, "TopicB").await.is_none());
    assert_eq!(&client.request(request(106, &[])).await.body[..], br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_a_broker_alive() {
    let server = start_with(config()).await;
    let mut b = Client::connect(server.addr).await;
    register(&mut b, &broker(), dv(1), TOPICS).await;
    let query = request(
        322,
        &[("clusterName", "c"), ("brokerAddr", "127.0.0.1:10911"), ("brokerName", "broker-a"), ("brokerId", "0")],
    );
    let heartbeat =
        request(904, &[("clusterName", "c"), ("brokerAddr", "127.0.0.1:10911"), ("brokerName", "broker-a")]);
    for i in 0..4 {
        tokio::time::sleep(Duration::from_secs(100)).await;
        let hb = if i % 2 == 0 { query.clone() } else { heartbeat.clone() };
        assert_eq!(b.request(hb).await.code, 0);
        assert!(route(&mut b, "TopicA").await.is_some(), "alive after {} s of heartbeats", (i + 1) * 100);
    }
    tokio::time::sleep(Duration::from_secs(130)).await;
    assert!(route(&mut b, "TopicA").await.is_none(), "removed once heartbeats stop");
}

#[tokio::test(start_paused = true)]
async fn per_broker_timeout_and_scan_interval() {
    let mut cfg = config();
    cfg.scan_not_active_broker_interval = 1000;
    let server = start_with(cfg).await;
    let mut b = Client::connect(server.addr).await;
    let mut r = register_request(&broker(), dv(1), TOPICS);
    r.ext_fields.as_mut().unwrap().insert("heartbeatTimeoutMillis", "10000");
    assert_eq!(b.request(r).await.code, 0);
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(route(&mut b, "TopicA").await.is_some());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(route(&mut b, "TopicA").await.is_none(), "10 s timeout, 1 s scan: gone by 13 s");
}

/// A re-registration after expiry brings the routes back: the broker is simply new again.
#[tokio::test(start_paused = true)]
async fn expired_broker_can_register_again() {
    let server = start_with(config()).await;
    let mut b = Client::connect(server.addr).await;
    register(&mut b, &broker(), dv(1), TOPICS).await;
    tokio::time::sleep(Duration::from_secs(130)).await;
    assert!(route(&mut b, "TopicA").await.is_none());
    register(&mut b, &broker(), dv(1), TOPICS).await;
    assert!(route(&mut b, "TopicA").await.is_some());
}

/// A server that closes connections idle for 60 s, and a broker registered over one.
async fn broker_on_server_closing_idle_after_60s() -> (TestServer, Client) {
    let mut cfg = test_config();
    cfg.server_channel_max_idle_time_seconds = 60;
    let server = start_with(cfg).await;
    let mut b = Client::connect(server.addr).await;
    register(&mut b, &broker(), dv(1), TOPICS).await;
    (server, b)
}

/// A connection that keeps asking stays open however long it lives, and is closed once it has been silent
/// for `serverChannelMaxIdleTimeSeconds`, not before.
#[tokio::test(start_paused = true)]
async fn idle_time_counts_from_the_last_request() {
    let (_server, mut b) = broker_on_server_closing_idle_after_60s().await;
    // Registering again every 40 s (its heartbeat) keeps the broker too: each reply proves the connection open.
    for version in 2..8 {
        tokio::time::sleep(Duration::from_secs(40)).await;
        register(&mut b, &broker(), dv(version), TOPICS).await;
    }
    tokio::time::sleep(Duration::from_secs(55)).await;
    register(&mut b, &broker(), dv(8), TOPICS).await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    b.assert_closed_without_reply(Duration::from_secs(1)).await;
}

/// Java closes connections idle for `serverChannelMaxIdleTimeSeconds`; a broker on such a connection goes.
#[tokio::test(start_paused = true)]
async fn idle_connection_is_closed_and_its_broker_removed() {
    let (server, mut b) = broker_on_server_closing_idle_after_60s().await;
    tokio::time::sleep(Duration::from_secs(70)).await;
    b.assert_closed_without_reply(Duration::from_secs(1)).await;
    let mut client = Client::connect(server.addr).await;
    assert!(route(&mut client, "TopicA").await.is_none());
}
