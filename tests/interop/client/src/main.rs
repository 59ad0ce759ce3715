//! Drives the third-party rocketmq-rust client (crates.io `rocketmq-client-rust` 1.0.0) against rocketns.
//!
//! Every route it uses comes from the NameServer given on the command line. Subcommands:
//! - `wait-broker NS BROKER SECS`: cluster info lists BROKER with a master address;
//! - `produce-consume NS TOPIC COUNT`: create TOPIC through the broker (MQAdmin.createTopic asks the
//!   NameServer for TBW102's route and sends UPDATE_AND_CREATE_TOPIC to its brokers), wait for its route,
//!   send COUNT messages and consume every one of them back;
//! - `auto-create NS TOPIC`: send to a topic nobody created (the client falls back to TBW102's route and the
//!   broker creates the topic), then wait until the NameServer routes TOPIC;
//! - `route NS TOPIC present|absent SECS`: wait until TOPIC's route is in that state;
//! - `replicas NSLIST TOPIC SECS OTHER`: with every NameServer of the `;`-separated list, send one message to
//!   TOPIC every 100 ms for SECS (the script kills two of the NameServers meanwhile), then send to OTHER, a
//!   topic this client has no route for yet, so that its route must come from the NameServer still alive;
//! - `admin NS BROKER TOPIC`: the admin API against the NameServer: cluster info, topic list, KV put/get/
//!   list/delete, NameServer config, and wiping and restoring BROKER's write permission on TOPIC.
//! - `acl NS AK SK`: against a NameServer with `aclEnable`, the client's own ACL signer (`AclClientRPCHook`
//!   with AK/SK) gets KV writes accepted, while unsigned and wrongly signed ones change nothing.
//! - `tls NS CA`: against a NameServer with `tls.server.mode=enforcing`, the client's own TLS (rustls,
//!   verifying the server against the CA file) reads cluster info and writes and reads KV, while a plain
//!   client is refused.
//! Exit status 0 means the check held; the last line printed says what was seen.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    AclClientRPCHook, BrokerAdmin, ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer,
    MQPushConsumer, MessageListenerConcurrently, RouteAdmin, SessionCredentials, TopicAdmin,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

type Failure = Box<dyn std::error::Error>;

struct Runtime {
    owner: RuntimeOwner,
    client: Arc<ClientRuntime>,
    telemetry: rocketmq_observability::TelemetryRuntimeGuard,
}

impl Runtime {
    fn new() -> ClientResult<Self> {
        let owner = RuntimeOwner::plan(RuntimeConfig { thread_name: "interop".into(), ..Default::default() })
            .map_err(|e| ClientError::internal("plan runtime", e))?
            .build()
            .map_err(|e| ClientError::internal("build runtime", e))?;
        let telemetry =
            rocketmq_observability::install_global(&rocketmq_observability::TelemetryBootstrapConfig::default())
                .map_err(|e| ClientError::internal("telemetry", e))?;
        let client = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            telemetry.handle(),
        )?;
        Ok(Runtime { owner, client, telemetry })
    }

    async fn shutdown(self) {
        let _ = self.client.shutdown().await;
        let _ = self.owner.shutdown_tasks().await;
        let _ = self.owner.shutdown_background();
        let _ = self.telemetry.shutdown();
    }
}

fn client_config(ns: &str) -> ClientConfig {
    ClientConfig { namesrv_addr: Some(ns.to_string().into()), vip_channel_enabled: false, ..Default::default() }
}

/// Points an admin client at NS and starts it.
async fn started(mut admin: DefaultMQAdminExt, ns: &str) -> Result<DefaultMQAdminExt, Failure> {
    admin.set_namesrv_addr(ns);
    admin.start().await?;
    Ok(admin)
}

async fn admin(rt: &Runtime, ns: &str) -> Result<DefaultMQAdminExt, Failure> {
    started(DefaultMQAdminExt::with_timeout(rt.client.clone(), Duration::from_secs(5)), ns).await
}

/// Polls the topic's route until `want_present` holds or `secs` pass.
async fn wait_route(admin: &DefaultMQAdminExt, topic: &str, want_present: bool, secs: u64) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let route = admin.examine_topic_route_info(topic.to_string().into()).await;
        let present = matches!(&route, Ok(Some(r)) if !r.queue_datas.is_empty() && !r.broker_datas.is_empty());
        if present == want_present {
            match route {
                Ok(Some(r)) => println!(
                    "route of {topic}: present, {} queue datas, {} broker datas: {:?}",
                    r.queue_datas.len(),
                    r.broker_datas.len(),
                    r.queue_datas
                ),
                other => println!("route of {topic}: absent ({other:?})"),
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "route of {topic} still {} after {secs}s: {route:?}",
                if present { "present" } else { "absent" }
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn wait_broker(rt: &Runtime, ns: &str, broker: &str, secs: u64) -> Result<(), Failure> {
    let admin = admin(rt, ns).await?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let info = admin.examine_broker_cluster_info().await;
        let seen = matches!(&info, Ok(ci) if ci.broker_addr_table.as_ref().is_some_and(|t| t.keys().any(|k| k.as_str() == broker)));
        if seen {
            println!("cluster info lists {broker}: {info:?}");
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{broker} not registered after {secs}s: {info:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

struct Collect(Arc<Mutex<HashSet<String>>>);

impl MessageListenerConcurrently for Collect {
    fn consume_message(
        &self,
        msgs: &[&MessageExt],
        _ctx: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for m in msgs {
            if let Some(body) = m.body() {
                seen.insert(String::from_utf8_lossy(&body).into_owned());
            }
        }
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

/// An admin client whose requests are signed with these credentials.
async fn signed_admin(rt: &Runtime, ns: &str, ak: &str, sk: &str) -> Result<DefaultMQAdminExt, Failure> {
    let hook = Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(ak.to_string(), sk.to_string())));
    started(DefaultMQAdminExt::with_rpc_hook_and_timeout(rt.client.clone(), hook, Duration::from_secs(5)), ns).await
}

/// A KV value as this client reads it: it answers a missing key with an empty value.
async fn kv_value(admin: &DefaultMQAdminExt, key: &str) -> Option<String> {
    match admin.get_kv_config("acl".into(), key.to_string().into()).await {
        Ok(v) if !v.is_empty() => Some(v.to_string()),
        _ => None,
    }
}

async fn acl_checks(rt: &Runtime, ns: &str, ak: &str, sk: &str) -> Result<(), Failure> {
    // put_kv_config reports no result: what it did is read back (reads stay open).
    let reader = admin(rt, ns).await?;
    reader.put_kv_config("acl".into(), "unsigned".into(), "v".into()).await;
    let unsigned = kv_value(&reader, "unsigned").await;
    println!("KV write without signature, read back: {unsigned:?}");
    if unsigned.is_some() {
        return Err("an unsigned KV write was accepted".into());
    }
    let wrong = signed_admin(rt, ns, ak, "not-the-secret").await?;
    wrong.put_kv_config("acl".into(), "wrong".into(), "v".into()).await;
    let wrongly = kv_value(&reader, "wrong").await;
    println!("KV write with a wrong secret, read back: {wrongly:?}");
    if wrongly.is_some() {
        return Err("a wrongly signed KV write was accepted".into());
    }
    let signed = signed_admin(rt, ns, ak, sk).await?;
    signed.put_kv_config("acl".into(), "signed".into(), "v1".into()).await;
    let value = kv_value(&reader, "signed").await;
    println!("KV write signed by the client's AclClientRPCHook, read back: {value:?}");
    if value.as_deref() != Some("v1") {
        return Err(format!("signed KV write read back as {value:?}").into());
    }
    if reader.delete_kv_config("acl".into(), "signed".into()).await.is_ok() {
        return Err("an unsigned KV delete was accepted".into());
    }
    signed.delete_kv_config("acl".into(), "signed".into()).await?;
    let gone = kv_value(&reader, "signed").await;
    println!("after a signed delete: {gone:?}");
    if gone.is_some() {
        return Err("signed KV delete did not delete".into());
    }
    Ok(())
}

async fn tls_checks(rt: &Runtime, ns: &str, ca: &str) -> Result<(), Failure> {
    let mut secure = DefaultMQAdminExt::with_timeout(rt.client.clone(), Duration::from_secs(5));
    secure.set_use_tls(true);
    let config = secure.client_config_mut();
    config.tls_config.enable = true;
    config.tls_config.test_mode_enable = false;
    config.tls_config.client.auth_server = true;
    config.tls_config.client.trust_cert_path = Some(ca.to_string());
    let secure = started(secure, ns).await?;
    let info = secure.examine_broker_cluster_info().await;
    println!("cluster info over TLS: {info:?}");
    info?;
    secure.put_kv_config("tls".into(), "k".into(), "over-tls".into()).await;
    let value = secure.get_kv_config("tls".into(), "k".into()).await?;
    println!("KV written and read back over TLS: {value}");
    if value.as_str() != "over-tls" {
        return Err(format!("KV over TLS read back as {value:?}").into());
    }

    let plain = admin(rt, ns).await?;
    let refused = plain.examine_broker_cluster_info().await;
    println!("cluster info over plain TCP: {refused:?}");
    if refused.is_ok() {
        return Err("a plain connection was served in enforcing mode".into());
    }
    Ok(())
}

async fn produce_consume(rt: &Runtime, ns: &str, topic: &str, count: usize) -> Result<(), Failure> {
    let admin = admin(rt, ns).await?;
    let mut producer = DefaultMQProducer::builder(rt.client.clone())
        .client_config(client_config(ns))
        .producer_group("interop_producer")
        .build();
    producer.start().await?;
    producer.create_topic("TBW102", topic, 4, HashMap::new()).await?;
    println!("created {topic} through the broker");
    wait_route(&admin, topic, true, 30).await?;

    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut consumer = DefaultMQPushConsumer::builder(rt.client.clone())
        .client_config(client_config(ns))
        .consumer_group("interop_consumer")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer.subscribe(topic, "*").await?;
    consumer.register_message_listener_concurrently(Collect(seen.clone()));
    consumer.start().await?;

    let mut sent = 0;
    for i in 0..count {
        let msg = Message::builder()
            .topic(topic.to_string())
            .tags("interop")
            .body(format!("message-{i}").into_bytes())
            .build_unchecked();
        producer.send_with_timeout(msg, 10_000).await?;
        sent += 1;
    }
    println!("sent {sent} messages to {topic}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let received = loop {
        let n = seen.lock().unwrap_or_else(|p| p.into_inner()).len();
        if n >= count || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    consumer.shutdown().await;
    producer.shutdown().await;
    println!("consumed {received} distinct messages of {count}");
    if received != count {
        return Err(format!("consumed {received} of {count} messages").into());
    }
    Ok(())
}

async fn auto_create(rt: &Runtime, ns: &str, topic: &str) -> Result<(), Failure> {
    let admin = admin(rt, ns).await?;
    let route_before = admin.examine_topic_route_info(topic.to_string().into()).await;
    println!("route of {topic} before sending: {route_before:?}");
    let mut producer = DefaultMQProducer::builder(rt.client.clone())
        .client_config(client_config(ns))
        .producer_group("interop_auto")
        .build();
    producer.start().await?;
    let msg = Message::builder().topic(topic.to_string()).body(b"auto".to_vec()).build_unchecked();
    let result = producer.send_with_timeout(msg, 10_000).await?;
    println!("sent to uncreated topic {topic}: {result:?}");
    let outcome = wait_route(&admin, topic, true, 60).await;
    producer.shutdown().await;
    outcome
}

fn check(ok: bool, what: String) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(what.into()) }
}

/// The perm of `broker`'s queues for `topic`, as the NameServer routes it.
async fn queue_perm(admin: &DefaultMQAdminExt, topic: &str, broker: &str) -> Result<i32, Failure> {
    let route = admin.examine_topic_route_info(topic.to_string().into()).await?.ok_or("no route")?;
    let q = route.queue_datas.iter().find(|q| q.broker_name.as_str() == broker).ok_or("no queue data")?;
    Ok(q.perm as i32)
}

async fn admin_checks(rt: &Runtime, ns: &str, broker: &str, topic: &str) -> Result<(), Failure> {
    let admin = admin(rt, ns).await?;
    let info = admin.examine_broker_cluster_info().await?;
    let brokers = info.broker_addr_table.as_ref().ok_or("no brokerAddrTable")?;
    let data = brokers.iter().find(|(k, _)| k.as_str() == broker).ok_or("broker missing from cluster info")?.1;
    let master = data.broker_addrs().get(&0).map(|a| a.to_string());
    check(master.as_deref() == Some("127.0.0.1:10911"), format!("master address {master:?}"))?;
    let clusters = info.cluster_addr_table.as_ref().ok_or("no clusterAddrTable")?;
    let members = clusters.iter().find(|(k, _)| k.as_str() == data.cluster()).ok_or("cluster missing")?.1;
    check(members.iter().any(|m| m.as_str() == broker), format!("cluster members {members:?}"))?;
    println!("cluster info: {} in {} at {master:?}", broker, data.cluster());

    let list = TopicAdmin::fetch_all_topic_list(&admin).await?;
    for wanted in [topic, "TBW102"] {
        check(list.topic_list.iter().any(|t| t.as_str() == wanted), format!("topic list lacks {wanted}"))?;
    }
    println!("topic list: {} topics, {topic} and TBW102 among them", list.topic_list.len());

    admin.put_kv_config("interop".into(), "k1".into(), "v1".into()).await;
    let value = admin.get_kv_config("interop".into(), "k1".into()).await?;
    check(value.as_str() == "v1", format!("get_kv_config returned {value:?}"))?;
    let table = admin.get_kv_list_by_namespace("interop".into()).await?;
    check(table.table.get("k1").map(|v| v.as_str()) == Some("v1"), format!("KV list {:?}", table.table))?;
    admin.delete_kv_config("interop".into(), "k1".into()).await?;
    // This client maps QUERY_NOT_FOUND to an empty value.
    let gone = admin.get_kv_config("interop".into(), "k1".into()).await;
    check(matches!(&gone, Ok(v) if v.is_empty()) || gone.is_err(), format!("deleted key still read back: {gone:?}"))?;
    println!("KV: put, get, list and delete round-trip");

    let config = admin.get_name_server_config(vec![ns.to_string().into()]).await?;
    let port = config
        .values()
        .next()
        .and_then(|c| c.iter().find(|(k, _)| k.as_str() == "listenPort"))
        .map(|(_, v)| v.to_string());
    check(port.as_deref() == Some("9876"), format!("listenPort {port:?} in {config:?}"))?;
    println!("NameServer config: listenPort={}", port.unwrap_or_default());

    let wiped = admin.wipe_write_perm_of_broker(ns.to_string().into(), broker.to_string().into()).await?;
    let perm = queue_perm(&admin, topic, broker).await?;
    check(wiped > 0 && perm & 2 == 0, format!("wipe touched {wiped}, perm now {perm}"))?;
    let added = admin.add_write_perm_of_broker(ns.to_string().into(), broker.to_string().into()).await?;
    let perm = queue_perm(&admin, topic, broker).await?;
    check(added == wiped && perm == 6, format!("add touched {added}, perm now {perm}"))?;
    println!("write permission: wiped on {wiped} topics, then restored (perm {perm})");
    Ok(())
}

async fn replicas(rt: &Runtime, ns_list: &str, topic: &str, secs: u64, other: &str) -> Result<(), Failure> {
    let mut producer = DefaultMQProducer::builder(rt.client.clone())
        .client_config(client_config(ns_list))
        .producer_group("interop_replicas")
        .build();
    producer.start().await?;
    let end = Instant::now() + Duration::from_secs(secs);
    let (mut ok, mut failed, mut last_failure) = (0u32, 0u32, None);
    let mut i = 0;
    while Instant::now() < end {
        i += 1;
        let msg =
            Message::builder().topic(topic.to_string()).body(format!("replica-{i}").into_bytes()).build_unchecked();
        match producer.send_with_timeout(msg, 3_000).await {
            Ok(_) => ok += 1,
            Err(e) => {
                failed += 1;
                last_failure = Some((Instant::now(), e.to_string()));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    producer.shutdown().await;
    println!("sent {ok} messages while NameServers were killed, {failed} failed {last_failure:?}");
    check(ok > 0 && failed * 10 <= ok, format!("{failed} of {} sends failed", ok + failed))?;
    // A topic this client has no route for: it must come from the NameServer left alive.
    let mut fresh = DefaultMQProducer::builder(rt.client.clone())
        .client_config(client_config(ns_list))
        .producer_group("interop_fresh")
        .build();
    fresh.start().await?;
    let mut fresh_ok = 0;
    for i in 0..10 {
        let msg = Message::builder().topic(other.to_string()).body(format!("fresh-{i}").into_bytes()).build_unchecked();
        if fresh.send_with_timeout(msg, 5_000).await.is_ok() {
            fresh_ok += 1;
        }
    }
    fresh.shutdown().await;
    println!("sent {fresh_ok} of 10 messages to {other}, whose route was fetched after the kills");
    check(fresh_ok == 10, format!("fresh producer sent {fresh_ok} of 10"))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let secs = |i: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(30u64);
    let rt = match Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("FAIL: client runtime: {e}");
            std::process::exit(2);
        }
    };
    let outcome = match arg(0).as_str() {
        "wait-broker" => wait_broker(&rt, &arg(1), &arg(2), secs(3)).await,
        "produce-consume" => produce_consume(&rt, &arg(1), &arg(2), arg(3).parse().unwrap_or(1000)).await,
        "auto-create" => auto_create(&rt, &arg(1), &arg(2)).await,
        "admin" => admin_checks(&rt, &arg(1), &arg(2), &arg(3)).await,
        "replicas" => replicas(&rt, &arg(1), &arg(2), secs(3), &arg(4)).await,
        "acl" => acl_checks(&rt, &arg(1), &arg(2), &arg(3)).await,
        "tls" => tls_checks(&rt, &arg(1), &arg(2)).await,
        "route" => match admin(&rt, &arg(1)).await {
            Ok(a) => wait_route(&a, &arg(2), arg(3) == "present", secs(4)).await,
            Err(e) => Err(e),
        },
        other => Err(format!("unknown subcommand {other:?}").into()),
    };
    rt.shutdown().await;
    match outcome {
        Ok(()) => println!("PASS: {}", args.join(" ")),
        Err(e) => {
            println!("FAIL: {}: {e}", args.join(" "));
            std::process::exit(1);
        }
    }
}
