//! Requests brokers send: REGISTER_BROKER, UNREGISTER_BROKER, REGISTER_TOPIC_IN_NAMESRV, QUERY_DATA_VERSION,
//! BROKER_HEARTBEAT.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::{bool_field, long_field, required, success};
use crate::error::RequestError;
use crate::limits::budget::{CONNECTION_DECODE, Charge, RequestRoom};
use crate::protocol::register_body::{BodyError, ReceivedBody, RegisterBrokerBody};
use crate::protocol::route_data::QueueDatasOnly;
use crate::protocol::{DataVersion, QueueData, lenient};
use crate::remoting::{ExtFields, RemotingCommand};
use crate::route::{BrokerAddrKey, BrokerRegistration, ConnId, RouteMutation, UnregisterRequest};
use crate::state::ServerState;
use crate::store::kvconfig::{ORDER_TOPIC_CONFIG, encode_kv_table};

/// `bodyCrc32`: CRC-32 of the body as received, top bit cleared; 0 (or absent) means "not checked". It is
/// checked where the body is decoded (`ReceivedBody::decode_within`, on the blocking pool).
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
/// before the writer builds the new snapshot. The parsed registration keeps its share of `room` until the
/// writer has applied it.
pub(super) async fn register_broker(
    p: &ServerState,
    req: &RemotingCommand,
    body: Bytes,
    conn: ConnId,
    room: RequestRoom,
) -> Result<RemotingCommand, RequestError> {
    let cluster = required(req, "clusterName")?;
    let broker_addr = address("brokerAddr", required(req, "brokerAddr")?)?;
    let ha_server_addr = req.ext("haServerAddr").map(|a| address("haServerAddr", a)).transpose()?.unwrap_or("");
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
    let (body, held) = decode_within_budget(p, received, room).await?;
    let registration = BrokerRegistration {
        cluster: cluster.into(),
        broker_addr: broker_addr.into(),
        broker_name: broker_name.into(),
        broker_id,
        ha_server_addr: ha_server_addr.into(),
        zone_name: req.ext("__ZONE_NAME").map(Arc::from),
        heartbeat_timeout,
        enable_acting_master: bool_field(req, "enableActingMaster"),
        body,
        conn_id: conn,
        now: Instant::now(),
    };
    let result = p.routes.register_holding(registration, held).await??;
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

/// Decodes a registration body within the room its request holds (a frame over 16 KiB holds 3/4 of its
/// length for this; every request is lent `CONNECTION_DECODE` by its connection) and what it asks for
/// more: a compressed body exactly what it needs (`ReceivedBody::compressed_need`), a JSON body first what
/// a Java broker's needs, then once more up to half the pool. A request whose frame holds room never waits
/// for more, it only tries (`budget.rs` says why); a small frame's request holds nothing for its bytes, so
/// it waits its turn. Returns the body and the room it keeps.
async fn decode_within_budget(
    p: &ServerState,
    received: ReceivedBody,
    mut room: RequestRoom,
) -> Result<(RegisterBrokerBody, Charge), RequestError> {
    let pool = &p.budget.requests;
    let counters = &p.metrics.budget;
    let most = pool.capacity() / 2;
    // A small JSON body decodes in microseconds; anything else waits for a turn (`ServerState::decoders`).
    let turns = received.is_compressed() || received.bytes.len() > crate::limits::budget::SMALL_FRAME;
    let wants = if received.is_compressed() {
        let body = received.clone();
        let need = decoding(p, turns, move || body.compressed_need(most)).await??;
        vec![need]
    } else {
        vec![received.json_allowance().min(most), most]
    };
    let mut allowance = room.for_processing();
    for wanted in wants {
        if wanted > most {
            break;
        }
        if wanted > allowance {
            let charged = wanted - CONNECTION_DECODE;
            if room.frame == 0 {
                room.charge = Charge::default();
                room.charge = pool.reserve(charged).await;
                allowance = wanted;
            } else if room.charge.try_grow(room.frame + charged, pool) {
                allowance = wanted;
            } else {
                counters.bodies_no_room.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(RequestError::Busy);
            }
        }
        let body = received.clone();
        match decoding(p, turns, move || body.decode_within(allowance)).await {
            Err(e) => return Err(e),
            Ok(Ok((body, held))) => {
                // The body's bytes are freed with `received`; the parsed registration keeps what it holds
                // beyond what its connection lends it, and the rest of the room is given back.
                drop(received);
                let held = room.charge.split_off(held.saturating_sub(CONNECTION_DECODE));
                return Ok((body, held));
            }
            Ok(Err(BodyError::OverAllowance(_))) => continue,
            Ok(Err(e)) => return Err(e.into()),
        }
    }
    counters.bodies_too_large.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Err(RequestError::InvalidBody(format!(
        "the registration body needs more than {most} bytes to decode (half of largeFrameBufferBytes)"
    )))
}

/// Runs `decode` on the blocking pool, in its turn if it `turns` (`ServerState::decoders`). A panic while
/// decoding is a bug: this connection's task ends with it, and the server logs it.
async fn decoding<T: Send + 'static>(
    p: &ServerState,
    turns: bool,
    decode: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RequestError> {
    let _turn = if turns { Some(p.decoders.acquire().await.map_err(|_| RequestError::ShuttingDown)?) } else { None };
    crate::limits::offload::on_blocking_pool(decode).await.ok_or(RequestError::ShuttingDown)
}

/// The longest broker address a registration may give: a host name of up to 255 bytes, a colon and a port.
/// Java takes any; an address is kept with the routes, quoted to every client that asks them, and sent
/// every 905 notice (a 4 MB one had made 24 MB of log a notice cycle: issue 44).
pub const MAX_BROKER_ADDR: usize = 255 + 1 + 5;

/// An address header field's value, if it is at most [`MAX_BROKER_ADDR`] bytes.
fn address<'a>(field: &'static str, addr: &'a str) -> Result<&'a str, RequestError> {
    match addr.len() {
        len if len > MAX_BROKER_ADDR => Err(RequestError::FieldTooLong { field, len, max: MAX_BROKER_ADDR }),
        _ => Ok(addr),
    }
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
pub(super) async fn register_topic(
    p: &ServerState,
    req: &RemotingCommand,
    room: RequestRoom,
) -> Result<RemotingCommand, RequestError> {
    let Some(topic) = req.ext("topic") else {
        return Ok(success());
    };
    if req.body.is_empty() {
        return Ok(success());
    }
    if !crate::protocol::topic_name::is_valid_topic_name(topic) {
        return Err(RequestError::InvalidField { field: "topic", value: topic.to_string() });
    }
    let invalid = |e: &dyn std::fmt::Display| RequestError::InvalidBody(format!("invalid topic route body: {e}"));
    let (parsed, _) = crate::protocol::meter::metered(room.for_processing(), || {
        crate::protocol::meter::charge(crate::protocol::meter::longest_quoted_run(&req.body))
            .map_err(|e| invalid(&e))?;
        lenient::from_fastjson_slice::<QueueDatasOnly>(&req.body).map_err(|e| invalid(&e))
    })
    .map_err(|e| invalid(&e))?;
    let parsed = parsed?;
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
        Some(
            DataVersion::parse(&req.body)
                .map_err(|e| RequestError::InvalidBody(format!("invalid DataVersion body: {e}")))?,
        )
    };
    let live = &p.routes.liveness;
    // A broker known only from the route file or a peer's copy is told its registration is not current, as
    // Java, which starts empty, tells it: one with forceRegister=false then registers over its connection,
    // and its slaves are told of it again (`master_of` names no master on no connection).
    let changed = live.is_restored(&key) || live.is_data_version_changed(&key, reported.as_ref());
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
