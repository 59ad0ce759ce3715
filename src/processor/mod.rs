//! Request dispatch: one handler per request code, as Java's `DefaultRequestProcessor` and
//! `ClientRequestProcessor`. The handlers read and change the server's shared state (`state.rs`).

pub mod acl;
mod admin;
mod broker;
mod kv;
mod namesrv_config;
mod query;

pub(crate) use query::table_body;

use crate::config::NamesrvConfig;
use crate::error::RequestError;
use crate::limits::budget::{Charge, RequestRoom};
use crate::limits::throttle::client_log;
use crate::protocol::codes::{request, response, version};
use crate::protocol::lenient;
use crate::remoting::{OutQueue, RemotingCommand};
use crate::route::{ConnId, RouteConfig};
use crate::state::ServerState;

/// Who sent a request: its connection, and the address it came from (for the audit log).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub conn: ConnId,
    pub addr: Option<std::net::SocketAddr>,
}

/// Answers one request: the reply goes into `out`, unless the request is oneway. Returns the reply's code.
/// `room` is what the request holds in the memory budget (a frame over 16 KiB, `budget.rs`), given back
/// once it is answered; a REGISTER_BROKER's body is taken out of `req`, to be freed once parsed. Requests that
/// change state other than a broker's own registration are recorded in the audit log, answered or refused.
pub async fn dispatch(
    state: &ServerState,
    req: &mut RemotingCommand,
    caller: Caller,
    out: &mut OutQueue,
    room: RequestRoom,
) -> i32 {
    let answered = answer(state, req, caller.conn, out, room).await;
    match reply(state, req, caller, out, answered) {
        Ok(code) => code,
        Err(mut resp) => {
            let held = reply_room(state, req, caller, out, &mut resp).await;
            resp.opaque = req.opaque;
            out.push_large(&resp, held);
            resp.code
        }
    }
}

/// A route lookup answered without a future: `dispatch`'s future holds every handler's state (kilobytes),
/// and creating it would copy them for every lookup.
/// `None` when this lookup needs what only `dispatch` does (a signature to check, the product environment,
/// the shutdown's rules, room for a large route), before anything is answered.
pub fn dispatch_lookup(state: &ServerState, req: &RemotingCommand, caller: Caller, out: &mut OutQueue) -> Option<i32> {
    let ordinary = req.code == request::GET_ROUTEINFO_BY_TOPIC
        && state.access_control.is_none()
        && state.product_env.is_none()
        && !state.lifecycle.shutting_down()
        && !state.lifecycle.handed_over();
    if !ordinary {
        return None;
    }
    match query::answer_route_info(state, req, out) {
        // The common case, matched apart: handing the whole `Result` on would copy it.
        Ok(None) => Some(response::SUCCESS),
        Ok(Some(_large)) => None,
        failed => reply(state, req, caller, out, failed).ok(),
    }
}

/// Queues the reply to `req` (unless it was one-way) and says its code; a reply whose body is over
/// `COPY_LIMIT` is handed back to wait for room in the replies pool.
fn reply(
    state: &ServerState,
    req: &RemotingCommand,
    caller: Caller,
    out: &mut OutQueue,
    answered: Result<Option<RemotingCommand>, RequestError>,
) -> Result<i32, Box<RemotingCommand>> {
    let mut resp = match answered {
        Ok(Some(resp)) => resp,
        Ok(None) => return Ok(response::SUCCESS),
        Err(e) => {
            tracing::debug!(code = req.code, error = %e, "request failed");
            e.to_response(req.code)
        }
    };
    resp.opaque = req.opaque;
    state.audit.record(caller.addr, req, &resp);
    tracing::trace!(conn = caller.conn, code = resp.code, remark = ?resp.remark, "reply");
    if req.is_oneway() {
        return Ok(resp.code);
    }
    if resp.body.len() > OutQueue::COPY_LIMIT {
        return Err(Box::new(resp));
    }
    out.push(&resp);
    Ok(resp.code)
}

/// Room in the replies pool for `resp`'s large body, kept until the peer has taken it. A read waits for
/// room holding nothing and is then answered again (its body may have changed meanwhile); any other
/// request's reply is kept while it waits (a broker's ordered-topic configs).
async fn reply_room(
    state: &ServerState,
    req: &mut RemotingCommand,
    caller: Caller,
    out: &mut OutQueue,
    resp: &mut RemotingCommand,
) -> Charge {
    let pool = &state.budget.replies;
    if let Some(room) = pool.try_reserve(resp.body.len()) {
        return room;
    }
    if !crate::processor::acl::is_read(req.code) {
        return pool.reserve(resp.body.len()).await;
    }
    loop {
        let len = resp.body.len();
        *resp = RemotingCommand::response(response::SUCCESS, None);
        let mut room = pool.reserve(len).await;
        let again = match answer(state, req, caller.conn, out, RequestRoom::default()).await {
            Ok(Some(again)) => again,
            // Answered into `out` (a small route) meanwhile: nothing large is left to queue.
            Ok(None) => return Charge::default(),
            Err(e) => e.to_response(req.code),
        };
        if again.body.len() <= len || room.try_grow(again.body.len(), pool) {
            room.shrink_to(again.body.len());
            *resp = again;
            return room;
        }
        *resp = again;
    }
}

/// The reply to `req`, or `None` when the handler has put a successful reply into `out` itself.
async fn answer(
    state: &ServerState,
    req: &mut RemotingCommand,
    conn: ConnId,
    out: &mut OutQueue,
    room: RequestRoom,
) -> Result<Option<RemotingCommand>, RequestError> {
    // Java tells clients newer than 5.3.1 to go away while it shuts down; they switch NameServer.
    if req.version > version::V5_3_1 && state.lifecycle.shutting_down() {
        return Ok(Some(RemotingCommand::response(response::GO_AWAY, Some("please go away".into()))));
    }
    // After a take-over the new process has read the KV store and routes; a change here would be lost.
    if state.lifecycle.handed_over() && crate::ops::audit::audited(req.code).is_some() {
        return Err(RequestError::ShuttingDown);
    }
    if let Some(acl) = &state.access_control {
        check_signature(acl, req).await?;
    }
    let resp = match req.code {
        request::GET_ROUTEINFO_BY_TOPIC => return query::answer_route_info(state, req, out),
        request::GET_BROKER_CLUSTER_INFO => query::get_broker_cluster_info(state, req).await,
        request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => query::get_all_topic_list(state).await,
        request::GET_TOPICS_BY_CLUSTER => query::get_topics_by_cluster(state, req).await,
        request::GET_SYSTEM_TOPIC_LIST_FROM_NS => query::get_system_topic_list(state).await,
        request::GET_UNIT_TOPIC_LIST
        | request::GET_HAS_UNIT_SUB_TOPIC_LIST
        | request::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => query::get_unit_topic_list(state, req.code).await,
        request::GET_BROKER_MEMBER_GROUP => query::get_broker_member_group(state, req),
        request::REGISTER_BROKER => {
            let body = std::mem::take(&mut req.body);
            broker::register_broker(state, req, body, conn, room).await
        }
        request::UNREGISTER_BROKER => broker::unregister_broker(state, req),
        request::REGISTER_TOPIC_IN_NAMESRV => broker::register_topic(state, req, room).await,
        request::QUERY_DATA_VERSION => broker::query_data_version(state, req),
        request::BROKER_HEARTBEAT => Ok(broker::broker_heartbeat(state, req)),
        request::WIPE_WRITE_PERM_OF_BROKER => admin::write_perm_of_broker(state, req, true).await,
        request::ADD_WRITE_PERM_OF_BROKER => admin::write_perm_of_broker(state, req, false).await,
        request::DELETE_TOPIC_IN_NAMESRV => admin::delete_topic(state, req).await,
        request::PUT_KV_CONFIG => kv::put_kv_config(state, req).await,
        request::GET_KV_CONFIG => kv::get_kv_config(state, req),
        request::DELETE_KV_CONFIG => kv::delete_kv_config(state, req).await,
        request::GET_KVLIST_BY_NAMESPACE => kv::get_kv_list_by_namespace(state, req),
        request::UPDATE_NAMESRV_CONFIG => namesrv_config::update_config(state, req).await,
        request::GET_NAMESRV_CONFIG => Ok(namesrv_config::get_config(state)),
        other => Err(RequestError::NotSupported(other)),
    }?;
    Ok(Some(resp))
}

/// A request's signature (`aclEnable`): checked here for a small request; a large body's HMAC (a
/// registration's megabytes) is computed on the blocking pool, off the threads that answer lookups.
async fn check_signature(
    acl: &std::sync::Arc<crate::processor::acl::AccessControl>,
    req: &RemotingCommand,
) -> Result<(), RequestError> {
    let checked = if req.body.len() <= crate::limits::budget::SMALL_FRAME {
        acl.check(req)
    } else {
        let (acl, code, ext, body) = (acl.clone(), req.code, req.ext_fields.clone(), req.body.clone());
        crate::limits::offload::on_blocking_pool(move || acl.check_parts(code, ext.as_ref(), &body))
            .await
            .ok_or(RequestError::ShuttingDown)?
    };
    checked.map_err(|denied| {
        client_log!(warn, code = req.code, reason = %denied, "request refused by access control");
        denied.into()
    })
}

/// The route switches of a configuration.
pub fn route_config(c: &NamesrvConfig) -> RouteConfig {
    RouteConfig {
        delete_topic_with_broker_registration: c.delete_topic_with_broker_registration,
        support_acting_master: c.support_acting_master,
        order_message_enable: c.order_message_enable,
    }
}

fn success() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// A header field that must be present.
pub(crate) fn required<'a>(req: &'a RemotingCommand, field: &'static str) -> Result<&'a str, RequestError> {
    req.ext(field).ok_or(RequestError::MissingField(field))
}

/// A `long` header field; present but not a number is an error (Java would fail on it later).
pub(crate) fn long_field(req: &RemotingCommand, field: &'static str) -> Result<Option<i64>, RequestError> {
    match req.ext(field) {
        None => Ok(None),
        Some(v) => lenient::parse_java_long(v)
            .map(Some)
            .ok_or_else(|| RequestError::InvalidField { field, value: v.to_string() }),
    }
}

pub(crate) fn bool_field(req: &RemotingCommand, field: &str) -> Option<bool> {
    req.ext(field).map(lenient::parse_java_bool)
}
