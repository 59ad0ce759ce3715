//! Zero-downtime upgrade: a new rocketns process takes the listening sockets over from the running one
//! (`upgradeSocketPath`, `rocketns --take-over`).
//!
//! The sockets themselves are handed over (SCM_RIGHTS on a Unix socket), not re-bound with SO_REUSEPORT:
//! with SO_REUSEPORT each process has an accept queue of its own, and the connections waiting in the old
//! one's when it closes are reset, refused from the client's side. A handed-over socket keeps its one
//! queue: a connection waits in it until one of the processes accepts it.
//!
//! The exchange: the new process connects and asks; the old one stops taking changes its successor would
//! not see (audited requests are refused), writes the route file a last time, and sends the remoting
//! socket (and the metrics socket, when `metricsPort` is set), still accepting on them itself. The new one
//! loads the KV store and that route file, and says it serves; only then does the old one stop accepting,
//! tell its clients to go (GO_AWAY), drain its connections as in a graceful shutdown, and exit. A new
//! process that fails to start (a bad binary, an unreadable KV file) never says so: the old one takes
//! changes again and serves on.

use std::io::{IoSlice, IoSliceMut, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};
use tokio::net::{TcpListener, UnixListener};

use crate::state::ServerState;

/// What the new process sends to ask for the sockets, and once it serves.
const ASK: &[u8] = b"rocketns take-over 1\n";
const SERVING: &[u8] = b"serving\n";
/// The longest the new process waits for the sockets (the old one writes its route file first), and the
/// old one for the new one to serve (it loads the KV store and the routes).
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
        let listener = UnixListener::bind(path).map_err(failed)?;
        // Whoever may connect may take the port over: the owner alone (SECURITY.md).
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).map_err(failed)?;
        Ok(UpgradeListener { listener })
    }

    /// Waits for a successor that asks for the sockets (anything else that connects is hung up on).
    /// Cancel-safe.
    async fn successor(&self) -> tokio::net::UnixStream {
        loop {
            let Ok((mut stream, _)) = self.listener.accept().await else { continue };
            let mut asked = [0u8; ASK.len()];
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                use tokio::io::AsyncReadExt as _;
                stream.read_exact(&mut asked).await
            });
            match read.await {
                Ok(Ok(_)) if asked == ASK => return stream,
                _ => tracing::warn!("a connection to the upgrade socket did not ask for a take-over, ignored"),
            }
        }
    }
}

/// A successor that has the sockets and is starting; `serving` tells when it serves.
pub struct HandedOver {
    stream: StdUnixStream,
}

impl HandedOver {
    /// Waits until the successor says it serves; an error when it closes the socket first (it failed to
    /// start) or takes longer than a minute.
    pub async fn serving(self) -> std::io::Result<()> {
        let stream = self.stream;
        tokio::task::spawn_blocking(move || {
            stream.set_read_timeout(Some(WAIT))?;
            let mut said = [0u8; SERVING.len()];
            (&stream).read_exact(&mut said)?;
            if said == SERVING { Ok(()) } else { Err(std::io::Error::other("the successor said something else")) }
        })
        .await
        .map_err(std::io::Error::other)?
    }
}

/// A new process asking for the sockets.
pub struct Successor {
    stream: tokio::net::UnixStream,
}

/// The next successor asking for the sockets; never, without `upgradeSocketPath`. Cancel-safe.
pub async fn next_successor(upgrade: Option<&UpgradeListener>) -> Successor {
    match upgrade {
        Some(upgrade) => Successor { stream: upgrade.successor().await },
        None => std::future::pending().await,
    }
}

/// Hands the sockets to a successor: from here on this process takes no change the successor would not
/// see (audited requests are refused), writes the route file a last time (the successor reads it next),
/// and sends the sockets, accepting on them still. If the sending fails, changes are taken again and the
/// error is returned. Not cancel-safe: awaited to the end once begun.
pub async fn hand_over(
    successor: Successor,
    state: &ServerState,
    listener: &TcpListener,
    metrics_socket: Option<&OwnedFd>,
) -> std::io::Result<HandedOver> {
    let stream = successor.stream.into_std()?;
    tracing::info!("a new process asks for the sockets: handing over");
    state.lifecycle.set_handed_over(true);
    let config = state.config.load_full();
    if config.warm_restart {
        crate::service::housekeeping::save_routes(&state.routes, &config.route_snapshot_file(), &state.metrics).await;
    }
    let remoting = listener.as_fd().try_clone_to_owned();
    let metrics = metrics_socket.map(OwnedFd::try_clone).transpose();
    let sent = match (remoting, metrics) {
        (Ok(remoting), Ok(metrics)) => {
            tokio::task::spawn_blocking(move || send(&stream, &remoting, metrics.as_ref()).map(|()| stream))
                .await
                .map_err(std::io::Error::other)
                .and_then(|sent| sent)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    match sent {
        Ok(stream) => Ok(HandedOver { stream }),
        Err(e) => {
            resume(state);
            Err(e)
        }
    }
}

/// After a take-over that did not complete: changes are taken again.
pub fn resume(state: &ServerState) {
    state.lifecycle.set_handed_over(false);
}

fn send(stream: &StdUnixStream, remoting: &OwnedFd, metrics: Option<&OwnedFd>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut fds: Vec<BorrowedFd<'_>> = vec![remoting.as_fd()];
    fds.extend(metrics.map(|m| m.as_fd()));
    let what: &[u8] = if fds.len() == 2 { b"remoting+metrics\n" } else { b"remoting\n" };
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("no room for the sockets in the message"));
    }
    rustix::net::sendmsg(stream, &[IoSlice::new(what)], &mut control, SendFlags::empty())?;
    Ok(())
}

/// The listening sockets taken over, and the process they came from.
pub struct TakenOver {
    pub remoting: TcpListener,
    pub metrics: Option<TcpListener>,
    pub predecessor: Predecessor,
}

/// The process the sockets came from, waiting for word that its successor serves.
pub struct Predecessor {
    stream: StdUnixStream,
}

impl Predecessor {
    /// Tells the old process this one serves: it stops accepting, drains and exits.
    pub fn serving(self) -> std::io::Result<()> {
        (&self.stream).write_all(SERVING)
    }
}

/// In the new process: asks the process listening at `path` for its sockets, and waits for them (on the
/// blocking pool).
pub async fn take_over(path: &str) -> Result<TakenOver, UpgradeError> {
    if path.is_empty() {
        return Err(UpgradeError::NoSocketPath);
    }
    let owned = path.to_string();
    let exchanged = tokio::task::spawn_blocking(move || {
        let stream =
            StdUnixStream::connect(&owned).map_err(|source| UpgradeError::Connect { path: owned.clone(), source })?;
        receive(&stream).map(|fds| (fds, stream)).map_err(|reason| UpgradeError::Exchange { path: owned, reason })
    });
    let failed = |reason: String| UpgradeError::Exchange { path: path.to_string(), reason };
    let ((remoting, metrics), stream) = exchanged.await.map_err(|e| failed(e.to_string()))??;
    let remoting = tcp_listener(remoting).map_err(|e| failed(e.to_string()))?;
    let metrics = metrics.map(tcp_listener).transpose().map_err(|e| failed(e.to_string()))?;
    Ok(TakenOver { remoting, metrics, predecessor: Predecessor { stream } })
}

/// Asks for the sockets and receives them: the remoting socket, and the metrics socket if any.
fn receive(stream: &StdUnixStream) -> Result<(OwnedFd, Option<OwnedFd>), String> {
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
    Ok((remoting, fds.next()))
}

/// A listening socket received from the old process, for tokio.
fn tcp_listener(fd: OwnedFd) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}
