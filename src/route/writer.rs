//! The route writer: the one task that changes routes.
//!
//! Handlers send mutations over a channel; the writer takes every mutation already waiting, applies them to a
//! copy of the current snapshot (cheap: its tables are copy-on-write), publishes one new snapshot through `ArcSwap`
//! if anything visible changed, and only then answers, so a client that saw its registration acknowledged
//! also sees its routes. Order on the channel is the order of application: an unregistration queued before a
//! registration can never remove it.
//!
//! Readers never wait for it, in time as well as in data: all of a batch's work (applying, encoding changed
//! routes, answering, freeing the snapshots it replaced) runs on tokio's blocking pool, never on a worker
//! thread that answers lookups, and so does the decoding of registration bodies, in their handlers, before
//! they are queued. A registration of 100,000 topics costs from under a hundred milliseconds (unchanged) to
//! a third of a second (a new broker); lookups go on beside it. On a server with one core the kernel shares
//! it between the two at its usual priority: a lower one (nice, SCHED_BATCH) was measured and made
//! registrations several times slower without making lookups faster (perf/README.md).
//! The blocking pool rather than a thread of the writer's own: tokio's paused clock (the tests' clock) knows
//! that blocking-pool work is under way and does not jump ahead while it runs. There is still one writer: the
//! task hands over one batch at a time and waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::limits::budget::Charge;
use crate::protocol::QueueData;
use crate::route::builder::{
    BrokerRegistration, BrokerTopicIndex, RegisterError, RegisterResult, RouteBuilder, UnregisterRequest,
};
use crate::route::dump::RoutesToSave;
use crate::route::liveness::{BrokerAddrKey, BrokerLiveTable, ConnId, LiveView};
use crate::route::min_broker_id::NoticeSender;
use crate::route::snapshot::{RouteConfig, RouteSnapshot};

/// At most this many mutations go into one snapshot, so replies are never held back for long.
const MAX_BATCH: usize = 4096;
/// Room in the writer's queue for everything but unregistrations, which have their own cap.
const QUEUE_CAPACITY: usize = 16 * 1024;
/// How soon replaced snapshots that readers still held are looked at again when no batch comes.
const RETIRED_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Answered with a count (topics touched) once the change is visible.
pub type Done = oneshot::Sender<usize>;

/// What a registration is answered.
pub type Registered = Result<RegisterResult, RegisterError>;

pub enum RouteMutation {
    /// With the room its parsed body holds in the memory budget, given back once the batch is applied.
    Register(Box<BrokerRegistration>, oneshot::Sender<Registered>, Charge),
    Unregister(UnregisterRequest),
    RegisterTopic {
        topic: String,
        queue_datas: Vec<QueueData>,
        done: Done,
    },
    /// WIPE_WRITE_PERM_OF_BROKER (`wipe`) / ADD_WRITE_PERM_OF_BROKER; answers the count of topics.
    WritePerm {
        broker_name: String,
        wipe: bool,
        done: Done,
    },
    DeleteTopic {
        topic: String,
        cluster: Option<String>,
        done: Done,
    },
    /// KV namespace ORDER_TOPIC_CONFIG changed for `topic`.
    OrderTopicConf {
        topic: String,
        value: Option<String>,
        done: Done,
    },
    SetConfig {
        config: RouteConfig,
        done: Done,
    },
    /// The connection closed: brokers that last registered over it are removed.
    ConnectionClosed(ConnId),
    /// The scan found this broker silent; removed if it still is at `now`.
    Expire {
        key: BrokerAddrKey,
        now: Instant,
    },
    /// The routes and live entries as they are once every mutation queued before this one is applied.
    RoutesToSave(oneshot::Sender<RoutesToSave>),
    /// A fault in the middle of a batch, for the tests of what a panicking batch leaves behind.
    #[cfg(test)]
    Panic,
}

/// What the writer has done, for metrics.
#[derive(Debug, Default)]
pub struct RouteCounters {
    pub registrations: AtomicU64,
    pub expiries: AtomicU64,
    pub publishes: AtomicU64,
    /// 905 notices dropped because the notifier's queue was full.
    pub notices_dropped: AtomicU64,
}

/// What handlers hold to read routes and submit changes. Reading is all it can do with the published state:
/// only the writer publishes snapshots and changes who is live.
#[derive(Clone)]
pub struct RouteHandle {
    snapshot: Arc<ArcSwap<RouteSnapshot>>,
    /// Read-only but for heartbeats: the writer alone changes who is live.
    pub liveness: LiveView,
    pub counters: Arc<RouteCounters>,
    tx: mpsc::Sender<RouteMutation>,
    /// Unregistrations queued and not yet applied, capped like Java's batch unregistration queue.
    pending_unregisters: Arc<AtomicUsize>,
    unregister_capacity: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("the route writer queue is full")]
    QueueFull,
    #[error("the route writer has stopped")]
    Stopped,
}

impl RouteHandle {
    /// The current snapshot, without a lock or a reference count on the fast path.
    pub fn load(&self) -> arc_swap::Guard<Arc<RouteSnapshot>> {
        self.snapshot.load()
    }

    /// The current snapshot, as a counted reference to keep (to encode a whole-table body from it off the
    /// worker threads, for one).
    pub fn load_full(&self) -> Arc<RouteSnapshot> {
        self.snapshot.load_full()
    }

    /// Waits for room in the queue: registrations are never dropped. (An unregistration sent this way is
    /// counted against the cap too, but never refused; handlers use [`RouteHandle::submit_unregister`].)
    pub async fn submit(&self, m: RouteMutation) -> Result<(), SubmitError> {
        let unregister = matches!(m, RouteMutation::Unregister(_));
        if unregister {
            self.pending_unregisters.fetch_add(1, Ordering::AcqRel);
        }
        let sent = self.tx.send(m).await.map_err(|_| SubmitError::Stopped);
        if sent.is_err() && unregister {
            self.pending_unregisters.fetch_sub(1, Ordering::AcqRel);
        }
        sent
    }

    /// Queues an unregistration without waiting: UNREGISTER_BROKER answers SYSTEM_ERROR when
    /// `unRegisterBrokerQueueCapacity` unregistrations are already waiting, as Java does.
    pub fn submit_unregister(&self, req: UnregisterRequest) -> Result<(), SubmitError> {
        let pending = self.pending_unregisters.fetch_add(1, Ordering::AcqRel);
        let result = if pending >= self.unregister_capacity {
            Err(SubmitError::QueueFull)
        } else {
            self.tx.try_send(RouteMutation::Unregister(req)).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => SubmitError::QueueFull,
                mpsc::error::TrySendError::Closed(_) => SubmitError::Stopped,
            })
        };
        if result.is_err() {
            self.pending_unregisters.fetch_sub(1, Ordering::AcqRel);
        }
        result
    }

    /// Submits a mutation built around `done` and waits until it is applied and visible.
    pub async fn apply(&self, build: impl FnOnce(Done) -> RouteMutation) -> Result<usize, SubmitError> {
        let (done, rx) = oneshot::channel();
        self.submit(build(done)).await?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }

    /// The routes and the live entries of one moment, for the route snapshot file: taken by the writer
    /// between two batches, so they agree.
    pub async fn routes_to_save(&self) -> Result<RoutesToSave, SubmitError> {
        let (tx, rx) = oneshot::channel();
        self.submit(RouteMutation::RoutesToSave(tx)).await?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }

    #[cfg(any(test, feature = "testing"))]
    pub async fn register(&self, r: BrokerRegistration) -> Result<Result<RegisterResult, RegisterError>, SubmitError> {
        self.register_holding(r, Charge::default()).await
    }

    /// `register`, the registration holding `held` in the memory budget until it is applied.
    pub async fn register_holding(
        &self,
        r: BrokerRegistration,
        held: Charge,
    ) -> Result<Result<RegisterResult, RegisterError>, SubmitError> {
        let (tx, rx) = oneshot::channel();
        self.submit(RouteMutation::Register(Box::new(r), tx, held)).await?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }
}

/// The route writer, to be run (`run`) as a task.
pub struct RouteWriter {
    rx: mpsc::Receiver<RouteMutation>,
    state: WriterState,
}

/// What the writer changes, moved to the blocking pool for each batch and back.
struct WriterState {
    snapshot: Arc<ArcSwap<RouteSnapshot>>,
    liveness: Arc<BrokerLiveTable>,
    index: BrokerTopicIndex,
    pending_unregisters: Arc<AtomicUsize>,
    counters: Arc<RouteCounters>,
    /// Snapshots replaced while readers still held them. Freed here once none does: freeing a table whose
    /// routes were all re-encoded frees every route in it, and a reader whose guard happened to be the last
    /// would pay for that in front of its lookup.
    retired: Vec<Arc<RouteSnapshot>>,
    /// Where 905 notices go (`notifyMinBrokerIdChanged`); `None` drops them.
    notices: Option<NoticeSender>,
}

/// Creates the route table, starting from `initial` (empty, with its switches and ordered-topic configs):
/// the handle for handlers and the writer to spawn. At most `unregister_capacity` unregistrations wait at
/// once (Java's `unRegisterBrokerQueueCapacity`).
///
/// `saved_routes` is a warm-restart file's content, or a peer's copy (see `route::dump`): its routes are
/// served at once, each of its brokers on a fresh liveness timer.
pub fn route_table(
    initial: RouteSnapshot,
    saved_routes: Option<crate::route::dump::RouteDump>,
    unregister_capacity: usize,
) -> (RouteHandle, RouteWriter) {
    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY + unregister_capacity);
    let liveness = Arc::new(BrokerLiveTable::new());
    let mut index = BrokerTopicIndex::default();
    let start = match saved_routes {
        None => initial,
        Some(file) => {
            let restored = crate::route::dump::restore(file, &initial, &mut index, &liveness, Instant::now());
            tracing::info!(topics = restored.topics.len(), brokers = restored.brokers.len(), "routes restored");
            restored
        }
    };
    let snapshot = Arc::new(ArcSwap::from_pointee(start));
    let pending_unregisters = Arc::new(AtomicUsize::new(0));
    let counters = Arc::new(RouteCounters::default());
    let handle = RouteHandle {
        snapshot: snapshot.clone(),
        liveness: LiveView::new(liveness.clone()),
        counters: counters.clone(),
        tx,
        pending_unregisters: pending_unregisters.clone(),
        unregister_capacity,
    };
    let state =
        WriterState { snapshot, liveness, index, pending_unregisters, counters, retired: Vec::new(), notices: None };
    (handle, RouteWriter { rx, state })
}

impl RouteWriter {
    /// Hands the batches' 905 notices to `sink` once their snapshot is published. The writer never waits
    /// for it: a notice finding the channel full is dropped and counted.
    pub fn send_min_broker_id_changes(&mut self, sink: NoticeSender) {
        self.state.notices = Some(sink);
    }

    /// Runs until every handle is dropped. A panic in a batch is this task's panic (the server's supervisor
    /// reports it and stops).
    pub async fn run(self) {
        let RouteWriter { mut rx, mut state } = self;
        let mut batch = Vec::new();
        loop {
            let received = if state.retired.is_empty() {
                rx.recv_many(&mut batch, MAX_BATCH).await
            } else {
                // Cancel-safe: nothing is lost when the wait times out.
                match tokio::time::timeout(RETIRED_RECHECK, rx.recv_many(&mut batch, MAX_BATCH)).await {
                    Ok(received) => received,
                    Err(_) => {
                        let Some(s) = off_readers(state, WriterState::free_retired).await else { return };
                        state = s;
                        continue;
                    }
                }
            };
            if received == 0 {
                return;
            }
            let mutations = std::mem::take(&mut batch);
            let Some(s) = off_readers(state, move |s| s.apply_batch(mutations)).await else { return };
            state = s;
            // Replaced snapshots are freed when nothing waits: freeing a whole table takes up to a hundred
            // milliseconds at 100,000 topics, which the next batch (a broker re-registering after its old
            // connection closed) should not wait for.
            if !state.retired.is_empty() && rx.is_empty() {
                let Some(s) = off_readers(state, WriterState::free_retired).await else { return };
                state = s;
            }
        }
    }
}

/// Runs `work` on the state on tokio's blocking pool and gives the state back; `None` when the runtime is
/// shutting down.
async fn off_readers(
    mut state: WriterState,
    work: impl FnOnce(&mut WriterState) + Send + 'static,
) -> Option<WriterState> {
    crate::limits::offload::on_blocking_pool(move || {
        work(&mut state);
        state
    })
    .await
}

impl WriterState {
    fn apply_batch(&mut self, batch: Vec<RouteMutation>) {
        // A request for the routes to save ends a batch: it sees every mutation queued before it.
        let mut pending = Vec::with_capacity(batch.len());
        for m in batch {
            match m {
                RouteMutation::RoutesToSave(reply) => {
                    self.apply(std::mem::take(&mut pending));
                    let _ =
                        reply.send(RoutesToSave { snapshot: self.snapshot.load_full(), live: self.liveness.entries() });
                }
                m => pending.push(m),
            }
        }
        if !pending.is_empty() {
            self.apply(pending);
        }
    }

    /// Drops the replaced snapshots no reader holds any more. `ArcSwap::swap` has turned every reader's
    /// borrow of the old snapshot into a counted reference before it returned, and no reader can reach the
    /// old snapshot anew, so a count of one is this list's alone.
    fn free_retired(&mut self) {
        self.retired.retain(|s| Arc::strong_count(s) > 1);
    }

    fn apply(&mut self, batch: Vec<RouteMutation>) {
        if batch.is_empty() {
            return;
        }
        let current = self.snapshot.load_full();
        let mut builder = RouteBuilder::new(&current, &mut self.index, &self.liveness);
        let mut answers = Answers::default();
        for m in batch {
            apply_mutation(&mut builder, m, &self.counters, &self.pending_unregisters, &mut answers);
        }
        // The batch's snapshot first, then its liveness changes, then the replies: whoever is answered sees
        // both (liveness.rs says why the moment between the two is harmless).
        let notices = builder.take_notices();
        let (next, live) = builder.finish();
        if let Some(next) = next {
            tracing::debug!(version = next.version, topics = next.topics.len(), "route snapshot published");
            self.retired.push(self.snapshot.swap(Arc::new(next)));
            self.counters.publishes.fetch_add(1, Ordering::Relaxed);
        }
        live.commit(&self.liveness);
        drop(current);
        if let Some(sink) = &self.notices {
            for notice in notices {
                if !sink.try_send(notice) {
                    self.counters.notices_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        answers.send();
    }
}

/// What a batch owes its senders once its snapshot is published.
#[derive(Default)]
struct Answers {
    registrations: Vec<(oneshot::Sender<Registered>, Registered)>,
    done: Vec<(Done, usize)>,
    /// The parsed registrations, whose room in the memory budget is given back with them.
    applied: Vec<(Box<BrokerRegistration>, Charge)>,
}

impl Answers {
    fn send(self) {
        drop(self.applied);
        for (reply, result) in self.registrations {
            let _ = reply.send(result);
        }
        for (done, count) in self.done {
            let _ = done.send(count);
        }
    }
}

/// Applies one mutation of a batch to the snapshot being built, noting what its sender is owed.
fn apply_mutation(
    builder: &mut RouteBuilder<'_>,
    m: RouteMutation,
    counters: &RouteCounters,
    pending_unregisters: &AtomicUsize,
    answers: &mut Answers,
) {
    match m {
        RouteMutation::Register(r, reply, held) => {
            counters.registrations.fetch_add(1, Ordering::Relaxed);
            answers.registrations.push((reply, builder.register_broker(&r)));
            answers.applied.push((r, held));
        }
        RouteMutation::Unregister(req) => {
            pending_unregisters.fetch_sub(1, Ordering::AcqRel);
            builder.unregister_broker(&req);
        }
        RouteMutation::RegisterTopic { topic, queue_datas, done } => {
            builder.register_topic(&topic, queue_datas);
            answers.done.push((done, 0));
        }
        RouteMutation::WritePerm { broker_name, wipe, done } => {
            answers.done.push((done, builder.operate_write_perm(&broker_name, wipe)));
        }
        RouteMutation::DeleteTopic { topic, cluster, done } => {
            builder.delete_topic(&topic, cluster.as_deref());
            answers.done.push((done, 0));
        }
        RouteMutation::OrderTopicConf { topic, value, done } => {
            builder.set_order_topic_conf(&topic, value.as_deref());
            answers.done.push((done, 0));
        }
        RouteMutation::SetConfig { config, done } => {
            builder.set_config(config);
            answers.done.push((done, 0));
        }
        RouteMutation::ConnectionClosed(conn) => {
            for key in builder.live().registered_over(conn) {
                unregister_by_address(builder, &key);
            }
        }
        RouteMutation::Expire { key, now } => {
            if builder.live().get(&key).is_some_and(|info| info.is_expired(now)) {
                tracing::warn!(
                    cluster = %crate::error::shown(&key.cluster, 256),
                    broker = %crate::error::shown(&key.addr, 256),
                    "broker expired, removing it"
                );
                counters.expiries.fetch_add(1, Ordering::Relaxed);
                unregister_by_address(builder, &key);
            }
        }
        // Split off by `apply_batch` before a batch gets here.
        RouteMutation::RoutesToSave(_) => {}
        #[cfg(test)]
        RouteMutation::Panic => panic!("a fault planted in the batch"),
    }
}

/// Unregisters the broker at `key` if the table knows it; otherwise only its live entry goes.
fn unregister_by_address(builder: &mut RouteBuilder<'_>, key: &BrokerAddrKey) {
    match builder.unregister_request_for(key) {
        Some(req) => builder.unregister_broker(&req),
        None => builder.forget_live(key),
    }
}

#[cfg(test)]
mod tests;
