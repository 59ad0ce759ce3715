//! Cluster-test mode (`clusterTest=true`): a route lookup that misses locally is asked of the product
//! environment's NameServer, as Java's `ClusterTestRequestProcessor` asks it through a `DefaultMQAdminExt`
//! whose unit name is `productEnvName`. That NameServer is found as Java's admin client finds one
//! ([`ClientProperties`]): a fixed list, or the address server's answer, fetched again every two minutes.
//!
//! Each lookup runs in a task of its own and answers the client out of order (`OutQueue::late_replies`),
//! so a slow or absent product NameServer holds up no other request, not even the same connection's. There
//! is no cache of remote routes, as in Java: one lookup is one request over a kept connection, and clients
//! ask for a topic every 30 seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;

use super::client::{OutboundError, PeerConnection};
use crate::config::ClientProperties;
use crate::error::RequestError;
use crate::limits::throttle::client_log;
use crate::ops::metrics::Metrics;
use crate::protocol::codes::{request, response};
use crate::protocol::remote_route::RemoteRoute;
use crate::remoting::{ExtFields, RemotingCommand};

/// Java's `connectTimeoutMillis`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// `DefaultMQAdminExt`'s `timeoutMillis`: a lookup's whole time, connecting included.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Java's `TopAddressing` timeout, and how often its client asks the address server again.
const ADDRESS_SERVER_TIMEOUT: Duration = Duration::from_secs(3);
const ADDRESS_REFRESH: Duration = Duration::from_secs(120);
/// Lookups waiting for the product NameServer at once; more are answered SYSTEM_BUSY at once.
const MAX_PENDING: usize = 1024;
/// The largest address-server answer read.
const MAX_ADDRESS_ANSWER: usize = 64 * 1024;

/// Where the product NameServer's addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AddrSource {
    /// `rocketmq.namesrv.addr` or `NAMESRV_ADDR`.
    Fixed(Vec<String>),
    /// `http://host[:port]/path?query`, asked with GET: `host` to connect to, and the request target.
    AddressServer { host: String, target: String },
}

pub struct ProductEnv {
    source: AddrSource,
    /// The addresses, and when the address server gave them.
    addrs: Mutex<(Vec<String>, Option<Instant>)>,
    /// The connection in use; on a failure the next lookup connects to the next address.
    conn: Mutex<Option<Arc<PeerConnection>>>,
    next: AtomicUsize,
    pending: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

impl ProductEnv {
    pub fn new(product_env_name: &str, props: &ClientProperties, metrics: Arc<Metrics>) -> ProductEnv {
        let source = match &props.namesrv_addr {
            Some(addrs) => AddrSource::Fixed(split_addrs(addrs)),
            None => {
                // `MixAll.getWSAddr` and `TopAddressing`: port 8080 unless the domain names one.
                let domain = &props.namesrv_domain;
                let host = if domain.contains(':') { domain.clone() } else { format!("{domain}:8080") };
                let mut target = format!("/rocketmq/{}", props.namesrv_domain_subgroup);
                if !product_env_name.trim().is_empty() {
                    target = format!("{target}-{product_env_name}?nofix=1");
                }
                AddrSource::AddressServer { host, target }
            }
        };
        tracing::info!(source = ?source, "cluster-test mode: misses are asked of the product environment");
        ProductEnv {
            source,
            addrs: Mutex::new((Vec::new(), None)),
            conn: Mutex::new(None),
            next: AtomicUsize::new(0),
            pending: Arc::new(Semaphore::new(MAX_PENDING)),
            metrics,
        }
    }

    /// Asks for `topic` in a task of its own; its reply (to `opaque`) goes to `reply`, the asking
    /// connection's queue of late replies. Refused at once when too many lookups wait already.
    pub fn spawn_lookup(
        self: &Arc<Self>,
        topic: &str,
        zone: Option<&str>,
        opaque: i32,
        reply: tokio::sync::mpsc::UnboundedSender<RemotingCommand>,
    ) -> Result<(), RequestError> {
        let Ok(permit) = self.pending.clone().try_acquire_owned() else {
            self.metrics.outbound.product_busy.fetch_add(1, Ordering::Relaxed);
            client_log!(
                warn,
                waiting = MAX_PENDING,
                "cluster-test lookup refused: too many wait for the product environment"
            );
            return Err(RequestError::Busy);
        };
        let (this, topic, zone) = (self.clone(), topic.to_string(), zone.map(str::to_string));
        tokio::spawn(async move {
            let found = this.lookup(&topic, Instant::now() + LOOKUP_TIMEOUT).await;
            let counter = match &found {
                Ok(Some(_)) => &this.metrics.outbound.product_found,
                Ok(None) => &this.metrics.outbound.product_not_found,
                Err(e) => {
                    client_log!(info, topic = %crate::error::shown(&topic, 256), error = %e, "route lookup in the product environment failed");
                    &this.metrics.outbound.product_failed
                }
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let mut resp = match found {
                Ok(Some(mut route)) => {
                    if let Some(zone) = &zone {
                        route.filter_by_zone(zone);
                    }
                    let mut resp = RemotingCommand::response(response::SUCCESS, None);
                    resp.body = Bytes::from(route.encode());
                    resp
                }
                _ => RequestError::TopicNotExist(topic).to_response(request::GET_ROUTEINFO_BY_TOPIC),
            };
            resp.opaque = opaque;
            let _ = reply.send(resp);
            drop(permit);
        });
        Ok(())
    }

    /// The product NameServer's route of `topic`, asked by `deadline` (connecting included); `None` when it
    /// has none. A connection over which a request failed or timed out is not used again: a peer that
    /// hangs is replaced, not asked forever.
    async fn lookup(&self, topic: &str, deadline: Instant) -> Result<Option<RemoteRoute>, LookupError> {
        let conn = tokio::time::timeout_at(deadline, self.connection()).await.map_err(|_| LookupError::Timeout)??;
        let mut ext = ExtFields::new();
        ext.insert("topic", topic);
        let left = deadline.saturating_duration_since(Instant::now());
        let reply = match conn.request(RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC, ext), left).await {
            Ok(reply) => reply,
            Err(e) => {
                self.drop_connection(&conn).await;
                return Err(e.into());
            }
        };
        match reply.code {
            response::SUCCESS => RemoteRoute::decode(&reply.body).map(Some).map_err(LookupError::Unreadable),
            response::TOPIC_NOT_EXIST => Ok(None),
            code => Err(LookupError::Refused { code, remark: reply.remark.unwrap_or_default() }),
        }
    }

    /// The kept connection, or a new one to the next address.
    async fn connection(&self) -> Result<Arc<PeerConnection>, LookupError> {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let addrs = self.addresses().await?;
        let addr = &addrs[self.next.fetch_add(1, Ordering::Relaxed) % addrs.len()];
        let c = Arc::new(PeerConnection::connect(addr, CONNECT_TIMEOUT).await?);
        tracing::info!(addr = %addr, "connected to the product environment's NameServer");
        *conn = Some(c.clone());
        Ok(c)
    }

    async fn drop_connection(&self, failed: &Arc<PeerConnection>) {
        let mut conn = self.conn.lock().await;
        if conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
            *conn = None;
        }
    }

    /// The product NameServer's addresses: the fixed list, or the address server's last answer (asked again
    /// when two minutes old; an answer that fails keeps the addresses there were).
    async fn addresses(&self) -> Result<Vec<String>, LookupError> {
        let (host, target) = match &self.source {
            AddrSource::Fixed(addrs) if addrs.is_empty() => return Err(LookupError::NoAddress),
            AddrSource::Fixed(addrs) => return Ok(addrs.clone()),
            AddrSource::AddressServer { host, target } => (host, target),
        };
        let mut addrs = self.addrs.lock().await;
        if addrs.1.is_none_or(|at| at.elapsed() >= ADDRESS_REFRESH) {
            addrs.1 = Some(Instant::now());
            match tokio::time::timeout(ADDRESS_SERVER_TIMEOUT, fetch_addresses(host, target)).await {
                Ok(Ok(answer)) if !split_addrs(&answer).is_empty() => {
                    tracing::info!(addrs = %answer, "the address server named the product NameServers");
                    addrs.0 = split_addrs(&answer);
                }
                Ok(Ok(_)) => tracing::warn!(host, target, "the address server named no NameServer"),
                Ok(Err(e)) => tracing::warn!(host, target, error = %e, "the address server did not answer"),
                Err(_) => tracing::warn!(host, target, "the address server did not answer in time"),
            }
        }
        if addrs.0.is_empty() { Err(LookupError::NoAddress) } else { Ok(addrs.0.clone()) }
    }
}

#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error("no address of the product environment's NameServer is known")]
    NoAddress,
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    #[error("the product NameServer answered code {code}: {remark}")]
    Refused { code: i32, remark: String },
    #[error("the product NameServer's route could not be read: {0}")]
    Unreadable(serde_json::Error),
    #[error("no connection within {} s", LOOKUP_TIMEOUT.as_secs())]
    Timeout,
}

/// `host:port;host:port`, as Java splits a NameServer list.
fn split_addrs(addrs: &str) -> Vec<String> {
    addrs.split(';').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect()
}

/// One GET to the address server; the body's first line, trimmed (`TopAddressing#clearNewLine`), when the
/// status is 200.
async fn fetch_addresses(host: &str, target: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(host).await?;
    let request = format!("GET {target} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut stream).take(MAX_ADDRESS_ANSWER as u64).read_to_end(&mut answer).await?;
    let text = String::from_utf8_lossy(&answer);
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| invalid("no end of headers"))?;
    let status = head.split_whitespace().nth(1).ok_or_else(|| invalid("no status"))?;
    if status != "200" {
        return Err(invalid(&format!("status {status}")));
    }
    let body = body.trim();
    Ok(body.split(['\r', '\n']).next().unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(addr: Option<&str>, domain: &str) -> ClientProperties {
        ClientProperties {
            namesrv_addr: addr.map(str::to_string),
            namesrv_domain: domain.to_string(),
            namesrv_domain_subgroup: "nsaddr".to_string(),
        }
    }

    /// A product NameServer that accepts and never answers: each lookup ends at its deadline, leaves no
    /// pending request behind, and the next one connects anew instead of asking the hung connection again.
    #[tokio::test]
    async fn a_hung_product_namesrv_is_not_asked_again() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
                let _ = accepted_tx.send(());
            }
        });
        let env = ProductEnv::new("", &props(Some(&addr), "unused"), Arc::new(Metrics::default()));
        for round in 1..=2 {
            let deadline = Instant::now() + Duration::from_millis(300);
            let failed = env.lookup("T", deadline).await;
            assert!(matches!(failed, Err(LookupError::Outbound(OutboundError::ReplyTimeout { .. }))), "{failed:?}");
            let connected = tokio::time::timeout(Duration::from_secs(10), accepted.recv()).await;
            assert!(matches!(connected, Ok(Some(()))), "round {round} connected anew");
            assert!(env.conn.lock().await.is_none(), "the hung connection is dropped");
        }
        assert!(accepted.try_recv().is_err(), "one connection a lookup");
    }

    /// However a request ends, its pending entry goes: a reply, a timeout, or its caller giving up on it.
    #[tokio::test]
    async fn a_dropped_request_leaves_no_pending_entry() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let peer = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        let conn = PeerConnection::connect(&addr, CONNECT_TIMEOUT).await.unwrap();
        let _peer = peer.await.unwrap().unwrap();
        let ask = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC, ExtFields::new());
        let given_up =
            tokio::time::timeout(Duration::from_millis(50), conn.request(ask, Duration::from_secs(60))).await;
        assert!(given_up.is_err(), "no reply: the caller gave up first");
        assert_eq!(conn.pending(), 0);
    }

    #[test]
    fn the_product_namesrv_is_found_as_java_finds_it() {
        let m = Arc::new(Metrics::default());
        let fixed = ProductEnv::new("prod", &props(Some("a:1; b:2;"), "jmenv.tbsite.net"), m.clone());
        assert_eq!(fixed.source, AddrSource::Fixed(vec!["a:1".into(), "b:2".into()]));
        let server = ProductEnv::new("prod", &props(None, "jmenv.tbsite.net"), m.clone());
        let expected = AddrSource::AddressServer {
            host: "jmenv.tbsite.net:8080".into(),
            target: "/rocketmq/nsaddr-prod?nofix=1".into(),
        };
        assert_eq!(server.source, expected);
        let with_port = ProductEnv::new("", &props(None, "127.0.0.1:18080"), m);
        let expected = AddrSource::AddressServer { host: "127.0.0.1:18080".into(), target: "/rocketmq/nsaddr".into() };
        assert_eq!(with_port.source, expected);
    }
}
