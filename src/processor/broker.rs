//! Requests brokers send: REGISTER_BROKER, UNREGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV, QUERY_DATA_VERSION,
//! BROKER_HEARTBEAT.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{bool_field, long_field, required, success};
use crate::error::RequestError;
use crate::kvconfig::{ORDER_TOPIC_CONFIG, encode_kv_table};
use crate::protocol::register_body::ReceivedBody;
use crate::protocol::route_data::QueueDatasOnly;
use crate::protocol::{DataVersion, QueueData, lenient};
use crate::remoting::{ExtFields, RemotingCommand};
use crate::route::{BrokerAddrKey, BrokerRegistration, ConnId, RouteMutation, UnregisterRequest};
use crate::state::ServerState;

/// `bodyCrc32`: CRC-32 of the body as received, top bit cleared; 0 (or absent) means "not checked". The
/// writer checks it, with the body.
fn crc_field(req: &RemotingCommand) -> Result<i32, RequestError> {
    match req.ext("bodyCrc32") {
        None => Ok(0),
        Some(v) => lenient::parse_java_long(v)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| RequestError::InvalidField { field: "bodyCrc32", value: v.to_string() }),
    }
}

fn broker_id(req: &RemotingCommand) -> Result<i64, RequestError> {
    long_field(req, "brokerId")?.ok_or(RequestError::MissingField("brokerId"))
}

/// `body` is the request's, taken out of it: a default broker sends its whole topic table (megabytes in one
/// frame). Its CRC, inflating and parsing (tens of milliseconds at 100,000 topics) run on the blocking pool,
/// off the threads that answer lookups, and may overlap the writer's previous batch; it is freed once parsed,
/// before the writer builds the new snapshot.
pub(super) async fn register_broker(
    p: &ServerState,
    req: &RemotingCommand,
    body: Bytes,
    conn: ConnId,
) -> Result<RemotingCommand, RequestError> {
    let cluster = required(req, "clusterName")?;
    let broker_addr = required(req, "brokerAddr")?;
    let broker_name = required(req, "brokerName")?;
    let broker_id = broker_id(req)?;
    let heartbeat_timeout =
        long_field(req, "heartbeatTimeoutMillis")?.filter(|ms| *ms > 0).map(|ms| Duration::from_millis(ms as u64));
    let received = ReceivedBody {
        bytes: body,
        compressed: bool_field(req, "compressed").unwrap_or(false),
        version: req.version,
        crc32: crc_field(req)?,
    };
    // A panic while decoding is a bug: this connection's task ends with it, and the server logs it.
    let body = crate::offload::on_blocking_pool(move || received.decode()).await.ok_or(RequestError::ShuttingDown)??;
    let registration = BrokerRegistration {
        cluster: cluster.into(),
        broker_addr: broker_addr.into(),
        broker_name: broker_name.into(),
        broker_id,
        ha_server_addr: req.ext("haServerAddr").unwrap_or("").into(),
        zone_name: req.ext("__ZONE_NAME").map(Arc::from),
        heartbeat_timeout,
        enable_acting_master: bool_field(req, "enableActingMaster"),
        body,
        conn_id: conn,
        now: Instant::now(),
    };
    let result = p.routes.register(registration).await??;
    let mut resp = success();
    let mut ext = ExtFields::new();
    if let Some(master) = result.master_addr {
        ext.insert("masterAddr", &*master);
    }
    if let Some(ha) = result.ha_server_addr {
        ext.insert("haServerAddr", &*ha);
    }
    resp.ext_fields = Some(ext);
    // The broker marks the topics listed here as ordered.
    if p.config.load().return_order_topic_config_to_broker
        && let Some(table) = p.kv.namespace(ORDER_TOPIC_CONFIG)
    {
        resp.body = Bytes::from(encode_kv_table(&table));
    }
    Ok(resp)
}

/// Answers once queued; the removal happens in the writer's next batch, as in Java.
pub(super) fn unregister_broker(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let unregister = UnregisterRequest {
        cluster: required(req, "clusterName")?.into(),
        broker_addr: required(req, "brokerAddr")?.into(),
        broker_name: required(req, "brokerName")?.into(),
        broker_id: broker_id(req)?,
    };
    p.routes.submit_unregister(unregister)?;
    Ok(success())
}

/// REGISTER_TOPIC_IN_NAMESRV. Code 217 was GET_KV_CONFIG_BY_VALUE for old clients, which send
/// `namespace`/`key` and no `topic`: without a topic nothing is ever registered.
pub(super) async fn register_topic(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let Some(topic) = req.ext("topic") else {
        return Ok(success());
    };
    if req.body.is_empty() {
        return Ok(success());
    }
    if !crate::protocol::topic_name::is_valid_topic_name(topic) {
        return Err(RequestError::InvalidField { field: "topic", value: topic.to_string() });
    }
    let parsed: QueueDatasOnly =
        lenient::from_fastjson_slice(&req.body).map_err(|e| RequestError::InvalidBody(format!("invalid topic route body: {e}")))?;
    let queue_datas = parsed
        .queue_datas
        .unwrap_or_default()
        .into_iter()
        .map(QueueData::try_from)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|why| RequestError::InvalidBody(why.into()))?;
    if !queue_datas.is_empty() {
        let topic = topic.to_string();
        p.routes.apply(|done| RouteMutation::RegisterTopic { topic, queue_datas, done }).await?;
    }
    Ok(success())
}

/// QUERY_DATA_VERSION: tells a broker whether its registration is current, and counts as a heartbeat.
pub(super) fn query_data_version(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let key = BrokerAddrKey::new(required(req, "clusterName")?, required(req, "brokerAddr")?);
    let reported = if req.body.is_empty() {
        None
    } else {
        Some(DataVersion::parse(&req.body).map_err(|e| RequestError::InvalidBody(format!("invalid DataVersion body: {e}")))?)
    };
    let live = &p.routes.liveness;
    let changed = live.is_data_version_changed(&key, reported.as_ref());
    live.touch(&key, Instant::now());
    let mut resp = success();
    resp.ext_fields = Some([("changed", changed.to_string())].into_iter().collect());
    if let Some(stored) = live.data_version(&key) {
        resp.body = Bytes::from(stored.to_json());
    }
    Ok(resp)
}

/// BROKER_HEARTBEAT: refreshes a known broker; unknown ones are ignored.
pub(super) fn broker_heartbeat(p: &ServerState, req: &RemotingCommand) -> RemotingCommand {
    if let (Some(cluster), Some(addr)) = (req.ext("clusterName"), req.ext("brokerAddr")) {
        p.routes.liveness.touch(&BrokerAddrKey::new(cluster, addr), Instant::now());
    }
    success()
}
