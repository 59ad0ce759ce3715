//! The route table: immutable snapshots, the single writer that builds them, and broker liveness.
//!
//! Files: `snapshot.rs` (the published data), `topic_table.rs` (its copy-on-write topic map), `encode.rs`
//! (route bodies, encoded once per change), `builder.rs` (RouteInfoManager's rules applied to the next
//! snapshot) with `builder/register.rs` (REGISTER_BROKER's steps) and `builder/tests.rs`, `queue_lists.rs`
//! (a batch's queue datas, shared by the topics that have the same), `liveness.rs`
//! (who is live), `min_broker_id.rs` (905 notices the builder decides on), `writer.rs` (the one writer: the only code that publishes a snapshot or changes who is
//! live) with `writer/tests.rs`, `dump.rs` (the warm-restart route file).
//!
//! Everything outside this module reads: [`RouteHandle::load`] for the snapshot, [`LiveView`] for liveness,
//! and submits changes to the writer through the handle. The builder and the live table's mutators are
//! private to the module, so the compiler keeps it that way.

/// The hasher of every route table: fast on short strings, seeded per process.
pub type FastHasher = foldhash::fast::RandomState;

pub(crate) mod builder;
#[cfg(any(test, feature = "testing"))]
pub mod direct;
pub mod dump;
pub mod encode;
pub mod liveness;
pub mod min_broker_id;
pub mod queue_lists;
pub mod snapshot;
pub mod topic_table;
pub mod writer;

#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use builder::{BrokerRegistration, RegisterError, RegisterResult, UnregisterRequest};
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use liveness::{BrokerAddrKey, BrokerLiveInfo, ConnId, LiveView};
pub use snapshot::{RouteConfig, RouteSnapshot};
pub use writer::{RouteHandle, RouteMutation, RouteWriter, route_table};
