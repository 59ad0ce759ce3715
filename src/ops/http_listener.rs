//! The operator's HTTP port's connections, held to bounds of their own: at most [`MAX_CONNECTIONS`] at once
//! (more are closed as they are accepted), each closed [`LIFETIME`] after its accept. Without them, 1,128
//! connections trickling a header byte every 5 s took every file descriptor of the process, and new
//! remoting connections were no longer accepted (issue 44); a scraper's keep-alive connection is simply
//! opened again.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::ops::metrics::Metrics;

/// HTTP connections open at once: Prometheus and a few operators' tools need a handful.
pub const MAX_CONNECTIONS: usize = 64;
/// How long an HTTP connection may stay open, however it is used.
pub const LIFETIME: Duration = Duration::from_secs(60);

/// The HTTP port's listener, for `axum::serve`.
pub struct Bounded {
    listener: TcpListener,
    places: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

impl Bounded {
    /// Counts in `metrics` the connections closed at their accept for want of a place.
    pub fn new(listener: TcpListener, metrics: Arc<Metrics>) -> Bounded {
        Bounded { listener, places: Arc::new(Semaphore::new(MAX_CONNECTIONS)), metrics }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Held<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    crate::limits::throttle::after_failed_accept("metrics", &e).await;
                    continue;
                }
            };
            match self.places.clone().try_acquire_owned() {
                Ok(place) => return (Held::new(stream, place), addr),
                Err(_) => {
                    self.metrics.http_connections_refused.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// A connection with its place, which it gives back when dropped, and its end of life: reads fail once
/// [`LIFETIME`] has passed, and the server closes it.
pub struct Held<S> {
    stream: S,
    _place: OwnedSemaphorePermit,
    ends: Pin<Box<Sleep>>,
}

impl<S> Held<S> {
    pub fn new(stream: S, place: OwnedSemaphorePermit) -> Held<S> {
        Held { stream, _place: place, ends: Box::pin(tokio::time::sleep(LIFETIME)) }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.ends.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.ends.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection that sends nothing, or a byte now and then, is closed at the end of its life.
    #[tokio::test(start_paused = true)]
    async fn a_connection_ends_at_its_lifetime() {
        let places = Arc::new(Semaphore::new(1));
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut held = Held::new(ours, places.clone().try_acquire_owned().unwrap());
        assert_eq!(places.available_permits(), 0);
        theirs.write_all(b"G").await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(held.read(&mut byte).await.unwrap(), 1);
        tokio::time::advance(LIFETIME).await;
        let ended = tokio::time::timeout(Duration::from_secs(1), held.read(&mut byte)).await;
        let ended = ended.expect("ended at its lifetime, not left waiting").unwrap_err();
        assert_eq!(ended.kind(), std::io::ErrorKind::TimedOut);
        drop(held);
        assert_eq!(places.available_permits(), 1, "its place given back");
    }
}
