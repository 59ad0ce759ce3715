//! openraft's RPCs between controller nodes, carried as RocketMQ remoting requests (rocketns's own codes
//! 60001-60003, JSON bodies) on the nodes' `controllerDLegerPeers` addresses, beside the brokers'
//! requests. Each node keeps one connection to each other node, opened again when it fails.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::raft::{ControllerRaft, NodeId};
use crate::outbound::client::PeerConnection;
use crate::protocol::codes::{controller_request as code, response};
use crate::remoting::{ExtFields, RemotingCommand};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone, Default)]
pub struct PeerNetwork;

pub struct PeerClient {
    target: NodeId,
    addr: String,
    connection: Option<Arc<PeerConnection>>,
}

impl RaftNetworkFactory<ControllerRaft> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient { target, addr: node.addr.clone(), connection: None }
    }
}

type Failed<E> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl PeerClient {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &mut self,
        request_code: i32,
        rpc: &Req,
        option: &RPCOption,
    ) -> Result<Resp, Failed<E>> {
        let connection = match &self.connection {
            Some(c) if !c.is_closed() => c.clone(),
            _ => {
                let c = PeerConnection::connect(&self.addr, CONNECT_TIMEOUT)
                    .await
                    .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
                let c = Arc::new(c);
                self.connection = Some(c.clone());
                c
            }
        };
        let mut request = RemotingCommand::request(request_code, ExtFields::new());
        request.body = Bytes::from(serde_json::to_vec(rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?);
        let reply = connection.request(request, option.hard_ttl()).await.map_err(|e| {
            self.connection = None;
            RPCError::Network(NetworkError::new(&e))
        })?;
        if reply.code != response::SUCCESS {
            let e = std::io::Error::other(format!("node {} refused: {:?}", self.target, reply.remark));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let answered: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&reply.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
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

/// Serves a Raft RPC from another node: `None` when `req` is not one.
pub async fn serve(raft: &Raft<ControllerRaft>, req: &RemotingCommand) -> Option<RemotingCommand> {
    let body = match req.code {
        code::RAFT_APPEND_ENTRIES => answer(&req.body, |rpc| raft.append_entries(rpc)).await,
        code::RAFT_VOTE => answer(&req.body, |rpc| raft.vote(rpc)).await,
        code::RAFT_INSTALL_SNAPSHOT => answer(&req.body, |rpc| raft.install_snapshot(rpc)).await,
        _ => return None,
    };
    Some(match body {
        Ok(body) => {
            let mut resp = RemotingCommand::response(response::SUCCESS, None);
            resp.body = Bytes::from(body);
            resp
        }
        Err(e) => RemotingCommand::response(response::SYSTEM_ERROR, Some(e)),
    })
}

async fn answer<Req, Resp, E, F>(body: &[u8], handle: impl FnOnce(Req) -> F) -> Result<Vec<u8>, String>
where
    Req: DeserializeOwned,
    Resp: Serialize,
    E: Serialize,
    F: std::future::Future<Output = Result<Resp, E>>,
{
    let rpc: Req = serde_json::from_slice(body).map_err(|e| format!("a Raft request that does not parse: {e}"))?;
    let answered = handle(rpc).await;
    serde_json::to_vec(&answered).map_err(|e| e.to_string())
}
