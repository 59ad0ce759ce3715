//! The server's shared state: what request handlers (`processor`), connections and the HTTP port reach.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;

use crate::config::SharedConfig;
use crate::route::RouteHandle;
use crate::store::kvconfig::KvConfigStore;

/// What every request handler, connection and the HTTP port share: the routes (read from snapshots,
/// changed through the writer), the configuration, the KV store, and the server's counters and switches.
#[derive(Clone)]
pub struct ServerState {
    pub routes: RouteHandle,
    pub config: SharedConfig,
    pub kv: Arc<KvConfigStore>,
    /// The `-c` file: the only place a remote config update is ever written to.
    pub config_file: Option<PathBuf>,
    /// When the server started (for `needWaitForService`).
    pub started: Instant,
    /// Serializes config updates, so that two at once cannot lose one another.
    pub(crate) config_update: Arc<tokio::sync::Mutex<()>>,
    /// Where the server is in its life: read by every handler, changed by `service` only.
    pub lifecycle: Arc<Lifecycle>,
    pub metrics: Arc<crate::ops::metrics::Metrics>,
    /// Signature checks, when `aclEnable` is on.
    pub access_control: Option<Arc<crate::processor::acl::AccessControl>>,
    /// The product environment's NameServer, in cluster-test mode (`clusterTest`).
    pub product_env: Option<Arc<crate::outbound::product_env::ProductEnv>>,
    /// Where the audited requests go (`auditLogPath`); the ordinary log unless set.
    pub audit: Arc<crate::ops::audit::AuditLog>,
    /// Memory that clients make the server hold beyond their connections' own buffers (`budget.rs`).
    pub budget: crate::limits::budget::MemoryBudget,
    /// Turns to encode a whole-table body (`processor::table_body`).
    pub table_encodes: Arc<tokio::sync::Semaphore>,
    /// Turns to decode a registration body (`processor::broker`): half the cores, at least one.
    pub decoders: Arc<tokio::sync::Semaphore>,
    /// Where connections that send anything but lookups are served (`lane.rs`); `None` serves them all on
    /// the runtime the server runs on.
    pub lane: Option<tokio::runtime::Handle>,
    /// The runtimes that answer settled connections (`intake.rs`, `cores.rs`); `None`: the one they were
    /// accepted on.
    pub lookups: Option<Arc<crate::net::cores::LookupCores>>,
    /// The pace of large replies (`largeReplyBytesPerSecond`).
    pub reply_pacer: Arc<crate::limits::throttle::BytePacer>,
    /// What the controller (`enableControllerInNamesrv`) shows on /metrics.
    pub controller: Option<Arc<crate::controller::stats::ControllerStats>>,
    /// Remoting connections open at most: `serverMaxConnections`, or fewer where the process's file
    /// descriptors do not allow as many beside everything else that holds them (`service::descriptors`).
    pub max_connections: u64,
    /// The last comparison with each peer NameServer (`namesrvPeers`), written by `service::peer_compare`.
    pub peers: crate::ops::peers::PeerViews,
}

/// Where the server is in its life, as handlers see it. Its fields are private: only the server's life
/// (`service`) moves it on, through the crate-private methods below.
#[derive(Debug, Default)]
pub struct Lifecycle {
    shutting_down: AtomicBool,
    handed_over: AtomicBool,
    /// Told whenever a connection ends, for shutdown's drain (`net::slot`).
    connection_ended: tokio::sync::Notify,
}

impl Lifecycle {
    /// Stopping: newer clients are told to go away, and brokers whose connections close stay registered
    /// (they are saved for warm restart).
    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// A successor took the sockets over (`upgrade`): the changes it would not see are refused.
    pub fn handed_over(&self) -> bool {
        self.handed_over.load(Ordering::Acquire)
    }

    pub(crate) fn stop(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub(crate) fn set_handed_over(&self, handed_over: bool) {
        self.handed_over.store(handed_over, Ordering::Release);
    }

    pub(crate) fn connection_ended(&self) -> &tokio::sync::Notify {
        &self.connection_ended
    }
}

/// Whole-table bodies encoded at once at most.
pub const TABLE_ENCODES: usize = 2;

/// Registration bodies decoded at once at most: half the cores, at least one. A compressed body of a few
/// hundred kilobytes can take a tenth of a second to inflate; many at once took every core from lookups.
pub fn decoders() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get() / 2).max(1)
}

#[cfg(test)]
impl ServerState {
    /// A server's state over `routes`, with the default config and an empty KV store in `dir`.
    pub(crate) fn for_tests(routes: RouteHandle, dir: &std::path::Path) -> Self {
        let kv = Arc::new(KvConfigStore::load(&dir.join("kv.json")).expect("an empty KV store"));
        let config = Arc::new(arc_swap::ArcSwap::from_pointee(crate::config::NamesrvConfig::default()));
        ServerState::new(routes, config, kv, None)
    }
}

impl ServerState {
    pub fn new(
        routes: RouteHandle,
        config: SharedConfig,
        kv: Arc<KvConfigStore>,
        config_file: Option<PathBuf>,
    ) -> Self {
        let metrics: Arc<crate::ops::metrics::Metrics> = Default::default();
        let budget = crate::limits::budget::MemoryBudget::from_config(&config.load(), &metrics);
        let reply_pacer = Arc::new(crate::limits::throttle::BytePacer::new(config.load().large_reply_bytes_per_second));
        let max_connections = config.load().server_max_connections;
        ServerState {
            routes,
            config,
            kv,
            config_file,
            started: Instant::now(),
            config_update: Default::default(),
            lifecycle: Default::default(),
            metrics: metrics.clone(),
            access_control: None,
            product_env: None,
            audit: Arc::new(crate::ops::audit::AuditLog::to_log(metrics.clone())),
            budget,
            table_encodes: Arc::new(tokio::sync::Semaphore::new(TABLE_ENCODES)),
            decoders: Arc::new(tokio::sync::Semaphore::new(decoders())),
            lane: None,
            lookups: None,
            reply_pacer,
            controller: None,
            max_connections,
            peers: Default::default(),
        }
    }

    /// Serving routes: past the start-up wait (`needWaitForService`) and not shutting down.
    pub fn is_ready(&self) -> bool {
        !self.lifecycle.shutting_down() && !self.waiting_for_service()
    }

    pub(crate) fn waiting_for_service(&self) -> bool {
        let config = self.config.load();
        config.need_wait_for_service
            && self.started.elapsed() < std::time::Duration::from_secs(config.wait_seconds_for_service.max(0) as u64)
    }
}
