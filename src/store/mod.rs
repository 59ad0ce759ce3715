//! Files written durably: `kvconfig` (the KV config store, acknowledged only once on disk) and `fsutil`
//! (atomic replacement, the way every file of the server is written, the route file and the `-c` file's
//! updates included).
//!
//! It uses `protocol` for the file formats and nothing above it.

pub mod fsutil;
pub mod kvconfig;
