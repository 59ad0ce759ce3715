//! The network edge: where connections are read, answered and written, and the threads that do it.
//! `connection` serves one connection (frames in, dispatch, replies out); `intake` serves new connections
//! until they settle, `cores` the settled ones (a single-threaded runtime a core, for lookups) and `lane`
//! everything else at a lower priority; `slot` is a connection's place among the open ones, wherever it
//! is served; `tls` is the optional TLS on the remoting port.
//!
//! It uses the layers below it (`processor`, `route`, `remoting`, `protocol`, `limits`, `ops::metrics`,
//! `state`); `service` starts it, and the shared state holds the lookup cores (`state.rs`). Nothing below
//! `processor` knows it exists.

pub mod connection;
pub mod cores;
pub mod intake;
pub mod lane;
pub mod slot;
pub mod tls;
