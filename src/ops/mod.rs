//! What operators see: `metrics` (the counters), `exposition` (their Prometheus text, where every metric
//! is named), `http` (the operator's port: metrics, health, readiness, route dumps; `http_listener` holds its
//! connections to their bounds) and `audit` (the audit
//! log of writes).
//!
//! `metrics` is a sink that `limits`, `net`, `outbound`, `service` and the shared state count into; `http`
//! reads the server's state. Nothing in `route/`, `protocol/` or `remoting/` uses this folder: the route
//! table and the wire codec know nothing of what operators see.

pub mod audit;
pub mod exposition;
pub mod http;
pub mod http_listener;
pub mod metrics;
