//! The server's life, as Java's `NamesrvController` runs it: `server` binds the port, starts the route
//! writer, the housekeeping and the operator's port, accepts connections and supervises every task;
//! `housekeeping` is the periodic work (the expiry scan, the route saver, a closed connection's clean-up);
//! `upgrade` hands the listening sockets to a new process.
//!
//! The top layer: it may use every other module, and none uses it (the binary and embedders do).

pub mod housekeeping;
pub mod server;
pub mod upgrade;
