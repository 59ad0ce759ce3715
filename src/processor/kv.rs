//! KV config: PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE.
//!
//! A change is acknowledged once it is on disk, and one that cannot be written changes nothing (the store,
//! `kvconfig.rs`). A change of namespace ORDER_TOPIC_CONFIG also re-encodes that topic's route before the
//! reply, while the store's writer turn is held: the routes take the changes in the order the file does,
//! so a route's `orderTopicConf` always ends as the file's value, and a change that failed reaches neither.

use bytes::Bytes;

use super::{required, success};
use crate::error::RequestError;
use crate::remoting::RemotingCommand;
use crate::route::RouteMutation;
use crate::state::ServerState;
use crate::store::kvconfig::{ORDER_TOPIC_CONFIG, encode_kv_table};

fn namespace_and_key(req: &RemotingCommand) -> Result<(&str, &str), RequestError> {
    match (req.ext("namespace"), req.ext("key")) {
        (Some(ns), Some(key)) => Ok((ns, key)),
        _ => Err(RequestError::KvNamespaceOrKeyNull),
    }
}

/// Applies a KV change (`Some` a put, `None` a delete) to the store and, for ORDER_TOPIC_CONFIG, to the
/// routes; run to its end whatever happens to the request (`offload::to_completion`).
async fn change(p: &ServerState, namespace: &str, key: &str, value: Option<&str>) -> Result<(), RequestError> {
    let (p, namespace, key, value) = (p.clone(), namespace.to_string(), key.to_string(), value.map(str::to_string));
    let change = async move { change_now(&p, &namespace, &key, value.as_deref()).await };
    crate::limits::offload::to_completion(change).await.ok_or(RequestError::ShuttingDown)?
}

async fn change_now(p: &ServerState, namespace: &str, key: &str, value: Option<&str>) -> Result<(), RequestError> {
    let mut writer = p.kv.writer().await;
    let written = match value {
        Some(value) => writer.put(namespace, key, value).await,
        None => writer.delete(namespace, key).await.map(|_existed| ()),
    };
    if let Err(e) = &written {
        p.metrics.file_write_failures.kv.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (namespace, key) = (crate::error::shown(namespace, 256), crate::error::shown(key, 256));
        tracing::warn!(error = %e, %namespace, %key, "KV change refused: the file could not be written");
    }
    // The routes follow the table, which follows the file: a write that failed but left its change in
    // place (`KvWriter::publish`) is in effect.
    let in_effect = written.is_ok() || p.kv.get(namespace, key).as_deref() == value;
    if namespace == ORDER_TOPIC_CONFIG && in_effect {
        let (topic, value) = (key.to_string(), value.map(str::to_string));
        p.routes.apply(|done| RouteMutation::OrderTopicConf { topic, value, done }).await?;
    }
    written.map_err(|e| RequestError::Persist(e.to_string()))
}

pub(super) async fn put_kv_config(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let (namespace, key) = namespace_and_key(req)?;
    let value = req.ext("value").ok_or(RequestError::KvValueNull)?;
    change(p, namespace, key, Some(value)).await?;
    Ok(success())
}

pub(super) fn get_kv_config(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let namespace = req.ext("namespace").unwrap_or("null");
    let key = req.ext("key").unwrap_or("null");
    let value =
        p.kv.get(namespace, key)
            .ok_or_else(|| RequestError::KvNotFound { namespace: namespace.to_string(), key: key.to_string() })?;
    let mut resp = success();
    resp.ext_fields = Some([("value", value)].into_iter().collect());
    Ok(resp)
}

/// Always SUCCESS, as in Java, whether the key existed or not.
pub(super) async fn delete_kv_config(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    let (namespace, key) = namespace_and_key(req)?;
    change(p, namespace, key, None).await?;
    Ok(success())
}

pub(super) fn get_kv_list_by_namespace(
    p: &ServerState,
    req: &RemotingCommand,
) -> Result<RemotingCommand, RequestError> {
    let namespace = required(req, "namespace")?;
    let table = p.kv.namespace(namespace).ok_or_else(|| RequestError::KvNamespaceNotFound(namespace.to_string()))?;
    let mut resp = success();
    resp.body = Bytes::from(encode_kv_table(&table));
    Ok(resp)
}
