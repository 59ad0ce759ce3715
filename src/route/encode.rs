//! Turning a topic's entry of the snapshot into TopicRouteData bytes (`pickupTopicRouteData`, then Java's
//! route hooks): BrokerData of every known broker of the topic, filter servers, `orderTopicConf`, static-topic
//! mappings, the acting-master rewrite, and the per-request zone filter.
//!
//! A body is kept in two parts: the broker section (`brokerDatas`, `filterServerTable`), which every topic on
//! the same brokers shares, and the topic's own section (`queueDatas` and the rest). With 100k topics on four
//! brokers, the shared part is most of each body and is stored once.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::protocol::json::JsonStyle;
use crate::protocol::route_data::{MASTER_ID, TopicRouteParts};
use crate::protocol::{BrokerData, QueueData, TopicQueueMappingInfo};
use crate::route::FastHasher;
use crate::route::queue_lists::QueueList;
use crate::route::snapshot::{EncodedRoute, RouteBody, RouteSnapshot, TopicRoute};

/// Topics brokers use to sync their member group; never rewritten (`TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX`).
const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

/// Sections encoded while building one snapshot, so that equal ones are stored once: broker sections by the
/// broker groups they show (and whether the acting-master rewrite changed each), as (fastjson, standard);
/// topic sections by content (a route body does not name its topic, so topics with the same queues on the
/// same brokers have the same bytes).
#[derive(Default)]
pub struct SectionCache {
    sections: HashMap<BrokerSetKey, (Bytes, Bytes), FastHasher>,
    own: HashSet<Bytes, FastHasher>,
    /// Whole routes of topics whose route depends on their queue datas alone ([`depends_on_queues_alone`]),
    /// by those queue datas' list (its address: the route holds it) and by their content, each for topics
    /// the acting-master rewrite skips and those it does not: such topics share one `TopicRoute`, encoded
    /// once. A million topics of a thousand brokers are a thousand routes.
    by_list: [HashMap<usize, Arc<TopicRoute>, FastHasher>; 2],
    routes: [HashMap<QueueList, Arc<TopicRoute>, FastHasher>; 2],
}

impl SectionCache {
    fn intern(&mut self, bytes: &[u8]) -> Bytes {
        if let Some(existing) = self.own.get(bytes) {
            return existing.clone();
        }
        let bytes = Bytes::copy_from_slice(bytes);
        self.own.insert(bytes.clone());
        bytes
    }
}

/// The broker groups a broker section shows, each with whether the acting-master rewrite changed it.
type BrokerSetKey = Vec<(Arc<str>, bool)>;

/// A topic's route, ready to encode.
struct Prepared<'s> {
    brokers: Vec<Cow<'s, BrokerData>>,
    /// Which of `brokers` the acting-master rewrite changed.
    rewritten: Vec<bool>,
    queues: Vec<&'s QueueData>,
    filter_servers: Vec<(&'s str, &'s [String])>,
    order_topic_conf: Option<&'s str>,
    mappings: Option<Vec<(&'s str, &'s TopicQueueMappingInfo)>>,
}

impl Prepared<'_> {
    fn with_parts<R>(&self, f: impl FnOnce(&TopicRouteParts<'_>) -> R) -> R {
        let brokers: Vec<&BrokerData> = self.brokers.iter().map(|b| &**b).collect();
        f(&TopicRouteParts {
            broker_datas: &brokers,
            filter_servers: &self.filter_servers,
            order_topic_conf: self.order_topic_conf,
            queue_datas: &self.queues,
            mappings: self.mappings.as_deref(),
        })
    }
}

/// `topic`'s route with these queue datas, encoded in both styles: shared with every other topic of the
/// batch whose route is the same when it depends on nothing but its queue datas (a route body does not name
/// its topic), else its own.
pub fn shared_route(
    snapshot: &RouteSnapshot,
    topic: &str,
    queue_datas: QueueList,
    cache: &mut SectionCache,
) -> Arc<TopicRoute> {
    let alone = depends_on_queues_alone(snapshot, topic);
    let kind = usize::from(sync_exempt(topic));
    let list = Arc::as_ptr(&queue_datas) as usize;
    if alone {
        if let Some(route) = cache.by_list[kind].get(&list) {
            return route.clone();
        }
        if let Some(route) = cache.routes[kind].get(&*queue_datas) {
            return route.clone();
        }
    }
    let mut route = TopicRoute { queue_datas, encoded: None };
    route.encoded = encode_route(snapshot, topic, &route, cache);
    let route = Arc::new(route);
    if alone {
        cache.by_list[kind].insert(list, route.clone());
        cache.routes[kind].insert(route.queue_datas.clone(), route.clone());
    }
    route
}

/// Whether a topic's route is its queue datas and brokers alone: no `orderTopicConf` shown, no static-topic
/// mappings. (The acting-master rewrite depends on the name's prefix only: part of the key.)
fn depends_on_queues_alone(snapshot: &RouteSnapshot, topic: &str) -> bool {
    let order_conf = snapshot.config.order_message_enable && snapshot.order_topic_conf.contains_key(topic);
    !order_conf && !snapshot.mappings.contains_key(topic)
}

fn sync_exempt(topic: &str) -> bool {
    topic.starts_with(SYNC_BROKER_MEMBER_GROUP_PREFIX)
}

/// Encodes `topic` in both styles, as every reply of the snapshot will share it; `None` when no broker of the
/// topic is known (TOPIC_NOT_EXIST).
pub fn encode_route(
    snapshot: &RouteSnapshot,
    topic: &str,
    route: &TopicRoute,
    cache: &mut SectionCache,
) -> Option<EncodedRoute> {
    let p = prepare(snapshot, topic, route, None, false)?;
    let key: BrokerSetKey = p.brokers.iter().zip(&p.rewritten).map(|(b, r)| (b.broker_name.clone(), *r)).collect();
    let (shared_fastjson, shared_standard) = cache
        .sections
        .entry(key)
        .or_insert_with(|| {
            p.with_parts(|parts| {
                let mut fastjson = Vec::with_capacity(160 * parts.broker_datas.len() + 48);
                parts.write_broker_section(&mut fastjson, JsonStyle::Fastjson);
                let mut standard = Vec::with_capacity(fastjson.len() + 8 * parts.broker_datas.len());
                parts.write_broker_section(&mut standard, JsonStyle::Standard);
                (Bytes::from(fastjson), Bytes::from(standard))
            })
        })
        .clone();
    let (fastjson, standard) = p.with_parts(|parts| {
        let mut fastjson = Vec::with_capacity(96 * parts.queue_datas.len() + 32);
        parts.write_topic_section(&mut fastjson, JsonStyle::Fastjson);
        let mut standard = Vec::with_capacity(fastjson.len());
        parts.write_topic_section(&mut standard, JsonStyle::Standard);
        (fastjson, standard)
    });
    // The two styles differ here only for non-ASCII names and static-topic mappings.
    let own_fastjson = cache.intern(&fastjson);
    let own_standard = if standard == fastjson { own_fastjson.clone() } else { cache.intern(&standard) };
    Some(EncodedRoute {
        fastjson: RouteBody { shared: shared_fastjson, own: own_fastjson },
        standard: RouteBody { shared: shared_standard, own: own_standard },
    })
}

/// The route as Java's ZoneRouteRPCHook leaves it for a client in `zone`: master-ful broker groups of other
/// zones removed with their queues and filter servers, re-encoded in fastjson's default style (as Java does,
/// whatever the client asked for). Encoded per request: zone-aware clients are rare.
pub fn encode_route_for_zone(snapshot: &RouteSnapshot, topic: &str, zone: &str) -> Option<RouteBody> {
    encode_for_request(snapshot, topic, Some(zone), false)
}

/// The route as `ClusterTestRequestProcessor` answers a local hit (cluster-test mode): `orderTopicConf` from
/// the KV store whatever `orderMessageEnable` says, in fastjson's default style whatever the client asked
/// for; zone-filtered when the client asks for a zone. Encoded per request: the mode is for test clusters.
pub fn encode_route_for_cluster_test(snapshot: &RouteSnapshot, topic: &str, zone: Option<&str>) -> Option<RouteBody> {
    encode_for_request(snapshot, topic, zone, true)
}

/// A route encoded for one request, whole, in fastjson's default style.
fn encode_for_request(
    snapshot: &RouteSnapshot,
    topic: &str,
    zone: Option<&str>,
    order_conf_always: bool,
) -> Option<RouteBody> {
    let route = snapshot.topic(topic)?;
    route.encoded.as_ref()?;
    let p = prepare(snapshot, topic, route, zone, order_conf_always)?;
    Some(RouteBody { shared: Bytes::new(), own: p.with_parts(|parts| parts.encode(JsonStyle::Fastjson).into()) })
}

fn prepare<'s>(
    snapshot: &'s RouteSnapshot,
    topic: &str,
    route: &'s TopicRoute,
    zone: Option<&str>,
    order_conf_always: bool,
) -> Option<Prepared<'s>> {
    let mut brokers: Vec<Cow<'s, BrokerData>> = route
        .queue_datas
        .iter()
        .filter_map(|q| snapshot.brokers.get(&q.broker_name).map(|b| Cow::Borrowed(&**b)))
        .collect();
    if brokers.is_empty() {
        return None;
    }
    let mut rewritten = vec![false; brokers.len()];
    if snapshot.config.support_acting_master && !sync_exempt(topic) {
        rewrite_acting_masters(&mut brokers, &mut rewritten, &route.queue_datas);
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
    let order_topic_conf = if snapshot.config.order_message_enable || order_conf_always {
        snapshot.order_topic_conf.get(topic).map(|c| &**c)
    } else {
        None
    };
    let mappings = snapshot.mappings.get(topic).map(|m| m.iter().map(|(b, info)| (&**b, info)).collect());
    Some(Prepared { brokers, rewritten, queues, filter_servers, order_topic_conf, mappings })
}

fn zone_matches(b: &BrokerData, zone: &str) -> bool {
    b.zone_name.as_deref().is_some_and(|z| z.eq_ignore_ascii_case(zone))
}

/// `RouteInfoManager#pickupTopicRouteData`'s acting-master step: in a group that lost its master, whose
/// queues are read-only and which allows an acting master, the lowest-id slave is shown as id 0.
fn rewrite_acting_masters(brokers: &mut [Cow<'_, BrokerData>], rewritten: &mut [bool], queues: &[QueueData]) {
    let masterless = |b: &BrokerData| !b.broker_addrs.is_empty() && !b.broker_addrs.contains_key(&MASTER_ID);
    if !brokers.iter().any(|b| masterless(b)) {
        return;
    }
    for (b, rewritten) in brokers.iter_mut().zip(rewritten) {
        if !masterless(b) || !b.enable_acting_master {
            continue;
        }
        let read_only = queues.iter().find(|q| q.broker_name == b.broker_name).is_some_and(|q| !q.is_writable());
        if read_only {
            let owned = b.to_mut();
            if let Some((_, addr)) = owned.broker_addrs.pop_first() {
                owned.broker_addrs.insert(MASTER_ID, addr);
                *rewritten = true;
            }
        }
    }
}
