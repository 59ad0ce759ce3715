//! One controller node at work (Java's ControllerManager with its DLedgerController): it answers the
//! brokers' requests, deciding one at a time on the leader (Java's event scheduler) and answering only
//! once the decision's events are committed; it follows the brokers' heartbeats, and on the leader elects
//! a new master when a group's master goes silent, then tells the group's brokers (1008).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use tokio::sync::mpsc;

use super::gate::PeerGate;
use super::heartbeat::{BrokerIdentity, HeartbeatTable};
use super::log_store::LogStore;
use super::machine::StateMachine;
use super::manager::{self, Body, Decision, ElectRequest};
use super::network::PeerNetwork;
use super::notify::RoleChange;
use super::raft::ControllerRaft;
use super::settings::ControllerSettings;
use super::stats::ControllerStats;
use super::switches::Switches;
use super::wire::{self, ControllerRequest};
use crate::error::{RequestError, shown};
use crate::protocol::codes::{controller_request as code, response};
use crate::remoting::{ExtFields, RemotingCommand};

/// Java waits this long for a decision's log append (ControllerRequestProcessor's WAIT_TIMEOUT_OUT).
const WAIT: Duration = Duration::from_secs(5);
/// How recently a majority must have answered a leader for it to say it leads: the shortest election
/// timeout, after which the others may have elected another.
const QUORUM_LEASE: Duration = Duration::from_millis(1000);
/// GET_SYNC_STATE_DATA replies built at once, each at most the state's size (`listener`).
const LARGE_ANSWERS: usize = 4;
/// Release decisions in one scan at most (`release_silent_brokers`).
const RELEASED_AT_ONCE: usize = 100;
/// In a group that had a master, silent ids are released only past this many (half its places).
const RELEASE_PAST: usize = super::replicas::MAX_BROKERS_PER_GROUP / 2;

/// The log and the state machine as read from `controllerStorePath`.
pub struct Store {
    log: LogStore,
    machine: StateMachine,
}

impl Store {
    pub fn open(dir: &std::path::Path) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        Ok(Store { log: LogStore::open(dir)?, machine: StateMachine::open(dir)? })
    }

    /// The node's /metrics counts, with the log's size and the last snapshot's time as the store keeps them.
    pub fn stats(&self) -> ControllerStats {
        ControllerStats {
            log_bytes: self.log.size(),
            snapshot_time: self.machine.snapshot_time(),
            ..ControllerStats::default()
        }
    }
}

pub struct ControllerNode {
    pub(super) settings: ControllerSettings,
    pub(super) switches: Switches,
    pub(super) raft: Raft<ControllerRaft>,
    /// The log openraft writes, read by the gate (`network`).
    pub(super) log: LogStore,
    /// Who may send Raft frames here (`gate`).
    pub(super) gate: Arc<PeerGate>,
    /// The snapshot arriving from the leader, checked whole before openraft installs it (`network`).
    pub(super) arriving: std::sync::Mutex<super::network::Arriving>,
    /// Replies that may be large being built at once (`listener`).
    pub(super) large_answers: tokio::sync::Semaphore,
    /// What /metrics shows of it.
    pub(super) stats: Arc<ControllerStats>,
    /// On the leader, since when each broker that is not alive has been seen so, by group and id
    /// (`release_silent_brokers`): at most one entry for each broker the state holds.
    silent: std::sync::Mutex<HashMap<String, BTreeMap<i64, std::time::Instant>>>,
    /// Where 1002, 1009 and 1011 and the elections it starts itself are recorded.
    pub(super) audit: Arc<crate::ops::audit::AuditLog>,
    machine: StateMachine,
    pub(super) heartbeats: HeartbeatTable,
    /// One decision at a time, from reading the state to its events being applied.
    deciding: tokio::sync::Mutex<()>,
    role_changes: mpsc::Sender<RoleChange>,
}

/// Raft timing for a group on one network: heartbeats every 300 ms, an election after 1-2 s without one
/// (DLedger's defaults are 2 s and 3-6 s); a snapshot every 1,000 entries, after which the log before it
/// is purged.
fn raft_config() -> Result<Arc<Config>, std::io::Error> {
    let config = Config {
        cluster_name: "rocketns-controller".into(),
        heartbeat_interval: 300,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(1000),
        max_in_snapshot_log_to_keep: 0,
        max_payload_entries: 64,
        snapshot_max_chunk_size: 1 << 20,
        ..Config::default()
    };
    config.validate().map(Arc::new).map_err(std::io::Error::other)
}

impl ControllerNode {
    /// Opens the log and snapshot under `controllerStorePath` and joins the group; the first start of a
    /// group initialises it with every peer (each node does the same, which openraft allows).
    pub async fn start(
        settings: ControllerSettings,
        switches: Switches,
        store: Store,
        role_changes: mpsc::Sender<RoleChange>,
        (stats, audit): (Arc<ControllerStats>, Arc<crate::ops::audit::AuditLog>),
    ) -> std::io::Result<Arc<ControllerNode>> {
        let Store { log, machine } = store;
        let gate = Arc::new(PeerGate::new(&settings.peers, settings.peer_secret.as_deref()));
        if !gate.authenticates() && settings.peers.len() > 1 {
            tracing::warn!(
                "controller: controllerAllowUnsignedPeers: Raft frames are taken from the peers' addresses unsigned, unproven (SECURITY.md)"
            );
        }
        let network = PeerNetwork::new(gate.clone(), settings.peers.clone());
        let raft = Raft::new(settings.self_id, raft_config()?, network, log.clone(), machine.clone())
            .await
            .map_err(std::io::Error::other)?;
        let members: BTreeMap<u64, BasicNode> =
            settings.peers.iter().enumerate().map(|(i, p)| (i as u64, BasicNode::new(&p.addr))).collect();
        if let Err(e) = raft.initialize(members).await {
            tracing::debug!(error = %e, "controller: the group was initialised before");
        }
        tracing::info!(id = %settings.me().id, addr = %settings.me().addr, peers = settings.peers.len(), "controller started");
        let node = ControllerNode {
            settings,
            switches,
            raft,
            log,
            gate,
            arriving: Default::default(),
            large_answers: tokio::sync::Semaphore::new(LARGE_ANSWERS),
            stats,
            silent: Default::default(),
            audit,
            machine,
            heartbeats: HeartbeatTable::default(),
            deciding: tokio::sync::Mutex::new(()),
            role_changes,
        };
        Ok(Arc::new(node))
    }

    /// Whether this node leads and a majority has answered it within [`QUORUM_LEASE`]: openraft 0.9 keeps
    /// a leader cut off from the others leading (DLedger's steps down), and brokers that asked it first
    /// would go on sending there.
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.current_leader == Some(self.settings.self_id)
            && m.millis_since_quorum_ack.is_some_and(|ms| ms < QUORUM_LEASE.as_millis() as u64)
    }

    /// Whether this node knows a leader: another node, or itself while [`Self::is_leader`].
    pub fn knows_leader(&self) -> bool {
        self.leader().is_some()
    }

    /// The leader this node knows of: itself only while [`Self::is_leader`].
    fn leader(&self) -> Option<&super::settings::Peer> {
        let leader = self.raft.metrics().borrow().current_leader?;
        if leader == self.settings.self_id && !self.is_leader() {
            return None;
        }
        self.settings.peer(leader)
    }

    /// Answers a broker's or an admin's request on connection `conn` from `from`; `None` for a code it does
    /// not serve.
    pub async fn answer(
        &self,
        req: &RemotingCommand,
        conn: u64,
        from: std::net::IpAddr,
    ) -> Option<Result<RemotingCommand, RequestError>> {
        let request = match ControllerRequest::decode(req) {
            Ok(Some(request)) => request,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        Some(self.serve(&request, conn, from).await)
    }

    async fn serve(
        &self,
        request: &ControllerRequest,
        conn: u64,
        from: std::net::IpAddr,
    ) -> Result<RemotingCommand, RequestError> {
        match request {
            ControllerRequest::Heartbeat(hb) => {
                let known = self
                    .machine
                    .applied()
                    .state
                    .replicas(&hb.broker_name)
                    .is_some_and(|r| r.brokers.contains_key(&hb.broker_id));
                self.heartbeats.beat(hb, (conn, from), known)?;
                Ok(RemotingCommand::response(response::SUCCESS, Some("Heart beat success".into())))
            }
            ControllerRequest::GetMetadata => Ok(self.metadata()),
            ControllerRequest::GetConfig => {
                let mut resp = RemotingCommand::response(response::SUCCESS, None);
                resp.body = self.config_text().into();
                Ok(resp)
            }
            ControllerRequest::UpdateConfig { body } => {
                self.switches.update(body).await?;
                Ok(RemotingCommand::response(response::SUCCESS, None))
            }
            _ => self.decide(request).await,
        }
    }

    /// Java's GetMetaDataResponseHeader: the group, the leader's id and address, whether this node leads,
    /// and every peer as `id:addr;`.
    fn metadata(&self) -> RemotingCommand {
        let leader = self.leader();
        let mut ext = ExtFields::new();
        if !self.settings.group.is_empty() {
            ext.insert("group", &self.settings.group);
        }
        if let Some(leader) = leader {
            ext.insert("controllerLeaderId", &leader.id);
            ext.insert("controllerLeaderAddress", &leader.addr);
        }
        ext.insert("isLeader", if self.is_leader() { "true" } else { "false" });
        let peers: String = self.settings.peers.iter().map(|p| format!("{}:{};", p.id, p.addr)).collect();
        ext.insert("peers", peers);
        let mut resp = RemotingCommand::response(response::SUCCESS, None);
        resp.ext_fields = Some(ext);
        resp
    }

    fn config_text(&self) -> String {
        let s = &self.settings;
        let peers: Vec<String> = s.peers.iter().map(|p| format!("{}-{}", p.id, p.addr)).collect();
        format!(
            "controllerDLegerGroup={}\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId={}\ncontrollerStorePath={}\n\
             scanNotActiveBrokerInterval={}\n{}",
            s.group,
            peers.join(";"),
            s.me().id,
            s.store_path.display(),
            s.scan_not_active_broker_interval.as_millis(),
            self.switches.text(),
        )
    }

    /// A request only the leader serves: decided against the state with every earlier decision applied,
    /// answered once its events are committed and applied.
    async fn decide(&self, request: &ControllerRequest) -> Result<RemotingCommand, RequestError> {
        if let ControllerRequest::GetSyncStateData { broker_names } = request {
            return self.sync_state_data(broker_names).await;
        }
        if !self.is_leader() {
            return Err(RequestError::ControllerNotLeader);
        }
        let _one_at_a_time = self.deciding.lock().await;
        self.confirm_leadership().await?;
        let decision = self.decision(request);
        if !decision.events.is_empty() {
            match tokio::time::timeout(WAIT, self.raft.client_write(decision.events.clone())).await {
                Ok(Ok(_)) => {}
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                    return Err(RequestError::ControllerNotLeader);
                }
                Ok(Err(e)) => return Err(RequestError::ControllerReplication(e.to_string())),
                Err(_) => return Err(RequestError::ControllerReplication("no commit within 5 s".into())),
            }
        }
        let resp = wire::reply(request, &decision);
        if let ControllerRequest::ElectMaster { .. } = request {
            let counter =
                if decision.code == response::SUCCESS { &self.stats.elected } else { &self.stats.election_failed };
            ControllerStats::count(counter);
            self.announce(&decision);
        }
        Ok(resp)
    }

    /// That this node leads and has applied every decision before now (a read index, then the log applied).
    async fn confirm_leadership(&self) -> Result<(), RequestError> {
        if !self.is_leader() {
            return Err(RequestError::ControllerNotLeader);
        }
        match tokio::time::timeout(WAIT, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => {}
            Ok(Err(RaftError::APIError(_))) => return Err(RequestError::ControllerNotLeader),
            Ok(Err(e)) => return Err(RequestError::ControllerReplication(e.to_string())),
            Err(_) => return Err(RequestError::ControllerNotLeader),
        }
        self.caught_up().await
    }

    /// GET_SYNC_STATE_DATA: the groups asked for are copied out of the state as the leader confirms it,
    /// and written with no lock held (an admin's list of thousands of names holds up no decision).
    async fn sync_state_data(&self, broker_names: &[String]) -> Result<RemotingCommand, RequestError> {
        let groups: Vec<_> = {
            let _one_at_a_time = self.deciding.lock().await;
            self.confirm_leadership().await?;
            let applied = self.machine.applied();
            broker_names
                .iter()
                .filter_map(|name| {
                    let (replicas, sync) = applied.state.group(name)?;
                    Some((name.clone(), replicas.clone(), sync.clone()))
                })
                .collect()
        };
        let alive = |cluster: &str, name: &str, id: i64| {
            super::elect::BrokerLiveness::is_alive(&self.heartbeats, cluster, name, id)
        };
        let mut resp = RemotingCommand::response(response::SUCCESS, None);
        resp.body = wire::broker_replicas_info(&groups, &alive).into();
        Ok(resp)
    }

    /// Waits until the state machine has applied the whole log: a leader newly elected (a restart of the
    /// group) answers once it has replayed what the snapshot lacks, as Java's controller starts serving
    /// only once its state machine has caught up with its log. openraft's read index alone let the first
    /// read after a restart see the snapshot's state (`tests/wire_controller.rs`).
    async fn caught_up(&self) -> Result<(), RequestError> {
        let applied_all =
            |m: &openraft::RaftMetrics<u64, openraft::BasicNode>| m.last_applied.map(|id| id.index) >= m.last_log_index;
        match self.raft.wait(Some(WAIT)).metrics(applied_all, "the log applied").await {
            Ok(_) => Ok(()),
            Err(e) => Err(RequestError::ControllerReplication(format!("the state is not caught up with the log: {e}"))),
        }
    }

    fn decision(&self, request: &ControllerRequest) -> Decision {
        let state = self.machine.applied();
        let state = &state.state;
        let live = &self.heartbeats;
        match request {
            ControllerRequest::AlterSyncStateSet { broker_name, master_id, master_epoch, set, set_epoch } => {
                manager::alter_sync_state_set(state, (broker_name, *master_id, *master_epoch), (set, *set_epoch), live)
            }
            ControllerRequest::ElectMaster { cluster: _, broker_name, broker_id, designate } => {
                let req = ElectRequest { broker_name, broker_id: *broker_id, designate: *designate };
                manager::elect_master(state, &req, live, self.switches.elect_unclean_master())
            }
            ControllerRequest::RegisterBroker { cluster, broker_name, broker_id, address } => {
                let cluster = cluster.as_deref().unwrap_or_default();
                manager::register_broker(state, (cluster, broker_name), (*broker_id, address), live)
            }
            ControllerRequest::GetReplicaInfo { broker_name } => manager::replica_info(state, broker_name),
            ControllerRequest::CleanBrokerData { cluster, broker_name, ids, clean_living } => {
                manager::clean_broker_data(state, (cluster, broker_name), ids.as_deref(), *clean_living, live)
            }
            ControllerRequest::GetNextBrokerId { broker_name, .. } => manager::next_broker_id(state, broker_name),
            ControllerRequest::ApplyBrokerId { cluster, broker_name, broker_id, check_code } => {
                let cluster = cluster.as_deref().unwrap_or_default();
                manager::apply_broker_id(state, (cluster, broker_name), *broker_id, check_code)
            }
            ControllerRequest::GetSyncStateData { .. } => Decision::ok(),
            ControllerRequest::Heartbeat(_)
            | ControllerRequest::GetMetadata
            | ControllerRequest::GetConfig
            | ControllerRequest::UpdateConfig { .. } => Decision::ok(),
        }
    }

    /// A new master elected: its group's live brokers are told (`notifyBrokerRoleChanged`).
    fn announce(&self, decision: &Decision) {
        if !self.switches.notify_broker_role_changed() || decision.code != response::SUCCESS {
            return;
        }
        let (Some(Body::Elected { set, members: Some(group) }), Some(master_id)) =
            (&decision.body, decision.master.master_broker_id)
        else {
            return;
        };
        let live = &self.heartbeats;
        let targets = group
            .broker_addrs
            .iter()
            .filter(|(id, _)| super::elect::BrokerLiveness::is_alive(live, &group.cluster, &group.broker_name, *id))
            .map(|(_, addr)| addr.clone())
            .collect();
        let change = RoleChange {
            master_address: decision.master.master_address.clone(),
            master_id,
            master_epoch: decision.master.master_epoch.unwrap_or_default(),
            sync_state_set_epoch: decision.master.sync_state_set_epoch.unwrap_or_default(),
            sync_state_set: set.clone(),
            targets,
        };
        if self.role_changes.try_send(change).is_err() {
            tracing::warn!("controller: too many role change notices waiting; one is dropped");
        }
    }

    /// Brokers gone silent or disconnected: on the leader, a group whose master is among them gets a new
    /// one (Java's onBrokerInactive).
    pub async fn brokers_inactive(&self, gone: Vec<BrokerIdentity>) {
        for (cluster, broker_name, id) in gone {
            if !self.is_leader() {
                return;
            }
            let master = self.machine.applied().state.sync_state(&broker_name).and_then(|s| s.master);
            if master == Some(id) {
                tracing::info!(cluster = %shown(&cluster, 128), broker = %shown(&broker_name, 128), id, "controller: the master is gone, electing");
                self.elect_for(&broker_name).await;
            }
        }
    }

    /// On the leader, elects for each group whose master is gone while another broker lives (Java's
    /// scanInactiveMasterAndTriggerReelect).
    pub async fn reelect_where_needed(&self) {
        if !self.is_leader() {
            return;
        }
        let needing = manager::groups_needing_election(&self.machine.applied().state, &self.heartbeats);
        for broker_name in needing {
            self.elect_for(&broker_name).await;
        }
    }

    /// On the leader, releases what anyone who never ran a broker could keep for good: a group that no
    /// master was ever elected for and none of whose brokers has beaten to it for
    /// `controllerReleaseUnelectedGroupMillis`, and in a group that had one and holds more than
    /// [`RELEASE_PAST`] ids, the newest ids as silent that are neither its master nor in its SyncStateSet,
    /// down to that many (so made-up ids cannot fill a real group's 64, and a real group's slaves, a few
    /// low ids, stay however long they are down). Each a decision like CLEAN_BROKER_DATA's, at most
    /// [`RELEASED_AT_ONCE`] a scan. The time counts on this leader only: a new leader starts it again.
    pub async fn release_silent_brokers(&self) {
        let Some(after) = self.settings.release_unelected_after else { return };
        for (cluster, broker_name, ids) in self.silent_due(after) {
            let name = shown(&broker_name, 128).into_owned();
            let listed = ids.as_ref().map(|ids| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(";"));
            let request =
                ControllerRequest::CleanBrokerData { cluster, broker_name, ids: listed.clone(), clean_living: false };
            let code = self.decide_own(&request).await.map_or_else(|e| e.response_code(), |resp| resp.code);
            match listed {
                None => tracing::info!(broker = %name, code, "controller: a group never elected and silent released"),
                Some(ids) => {
                    tracing::info!(broker = %name, ids, code, "controller: silent broker ids outside the SyncStateSet released")
                }
            }
        }
    }

    /// A decision this node starts itself, as leader, recorded in the audit log as the request it stands
    /// for (`self_started`).
    async fn decide_own(&self, request: &ControllerRequest) -> Result<RemotingCommand, RequestError> {
        let decided = self.decide(request).await;
        if let Some(audited) = self_started(request) {
            let answer = decided.as_ref().map_or_else(|e| e.to_response(audited.code), Clone::clone);
            self.audit.record(None, &audited, &answer);
        }
        decided
    }

    /// What `release_silent_brokers` releases now: whole groups (`None`) and ids of elected groups.
    fn silent_due(&self, after: Duration) -> Vec<(String, String, Option<BTreeSet<i64>>)> {
        let mut silent = self.silent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.is_leader() {
            silent.clear();
            return Vec::new();
        }
        let now = std::time::Instant::now();
        let mut due = Vec::new();
        let applied = self.machine.applied();
        let state = &applied.state;
        let mut tracked = HashMap::new();
        for (name, sync) in state.sync_states() {
            let Some(replicas) = state.replicas(name) else { continue };
            let mut since = silent.remove(name).unwrap_or_default();
            since.retain(|id, _| replicas.brokers.contains_key(id));
            let (mut releasable, mut all_due) = (BTreeSet::new(), true);
            for id in replicas.brokers.keys() {
                if super::elect::BrokerLiveness::is_alive(&self.heartbeats, &replicas.cluster, name, *id) {
                    since.remove(id);
                    all_due = false;
                    continue;
                }
                if now.duration_since(*since.entry(*id).or_insert(now)) < after {
                    all_due = false;
                } else if sync.master != Some(*id) && !sync.sync_state_set.contains(id) {
                    releasable.insert(*id);
                }
            }
            // Only the places past half of them, the newest ids first: a real slave that was down comes back
            // with REGISTER_BROKER_TO_CONTROLLER alone (its id file holds no check code to apply with), which
            // a released id is refused. Newest among all the ids that could go, not only among those silent
            // long enough: a slave down before made-up ids were applied is silent longest, and was released
            // first when applying them took the leader longer than `after` (a loaded machine).
            let past_half = replicas.brokers.len().saturating_sub(RELEASE_PAST);
            let newest: BTreeSet<i64> = replicas
                .brokers
                .keys()
                .rev()
                .filter(|id| sync.master != Some(**id) && !sync.sync_state_set.contains(id))
                .take(past_half)
                .copied()
                .collect();
            let releasable: BTreeSet<i64> = releasable.intersection(&newest).copied().collect();
            if due.len() < RELEASED_AT_ONCE {
                if sync.first_election() && all_due {
                    due.push((sync.cluster.clone(), name.clone(), None));
                } else if !sync.first_election() && !releasable.is_empty() {
                    due.push((sync.cluster.clone(), name.clone(), Some(releasable)));
                }
            }
            if !since.is_empty() {
                tracked.insert(name.clone(), since);
            }
        }
        *silent = tracked;
        due
    }

    async fn elect_for(&self, broker_name: &str) {
        let request = ControllerRequest::ElectMaster {
            cluster: String::new(),
            broker_name: broker_name.to_string(),
            broker_id: -1,
            designate: false,
        };
        // Java's triggerElectMaster: up to electMasterMaxRetryCount tries, until one succeeds; each that
        // finds no master is a decision of its own (the master epoch moves on with each, as in Java).
        for attempt in 1..=self.settings.elect_master_tries {
            match self.decide_own(&request).await {
                Ok(resp) if resp.code == response::SUCCESS => {
                    tracing::info!(broker = %shown(broker_name, 128), remark = ?resp.remark, "controller: election");
                    return;
                }
                Ok(resp) => {
                    let remark = resp.remark.as_deref().map(|r| shown(r, 256).into_owned());
                    tracing::info!(broker = %shown(broker_name, 128), attempt, code = resp.code, ?remark, "controller: election");
                }
                Err(e) => {
                    tracing::warn!(broker = %shown(broker_name, 128), attempt, error = %shown(&e.to_string(), 256), "controller: election failed");
                }
            }
        }
    }
}

/// The request a change the leader starts itself stands for in the audit log: ELECT_MASTER (1002) with
/// brokerId -1, as Java's controller sends it, or CLEAN_BROKER_DATA (1011) for a released group.
fn self_started(request: &ControllerRequest) -> Option<RemotingCommand> {
    let (request_code, cluster, broker_name, broker_id) = match request {
        ControllerRequest::ElectMaster { cluster, broker_name, broker_id, .. } => {
            (code::ELECT_MASTER, cluster.as_str(), broker_name.as_str(), Some(*broker_id))
        }
        ControllerRequest::CleanBrokerData { cluster, broker_name, .. } => {
            (code::CLEAN_BROKER_DATA, cluster.as_str(), broker_name.as_str(), None)
        }
        // The node starts no other decision.
        _ => return None,
    };
    let mut ext = ExtFields::new();
    if !cluster.is_empty() {
        ext.insert("clusterName", cluster);
    }
    ext.insert("brokerName", broker_name);
    if let Some(id) = broker_id {
        ext.insert("brokerId", id.to_string());
    }
    ext.insert("startedBy", "controller");
    Some(RemotingCommand::request(request_code, ext))
}
