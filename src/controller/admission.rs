//! Which connections the controller's port takes: at most [`MAX_CONNECTIONS`] at once, at most
//! [`PER_ADDRESS`] from one address, and the last [`PEER_RESERVE`] only from the peers' addresses, so that
//! strangers holding connections cannot keep a node from reaching the others again after a failure, nor
//! one address lock out every broker and admin tool.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

pub const MAX_CONNECTIONS: usize = 1024;
/// A Java broker keeps one connection to each node; a host of brokers and tools is far under this.
pub const PER_ADDRESS: usize = 128;
/// Connections only the peers' addresses may take, once the others are taken.
pub const PEER_RESERVE: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("{PER_ADDRESS} connections from this address already")]
    Address,
    #[error("{} connections already (the last {PEER_RESERVE} are for the peers)", MAX_CONNECTIONS - PEER_RESERVE)]
    Full,
}

#[derive(Default)]
pub struct Admission {
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; dropped, its place is free again.
pub struct Admitted {
    admission: Arc<Admission>,
    from: IpAddr,
}

impl Admission {
    /// Takes a place for a connection from `from`, which is a peer's address or not.
    pub fn admit(self: &Arc<Self>, from: IpAddr, peer: bool) -> Result<Admitted, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (total, by_address) = &mut *open;
        let from_here = by_address.get(&from).copied().unwrap_or(0);
        if from_here >= PER_ADDRESS {
            return Err(Refusal::Address);
        }
        let limit = if peer { MAX_CONNECTIONS } else { MAX_CONNECTIONS - PEER_RESERVE };
        if *total >= limit {
            return Err(Refusal::Full);
        }
        *total += 1;
        by_address.insert(from, from_here + 1);
        Ok(Admitted { admission: self.clone(), from })
    }

    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.admission.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (total, by_address) = &mut *open;
        *total -= 1;
        if let Some(n) = by_address.get_mut(&self.from) {
            *n -= 1;
            if *n == 0 {
                by_address.remove(&self.from);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_a_share_and_the_peers_a_reserve() {
        let admission = Arc::new(Admission::default());
        let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x7f00_0000 + i));
        let mut held = Vec::new();
        for _ in 0..PER_ADDRESS {
            held.push(admission.admit(ip(2), false).expect("room"));
        }
        assert_eq!(admission.admit(ip(2), false).err(), Some(Refusal::Address));
        let mut i = 3;
        while admission.open() < MAX_CONNECTIONS - PEER_RESERVE {
            if let Ok(a) = admission.admit(ip(i), false) {
                held.push(a);
            } else {
                i += 1;
            }
        }
        assert_eq!(admission.admit(ip(999), false).err(), Some(Refusal::Full));
        let peer = admission.admit(ip(1), true).expect("a peer's reserve");
        drop(peer);
        drop(held.pop());
        assert!(admission.admit(ip(999), false).is_ok(), "a place given back");
        drop(held);
        assert_eq!(admission.open(), 0);
    }
}
