//! Three controller nodes replicating through openraft in one process (the network is a table of the
//! live nodes; a node missing from it is unreachable): the leader's writes reach every node, the log is
//! purged behind snapshots, a new leader is elected when the old one stops, and a node restarted from its
//! files catches up with the others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};

use super::log_store::LogStore;
use super::machine::StateMachine;
use super::raft::{ControllerRaft, NodeId};
use super::replicas::ControllerEvent;

type Node = Raft<ControllerRaft>;
type Nodes = Arc<Mutex<BTreeMap<NodeId, Node>>>;

#[derive(Clone)]
struct Network {
    nodes: Nodes,
}

struct Client {
    nodes: Nodes,
    target: NodeId,
}

impl Client {
    fn node(&self) -> Option<Node> {
        self.nodes.lock().expect("nodes").get(&self.target).cloned()
    }

    fn down<E: std::error::Error>(&self) -> RPCError<NodeId, BasicNode, E> {
        RPCError::Network(NetworkError::new(&std::io::Error::other(format!("node {} is down", self.target))))
    }
}

impl RaftNetworkFactory<ControllerRaft> for Network {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, _: &BasicNode) -> Client {
        Client { nodes: self.nodes.clone(), target }
    }
}

impl RaftNetwork<ControllerRaft> for Client {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<ControllerRaft>,
        _: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let Some(node) = self.node() else { return Err(self.down()) };
        node.append_entries(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<ControllerRaft>,
        _: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        let Some(node) = self.node() else { return Err(self.down()) };
        node.install_snapshot(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let Some(node) = self.node() else { return Err(self.down()) };
        node.vote(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn config() -> Arc<Config> {
    let config = Config {
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(10),
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        ..Config::default()
    };
    Arc::new(config.validate().expect("a valid config"))
}

async fn start(id: NodeId, dir: &std::path::Path, nodes: &Nodes) -> (Node, StateMachine) {
    let log = LogStore::open(dir).expect("log");
    let machine = StateMachine::open(dir).expect("state machine");
    let network = Network { nodes: nodes.clone() };
    let raft = Raft::new(id, config(), network, log, machine.clone()).await.expect("raft");
    nodes.lock().expect("nodes").insert(id, raft.clone());
    (raft, machine)
}

fn event(i: u64) -> Vec<ControllerEvent> {
    vec![ControllerEvent::ApplyBrokerId {
        cluster: "c".into(),
        broker_name: format!("broker-{i}"),
        address: format!("127.0.0.1:{}", 10000 + i),
        broker_id: 1,
        check_code: format!("127.0.0.1:{};1", 10000 + i),
    }]
}

/// Writes `data` through the leader of the moment (not `except`), trying again for up to 20 s while
/// there is none or it changes under the write (a busy machine can delay heartbeats past an election
/// timeout); returns the leader that took it.
async fn write(nodes: &Nodes, except: Option<NodeId>, data: Vec<ControllerEvent>) -> Node {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let any = running(nodes).into_iter().next();
        if let Some(node) = any
            && let Some(id) = node.current_leader().await
            && Some(id) != except
            && let Some(leader) = node_up(nodes, id)
            && leader.client_write(data.clone()).await.is_ok()
        {
            return leader;
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader took the write within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Node `id`, if it is up (the table is not held after).
fn node_up(nodes: &Nodes, id: NodeId) -> Option<Node> {
    nodes.lock().expect("nodes").get(&id).cloned()
}

/// The nodes up now (the table is not held meanwhile: the nodes' messages need it).
fn running(nodes: &Nodes) -> Vec<Node> {
    nodes.lock().expect("nodes").values().cloned().collect()
}

async fn applied(raft: &Node, index: u64) {
    raft.wait(Some(Duration::from_secs(10))).applied_index_at_least(Some(index), "applied").await.expect("applied");
}

/// The scenario runs on a task of its own, so that when it fails every node is still shut down before
/// the failure is reported (a runtime dropped with the nodes running does not end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_replicate_survive_a_leader_stop_and_a_restart() {
    let nodes: Nodes = Arc::default();
    let outcome = tokio::spawn(replicate_stop_and_restart(nodes.clone())).await;
    let running: Vec<Node> =
        std::mem::take(&mut *nodes.lock().unwrap_or_else(|p| p.into_inner())).into_values().collect();
    for node in running {
        let _ = node.shutdown().await;
    }
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn replicate_stop_and_restart(nodes: Nodes) {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("temp dir")).collect();
    let mut machines = Vec::new();
    for (id, dir) in dirs.iter().enumerate() {
        machines.push(start(id as NodeId, dir.path(), &nodes).await.1);
    }
    let members: BTreeMap<NodeId, BasicNode> = (0..3).map(|id| (id, BasicNode::default())).collect();
    let first = nodes.lock().expect("nodes")[&0].clone();
    first.initialize(members).await.expect("initialized");

    let mut leader_node = write(&nodes, None, event(0)).await;
    for i in 1..25 {
        leader_node = write(&nodes, None, event(i)).await;
    }
    let last = leader_node.metrics().borrow().last_log_index.expect("a log");
    for node in running(&nodes) {
        applied(&node, last).await;
    }
    for machine in &machines {
        assert_eq!((0..25).filter(|i| machine.applied().state.group(&format!("broker-{i}")).is_some()).count(), 25);
    }
    // Snapshots were taken and the log behind them purged.
    for node in running(&nodes) {
        node.wait(Some(Duration::from_secs(10)))
            .metrics(|m| m.snapshot.is_some_and(|s| s.index >= 10) && m.purged.is_some_and(|p| p.index >= 10), "purged")
            .await
            .expect("a snapshot taken and the log purged behind it");
    }
    for dir in &dirs {
        assert!(dir.path().join("raft-snapshot.json").exists());
    }

    // The leader stops: another is elected and takes writes.
    let old = leader_node.current_leader().await.expect("a leader");
    let stopped = nodes.lock().expect("nodes").remove(&old).expect("the leader is up");
    stopped.shutdown().await.expect("stopped");
    let mut next = write(&nodes, Some(old), event(25)).await;
    for i in 26..30 {
        next = write(&nodes, Some(old), event(i)).await;
    }
    assert_ne!(next.metrics().borrow().id, old, "written by another leader");

    // The old leader restarts from its files and catches up.
    let (restarted, machine) = start(old, dirs[old as usize].path(), &nodes).await;
    let last = next.metrics().borrow().last_log_index.expect("a log");
    applied(&restarted, last).await;
    let groups: BTreeSet<String> = (0..30).map(|i| format!("broker-{i}")).collect();
    assert!(groups.iter().all(|g| machine.applied().state.group(g).is_some()));
}
