//! The audit log over the wire: every request that changes state other than a broker's own registration
//! gives one JSON line in `auditLogPath` (refused ones too, saying why), and `rocketns_audit_events_total`
//! counts them; `logFormat=json` makes the ordinary log JSON lines, audit lines under `rocketns::ops::audit`.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use rocketns::NamesrvConfig;
use rocketns::processor::acl::{ACCESS_KEY, SIGNATURE, signature};
use serde_json::Value;

/// The audit file's lines, once there are `n` of them (the file is written by a thread of its own).
async fn audit_lines(path: &std::path::Path, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("every audit line is JSON")).collect();
        if lines.len() >= n || tokio::time::Instant::now() > deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn audited_config() -> (NamesrvConfig, std::path::PathBuf, u16) {
    let config = test_config();
    let path = config_dir(&config).join("audit.jsonl");
    let metrics_port = free_port();
    let config = NamesrvConfig { audit_log_path: path.display().to_string(), metrics_port, ..config };
    (config, path, metrics_port)
}

// Two workers: the metrics port is read with a blocking client below, while the server serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_audited_request_gives_one_line_with_its_fields() {
    let (config, path, metrics_port) = audited_config();
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let me = c.stream.local_addr().expect("local addr").to_string();
    let broker = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911");
    // Not audited: a broker's own registration, and reads.
    register(&mut c, &broker, dv(1), &[("T", 8, 6), ("U", 8, 6)]).await;
    assert_eq!(c.request(route_request("T", 479)).await.code, 0);
    assert_eq!(c.request(kv_get("ns", "k")).await.code, 22);

    let mut topic = request(217, &[("topic", "Admin")]);
    topic.body = Bytes::from_static(
        br#"{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#,
    );
    let audited = [
        (kv_put("ns", "k", "v"), 0),
        (kv_delete("ns", "k"), 0),
        (topic, 0),
        (request(216, &[("topic", "Admin")]), 0),
        (request(205, &[("brokerName", "broker-a")]), 0),
        (request(327, &[("brokerName", "broker-a")]), 0),
        (update_config("orderMessageEnable=true"), 0),
        // Refused: a key no remote update may change.
        (update_config("listenPort=1234"), 16),
        (request(100, &[("namespace", "ns"), ("key", "k")]), 1),
        (unregister_request(&broker), 0),
    ];
    let n = audited.len();
    for (req, code) in audited {
        assert_eq!(c.request(req).await.code, code);
    }
    let lines = audit_lines(&path, n).await;
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&path).expect("audit file").permissions().mode() & 0o777, 0o640);
    let names: Vec<&str> = lines.iter().map(|l| l["request"].as_str().expect("request name")).collect();
    assert_eq!(
        names,
        [
            "PUT_KV_CONFIG",
            "DELETE_KV_CONFIG",
            "REGISTER_TOPIC_IN_NAMESRV",
            "DELETE_TOPIC_IN_NAMESRV",
            "WIPE_WRITE_PERM_OF_BROKER",
            "ADD_WRITE_PERM_OF_BROKER",
            "UPDATE_NAMESRV_CONFIG",
            "UPDATE_NAMESRV_CONFIG",
            "PUT_KV_CONFIG",
            "UNREGISTER_BROKER",
        ],
        "each once, in order, and nothing else: {lines:#?}"
    );
    for line in &lines {
        assert_eq!(line["remote"], me.as_str());
        assert!(line["time"].as_str().is_some_and(|t| t.starts_with("20") && t.ends_with('Z')), "{line}");
        assert!(line["accessKey"].is_null(), "unsigned");
    }
    let put = &lines[0];
    assert_eq!(put["code"], 100);
    assert_eq!(put["args"], serde_json::json!({"namespace": "ns", "key": "k", "value": "v"}));
    assert_eq!((put["outcome"].as_str(), put["responseCode"].as_i64()), (Some("success"), Some(0)));
    assert_eq!(lines[2]["args"]["topic"], "Admin");
    assert!(lines[2]["args"]["body"].as_str().is_some_and(|b| b.contains("queueDatas")));
    assert_eq!(lines[6]["args"]["body"], "orderMessageEnable=true");
    let refused = &lines[7];
    assert_eq!((refused["outcome"].as_str(), refused["responseCode"].as_i64()), (Some("refused"), Some(16)));
    assert!(refused["remark"].as_str().is_some_and(|r| r.contains("listenPort")), "says why: {refused}");
    assert_eq!(lines[8]["remark"], "value is null");
    assert_eq!(lines[9]["args"]["brokerName"], "broker-a");

    let text = metrics_text(metrics_port);
    assert_eq!(metric_in(&text, "rocketns_audit_events_total{outcome=\"success\"}"), Some(8.0));
    assert_eq!(metric_in(&text, "rocketns_audit_events_total{outcome=\"refused\"}"), Some(2.0));
    assert_eq!(metric_in(&text, "rocketns_audit_lines_lost_total"), Some(0.0));
}

/// Refused by access control: the line names the access key that signed, or says no signature came.
#[tokio::test]
async fn signed_and_refused_requests_name_their_caller() {
    let (config, path, _) = audited_config();
    let creds = config_dir(&config).join("acl.properties");
    std::fs::write(&creds, "admin-ak=admin-secret\n").expect("credentials");
    let config = NamesrvConfig { acl_enable: true, acl_credentials_path: creds.display().to_string(), ..config };
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let put = || kv_put("ns", "k", "v");
    assert_eq!(c.request(put()).await.code, 16);
    let mut signed = put();
    let ext = signed.ext_fields.get_or_insert_with(Default::default);
    ext.insert(ACCESS_KEY, "admin-ak");
    let sig = signature("admin-secret", ext, &signed.body);
    ext.insert(SIGNATURE, sig);
    assert_eq!(c.request(signed).await.code, 0);

    let lines = audit_lines(&path, 2).await;
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(lines[0]["outcome"], "refused");
    assert!(lines[0]["remark"].as_str().is_some_and(|r| r.contains("needs an ACL signature")), "{}", lines[0]);
    assert_eq!((lines[1]["outcome"].as_str(), lines[1]["accessKey"].as_str()), (Some("success"), Some("admin-ak")));
    assert!(lines[1]["args"].get("Signature").is_none(), "the signature is not logged");
}

/// The real binary with `logFormat=json` and no `auditLogPath`: every log line is JSON, and an audited
/// request's line is among them under the audit target.
#[test]
fn json_log_carries_the_audit_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = properties_file(dir.path(), 0, "logFormat=json\n");
    let (mut child, addr, logs) = spawn_binary_with_logs(&file);
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    let put = kv_put("ns", "k", "v");
    assert_eq!(blocking_request(&mut stream, &put).map(|r| r.code), Some(0));
    let audit = log_line(&logs, "rocketns::audit", Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    let log: Value = serde_json::from_str(&audit).expect("a JSON log line");
    assert_eq!(log["target"], "rocketns::audit");
    let line: Value = serde_json::from_str(log["message"].as_str().expect("message")).expect("the audit line");
    assert_eq!((line["request"].as_str(), line["outcome"].as_str()), (Some("PUT_KV_CONFIG"), Some("success")));
    for other in logs.lock().expect("logs").iter() {
        serde_json::from_str::<Value>(other).unwrap_or_else(|e| panic!("not JSON ({e}): {other}"));
    }
}

/// A line shows at most 16 header fields, each value cut at 128 bytes and saying its whole length, however
/// large the request: a client sending a megabyte a field, or 10,000 fields, makes lines of a few
/// kilobytes, not megabytes (before, each line copied every field whole).
#[tokio::test]
async fn audit_lines_are_bounded_whatever_the_request() {
    let (config, path, _) = audited_config();
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let huge = "v".repeat(1 << 20);
    let fields: Vec<(String, String)> = (0..10_000).map(|i| (format!("k{i}"), "x".to_string())).collect();
    let mut many = request(318, &[]);
    many.ext_fields = Some(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
    assert_eq!(c.request(kv_put("ns", "k", &huge)).await.code, 0);
    assert_eq!(c.request(many).await.code, 0, "an empty config update is answered");
    let lines = audit_lines(&path, 2).await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.lines().all(|l| l.len() < 8 * 1024),
        "lines of {:?} bytes",
        text.lines().map(str::len).collect::<Vec<_>>()
    );
    let value = lines[0]["args"]["value"].as_str().unwrap();
    assert!(value.ends_with("...(1048576 bytes)") && value.len() < 200, "{value:?}");
    assert_eq!(lines[1]["args"].as_object().unwrap().len(), 17, "16 fields and their count");
    assert_eq!(lines[1]["args"]["fieldsNotShown"], 10_000 - 16);
}

/// A client repeating an audited request gets at most 1,000 lines at once and 100 a second after that into
/// the audit log; the rest are counted lost (`rocketns_audit_lines_lost_total`), so that it cannot make
/// the server fill the disk as fast as it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_lines_are_written_at_a_bounded_rate() {
    let (config, path, metrics_port) = audited_config();
    let server = start_with(config).await;
    let mut c = Client::connect(server.addr).await;
    let started = tokio::time::Instant::now();
    for _ in 0..3000 {
        assert_eq!(c.request(kv_delete("ns", "absent")).await.code, 0);
    }
    let seconds = started.elapsed().as_secs_f64();
    let lost = tokio::task::spawn_blocking(move || metric(metrics_port, "rocketns_audit_lines_lost_total").unwrap())
        .await
        .unwrap();
    let written = audit_lines(&path, 3000 - lost as usize).await.len();
    assert_eq!(written + lost as usize, 3000, "every request is a line or a lost one");
    assert!(written <= 1000 + (100.0 * seconds).ceil() as usize + 1, "{written} lines in {seconds:.2} s");
    assert!(written >= 1000, "the first thousand at once: {written}");
}
