//! Route reads: GET_ROUTEINFO_BY_TOPIC, cluster info, topic lists, broker member groups.
//!
//! None of them locks, and a route lookup encodes nothing: it loads the current snapshot and copies its bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::{bool_field, required, success};
use crate::error::RequestError;
use crate::json::{self, JsonStyle};
use crate::protocol::codes::{request, response, version};
use crate::protocol::java_hash;
use crate::protocol::route_data::write_broker_addrs;
use crate::remoting::{OutQueue, RemotingCommand};
use crate::outbound::product_env::ProductEnv;
use crate::route::encode::{encode_route_for_cluster_test, encode_route_for_zone};
use crate::route::snapshot::{RouteBody, encode_topic_list};
use crate::state::ServerState;

/// `TopicSysFlag`: unit topic, and topic with a unit subscription.
const FLAG_UNIT: i32 = 0x1;
const FLAG_UNIT_SUB: i32 = 0x2;

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
/// `OutQueue::push_with_body`); a zone's route is encoded for the request.
pub(super) fn answer_route_info(
    p: &ServerState,
    req: &RemotingCommand,
    out: &mut OutQueue,
) -> Result<(), RequestError> {
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
    push_route(req, out, body);
    Ok(())
}

/// The successful reply to a route lookup, unless it was one-way.
fn push_route(req: &RemotingCommand, out: &mut OutQueue, body: &RouteBody) {
    if !req.is_oneway() {
        let mut resp = success();
        resp.opaque = req.opaque;
        out.push_with_body(&resp, &[&body.shared, &body.own]);
    }
}

/// GET_ROUTEINFO_BY_TOPIC in cluster-test mode (`ClusterTestRequestProcessor#getRouteInfoByTopic`, which
/// has no start-up wait): a local hit as that processor encodes it; a miss asked of the product
/// environment, answered later from a task of its own.
fn answer_cluster_test(
    p: &ServerState,
    product: &Arc<ProductEnv>,
    req: &RemotingCommand,
    out: &mut OutQueue,
) -> Result<(), RequestError> {
    let Some(topic) = req.ext("topic") else { return Err(RequestError::TopicNotExist("null".into())) };
    let zone = requested_zone(req);
    if let Some(body) = encode_route_for_cluster_test(&p.routes.load(), topic, zone) {
        push_route(req, out, &body);
        return Ok(());
    }
    if req.is_oneway() {
        return Ok(());
    }
    product.spawn_lookup(topic, zone, req.opaque, out.late_replies())
}

pub(super) fn get_broker_cluster_info(p: &ServerState) -> RemotingCommand {
    let mut resp = success();
    resp.body = p.routes.load().cluster_info_body();
    resp
}

fn with_body(body: Vec<u8>) -> RemotingCommand {
    let mut resp = success();
    resp.body = Bytes::from(body);
    resp
}

pub(super) fn get_all_topic_list(p: &ServerState) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_all_topic_list {
        return Err(RequestError::Disabled);
    }
    let mut resp = success();
    resp.body = p.routes.load().topic_list_body();
    Ok(resp)
}

/// GET_TOPICS_BY_CLUSTER (header key `cluster`): topics with queues on any broker of the cluster.
pub(super) fn get_topics_by_cluster(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_topic_list {
        return Err(RequestError::Disabled);
    }
    let cluster = required(req, "cluster")?;
    let snapshot = p.routes.load();
    let brokers: Vec<&Arc<str>> = snapshot.broker_names_of(cluster).collect();
    let mut topics: Vec<&str> = snapshot
        .topics
        .iter()
        .filter(|(_, route)| route.queue_datas.iter().any(|q| brokers.contains(&&q.broker_name)))
        .map(|(t, _)| &**t)
        .collect();
    topics.sort_unstable();
    Ok(with_body(encode_topic_list(topics, None)))
}

/// GET_SYSTEM_TOPIC_LIST_FROM_NS: every cluster and broker name (brokers create topics named after them),
/// and one broker address to ask for the rest.
pub(super) fn get_system_topic_list(p: &ServerState) -> RemotingCommand {
    let snapshot = p.routes.load();
    let mut names: Vec<&str> = Vec::new();
    for (cluster, brokers) in snapshot.clusters.iter() {
        names.push(cluster);
        names.extend(brokers.iter().map(|b| &**b));
    }
    names.sort_unstable();
    names.dedup();
    let mut brokers: Vec<_> = snapshot.brokers.iter().collect();
    brokers.sort_by(|a, b| a.0.cmp(b.0));
    let broker_addr = brokers.iter().find_map(|(_, b)| b.broker_addrs.values().next().map(|a| &**a));
    with_body(encode_topic_list(names, broker_addr))
}

/// 311 (unit topics), 312 (topics with a unit subscription), 313 (those, but not unit topics themselves),
/// judged by one queue data of each topic, as Java does: the one its HashMap of them yields first.
pub(super) fn get_unit_topic_list(p: &ServerState, code: i32) -> Result<RemotingCommand, RequestError> {
    if !p.config.load().enable_topic_list {
        return Err(RequestError::Disabled);
    }
    let wanted = |flag: i32| match code {
        request::GET_UNIT_TOPIC_LIST => flag & FLAG_UNIT != 0,
        request::GET_HAS_UNIT_SUB_TOPIC_LIST => flag & FLAG_UNIT_SUB != 0,
        _ => flag & FLAG_UNIT_SUB != 0 && flag & FLAG_UNIT == 0,
    };
    let snapshot = p.routes.load();
    let mut topics: Vec<&str> = snapshot
        .topics
        .iter()
        .filter(|(_, r)| {
            let n = r.queue_datas.len();
            let first = r.queue_datas.iter().min_by_key(|q| (java_hash::bucket(&q.broker_name, n), &q.broker_name));
            first.is_some_and(|q| wanted(q.topic_sys_flag))
        })
        .map(|(t, _)| &**t)
        .collect();
    topics.sort_unstable();
    Ok(with_body(encode_topic_list(topics, None)))
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
