//! `hostile`'s kinds aimed at the server's other outputs (issue 44), beside the remoting port's:
//! - `long-address`: registers a slave whose address is either a blackhole (a listener on 127.0.0.1 whose
//!   accept queue is full, so each 905 notice to it waits its connect timeout) or 261 bytes that cannot be
//!   reached, then registers and unregisters a master of its group again and again, each change a notice
//!   (with `notifyMinBrokerIdChanged=true`), its address quoted by the notifier's log lines;
//! - `config-flood`: UPDATE_NAMESRV_CONFIG with a 15,000-character value, which the server warns about (a
//!   small frame: a larger one waits for room behind the trickles, as it should);
//! - `http-trickle`: the HTTP port, a request header a byte a second (a connection closed within 5 s was
//!   refused a place or gave it to a newcomer, counted as refused; one closed later, at the header
//!   timeout, as closed by the server);
//! - `http-nonreader`: the HTTP port, `/cluster` asked and never read;
//! - `http-cluster`: the HTTP port, `/cluster` asked and read, again and again.

use std::time::Duration;

use rocketns::remoting::RemotingCommand;
use rocketns::testing::wire::request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::driver::new_histogram;

use crate::wire::register_request;
use crate::{encode, read_reply};

/// What every long address is padded with: the log must never show it whole.
pub const PADDING: &str = "the-whole-address-was-quoted-";

/// A 261-byte broker address (the most a registration takes) no one answers at.
pub fn long_address(n: usize) -> String {
    let host = format!("{n}.{}", PADDING.repeat(9));
    format!("{}:10911", &host[..255])
}

/// A listener on 127.0.0.1 that never accepts, its accept queue filled: a connection to it waits until its
/// connect timeout, as one to a host that drops packets does. Kept until dropped.
pub struct Blackhole {
    pub addr: std::net::SocketAddr,
    _listener: tokio::net::TcpListener,
    _queued: Vec<TcpStream>,
}

impl Blackhole {
    pub async fn open() -> std::io::Result<Blackhole> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(([127, 0, 0, 1], 0).into())?;
        let listener = socket.listen(1)?;
        let addr = listener.local_addr()?;
        let mut queued = Vec::new();
        // Past the queue's length the kernel drops the SYN; these connects then do not complete.
        for _ in 0..4 {
            if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
                queued.push(s);
            }
        }
        Ok(Blackhole { addr, _listener: listener, _queued: queued })
    }
}

/// Connects to `addr` for session `n` of `kind`: the `http-` kinds from addresses of their own (tricklers
/// from 127.0.0.2 and .3, the others from .4 and .5), so that together they can take every place of the
/// port (16 an address) and each kind still gets its share.
pub async fn connect(kind: &str, n: usize, addr: &str) -> std::io::Result<TcpStream> {
    let source = match kind {
        "http-trickle" => 2 + (n % 2) as u8,
        "http-nonreader" => 4,
        "http-cluster" => 5,
        _ => return TcpStream::connect(addr).await,
    };
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, source], 0).into())?;
    let to = tokio::net::lookup_host(addr).await?.next().ok_or(std::io::ErrorKind::AddrNotAvailable)?;
    socket.connect(to).await
}

/// A session of one of this module's kinds on `s` (the HTTP port's for the `http-` kinds); `Err` when the server
/// closed it. `reply` counts each remoting reply.
pub async fn session(
    kind: &str,
    n: usize,
    s: &mut TcpStream,
    blackhole: Option<std::net::SocketAddr>,
    mut reply: impl FnMut(RemotingCommand),
) -> std::io::Result<()> {
    match kind {
        "long-address" => {
            let group = format!("hostile-group-{n}");
            let slave = match blackhole {
                Some(addr) if n.is_multiple_of(2) => addr.to_string(),
                _ => long_address(n),
            };
            let topics = ["x".to_string(), "y".to_string()];
            s.write_all(&encode(&register_request(&group, 1, &slave, &topics, 1, false))).await?;
            reply(read_reply(s).await?);
            let master = format!("127.0.0.1:{}", 20_000 + n);
            for counter in 2.. {
                s.write_all(&encode(&register_request(&group, 0, &master, &topics, counter, false))).await?;
                reply(read_reply(s).await?);
                let fields = [
                    ("clusterName", "DefaultCluster"),
                    ("brokerName", group.as_str()),
                    ("brokerAddr", master.as_str()),
                    ("brokerId", "0"),
                ];
                s.write_all(&encode(&request(104, &fields))).await?;
                reply(read_reply(s).await?);
            }
            Ok(())
        }
        "config-flood" => {
            let mut update = request(318, &[]);
            update.body = format!("orderMessageEnable=true{}\n", "x".repeat(15_000)).into_bytes().into();
            loop {
                s.write_all(&encode(&update)).await?;
                reply(read_reply(s).await?);
            }
        }
        "http-trickle" => {
            let connected = std::time::Instant::now();
            s.write_all(b"GET /cluster HTTP/1.1\r\nHost: localhost\r\nX-Trickle: ").await?;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if s.write_all(b"x").await.is_err() || closed(s).await {
                    break;
                }
            }
            // Closed before any header timeout: a place refused (the port at its cap), counted as a refusal,
            // and asked again a second later; after it, a header that never ended, closed.
            if connected.elapsed() < REFUSED_WITHIN {
                reply(RemotingCommand::response(1, None));
                return Ok(());
            }
            Err(std::io::ErrorKind::ConnectionReset.into())
        }
        "http-nonreader" => {
            s.write_all(b"GET /cluster HTTP/1.1\r\nHost: localhost\r\n\r\n").await?;
            // Never reads; asks again now and then, and finds out so that the server closed it.
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                s.write_all(b"GET /cluster HTTP/1.1\r\nHost: localhost\r\n\r\n").await?;
            }
        }
        _ => {
            s.write_all(b"GET /cluster HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
            let mut all = Vec::new();
            s.read_to_end(&mut all).await?;
            let ok = all.starts_with(b"HTTP/1.1 200");
            reply(RemotingCommand::response(if ok { 0 } else { 1 }, None));
            Ok(())
        }
    }
}

/// A trickled connection closed sooner than this was refused a place, or gave its place to a newcomer:
/// the server's header timeout is 10 s.
const REFUSED_WITHIN: Duration = Duration::from_secs(5);

/// Whether the peer has closed `s` (a read that returns at once with nothing).
async fn closed(s: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(tokio::time::timeout(Duration::from_millis(1), s.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
}

/// What an orchestrator's health probe gets from the HTTP port under the attack: `GET /healthz` on a new
/// connection from 127.0.0.1 every [`HEALTH_EVERY`], each within 1 s (Kubernetes' default probe timeout)
/// or failed, and the longest time (ms) from a failed probe to the next answered one: Kubernetes restarts a
/// container after 3 failures in a row (`failureThreshold`), 10 s apart (`periodSeconds`). The attack's
/// HTTP kinds hold every place they can from addresses of their own.
pub async fn health_probes(port: u16, end: Instant) -> (hdrhistogram::Histogram<u64>, u64, u64) {
    let (mut answered, mut failed, mut failing_since, mut longest) = (new_histogram(), 0, None, 0);
    let mut next = Instant::now();
    while Instant::now() < end {
        tokio::time::sleep_until(next).await;
        next += HEALTH_EVERY;
        let asked = Instant::now();
        let probe = async {
            let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
            let mut reply = Vec::new();
            s.read_to_end(&mut reply).await?;
            std::io::Result::Ok(reply.starts_with(b"HTTP/1.1 200"))
        };
        match tokio::time::timeout(Duration::from_secs(1), probe).await {
            Ok(Ok(true)) => {
                let _ = answered.record((asked.elapsed().as_nanos() as u64).max(1_000));
                if let Some(since) = failing_since.take() {
                    longest = longest.max(asked.duration_since(since).as_millis() as u64);
                }
            }
            _ => {
                failed += 1;
                failing_since.get_or_insert(asked);
            }
        }
    }
    if let Some(since) = failing_since {
        longest = longest.max(since.elapsed().as_millis() as u64);
    }
    (answered, failed, longest)
}

const HEALTH_EVERY: Duration = Duration::from_millis(250);
