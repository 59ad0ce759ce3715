//! The controller that Java 5.x runs in the NameServer process with `enableControllerInNamesrv=true`: it
//! elects a master for each broker group in controller mode and keeps the group's SyncStateSet and epochs.
//!
//! `replicas` is the replicated state (Java's ReplicasInfoManager tables) and the events that alone
//! change it, applied in log order; `manager` decides each request (what to answer, which events to
//! append) from that state, as Java's ReplicasInfoManager does; `elect` chooses a new master (Java's
//! DefaultElectPolicy). `raft` declares the Raft types on openraft, `log_store` keeps the log on disk and
//! `machine` applies it and keeps its snapshots, from which a restart starts. `node` serves requests (read
//! and written by `wire`) with them, `switches` holds what an admin may change while it runs, `heartbeat`
//! follows which brokers live, `notify` tells brokers of new masters, `network` carries Raft between nodes
//! and `listener` is the port. Nothing here is on the NameServer's lookup path, and it uses nothing of the
//! route table: the server starts it with `enableControllerInNamesrv` ([`Controller`]), or the binary
//! alone with `--controller-only`.

pub mod admission;
pub mod elect;
pub mod gate;
pub mod heartbeat;
pub mod listener;
pub mod log_store;
pub mod machine;
pub mod manager;
pub mod membership;
pub mod network;
pub mod node;
pub mod notify;
pub mod raft;
pub mod replicas;
pub mod settings;
pub mod stats;
pub mod switches;
pub mod wire;

use std::sync::Arc;

use crate::config::NamesrvConfig;
pub use settings::{ControllerSettings, SettingsError};

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;

/// Descriptors the controller may hold with `peers` nodes in its group (`limits::descriptors`): its port's
/// connections, one to each other node, its 1008 notices in flight and the Raft log's files.
pub fn descriptors(peers: usize) -> u64 {
    (admission::MAX_CONNECTIONS + peers + notify::MAX_IN_FLIGHT + log_store::FILES) as u64
}

/// Java's `MixAll.FIRST_BROKER_CONTROLLER_ID`: the id of the first broker of a group.
pub const FIRST_BROKER_CONTROLLER_ID: i64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("the controller cannot listen at {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("the controller's store {path}: {source}")]
    Store { path: String, source: std::io::Error },
    #[error(transparent)]
    Membership(#[from] membership::MembershipError),
    #[error("the controller's runtime cannot start: {0}")]
    Runtime(std::io::Error),
    #[error("the controller's {task} ended: {reason}")]
    Ended { task: &'static str, reason: String },
    #[error(transparent)]
    Descriptors(#[from] crate::service::descriptors::TooFewDescriptors),
    #[error("the controller's audit log: {0}")]
    Audit(String),
    /// Asked to stop, it did.
    #[error("the controller stopped")]
    Stopped,
}

/// The controller, its port bound, ready to run beside the NameServer.
pub struct Controller {
    settings: ControllerSettings,
    switches: switches::Switches,
    listener: std::net::TcpListener,
    /// The log and the state as the last run left them, read at bind: a damaged store refuses to start.
    store: node::Store,
    runtime: OwnRuntime,
    /// Where large frames and replies take their room (`listener`).
    pools: listener::Pools,
    stats: Arc<stats::ControllerStats>,
    audit: Arc<crate::ops::audit::AuditLog>,
}

/// The controller's own runtime, beside the NameServer's: two worker threads (`rocketns-controller`) at
/// normal priority, and its log's fsyncs on that runtime's blocking threads. On the NameServer's SCHED_IDLE
/// work lane, which also carries restart storms and hostile connections, its heartbeats could wait behind
/// them and lose it the leadership. Dropped, it stops without waiting for its threads.
#[derive(Default)]
pub struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    pub fn new() -> std::io::Result<OwnRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rocketns-controller")
            .enable_all()
            .build()?;
        Ok(OwnRuntime(Some(runtime)))
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Controller {
    /// The controller alone, as `rocketns --controller-only` runs it (Java's `mqcontroller`): the process's
    /// open-files limit is raised and checked against what the controller may hold, and its audit lines go
    /// to an audit log of its own at `auditLogPath`.
    pub fn bind_alone(config: &NamesrvConfig) -> Result<Controller, ControllerError> {
        crate::service::descriptors::controller_only_in_this_process(config)?;
        let mut controller = Controller::bind(config)?;
        let audit = crate::ops::audit::AuditLog::open(&config.audit_log_path, Arc::default())
            .map_err(|e| ControllerError::Audit(e.to_string()))?;
        controller.share_audit(Arc::new(audit));
        Ok(controller)
    }

    /// Reads the settings and the store (the peers it was made with, the log, the last snapshot) and binds
    /// the port of this node's peer address on `bindAddress`.
    pub fn bind(config: &NamesrvConfig) -> Result<Controller, ControllerError> {
        let settings = ControllerSettings::from_config(config)?;
        let switches = switches::Switches::load(config, &settings.store_path)?;
        membership::check(&settings.store_path, &settings.peers)?;
        let store = node::Store::open(&settings.store_path)
            .map_err(|source| ControllerError::Store { path: settings.store_path.display().to_string(), source })?;
        let addr = settings.me().addr.clone();
        let port = addr.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
        let bind = format!("{}:{port}", config.bind_address);
        let listener = std::net::TcpListener::bind(&bind)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| ControllerError::Listen { addr: bind, source })?;
        let runtime = OwnRuntime::new().map_err(ControllerError::Runtime)?;
        let pool = |bytes: u64| {
            let bytes = usize::try_from(bytes).unwrap_or(crate::limits::budget::MAX_POOL);
            crate::limits::budget::Pool::new(bytes.min(crate::limits::budget::MAX_POOL), Arc::default())
        };
        let pools = listener::Pools {
            frames: pool(config.large_frame_buffer_bytes),
            peer_frames: pool(listener::PEER_FRAMES as u64),
            replies: pool(config.large_reply_buffer_bytes),
        };
        let stats = Arc::new(store.stats());
        let audit = Arc::new(crate::ops::audit::AuditLog::to_log(Arc::default()));
        Ok(Controller { settings, switches, listener, store, runtime, pools, stats, audit })
    }

    /// Frames and replies over 64 KiB take their room in the NameServer's pools (its `requests` and
    /// `replies`), so that both ports together stay within `largeFrameBufferBytes` and
    /// `largeReplyBufferBytes`, instead of pools of their own of those sizes.
    pub fn share_pools(&mut self, budget: &crate::limits::budget::MemoryBudget) {
        self.pools.frames = budget.requests.clone();
        self.pools.replies = budget.replies.clone();
    }

    /// Audit lines (1002, 1009, 1011, and the elections the leader starts) go to `audit` (the NameServer's
    /// `auditLogPath`) instead of the ordinary log.
    pub fn share_audit(&mut self, audit: Arc<crate::ops::audit::AuditLog>) {
        self.audit = audit;
    }

    /// What /metrics shows of the controller.
    pub fn stats(&self) -> Arc<stats::ControllerStats> {
        self.stats.clone()
    }

    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts [`Self::run`] on the controller's own runtime; the runtime goes when the returned one is
    /// dropped (after the task has ended, or to end it).
    pub fn start(
        mut self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (tokio::task::JoinHandle<ControllerError>, OwnRuntime) {
        let runtime = std::mem::take(&mut self.runtime);
        let task = match &runtime.0 {
            Some(own) => own.spawn(self.run(stop)),
            None => tokio::spawn(self.run(stop)),
        };
        (task, runtime)
    }

    /// Runs the node until `stop` completes (then [`ControllerError::Stopped`]) or one of its tasks ends,
    /// which none should: the error says which and why. Either way the node leaves the group and its
    /// connections close.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) -> ControllerError {
        let store = self.settings.store_path.display().to_string();
        let listener = match tokio::net::TcpListener::from_std(self.listener) {
            Ok(l) => l,
            Err(source) => return ControllerError::Listen { addr: self.settings.me().addr.clone(), source },
        };
        let (changes, notices) = tokio::sync::mpsc::channel(notify::QUEUE);
        let shared = (self.stats, self.audit);
        let node = match node::ControllerNode::start(self.settings, self.switches, self.store, changes, shared).await {
            Ok(node) => node,
            Err(source) => return ControllerError::Store { path: store, source },
        };
        let mut tasks = tokio::task::JoinSet::new();
        let (serving, pools) = (node.clone(), self.pools);
        tasks.spawn(async move {
            let ended = listener::serve(listener, serving, pools).await;
            ("port", ended.map_err(|e| e.to_string()).err())
        });
        tasks.spawn(async move {
            notify::run(notices).await;
            ("role change notifier", None)
        });
        let following = node.clone();
        tasks.spawn(async move {
            stats::follow(following).await;
            ("metrics", None)
        });
        let scanning = node.clone();
        tasks.spawn(async move {
            scan(scanning).await;
            ("scans", None)
        });
        let gate = node.gate.clone();
        tasks.spawn(async move {
            let mut every =
                tokio::time::interval_at(tokio::time::Instant::now() + gate::RESOLVE_EVERY, gate::RESOLVE_EVERY);
            loop {
                every.tick().await;
                gate.resolve_again().await;
            }
        });
        let ended = tokio::select! {
            ended = tasks.join_next() => ended,
            () = stop => {
                tasks.shutdown().await;
                let _ = node.raft.shutdown().await;
                return ControllerError::Stopped;
            }
        };
        tasks.shutdown().await;
        let _ = node.raft.shutdown().await;
        match ended {
            Some(Ok((task, reason))) => {
                ControllerError::Ended { task, reason: reason.unwrap_or_else(|| "it returned".into()) }
            }
            Some(Err(e)) => ControllerError::Ended { task: "task", reason: e.to_string() },
            None => ControllerError::Ended { task: "task", reason: "none ran".into() },
        }
    }
}

/// The two periodic scans: brokers silent past their timeout (every `scanNotActiveBrokerInterval`), and
/// on the leader, groups whose master is gone (every `scanInactiveMasterInterval`, which an update may
/// change: the next scan is timed by its value then).
async fn scan(node: Arc<node::ControllerNode>) {
    let mut brokers = tokio::time::interval(node.settings.scan_not_active_broker_interval);
    brokers.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut masters = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = brokers.tick() => {
                let gone = node.heartbeats.expire();
                if !gone.is_empty() {
                    node.brokers_inactive(gone).await;
                }
            }
            () = tokio::time::sleep_until(masters) => {
                node.reelect_where_needed().await;
                node.release_silent_brokers().await;
                masters = tokio::time::Instant::now() + node.switches.scan_inactive_master_interval();
            }
        }
    }
}
