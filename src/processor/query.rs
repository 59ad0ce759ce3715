//! Route reads: GET_ROUTEINFO_BY_TOPIC, cluster info, topic lists, broker member groups.
//!
//! None of them locks, and a route lookup encodes nothing: it loads the current snapshot and copies its bytes.
//! Admin reads (cluster info, topic lists) are whole-table bodies encoded once per snapshot, by the first
//! request that asks, on the blocking pool; every other request shares its bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::{bool_field, required, success};
use crate::error::RequestError;
use crate::outbound::product_env::ProductEnv;
use crate::protocol::broker_versions;
use crate::protocol::codes::{response, version};
use crate::protocol::json::{self, JsonStyle};
use crate::protocol::route_data::write_broker_addrs;
use crate::remoting::{OutQueue, RemotingCommand};
use crate::route::encode::{encode_route_for_cluster_test, encode_route_for_zone};
use crate::route::snapshot::{Encoded, RouteBody, TableBody, encode_topic_list};
use crate::state::ServerState;

/// Java answers standard JSON to clients from 4.9.4 on, and to any client that asks for it.
fn route_style(req: &RemotingCommand) -> JsonStyle {
    if req.version >= version::V4_9_4 || bool_field(req, "acceptStandardJsonOnly").unwrap_or(false) {
        JsonStyle::Standard
    } else {
        JsonStyle::Fastjson
    }
}

/// The zone a client asks routes for (`__ZONE_MODE=true` and a non-blank `__ZONE_NAME`, set by RPC hooks).
fn requested_zone(req: &RemotingCommand) -> Option<&str> {
    if !bool_field(req, "__ZONE_MODE").unwrap_or(false) {
        return None;
    }
    req.ext("__ZONE_NAME").filter(|z| !z.trim().is_empty())
}

/// GET_ROUTEINFO_BY_TOPIC. The body is copied into `out` from the snapshot while it is held (see
/// `OutQueue::push_with_body`); a zone's route is encoded for the request. A body over the copy limit (a
/// topic on a hundred brokers) is returned instead, to be queued with room of its own (`dispatch`).
pub(super) fn answer_route_info(
    p: &ServerState,
    req: &RemotingCommand,
    out: &mut OutQueue,
) -> Result<Option<RemotingCommand>, RequestError> {
    if let Some(product) = &p.product_env {
        return answer_cluster_test(p, product, req, out);
    }
    if p.waiting_for_service() {
        return Err(RequestError::NotReady);
    }
    let topic = req.ext("topic");
    let snapshot = p.routes.load();
    let zone_route;
    let body = match (topic, requested_zone(req)) {
        (Some(t), None) => snapshot.route_body(t, route_style(req)),
        (Some(t), Some(zone)) => {
            zone_route = encode_route_for_zone(&snapshot, t, zone);
            zone_route.as_ref()
        }
        (None, _) => None,
    };
    let body = body.ok_or_else(|| RequestError::TopicNotExist(topic.unwrap_or("null").to_string()))?;
    Ok(push_route(req, out, body))
}

/// The successful reply to a route lookup, unless it was one-way: queued when small, returned when not.
fn push_route(req: &RemotingCommand, out: &mut OutQueue, body: &RouteBody) -> Option<RemotingCommand> {
    if req.is_oneway() {
        return None;
    }
    let mut resp = success();
    if body.shared.len() + body.own.len() > OutQueue::COPY_LIMIT {
        resp.body = Bytes::from(body.to_vec());
        return Some(resp);
    }
    resp.opaque = req.opaque;
    out.push_with_body(&resp, &[&body.shared, &body.own]);
    None
}

/// GET_ROUTEINFO_BY_TOPIC in cluster-test mode (`ClusterTestRequestProcessor#getRouteInfoByTopic`, which
/// has no start-up wait): a local hit as that processor encodes it; a miss asked of the product
/// environment, answered later from a task of its own.
fn answer_cluster_test(
    p: &ServerState,
    product: &Arc<ProductEnv>,
    req: &RemotingCommand,
    out: &mut OutQueue,
) -> Result<Option<RemotingCommand>, RequestError> {
    let Some(topic) = req.ext("topic") else { return Err(RequestError::TopicNotExist("null".into())) };
    let zone = requested_zone(req);
    if let Some(body) = encode_route_for_cluster_test(&p.routes.load(), topic, zone) {
        return Ok(push_route(req, out, &body));
    }
    if req.is_oneway() {
        return Ok(None);
    }
    product.spawn_lookup(topic, zone, req.opaque, out.late_replies()).map(|()| None)
}

/// `body` of the current snapshot: encoded by the first request that asks, on the blocking pool (O(table)),
/// while any other asking meanwhile waits for it without holding a thread; shared by every later one.
/// At most `state::TABLE_ENCODES` (2) encodings run at once, whatever the number of askers and of snapshots (each
/// holds the table's names while it runs: megabytes at a million topics); an asker that waited for its
/// turn encodes the table of that moment, so a table changing faster than it can be encoded is encoded
/// as often as the turns allow, not once per change.
pub(crate) async fn table_body(p: &ServerState, body: TableBody) -> Result<Encoded, RequestError> {
    if let Some(encoded) = p.routes.load().derived(body).get() {
        return Ok(encoded.clone());
    }
    let _turn = p.table_encodes.acquire().await.map_err(|_| RequestError::ShuttingDown)?;
    let snapshot = p.routes.load_full();
    let cell = snapshot.derived(body);
    let encoded = cell
        .get_or_try_init(|| {
            let snapshot = snapshot.clone();
            async move {
                p.metrics.table_bodies_encoded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                crate::limits::offload::on_blocking_pool(move || snapshot.encode(body))
                    .await
                    .ok_or(RequestError::ShuttingDown)
            }
        })
        .await?;
    Ok(encoded.clone())
}

async fn with_table_body(p: &ServerState, body: TableBody) -> Result<RemotingCommand, RequestError> {
    let mut resp = success();
    if let Encoded::One(bytes) = table_body(p, body).await? {
        resp.body = bytes;
    }
    Ok(resp)
}

/// GET_BROKER_CLUSTER_INFO; with `withDataVersions=true` (a rocketns peer comparing, `broker_versions`),
/// each live broker's DataVersion in the reply's header too: encoded once for each state of the live
/// table, as the body is once a snapshot.
pub(super) async fn get_broker_cluster_info(
    p: &ServerState,
    req: &RemotingCommand,
) -> Result<RemotingCommand, RequestError> {
    let mut resp = with_table_body(p, TableBody::ClusterInfo).await?;
    if req.ext(broker_versions::ASK) == Some("true") {
        let told = p.routes.liveness.data_versions_told();
        resp.ext_fields.get_or_insert_with(Default::default).insert(broker_versions::REPLY, &*told);
    }
    Ok(resp)
}

pub(super) async fn get_all_topic_list(p: &ServerState) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_all_topic_list {
        return Err(RequestError::Disabled);
    }
    with_table_body(p, TableBody::TopicList).await
}

/// GET_TOPICS_BY_CLUSTER (header key `cluster`): topics with queues on any broker of the cluster.
pub(super) async fn get_topics_by_cluster(
    p: &ServerState,
    req: &RemotingCommand,
) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_topic_list {
        return Err(RequestError::Disabled);
    }
    let cluster = required(req, "cluster")?;
    let mut resp = success();
    resp.body = match table_body(p, TableBody::TopicsByCluster).await? {
        Encoded::ByCluster(lists) => lists.get(cluster).cloned(),
        Encoded::One(_) => None,
    }
    .unwrap_or_else(|| Bytes::from(encode_topic_list(&[], None)));
    Ok(resp)
}

/// GET_SYSTEM_TOPIC_LIST_FROM_NS: every cluster and broker name, and one broker address.
pub(super) async fn get_system_topic_list(p: &ServerState) -> Result<RemotingCommand, RequestError> {
    with_table_body(p, TableBody::SystemTopics).await
}

/// 311, 312 and 313 (`RouteSnapshot`'s unit lists say how each is judged).
pub(super) async fn get_unit_topic_list(p: &ServerState, code: i32) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_topic_list {
        return Err(RequestError::Disabled);
    }
    with_table_body(p, TableBody::UnitTopics(code)).await
}

/// GET_BROKER_MEMBER_GROUP: the current id → address map of a broker group. The cluster is echoed, not
/// checked, and Java's handler leaves its initial remark on the success reply; both are kept.
pub(super) fn get_broker_member_group(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let cluster = required(req, "clusterName")?;
    let broker_name = required(req, "brokerName")?;
    let snapshot = p.routes.load();
    let empty = BTreeMap::new();
    let addrs = snapshot.brokers.get(broker_name).map(|b| &b.broker_addrs).unwrap_or(&empty);
    let mut body = Vec::with_capacity(128);
    body.extend_from_slice(b"{\"brokerMemberGroup\":{\"brokerAddrs\":");
    write_broker_addrs(&mut body, addrs, JsonStyle::Fastjson);
    body.extend_from_slice(b",\"brokerName\":");
    json::write_str(&mut body, broker_name, JsonStyle::Fastjson);
    body.extend_from_slice(b",\"cluster\":");
    json::write_str(&mut body, cluster, JsonStyle::Fastjson);
    body.extend_from_slice(b"}}");
    let mut resp = RemotingCommand::response(response::SUCCESS, Some("not set any response code".into()));
    resp.body = Bytes::from(body);
    Ok(resp)
}
