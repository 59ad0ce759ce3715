//! The controller's settings, read from Java's ControllerConfig keys in the NameServer's configuration:
//! which nodes form the group, which one this is, where its files are, and how often brokers' heartbeats
//! are checked: what is fixed at start (the settings an admin may change while it runs are `switches`).

use std::path::PathBuf;
use std::time::Duration;

use crate::config::NamesrvConfig;

use super::raft::NodeId;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("controllerDLegerPeers is empty: the controller needs its nodes, as `n0-127.0.0.1:9878;n1-...`")]
    NoPeers,
    #[error("controllerDLegerPeers entry {0:?} is not `id-host:port`")]
    BadPeer(String),
    #[error("controllerDLegerPeers names {0:?} twice")]
    DuplicatePeer(String),
    #[error("controllerDLegerSelfId {0:?} is not one of controllerDLegerPeers")]
    UnknownSelf(String),
    #[error("controllerType {0:?} is not supported: only DLedger (rocketns replicates on openraft)")]
    UnsupportedType(String),
    #[error("controllerPeerSecretFile {path:?}: {reason}")]
    PeerSecret { path: String, reason: String },
    #[error(
        "controllerDLegerPeers names {0} nodes and no controllerPeerSecretFile is set: set one (a file of at least 16 bytes, the same on every node), or controllerAllowUnsignedPeers=true to take the Raft frames from the peers' addresses alone, unproven (SECURITY.md)"
    )]
    UnsignedPeers(usize),
}

/// One node of the group: its DLedger id (`n0`) and the address it listens at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    pub addr: String,
}

#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub group: String,
    /// Sorted by id; a node's Raft id is its place here, the same on every node whatever the order written.
    pub peers: Vec<Peer>,
    pub self_id: NodeId,
    pub store_path: PathBuf,
    pub scan_not_active_broker_interval: Duration,
    /// How long a never-elected group may go without a broker's beat before the leader removes it.
    pub release_unelected_after: Option<Duration>,
    /// How many times the leader tries an election it starts itself (`electMasterMaxRetryCount`).
    pub elect_master_tries: u32,
    /// The content of `controllerPeerSecretFile`, which signs the Raft frames between nodes (`gate`).
    pub peer_secret: Option<Vec<u8>>,
}

impl ControllerSettings {
    pub fn from_config(config: &NamesrvConfig) -> Result<ControllerSettings, SettingsError> {
        if !config.controller_type.eq_ignore_ascii_case("DLedger") {
            return Err(SettingsError::UnsupportedType(config.controller_type.clone()));
        }
        let peers = parse_peers(&config.controller_dleger_peers)?;
        let peer_secret = read_secret(&config.controller_peer_secret_file)?;
        // Raft frames are proven by the secret: from a peer's address alone, whoever can send from its host
        // can speak Raft for it (a snapshot ahead of the group's log breaks a node for good).
        if peer_secret.is_none() && peers.len() > 1 && !config.controller_allow_unsigned_peers {
            return Err(SettingsError::UnsignedPeers(peers.len()));
        }
        let self_id = peers
            .iter()
            .position(|p| p.id == config.controller_dleger_self_id)
            .ok_or_else(|| SettingsError::UnknownSelf(config.controller_dleger_self_id.clone()))?;
        let store_path = if config.controller_store_path.is_empty() {
            let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
            PathBuf::from(home).join("DledgerController")
        } else {
            PathBuf::from(&config.controller_store_path)
        };
        Ok(ControllerSettings {
            group: config.controller_dleger_group.clone(),
            peers,
            self_id: self_id as NodeId,
            store_path,
            scan_not_active_broker_interval: Duration::from_millis(config.scan_not_active_broker_interval.max(1)),
            release_unelected_after: (config.controller_release_unelected_group_millis > 0)
                .then(|| Duration::from_millis(config.controller_release_unelected_group_millis)),
            elect_master_tries: u32::try_from(config.elect_master_max_retry_count).unwrap_or(1).max(1),
            peer_secret,
        })
    }

    pub fn me(&self) -> &Peer {
        &self.peers[self.self_id as usize]
    }

    pub fn peer(&self, id: NodeId) -> Option<&Peer> {
        self.peers.get(id as usize)
    }
}

/// The secret in `path`, its surrounding white space trimmed; none when `path` is empty. A secret under 16
/// bytes is refused: it would be guessed.
fn read_secret(path: &str) -> Result<Option<Vec<u8>>, SettingsError> {
    if path.is_empty() {
        return Ok(None);
    }
    let refused = |reason: String| SettingsError::PeerSecret { path: path.to_string(), reason };
    let bytes = std::fs::read(path).map_err(|e| refused(e.to_string()))?;
    let secret = bytes.trim_ascii();
    if secret.len() < 16 {
        return Err(refused(format!("{} bytes; at least 16 are needed", secret.len())));
    }
    Ok(Some(secret.to_vec()))
}

/// `n0-127.0.0.1:9878;n1-127.0.0.1:9868`, as DLedger reads it (the id ends at the first `-`).
pub fn parse_peers(text: &str) -> Result<Vec<Peer>, SettingsError> {
    let mut peers: Vec<Peer> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry.split_once('-').ok_or_else(|| SettingsError::BadPeer(entry.to_string()))?;
        let port_ok = addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if id.is_empty() || !port_ok {
            return Err(SettingsError::BadPeer(entry.to_string()));
        }
        if peers.iter().any(|p| p.id == id) {
            return Err(SettingsError::DuplicatePeer(id.to_string()));
        }
        peers.push(Peer { id: id.to_string(), addr: addr.to_string() });
    }
    if peers.is_empty() {
        return Err(SettingsError::NoPeers);
    }
    peers.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_numbered_by_id_whatever_the_order_written() {
        let a = parse_peers("n1-127.0.0.1:9868;n0-127.0.0.1:9878;n2-127.0.0.1:9858").unwrap();
        let b = parse_peers("n0-127.0.0.1:9878;n2-127.0.0.1:9858;n1-127.0.0.1:9868;").unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0], Peer { id: "n0".into(), addr: "127.0.0.1:9878".into() });
    }

    #[test]
    fn bad_peers_are_refused() {
        assert_eq!(parse_peers(""), Err(SettingsError::NoPeers));
        assert_eq!(parse_peers("n0:127.0.0.1:9878"), Err(SettingsError::BadPeer("n0:127.0.0.1:9878".into())));
        assert_eq!(parse_peers("n0-127.0.0.1"), Err(SettingsError::BadPeer("n0-127.0.0.1".into())));
        assert_eq!(parse_peers("n0-a:1;n0-b:2"), Err(SettingsError::DuplicatePeer("n0".into())));
        let config = NamesrvConfig {
            controller_dleger_peers: "n0-127.0.0.1:9878".into(),
            controller_dleger_self_id: "n1".into(),
            ..NamesrvConfig::default()
        };
        assert_eq!(ControllerSettings::from_config(&config).unwrap_err(), SettingsError::UnknownSelf("n1".into()));
    }

    /// A group of several nodes proves its Raft frames with the secret, unless unsigned ones are allowed
    /// in so many words; a group of one sends none.
    #[test]
    fn several_nodes_need_the_secret_or_say_they_do_without() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "0123456789abcdef").unwrap();
        let config = NamesrvConfig {
            controller_dleger_peers: "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858".into(),
            controller_dleger_self_id: "n0".into(),
            ..NamesrvConfig::default()
        };
        assert_eq!(ControllerSettings::from_config(&config).unwrap_err(), SettingsError::UnsignedPeers(3));
        let unsigned = NamesrvConfig { controller_allow_unsigned_peers: true, ..config.clone() };
        assert!(ControllerSettings::from_config(&unsigned).unwrap().peer_secret.is_none());
        let signed = NamesrvConfig { controller_peer_secret_file: secret.display().to_string(), ..config.clone() };
        assert!(ControllerSettings::from_config(&signed).unwrap().peer_secret.is_some());
        let alone = NamesrvConfig { controller_dleger_peers: "n0-127.0.0.1:9878".into(), ..config };
        assert!(ControllerSettings::from_config(&alone).is_ok());
    }
}
