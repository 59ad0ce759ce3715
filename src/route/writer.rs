//! The route writer: the one task that changes routes.
//!
//! Handlers send mutations over a channel; the writer takes every mutation already waiting, applies them to a
//! copy of the current snapshot (cheap: the maps are persistent), publishes one new snapshot through `ArcSwap`
//! if anything visible changed, and only then answers, so a client that saw its registration acknowledged
//! also sees its routes. Order on the channel is the order of application: an unregistration queued before a
//! registration can never remove it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::protocol::QueueData;
use crate::route::builder::{
    BrokerRegistration, BrokerTopicIndex, RegisterError, RegisterResult, RouteBuilder, RouteConfig, UnregisterRequest,
};
use crate::route::liveness::{BrokerAddrKey, BrokerLiveTable, ConnId};
use crate::route::snapshot::RouteSnapshot;

/// At most this many mutations go into one snapshot, so replies are never held back for long.
const MAX_BATCH: usize = 4096;

pub enum RouteMutation {
    Register(Box<BrokerRegistration>, oneshot::Sender<Result<RegisterResult, RegisterError>>),
    Unregister(UnregisterRequest),
    RegisterTopic {
        topic: String,
        queue_datas: Vec<QueueData>,
        done: oneshot::Sender<()>,
    },
    /// The connection closed: brokers that last registered over it are removed.
    ConnectionClosed(ConnId),
    /// The scan found this broker silent; removed if it still is at `now`.
    Expire {
        key: BrokerAddrKey,
        now: Instant,
    },
}

/// What handlers hold to read routes and submit changes.
#[derive(Clone)]
pub struct RouteHandle {
    pub snapshot: Arc<ArcSwap<RouteSnapshot>>,
    pub liveness: Arc<BrokerLiveTable>,
    tx: mpsc::Sender<RouteMutation>,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("the route writer queue is full")]
    QueueFull,
    #[error("the route writer has stopped")]
    Stopped,
}

impl RouteHandle {
    /// Waits for room in the queue: registrations are never dropped.
    pub async fn submit(&self, m: RouteMutation) -> Result<(), SubmitError> {
        self.tx.send(m).await.map_err(|_| SubmitError::Stopped)
    }

    /// Queues without waiting: UNREGISTER_BROKER answers SYSTEM_ERROR when the queue is full, as Java does.
    pub fn try_submit(&self, m: RouteMutation) -> Result<(), SubmitError> {
        self.tx.try_send(m).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SubmitError::QueueFull,
            mpsc::error::TrySendError::Closed(_) => SubmitError::Stopped,
        })
    }

    pub async fn register(&self, r: BrokerRegistration) -> Result<Result<RegisterResult, RegisterError>, SubmitError> {
        let (tx, rx) = oneshot::channel();
        self.submit(RouteMutation::Register(Box::new(r), tx)).await?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }

    pub async fn register_topic(&self, topic: String, queue_datas: Vec<QueueData>) -> Result<(), SubmitError> {
        let (done, rx) = oneshot::channel();
        self.submit(RouteMutation::RegisterTopic { topic, queue_datas, done }).await?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }
}

pub struct RouteWriter {
    snapshot: Arc<ArcSwap<RouteSnapshot>>,
    liveness: Arc<BrokerLiveTable>,
    index: BrokerTopicIndex,
    config: RouteConfig,
    rx: mpsc::Receiver<RouteMutation>,
}

/// Creates the route table: the handle for handlers and the writer to spawn. `capacity` bounds the queue
/// (Java's `unRegisterBrokerQueueCapacity`).
pub fn route_table(config: RouteConfig, capacity: usize) -> (RouteHandle, RouteWriter) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let snapshot = Arc::new(ArcSwap::from_pointee(RouteSnapshot::default()));
    let liveness = Arc::new(BrokerLiveTable::new());
    let handle = RouteHandle { snapshot: snapshot.clone(), liveness: liveness.clone(), tx };
    let writer = RouteWriter { snapshot, liveness, index: BrokerTopicIndex::new(), config, rx };
    (handle, writer)
}

impl RouteWriter {
    /// Runs until every handle is dropped.
    pub async fn run(mut self) {
        let mut batch = Vec::new();
        while self.rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            self.apply(std::mem::take(&mut batch));
        }
    }

    fn apply(&mut self, batch: Vec<RouteMutation>) {
        let current = self.snapshot.load_full();
        let mut builder = RouteBuilder::new(&current, &mut self.index, &self.liveness, self.config);
        let mut register_replies = Vec::new();
        let mut topic_replies = Vec::new();
        for m in batch {
            match m {
                RouteMutation::Register(r, reply) => register_replies.push((reply, builder.register_broker(&r))),
                RouteMutation::Unregister(req) => builder.unregister_broker(&req),
                RouteMutation::RegisterTopic { topic, queue_datas, done } => {
                    builder.register_topic(&topic, queue_datas);
                    topic_replies.push(done);
                }
                RouteMutation::ConnectionClosed(conn) => {
                    for key in self.liveness.registered_over(conn) {
                        unregister_by_address(&mut builder, &self.liveness, &key);
                    }
                }
                RouteMutation::Expire { key, now } => {
                    if self.liveness.get(&key).is_some_and(|info| info.is_expired(now)) {
                        tracing::warn!(cluster = %key.cluster, broker = %key.addr, "broker expired, removing it");
                        unregister_by_address(&mut builder, &self.liveness, &key);
                    }
                }
            }
        }
        if let Some(next) = builder.finish() {
            tracing::debug!(version = next.version, topics = next.topics.len(), "route snapshot published");
            self.snapshot.store(Arc::new(next));
        }
        for (reply, result) in register_replies {
            let _ = reply.send(result);
        }
        for done in topic_replies {
            let _ = done.send(());
        }
    }
}

/// Unregisters the broker at `key` if the table knows it; otherwise only its live entry goes.
fn unregister_by_address(builder: &mut RouteBuilder<'_>, live: &BrokerLiveTable, key: &BrokerAddrKey) {
    match builder.unregister_request_for(key) {
        Some(req) => builder.unregister_broker(&req),
        None => {
            live.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(name: &str) -> BrokerRegistration {
        let topics = [format!("{name}-a"), format!("{name}-b")];
        crate::route::builder::test_registration(name, 0, &format!("{name}:1"), 0, &[&topics[0], &topics[1]])
    }

    /// Mutations waiting together become one snapshot, and every registration is answered after it is visible.
    #[tokio::test]
    async fn queued_mutations_are_published_as_one_snapshot() {
        let (handle, writer) = route_table(RouteConfig::default(), 64);
        let mut replies = Vec::new();
        for i in 0..10 {
            let (tx, rx) = oneshot::channel();
            handle.submit(RouteMutation::Register(Box::new(registration(&format!("b{i}"))), tx)).await.unwrap();
            replies.push(rx);
        }
        tokio::spawn(writer.run());
        for rx in replies {
            assert!(rx.await.unwrap().is_ok());
        }
        let snapshot = handle.snapshot.load();
        assert_eq!(snapshot.version, 1, "ten registrations, one publish");
        assert_eq!(snapshot.topics.len(), 20);
    }

    #[tokio::test]
    async fn a_full_queue_refuses_without_waiting() {
        let (handle, _writer) = route_table(RouteConfig::default(), 2);
        let unregister = || {
            RouteMutation::Unregister(UnregisterRequest {
                cluster: "c".into(),
                broker_addr: "a:1".into(),
                broker_name: "b".into(),
                broker_id: 0,
            })
        };
        assert!(handle.try_submit(unregister()).is_ok());
        assert!(handle.try_submit(unregister()).is_ok());
        assert!(matches!(handle.try_submit(unregister()), Err(SubmitError::QueueFull)));
    }
}
