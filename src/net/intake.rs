//! The intake: where a connection is served until it has settled. New connections are accepted and served
//! on the runtime that `NameServer::run` runs on, their sockets on its I/O driver (the binary: a
//! single-threaded runtime on the main thread). A connection that has answered [`SETTLED_AFTER_REQUESTS`]
//! requests, or is still open [`SETTLED_AFTER`] after it was accepted, moves, socket and all, to the
//! runtime that answers lookups.
//!
//! So connect/close churn (a client that opens a connection for one lookup, or a flood of them) costs the
//! lookups' threads nothing: not its accepts, its first reads, its closes, nor its sockets' readiness.
//! Served beside established connections, 1,000 new connections a second in bursts of 150 took their
//! lookups' p99 to 3.5 x quiet on one core; 1.3-1.5 x on the intake, as with the churn sent to another
//! process on the same core (perf/README.md, "Hostile clients"). The kernel schedules the two threads
//! apart, where one runtime would run a burst's tasks in turn with the lookups'.
//!
//! A connection that sends anything but lookups goes to the work lane (`lane.rs`) instead, from wherever
//! it is. A TLS connection moves without its socket: rustls's state cannot be taken apart and put back, so
//! its readiness stays with the intake's driver.

use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

/// Requests answered on the intake before a connection moves: a client's first lookups (one per topic).
pub const SETTLED_AFTER_REQUESTS: u32 = 16;
/// Time open before a connection moves, at its next request: longer than a churner's whole life, shorter
/// than a polling client's period (30 s).
pub const SETTLED_AFTER: Duration = Duration::from_secs(1);

/// Whether a connection accepted at `accepted` that has answered `answered` requests has settled.
pub fn settled(answered: u32, accepted: Instant) -> bool {
    answered >= SETTLED_AFTER_REQUESTS || accepted.elapsed() >= SETTLED_AFTER
}

/// A stream that can move to another runtime's I/O driver.
pub trait Rehome: Sized {
    fn rehome(self, to: &Handle) -> std::io::Result<Self>;
}

impl Rehome for tokio::net::TcpStream {
    /// Off this driver's epoll and onto `to`'s; bytes already in the socket are seen there at once.
    fn rehome(self, to: &Handle) -> std::io::Result<Self> {
        let socket = self.into_std()?;
        let _entered = to.enter();
        tokio::net::TcpStream::from_std(socket)
    }
}

impl Rehome for tokio_rustls::server::TlsStream<tokio::net::TcpStream> {
    fn rehome(self, _: &Handle) -> std::io::Result<Self> {
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_settles_after_its_requests_or_its_time() {
        let accepted = Instant::now();
        assert!(!settled(SETTLED_AFTER_REQUESTS - 1, accepted));
        assert!(settled(SETTLED_AFTER_REQUESTS, accepted));
        tokio::time::advance(SETTLED_AFTER - Duration::from_millis(1)).await;
        assert!(!settled(0, accepted), "a churner's life");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(settled(0, accepted));
    }
}
