//! openraft's RPCs between controller nodes, carried as RocketMQ remoting requests (rocketns's own codes
//! 60001-60003, JSON bodies) on the nodes' `controllerDLegerPeers` addresses, beside the brokers'
//! requests, through the [`PeerGate`]. Each node keeps one connection to each other node, shared by
//! every client openraft makes (it makes one for each heartbeat round and election), opened again only
//! when it fails.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::Snapshot;
use openraft::{BasicNode, Vote};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::gate::{self, PeerGate, Refused};
use super::node::ControllerNode;
use super::raft::{ControllerRaft, NodeId};
use super::settings::Peer;
use crate::outbound::client::PeerConnection;
use crate::protocol::codes::{controller_request as code, response};
use crate::remoting::{ExtFields, RemotingCommand};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The connection to one other node, opened by whichever RPC needs it first.
type Slot = Arc<tokio::sync::Mutex<Option<Arc<PeerConnection>>>>;

/// The connections to the other nodes, and what signs the frames sent on them.
#[derive(Clone)]
pub struct PeerNetwork {
    gate: Arc<PeerGate>,
    peers: Arc<Vec<Peer>>,
    slots: Arc<Mutex<HashMap<NodeId, Slot>>>,
}

impl PeerNetwork {
    pub fn new(gate: Arc<PeerGate>, peers: Vec<Peer>) -> PeerNetwork {
        PeerNetwork { gate, peers: Arc::new(peers), slots: Arc::default() }
    }
}

pub struct PeerClient {
    target: NodeId,
    /// The target's DLedger id, which its frames are signed for.
    target_id: String,
    addr: String,
    gate: Arc<PeerGate>,
    slot: Slot,
}

impl RaftNetworkFactory<ControllerRaft> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        let slot =
            self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).entry(target).or_default().clone();
        let target_id = self.peers.get(target as usize).map(|p| p.id.clone()).unwrap_or_default();
        PeerClient { target, target_id, addr: node.addr.clone(), gate: self.gate.clone(), slot }
    }
}

type Failed<E> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

fn network_error<E>(e: &(impl std::error::Error + 'static)) -> Failed<E>
where
    E: std::error::Error,
{
    RPCError::Network(NetworkError::new(e))
}

impl PeerClient {
    /// The shared connection, opened if there is none or it failed.
    async fn connection(&self) -> Result<Arc<PeerConnection>, std::io::Error> {
        let mut slot = self.slot.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(PeerConnection::connect(&self.addr, CONNECT_TIMEOUT).await.map_err(std::io::Error::other)?);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// A request on `connection` failed (no reply in time, or it broke): the next RPC opens a new one. A
    /// peer gone without closing (its host down, a link cut) leaves a connection that looks open and answers
    /// nothing until TCP gives up, minutes later.
    async fn forget(&self, connection: &Arc<PeerConnection>) {
        let mut slot = self.slot.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
            *slot = None;
        }
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &mut self,
        request_code: i32,
        rpc: &Req,
        option: &RPCOption,
    ) -> Result<Resp, Failed<E>> {
        let connection = self.connection().await.map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let mut request = RemotingCommand::request(request_code, ExtFields::new());
        request.body = Bytes::from(serde_json::to_vec(rpc).map_err(|e| network_error(&e))?);
        self.gate.sign_request(&self.target_id, &mut request);
        let mac = gate::request_mac(&request).map(str::to_string);
        let reply = match connection.request(request, option.hard_ttl()).await {
            Ok(reply) => reply,
            Err(e) => {
                self.forget(&connection).await;
                return Err(network_error(&e));
            }
        };
        self.gate.check_response(mac.as_deref(), &reply).map_err(|e| network_error(&e))?;
        if reply.code != response::SUCCESS {
            let e = std::io::Error::other(format!("node {} refused: {:?}", self.target, reply.remark));
            return Err(network_error(&e));
        }
        let answered: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&reply.body).map_err(|e| network_error(&e))?;
        answered.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<ControllerRaft> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<ControllerRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, Failed<openraft::error::Infallible>> {
        self.call(code::RAFT_APPEND_ENTRIES, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<ControllerRaft>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, Failed<InstallSnapshotError>> {
        self.call(code::RAFT_INSTALL_SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, Failed<openraft::error::Infallible>> {
        self.call(code::RAFT_VOTE, &rpc, &option).await
    }
}

/// Serves a Raft RPC from another node to `node`, which came from `from`: `None` when `req` is not one. A
/// frame the gate refuses is answered NO_PERMISSION, and openraft never sees it.
pub async fn serve(
    node: &ControllerNode,
    from: IpAddr,
    req: &RemotingCommand,
) -> Option<Result<RemotingCommand, Refused>> {
    if !matches!(req.code, code::RAFT_APPEND_ENTRIES | code::RAFT_VOTE | code::RAFT_INSTALL_SNAPSHOT) {
        return None;
    }
    let (raft, gate) = (&node.raft, &node.gate);
    if let Err(refused) = gate.check_request(&node.settings.me().id, from, req) {
        return Some(Err(refused));
    }
    let (term, vote, purged, applied) = {
        let m = raft.metrics();
        let m = m.borrow();
        (m.current_term, m.vote, m.purged.map_or(0, |p| p.index), m.last_applied.map(|a| a.index))
    };
    let body = match req.code {
        code::RAFT_APPEND_ENTRIES => {
            let log_bytes = node.stats.log_bytes.load(std::sync::atomic::Ordering::Relaxed);
            let grown = log_bytes.saturating_add(req.body.len() as u64);
            let check = |rpc: &AppendEntriesRequest<ControllerRaft>| appends(rpc, term, (purged, grown));
            let handle = |rpc: AppendEntriesRequest<ControllerRaft>, ()| async move {
                keeps_committed(&rpc, applied, &node.log).await?;
                Ok(raft.append_entries(rpc).await)
            };
            answer(&req.body, check, handle).await
        }
        code::RAFT_VOTE => {
            let check = |rpc: &VoteRequest<NodeId>| gate::check_term(rpc.vote.leader_id.term, term);
            answer(&req.body, check, |rpc, ()| async { Ok(raft.vote(rpc).await) }).await
        }
        _ => {
            let check = |rpc: &InstallSnapshotRequest<ControllerRaft>| chunk(rpc, (term, vote), &node.arriving);
            answer(&req.body, check, |rpc, whole| install(raft, rpc, whole, vote)).await
        }
    };
    let mut resp = match body {
        Ok(Ok(body)) => {
            let mut resp = RemotingCommand::response(response::SUCCESS, None);
            resp.body = Bytes::from(body);
            resp
        }
        Ok(Err(refused)) => return Some(Err(refused)),
        Err(e) => RemotingCommand::response(response::SYSTEM_ERROR, Some(e)),
    };
    if let Some(mac) = gate::request_mac(req) {
        gate.sign_response(mac, &mut resp);
    }
    Some(Ok(resp))
}

/// An AppendEntries a node may take: its term and its entries' terms can follow ours, its entries follow
/// one another, and it leaves no more than the bounds past the last purge, in entries and in the bytes
/// of the log file (`grown`: as the log would be with the whole frame in it).
fn appends(rpc: &AppendEntriesRequest<ControllerRaft>, term: u64, (purged, grown): (u64, u64)) -> Result<(), Refused> {
    if !rpc.entries.is_empty() && grown > gate::MAX_LOG_BYTES {
        return Err(Refused::LogFull);
    }
    let asked = rpc.vote.leader_id.term;
    gate::check_term(asked, term)?;
    if let Some(e) = rpc.entries.iter().find(|e| e.log_id.leader_id.term > asked) {
        return Err(Refused::Term { asked: e.log_id.leader_id.term, ours: term });
    }
    // A gap would leave openraft a log it cannot read back: it stops the node's Raft.
    gate::check_consecutive(rpc.prev_log_id.map(|p| p.index), rpc.entries.iter().map(|e| e.log_id.index))?;
    rpc.entries.last().map_or(Ok(()), |last| gate::check_unpurged(last.log_id.index, purged))
}

/// A snapshot chunk a node may take; with the last, the whole snapshot, checked.
fn chunk(
    rpc: &InstallSnapshotRequest<ControllerRaft>,
    (term, vote): (u64, Vote<NodeId>),
    arriving: &Mutex<Arriving>,
) -> Result<Option<Vec<u8>>, Refused> {
    gate::check_term(rpc.vote.leader_id.term, term)?;
    gate::check_chunk(rpc.offset, rpc.data.len())?;
    // From a leader deposed since (openraft's receiver answers it with the node's vote, and keeps what
    // arrived): it must not cut the current leader's snapshot short.
    if rpc.vote.partial_cmp(&vote).is_none_or(std::cmp::Ordering::is_lt) {
        return Ok(None);
    }
    arriving.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(rpc)
}

/// Installs a whole snapshot, its bytes exactly those checked; a chunk before the last is only answered
/// with the node's vote, as openraft's own receiver answers it. openraft's receiver is not used: it writes
/// a chunk sent again over what it covered and keeps what lay beyond, where this check had cut it, so the
/// two had read different bytes (and a snapshot that did not read as one stopped the node for good).
async fn install(
    raft: &openraft::Raft<ControllerRaft>,
    rpc: InstallSnapshotRequest<ControllerRaft>,
    whole: Option<Vec<u8>>,
    vote: Vote<NodeId>,
) -> Result<Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>, Refused> {
    let Some(data) = whole else {
        return Ok(Ok(InstallSnapshotResponse { vote }));
    };
    // Up to 72 MiB parsed and counted: on a blocking thread, not on one of the controller's two workers.
    let (meta, term) = (rpc.meta.clone(), rpc.vote.leader_id.term);
    let checked = tokio::task::spawn_blocking(move || super::machine::installable(&data, &meta, term).then_some(data));
    let Ok(Some(data)) = checked.await else { return Err(Refused::BadSnapshot) };
    let snapshot = Snapshot { meta: rpc.meta, snapshot: Box::new(std::io::Cursor::new(data)) };
    Ok(raft.install_full_snapshot(rpc.vote, snapshot).await.map(Into::into).map_err(RaftError::Fatal))
}

/// The snapshot arriving, chunk by chunk, checked whole before it is installed: a garbled one would stop
/// the node's Raft for good. At most one at a time, of at most MAX_SNAPSHOT.
#[derive(Default)]
pub struct Arriving {
    id: String,
    data: Vec<u8>,
}

impl Arriving {
    /// Takes a chunk; with the last, returns the whole snapshot, to be checked (`machine::installable`).
    fn take(&mut self, rpc: &InstallSnapshotRequest<ControllerRaft>) -> Result<Option<Vec<u8>>, Refused> {
        if rpc.offset == 0 {
            self.id = rpc.meta.snapshot_id.clone();
            self.data.clear();
        }
        // A chunk sent again (its answer was lost) replaces what it covered, and what lay beyond.
        let offset = usize::try_from(rpc.offset).map_err(|_| Refused::BadSnapshot)?;
        if self.id != rpc.meta.snapshot_id || offset > self.data.len() {
            return Err(Refused::BadSnapshot);
        }
        self.data.truncate(offset);
        self.data.extend_from_slice(&rpc.data);
        if !rpc.done {
            return Ok(None);
        }
        self.id.clear();
        Ok(Some(std::mem::take(&mut self.data)))
    }
}

/// Parses the RPC, checks it, hands it to openraft (the handler may still refuse it, after what it reads
/// of the log) and writes its answer; the outer error is a body that does not parse or an answer that does
/// not serialise.
async fn answer<Req, Checked, Resp, E, F>(
    body: &[u8],
    check: impl FnOnce(&Req) -> Result<Checked, Refused>,
    handle: impl FnOnce(Req, Checked) -> F,
) -> Result<Result<Vec<u8>, Refused>, String>
where
    Req: DeserializeOwned,
    Resp: Serialize,
    E: Serialize,
    F: std::future::Future<Output = Result<Result<Resp, E>, Refused>>,
{
    let rpc: Req = serde_json::from_slice(body).map_err(|e| format!("a Raft request that does not parse: {e}"))?;
    let checked = match check(&rpc) {
        Ok(checked) => checked,
        Err(refused) => return Ok(Err(refused)),
    };
    let answered = match handle(rpc, checked).await {
        Ok(answered) => answered,
        Err(refused) => return Ok(Err(refused)),
    };
    serde_json::to_vec(&answered).map(Ok).map_err(|e| e.to_string())
}

/// Whether what an append names at or below the last committed index (its previous log id, its entries)
/// is what this node's log holds there, or what its purge point allows: a leader never sends other entries
/// there, and openraft takes every entry up to its committed index as the node's own (asked to replace
/// one, it panics in a debug build, and in a release build skips it as present). The committed index is
/// the store's (`save_committed`), or the applied one from the metrics if later.
async fn keeps_committed(
    rpc: &AppendEntriesRequest<ControllerRaft>,
    applied: Option<u64>,
    log: &super::log_store::LogStore,
) -> Result<(), Refused> {
    let named: Vec<(u64, u64)> = rpc
        .prev_log_id
        .iter()
        .chain(rpc.entries.iter().map(|e| &e.log_id))
        .map(|id| (id.index, id.leader_id.term))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    let first = named[0].0;
    let view = log.terms_at(named.iter().map(|(index, _)| *index).collect()).await.ok_or(Refused::Rewrite(first))?;
    let Some(committed) = view.committed.map(|c| c.index).max(applied) else { return Ok(()) };
    for ((index, term), local) in named.into_iter().zip(view.terms) {
        let kept = match view.purged {
            _ if index > committed => true,
            Some(p) if index < p.index => term <= p.leader_id.term,
            Some(p) if index == p.index => term == p.leader_id.term,
            _ => local.is_none_or(|local| local == term),
        };
        if !kept {
            return Err(Refused::Rewrite(index));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    /// An append is refused once the log file would pass MAX_LOG_BYTES (a heartbeat, with no entries,
    /// never is), and so are entries that do not follow one another, or whose term is above the leader's.
    #[test]
    fn appends_have_bounds_in_bytes_and_order() {
        let entry = |index: u64, term: u64| super::super::raft::Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 0), index),
            payload: EntryPayload::Blank,
        };
        let rpc = |entries: Vec<super::super::raft::Entry>| AppendEntriesRequest::<ControllerRaft> {
            vote: Vote::new_committed(2, 0),
            prev_log_id: None,
            entries,
            leader_commit: None,
        };
        let full = gate::MAX_LOG_BYTES + 1;
        assert_eq!(appends(&rpc(vec![entry(0, 1), entry(1, 2)]), 2, (0, gate::MAX_LOG_BYTES)), Ok(()));
        assert_eq!(appends(&rpc(vec![entry(0, 1)]), 2, (0, full)), Err(Refused::LogFull));
        assert_eq!(appends(&rpc(Vec::new()), 2, (0, full)), Ok(()));
        assert_eq!(appends(&rpc(vec![entry(0, 1), entry(2, 1)]), 2, (0, 1000)), Err(Refused::Gap));
        assert!(matches!(appends(&rpc(vec![entry(0, 3)]), 2, (0, 1000)), Err(Refused::Term { asked: 3, .. })));
    }

    fn blank(index: u64, term: u64) -> super::super::raft::Entry {
        super::super::raft::Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 0), index),
            payload: EntryPayload::Blank,
        }
    }

    /// What an append names up to the committed index must be the node's own (the store's committed index,
    /// past the applied one); past it, a leader may replace what the node holds.
    #[tokio::test]
    async fn appends_that_rewrite_committed_entries_are_refused() {
        use openraft::storage::RaftLogStorage;
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<_> = (0..5).map(|i| blank(i, 1)).collect();
        super::super::log_store::write_log(dir.path(), &entries).unwrap();
        let mut log = super::super::log_store::LogStore::open(dir.path()).unwrap();
        let rpc = |prev: Option<(u64, u64)>, entries: Vec<super::super::raft::Entry>| AppendEntriesRequest::<
            ControllerRaft,
        > {
            vote: Vote::new_committed(2, 0),
            prev_log_id: prev.map(|(term, index)| LogId::new(CommittedLeaderId::new(term, 0), index)),
            entries,
            leader_commit: None,
        };
        assert_eq!(keeps_committed(&rpc(None, vec![blank(0, 2)]), None, &log).await, Ok(()), "nothing committed yet");
        log.save_committed(Some(LogId::new(CommittedLeaderId::new(1, 0), 3))).await.unwrap();
        let applied = Some(1);
        assert_eq!(
            keeps_committed(&rpc(Some((1, 1)), vec![blank(2, 2)]), applied, &log).await,
            Err(Refused::Rewrite(2))
        );
        assert_eq!(keeps_committed(&rpc(Some((2, 3)), Vec::new()), applied, &log).await, Err(Refused::Rewrite(3)));
        assert_eq!(keeps_committed(&rpc(Some((1, 3)), vec![blank(4, 2)]), applied, &log).await, Ok(()));
        assert_eq!(keeps_committed(&rpc(Some((1, 2)), vec![blank(3, 1), blank(4, 2)]), applied, &log).await, Ok(()));
    }

    /// A peer that takes connections and never answers (its process hung, its host gone without a close):
    /// a request that gets no reply gives its connection up, and the next one connects again.
    #[tokio::test]
    async fn a_connection_that_answered_nothing_is_not_used_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = accepted.clone();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(stream);
            }
        });
        let peers = vec![Peer { id: "n1".into(), addr: addr.clone() }];
        let mut network = PeerNetwork::new(Arc::new(PeerGate::new(&peers, None)), peers);
        let mut client = network.new_client(0, &BasicNode::new(&addr)).await;
        let option = RPCOption::new(Duration::from_millis(200));
        for _ in 0..2 {
            assert!(client.vote(VoteRequest::new(Vote::new(1, 0), None), option.clone()).await.is_err());
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2, "a new connection after the silence");
        silent.abort();
    }
}
