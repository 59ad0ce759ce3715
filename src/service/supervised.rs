//! The background tasks the server depends on (the route writer, the expiry scan, the route saver, the
//! operator's port, the 905 notifier, the comparison with the peers, the controller on its own runtime): started together, watched while the server serves, and reported with
//! their panic when one ends, which stops the server (see `NameServer::run` for why none is restarted).

use std::future::Future;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::route::RouteWriter;
use crate::service::housekeeping;
use crate::service::server::ServeError;
use crate::state::ServerState;

/// The background tasks the server depends on, watched while it serves.
pub(super) struct Supervised {
    writer: JoinHandle<()>,
    scan: JoinHandle<()>,
    saver: JoinHandle<()>,
    /// The metrics and health port, when configured: an operator's probes and scrapes depend on it.
    http: Option<JoinHandle<()>>,
    /// The 905 notifier, with `notifyMinBrokerIdChanged`.
    notifier: Option<JoinHandle<()>>,
    /// The comparison with the peer NameServers, with `namesrvPeers`.
    peers: Option<JoinHandle<()>>,
    /// The controller, with `enableControllerInNamesrv`: brokers in controller mode depend on it.
    controller: Option<JoinHandle<crate::controller::ControllerError>>,
    /// Tells the controller to stop (it leaves the group and closes its port).
    stop_controller: Option<tokio::sync::oneshot::Sender<()>>,
    /// The controller's own runtime, which its task runs on.
    controller_runtime: Option<crate::controller::OwnRuntime>,
}

impl Supervised {
    /// Starts them: the writer, the scan, the saver (until `stop_saver` is sent, then it saves a last time
    /// and returns), the 905 notifier and the operator's port, when there is one, on the work lane, where
    /// their CPU work cannot delay a lookup (four clients fetching `/cluster` in a loop on the runtime
    /// `run` runs on took lookups' p99 on new connections from 0.16 to 176 ms, issue 44).
    pub(super) fn start(
        state: &ServerState,
        mut writer: RouteWriter,
        metrics_listener: Option<TcpListener>,
        stop_saver: tokio::sync::oneshot::Receiver<()>,
        controller: Option<crate::controller::Controller>,
        peer_slots: Vec<crate::ops::peers::PeerSlot>,
    ) -> Self {
        // The writer's batches (a restart storm's snapshots of a million routes), the saves and the scans
        // run on the work lane and its blocking pool: on the runtime `run` runs on, their threads took a
        // lookup's core for milliseconds at a time.
        let background = state.lane.clone().unwrap_or_else(tokio::runtime::Handle::current);
        let (stop_controller, controller_stop) = tokio::sync::oneshot::channel();
        // On a runtime of its own, neither the lookups' nor the work lane's (see `OwnRuntime`).
        let (controller, controller_runtime) = match controller.map(|c| {
            c.start(async {
                let _ = controller_stop.await;
            })
        }) {
            Some((task, runtime)) => (Some(task), Some(runtime)),
            None => (None, None),
        };
        let notifier = state.config.load().notify_min_broker_id_changed.then(|| {
            let (sink, notices) = crate::route::min_broker_id::queue();
            writer.send_min_broker_id_changes(sink);
            background.spawn(crate::outbound::notify::run(notices, state.metrics.clone()))
        });
        let peers = (!peer_slots.is_empty()).then(|| {
            let compare = crate::service::peer_compare::compare_with_peers(
                state.routes.clone(),
                state.config.clone(),
                peer_slots,
            );
            background.spawn(compare)
        });
        Supervised {
            writer: background.spawn(writer.run()),
            scan: background.spawn(housekeeping::scan_inactive_brokers(state.routes.clone(), state.config.clone())),
            saver: background.spawn(housekeeping::save_routes_periodically(
                state.routes.clone(),
                state.config.clone(),
                state.metrics.clone(),
                stop_saver,
            )),
            http: metrics_listener.map(|l| background.spawn(crate::ops::http::serve(l, state.clone()))),
            notifier,
            peers,
            controller,
            stop_controller: Some(stop_controller),
            controller_runtime,
        }
    }

    /// Waits until one of them ends, which none should while the server serves, and says which and why.
    /// Cancel-safe: it only polls the join handles.
    pub(super) async fn ended(&mut self) -> ServeError {
        tokio::select! {
            ended = &mut self.writer => task_ended("route writer", ended),
            ended = &mut self.scan => task_ended("expiry scan", ended),
            ended = &mut self.saver => task_ended("route snapshot saver", ended),
            ended = optional(&mut self.http) => task_ended("metrics HTTP server", ended),
            ended = optional(&mut self.notifier) => task_ended("905 notifier", ended),
            ended = optional(&mut self.peers) => task_ended("comparison with the peer NameServers", ended),
            ended = optional(&mut self.controller) => {
                // Done: not awaited again when the server stops (a finished JoinHandle polled again panics).
                self.controller = None;
                match ended {
                    Ok(e) => ServeError::TaskEnded { task: "controller", reason: e.to_string() },
                    Err(e) => task_ended("controller", Err(e)),
                }
            }
        }
    }

    /// A successor serves the operator's port, writes the route file and compares with the peers from now on.
    pub(super) fn hand_over(&self) {
        self.saver.abort();
        for task in self.http.iter().chain(&self.peers) {
            task.abort();
        }
    }

    /// Waits for the saver's last write, once it has been told to stop: never cut short in the middle of
    /// a write.
    pub(super) async fn saved(&mut self) {
        match (&mut self.saver).await {
            Err(e) if !e.is_cancelled() => tracing::error!(error = %e, "the route snapshot saver failed at shutdown"),
            _ => {}
        }
    }

    /// Stops the controller and waits until it has: its Raft node no longer answers the others.
    pub(super) async fn stop_controller(&mut self) {
        if let Some(stop) = self.stop_controller.take() {
            let _ = stop.send(());
        }
        if let Some(controller) = self.controller.take() {
            match controller.await {
                Ok(crate::controller::ControllerError::Stopped) => {}
                Ok(e) => tracing::error!(error = %e, "the controller failed at shutdown"),
                Err(e) => tracing::error!(error = %e, "the controller's task failed at shutdown"),
            }
        }
        // Its task has ended: its threads may go.
        self.controller_runtime.take();
    }

    pub(super) fn abort(&self) {
        self.writer.abort();
        self.scan.abort();
        self.saver.abort();
        for task in self.http.iter().chain(&self.notifier).chain(&self.peers) {
            task.abort();
        }
        if let Some(controller) = &self.controller {
            controller.abort();
        }
    }
}

/// A task or future that may not be there: never ends when it is not.
pub(super) async fn optional<F: Future + Unpin>(task: &mut Option<F>) -> F::Output {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// A background task ended while the server was serving: with its panic, if it panicked.
fn task_ended(task: &'static str, ended: Result<(), tokio::task::JoinError>) -> ServeError {
    let reason = match ended {
        Ok(()) => "it returned".to_string(),
        Err(e) if e.is_panic() => format!("it panicked: {}", crate::ops::logging::panic_message(e.into_panic())),
        Err(e) => e.to_string(),
    };
    ServeError::TaskEnded { task, reason }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn pending() -> JoinHandle<()> {
        tokio::spawn(std::future::pending())
    }

    /// Every required task running for good, no optional one: each test sets the one it fails.
    fn idle() -> Supervised {
        Supervised {
            writer: pending(),
            scan: pending(),
            saver: pending(),
            http: None,
            notifier: None,
            peers: None,
            controller: None,
            stop_controller: None,
            controller_runtime: None,
        }
    }

    #[tokio::test]
    async fn a_panicking_writer_is_reported_with_its_panic() {
        let mut tasks = Supervised { writer: tokio::spawn(async { panic!("a bug in the route builder") }), ..idle() };
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
        let mut tasks = Supervised { scan: tokio::spawn(async {}), ..idle() };
        let failure = tasks.ended().await;
        assert_eq!(failure.to_string(), "the expiry scan stopped: it returned");
        tasks.abort();
    }

    /// The metrics port is watched like the route tasks: its server ending stops the name server.
    #[tokio::test]
    async fn a_metrics_server_that_ends_is_reported() {
        let mut tasks = Supervised { http: Some(tokio::spawn(async {})), ..idle() };
        let failure = tokio::time::timeout(Duration::from_secs(10), tasks.ended()).await.expect("reported");
        assert_eq!(failure.to_string(), "the metrics HTTP server stopped: it returned");
        tasks.abort();
    }

    /// The comparison with the peers: a panic in it is reported with its message.
    #[tokio::test]
    async fn a_comparison_that_panics_is_reported() {
        let mut tasks = Supervised { peers: Some(tokio::spawn(async { panic!("a bug in the comparison") })), ..idle() };
        let failure = tokio::time::timeout(Duration::from_secs(10), tasks.ended()).await.expect("reported");
        assert_eq!(
            failure.to_string(),
            "the comparison with the peer NameServers stopped: it panicked: a bug in the comparison"
        );
        tasks.abort();
    }

    /// The controller too: brokers in controller mode depend on it.
    #[tokio::test]
    async fn a_controller_that_ends_is_reported() {
        let failed = crate::controller::ControllerError::Ended { task: "port", reason: "accept failed".into() };
        let mut tasks = Supervised { controller: Some(tokio::spawn(async move { failed })), ..idle() };
        let failure = tokio::time::timeout(Duration::from_secs(10), tasks.ended()).await.expect("reported");
        assert_eq!(failure.to_string(), "the controller stopped: the controller's port ended: accept failed");
        tasks.abort();
    }
}
