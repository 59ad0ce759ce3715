//! Broker housekeeping: the periodic scan that removes brokers whose heartbeats stopped
//! (Java's `scanNotActiveBroker`), and the clean-up when a broker's connection closes.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::SharedConfig;
use crate::route::{ConnId, RouteHandle, RouteMutation};

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

/// Writes the route snapshot file for warm restart every `routeSnapshotIntervalSeconds`, when the routes
/// changed since the last write.
pub async fn save_routes_periodically(routes: RouteHandle, config: SharedConfig) {
    let mut saved_version = routes.snapshot.load().version;
    loop {
        let config = config.load_full();
        tokio::time::sleep(Duration::from_secs(config.route_snapshot_interval_seconds.max(1))).await;
        let version = routes.snapshot.load().version;
        if config.warm_restart && version != saved_version {
            save_routes(&routes, &config.route_snapshot_file()).await;
            saved_version = version;
        }
    }
}

/// Writes the current routes to `path`, atomically. With no routes there is nothing to serve after a
/// restart: no file is written, and one left by earlier routes is removed.
pub async fn save_routes(routes: &RouteHandle, path: &std::path::Path) {
    let snapshot = routes.snapshot.load_full();
    if snapshot.topics.is_empty() && snapshot.brokers.is_empty() {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!(path = %path.display(), "no routes: route snapshot file removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove the route snapshot file"),
        }
        return;
    }
    let content = crate::route::dump::dump(&snapshot, &routes.liveness);
    let path_buf = path.to_path_buf();
    match tokio::task::spawn_blocking(move || crate::fsutil::write_atomically(&path_buf, &content)).await {
        Ok(Ok(())) => tracing::debug!(path = %path.display(), "route snapshot file written"),
        Ok(Err(e)) => tracing::warn!(path = %path.display(), error = %e, "cannot write the route snapshot file"),
        Err(e) => tracing::warn!(error = %e, "route snapshot writer failed"),
    }
}

/// A connection over which a broker registered closed: the brokers whose last registration came over it
/// are removed at once (the writer finds them).
pub async fn on_connection_closed(routes: &RouteHandle, conn: ConnId) {
    let _ = routes.submit(RouteMutation::ConnectionClosed(conn)).await;
}
