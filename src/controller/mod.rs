//! The controller that Java 5.x runs in the NameServer process with `enableControllerInNamesrv=true`: it
//! elects a master for each broker group in controller mode and keeps the group's SyncStateSet and epochs.
//!
//! So far the rules and their replication, without the network: `replicas` is the replicated state
//! (Java's ReplicasInfoManager tables) and the events that alone change it, applied in log order;
//! `manager` decides each request (what to answer, which events to append) from that state, as Java's
//! ReplicasInfoManager does; `elect` chooses a new master (Java's DefaultElectPolicy). `raft` declares
//! the Raft types on openraft, `log_store` keeps the log on disk and `machine` applies it and keeps its
//! snapshots, from which a restart starts. Nothing here is on the NameServer's lookup path, and it uses
//! nothing of the route table or the server's life.

// The server does not start the controller yet (issue 34): until it does, only the tests use these.
#![cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]

pub mod elect;
pub mod log_store;
pub mod machine;
pub mod manager;
pub mod raft;
pub mod replicas;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod cluster_tests;

/// Java's `MixAll.FIRST_BROKER_CONTROLLER_ID`: the id of the first broker of a group.
pub const FIRST_BROKER_CONTROLLER_ID: i64 = 1;
