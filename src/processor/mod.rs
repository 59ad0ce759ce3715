//! Request dispatch: one handler per request code, as Java's `DefaultRequestProcessor` and
//! `ClientRequestProcessor`.

mod broker;
mod query;

use std::sync::Arc;

use crate::config::NamesrvConfig;
use crate::error::RequestError;
use crate::protocol::codes::{request, response};
use crate::protocol::lenient;
use crate::remoting::RemotingCommand;
use crate::route::{ConnId, RouteHandle};

/// What every handler can reach.
#[derive(Clone)]
pub struct Processor {
    pub routes: RouteHandle,
    pub config: Arc<NamesrvConfig>,
}

impl Processor {
    pub fn new(routes: RouteHandle, config: Arc<NamesrvConfig>) -> Self {
        Processor { routes, config }
    }

    /// Handles one request and returns the reply (its `opaque` already copied). The caller drops the reply
    /// of a oneway request.
    pub async fn process(&self, req: &RemotingCommand, conn: ConnId) -> RemotingCommand {
        let result = match req.code {
            request::GET_ROUTEINFO_BY_TOPIC => query::get_route_info_by_topic(self, req),
            request::GET_BROKER_CLUSTER_INFO => Ok(query::get_broker_cluster_info(self)),
            request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => query::get_all_topic_list(self),
            request::REGISTER_BROKER => broker::register_broker(self, req, conn).await,
            request::UNREGISTER_BROKER => broker::unregister_broker(self, req),
            request::REGISTER_TOPIC_IN_NAMESRV => broker::register_topic(self, req).await,
            request::QUERY_DATA_VERSION => broker::query_data_version(self, req),
            request::BROKER_HEARTBEAT => Ok(broker::broker_heartbeat(self, req)),
            other => Err(RequestError::NotSupported(other)),
        };
        let mut resp = result.unwrap_or_else(|e| {
            tracing::debug!(code = req.code, error = %e, "request failed");
            e.to_response(req.code)
        });
        resp.opaque = req.opaque;
        resp
    }
}

fn success() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// A header field that must be present.
fn required<'a>(req: &'a RemotingCommand, field: &'static str) -> Result<&'a str, RequestError> {
    req.ext(field).ok_or(RequestError::MissingField(field))
}

/// A `long` header field; present but not a number is an error (Java would fail on it later).
fn long_field(req: &RemotingCommand, field: &'static str) -> Result<Option<i64>, RequestError> {
    match req.ext(field) {
        None => Ok(None),
        Some(v) => lenient::parse_java_long(v)
            .map(Some)
            .ok_or_else(|| RequestError::InvalidField { field, value: v.to_string() }),
    }
}

fn bool_field(req: &RemotingCommand, field: &str) -> Option<bool> {
    req.ext(field).map(lenient::parse_java_bool)
}
