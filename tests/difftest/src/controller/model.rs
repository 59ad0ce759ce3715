//! A controller sequence: the brokers of its world (two groups of one cluster, each broker applying for its
//! own id) and the steps they and an admin take. Data, so that a shrunk one prints as a script.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A broker process in controller mode (`enableControllerMode=true`, `brokerId=-1`): its id is the one the
/// controller gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtlBroker {
    pub cluster: String,
    pub name: String,
    pub addr: String,
}

/// One step of a controller sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum CtlOp {
    /// A broker's start: GET_NEXT_BROKER_ID (1012), APPLY_BROKER_ID (1013) of the id named (or of `id`, one
    /// its own id file kept), then REGISTER_BROKER (1003) under the id applied; as ReplicasManager does,
    /// it stops at the first failure.
    Join { broker: usize, id: Option<i64> },
    /// BROKER_HEARTBEAT (904) over the broker's connection (brokers send it one-way; here a request, so
    /// that the replies compare).
    Beat { broker: usize, epoch: i32, max_offset: i64, priority: i32 },
    /// ELECT_MASTER (1002): as the broker asks it (its own id), or as `mqadmin electMaster` designates it.
    Elect { broker: usize, designate: bool },
    /// GET_REPLICA_INFO (1004) of the broker's group, then ALTER_SYNC_STATE_SET (1001) in the name of the
    /// master it names (of `broker` itself when `as_self`) with the epochs it names (the set's one behind
    /// when `stale`), to the ids of `members`.
    Alter { broker: usize, members: Vec<usize>, as_self: bool, stale: bool },
    /// CLEAN_BROKER_DATA (1011) of a group, as `mqadmin cleanBrokerMetadata` sends it: the ids of
    /// `brokers` (all of the group's when empty), living ones too when `living`.
    Clean { broker_name: String, brokers: Vec<usize>, living: bool },
    /// GET_REPLICA_INFO (1004).
    ReplicaInfo { broker_name: String },
    /// GET_SYNC_STATE_DATA (1006) of these names.
    SyncStateData { names: Vec<String> },
}

impl CtlOp {
    /// The broker whose connection carries the step, if any.
    pub fn broker(&self) -> Option<usize> {
        match self {
            CtlOp::Join { broker, .. } | CtlOp::Beat { broker, .. } | CtlOp::Alter { broker, .. } => Some(*broker),
            CtlOp::Elect { broker, designate: false } => Some(*broker),
            _ => None,
        }
    }

    /// The request codes the step sends, in order.
    pub fn codes(&self) -> &'static [i32] {
        match self {
            CtlOp::Join { .. } => &[1012, 1013, 1003],
            CtlOp::Beat { .. } => &[904],
            CtlOp::Elect { .. } => &[1002],
            CtlOp::Alter { .. } => &[1004, 1001],
            CtlOp::Clean { .. } => &[1011],
            CtlOp::ReplicaInfo { .. } => &[1004],
            CtlOp::SyncStateData { .. } => &[1006],
        }
    }

    pub fn is_read(&self) -> bool {
        matches!(self, CtlOp::ReplicaInfo { .. } | CtlOp::SyncStateData { .. })
    }
}

/// A generated controller sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtlSequence {
    pub brokers: Vec<CtlBroker>,
    pub steps: Vec<CtlOp>,
}

impl CtlSequence {
    fn who(&self, b: usize) -> String {
        self.brokers.get(b).map_or_else(|| format!("broker {b}?"), |s| format!("{} {} (#{b})", s.name, s.addr))
    }

    fn list(&self, brokers: &[usize]) -> String {
        brokers.iter().map(|b| format!("#{b}")).collect::<Vec<_>>().join(",")
    }

    /// One step as a line of the printed script.
    pub fn describe(&self, op: &CtlOp) -> String {
        match op {
            CtlOp::Join { broker, id } => match id {
                Some(id) => format!("{} starts, applying for id {id} of its id file", self.who(*broker)),
                None => format!("{} starts, applying for the next id", self.who(*broker)),
            },
            CtlOp::Beat { broker, epoch, max_offset, priority } => {
                format!("{} beats: epoch {epoch}, maxOffset {max_offset}, priority {priority}", self.who(*broker))
            }
            CtlOp::Elect { broker, designate: false } => format!("{} asks for an election", self.who(*broker)),
            CtlOp::Elect { broker, designate: true } => format!("admin designates {}", self.who(*broker)),
            CtlOp::Alter { broker, members, as_self, stale } => format!(
                "{} alters the SyncStateSet to [{}]{}{}",
                self.who(*broker),
                self.list(members),
                if *as_self { " in its own name" } else { " in the master's name" },
                if *stale { ", the set's epoch one behind" } else { "" }
            ),
            CtlOp::Clean { broker_name, brokers, living } => format!(
                "admin cleans {broker_name} [{}]{}",
                if brokers.is_empty() { "all".into() } else { self.list(brokers) },
                if *living { ", living too" } else { "" }
            ),
            CtlOp::ReplicaInfo { broker_name } => format!("reads {broker_name}'s replica info"),
            CtlOp::SyncStateData { names } => format!("reads the sync state data of {names:?}"),
        }
    }
}

impl fmt::Display for CtlSequence {
    /// A numbered script, one step a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, op) in self.steps.iter().enumerate() {
            writeln!(f, "  {:>3}. {}", i + 1, self.describe(op))?;
        }
        Ok(())
    }
}
