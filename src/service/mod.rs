//! The server's life, as Java's `NamesrvController` runs it: `server` binds the port, accepts connections
//! until it is stopped and shuts down; `supervised` starts and watches the tasks the routes depend on (the
//! route writer, the housekeeping, the operator's port); `accept` admits and serves each connection;
//! `housekeeping` is the periodic work (the expiry scan, the route saver, a closed connection's clean-up);
//! `upgrade` hands the listening sockets to a new process; `descriptors` shares the process's file
//! descriptors among what holds them; `peer_copy` copies a peer NameServer's routes into a node that starts
//! without its own, and `peer_compare` compares its brokers with its peers' every scan period.
//!
//! The top layer: it may use every other module, and none uses it (the binary and embedders do).

mod accept;
pub mod descriptors;
pub mod housekeeping;
pub mod peer_compare;
pub mod peer_copy;
pub mod server;
mod supervised;
pub mod upgrade;
