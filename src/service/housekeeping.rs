//! Broker housekeeping: the periodic scan that removes brokers whose heartbeats stopped
//! (Java's `scanNotActiveBroker`) and the route saver that writes the warm-restart route file (the clean-up
//! when a broker's connection closes is its slot's: `net::slot`).

use std::time::Duration;

use tokio::time::Instant;

use crate::config::SharedConfig;
use crate::ops::metrics::Metrics;
use crate::route::{RouteHandle, RouteMutation};

/// Every `scanNotActiveBrokerInterval` (first after one interval; a runtime change applies from the next
/// one), asks the writer to remove each broker whose heartbeat expired. The writer checks again before
/// removing, so a heartbeat racing with the scan wins.
pub async fn scan_inactive_brokers(routes: RouteHandle, config: SharedConfig) {
    loop {
        let period = Duration::from_millis(config.load().scan_not_active_broker_interval.max(1));
        tokio::time::sleep(period).await;
        let now = Instant::now();
        for key in routes.liveness.expired(now) {
            if routes.submit(RouteMutation::Expire { key, now }).await.is_err() {
                return;
            }
        }
    }
}

/// Writes the route snapshot file for warm restart every `routeSnapshotIntervalSeconds` when the routes
/// changed since the last write, until `stop` fires; then writes it a last time (with `warmRestart`) and
/// returns. The one task that writes the file, so no two writes ever overlap; `stop` is only heard between
/// writes, so none is cut short. A write that fails (a full disk) is logged, counted
/// (`rocketns_file_write_failures_total{file="routes"}`) and tried again at the next period; the file
/// written last stays whole, since every write replaces it atomically.
pub async fn save_routes_periodically(
    routes: RouteHandle,
    config: SharedConfig,
    metrics: std::sync::Arc<Metrics>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut saved_version = routes.load().version;
    loop {
        let period = Duration::from_secs(config.load().route_snapshot_interval_seconds.max(1));
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = &mut stop => break,
        }
        let config = config.load_full();
        let version = routes.load().version;
        if config.warm_restart
            && version != saved_version
            && let Some(saved) = save_routes(&routes, &config.route_snapshot_file(), &metrics).await
        {
            saved_version = saved;
        }
    }
    let config = config.load_full();
    if config.warm_restart {
        save_routes(&routes, &config.route_snapshot_file(), &metrics).await;
    }
}

/// Writes the routes to `path`, atomically, and returns the version of the snapshot written. With no routes
/// there is nothing to serve after a restart: no file is written, and one left by earlier routes is removed.
pub(crate) async fn save_routes(routes: &RouteHandle, path: &std::path::Path, metrics: &Metrics) -> Option<u64> {
    let to_save = match routes.routes_to_save().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "route snapshot file not written");
            return None;
        }
    };
    let version = to_save.snapshot.version;
    if to_save.is_empty() {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!(path = %path.display(), "no routes: route snapshot file removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove the route snapshot file"),
        }
        return Some(version);
    }
    let path_buf = path.to_path_buf();
    let written = tokio::task::spawn_blocking(move || {
        crate::store::fsutil::write_atomically_with(&path_buf, |out| crate::route::dump::write(&to_save, out))
    })
    .await;
    match written {
        Ok(Ok(())) => {
            tracing::debug!(path = %path.display(), "route snapshot file written");
            Some(version)
        }
        Ok(Err(e)) => {
            metrics.file_write_failures.routes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(path = %path.display(), error = %e, "cannot write the route snapshot file; trying again next period");
            None
        }
        Err(e) => {
            metrics.file_write_failures.routes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(error = %e, "route snapshot writer failed; trying again next period");
            None
        }
    }
}
