//! What the load generator's tests share beside `rocketns::testing::wire` (free ports, properties files):
//! the server binary beside it, waiting for a listener.
// Each test binary uses a part of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The server binary, built beside the load generator by `cargo test` at the workspace root (which builds
/// every package's binaries before it runs any test).
pub fn server_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_rocketns-loadgen")).with_file_name("rocketns");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test` at the workspace root, or `cargo build` first",
        path.display()
    );
    path
}

/// Waits (up to 10 s) until something accepts connections at `addr`.
pub fn wait_for(addr: &str) {
    assert!(
        rocketns::testing::wire::wait_for_listener(addr, std::time::Duration::from_secs(10)),
        "nothing listens at {addr}"
    );
}
