//! Topic administration: WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV.
//! Each goes through the route writer and answers once the change is visible.

use super::{required, success};
use crate::error::RequestError;
use crate::remoting::RemotingCommand;
use crate::route::RouteMutation;
use crate::state::ServerState;

/// Wipe clears the write bit of every queue of the broker; add sets perm to exactly 6. The reply counts the
/// topics touched (`wipeTopicCount` / `addTopicCount`).
pub(super) async fn write_perm_of_broker(
    p: &ServerState,
    req: &RemotingCommand,
    wipe: bool,
) -> Result<RemotingCommand, RequestError> {
    let broker_name = required(req, "brokerName")?.to_string();
    let count = p.routes.apply(|done| RouteMutation::WritePerm { broker_name, wipe, done }).await?;
    let mut resp = success();
    let key = if wipe { "wipeTopicCount" } else { "addTopicCount" };
    resp.ext_fields = Some([(key, count.to_string())].into_iter().collect());
    Ok(resp)
}

/// With a `clusterName`, removes the topic from that cluster's brokers only; otherwise everywhere.
pub(super) async fn delete_topic(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let topic = required(req, "topic")?.to_string();
    let cluster = req.ext("clusterName").filter(|c| !c.is_empty()).map(str::to_string);
    p.routes.apply(|done| RouteMutation::DeleteTopic { topic, cluster, done }).await?;
    Ok(success())
}
