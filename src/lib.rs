//! rocketns: a drop-in Apache RocketMQ NameServer.
//!
//! To embed it: load or build a [`NamesrvConfig`] (the Java NameServer's keys), [`NameServer::bind`] it,
//! give it a [`lane::WorkLane`] ([`NameServer::with_work_lane`]) and runtimes for settled connections'
//! lookups ([`NameServer::with_lookup_cores`] over [`cores::LookupThreads`], one a core, or
//! [`NameServer::with_lookup_runtime`] over one of the embedder's), and [`NameServer::run`] it until a shutdown future
//! completes (where it runs, new connections are accepted and served until they settle); [`server::ServeError`] says why it stopped on its own. That is the whole
//! public API. Everything else is internal (public only with the `testing` feature, for this crate's tests,
//! benches, fuzz targets and load generator), laid out as the Java NameServer is split:
//! - `remoting`: frames and command headers (the wire codec); `json`: the fastjson-compatible JSON writer;
//! - `protocol`: RocketMQ data types and their exact JSON; request and response codes;
//! - `route`: immutable route snapshots, the single writer, broker liveness, the warm-restart file;
//! - `processor`: request dispatch, one handler per code, over the server's shared state (`state`);
//!   `error`: failures mapped to response codes in one place; `acl`: request signatures; `audit`: the
//!   audit log of writes;
//! - `connection`, `server`: I/O, accept loop, supervision; `intake`: where new connections are served
//!   until they settle; `cores`: the threads that answer them then; `tls`: optional TLS; `housekeeping`: expiry
//!   scan and route saver; `frame_budget`: memory for large frames; `offload`: work moved to the blocking
//!   pool; `upgrade`: the sockets handed to a new process;
//! - `outbound`: connections the server opens itself (905 notices to brokers, cluster-test lookups);
//! - `http` and `metrics`: the operator's port;
//! - `kvconfig`: the KV config store; `fsutil`: crash-safe file writes;
//! - `config`: the Java configuration keys, and which of them may change at runtime;
//! - `testing` (feature `testing`): helpers for tests, benches and the load generator.

// One unsafe call, sched_setscheduler in `lane` (rustix has no wrapper for it).
#![deny(unsafe_code)]

/// Declares the crate's internal modules: private to the crate for an embedder (its API is [`NameServer`],
/// [`NamesrvConfig`] and the [`config`], [`cores`], [`lane`] and [`server`] modules), public with the `testing`
/// feature, for the crate's own tests, benches, fuzz targets and load generator.
macro_rules! internal_modules {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        $(
            $(#[$attr])*
            #[cfg(feature = "testing")]
            pub mod $name;
            $(#[$attr])*
            #[cfg(not(feature = "testing"))]
            mod $name;
        )*
    };
}

pub mod config;
pub mod cores;
pub mod lane;
pub mod server;

internal_modules!(
    acl,
    audit,
    connection,
    error,
    budget,
    intake,
    fsutil,
    housekeeping,
    http,
    json,
    kvconfig,
    metrics,
    offload,
    outbound,
    processor,
    protocol,
    remoting,
    route,
    state,
    throttle,
    tls,
    upgrade,
);

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::NamesrvConfig;
pub use server::NameServer;
