//! The NameServer: binds the port, starts the route writer and housekeeping, accepts connections.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{ClientProperties, NamesrvConfig};
use crate::net::tls::TlsServer;
use crate::outbound::product_env::ProductEnv;
use crate::processor::acl::AccessControl;
use crate::processor::route_config;
use crate::route::dump::RouteDump;
use crate::route::{RouteSnapshot, RouteWriter, route_table};
use crate::service::accept::Connections;
use crate::service::descriptors::Descriptors;
use crate::service::supervised::{Supervised, optional};
use crate::service::upgrade::{HandedOver, Predecessor, UpgradeListener};
use crate::state::ServerState;
use crate::store::kvconfig::{KvConfigStore, KvError, ORDER_TOPIC_CONFIG};

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
    #[error(transparent)]
    Controller(#[from] crate::controller::ControllerError),
    #[error(transparent)]
    Descriptors(#[from] crate::service::descriptors::TooFewDescriptors),
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
    /// The controller (`enableControllerInNamesrv`), its port bound.
    controller: Option<crate::controller::Controller>,
    /// The writers of the peers' views (`namesrvPeers`), for their comparison loops.
    peer_slots: Vec<crate::ops::peers::PeerSlot>,
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
        Self::bind_waiting(config, config_file, client_properties, Duration::ZERO).await
    }

    /// `bind_with`, waiting up to `wait` for ports another process holds (a NameServer being replaced on
    /// the same port): tried again every millisecond, so the port is closed for about that long once the
    /// other process is stopped. The routes are copied from the peers before the wait.
    pub async fn bind_waiting(
        config: NamesrvConfig,
        config_file: Option<PathBuf>,
        client_properties: ClientProperties,
        wait: Duration,
    ) -> Result<Self, StartError> {
        // Before the port opens: a client that finds it closed goes to another NameServer, one answered
        // "topic not exist" stays (peer_copy.rs).
        let saved = match read_route_file(&config) {
            Some(file) => Some(file),
            None => peer_routes(&config).await,
        };
        let addr = format!("{}:{}", config.bind_address, config.listen_port);
        let backlog = u32::try_from(config.server_socket_backlog).unwrap_or(1024).max(1);
        let deadline = tokio::time::Instant::now().checked_add(wait).unwrap_or_else(far_future);
        // The metrics port first: once the remoting port is open clients come, and must not wait on it.
        let metrics_listener = match config.metrics_port {
            0 => None,
            port => {
                let addr = format!("{}:{}", config.bind_address, port);
                let listener = listen_waiting(&addr, 1024, deadline).await;
                Some(listener.map_err(|source| StartError::Listen { addr, source })?)
            }
        };
        let listener =
            listen_waiting(&addr, backlog, deadline).await.map_err(|source| StartError::Listen { addr, source })?;
        Self::start(config, config_file, client_properties, listener, metrics_listener, saved)
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
        let saved = read_route_file(&config);
        let mut server = Self::start(config, config_file, client_properties, taken.remoting, taken.metrics, saved)?;
        server.predecessor = Some(taken.predecessor);
        Ok(server)
    }

    fn start(
        config: NamesrvConfig,
        config_file: Option<PathBuf>,
        client_properties: ClientProperties,
        listener: TcpListener,
        metrics_listener: Option<TcpListener>,
        saved: Option<RouteDump>,
    ) -> Result<Self, StartError> {
        let descriptors = Descriptors::of_this_process(&config)?;
        let kv = Arc::new(KvConfigStore::load(std::path::Path::new(&config.kv_config_path))?);
        if let Some(file) = &config_file {
            crate::store::fsutil::remove_stale_temporaries(file);
        }
        let initial = RouteSnapshot::new(route_config(&config), kv.namespace(ORDER_TOPIC_CONFIG).unwrap_or_default());
        let capacity = usize::try_from(config.un_register_broker_queue_capacity).unwrap_or(1).max(1);
        let (routes, writer) = route_table(initial, saved, capacity);
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
        let controller =
            config.enable_controller_in_namesrv.then(|| crate::controller::Controller::bind(&config)).transpose()?;
        let product_env = config.cluster_test.then(|| config.product_env_name.clone());
        let (peer_views, peer_slots) = crate::ops::peers::PeerViews::new(&config.peers());
        let audit_log_path = config.audit_log_path.clone();
        let shared = Arc::new(arc_swap::ArcSwap::from_pointee(config));
        let mut state = ServerState::new(routes, shared, kv, config_file);
        state.max_connections = descriptors.remoting;
        state.peers = peer_views;
        state.access_control = access_control;
        state.audit = Arc::new(crate::ops::audit::AuditLog::open(&audit_log_path, state.metrics.clone())?);
        let controller = controller.map(|mut c| {
            c.share_pools(&state.budget);
            c.share_audit(state.audit.clone());
            state.controller = Some(c.stats());
            c
        });
        state.product_env =
            product_env.map(|name| Arc::new(ProductEnv::new(&name, &client_properties, state.metrics.clone())));
        // Last: it replaces the socket file of a process being taken over, which must stay reachable for
        // another try if this start fails.
        let upgrade = match state.config.load().upgrade_socket_path.as_str() {
            "" => None,
            path => Some(UpgradeListener::bind(path)?),
        };
        Ok(NameServer {
            listener,
            tls,
            metrics_listener,
            metrics_socket,
            upgrade,
            predecessor: None,
            state,
            writer,
            controller,
            peer_slots,
        })
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

    /// The controller's port, with `enableControllerInNamesrv`.
    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.controller.as_ref().and_then(|c| c.local_addr().ok())
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
        let NameServer {
            listener,
            tls,
            metrics_listener,
            metrics_socket,
            upgrade,
            predecessor,
            state,
            writer,
            controller,
            peer_slots,
        } = self;
        let (stop_saver, saver_stop) = tokio::sync::oneshot::channel();
        let mut tasks = Supervised::start(&state, writer, metrics_listener, saver_stop, controller, peer_slots);
        if let Some(predecessor) = predecessor
            && let Err(e) = predecessor.serving()
        {
            tracing::warn!(error = %e, "could not tell the process taken over from that this one serves");
        }
        let mut connections = Connections::new(state.clone(), tls);
        let sockets = Sockets { listener: &listener, metrics: metrics_socket.as_ref(), upgrade: upgrade.as_ref() };
        let stopped = accept_until_stopped(sockets, &state, &mut connections, &mut tasks, shutdown).await;
        drop(listener);
        state.lifecycle.stop();
        match stopped {
            Stopped::Failed(failure) => {
                tracing::error!(error = %failure, "stopping: the routes can no longer be kept");
                connections.close().await;
                tasks.stop_controller().await;
                tasks.abort();
                return Err(failure);
            }
            Stopped::HandedOver => {
                tasks.hand_over();
                drop(metrics_socket);
            }
            Stopped::Asked => {}
        }
        connections.drain(grace_period(&state.config.load())).await;
        // The saver writes the file a last time and returns.
        let _ = stop_saver.send(());
        tasks.saved().await;
        connections.close().await;
        tasks.stop_controller().await;
        tasks.abort();
        Ok(())
    }
}

/// The sockets the accept loop serves, and those it hands to a successor.
struct Sockets<'a> {
    listener: &'a TcpListener,
    /// The metrics port's socket, handed over with the remoting port's.
    metrics: Option<&'a OwnedFd>,
    /// Where a successor asks for them.
    upgrade: Option<&'a UpgradeListener>,
}

/// Accepts connections until `shutdown` completes, a supervised task ends or a successor has taken the
/// sockets over and serves.
async fn accept_until_stopped(
    sockets: Sockets<'_>,
    state: &ServerState,
    connections: &mut Connections,
    tasks: &mut Supervised,
    shutdown: impl Future<Output = ()>,
) -> Stopped {
    tokio::pin!(shutdown);
    // A successor that has the sockets and is starting.
    let mut handed: Option<std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>> = None;
    loop {
        tokio::select! {
            _ = &mut shutdown => return Stopped::Asked,
            failure = tasks.ended() => return Stopped::Failed(failure),
            successor = crate::service::upgrade::next_successor(sockets.upgrade), if handed.is_none() => {
                match crate::service::upgrade::hand_over(successor, state, sockets.listener, sockets.metrics).await {
                    Ok(successor) => handed = Some(Box::pin(HandedOver::serving(successor))),
                    Err(e) => tracing::error!(error = %e, "the take-over failed, serving on"),
                }
            }
            serving = optional(&mut handed) => match serving {
                Ok(()) => return Stopped::HandedOver,
                Err(e) => {
                    handed = None;
                    crate::service::upgrade::resume(state);
                    tracing::error!(error = %e, "the new process did not start, serving on");
                }
            },
            accepted = sockets.listener.accept() => match accepted {
                Ok((stream, peer)) => connections.admit(stream, peer),
                Err(e) => crate::limits::throttle::after_failed_accept("remoting", &e).await,
            },
            () = connections.reap_next() => {}
        }
    }
}

/// How long open connections are still served at shutdown: `shutdownWaitTimeSeconds` with
/// `enableShutdownGracefully`, half a second otherwise.
fn grace_period(config: &NamesrvConfig) -> Duration {
    if config.enable_shutdown_gracefully {
        Duration::from_secs(config.shutdown_wait_time_seconds.max(0) as u64)
    } else {
        Duration::from_millis(500)
    }
}

/// `listen`, tried again every millisecond until `deadline` while another process holds the address.
async fn listen_waiting(addr: &str, backlog: u32, deadline: tokio::time::Instant) -> std::io::Result<TcpListener> {
    let mut said = false;
    loop {
        match listen(addr, backlog).await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tokio::time::Instant::now() < deadline => {
                if !std::mem::replace(&mut said, true) {
                    tracing::info!(addr, "the port is in use: waiting for the process that holds it to stop");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            done => return done,
        }
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

/// The route snapshot file's routes (warm restart), if there is a file and it can be read: a file that
/// cannot is ignored with a warning.
fn read_route_file(config: &NamesrvConfig) -> Option<RouteDump> {
    if !config.warm_restart {
        return None;
    }
    let path = config.route_snapshot_file();
    crate::store::fsutil::remove_stale_temporaries(&path);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "route snapshot file unreadable, starting without its routes");
            return None;
        }
    };
    match crate::route::dump::parse(&bytes) {
        Ok(file) => Some(file),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "route snapshot file ignored, starting without its routes");
            None
        }
    }
}

/// A peer's routes (`namesrvPeers`), where this start has peers and no route file of its own to serve.
async fn peer_routes(config: &NamesrvConfig) -> Option<RouteDump> {
    let peers = config.peers();
    if peers.is_empty() {
        return None;
    }
    crate::service::peer_copy::copy_from_peers(&peers).await
}

/// A deadline that never comes, for a wait too long to add to now.
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
