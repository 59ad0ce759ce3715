//! The operator's HTTP port (`metricsPort`): Prometheus metrics, health and readiness, and route dumps.
//!
//! - `/metrics`: Prometheus text format;
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 while routes are served, 503 during the start-up wait (`needWaitForService`) and shutdown;
//! - `/routes/{topic}`: the topic's TopicRouteData as standard JSON (404 when there is none);
//! - `/cluster`: cluster info as standard JSON.

use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::protocol::json::JsonStyle;
use crate::state::ServerState;

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/routes/{topic}", get(route))
        .route("/cluster", get(cluster))
        .with_state(state)
}

/// Serves the router on `listener` until the task is aborted; returning at all is a failure, which the
/// server's supervision turns into a stop (`server.rs`).
pub async fn serve(listener: tokio::net::TcpListener, state: ServerState) {
    if let Err(e) = axum::serve(listener, router(state)).await {
        tracing::error!(error = %e, "metrics HTTP server stopped");
    }
}

/// A JSON reply, ending with a newline as curl users expect.
fn json(mut body: Vec<u8>) -> Response {
    body.push(b'\n');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn metrics(State(p): State<ServerState>) -> Response {
    let snapshot = p.routes.load();
    let c = &p.routes.counters;
    let config = p.config.load();
    let counters = [
        ("rocketns_registrations_total", "REGISTER_BROKER requests applied.", c.registrations.load(Ordering::Relaxed)),
        ("rocketns_expiries_total", "Brokers removed for silence.", c.expiries.load(Ordering::Relaxed)),
        ("rocketns_snapshot_publishes_total", "Route snapshots published.", c.publishes.load(Ordering::Relaxed)),
        (
            "rocketns_min_broker_id_notices_dropped_total",
            "905 notices dropped because the notifier's queue was full.",
            c.notices_dropped.load(Ordering::Relaxed),
        ),
    ];
    let gauges = [
        ("rocketns_snapshot_version", "Version of the route snapshot being served.", snapshot.version as i64),
        ("rocketns_topics", "Topics in the route table.", snapshot.topics.len() as i64),
        ("rocketns_brokers", "Broker groups (broker names).", snapshot.brokers.len() as i64),
        ("rocketns_clusters", "Clusters.", snapshot.clusters.len() as i64),
        ("rocketns_live_brokers", "Broker addresses with a live heartbeat entry.", p.routes.liveness.len() as i64),
        ("rocketns_kv_entries", "KV config entries.", p.kv.entry_count() as i64),
        ("rocketns_ready", "1 while routes are served (/readyz), 0 during needWaitForService and shutdown.", i64::from(p.is_ready())),
        (
            "rocketns_server_max_connections",
            "serverMaxConnections: connections beyond it are closed on accept.",
            i64::try_from(config.server_max_connections).unwrap_or(i64::MAX),
        ),
    ];
    let mut text = p.metrics.render(&counters, &gauges);
    if let Some(cores) = &p.lookups {
        let live = cores.connections();
        let names: Vec<String> = (0..live.len()).map(|core| core.to_string()).collect();
        let values: Vec<(&str, i64)> = names.iter().map(String::as_str).zip(live.iter().map(|&n| n as i64)).collect();
        crate::ops::metrics::write_labelled_gauge(
            &mut text,
            "rocketns_lookup_core_connections",
            "Settled connections served by each lookup thread (src/net/cores.rs).",
            "core",
            &values,
        );
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn readyz(State(p): State<ServerState>) -> Response {
    if p.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn route(State(p): State<ServerState>, Path(topic): Path<String>) -> Response {
    match p.routes.load().route_body(&topic, JsonStyle::Standard) {
        Some(body) => json(body.to_vec()),
        None => (StatusCode::NOT_FOUND, json(br#"{"error":"no route for this topic"}"#.to_vec())).into_response(),
    }
}

async fn cluster(State(p): State<ServerState>) -> Response {
    let body = match crate::processor::table_body(&p, crate::route::snapshot::TableBody::ClusterInfo).await {
        Ok(crate::route::snapshot::Encoded::One(body)) => body,
        _ => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    };
    // The wire form has fastjson's bare numeric keys; tools want standard JSON.
    json(crate::protocol::lenient::quote_bare_keys(&body).unwrap_or_else(|| body.to_vec()))
}
