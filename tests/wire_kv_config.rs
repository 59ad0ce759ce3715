//! KV config (100, 101, 102, 219), ordered topics, and the NameServer config codes (318, 319) over the wire.

mod common;

use bytes::Bytes;
use common::*;

/// RequestProcessorTest#testProcessRequest_PutKVConfig, #..._GetKVConfigReturnNotNull,
/// #..._GetKVConfigReturnNull and #..._DeleteKVConfig.
#[tokio::test]
async fn put_get_delete() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(kv_put("namespace", "key", "value")).await;
    assert_eq!((resp.code, resp.remark), (0, None));
    let resp = c.request(kv_get("namespace", "key")).await;
    assert_eq!((resp.code, resp.ext("value")), (0, Some("value")));
    let resp = c.request(kv_get("namespace", "other")).await;
    assert_eq!(resp.code, 22);
    assert_eq!(resp.remark.as_deref(), Some("No config item, Namespace: namespace Key: other"));
    assert_eq!(resp.ext_fields, Some(ext(&[])));
    let resp = c.request(kv_delete("namespace", "key")).await;
    assert_eq!(resp.code, 0);
    assert_eq!(c.request(kv_get("namespace", "key")).await.code, 22);
    assert_eq!(c.request(kv_delete("nope", "key")).await.code, 0, "always SUCCESS");
}

#[tokio::test]
async fn kv_errors_are_clear() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(request(100, &[("key", "k"), ("value", "v")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("namespace or key is null")));
    let resp = c.request(request(100, &[("namespace", "n"), ("key", "k")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("value is null")));
    let resp = c.request(request(102, &[("namespace", "n")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("namespace or key is null")));
}

/// RequestProcessorTest#testGetKVListByNamespace.
#[tokio::test]
async fn kv_list_by_namespace() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let resp = c.request(request(219, &[("namespace", "default-namespace-1")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (22, Some("No config item, Namespace: default-namespace-1")));
    c.request(kv_put("default-namespace-1", "b", "2")).await;
    c.request(kv_put("default-namespace-1", "a", "1")).await;
    let resp = c.request(request(219, &[("namespace", "default-namespace-1")])).await;
    assert_eq!((resp.code, &resp.body[..]), (0, &br#"{"table":{"a":"1","b":"2"}}"#[..]));
    c.request(kv_delete("default-namespace-1", "a")).await;
    c.request(kv_delete("default-namespace-1", "b")).await;
    let resp = c.request(request(219, &[("namespace", "default-namespace-1")])).await;
    assert_eq!((resp.code, &resp.body[..]), (0, &br#"{"table":{}}"#[..]), "the namespace stays");
}

/// KV survives a restart, in Java's file format.
#[tokio::test]
async fn kv_survives_restart() {
    let config = test_config();
    let path = config.kv_config_path.clone();
    {
        let server = start_with(config.clone()).await;
        let mut c = Client::connect(server.addr).await;
        assert_eq!(c.request(kv_put("ORDER_TOPIC_CONFIG", "TopicOrder", "broker-a:4;broker-b:4")).await.code, 0);
        assert_eq!(c.request(kv_put("ns", "k", "v\"quoted\"")).await.code, 0);
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicOrder":"broker-a:4;broker-b:4"},"ns":{"k":"v\"quoted\""}}}"#
    );
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(kv_get("ns", "k")).await.ext("value"), Some("v\"quoted\""));
    assert_eq!(c.request(kv_get("ORDER_TOPIC_CONFIG", "TopicOrder")).await.ext("value"), Some("broker-a:4;broker-b:4"));
}

#[tokio::test]
async fn malformed_kv_file_stops_startup_with_a_clear_error() {
    let config = test_config();
    std::fs::write(&config.kv_config_path, b"{\"configTable\":{").unwrap();
    let err = rocketns::NameServer::bind(config, None).await.err().expect("refused");
    assert!(err.to_string().contains("KV config file"), "{err}");
}

const TOPICS: &[(&str, i32, i32)] = &[("TopicOrder", 4, 6), ("Plain", 4, 6)];

/// With `orderMessageEnable`, routes carry `orderTopicConf`; a KV change re-encodes that topic only, and a
/// broker's registration reply lists the ordered topics (`returnOrderTopicConfigToBroker`).
#[tokio::test]
async fn ordered_topics() {
    let mut config = test_config();
    config.order_message_enable = true;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let broker = Broker::new("c", "broker-a", 0, "127.0.0.1:10911");
    let resp = register(&mut c, &broker, dv(1), TOPICS).await;
    assert!(resp.body.is_empty(), "no ORDER_TOPIC_CONFIG namespace yet");
    assert!(route(&mut c, "TopicOrder").await.unwrap().get("orderTopicConf").is_none(), "omitted, not empty");
    c.request(kv_put("ORDER_TOPIC_CONFIG", "TopicOrder", "broker-a:4")).await;
    let r = route(&mut c, "TopicOrder").await.unwrap();
    assert_eq!(r["orderTopicConf"], "broker-a:4");
    let legacy = c.request(route_request("TopicOrder", 317)).await;
    assert!(std::str::from_utf8(&legacy.body).unwrap().contains(r#","orderTopicConf":"broker-a:4","queueDatas""#));
    assert!(route(&mut c, "Plain").await.unwrap().get("orderTopicConf").is_none());
    let resp = register(&mut c, &broker, dv(1), TOPICS).await;
    assert_eq!(&resp.body[..], br#"{"table":{"TopicOrder":"broker-a:4"}}"#);
    c.request(kv_delete("ORDER_TOPIC_CONFIG", "TopicOrder")).await;
    assert!(route(&mut c, "TopicOrder").await.unwrap().get("orderTopicConf").is_none());
}

/// Puts and deletes of one ordered topic from many connections at once: the route ends with the KV store's
/// value, whatever order they arrived in (the file and the routes apply them in one order).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_order_conf_changes_leave_the_route_as_the_kv_store() {
    let mut config = test_config();
    config.order_message_enable = true;
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker::new("c", "broker-a", 0, "127.0.0.1:10911"), dv(1), TOPICS).await;
    for round in 0..5 {
        let changes: Vec<_> = (0..16)
            .map(|i| {
                let addr = server.addr;
                tokio::spawn(async move {
                    let mut c = Client::connect(addr).await;
                    let change = if i % 5 == 4 {
                        kv_delete("ORDER_TOPIC_CONFIG", "TopicOrder")
                    } else {
                        kv_put("ORDER_TOPIC_CONFIG", "TopicOrder", &format!("broker-a:{}", i + 1))
                    };
                    assert_eq!(c.request(change).await.code, 0);
                })
            })
            .collect();
        for change in changes {
            change.await.expect("change answered");
        }
        let stored = c.request(kv_get("ORDER_TOPIC_CONFIG", "TopicOrder")).await;
        let routed = route(&mut c, "TopicOrder").await.unwrap();
        let routed = routed.get("orderTopicConf").and_then(|v| v.as_str());
        assert_eq!(routed, stored.ext("value"), "round {round}");
    }
}

#[tokio::test]
async fn ordered_topics_need_order_message_enable_and_follow_its_runtime_change() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    register(&mut c, &Broker::new("c", "broker-a", 0, "127.0.0.1:10911"), dv(1), TOPICS).await;
    c.request(kv_put("ORDER_TOPIC_CONFIG", "TopicOrder", "broker-a:4")).await;
    assert!(route(&mut c, "TopicOrder").await.unwrap().get("orderTopicConf").is_none(), "off by default");
    let resp = c.request(update_config("orderMessageEnable=true")).await;
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert_eq!(route(&mut c, "TopicOrder").await.unwrap()["orderTopicConf"], "broker-a:4");
}

async fn config_text(c: &mut Client) -> String {
    let resp = c.request(request(319, &[])).await;
    assert_eq!(resp.code, 0);
    String::from_utf8(resp.body.to_vec()).unwrap()
}

/// RequestProcessorTest#testGetConfig and #testUpdateConfig, and GET_NAMESRV_CONFIG's sorted lines.
#[tokio::test]
async fn get_and_update_config() {
    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let text = config_text(&mut c).await;
    let keys: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(text.contains("enableTopicList=true\n") && text.contains("listenPort=0\n"), "{text}");
    assert_eq!(c.request(update_config("enableTopicList=false")).await.code, 0);
    assert!(config_text(&mut c).await.contains("enableTopicList=false\n"));
    let resp = c.request(request(224, &[("cluster", "c")])).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("disable")), "applied at once");
    let mut garbled = request(318, &[]);
    garbled.body = Bytes::from_static(b"enableTopicList=\xff\xfe");
    let resp = c.request(garbled).await;
    assert_eq!((resp.code, resp.remark.as_deref()), (1, Some("string2Properties error")));
    let mut empty = request(318, &[]);
    empty.body = Bytes::new();
    assert_eq!(c.request(empty).await.code, 0, "no body: nothing to do");
}

/// RequestProcessorTest#testProcessRequest_UpdateConfigPath, and every other refused update: each answers an
/// error, changes nothing in memory and writes nothing to the `-c` file.
#[tokio::test]
async fn refused_config_updates_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("namesrv.properties");
    std::fs::write(&file, "enableTopicList=true\n").unwrap();
    let server = start_with_file(test_config(), Some(file.clone())).await;
    let mut c = Client::connect(server.addr).await;
    let before = config_text(&mut c).await;
    let black = "Can not update config in black list.";
    let cases: &[(&str, i32, &str)] = &[
        ("configStorePath=/tmp/evil", 16, black),
        ("kvConfigPath=/tmp/evil", 16, black),
        ("configBlackList=", 16, black),
        ("rocketmqHome=/tmp", 16, black),
        ("enableTopicList=false\nconfigStorePath=/tmp/evil", 16, black),
        ("listenPort=1", 16, "config key listenPort can only be set at start-up (in the -c file)"),
        ("bindAddress=0.0.0.0", 16, "config key bindAddress can only be set at start-up (in the -c file)"),
        ("serverWorkerThreads=1", 16, "config key serverWorkerThreads can only be set at start-up (in the -c file)"),
        ("frameMaxLength=99999999999", 16, "config key frameMaxLength can only be set at start-up (in the -c file)"),
        ("noSuchKey=1", 16, "unknown config key noSuchKey"),
        (
            "enableTopicList=false\\n* * * * * root touch /tmp/pwned",
            1,
            "the value of config key enableTopicList contains a line break",
        ),
        (
            "scanNotActiveBrokerInterval=often",
            1,
            "invalid value \"often\" for scanNotActiveBrokerInterval: expected an integer from 0 to 9223372036854775807 (a Java long)",
        ),
    ];
    for (text, code, remark) in cases {
        let resp = c.request(update_config(text)).await;
        assert_eq!((resp.code, resp.remark.as_deref()), (*code, Some(*remark)), "{text:?}");
        assert_eq!(config_text(&mut c).await, before, "{text:?} changed nothing");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "enableTopicList=true\n", "{text:?} wrote nothing");
    }
    assert!(!std::path::Path::new("/tmp/evil").exists());
}

/// An accepted update is written back to the `-c` file only; without one nothing is written anywhere.
#[tokio::test]
async fn accepted_update_is_written_to_the_c_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("namesrv.properties");
    std::fs::write(&file, "enableTopicList=true\n").unwrap();
    let server = start_with_file(test_config(), Some(file.clone())).await;
    let mut c = Client::connect(server.addr).await;
    assert_eq!(c.request(update_config("scanNotActiveBrokerInterval=7000\nenableAllTopicList=false")).await.code, 0);
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("scanNotActiveBrokerInterval=7000\n") && written.contains("enableAllTopicList=false\n"));
    let mut reread = rocketns::NamesrvConfig::default();
    reread.apply_properties(&written, "test").unwrap();
    assert_eq!(reread.scan_not_active_broker_interval, 7000, "the file reads back");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no stray files");

    let server = start().await;
    let mut c = Client::connect(server.addr).await;
    let home_file = std::path::Path::new(&rocketns::NamesrvConfig::default().config_store_path).to_path_buf();
    let existed = home_file.exists();
    assert_eq!(c.request(update_config("enableAllTopicList=false")).await.code, 0);
    assert_eq!(home_file.exists(), existed, "no -c file: nothing written to configStorePath");
}
