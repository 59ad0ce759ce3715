//! What operators see: `metrics` (the counters), `exposition` (their Prometheus text, where every metric
//! is named), `http` (the operator's port: metrics, health, readiness, route dumps; `http_listener` holds its
//! connections to their bounds), `peers` (the last comparison with each peer NameServer), `audit` (the audit
//! log of writes) and `logging` (the process's own log, held to a length and a rate).
//!
//! `metrics` is a sink that `limits`, `net`, `outbound`, `service` and the shared state count into; `http`
//! reads the server's state. Nothing in `route/`, `protocol/` or `remoting/` uses this folder: the route
//! table and the wire codec know nothing of what operators see.

pub mod audit;
pub mod exposition;
pub mod http;
pub mod http_listener;
pub mod logging;
pub mod metrics;
pub mod peers;
