//! Host names in addresses that clients chose. A broker may register any `brokerAddr`, and the 905
//! notices (and the controller's) connect to it: an address with a host name is resolved by the system's
//! resolver, on a thread that a timeout cannot stop, with a descriptor or two of its own (the resolver's
//! socket and files) for as long as it takes (tens of seconds for a name server that does not answer).
//! At most [`MAX_RESOLUTIONS`] run at once, each on a thread of its own (not a runtime's blocking pool,
//! whose threads registrations need and whose runtime would wait for it to stop), holding its place
//! until the resolver returns, whoever still waits for it; more are refused at once. Addresses that are IP
//! literals, what brokers register on their defaults, never wait here. Addresses from the configuration
//! (the controller's peers, the product environment's NameServers) do not take these places: a broker
//! cannot keep a controller from reaching its peers.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, LazyLock};

use tokio::sync::Semaphore;

/// Host names resolved at once, in all.
pub const MAX_RESOLUTIONS: usize = 4;
/// Descriptors one resolution may hold: its socket to a name server, and the files it reads.
pub const FILES_EACH: usize = 4;

/// The system's resolver, behind the bound.
pub(crate) struct Resolver {
    places: Arc<Semaphore>,
    bound: usize,
    lookup: fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>,
}

static SYSTEM: LazyLock<Resolver> = LazyLock::new(|| Resolver::new(MAX_RESOLUTIONS, system_lookup));

fn system_lookup(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// The first address `addr` (`host:port`) names, its host name resolved within the bound.
pub async fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    SYSTEM.resolve(addr).await
}

impl Resolver {
    pub(crate) fn new(places: usize, lookup: fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>) -> Resolver {
        Resolver { places: Arc::new(Semaphore::new(places)), bound: places, lookup }
    }

    pub(crate) async fn resolve(&self, addr: &str) -> std::io::Result<SocketAddr> {
        if let Ok(literal) = addr.parse::<SocketAddr>() {
            return Ok(literal);
        }
        let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not host:port");
        let (host, port) = addr.rsplit_once(':').ok_or_else(invalid)?;
        let port: u16 = port.parse().map_err(|_| invalid())?;
        // An IPv6 literal without brackets (`::1:10911`), as Java's address parsing takes it.
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            let busy = format!("{} host names are being resolved already", self.bound);
            return Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, busy));
        };
        let (host, lookup) = (host.to_string(), self.lookup);
        let (send, resolved) = tokio::sync::oneshot::channel();
        std::thread::Builder::new().name("rocketns-resolve".into()).spawn(move || {
            let _ = send.send(lookup(&host, port));
            drop(place);
        })?;
        let first = resolved.await.map_err(std::io::Error::other)??.into_iter().next();
        first.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "the host name has no address"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    /// The slow lookup below hangs, as a resolver whose name server does not answer, until this is set.
    static ANSWERING: AtomicBool = AtomicBool::new(false);

    /// Lets the hung lookups' threads end however the test ends.
    struct Answer;

    impl Drop for Answer {
        fn drop(&mut self) {
            ANSWERING.store(true, Ordering::Release);
        }
    }

    fn slow_lookup(_: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        while !ANSWERING.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }

    /// A resolution keeps its place until the resolver returns, though its caller gave up: names beyond
    /// the bound are refused at once, IP literals never wait, and the places come back.
    #[tokio::test]
    async fn resolutions_hold_their_places_until_the_resolver_returns() {
        let resolver = Resolver::new(2, slow_lookup);
        let answer = Answer;
        for name in ["a.example:1", "b.example:2"] {
            let gave_up = tokio::time::timeout(Duration::from_millis(50), resolver.resolve(name)).await;
            assert!(gave_up.is_err(), "{name} resolved while the resolver hangs");
        }
        let third = tokio::time::timeout(Duration::from_secs(5), resolver.resolve("c.example:3")).await;
        let refused = third.expect("refused at once, not waiting for a place").unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::WouldBlock, "{refused}");
        assert_eq!(resolver.resolve("10.0.0.1:10911").await.unwrap(), "10.0.0.1:10911".parse().unwrap());
        assert_eq!(resolver.resolve("::1:10911").await.unwrap(), "[::1]:10911".parse().unwrap());
        assert_eq!(resolver.resolve("not-an-address").await.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        drop(answer);
        let places = resolver.places.clone();
        for _ in 0..200 {
            if places.available_permits() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(places.available_permits(), 2, "the places given back once the resolver returned");
        assert_eq!(resolver.resolve("c.example:3").await.unwrap(), SocketAddr::from(([127, 0, 0, 1], 3)));
    }
}
