//! The NameServer: binds the port, starts the route writer and housekeeping, accepts connections.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::processor::acl::AccessControl;
use crate::config::{ClientProperties, NamesrvConfig};
use crate::net::connection::Connection;
use crate::service::housekeeping;
use crate::store::kvconfig::{KvConfigStore, KvError, ORDER_TOPIC_CONFIG};
use crate::outbound::product_env::ProductEnv;
use crate::processor::route_config;
use crate::route::{ConnId, RouteSnapshot, RouteWriter, route_table};
use crate::state::ServerState;
use crate::net::tls::{Accepted, TlsServer};
use crate::service::upgrade::{HandedOver, Predecessor, UpgradeListener};

/// Why the server stopped serving on its own, before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A background task the routes depend on ended: the route writer (without it routes freeze and nothing
    /// expires), the expiry scan, or the route-file saver.
    #[error("the {task} stopped: {reason}")]
    TaskEnded { task: &'static str, reason: String },
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error(transparent)]
    Kv(#[from] KvError),
    #[error(transparent)]
    Acl(#[from] crate::processor::acl::AclLoadError),
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    #[error(transparent)]
    Audit(#[from] crate::ops::audit::AuditOpenError),
    #[error(transparent)]
    Upgrade(#[from] crate::service::upgrade::UpgradeError),
}

pub struct NameServer {
    listener: TcpListener,
    tls: Option<Arc<TlsServer>>,
    metrics_listener: Option<TcpListener>,
    /// The metrics socket again, to hand over in an upgrade (the HTTP server owns the listener).
    metrics_socket: Option<OwnedFd>,
    /// Where a successor asks for the sockets (`upgradeSocketPath`).
    upgrade: Option<UpgradeListener>,
    /// The process the sockets were taken over from, told once this one serves (`run`).
    predecessor: Option<Predecessor>,
    state: ServerState,
    writer: RouteWriter,
}

/// How the accept loop ended.
enum Stopped {
    /// The shutdown future completed.
    Asked,
    /// A background task the routes depend on ended.
    Failed(ServeError),
    /// A successor took the sockets over.
    HandedOver,
}

impl NameServer {
    /// Loads the KV store and binds `bindAddress:listenPort` (port 0 picks a free port, for tests).
    /// `config_file` is the `-c` file, where runtime config updates are written back; `None` keeps them in
    /// memory only.
    pub async fn bind(config: NamesrvConfig, config_file: Option<PathBuf>) -> Result<Self, StartError> {
        Self::bind_with(config, config_file, ClientProperties::from_defines(&[])).await
    }

    /// `bind`, with the system properties a Java NameServer's JVM would have (`-D` options): cluster-test
    /// mode finds the product environment's NameServer through them.
    pub async fn bind_with(
        config: NamesrvConfig,
        config_file: Option<PathBuf>,
        client_properties: ClientProperties,
    ) -> Result<Self, StartError> {
        let addr = format!("{}:{}", config.bind_address, config.listen_port);
        let backlog = u32::try_from(config.server_socket_backlog).unwrap_or(1024).max(1);
        let listener = listen(&addr, backlog).await.map_err(|source| StartError::Listen { addr, source })?;
        let metrics_listener = match config.metrics_port {
            0 => None,
            port => {
                let addr = format!("{}:{}", config.bind_address, port);
                Some(TcpListener::bind(&addr).await.map_err(|source| StartError::Listen { addr, source })?)
            }
        };
        Self::start(config, config_file, client_properties, listener, metrics_listener)
    }

    /// Like `bind_with`, but takes the listening sockets over from the rocketns process serving with the
    /// same `upgradeSocketPath`, which then drains and exits (`upgrade`): no connection is refused. The KV
    /// store and the route file are read once that process has handed over, so they are its last.
    pub async fn take_over(
        config: NamesrvConfig,
        config_file: Option<PathBuf>,
        client_properties: ClientProperties,
    ) -> Result<Self, StartError> {
        let taken = crate::service::upgrade::take_over(&config.upgrade_socket_path).await?;
        let mut server = Self::start(config, config_file, client_properties, taken.remoting, taken.metrics)?;
        server.predecessor = Some(taken.predecessor);
        Ok(server)
    }

    fn start(
        config: NamesrvConfig,
        config_file: Option<PathBuf>,
        client_properties: ClientProperties,
        listener: TcpListener,
        metrics_listener: Option<TcpListener>,
    ) -> Result<Self, StartError> {
        let kv = Arc::new(KvConfigStore::load(std::path::Path::new(&config.kv_config_path))?);
        if let Some(file) = &config_file {
            crate::store::fsutil::remove_stale_temporaries(file);
        }
        let initial = RouteSnapshot::new(route_config(&config), kv.namespace(ORDER_TOPIC_CONFIG).unwrap_or_default());
        let capacity = usize::try_from(config.un_register_broker_queue_capacity).unwrap_or(1).max(1);
        let saved = if config.warm_restart { read_route_snapshot(&config.route_snapshot_file()) } else { None };
        let (routes, writer) = route_table(initial, saved.as_deref(), capacity);
        let metrics_socket = match &metrics_listener {
            Some(l) => Some(l.as_fd().try_clone_to_owned().map_err(|source| StartError::Listen {
                addr: format!("the metrics port {}", config.metrics_port),
                source,
            })?),
            None => None,
        };
        let tls = TlsServer::from_config(&config)?.map(Arc::new);
        let access_control = if config.acl_enable {
            let acl = AccessControl::load(&config.acl_credentials_path, config.acl_protect_reads)?;
            tracing::info!(accounts = acl.accounts(), protect_reads = config.acl_protect_reads, "access control on");
            Some(Arc::new(acl))
        } else {
            None
        };
        let product_env = config.cluster_test.then(|| config.product_env_name.clone());
        let audit_log_path = config.audit_log_path.clone();
        let shared = Arc::new(arc_swap::ArcSwap::from_pointee(config));
        let mut state = ServerState::new(routes, shared, kv, config_file);
        state.access_control = access_control;
        state.audit = Arc::new(crate::ops::audit::AuditLog::open(&audit_log_path, state.metrics.clone())?);
        state.product_env =
            product_env.map(|name| Arc::new(ProductEnv::new(&name, &client_properties, state.metrics.clone())));
        // Last: it replaces the socket file of a process being taken over, which must stay reachable for
        // another try if this start fails.
        let upgrade = match state.config.load().upgrade_socket_path.as_str() {
            "" => None,
            path => Some(UpgradeListener::bind(path)?),
        };
        Ok(NameServer { listener, tls, metrics_listener, metrics_socket, upgrade, predecessor: None, state, writer })
    }

    /// Answers settled connections' lookups on `lookups`, a runtime other than the one `run` runs on: new
    /// connections are accepted and served where `run` runs until they settle (src/net/intake.rs), so that
    /// connection churn is not served beside established lookups (without it or
    /// [`Self::with_lookup_cores`], everything but the work lane's is served on the runtime `run` runs on).
    pub fn with_lookup_runtime(self, lookups: tokio::runtime::Handle) -> Self {
        self.with_lookup_cores(Arc::new(crate::net::cores::LookupCores::over(vec![lookups])))
    }

    /// Like [`Self::with_lookup_runtime`], with settled connections spread over several runtimes, each
    /// connection served on one of them for the rest of its life (the binary: a single-threaded runtime a
    /// core, [`crate::net::cores::LookupThreads`]).
    pub fn with_lookup_cores(mut self, cores: Arc<crate::net::cores::LookupCores>) -> Self {
        self.state.lookups = Some(cores);
        self
    }

    /// Serves connections that send anything but route lookups on `lane`'s lower-priority threads (the
    /// binary always does; without it, everything is served on the runtime `run` runs on).
    pub fn with_work_lane(mut self, lane: &crate::net::lane::WorkLane) -> Self {
        self.state.lane = Some(lane.handle());
        self
    }

    /// The metrics port's address, when `metricsPort` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then stops gracefully: no new connections; for a grace period
    /// (`shutdownWaitTimeSeconds` with `enableShutdownGracefully`, half a second otherwise) open connections
    /// are still served, clients newer than 5.3.1 being told GO_AWAY as Java does; the routes are saved for
    /// warm restart; then everything stops.
    ///
    /// The route writer, the expiry scan, the saver and the metrics HTTP server (when `metricsPort` is set)
    /// are watched: if one ends (a panic, a bug, the HTTP server's listener failing) the server stops at
    /// once, reporting not ready, and returns the error so that the process exits non-zero. The HTTP server
    /// is not restarted either: a NameServer whose health port is gone looks dead to every probe and scrape,
    /// and a restart of the process (systemd's, Kubernetes's) is what its operator watches for. It is
    /// not restarted in place: the writer's state beside the published snapshot (the per-broker topic index,
    /// the live entries of a batch it was applying) cannot be trusted after a panic, whereas a supervisor's
    /// restart comes back with the routes of the last saved file within milliseconds (warm restart), every
    /// broker on a fresh timer.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let NameServer { listener, tls, metrics_listener, metrics_socket, upgrade, predecessor, state, mut writer } =
            self;
        let (stop_saver, saver_stop) = tokio::sync::oneshot::channel();
        // The writer's batches (a restart storm's snapshots of a million routes), the saves and the scans
        // run on the work lane and its blocking pool: on the runtime `run` runs on, their threads took a
        // lookup's core for milliseconds at a time.
        let background = state.lane.clone().unwrap_or_else(tokio::runtime::Handle::current);
        let notifier = state.config.load().notify_min_broker_id_changed.then(|| {
            let (sink, notices) = tokio::sync::mpsc::channel(crate::outbound::notify::QUEUE);
            writer.send_min_broker_id_changes(sink);
            background.spawn(crate::outbound::notify::run(notices, state.metrics.clone()))
        });
        let mut tasks = Supervised {
            writer: background.spawn(writer.run()),
            scan: background.spawn(housekeeping::scan_inactive_brokers(state.routes.clone(), state.config.clone())),
            saver: background.spawn(housekeeping::save_routes_periodically(
                state.routes.clone(),
                state.config.clone(),
                state.metrics.clone(),
                saver_stop,
            )),
            http: metrics_listener.map(|l| tokio::spawn(crate::ops::http::serve(l, state.clone()))),
            notifier,
        };
        let mut connections = tokio::task::JoinSet::new();
        let next_id = AtomicU64::new(1);
        tokio::pin!(shutdown);
        if let Some(predecessor) = predecessor
            && let Err(e) = predecessor.serving()
        {
            tracing::warn!(error = %e, "could not tell the process taken over from that this one serves");
        }
        // A successor that has the sockets and is starting.
        let mut handed: Option<std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>> = None;
        let stopped = loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break Stopped::Asked,
                failure = tasks.ended() => break Stopped::Failed(failure),
                successor = crate::service::upgrade::next_successor(upgrade.as_ref()), if handed.is_none() => {
                    match crate::service::upgrade::hand_over(successor, &state, &listener, metrics_socket.as_ref()).await {
                        Ok(successor) => handed = Some(Box::pin(HandedOver::serving(successor))),
                        Err(e) => tracing::error!(error = %e, "the take-over failed, serving on"),
                    }
                    continue;
                }
                serving = optional(&mut handed) => match serving {
                    Ok(()) => break Stopped::HandedOver,
                    Err(e) => {
                        handed = None;
                        crate::service::upgrade::resume(&state);
                        tracing::error!(error = %e, "the new process did not start, serving on");
                        continue;
                    }
                },
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let limit = state.config.load().server_max_connections;
            if state.metrics.connections.load(Ordering::Relaxed).max(0) as u64 >= limit {
                state.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, limit, "connection limit reached, closing the new connection");
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            set_buffer_sizes(&stream, &state.config.load());
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(conn = id, %peer, "connection accepted");
            // Taken before the task starts, so that the limit holds for a burst of accepts.
            let slot = ConnectionSlot::take(&state, id);
            let state = state.clone();
            let tls = tls.clone();
            connections.spawn(async move {
                // The whole slot moves into the task (a closure would capture only the field it assigns).
                let mut slot = slot;
                slot.broker_registered = serve_connection(stream, tls.as_deref(), id, peer, state).await;
                tracing::debug!(conn = id, %peer, "connection closed");
            });
            reap_finished(&mut connections);
        };
        drop(listener);
        state.shutting_down.store(true, Ordering::Release);
        match stopped {
            Stopped::Failed(failure) => {
                tracing::error!(error = %failure, "stopping: the routes can no longer be kept");
                connections.shutdown().await;
                tasks.abort();
                return Err(failure);
            }
            Stopped::HandedOver => {
                // The successor serves the metrics port and writes the route file from now on.
                tasks.saver.abort();
                if let Some(http) = &tasks.http {
                    http.abort();
                }
                drop(metrics_socket);
            }
            Stopped::Asked => {}
        }
        let config = state.config.load_full();
        let grace = if config.enable_shutdown_gracefully {
            Duration::from_secs(config.shutdown_wait_time_seconds.max(0) as u64)
        } else {
            Duration::from_millis(500)
        };
        // Finished connection tasks not reaped yet are not open connections.
        reap_finished(&mut connections);
        tracing::info!(grace_ms = grace.as_millis() as u64, connections = connections.len(), "shutting down");
        let _ = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        // The saver writes the file a last time and returns; never cut short in the middle of a write.
        let _ = stop_saver.send(());
        match (&mut tasks.saver).await {
            Err(e) if !e.is_cancelled() => tracing::error!(error = %e, "the route snapshot saver failed at shutdown"),
            _ => {}
        }
        connections.shutdown().await;
        tasks.abort();
        Ok(())
    }
}

/// The background tasks the server depends on, watched while it serves.
struct Supervised {
    writer: JoinHandle<()>,
    scan: JoinHandle<()>,
    saver: JoinHandle<()>,
    /// The metrics and health port, when configured: an operator's probes and scrapes depend on it.
    http: Option<JoinHandle<()>>,
    /// The 905 notifier, with `notifyMinBrokerIdChanged`.
    notifier: Option<JoinHandle<()>>,
}

impl Supervised {
    /// Waits until one of them ends, which none should while the server serves, and says which and why.
    /// Cancel-safe: it only polls the join handles.
    async fn ended(&mut self) -> ServeError {
        tokio::select! {
            ended = &mut self.writer => task_ended("route writer", ended),
            ended = &mut self.scan => task_ended("expiry scan", ended),
            ended = &mut self.saver => task_ended("route snapshot saver", ended),
            ended = optional(&mut self.http) => task_ended("metrics HTTP server", ended),
            ended = optional(&mut self.notifier) => task_ended("905 notifier", ended),
        }
    }

    fn abort(&self) {
        self.writer.abort();
        self.scan.abort();
        self.saver.abort();
        for task in self.http.iter().chain(&self.notifier) {
            task.abort();
        }
    }
}

/// A task or future that may not be there: never ends when it is not.
async fn optional<F: Future + Unpin>(task: &mut Option<F>) -> F::Output {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// A background task ended while the server was serving: with its panic, if it panicked.
fn task_ended(task: &'static str, ended: Result<(), tokio::task::JoinError>) -> ServeError {
    let reason = match ended {
        Ok(()) => "it returned".to_string(),
        Err(e) if e.is_panic() => format!("it panicked: {}", panic_message(e.into_panic())),
        Err(e) => e.to_string(),
    };
    ServeError::TaskEnded { task, reason }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Reaps the connection tasks that ended, logging any that panicked.
fn reap_finished(connections: &mut tokio::task::JoinSet<()>) {
    while let Some(ended) = connections.try_join_next() {
        if let Err(e) = ended
            && e.is_panic()
        {
            tracing::error!(panic = %panic_message(e.into_panic()), "a connection task panicked; its connection is closed");
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
    shutting_down: Arc<std::sync::atomic::AtomicBool>,
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
            shutting_down: state.shutting_down.clone(),
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
            && !self.shutting_down.load(Ordering::Acquire)
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
    state: ServerState,
) -> bool {
    let peer = Some(peer);
    let Some(tls) = tls else {
        return Connection::new(stream, id, peer, state).run().await;
    };
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

/// Binds with `serverSocketBacklog` as the accept queue (the kernel may cap it at `somaxconn`).
async fn listen(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no address for {addr}"));
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(backlog)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The route snapshot file's content, if there is one to read.
fn read_route_snapshot(path: &std::path::Path) -> Option<Vec<u8>> {
    crate::store::fsutil::remove_stale_temporaries(path);
    match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "route snapshot file unreadable, starting with no routes");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::builder::test_registration;

    fn pending() -> JoinHandle<()> {
        tokio::spawn(std::future::pending())
    }

    #[tokio::test]
    async fn a_panicking_writer_is_reported_with_its_panic() {
        let mut tasks = Supervised {
            writer: tokio::spawn(async { panic!("a bug in the route builder") }),
            scan: pending(),
            saver: pending(),
            http: None,
            notifier: None,
        };
        match tasks.ended().await {
            ServeError::TaskEnded { task, reason } => {
                assert_eq!(task, "route writer");
                assert_eq!(reason, "it panicked: a bug in the route builder");
            }
        }
        tasks.abort();
    }

    #[tokio::test]
    async fn a_scan_that_returns_is_reported() {
        let mut tasks = Supervised {
            writer: pending(),
            scan: tokio::spawn(async {}),
            saver: pending(),
            http: None,
            notifier: None,
        };
        let failure = tasks.ended().await;
        assert_eq!(failure.to_string(), "the expiry scan stopped: it returned");
        tasks.abort();
    }

    /// The metrics port is watched like the route tasks: its server ending stops the name server.
    #[tokio::test]
    async fn a_metrics_server_that_ends_is_reported() {
        let mut tasks = Supervised {
            writer: pending(),
            scan: pending(),
            saver: pending(),
            http: Some(tokio::spawn(async {})),
            notifier: None,
        };
        let failure = tokio::time::timeout(Duration::from_secs(10), tasks.ended()).await.expect("reported");
        assert_eq!(failure.to_string(), "the metrics HTTP server stopped: it returned");
        tasks.abort();
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
        let kv = Arc::new(KvConfigStore::load(&dir.path().join("kv.json")).expect("empty KV store"));
        let config = Arc::new(arc_swap::ArcSwap::from_pointee(NamesrvConfig::default()));
        let state = ServerState::new(routes.clone(), config, kv, None);

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
