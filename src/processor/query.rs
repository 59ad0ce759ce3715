//! Route reads: GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
//!
//! None of them locks or encodes a route: they load the current snapshot and share its bytes.

use super::{Processor, bool_field, success};
use crate::error::RequestError;
use crate::json::JsonStyle;
use crate::protocol::codes::version;
use crate::remoting::RemotingCommand;

/// Java answers standard JSON to clients from 4.9.4 on, and to any client that asks for it.
fn route_style(req: &RemotingCommand) -> JsonStyle {
    if req.version >= version::V4_9_4 || bool_field(req, "acceptStandardJsonOnly").unwrap_or(false) {
        JsonStyle::Standard
    } else {
        JsonStyle::Fastjson
    }
}

pub(super) fn get_route_info_by_topic(p: &Processor, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let topic = req.ext("topic");
    let snapshot = p.routes.snapshot.load();
    let body = topic
        .and_then(|t| snapshot.route_body(t, route_style(req)))
        .ok_or_else(|| RequestError::TopicNotExist(topic.unwrap_or("null").to_string()))?;
    let mut resp = success();
    resp.body = body;
    Ok(resp)
}

pub(super) fn get_broker_cluster_info(p: &Processor) -> RemotingCommand {
    let mut resp = success();
    resp.body = p.routes.snapshot.load().cluster_info_body();
    resp
}

pub(super) fn get_all_topic_list(p: &Processor) -> Result<RemotingCommand, RequestError> {
    if !p.config.enable_all_topic_list {
        return Err(RequestError::Disabled);
    }
    let mut resp = success();
    resp.body = p.routes.snapshot.load().topic_list_body();
    Ok(resp)
}
