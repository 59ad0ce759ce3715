//! A connection's place among the open ones, wherever it is served: counted in the connection gauge (which
//! `serverMaxConnections` reads), waited for by shutdown's drain, and, when the connection ends however it
//! ends, its brokers removed.
//!
//! The slot moves with the connection from the intake to a lookup core or the work lane, on the task that
//! serves it there: no task stays behind to wait for the connection, so a settled idle connection is one
//! task, not two (perf/README.md, "Idle connections").

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::runtime::Handle;

use crate::route::{ConnId, RouteMutation};
use crate::state::ServerState;

/// One open connection in the gauge, and the removal of the brokers that registered over it: both on drop,
/// so also when its task panics or its runtime stops. A connection that ended normally says whether a
/// broker registered over it ([`ConnectionSlot::ended`]); one that panicked may have had one, so its
/// brokers are looked for (the writer finds none if there are none).
pub struct ConnectionSlot {
    state: Arc<ServerState>,
    id: ConnId,
    broker_registered: bool,
}

impl ConnectionSlot {
    /// Taken before the connection's task starts, so that the limit holds for a burst of accepts.
    pub fn take(state: &Arc<ServerState>, id: ConnId) -> Self {
        state.metrics.connections.fetch_add(1, Ordering::Relaxed);
        state.metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnectionSlot { state: state.clone(), id, broker_registered: true }
    }

    /// The connection ended normally; its brokers are removed only if one registered over it.
    pub fn ended(mut self, broker_registered: bool) {
        self.broker_registered = broker_registered;
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let state = &self.state;
        tracing::debug!(conn = self.id, "connection closed");
        state.metrics.connections.fetch_sub(1, Ordering::Relaxed);
        // Connections that end during shutdown leave their brokers registered: they are saved for warm
        // restart and will come back.
        if self.broker_registered
            && !state.lifecycle.shutting_down()
            && let Ok(runtime) = Handle::try_current()
        {
            let (routes, id) = (state.routes.clone(), self.id);
            runtime.spawn(async move { routes.submit(RouteMutation::ConnectionClosed(id)).await });
        }
        state.lifecycle.connection_ended().notify_waiters();
    }
}

/// Waits until every connection has given its slot back, wherever it was served.
pub async fn all_ended(state: &ServerState) {
    loop {
        let ended = state.lifecycle.connection_ended().notified();
        tokio::pin!(ended);
        // Registered before the gauge is read: a slot given back in between still wakes this.
        ended.as_mut().enable();
        if state.metrics.connections.load(Ordering::Relaxed) <= 0 {
            return;
        }
        ended.await;
    }
}

/// Serves a connection on `runtime` on a task no one waits for. A panic there is logged as the accept loop
/// logs one on the intake; the unwinding has dropped the connection, closing it and giving its slot back.
pub fn spawn_detached<F>(runtime: &Handle, connection: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    runtime.spawn(Logged { connection });
}

/// Logs a connection task's panic, on whichever runtime it was served.
pub fn log_panic(panic: Box<dyn std::any::Any + Send>) {
    let panic = crate::ops::logging::panic_message(panic);
    tracing::error!(%panic, "a connection task panicked; its connection is closed");
}

pin_project_lite::pin_project! {
    /// A connection's future, its panic logged. A struct and not an `async` block: the block would hold
    /// the future twice, as captured and as pinned (an idle connection's task 2,304 bytes, not 1,152:
    /// a counting allocator's sizes, release build).
    struct Logged<F> {
        #[pin]
        connection: F,
    }
}

impl<F: Future<Output = ()>> Future for Logged<F> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let connection = self.project().connection;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| connection.poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                log_panic(panic);
                std::task::Poll::Ready(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::route::builder::test_registration;
    use crate::route::{RouteHandle, RouteSnapshot, route_table};

    /// A server's state whose routes hold a broker registered over connection 7, its writer running.
    async fn with_a_broker_over_connection_7() -> (Arc<ServerState>, RouteHandle, tempfile::TempDir) {
        let (routes, writer) = route_table(RouteSnapshot::default(), None, 64);
        tokio::spawn(writer.run());
        let mut registration = test_registration("b", 0, "b:1", 1, &["t1", "t2"]);
        registration.conn_id = 7;
        routes.register(registration).await.expect("writer running").expect("registered");
        let dir = tempfile::tempdir().expect("temp dir");
        let state = Arc::new(ServerState::for_tests(routes.clone(), dir.path()));
        (state, routes, dir)
    }

    /// A connection task that panics on a runtime no one waits on is logged with its panic's message, still
    /// gives its place in the connection gauge back, and its broker is removed as if the connection had
    /// closed normally; the drain sees it end. Made to fail once by spawning the connection unwrapped (the
    /// log line missing). On tokio's paused clock: the waits below end only once every task has run as far
    /// as it can, so a busy machine cannot make it fail.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_connection_gives_back_its_slot_and_removes_its_broker() {
        let (state, routes, _dir) = with_a_broker_over_connection_7().await;
        // The test's runtime has one thread: the spawned task logs on it, to this subscriber.
        let log = crate::ops::logging::Written::default();
        let sink = log.clone();
        let _logging = tracing::subscriber::set_default(
            tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).finish(),
        );
        let slot = ConnectionSlot::take(&state, 7);
        assert_eq!(state.metrics.connections.load(Ordering::Relaxed), 1);
        let drained = tokio::spawn({
            let state = state.clone();
            async move { all_ended(&state).await }
        });
        spawn_detached(&Handle::current(), async move {
            let _slot = slot;
            tokio::task::yield_now().await;
            panic!("a bug in a handler");
        });
        tokio::time::timeout(Duration::from_secs(10), drained).await.expect("drained").expect("ran");
        assert_eq!(state.metrics.connections.load(Ordering::Relaxed), 0);
        let logged = log.text();
        assert!(
            logged.contains("a connection task panicked") && logged.contains("a bug in a handler"),
            "the panic is logged with its message: {logged:?}"
        );
        for _ in 0..100 {
            if routes.load().brokers.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(routes.load().brokers.is_empty(), "the broker of the connection is removed");
        assert!(routes.load().topics.is_empty());
    }

    /// A connection that ended normally without a broker looks for none.
    #[tokio::test(start_paused = true)]
    async fn a_slot_given_back_without_a_broker_removes_nothing() {
        let (state, routes, _dir) = with_a_broker_over_connection_7().await;
        ConnectionSlot::take(&state, 7).ended(false);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(routes.load().brokers.len(), 1, "a connection with no broker removes none");
        assert_eq!(state.metrics.connections.load(Ordering::Relaxed), 0);
    }
}
