//! The connections the server accepted: each admitted under `serverMaxConnections` (or fewer, to fit the
//! process's file descriptors: `descriptors`), given its socket options and its slot in the connection
//! gauge (`net::slot`), and served on a task of its own until it settles or moves (it goes on elsewhere on
//! a task of its own, with its slot).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::config::NamesrvConfig;
use crate::limits::throttle::client_log;
use crate::net::connection::Connection;
use crate::net::slot::{self, ConnectionSlot};
use crate::net::tls::{Accepted, TlsServer};
use crate::state::ServerState;

/// The accepted connections' tasks on the intake.
pub(super) struct Connections {
    tasks: JoinSet<()>,
    next_id: u64,
    tls: Option<Arc<TlsServer>>,
    state: Arc<ServerState>,
}

impl Connections {
    pub(super) fn new(state: ServerState, tls: Option<Arc<TlsServer>>) -> Self {
        Connections { tasks: JoinSet::new(), next_id: 1, tls, state: Arc::new(state) }
    }

    /// Serves an accepted connection on a task of its own, or closes it at once when
    /// `serverMaxConnections` are open.
    pub(super) fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        let state = &self.state;
        let config = state.config.load();
        let limit = state.max_connections;
        if state.metrics.connections.load(Ordering::Relaxed).max(0) as u64 >= limit {
            state.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
            client_log!(warn, %peer, limit, "connection limit reached, closing the new connection");
            return;
        }
        let _ = stream.set_nodelay(true);
        set_buffer_sizes(&stream, &config);
        let id = self.next_id;
        self.next_id += 1;
        tracing::debug!(conn = id, %peer, "connection accepted");
        let slot = ConnectionSlot::take(state, id);
        let (state, tls) = (state.clone(), self.tls.clone());
        self.tasks.spawn(async move { serve_connection(stream, tls.as_deref(), id, peer, state, slot).await });
    }

    /// Waits for a connection's task on the intake to end (its connection closed, settled or moved on),
    /// and lets it go, logging a panic: an ended task's memory is freed only then, and a fleet's
    /// connections all settle at once. Pending while there are none.
    pub(super) async fn reap_next(&mut self) {
        match self.tasks.join_next().await {
            Some(ended) => log_panic(ended),
            None => std::future::pending().await,
        }
    }

    /// Serves the open connections, wherever they are served, until they close or `grace` has passed.
    pub(super) async fn drain(&mut self, grace: Duration) {
        let connections = self.state.metrics.connections.load(Ordering::Relaxed);
        tracing::info!(grace_ms = grace.as_millis() as u64, connections, "shutting down");
        let _ = tokio::time::timeout(grace, slot::all_ended(&self.state)).await;
        reap_finished(&mut self.tasks);
    }

    /// Ends every connection still on the intake (those on the lookup cores and the lane end with their
    /// runtimes).
    pub(super) async fn close(&mut self) {
        self.tasks.shutdown().await;
    }
}

/// Reaps the connection tasks that ended.
fn reap_finished(connections: &mut JoinSet<()>) {
    while let Some(ended) = connections.try_join_next() {
        log_panic(ended);
    }
}

fn log_panic(ended: Result<(), tokio::task::JoinError>) {
    if let Err(e) = ended
        && e.is_panic()
    {
        slot::log_panic(e.into_panic());
    }
}

/// Serves one accepted connection, in TLS if it starts a handshake and TLS is on.
async fn serve_connection(
    stream: TcpStream,
    tls: Option<&TlsServer>,
    id: u64,
    peer: SocketAddr,
    state: Arc<ServerState>,
    slot: ConnectionSlot,
) {
    let peer = Some(peer);
    let Some(tls) = tls else {
        return Connection::new(stream, id, peer, state).run(slot).await;
    };
    // Boxed: a handshake's and a TLS stream's state would otherwise sit in every connection's task, TLS or
    // not, while it is on the intake.
    Box::pin(serve_tls(stream, tls, id, peer, state, slot)).await
}

/// `serve_connection` with TLS on: the handshake if the peer starts one, then the connection.
async fn serve_tls(
    stream: TcpStream,
    tls: &TlsServer,
    id: u64,
    peer: Option<SocketAddr>,
    state: Arc<ServerState>,
    slot: ConnectionSlot,
) {
    let idle = state.config.load().channel_idle_timeout();
    match tls.accept(stream, idle).await {
        Accepted::Plain(stream) => Connection::new(stream, id, peer, state).run(slot).await,
        Accepted::Tls(stream) => Connection::new(*stream, id, peer, state).run(slot).await,
        Accepted::Refused => slot.ended(false),
    }
}

/// `serverSocketSndBufSize` and `serverSocketRcvBufSize`, when set, as Java sets them on each accepted
/// connection: they cap what the kernel holds for a peer that does not read, or sends faster than it is read
/// (without them, Linux grows a socket's buffers up to `tcp_wmem`/`tcp_rmem`, a few megabytes).
fn set_buffer_sizes(stream: &TcpStream, config: &NamesrvConfig) {
    use rustix::net::sockopt;
    if let Ok(size @ 1..) = usize::try_from(config.server_socket_snd_buf_size) {
        let _ = sockopt::set_socket_send_buffer_size(stream, size);
    }
    if let Ok(size @ 1..) = usize::try_from(config.server_socket_rcv_buf_size) {
        let _ = sockopt::set_socket_recv_buffer_size(stream, size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{RouteSnapshot, route_table};

    /// A plain connection's task holds a plain connection, not the TLS one it could have been. Made to
    /// fail once by awaiting `serve_tls` unboxed (1,752 bytes).
    #[tokio::test]
    async fn a_plain_connections_task_holds_no_tls_state() {
        let (routes, _writer) = route_table(RouteSnapshot::default(), None, 4);
        let dir = tempfile::tempdir().expect("temp dir");
        let state = Arc::new(ServerState::for_tests(routes, dir.path()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (plain, stream) = (TcpStream::connect(addr).await.expect("connect"), TcpStream::connect(addr).await);
        let plain = Connection::new(plain, 1, None, state.clone()).run(ConnectionSlot::take(&state, 1));
        let task =
            serve_connection(stream.expect("connect"), None, 2, addr, state.clone(), ConnectionSlot::take(&state, 2));
        let (size, plain) = (std::mem::size_of_val(&task), std::mem::size_of_val(&plain));
        eprintln!("a connection's accepted task: {size} bytes, its plain connection's {plain}");
        assert!(size <= plain + 512, "an accepted connection's future is {size} bytes, its connection's {plain}");
    }
}
