//! rocketns inside the test's own runtime: started from a bound [`NameServer`], stopped when dropped.

use std::net::SocketAddr;

use tokio::sync::oneshot;

use crate::NameServer;
use crate::server::ServeError;

/// A server running on a task of the current runtime; asked to stop when dropped.
pub struct InProcessServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl InProcessServer {
    /// Runs `server` on a task of the current runtime until it is dropped or shut down.
    pub fn run(server: NameServer) -> std::io::Result<Self> {
        let addr = server.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Ok(InProcessServer { addr, stop: Some(stop), task: Some(task) })
    }

    /// Starts the graceful shutdown, without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts down and waits until the server has stopped (routes saved, connections closed). Panics, failing
    /// the test, if it had stopped on a failure of its own or its task panicked.
    pub async fn shutdown(mut self) {
        self.begin_shutdown();
        if let Some(task) = self.task.take() {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("the server stopped on a failure: {e}"),
                Err(e) => panic!("the server's task failed: {e}"),
            }
        }
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        self.begin_shutdown();
    }
}
