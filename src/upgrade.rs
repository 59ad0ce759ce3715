//! Zero-downtime upgrade: a new rocketns process takes the listening sockets over from the running one
//! (`upgradeSocketPath`, `rocketns --take-over`).
//!
//! The sockets themselves are handed over (SCM_RIGHTS on a Unix socket), not re-bound with SO_REUSEPORT:
//! with SO_REUSEPORT each process has an accept queue of its own, and the connections waiting in the old
//! one's when it closes are reset, refused from the client's side. A handed-over socket keeps its one
//! queue: connections made while neither process accepts wait in it, and the new process accepts them.
//!
//! The exchange: the new process connects and asks; the old one stops taking changes its successor would
//! not see, writes the route file a last time, and sends the remoting socket (and the metrics socket, when
//! `metricsPort` is set); the new one then loads the KV store and that route file, and serves. The old one
//! stops accepting, tells its clients to go (GO_AWAY), drains its connections as in a graceful shutdown,
//! and exits.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;

use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use tokio::net::{UnixListener, UnixStream};

/// What the new process sends to ask for the sockets.
const ASK: &[u8] = b"rocketns take-over 1\n";
/// The longest the new process waits for the sockets (the old one writes its route file first).
const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("--take-over needs upgradeSocketPath in the config")]
    NoSocketPath,
    #[error("no running rocketns to take over from at {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("the take-over from {path} failed: {reason}")]
    Exchange { path: String, reason: String },
    #[error("cannot listen for upgrades on {path}: {source}")]
    Listen { path: String, source: std::io::Error },
}

/// The listening sockets a server hands over: the remoting port, and the metrics port if any.
pub struct Sockets {
    pub remoting: OwnedFd,
    pub metrics: Option<OwnedFd>,
}

/// Where a running server waits for its successor.
pub struct UpgradeListener {
    listener: UnixListener,
}

impl UpgradeListener {
    /// Listens at `path`, replacing what is there: a socket file left by a process that has stopped, or by
    /// the one being taken over (which no longer needs it).
    pub fn bind(path: &str) -> Result<Self, UpgradeError> {
        let failed = |source| UpgradeError::Listen { path: path.to_string(), source };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
        Ok(UpgradeListener { listener: UnixListener::bind(path).map_err(failed)? })
    }

    /// Waits for a successor that asks for the sockets (anything else that connects is hung up on).
    /// Cancel-safe.
    pub async fn successor(&self) -> Successor {
        loop {
            let Ok((mut stream, _)) = self.listener.accept().await else { continue };
            let mut asked = [0u8; ASK.len()];
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                use tokio::io::AsyncReadExt as _;
                stream.read_exact(&mut asked).await
            });
            match read.await {
                Ok(Ok(_)) if asked == ASK => return Successor { stream },
                _ => tracing::warn!("a connection to the upgrade socket did not ask for a take-over, ignored"),
            }
        }
    }
}

/// A new process waiting for the sockets.
pub struct Successor {
    stream: UnixStream,
}

impl Successor {
    /// Sends the sockets. The caller stops accepting on them afterwards.
    pub async fn hand_over(self, remoting: BorrowedFd<'_>, metrics: Option<BorrowedFd<'_>>) -> std::io::Result<()> {
        let stream = self.stream.into_std()?;
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut fds = vec![remoting];
        fds.extend(metrics);
        let what: &[u8] = if fds.len() == 2 { b"remoting+metrics\n" } else { b"remoting\n" };
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(std::io::Error::other("no room for the sockets in the message"));
        }
        rustix::net::sendmsg(&stream, &[IoSlice::new(what)], &mut control, SendFlags::empty())?;
        Ok(())
    }
}

/// In the new process: asks the process listening at `path` for its sockets, and waits for them.
pub fn take_over(path: &str) -> Result<Sockets, UpgradeError> {
    if path.is_empty() {
        return Err(UpgradeError::NoSocketPath);
    }
    let stream = StdUnixStream::connect(path).map_err(|source| UpgradeError::Connect { path: path.into(), source })?;
    receive(&stream).map_err(|reason| UpgradeError::Exchange { path: path.into(), reason })
}

fn receive(stream: &StdUnixStream) -> Result<Sockets, String> {
    use std::io::Write as _;
    stream.set_read_timeout(Some(WAIT)).map_err(|e| e.to_string())?;
    (&*stream).write_all(ASK).map_err(|e| format!("cannot ask: {e}"))?;
    let mut text = [0u8; 64];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received =
        rustix::net::recvmsg(stream.as_fd(), &mut [IoSliceMut::new(&mut text)], &mut control, RecvFlags::CMSG_CLOEXEC)
            .map_err(|e| format!("no answer: {e}"))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    let what = String::from_utf8_lossy(&text[..received.bytes]).trim().to_string();
    let expected = match what.as_str() {
        "remoting" => 1,
        "remoting+metrics" => 2,
        "" => return Err("the running process closed the upgrade socket without sending its sockets".into()),
        other => return Err(format!("unexpected answer {other:?}")),
    };
    if fds.len() != expected {
        return Err(format!("{} sockets received, {expected} announced", fds.len()));
    }
    let mut fds = fds.into_iter();
    let remoting = fds.next().ok_or("no remoting socket")?;
    Ok(Sockets { remoting, metrics: fds.next() })
}

/// A listening socket received from the old process, for tokio.
pub fn tcp_listener(fd: OwnedFd) -> std::io::Result<tokio::net::TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

