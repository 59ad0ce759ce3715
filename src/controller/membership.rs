//! Which Raft node id each of `controllerDLegerPeers` is, kept in `controllerStorePath/raft-peers.json`
//! from the first start on. A node's Raft id is its place in the sorted peer list when the store is
//! new, and stays so: an edited peer list that would number the nodes otherwise (a peer added, removed
//! or moved) is refused at start, since the stored membership and the other nodes still number them the
//! old way, and two processes voting as one id could elect two leaders in a term. Changing a group's
//! nodes means a new group (empty stores on every node; brokers apply for their ids again), as moving
//! from Java's controller does; rocketns has no command for Raft's own membership change.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::settings::Peer;
use crate::store::fsutil;

const FILE: &str = "raft-peers.json";

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct StoredPeer {
    id: String,
    addr: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error(
        "{path}: this store's group is {stored}, but controllerDLegerPeers says {configured}; a node's Raft id \
         would change. Restore the peer list, or start the changed group from empty controller stores on every node"
    )]
    Changed { path: String, stored: String, configured: String },
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
}

/// Checks `peers` (numbered by their place) against the store's, writing them when the store has none.
pub fn check(store: &Path, peers: &[Peer]) -> Result<(), MembershipError> {
    let path = store.join(FILE);
    let shown = path.display().to_string();
    let configured: Vec<StoredPeer> =
        peers.iter().map(|p| StoredPeer { id: p.id.clone(), addr: p.addr.clone() }).collect();
    let unreadable = |reason: String| MembershipError::Unreadable { path: shown.clone(), reason };
    match std::fs::read(&path) {
        Ok(bytes) => {
            let stored: Vec<StoredPeer> = serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
            if stored != configured {
                return Err(MembershipError::Changed {
                    path: shown,
                    stored: listed(&stored),
                    configured: listed(&configured),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(store).map_err(|e| unreadable(e.to_string()))?;
            let bytes = serde_json::to_vec_pretty(&configured).map_err(|e| unreadable(e.to_string()))?;
            fsutil::replace_durably(&path, &bytes).map_err(|e| unreadable(e.to_string()))
        }
        Err(e) => Err(unreadable(e.to_string())),
    }
}

fn listed(peers: &[StoredPeer]) -> String {
    let named: Vec<String> = peers.iter().enumerate().map(|(i, p)| format!("{i}={}-{}", p.id, p.addr)).collect();
    named.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::settings::parse_peers;

    #[test]
    fn the_first_list_is_kept_and_one_that_renumbers_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let three = parse_peers("n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858").unwrap();
        check(dir.path(), &three).expect("first start");
        check(dir.path(), &parse_peers("n2-127.0.0.1:9858;n0-127.0.0.1:9878;n1-127.0.0.1:9868").unwrap())
            .expect("the same group written in another order");
        for edited in ["n1-127.0.0.1:9868;n2-127.0.0.1:9858", "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9999"] {
            let refused = check(dir.path(), &parse_peers(edited).unwrap()).unwrap_err().to_string();
            assert!(refused.contains("raft-peers.json") && refused.contains("0=n0-127.0.0.1:9878"), "{refused}");
        }
    }
}
