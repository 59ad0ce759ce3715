//! rocketns: a drop-in Apache RocketMQ NameServer.
//!
//! To embed it: load or build a [`NamesrvConfig`] (the Java NameServer's keys), [`NameServer::bind`] it,
//! give it a [`lane::WorkLane`] ([`NameServer::with_work_lane`]) and runtimes for settled connections'
//! lookups ([`NameServer::with_lookup_cores`] over [`cores::LookupThreads`], one a core, or
//! [`NameServer::with_lookup_runtime`] over one of the embedder's), and [`NameServer::run`] it until a
//! shutdown future completes (where it runs, new connections are accepted and served until they settle);
//! [`server::ServeError`] says why it stopped on its own. The controller alone (`--controller-only`) is
//! [`Controller::bind_alone`] and [`Controller::run`]; [`logging`] holds the process's log to a length and a rate,
//! as the binary's. That is the whole public API. Everything else is internal
//! (public only with the `testing` feature, for this crate's tests, benches, fuzz targets and load
//! generator), one folder a concern, from the top down (`route`, `remoting` and `protocol`, the lookup
//! path's data and codec, use nothing of the network, the server's life or what
//! operators see):
//! - `service`: the server's life (start-up, supervision, housekeeping, the hand-over to a new process);
//! - `net`: connections and the threads that serve them (the intake, the lookup cores, the work lane, TLS);
//! - `processor`: request dispatch, one handler per code, and request signatures; `outbound`: the
//!   connections the server opens itself (905 notices, cluster-test lookups);
//! - `route`: immutable route snapshots, the single writer, broker liveness, the warm-restart file;
//! - `remoting`: frames and command headers (the wire codec); `protocol`: RocketMQ data types, their exact
//!   JSON and the request and response codes;
//! - `controller`: the controller Java runs with `enableControllerInNamesrv` (master election on openraft);
//! - beside them: `limits` (what clients may make the server spend), `store` (files written durably), `ops`
//!   (metrics, the operator's port, the audit log), `config` (the Java configuration keys);
//! - `state`: the server's shared state; `error`: failures mapped to response codes in one place;
//! - `testing` (feature `testing`): helpers for tests, benches and the load generator.

// One unsafe call, sched_setscheduler in `lane` (rustix has no wrapper for it).
#![deny(unsafe_code)]
// Functions short enough to read at once (clippy.toml sets the limit: 60 lines).
#![warn(clippy::too_many_lines)]

pub mod config;

// The crate's internal modules: private to the crate for an embedder (its API is [`NameServer`],
// [`NamesrvConfig`], [`Controller`] and the [`config`], [`cores`], [`lane`], [`logging`] and [`server`]
// modules), public
// with the `testing` feature, for the crate's own tests, benches, fuzz targets and load generator. Each is
// declared twice, plainly, rather than by a macro: rustfmt does not expand macros, so `cargo fmt` never
// reached the files a macro declared.
#[cfg(feature = "testing")]
pub mod controller;
#[cfg(not(feature = "testing"))]
mod controller;
#[cfg(feature = "testing")]
pub mod error;
#[cfg(not(feature = "testing"))]
mod error;
#[cfg(feature = "testing")]
pub mod limits;
#[cfg(not(feature = "testing"))]
mod limits;
#[cfg(feature = "testing")]
pub mod net;
#[cfg(not(feature = "testing"))]
mod net;
#[cfg(feature = "testing")]
pub mod ops;
#[cfg(not(feature = "testing"))]
mod ops;
#[cfg(feature = "testing")]
pub mod outbound;
#[cfg(not(feature = "testing"))]
mod outbound;
#[cfg(feature = "testing")]
pub mod processor;
#[cfg(not(feature = "testing"))]
mod processor;
#[cfg(feature = "testing")]
pub mod protocol;
#[cfg(not(feature = "testing"))]
mod protocol;
#[cfg(feature = "testing")]
pub mod remoting;
#[cfg(not(feature = "testing"))]
mod remoting;
#[cfg(feature = "testing")]
pub mod route;
#[cfg(not(feature = "testing"))]
mod route;
#[cfg(feature = "testing")]
pub mod service;
#[cfg(not(feature = "testing"))]
mod service;
#[cfg(feature = "testing")]
pub mod state;
#[cfg(not(feature = "testing"))]
mod state;
#[cfg(feature = "testing")]
pub mod store;
#[cfg(not(feature = "testing"))]
mod store;

// The embedder's API: the threads that answer lookups, the work lane and the server, at the crate's root;
// the process's log held to a length and a rate, as the binary's.
pub use net::{cores, lane};
pub use ops::logging;
pub use service::server;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::NamesrvConfig;
/// The controller alone, as `rocketns --controller-only` runs it (Java's `mqcontroller`).
pub use controller::{Controller, ControllerError, SettingsError};
pub use server::NameServer;
