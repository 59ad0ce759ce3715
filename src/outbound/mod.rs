//! Connections this NameServer opens itself, as Java's NameServer uses its remoting client: 905 notices to
//! brokers (`notify.rs`), and in cluster-test mode route lookups in the product environment's NameServer
//! (`product_env.rs`). `client.rs` is the connection both use, `resolve.rs` the bound on resolving the
//! host names in their addresses. Neither ever holds up the route writer or a request: each runs in tasks
//! of its own, with timeouts, and is counted in the metrics.

pub mod client;
pub mod notify;
pub mod product_env;
pub mod resolve;
