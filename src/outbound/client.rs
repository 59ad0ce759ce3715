//! One connection this NameServer opens to another RocketMQ server: requests multiplexed on it by opaque
//! (as Java's `NettyRemotingClient` does), and one-way sends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use tokio_util::codec::Decoder;

use crate::remoting::command::FLAG_ONEWAY;
use crate::remoting::{FrameDecoder, RemotingCommand, SerializeType, decode_command};

/// Replies larger than this close the connection (a route body is kilobytes; Java's default frame limit).
const MAX_REPLY: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("connecting to {addr} timed out after {ms} ms")]
    ConnectTimeout { addr: String, ms: u128 },
    #[error("connecting to {addr} failed: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("sending to {addr} failed: {source}")]
    Send { addr: String, source: std::io::Error },
    #[error("no reply from {addr} within {ms} ms")]
    ReplyTimeout { addr: String, ms: u128 },
    #[error("the connection to {addr} closed before the reply")]
    Closed { addr: String },
    #[error("{addr} sent what is not a reply, and the connection was closed: {error}")]
    Undecodable { addr: String, error: String },
}

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

pub struct PeerConnection {
    addr: String,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    next_opaque: AtomicI32,
    closed: Arc<AtomicBool>,
    /// Why the reader closed the connection, when the peer sent what could not be decoded: the caller
    /// says so where it reports the failed request (each caller holds its own log to a rate).
    undecodable: Arc<std::sync::OnceLock<String>>,
    reader: tokio::task::JoinHandle<()>,
}

impl PeerConnection {
    /// Connects to `addr` (`host:port`) from the configuration (a controller peer, the product
    /// environment's NameServer), giving up after `timeout` (Java's `connectTimeoutMillis`).
    pub async fn connect(addr: &str, timeout: Duration) -> Result<PeerConnection, OutboundError> {
        PeerConnection::connect_with(addr, timeout, TcpStream::connect(addr)).await
    }

    /// Connects to `addr` (`host:port`) as a client chose it (a broker's address): its host name resolved
    /// within `resolve`'s bound.
    pub async fn connect_chosen(addr: &str, timeout: Duration) -> Result<PeerConnection, OutboundError> {
        let connect = async { TcpStream::connect(crate::outbound::resolve::resolve(addr).await?).await };
        PeerConnection::connect_with(addr, timeout, connect).await
    }

    async fn connect_with(
        addr: &str,
        timeout: Duration,
        connect: impl std::future::Future<Output = std::io::Result<TcpStream>>,
    ) -> Result<PeerConnection, OutboundError> {
        let stream = match tokio::time::timeout(timeout, connect).await {
            Err(_) => return Err(OutboundError::ConnectTimeout { addr: addr.to_string(), ms: timeout.as_millis() }),
            Ok(Err(source)) => return Err(OutboundError::Connect { addr: addr.to_string(), source }),
            Ok(Ok(stream)) => stream,
        };
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let undecodable = Arc::new(std::sync::OnceLock::new());
        let ends = Ends { closed: closed.clone(), undecodable: undecodable.clone() };
        let reader = tokio::spawn(read_replies(read, addr.to_string(), pending.clone(), ends));
        Ok(PeerConnection {
            addr: addr.to_string(),
            writer: tokio::sync::Mutex::new(write),
            pending,
            next_opaque: AtomicI32::new(1),
            closed,
            undecodable,
            reader,
        })
    }

    /// Whether the peer closed the connection or it failed; a closed one is not used again.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends `cmd` and waits for its reply, at most `timeout` in all. However it ends (a reply, a timeout,
    /// or the caller dropping it), its entry among the pending requests goes with it.
    pub async fn request(&self, mut cmd: RemotingCommand, timeout: Duration) -> Result<RemotingCommand, OutboundError> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        cmd.opaque = opaque;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(opaque, tx);
        let _entry = PendingEntry { pending: &self.pending, opaque };
        let exchange = async {
            self.send(&cmd).await?;
            rx.await.map_err(|_| match self.undecodable.get() {
                Some(error) => OutboundError::Undecodable { addr: self.addr.clone(), error: error.clone() },
                None => OutboundError::Closed { addr: self.addr.clone() },
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(OutboundError::ReplyTimeout { addr: self.addr.clone(), ms: timeout.as_millis() }),
        }
    }

    /// Requests waiting for their reply (for tests of what a timeout leaves behind).
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Sends `cmd` one-way (no reply is expected), waiting at most `timeout` for the write.
    pub async fn oneway(&self, mut cmd: RemotingCommand, timeout: Duration) -> Result<(), OutboundError> {
        cmd.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        cmd.flag |= FLAG_ONEWAY;
        match tokio::time::timeout(timeout, self.send(&cmd)).await {
            Ok(result) => result,
            Err(_) => Err(OutboundError::ReplyTimeout { addr: self.addr.clone(), ms: timeout.as_millis() }),
        }
    }

    async fn send(&self, cmd: &RemotingCommand) -> Result<(), OutboundError> {
        let mut frame = BytesMut::new();
        cmd.encode(SerializeType::Json, &mut frame);
        let mut writer = self.writer.lock().await;
        let written = async {
            writer.write_all(&frame).await?;
            writer.flush().await
        };
        written.await.map_err(|source| {
            self.closed.store(true, Ordering::Release);
            OutboundError::Send { addr: self.addr.clone(), source }
        })
    }
}

/// A request's place among the pending ones, removed when the request ends, or is dropped.
struct PendingEntry<'a> {
    pending: &'a Pending,
    opaque: i32,
}

impl Drop for PendingEntry<'_> {
    fn drop(&mut self) {
        lock(self.pending).remove(&self.opaque);
    }
}

impl Drop for PeerConnection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<i32, oneshot::Sender<RemotingCommand>>> {
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How the reader tells the connection that it ended, and why when the peer sent garbage.
struct Ends {
    closed: Arc<AtomicBool>,
    undecodable: Arc<std::sync::OnceLock<String>>,
}

/// Hands each reply to the request waiting for its opaque, until the connection ends; then every waiting
/// request learns that it closed (and why, when what the peer sent could not be decoded: logged here at
/// debug only, as a peer could otherwise make a line of every request).
async fn read_replies(mut read: OwnedReadHalf, addr: String, pending: Pending, ends: Ends) {
    let mut decoder = FrameDecoder::new(MAX_REPLY);
    let mut buf = BytesMut::with_capacity(4096);
    'read: loop {
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => match decode_command(frame) {
                    Ok(reply) if reply.is_response() => {
                        if let Some(waiting) = lock(&pending).remove(&reply.opaque) {
                            let _ = waiting.send(reply);
                        }
                    }
                    Ok(_) => tracing::debug!(peer = %addr, "request from a peer ignored"),
                    Err(e) => {
                        tracing::debug!(peer = %addr, error = %e, "undecodable reply, closing the connection");
                        let _ = ends.undecodable.set(crate::error::shown(&e.to_string(), 256).to_string());
                        break 'read;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(peer = %addr, error = %e, "undecodable frame, closing the connection");
                    let _ = ends.undecodable.set(crate::error::shown(&e.to_string(), 256).to_string());
                    break 'read;
                }
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    ends.closed.store(true, Ordering::Release);
    lock(&pending).clear();
}
