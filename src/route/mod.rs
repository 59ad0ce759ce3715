//! The route table: immutable snapshots, the single writer that builds them, and broker liveness.

/// The hasher of every route table: fast on short strings, seeded per process.
pub type FastHasher = foldhash::fast::RandomState;

pub mod builder;
pub mod dump;
pub mod encode;
pub mod liveness;
pub mod snapshot;
pub mod topic_table;
pub mod writer;

pub use builder::{BrokerRegistration, RegisterError, RegisterResult, UnregisterRequest};
pub use liveness::{BrokerAddrKey, BrokerLiveTable, ConnId, LiveView};
pub use snapshot::{RouteConfig, RouteSnapshot};
pub use writer::{RouteHandle, RouteMutation, RouteWriter, route_table};
