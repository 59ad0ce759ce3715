//! The operator's HTTP port (`metricsPort`): Prometheus metrics, health and readiness, and route dumps.
//!
//! - `/metrics`: Prometheus text format;
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 while routes are served, 503 during the start-up wait (`needWaitForService`) and shutdown;
//! - `/routes/{topic}`: the topic's TopicRouteData as standard JSON (404 when there is none);
//! - `/cluster`: cluster info as standard JSON.

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
    let listener = crate::ops::http_listener::Bounded::new(listener, state.metrics.clone());
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
    let text = crate::ops::exposition::render(&p);
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
