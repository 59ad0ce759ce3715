//! The controller's port (this node's `controllerDLegerPeers` address, where Java's controller listens):
//! brokers', admins' and the other nodes' requests, one at a time on each connection.
//!
//! Bounds, for every connection whoever opens it: the connections `admission` takes; frames of at most
//! [`MAX_FRAME`]; a frame over [`SMALL`] is read only with room for it in the frame pool (the NameServer's
//! `largeFrameBufferBytes` pool, shared with its own port, or one of that size with
//! `--controller-only`; from the peers' addresses, a pool of [`PEER_FRAMES`] of their own), and must then
//! arrive within [`FRAME_TIMEOUT`]; a reply over [`SMALL`] is written only with room for it in the replies
//! pool (likewise `largeReplyBufferBytes`); a connection that starts no frame
//! within [`FIRST_FRAME`] of its accept, or none for [`IDLE`] after one, is closed (brokers beat every
//! second or two, the nodes every 300 ms), and so is one that does not take a reply within
//! [`WRITE_TIMEOUT`].

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

use super::admission::Admission;
use super::node::ControllerNode;
use crate::limits::budget::Pool;
use crate::limits::throttle::client_log;
use crate::protocol::codes::controller_request as code;
use crate::remoting::{FrameDecoder, RemotingCommand, SerializeType, decode_command};

pub const MAX_FRAME: usize = 8 << 20;
pub const SMALL: usize = 64 << 10;
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(20);
pub const FIRST_FRAME: Duration = Duration::from_secs(10);
pub const IDLE: Duration = Duration::from_secs(120);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the port's large frames and replies take their room.
#[derive(Clone)]
pub struct Pools {
    /// Frames over [`SMALL`] from any address but the peers' (the NameServer's `largeFrameBufferBytes`).
    pub frames: Pool,
    /// Frames over [`SMALL`] from the peers' addresses: strangers filling `frames` cannot hold up Raft.
    pub peer_frames: Pool,
    /// Replies over [`SMALL`] until written (the NameServer's `largeReplyBufferBytes`).
    pub replies: Pool,
}

/// What [`Pools::peer_frames`] holds: eight of the largest frames.
pub const PEER_FRAMES: usize = 8 * MAX_FRAME;

/// Accepts until the listener fails (which ends the controller, and so the server); dropped, it closes
/// every connection it accepted.
pub async fn serve(listener: TcpListener, node: Arc<ControllerNode>, pools: Pools) -> std::io::Result<()> {
    let admission = Arc::new(Admission::default());
    let next_id = AtomicU64::new(1);
    let mut served = tokio::task::JoinSet::new();
    loop {
        while served.try_join_next().is_some() {}
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors and the like: the next accept may work.
            Err(e) if e.kind() != std::io::ErrorKind::InvalidInput => {
                client_log!(warn, error = %e, "controller: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let from_peer = node.gate.is_peer_address(peer.ip());
        let admitted = match admission.admit(peer.ip(), from_peer) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                super::stats::ControllerStats::count(&node.stats.refused_connections);
                client_log!(warn, %peer, "controller: a connection refused: {refusal}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut pools = pools.clone();
        if from_peer {
            pools.frames = pools.peer_frames.clone();
        }
        let (node, conn) = (node.clone(), next_id.fetch_add(1, Ordering::Relaxed));
        served.spawn(async move {
            if let Err(e) = connection(stream, peer, &node, &pools, conn).await {
                tracing::debug!(%peer, error = %e, "controller: connection ended");
            }
            let gone = node.heartbeats.connection_closed(conn);
            if !gone.is_empty() {
                node.brokers_inactive(gone).await;
            }
            drop(admitted);
        });
    }
}

async fn connection(
    mut stream: TcpStream,
    from: std::net::SocketAddr,
    node: &ControllerNode,
    pools: &Pools,
    conn: u64,
) -> std::io::Result<()> {
    let mut decoder = FrameDecoder::new(MAX_FRAME);
    let mut silence = FIRST_FRAME;
    loop {
        let mut prefix = [0u8; 4];
        match tokio::time::timeout(silence, stream.read_exact(&mut prefix)).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(result) => result?,
        };
        let len = u32::from_be_bytes(prefix) as usize;
        if len + 4 > MAX_FRAME {
            return Err(std::io::Error::other(format!("a frame of {len} bytes, over {MAX_FRAME}")));
        }
        let _room = if len > SMALL { Some(pools.frames.reserve(len + 4).await) } else { None };
        let mut buf = BytesMut::with_capacity(len + 4);
        buf.extend_from_slice(&prefix);
        buf.resize(len + 4, 0);
        match tokio::time::timeout(FRAME_TIMEOUT, stream.read_exact(&mut buf[4..])).await {
            Err(_) => return Err(std::io::Error::other("a frame did not arrive in time")),
            Ok(result) => result?,
        };
        let frame = decoder.decode(&mut buf).map_err(|e| std::io::Error::other(e.to_string()))?;
        let Some(frame) = frame else { return Err(std::io::Error::other("an incomplete frame")) };
        let req = match decode_command(frame) {
            Ok(req) => req,
            Err(e) => return Err(std::io::Error::other(format!("a header that does not decode: {e}"))),
        };
        silence = IDLE;
        // A reply that may be large (GET_SYNC_STATE_DATA of many groups) is built by at most
        // LARGE_ANSWERS connections at once, each until its room in the replies pool is taken: a built reply
        // is always either one of those or charged to the pool until written.
        let building = match req.code {
            code::GET_SYNC_STATE_DATA => Some(node.large_answers.acquire().await.map_err(std::io::Error::other)?),
            _ => None,
        };
        let Some(mut resp) = answer(node, &req, from.ip(), conn).await else { continue };
        node.audit.record(Some(from), &req, &resp);
        if req.is_oneway() {
            continue;
        }
        resp.opaque = req.opaque;
        let mut out = BytesMut::new();
        resp.encode(SerializeType::Json, &mut out);
        drop(resp);
        let written = async {
            let _room = if out.len() > SMALL { Some(pools.replies.reserve(out.len()).await) } else { None };
            drop(building);
            stream.write_all(&out).await
        };
        match tokio::time::timeout(WRITE_TIMEOUT, written).await {
            Err(_) => return Err(std::io::Error::other("a reply not taken in time")),
            Ok(written) => written?,
        }
    }
}

async fn answer(node: &ControllerNode, req: &RemotingCommand, from: IpAddr, conn: u64) -> Option<RemotingCommand> {
    if req.is_response() {
        return None;
    }
    match super::network::serve(node, from, req).await {
        Some(Ok(resp)) => return Some(resp),
        Some(Err(refused)) => {
            super::stats::ControllerStats::count(&node.stats.refused_peer_frames);
            client_log!(warn, %from, code = req.code, error = %refused, "controller: Raft frame refused");
            return Some(crate::error::RequestError::from(refused).to_response(req.code));
        }
        None => {}
    }
    let answered =
        node.answer(req, conn, from).await.unwrap_or(Err(crate::error::RequestError::NotSupported(req.code)));
    Some(answered.unwrap_or_else(|e| {
        tracing::debug!(code = req.code, error = %e, "controller: request refused");
        e.to_response(req.code)
    }))
}
