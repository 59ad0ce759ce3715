//! rocketns: a drop-in Apache RocketMQ NameServer.
//!
//! Layout, following the Java NameServer's split:
//! - [`remoting`]: frames and command headers (the wire codec);
//! - [`protocol`]: RocketMQ data types and their exact JSON;
//! - [`route`]: immutable route snapshots, the single writer, broker liveness;
//! - [`processor`]: request dispatch, one handler per code; [`error`] maps failures to response codes;
//! - [`connection`], [`server`], [`housekeeping`]: I/O and timers; [`frame_budget`]: memory for large frames; [`http`] and [`metrics`]: the operator's port;
//! - [`kvconfig`]: the KV config store; [`fsutil`]: crash-safe file writes;
//! - [`config`]: the Java configuration keys, and which of them may change at runtime.

pub mod acl;
pub mod config;
mod connection;
pub mod error;
pub mod frame_budget;
pub mod fsutil;
pub mod housekeeping;
pub mod http;
pub mod json;
pub mod kvconfig;
pub mod metrics;
pub mod processor;
pub mod protocol;
pub mod remoting;
pub mod route;
pub mod server;
pub mod state;
pub mod testing;
pub mod tls;

pub use config::NamesrvConfig;
pub use server::NameServer;
