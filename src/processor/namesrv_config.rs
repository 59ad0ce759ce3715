//! GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG.
//!
//! An update is checked whole against the allow-list (see `config::update`), written back to the file given
//! with `-c` (no request ever decides where a file is written), and only then applied: an update that
//! cannot be written is refused and changes nothing.

use std::sync::Arc;

use bytes::Bytes;

use super::{route_config, success};
use crate::config::ConfigUpdateError;
use crate::error::RequestError;
use crate::limits::throttle::client_log;
use crate::remoting::RemotingCommand;
use crate::route::RouteMutation;
use crate::state::ServerState;

/// Sorted `key=value` lines; always a body, since Java's admin client reads it unconditionally.
pub(super) fn get_config(p: &ServerState) -> RemotingCommand {
    let mut resp = success();
    resp.body = Bytes::from(p.config.load().to_properties_text(false));
    resp
}

/// The longest update body taken: the keys that may change are a dozen short lines, and a body of a million
/// lines would take many times its size to parse.
const MAX_UPDATE_BODY: usize = 64 * 1024;

pub(super) async fn update_config(p: &ServerState, req: &RemotingCommand) -> Result<RemotingCommand, RequestError> {
    if req.body.is_empty() {
        return Ok(success());
    }
    if req.body.len() > MAX_UPDATE_BODY {
        return Err(ConfigUpdateError::TooLarge(req.body.len()).into());
    }
    let text = String::from_utf8(req.body.to_vec()).map_err(|_| ConfigUpdateError::Unparsable)?;
    let p = p.clone();
    crate::limits::offload::to_completion(async move { apply_update(&p, &text).await })
        .await
        .ok_or(RequestError::ShuttingDown)?
}

/// Checks, writes and applies an update; run to its end (`offload::to_completion`), one at a time.
async fn apply_update(p: &ServerState, text: &str) -> Result<RemotingCommand, RequestError> {
    let _serialized = p.config_update.lock().await;
    let current = p.config.load_full();
    let next = current.with_remote_update(text)?;
    if let Some(path) = &p.config_file {
        let contents = next.to_properties_file();
        let path = path.clone();
        let written =
            tokio::task::spawn_blocking(move || crate::store::fsutil::replace_durably(&path, contents.as_bytes()))
                .await
                .unwrap_or_else(|e| Err(crate::store::fsutil::ReplaceError::Unchanged(std::io::Error::other(e))));
        if let Err(e) = written {
            p.metrics.file_write_failures.config.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(error = %e, "config update refused: the config file could not be written");
            if matches!(e, crate::store::fsutil::ReplaceError::Unchanged(_)) {
                return Err(RequestError::Persist(format!("cannot write the config file: {e}")));
            }
            // The file holds the update, durable or not: the server follows the file, as a restart would.
            p.config.store(Arc::new(next));
            return Err(RequestError::Persist(format!("cannot write the config file durably: {e}")));
        }
    }
    let routes = route_config(&next);
    p.config.store(Arc::new(next));
    if routes != route_config(&current) {
        p.routes.apply(|done| RouteMutation::SetConfig { config: routes, done }).await?;
    }
    // Anyone may update it, as often as they like: the line takes a turn of the client lines, and the whole
    // update is in the audit log.
    client_log!(info, update = %crate::error::shown(text.trim(), 256), "name server config updated");
    Ok(success())
}
