//! The operator's HTTP port (`metricsPort`): Prometheus metrics, health and readiness, and route dumps.
//!
//! - `/metrics`: Prometheus text format;
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 while routes are served, 503 during the start-up wait (`needWaitForService`) and shutdown;
//! - `/routes/{topic}`: the topic's TopicRouteData as standard JSON (404 when there is none);
//! - `/cluster`: cluster info as standard JSON; with `namesrvPeers`, the last comparison with each peer
//!   under `peers` too.
//!
//! Route dumps are written from the route snapshot's own bytes, each encoded once per snapshot as the
//! remoting port's are, and a dump over [`SMALL_REPLY`] holds room in the replies pool until it has been
//! handed over, as a remoting reply does: 40 clients that never read a 24 MB `/cluster` had each held a
//! copy of their own (RSS 163 to 1,076 MB, issue 44). Together the dumps hold at most half the pool
//! (`MemoryBudget::http_dumps`), so the remoting port's replies always find the other half. Each piece
//! handed to the connection is a copy of its own: a slice would keep the whole dump alive, charged no
//! more, while it waits in the connection's buffer (up to the write-stall limit, after a newer snapshot
//! has dropped the dump). Connections are held to their bounds by `http_listener`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Buf;
use http_body::Frame;

use crate::limits::budget::Charge;
use crate::protocol::json::JsonStyle;
use crate::route::snapshot::{Encoded, TableBody};
use crate::state::ServerState;

/// Replies up to this size are written without a charge, as on the remoting port.
pub const SMALL_REPLY: usize = crate::limits::budget::SMALL_FRAME;
/// How long a dump waits for room in the replies pool before it is answered 503.
const ROOM_WAIT: Duration = Duration::from_secs(5);
/// How much of a dump is handed to the connection at a time, copied: its socket takes it as it can, and
/// the room stays held until the last piece has been handed over.
const PIECE: usize = crate::ops::http_listener::BUFFER;

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/routes/{topic}", get(route))
        .route("/cluster", get(cluster))
        .with_state(state)
}

/// Serves the port on `listener` until the task is aborted; returning at all is a failure, which the
/// server's supervision turns into a stop (`server.rs`). Its connections are served on the runtime this
/// runs on, whichever `listener` was bound on.
pub async fn serve(listener: tokio::net::TcpListener, state: ServerState) {
    let listener = match listener.into_std().and_then(tokio::net::TcpListener::from_std) {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!(error = %e, "the metrics port cannot be served here");
            return;
        }
    };
    let metrics = state.metrics.clone();
    crate::ops::http_listener::serve(listener, router(state), metrics).await;
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
    dump(&p, Dump::Route(topic)).await
}

async fn cluster(State(p): State<ServerState>) -> Response {
    dump(&p, Dump::Cluster).await
}

/// What a dump is of: loaded from the route table in force each time it is asked for.
enum Dump {
    Route(String),
    Cluster,
}

/// The dump's parts, from the snapshot in force now, or the reply that says why there are none.
async fn load(p: &ServerState, dump: &Dump) -> Result<Vec<Bytes>, Response> {
    match dump {
        Dump::Route(topic) => match p.routes.load().route_body(topic, JsonStyle::Standard) {
            Some(body) => Ok(vec![body.shared.clone(), body.own.clone(), Bytes::from_static(b"\n")]),
            None => {
                let body = "{\"error\":\"no route for this topic\"}\n";
                Err((StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], body).into_response())
            }
        },
        Dump::Cluster => match crate::processor::table_body(p, TableBody::ClusterInfoStandard).await {
            // With peers, their last comparison after the cluster info's tables, as one more key.
            Ok(Encoded::One(body)) if !p.peers.is_empty() && body.ends_with(b"}\n") => {
                let peers = format!(",\"peers\":{}}}\n", p.peers.to_json());
                Ok(vec![body.slice(..body.len() - 2), Bytes::from(peers)])
            }
            Ok(Encoded::One(body)) => Ok(vec![body]),
            _ => Err(StatusCode::SERVICE_UNAVAILABLE.into_response()),
        },
    }
}

/// A JSON reply of `what`, holding room in the replies pool and the HTTP share while it is written when it
/// is large. A dump that finds no room now waits for it holding nothing of its own, then is loaded again
/// (a newer snapshot's may be larger, and waits again), as the remoting port's replies do: before, each
/// waiting client held a body that nothing charged, and registrations between their requests made each
/// a new one (55 waiting clients took RSS from 69 to 395 MB with 12 MB charged, issue 44's review).
async fn dump(p: &ServerState, what: Dump) -> Response {
    let deadline = tokio::time::Instant::now() + ROOM_WAIT;
    let (share, replies) = (&p.budget.http_dumps, &p.budget.replies);
    let mut charges: (Charge, Charge) = Default::default();
    let (parts, len) = loop {
        let parts = match load(p, &what).await {
            Ok(parts) => parts,
            Err(reply) => return reply,
        };
        let len: usize = parts.iter().map(Bytes::len).sum();
        if len <= SMALL_REPLY {
            drop(std::mem::take(&mut charges));
            break (parts, len);
        }
        if len > share.capacity() {
            let remark = "the reply is larger than half of largeReplyBufferBytes\n";
            return (StatusCode::SERVICE_UNAVAILABLE, remark).into_response();
        }
        if charges.0.try_grow(len, share) && charges.1.try_grow(len, replies) {
            charges.0.shrink_to(len);
            charges.1.shrink_to(len);
            break (parts, len);
        }
        drop((parts, std::mem::take(&mut charges)));
        let room = async { (share.reserve(len).await, replies.reserve(len).await) };
        match tokio::time::timeout_at(deadline, room).await {
            Ok(room) => charges = room,
            Err(_) => return (StatusCode::SERVICE_UNAVAILABLE, "no room for the reply now\n").into_response(),
        }
    };
    let parts = parts.into_iter().filter(|part| !part.is_empty()).collect();
    let body = Body::new(Pieces { parts, len: len as u64, _charges: charges });
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A body handed over [`PIECE`] at a time from shared bytes, with the room it holds (in the HTTP share,
/// and in the replies pool).
struct Pieces {
    parts: VecDeque<Bytes>,
    len: u64,
    _charges: (Charge, Charge),
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(part) = self.parts.front_mut() else {
            return Poll::Ready(None);
        };
        let piece = Bytes::copy_from_slice(&part[..part.len().min(PIECE)]);
        part.advance(piece.len());
        if part.is_empty() {
            self.parts.pop_front();
        }
        self.len -= piece.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.len)
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;

    use super::*;

    /// Every piece owns its bytes: none points into the dump, so the dump lives no longer than the body
    /// that holds its room, whatever the connection still buffers.
    #[test]
    fn pieces_are_copies_of_their_own() {
        let dump = Bytes::from(vec![7u8; 3 * PIECE + 5]);
        let within = dump.as_ptr_range();
        let mut body =
            Pieces { parts: VecDeque::from([dump.clone()]), len: dump.len() as u64, _charges: Default::default() };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut handed = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) {
            let piece = frame.into_data().expect("data");
            assert!(!within.contains(&piece.as_ptr()), "a slice of the dump");
            handed.extend_from_slice(&piece);
        }
        assert_eq!(handed, dump);
    }
}
