//! Cluster-test mode (`clusterTest=true`, `productEnvName=prod`): a route lookup that misses locally is asked
//! of the product environment's NameServer (here another rocketns, or a stand-in that never answers), found
//! through `rocketmq.namesrv.addr` or the address server. Answers as Java's `ClusterTestRequestProcessor`:
//! fastjson's default style, `orderTopicConf` from the KV store on local hits, TOPIC_NOT_EXIST with Java's
//! remark when neither has the topic. Every other code works as usual (the 4.x behaviour; COMPATIBILITY.md).
//! tests/java/cluster-test.sh compares the same lookups with the Java NameServer 4.9.7.

mod common;

use std::time::Duration;

use common::{Broker, Client, dv, kv_put, register, request};
use rocketns::config::ClientProperties;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const FAQ: &str = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

fn properties(namesrv_addr: Option<String>, domain: &str) -> ClientProperties {
    ClientProperties { namesrv_addr, namesrv_domain: domain.to_string(), namesrv_domain_subgroup: "nsaddr".to_string() }
}

async fn cluster_test_server(properties: ClientProperties, metrics_port: u16) -> common::TestServer {
    let mut config = common::test_config();
    config.cluster_test = true;
    config.product_env_name = "prod".into();
    config.metrics_port = metrics_port;
    common::start_with_properties(config, properties).await
}

/// A product NameServer routing PRODT and P2 to broker-p, and the broker's connection (its close would
/// remove the broker).
async fn product() -> (common::TestServer, Client) {
    let server = common::start().await;
    let mut c = Client::connect(server.addr).await;
    register(
        &mut c,
        &Broker::new("ProdCluster", "broker-p", 0, "127.0.0.1:30911"),
        dv(1),
        &[("PRODT", 4, 6), ("P2", 4, 6)],
    )
    .await;
    (server, c)
}

/// A broker of the test environment routing LOCALT and LOCAL2, registered over `c`.
async fn register_local_broker(c: &mut Client) {
    let broker = Broker::new("TestCluster", "broker-t", 0, "127.0.0.1:40911");
    register(c, &broker, dv(1), &[("LOCALT", 2, 6), ("LOCAL2", 2, 6)]).await;
}

/// GET_ROUTEINFO_BY_TOPIC as a 5.x client sends it (which would get standard JSON in the normal mode).
async fn lookup(c: &mut Client, topic: &str) -> rocketns::remoting::RemotingCommand {
    c.request(common::route_request(topic, 479)).await
}

#[tokio::test]
async fn misses_are_asked_of_the_product_environment() {
    let (product, _broker) = product().await;
    let metrics_port = common::free_port();
    let server = cluster_test_server(properties(Some(product.addr.to_string()), "unused"), metrics_port).await;
    let mut c = Client::connect(server.addr).await;

    // A remote hit: the product's route, re-encoded as Java's TopicRouteData#encode() writes it, which is
    // what the product itself answers a client older than 4.9.4.
    let remote = lookup(&mut c, "PRODT").await;
    assert_eq!(remote.code, 0);
    let mut p = Client::connect(product.addr).await;
    let fastjson = p.request(common::route_request("PRODT", 373)).await;
    assert_eq!(remote.body, fastjson.body);
    assert!(String::from_utf8_lossy(&remote.body).contains(r#"{0:"127.0.0.1:30911"}"#));

    // A miss in both: Java's remark.
    let miss = lookup(&mut c, "NOWHERE").await;
    assert_eq!(miss.code, 17);
    assert_eq!(
        miss.remark.as_deref(),
        Some(&*format!("No topic route info in name server for the topic: NOWHERE{FAQ}"))
    );

    // Every other code as usual: a broker registers here, and its topic is a local hit, with orderTopicConf
    // from the KV store although orderMessageEnable is off.
    register_local_broker(&mut c).await;
    let put = kv_put("ORDER_TOPIC_CONFIG", "LOCALT", "broker-t:2");
    assert_eq!(c.request(put).await.code, 0);
    let local = lookup(&mut c, "LOCALT").await;
    assert_eq!(local.code, 0);
    let body = String::from_utf8_lossy(&local.body).to_string();
    assert_eq!(
        body,
        r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:40911"},"brokerName":"broker-t","cluster":"TestCluster","enableActingMaster":false}],"filterServerTable":{},"orderTopicConf":"broker-t:2","queueDatas":[{"brokerName":"broker-t","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#
    );
    assert_eq!(c.request(request(106, &[])).await.code, 0, "cluster info answers");

    // The product NameServer goes away: its topics are misses.
    product.shutdown().await;
    let down = lookup(&mut c, "P2").await;
    assert_eq!(
        (down.code, down.remark.as_deref()),
        (17, Some(&*format!("No topic route info in name server for the topic: P2{FAQ}")))
    );

    let text = tokio::task::spawn_blocking(move || common::metrics_text(metrics_port)).await.unwrap();
    let count =
        |result: &str| common::metric_in(&text, &format!("rocketns_cluster_test_lookups_total{{result=\"{result}\"}}"));
    assert_eq!((count("found"), count("not_found"), count("failed")), (Some(1.0), Some(1.0), Some(1.0)));
}

/// A product NameServer that accepts and never answers holds up nothing: a local hit asked after a remote
/// lookup on the same connection is answered first; the lookup gives up after Java's 5 s.
#[tokio::test]
async fn a_silent_product_environment_holds_up_no_request() {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let _held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let server = cluster_test_server(properties(Some(silent_addr), "unused"), 0).await;
    let mut c = Client::connect(server.addr).await;
    register_local_broker(&mut c).await;
    let remote = c.send(common::route_request("PRODT", 479), rocketns::remoting::SerializeType::Json).await;
    let local = c.send(common::route_request("LOCALT", 479), rocketns::remoting::SerializeType::Json).await;
    let started = std::time::Instant::now();
    let first = c.read_response().await.expect("a reply");
    assert_eq!((first.opaque, first.code), (local, 0), "the local hit is answered first");
    assert!(started.elapsed() < Duration::from_secs(2), "and at once: {:?}", started.elapsed());
    let second = tokio::time::timeout(Duration::from_secs(10), c.read_response()).await.expect("within 10 s");
    let second = second.expect("a reply");
    assert_eq!((second.opaque, second.code), (remote, 17));
    assert!(started.elapsed() >= Duration::from_secs(4), "the lookup waited for its timeout");
}

/// Without `rocketmq.namesrv.addr` the product NameServer's address comes from the address server, asked
/// as Java's admin client asks it: GET http://{domain}/rocketmq/{subgroup}-{productEnvName}?nofix=1.
#[tokio::test]
async fn the_address_server_names_the_product_namesrv() {
    let (product, _broker) = product().await;
    let address_server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let domain = address_server.local_addr().unwrap().to_string();
    let answer = format!("{}\n", product.addr);
    let asked = tokio::spawn(async move {
        let (mut stream, _) = address_server.accept().await.unwrap();
        let mut request = Vec::new();
        while !request.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            if stream.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            request.push(byte[0]);
        }
        let reply = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
        stream.write_all(reply.as_bytes()).await.unwrap();
        String::from_utf8(request).unwrap()
    });
    let server = cluster_test_server(properties(None, &domain), 0).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(lookup(&mut c, "PRODT").await.code, 0);
    let request = asked.await.unwrap();
    assert!(request.starts_with("GET /rocketmq/nsaddr-prod?nofix=1 HTTP/1.0\r\n"), "{request}");
}
