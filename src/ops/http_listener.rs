//! The operator's HTTP port's connections, held to bounds of their own: at most [`MAX_CONNECTIONS`] at once
//! and [`PER_SOURCE`] from one address, shared fairly between addresses (a newcomer from an address that
//! holds fewer takes the oldest place of the one that holds the most; more are closed as they are
//! accepted), a request's header within
//! [`HEADER_READ`] (also the longest wait for the next request on a kept connection), a reply taken within
//! [`WRITE_STALL`], and each connection closed [`LIFETIME`] after its accept. Without them, 1,128
//! connections trickling a header byte every 5 s took every file descriptor of the process, and new
//! remoting connections were no longer accepted (issue 44); a scraper's connection is simply opened again.
//!
//! The port is served where [`serve`] runs: the server runs it on the work lane, off the runtimes that
//! accept remoting connections and answer lookups.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::ops::metrics::Metrics;

/// HTTP connections open at once: Prometheus and a few operators' tools need a handful.
pub const MAX_CONNECTIONS: usize = 64;
/// HTTP connections from one address at once, so that one host cannot take every place from the others.
pub const PER_SOURCE: usize = 16;
/// How long a request's header may take to arrive, counted from when the connection is ready for it.
pub const HEADER_READ: Duration = Duration::from_secs(10);
/// How long a reply may wait for its peer to take any of it.
pub const WRITE_STALL: Duration = Duration::from_secs(20);
/// What a connection buffers at most each way: a request's header must fit (an operator's tools send a few
/// hundred bytes), and a reply is handed to the socket this much at a time.
pub const BUFFER: usize = 16 * 1024;
/// How long an HTTP connection may stay open, however it is used.
pub const LIFETIME: Duration = Duration::from_secs(60);

/// Connections being closed because a newcomer took their place, beyond [`MAX_CONNECTIONS`]: while as
/// many are still closing, newcomers are refused.
pub const EVICTING: usize = 16;
/// Descriptors the port's connections hold at most.
pub const DESCRIPTORS: usize = MAX_CONNECTIONS + EVICTING;

/// Serves `router` on `listener` until the task is aborted; a connection's task ends within [`LIFETIME`].
pub async fn serve(listener: TcpListener, router: axum::Router, metrics: Arc<Metrics>) {
    let places = Places::new();
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                crate::limits::throttle::after_failed_accept("metrics", &e).await;
                continue;
            }
        };
        let (place, evicted) = match places.take(addr.ip()) {
            Taken::Refused => {
                metrics.http_connections_refused.fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            }
            Taken::Place(place) => (place, false),
            Taken::Evicting(place) => (place, true),
        };
        if evicted {
            metrics.http_connections_evicted.fetch_add(1, Ordering::Relaxed);
        }
        let service = TowerToHyperService::new(router.clone());
        let leave = place.evicted.clone();
        tokio::spawn(async move {
            let io = TokioIo::new(Held::new(stream, place));
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HEADER_READ).max_buf_size(BUFFER);
            // How a connection ended is the client's business: its end is its own.
            tokio::select! {
                _ = http.serve_connection(io, service) => {}
                _ = leave.notified() => {}
            }
        });
    }
}

/// The port's places: [`MAX_CONNECTIONS`] in all, [`PER_SOURCE`] an address, shared fairly between
/// addresses. When all are held, a newcomer from an address that holds fewer than some other takes the
/// oldest place of the addresses that hold the most, which is closed: an orchestrator's health probe from
/// an address of its own gets in however many places a few addresses hold (before, four addresses' 64
/// trickled connections left `/healthz` unanswered, 60 probes of 61 failed). Against churn from more
/// addresses than places, a place lasts 64 arrivals and some probes fail (SECURITY.md has the figures).
struct Places {
    table: Arc<Mutex<Table>>,
    descriptors: Arc<Semaphore>,
}

#[derive(Default)]
struct Table {
    next: u64,
    held: usize,
    /// Each address's places, oldest first: their ids and how each is told to leave.
    sources: HashMap<IpAddr, std::collections::VecDeque<(u64, Arc<Notify>)>>,
}

enum Taken {
    Place(Place),
    /// A place taken from another address, whose connection is told to close.
    Evicting(Place),
    Refused,
}

/// A connection's place, given back when dropped (unless it was taken from it).
pub(crate) struct Place {
    id: u64,
    source: IpAddr,
    evicted: Arc<Notify>,
    table: Arc<Mutex<Table>>,
    _descriptor: OwnedSemaphorePermit,
}

impl Places {
    fn new() -> Places {
        Places { table: Arc::default(), descriptors: Arc::new(Semaphore::new(DESCRIPTORS)) }
    }

    fn take(&self, source: IpAddr) -> Taken {
        let Ok(descriptor) = self.descriptors.clone().try_acquire_owned() else {
            return Taken::Refused;
        };
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = table.sources.get(&source).map_or(0, |held| held.len());
        if mine >= PER_SOURCE {
            return Taken::Refused;
        }
        let mut evicting = false;
        if table.held >= MAX_CONNECTIONS {
            // Of the addresses that hold the most, the one whose oldest place is oldest: a tie broken by the
            // map's order would make the newest connection (a probe just answered) the next one to go.
            let most = table
                .sources
                .iter()
                .max_by_key(|(_, held)| (held.len(), std::cmp::Reverse(held.front().map_or(u64::MAX, |p| p.0))))
                .map(|(a, held)| (*a, held.len()));
            match most {
                // Only another address can hold more than this one.
                Some((other, len)) if len > mine => {
                    let gone = table.sources.get_mut(&other).and_then(|held| held.pop_front());
                    if let Some((_, leave)) = gone {
                        leave.notify_one();
                        table.held -= 1;
                    }
                    if table.sources.get(&other).is_some_and(|held| held.is_empty()) {
                        table.sources.remove(&other);
                    }
                    evicting = true;
                }
                _ => return Taken::Refused,
            }
        }
        table.next += 1;
        let (id, evicted) = (table.next, Arc::new(Notify::new()));
        table.sources.entry(source).or_default().push_back((id, evicted.clone()));
        table.held += 1;
        let place = Place { id, source, evicted, table: self.table.clone(), _descriptor: descriptor };
        if evicting { Taken::Evicting(place) } else { Taken::Place(place) }
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.table.lock().unwrap().held
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(held) = table.sources.get_mut(&self.source) else { return };
        let Some(at) = held.iter().position(|(id, _)| *id == self.id) else { return };
        held.remove(at);
        if held.is_empty() {
            table.sources.remove(&self.source);
        }
        table.held -= 1;
    }
}

/// A connection with its place, which it gives back when dropped: reads and writes fail once [`LIFETIME`]
/// has passed, and writes once one has waited [`WRITE_STALL`] for its peer; the server then closes it.
pub(crate) struct Held<S> {
    stream: S,
    _place: Place,
    ends: Pin<Box<Sleep>>,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> Held<S> {
    pub(crate) fn new(stream: S, place: Place) -> Held<S> {
        Held { stream, _place: place, ends: Box::pin(tokio::time::sleep(LIFETIME)), stalled: None }
    }

    fn ended(&mut self, cx: &mut Context<'_>) -> bool {
        self.ends.as_mut().poll(cx).is_ready()
    }

    /// A write's outcome, failed once writes have waited [`WRITE_STALL`] without their peer taking a byte.
    fn unless_stalled<T>(&mut self, cx: &mut Context<'_>, wrote: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if wrote.is_ready() {
            self.stalled = None;
            return wrote;
        }
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()));
        }
        Poll::Pending
    }
}

fn timed_out<T>() -> Poll<std::io::Result<T>> {
    Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()))
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.ended(cx) {
            return timed_out();
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.ended(cx) {
            return timed_out();
        }
        let wrote = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.unless_stalled(cx, wrote)
    }

    /// Vectored, so that hyper writes a large body from the route table's shared bytes rather than copying
    /// it into a buffer of its own.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if self.ended(cx) {
            return timed_out();
        }
        let wrote = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.unless_stalled(cx, wrote)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let flushed = Pin::new(&mut self.stream).poll_flush(cx);
        self.unless_stalled(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn take(places: &Places, source: [u8; 4]) -> Option<Place> {
        match places.take(IpAddr::from(source)) {
            Taken::Place(place) | Taken::Evicting(place) => Some(place),
            Taken::Refused => None,
        }
    }

    /// Whether `place`'s connection has been told to leave (without waiting).
    fn told(place: &Place) -> bool {
        let notified = std::pin::pin!(place.evicted.notified());
        notified.poll(&mut Context::from_waker(std::task::Waker::noop())).is_ready()
    }

    fn place(places: &Places) -> Place {
        take(places, [127, 0, 0, 1]).expect("a place")
    }

    /// A connection that sends nothing, or a byte now and then, is closed at the end of its life.
    #[tokio::test(start_paused = true)]
    async fn a_connection_ends_at_its_lifetime() {
        let places = Places::new();
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut held = Held::new(ours, place(&places));
        assert_eq!(places.held(), 1);
        theirs.write_all(b"G").await.unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(held.read(&mut byte).await.unwrap(), 1);
        tokio::time::advance(LIFETIME).await;
        let ended = tokio::time::timeout(Duration::from_secs(1), held.read(&mut byte)).await;
        let ended = ended.expect("ended at its lifetime, not left waiting").unwrap_err();
        assert_eq!(ended.kind(), std::io::ErrorKind::TimedOut);
        drop(held);
        assert_eq!(places.held(), 0, "its place given back");
        assert_eq!(places.descriptors.available_permits(), DESCRIPTORS, "and its descriptor");
        assert!(places.table.lock().unwrap().sources.is_empty(), "its address forgotten");
    }

    /// A peer that takes nothing fails the write that waits for it after WRITE_STALL; one that takes a
    /// little at a time is waited for.
    #[tokio::test(start_paused = true)]
    async fn a_reply_not_taken_fails_its_write() {
        let places = Places::new();
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut held = Held::new(ours, place(&places));
        let reader = tokio::spawn(async move {
            let mut some = [0u8; 8];
            for _ in 0..3 {
                tokio::time::sleep(WRITE_STALL / 2).await;
                theirs.read_exact(&mut some).await.unwrap();
            }
            theirs
        });
        // 16 bytes fill the pipe; each later 8 wait WRITE_STALL / 2 for the reader.
        held.write_all(&[0; 40]).await.expect("a slow reader is waited for");
        let _theirs = reader.await.unwrap();
        // Well before its lifetime ends (60 s), which would fail it too.
        let stuck = tokio::time::timeout(WRITE_STALL + Duration::from_secs(1), held.write_all(&[0; 40])).await;
        let stuck = stuck.expect("the write failed, not left waiting").unwrap_err();
        assert_eq!(stuck.kind(), std::io::ErrorKind::TimedOut);
    }

    /// One address holds at most PER_SOURCE places; others still find theirs.
    #[test]
    fn one_address_holds_at_most_its_share() {
        let places = Places::new();
        let held: Vec<Place> = (0..PER_SOURCE).map(|_| take(&places, [127, 0, 0, 2]).expect("its share")).collect();
        assert!(take(&places, [127, 0, 0, 2]).is_none(), "past its share");
        assert!(take(&places, [127, 0, 0, 3]).is_some(), "another address is served");
        drop(held);
        assert!(take(&places, [127, 0, 0, 2]).is_some(), "given back");
    }

    /// Under churn from many addresses, one place each, newcomers take the oldest places first: a probe's
    /// place outlives the next 63 newcomers, every time (with ties broken by the map's order, a probe's
    /// place was usually the next one taken: half the time by the very next newcomer).
    #[test]
    fn newcomers_take_the_oldest_places_first() {
        let places = Places::new();
        let mut open: Vec<Place> = Vec::new();
        let mut address = 0u32;
        let mut arrive = |open: &mut Vec<Place>| {
            // The connections told to leave close, giving back their descriptors.
            let mut still = Vec::new();
            for place in open.drain(..) {
                if !told(&place) {
                    still.push(place);
                }
            }
            *open = still;
            address += 1;
            let place = take(&places, (u32::from_be_bytes([10, 0, 0, 0]) + address).to_be_bytes());
            open.push(place.expect("each newcomer gets a place"));
        };
        for _ in 0..1_000 {
            arrive(&mut open);
        }
        for probe in 0..20 {
            arrive(&mut open);
            let probe_id = open.last().expect("the probe's").id;
            for _ in 0..MAX_CONNECTIONS - 1 {
                arrive(&mut open);
            }
            let kept = open.iter().any(|p| p.id == probe_id && !told(p));
            assert!(kept, "probe {probe}'s place was taken before older ones");
        }
        assert_eq!(places.held(), MAX_CONNECTIONS);
    }

    /// With every place held by four addresses, a fifth address takes the oldest place of one that holds
    /// the most, whose connection is told to leave; addresses that hold as many as the rest are refused,
    /// and while EVICTING closing connections still hold their descriptors, newcomers are refused too.
    #[tokio::test]
    async fn a_newcomer_takes_a_place_from_the_address_that_holds_most() {
        let places = Places::new();
        let mut held: Vec<Place> = Vec::new();
        for i in 0..MAX_CONNECTIONS {
            held.push(take(&places, [127, 0, 0, 2 + (i % 4) as u8]).expect("a place"));
        }
        assert!(take(&places, [127, 0, 0, 2]).is_none(), "an address holding the most gains nothing");
        let probe = places.take(IpAddr::from([10, 0, 0, 1]));
        assert!(matches!(probe, Taken::Evicting(_)), "the newcomer gets a place");
        let gone: Vec<usize> = (0..held.len()).filter(|i| told(&held[*i])).collect();
        assert!(gone.len() == 1 && gone[0] < 4, "one told to leave, its address's oldest: {gone:?}");
        assert_eq!(places.held(), MAX_CONNECTIONS);
        let second = take(&places, [10, 0, 0, 1]).expect("a second, while others hold 16 and 15");
        // The evicted connection has not closed: it still holds its descriptor, as do the newcomers'
        // victims below, until EVICTING are closing and newcomers are refused.
        let newcomers: Vec<_> = (0..EVICTING).filter_map(|i| take(&places, [10, 1, 0, i as u8])).collect();
        assert_eq!(newcomers.len(), EVICTING - 2, "two went to the probe and the second");
        assert!(take(&places, [10, 2, 0, 1]).is_none(), "no descriptor left while the evicted still close");
        assert_eq!(places.held(), MAX_CONNECTIONS);
        drop(held);
        assert!(take(&places, [10, 2, 0, 1]).is_some(), "the evicted closed, their descriptors back");
        drop((probe, second, newcomers));
        assert_eq!(places.held(), 0);
        assert_eq!(places.descriptors.available_permits(), DESCRIPTORS);
    }
}
