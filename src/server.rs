//! The NameServer: binds the port, starts the route writer and housekeeping, accepts connections.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::acl::AccessControl;
use crate::config::NamesrvConfig;
use crate::connection::Connection;
use crate::frame_budget::FrameBudget;
use crate::housekeeping;
use crate::kvconfig::{KvConfigStore, KvError, ORDER_TOPIC_CONFIG};
use crate::processor::{Processor, route_config};
use crate::route::{RouteSnapshot, RouteWriter, route_table};
use crate::tls::{Accepted, TlsServer};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error(transparent)]
    Kv(#[from] KvError),
    #[error(transparent)]
    Acl(#[from] crate::acl::AclLoadError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

pub struct NameServer {
    listener: TcpListener,
    tls: Option<Arc<TlsServer>>,
    metrics_listener: Option<TcpListener>,
    processor: Processor,
    writer: RouteWriter,
}

impl NameServer {
    /// Loads the KV store and binds `bindAddress:listenPort` (port 0 picks a free port, for tests).
    /// `config_file` is the `-c` file, where runtime config updates are written back; `None` keeps them in
    /// memory only.
    pub async fn bind(config: NamesrvConfig, config_file: Option<PathBuf>) -> Result<Self, StartError> {
        let kv = Arc::new(KvConfigStore::load(std::path::Path::new(&config.kv_config_path))?);
        let initial = RouteSnapshot::new(route_config(&config), kv.namespace(ORDER_TOPIC_CONFIG).unwrap_or_default());
        let capacity = usize::try_from(config.un_register_broker_queue_capacity).unwrap_or(1).max(1);
        let saved = if config.warm_restart { read_route_snapshot(&config.route_snapshot_file()) } else { None };
        let (routes, writer) = route_table(initial, saved.as_deref(), capacity);
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
        let tls = TlsServer::from_config(&config)?.map(Arc::new);
        let access_control = if config.acl_enable {
            let acl = AccessControl::load(&config.acl_credentials_path, config.acl_protect_reads)?;
            tracing::info!(accounts = acl.accounts(), protect_reads = config.acl_protect_reads, "access control on");
            Some(Arc::new(acl))
        } else {
            None
        };
        let shared = Arc::new(arc_swap::ArcSwap::from_pointee(config));
        let mut processor = Processor::new(routes, shared, kv, config_file);
        processor.access_control = access_control;
        Ok(NameServer { listener, tls, metrics_listener, processor, writer })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then stops gracefully: no new connections; for a grace period
    /// (`shutdownWaitTimeSeconds` with `enableShutdownGracefully`, half a second otherwise) open connections
    /// are still served, clients newer than 5.3.1 being told GO_AWAY as Java does; the routes are saved for
    /// warm restart; then everything stops.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let NameServer { listener, tls, metrics_listener, processor, writer } = self;
        let writer = tokio::spawn(writer.run());
        let http = metrics_listener.map(|l| tokio::spawn(crate::http::serve(l, processor.clone())));
        let scan =
            tokio::spawn(housekeeping::scan_inactive_brokers(processor.routes.clone(), processor.config.clone()));
        let saver =
            tokio::spawn(housekeeping::save_routes_periodically(processor.routes.clone(), processor.config.clone()));
        let budget_bytes = usize::try_from(processor.config.load().large_frame_buffer_bytes).unwrap_or(usize::MAX);
        let budget = FrameBudget::new(budget_bytes, processor.metrics.clone());
        let mut connections = tokio::task::JoinSet::new();
        let next_id = AtomicU64::new(1);
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break,
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
            let limit = processor.config.load().server_max_connections;
            if processor.metrics.connections.load(Ordering::Relaxed).max(0) as u64 >= limit {
                tracing::warn!(%peer, limit, "connection limit reached, closing the new connection");
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(conn = id, %peer, "connection accepted");
            let processor = processor.clone();
            let tls = tls.clone();
            let budget = budget.clone();
            // Counted before the task starts, so that the limit holds for a burst of accepts.
            processor.metrics.connections.fetch_add(1, Ordering::Relaxed);
            processor.metrics.connections_total.fetch_add(1, Ordering::Relaxed);
            connections.spawn(async move {
                let routes = processor.routes.clone();
                let stopping = processor.shutting_down.clone();
                let metrics = processor.metrics.clone();
                let registered_broker = serve_connection(stream, tls.as_deref(), id, processor, budget).await;
                metrics.connections.fetch_sub(1, Ordering::Relaxed);
                // Connections that end during shutdown leave their brokers registered: they are saved for
                // warm restart and will come back.
                if registered_broker && !stopping.load(Ordering::Acquire) {
                    housekeeping::on_connection_closed(&routes, id).await;
                }
                tracing::debug!(conn = id, %peer, "connection closed");
            });
            // Reap finished connection tasks as we go.
            while connections.try_join_next().is_some() {}
        }
        drop(listener);
        processor.shutting_down.store(true, Ordering::Release);
        let config = processor.config.load_full();
        let grace = if config.enable_shutdown_gracefully {
            Duration::from_secs(config.shutdown_wait_time_seconds.max(0) as u64)
        } else {
            Duration::from_millis(500)
        };
        // Finished connection tasks not reaped yet are not open connections.
        while connections.try_join_next().is_some() {}
        tracing::info!(grace_ms = grace.as_millis() as u64, connections = connections.len(), "shutting down");
        let _ = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        saver.abort();
        if config.warm_restart {
            housekeeping::save_routes(&processor.routes, &config.route_snapshot_file()).await;
        }
        connections.shutdown().await;
        if let Some(http) = http {
            http.abort();
        }
        scan.abort();
        writer.abort();
    }
}

/// Serves one accepted connection, in TLS if it starts a handshake and TLS is on; returns whether a broker
/// registered over it.
async fn serve_connection(
    stream: TcpStream,
    tls: Option<&TlsServer>,
    id: u64,
    processor: Processor,
    budget: FrameBudget,
) -> bool {
    let Some(tls) = tls else {
        return Connection::new(stream, id, processor, budget).run().await;
    };
    let idle = processor.config.load().channel_idle_timeout();
    match tls.accept(stream, idle).await {
        Accepted::Plain(stream) => Connection::new(stream, id, processor, budget).run().await,
        Accepted::Tls(stream) => Connection::new(*stream, id, processor, budget).run().await,
        Accepted::Refused => false,
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
    match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "route snapshot file unreadable, starting with no routes");
            None
        }
    }
}
