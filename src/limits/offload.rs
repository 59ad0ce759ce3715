//! Work moved off the runtime's worker threads, which answer lookups, onto tokio's blocking pool: anything
//! that takes milliseconds (decoding a registration body, applying a route batch) runs here, so that no
//! lookup queued on a worker waits for it. And changes that must not stop halfway, moved off their
//! request's task.

/// Runs `work` on the blocking pool and returns its result; `None` when the runtime is shutting down and
/// the work was cancelled. A panic in `work` is resumed in the caller, as if it had run there.
pub(crate) async fn on_blocking_pool<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Some(done),
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}

/// Runs `change` as a task of its own and returns its result; `None` when the runtime is shutting down. The
/// task runs to its end even if the caller stops waiting (its connection closed): a change of the KV store
/// or the config file that stopped between its file and its memory would leave them apart. A panic in
/// `change` is resumed in the caller.
pub(crate) async fn to_completion<T: Send + 'static>(change: impl Future<Output = T> + Send + 'static) -> Option<T> {
    match tokio::spawn(change).await {
        Ok(done) => Some(done),
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => None,
        },
    }
}
