//! Turning a topic's entry of the snapshot into TopicRouteData bytes (`pickupTopicRouteData`, then Java's
//! route hooks): BrokerData of every known broker of the topic, filter servers, `orderTopicConf`, static-topic
//! mappings, the acting-master rewrite, and the per-request zone filter.

use std::borrow::Cow;
use std::collections::HashSet;

use bytes::Bytes;

use crate::json::JsonStyle;
use crate::protocol::route_data::{MASTER_ID, TopicRouteParts};
use crate::protocol::{BrokerData, QueueData, TopicQueueMappingInfo};
use crate::route::snapshot::{EncodedRoute, RouteSnapshot, TopicRoute};

/// Topics brokers use to sync their member group; never rewritten (`TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX`).
const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

/// Encodes `topic` in both styles, as every reply of the snapshot will share it; `None` when no broker of the
/// topic is known (TOPIC_NOT_EXIST).
pub fn encode_route(snapshot: &RouteSnapshot, topic: &str, route: &TopicRoute) -> Option<EncodedRoute> {
    with_parts(snapshot, topic, route, None, |parts| EncodedRoute {
        fastjson: parts.encode(JsonStyle::Fastjson).into(),
        standard: parts.encode(JsonStyle::Standard).into(),
    })
}

/// The route as Java's ZoneRouteRPCHook leaves it for a client in `zone`: master-ful broker groups of other
/// zones removed with their queues and filter servers, re-encoded in fastjson's default style (as Java does,
/// whatever the client asked for). Encoded per request: zone-aware clients are rare.
pub fn encode_route_for_zone(snapshot: &RouteSnapshot, topic: &str, zone: &str) -> Option<Bytes> {
    let route = snapshot.topic(topic)?;
    route.encoded.as_ref()?;
    with_parts(snapshot, topic, route, Some(zone), |parts| parts.encode(JsonStyle::Fastjson).into())
}

fn with_parts<R>(
    snapshot: &RouteSnapshot,
    topic: &str,
    route: &TopicRoute,
    zone: Option<&str>,
    encode: impl FnOnce(&TopicRouteParts<'_>) -> R,
) -> Option<R> {
    let mut brokers: Vec<Cow<'_, BrokerData>> = route
        .queue_datas
        .iter()
        .filter_map(|q| snapshot.brokers.get(&q.broker_name).map(|b| Cow::Borrowed(&**b)))
        .collect();
    if brokers.is_empty() {
        return None;
    }
    if snapshot.config.support_acting_master && !topic.starts_with(SYNC_BROKER_MEMBER_GROUP_PREFIX) {
        rewrite_acting_masters(&mut brokers, &route.queue_datas);
    }
    let mut queues: Vec<&QueueData> = route.queue_datas.iter().collect();
    if let Some(zone) = zone {
        let removed: HashSet<String> = brokers
            .iter()
            .filter(|b| b.broker_addrs.contains_key(&MASTER_ID) && !zone_matches(b, zone))
            .map(|b| b.broker_name.to_string())
            .collect();
        brokers.retain(|b| !removed.contains(&*b.broker_name));
        queues.retain(|q| !removed.contains(&*q.broker_name));
    }
    let mut filter_servers = Vec::new();
    for b in &brokers {
        snapshot.filter_servers_of(b, &mut filter_servers);
    }
    filter_servers.sort_by(|a, b| a.0.cmp(b.0));
    let order_topic_conf =
        if snapshot.config.order_message_enable { snapshot.order_topic_conf.get(topic).map(|c| &**c) } else { None };
    let mapping_list: Option<Vec<(&str, &TopicQueueMappingInfo)>> =
        snapshot.mappings.get(topic).map(|m| m.iter().map(|(b, info)| (&**b, info)).collect());
    let broker_refs: Vec<&BrokerData> = brokers.iter().map(|b| &**b).collect();
    let parts = TopicRouteParts {
        broker_datas: &broker_refs,
        filter_servers: &filter_servers,
        order_topic_conf,
        queue_datas: &queues,
        mappings: mapping_list.as_deref(),
    };
    Some(encode(&parts))
}

fn zone_matches(b: &BrokerData, zone: &str) -> bool {
    b.zone_name.as_deref().is_some_and(|z| z.eq_ignore_ascii_case(zone))
}

/// `RouteInfoManager#pickupTopicRouteData`'s acting-master step: in a group that lost its master, whose
/// queues are read-only and which allows an acting master, the lowest-id slave is shown as id 0.
fn rewrite_acting_masters(brokers: &mut [Cow<'_, BrokerData>], queues: &[QueueData]) {
    let masterless = |b: &BrokerData| !b.broker_addrs.is_empty() && !b.broker_addrs.contains_key(&MASTER_ID);
    if !brokers.iter().any(|b| masterless(b)) {
        return;
    }
    for b in brokers.iter_mut() {
        if !masterless(b) || !b.enable_acting_master {
            continue;
        }
        let read_only = queues.iter().find(|q| q.broker_name == b.broker_name).is_some_and(|q| !q.is_writable());
        if read_only {
            let owned = b.to_mut();
            if let Some((_, addr)) = owned.broker_addrs.pop_first() {
                owned.broker_addrs.insert(MASTER_ID, addr);
            }
        }
    }
}
