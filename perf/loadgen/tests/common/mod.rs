//! What the load generator's tests share: the server binary beside it, a free port, waiting for a listener.

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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Waits (up to 10 s) until something accepts connections at `addr`.
pub fn wait_for(addr: &str) {
    for _ in 0..500 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("nothing listens at {addr}");
}
