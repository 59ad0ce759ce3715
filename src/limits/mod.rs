//! What clients can make the server spend, bounded in one place each (SECURITY.md): `budget` (memory held
//! for large frames, their decoding and large replies), `throttle` (log lines clients cause, the bytes a
//! second of large replies, the accept loops' pause after a failed accept) and `offload` (work of milliseconds moved to the blocking pool, off the threads
//! that answer lookups).
//!
//! Used by every layer that spends on a client's behalf (`remoting`, `route`, `processor`, `net`) and by
//! the accept loops (`service::server`, `ops::http_listener`); it uses only `config` and `ops::metrics`.

pub mod budget;
pub mod offload;
pub mod throttle;
