//! Replicas that disagree, seen (src/service/peer_compare.rs): two nodes that are each other's peer compare
//! their brokers every scan period, and a broker that registered with one of them only, or whose last
//! registration one of them missed, shows on both nodes' `rocketns_peer_divergence` and /cluster; a peer
//! that tells no DataVersions (the Java NameServer) is compared on membership, and one that answers garbage
//! or too much is only unreachable. Made to fail once by comparing against an empty table of ours (every
//! peer broker was `missing_here`), and once without the DataVersions (`data_version` stayed 0).

mod common;

use std::time::Duration;

use common::*;
use rocketns::NamesrvConfig;

/// Short enough that a test waits a few of them: the expiry scan's period, which the comparison uses.
const SCAN_MS: u64 = 200;
const WITHIN: Duration = Duration::from_secs(10);

/// A node on `port` whose peer is `peer_port`, with its HTTP port.
async fn node(port: u16, peers: &str) -> (TestServer, u16) {
    let metrics_port = free_port();
    let config = NamesrvConfig {
        listen_port: port,
        metrics_port,
        namesrv_peers: peers.into(),
        scan_not_active_broker_interval: SCAN_MS,
        warm_restart: false,
        ..test_config()
    };
    (start_with(config).await, metrics_port)
}

/// Two nodes, each the other's peer.
async fn pair() -> ((TestServer, u16), (TestServer, u16)) {
    let (a, b) = (free_port(), free_port());
    let first = node(a, &format!("127.0.0.1:{b}")).await;
    let second = node(b, &format!("127.0.0.1:{a}")).await;
    (first, second)
}

fn divergence(peer: u16, kind: &str) -> String {
    format!(r#"rocketns_peer_divergence{{peer="127.0.0.1:{peer}",kind="{kind}"}}"#)
}

/// Waits until the metrics of the node on `metrics_port` say `series` is `value`.
async fn until(metrics_port: u16, series: &str, value: f64) {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let (_, text) = http_get(metrics_port, "/metrics").await;
        if metric_in(&text, series) == Some(value) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{series} not {value} within {WITHIN:?}:\n{text}");
        tokio::time::sleep(Duration::from_millis(SCAN_MS / 2)).await;
    }
}

fn peers_json(cluster: &str) -> serde_json::Value {
    let cluster: serde_json::Value = serde_json::from_str(cluster).expect("/cluster is JSON");
    cluster["peers"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_one_node_lacks_shows_on_both_and_clears_when_it_registers() {
    let ((a, a_http), (b, b_http)) = pair().await;
    let (a_port, b_port) = (a.addr.port(), b.addr.port());
    let shared = Broker::new("c", "broker-a", 0, "10.0.0.1:10911");
    let (mut to_a, mut to_b) = (Client::connect(a.addr).await, Client::connect(b.addr).await);
    assert_eq!(register(&mut to_a, &shared, dv(1), &[("T1", 4, 4), ("T0", 4, 4)]).await.code, 0);
    assert_eq!(register(&mut to_b, &shared, dv(1), &[("T1", 4, 4), ("T0", 4, 4)]).await.code, 0);
    until(a_http, &format!(r#"rocketns_peer_up{{peer="127.0.0.1:{b_port}"}}"#), 1.0).await;
    for kind in ["missing_here", "extra_here", "data_version"] {
        until(a_http, &divergence(b_port, kind), 0.0).await;
        until(b_http, &divergence(a_port, kind), 0.0).await;
    }

    // A broker that reaches A only: extra on A, missing on B.
    let one_sided = Broker::new("c", "broker-b", 0, "10.0.0.2:10911");
    assert_eq!(register(&mut to_a, &one_sided, dv(1), &[("T2", 4, 4), ("T0", 4, 4)]).await.code, 0);
    until(a_http, &divergence(b_port, "extra_here"), 1.0).await;
    until(b_http, &divergence(a_port, "missing_here"), 1.0).await;
    let (status, cluster) = http_get(a_http, "/cluster").await;
    assert_eq!(status, 200);
    let peers = peers_json(&cluster);
    assert_eq!(peers[0]["peer"], format!("127.0.0.1:{b_port}"), "{cluster}");
    assert_eq!(peers[0]["state"], "disagree");
    assert_eq!(peers[0]["peerKind"], "rocketns");
    assert_eq!(peers[0]["extraHere"]["brokers"], serde_json::json!(["c/broker-b/0@10.0.0.2:10911"]));
    assert!(cluster.contains(r#""brokerAddrTable""#), "the cluster info is still there: {cluster}");

    // It reaches B too: they agree again.
    assert_eq!(register(&mut to_b, &one_sided, dv(1), &[("T2", 4, 4), ("T0", 4, 4)]).await.code, 0);
    until(a_http, &divergence(b_port, "extra_here"), 0.0).await;
    until(b_http, &divergence(a_port, "missing_here"), 0.0).await;

    // A registration that changed broker-a's topics reaches A only: both have it, with other versions.
    assert_eq!(register(&mut to_a, &shared, dv(2), &[("T1", 4, 4), ("T0", 4, 4), ("T3", 4, 4)]).await.code, 0);
    until(a_http, &divergence(b_port, "data_version"), 1.0).await;
    until(b_http, &divergence(a_port, "data_version"), 1.0).await;
    assert_eq!(register(&mut to_b, &shared, dv(2), &[("T1", 4, 4), ("T0", 4, 4), ("T3", 4, 4)]).await.code, 0);
    until(a_http, &divergence(b_port, "data_version"), 0.0).await;
}

const ONE_BROKER: &str = r#"{"brokerAddrTable":{"b":{"brokerAddrs":{0:"10.0.0.9:10911"},"brokerName":"b","cluster":"c"}},"clusterAddrTable":{"c":["b"]}}"#;

/// A peer that tells no DataVersions, as the Java NameServer: compared on membership alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_peer_is_compared_on_its_brokers() {
    let java = scripted_peer(|asked| match asked.code {
        106 => (0, ONE_BROKER),
        _ => (1, ""),
    });
    let (ours, http) = node(free_port(), &java.to_string()).await;
    let mut broker = Client::connect(ours.addr).await;
    let b = Broker::new("c", "b", 0, "10.0.0.9:10911");
    assert_eq!(register(&mut broker, &b, dv(1), &[("T1", 4, 4), ("T0", 4, 4)]).await.code, 0);
    let peer = java.port();
    for kind in ["missing_here", "extra_here", "data_version"] {
        until(http, &divergence(peer, kind), 0.0).await;
    }
    let (_, cluster) = http_get(http, "/cluster").await;
    assert_eq!(peers_json(&cluster)[0]["peerKind"], "other (membership only)", "{cluster}");
    assert_eq!(
        register(&mut broker, &Broker::new("c", "x", 0, "10.0.0.8:10911"), dv(1), &[("T1", 4, 4), ("T0", 4, 4)])
            .await
            .code,
        0
    );
    until(http, &divergence(peer, "extra_here"), 1.0).await;
}

/// A peer that answers garbage, and one whose cluster info is over the bound: unreachable, no divergence
/// told, and the node serves as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_answers_garbage_or_too_much_is_only_unreachable() {
    fn huge() -> &'static str {
        static HUGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        HUGE.get_or_init(|| {
            let broker = r#""bNNNNNNN":{"brokerAddrs":{0:"10.0.0.9:10911"},"brokerName":"b","cluster":"c"}"#;
            format!(r#"{{"brokerAddrTable":{{{}}}}}"#, vec![broker; 60_000].join(","))
        })
    }
    assert!(huge().len() > rocketns::service::peer_compare::MAX_CLUSTER_INFO);
    let garbage = scripted_peer(|_| (0, "{\"brokerAddrTable\":["));
    let too_much = scripted_peer(|_| (0, huge()));
    let (ours, http) = node(free_port(), &format!("{garbage};{too_much}")).await;
    for peer in [garbage.port(), too_much.port()] {
        until(http, &format!(r#"rocketns_peer_up{{peer="127.0.0.1:{peer}"}}"#), 0.0).await;
        let (_, text) = http_get(http, "/metrics").await;
        assert_eq!(metric_in(&text, &divergence(peer, "missing_here")), None, "{text}");
    }
    let (_, cluster) = http_get(http, "/cluster").await;
    let peers = peers_json(&cluster);
    assert_eq!(peers[1]["state"], "unreachable", "{cluster}");
    assert!(peers[1]["error"].as_str().unwrap_or("").contains("more than"), "{cluster}");
    let mut client = Client::connect(ours.addr).await;
    assert_eq!(client.request(request(106, &[])).await.code, 0);
}
