//! The connections the server accepted: each admitted under `serverMaxConnections` (or fewer, to fit the
//! process's file descriptors: `descriptors`), given its socket
//! options and served on a task of its own, whose slot in the connection gauge and whose brokers are given
//! back when it ends, however it ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::config::NamesrvConfig;
use crate::limits::throttle::client_log;
use crate::net::connection::Connection;
use crate::net::tls::{Accepted, TlsServer};
use crate::route::ConnId;
use crate::service::{housekeeping, supervised};
use crate::state::ServerState;

/// The accepted connections' tasks.
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
        // Taken before the task starts, so that the limit holds for a burst of accepts.
        let slot = ConnectionSlot::take(state, id);
        let (state, tls) = (state.clone(), self.tls.clone());
        self.tasks.spawn(async move {
            // The whole slot moves into the task (a closure would capture only the field it assigns).
            let mut slot = slot;
            slot.broker_registered = serve_connection(stream, tls.as_deref(), id, peer, state).await;
            tracing::debug!(conn = id, %peer, "connection closed");
        });
        reap_finished(&mut self.tasks);
    }

    /// Serves the open connections until they close or `grace` has passed.
    pub(super) async fn drain(&mut self, grace: Duration) {
        // Finished connection tasks not reaped yet are not open connections.
        reap_finished(&mut self.tasks);
        tracing::info!(grace_ms = grace.as_millis() as u64, connections = self.tasks.len(), "shutting down");
        let _ = tokio::time::timeout(grace, async { while self.tasks.join_next().await.is_some() {} }).await;
    }

    /// Ends every connection still open.
    pub(super) async fn close(&mut self) {
        self.tasks.shutdown().await;
    }
}

/// Reaps the connection tasks that ended, logging any that panicked.
fn reap_finished(connections: &mut JoinSet<()>) {
    while let Some(ended) = connections.try_join_next() {
        if let Err(e) = ended
            && e.is_panic()
        {
            tracing::error!(panic = %supervised::panic_message(e.into_panic()), "a connection task panicked; its connection is closed");
        }
    }
}

/// One accepted connection's place in the connection gauge (which the connection limit reads), and the
/// removal of the brokers that registered over it: both on drop, so also when its task panics or is
/// aborted. A connection that ended normally says whether a broker registered over it; one that panicked
/// may have had one, so its brokers are looked for (the writer finds none if there are none).
struct ConnectionSlot {
    id: ConnId,
    metrics: Arc<crate::ops::metrics::Metrics>,
    routes: crate::route::RouteHandle,
    lifecycle: Arc<crate::state::Lifecycle>,
    broker_registered: bool,
}

impl ConnectionSlot {
    fn take(state: &ServerState, id: ConnId) -> Self {
        state.metrics.connections.fetch_add(1, Ordering::Relaxed);
        state.metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnectionSlot {
            id,
            metrics: state.metrics.clone(),
            routes: state.routes.clone(),
            lifecycle: state.lifecycle.clone(),
            broker_registered: true,
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
        // Connections that end during shutdown leave their brokers registered: they are saved for warm
        // restart and will come back.
        if self.broker_registered
            && !self.lifecycle.shutting_down()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (routes, id) = (self.routes.clone(), self.id);
            runtime.spawn(async move { housekeeping::on_connection_closed(&routes, id).await });
        }
    }
}

/// Serves one accepted connection, in TLS if it starts a handshake and TLS is on; returns whether a broker
/// registered over it.
async fn serve_connection(
    stream: TcpStream,
    tls: Option<&TlsServer>,
    id: u64,
    peer: SocketAddr,
    state: Arc<ServerState>,
) -> bool {
    let peer = Some(peer);
    let Some(tls) = tls else {
        return Connection::new(stream, id, peer, state).run().await;
    };
    // Boxed: a handshake's and a TLS stream's state would otherwise sit in every connection's task, TLS or
    // not, for its whole life.
    Box::pin(serve_tls(stream, tls, id, peer, state)).await
}

/// `serve_connection` with TLS on: the handshake if the peer starts one, then the connection.
async fn serve_tls(
    stream: TcpStream,
    tls: &TlsServer,
    id: u64,
    peer: Option<SocketAddr>,
    state: Arc<ServerState>,
) -> bool {
    let idle = state.config.load().channel_idle_timeout();
    match tls.accept(stream, idle).await {
        Accepted::Plain(stream) => Connection::new(stream, id, peer, state).run().await,
        Accepted::Tls(stream) => Connection::new(*stream, id, peer, state).run().await,
        Accepted::Refused => false,
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
    use crate::route::builder::test_registration;
    use crate::route::{RouteSnapshot, route_table};

    /// A plain connection's task holds a plain connection, not the TLS one it could have been, and the
    /// connection itself only through `run`'s box: the accept loop's task waits, small, while the connection
    /// is served on another runtime. Made to fail once by awaiting `serve_tls` unboxed (1,752 bytes).
    #[tokio::test]
    async fn a_plain_connections_task_holds_no_tls_state() {
        let (routes, _writer) = route_table(RouteSnapshot::default(), None, 4);
        let dir = tempfile::tempdir().expect("temp dir");
        let state = Arc::new(ServerState::for_tests(routes, dir.path()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stream = TcpStream::connect(addr).await.expect("connect");
        let task = serve_connection(stream, None, 1, addr, state);
        let size = std::mem::size_of_val(&task);
        eprintln!("a connection's accepted task: {size} bytes");
        assert!(size <= 512, "an accepted connection's future is {size} bytes");
    }

    /// A connection task that panics still gives its place in the connection gauge back, and its broker
    /// is removed as if the connection had closed normally. On tokio's paused clock: the waits below end
    /// only once every task has run as far as it can, so a busy machine cannot make it fail.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_connection_gives_back_its_slot_and_removes_its_broker() {
        let (routes, writer) = route_table(RouteSnapshot::default(), None, 64);
        tokio::spawn(writer.run());
        let mut registration = test_registration("b", 0, "b:1", 1, &["t1", "t2"]);
        registration.conn_id = 7;
        routes.register(registration).await.expect("writer running").expect("registered");
        let dir = tempfile::tempdir().expect("temp dir");
        let state = ServerState::for_tests(routes.clone(), dir.path());

        let slot = ConnectionSlot::take(&state, 7);
        assert_eq!(state.metrics.connections.load(Ordering::Relaxed), 1);
        let task = tokio::spawn(async move {
            let _slot = slot;
            panic!("a bug in a handler");
        });
        assert!(task.await.expect_err("the task panicked").is_panic());
        assert_eq!(state.metrics.connections.load(Ordering::Relaxed), 0);
        for _ in 0..100 {
            if routes.load().brokers.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(routes.load().brokers.is_empty(), "the broker of the connection is removed");
        assert!(routes.load().topics.is_empty());
    }
}
