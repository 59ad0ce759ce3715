//! The controller's Raft types on openraft: a log entry carries the events of one decision, applied
//! together; nodes are numbered and reached at their `controllerDLegerPeers` address.

use super::replicas::ControllerEvent;

openraft::declare_raft_types!(
    /// The controller group's Raft.
    pub ControllerRaft:
        D = Vec<ControllerEvent>,
        R = (),
        SnapshotData = std::io::Cursor<Vec<u8>>,
);

pub type NodeId = u64;
pub type Entry = openraft::Entry<ControllerRaft>;
