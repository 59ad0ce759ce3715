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

/// A connection closed: brokers that registered over it are removed at once.
pub async fn on_connection_closed(routes: &RouteHandle, conn: ConnId) {
    if routes.liveness.registered_over(conn).is_empty() {
        return;
    }
    let _ = routes.submit(RouteMutation::ConnectionClosed(conn)).await;
}
