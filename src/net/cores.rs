//! The threads that answer settled connections' lookups: one single-threaded runtime a core, each with its
//! own I/O driver, and a connection served on one of them for the rest of its life (the one with the fewest
//! connections when it settled).
//!
//! Why not one multi-threaded runtime: its scheduler keeps a bounded local queue a worker and spills the
//! oldest half of it to a shared queue when many connections are ready at once; with 1,000 and 10,000
//! polling connections that order put some lookups behind two rounds of the others (c10000 p99 / p99.9 /
//! max 2.2 / 2.4 / 2.5 x the plain echo's, and 1.5 x its CPU per request). A single-threaded runtime runs
//! its ready connections in the order they became ready, one round at a time, as the echo's does: 1.05 /
//! 1.20 / 1.20 x (perf/README.md, "Lookup threads, one a core").

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio::sync::watch;

/// Where settled connections go: one runtime a core, and how many connections each serves now.
pub struct LookupCores {
    handles: Vec<Handle>,
    live: Arc<[AtomicUsize]>,
}

/// A connection's place on a core: counted there until it is dropped (its lookups ended, it moved to the
/// lane, or the runtime stopped and dropped its task).
pub(crate) struct CoreSeat {
    live: Arc<[AtomicUsize]>,
    core: usize,
}

impl Drop for CoreSeat {
    fn drop(&mut self) {
        self.live[self.core].fetch_sub(1, Ordering::Relaxed);
    }
}

impl LookupCores {
    /// Serves settled connections on these runtimes (an embedder's own); `handles` must not be empty.
    pub fn over(handles: Vec<Handle>) -> Self {
        assert!(!handles.is_empty(), "lookups need at least one runtime");
        let live = handles.iter().map(|_| AtomicUsize::new(0)).collect();
        LookupCores { handles, live }
    }

    /// The runtime with the fewest connections now (the first of them on a tie), and a seat on it.
    pub(crate) fn seat(&self) -> (Handle, CoreSeat) {
        let core = (0..self.live.len()).min_by_key(|&i| self.live[i].load(Ordering::Relaxed)).unwrap_or(0);
        self.live[core].fetch_add(1, Ordering::Relaxed);
        (self.handles[core].clone(), CoreSeat { live: self.live.clone(), core })
    }

    /// How many connections each core serves now, for the metrics.
    pub fn connections(&self) -> Vec<usize> {
        self.live.iter().map(|n| n.load(Ordering::Relaxed)).collect()
    }
}

/// The lookup threads of the binary: `cores` threads, each running a single-threaded runtime until this is
/// dropped. Drop it outside of any runtime, after the server (it waits for its threads).
pub struct LookupThreads {
    cores: Arc<LookupCores>,
    stop: watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl LookupThreads {
    /// Returns once every thread runs its runtime (named, and ready for connections).
    pub fn start(cores: usize) -> std::io::Result<LookupThreads> {
        let (stop, stopped) = watch::channel(false);
        let (mut threads, mut handles) = (Vec::new(), Vec::new());
        for core in 0..cores.max(1) {
            match start_one(core, stopped.clone()) {
                Ok((thread, handle)) => {
                    threads.push(thread);
                    handles.push(handle);
                }
                Err(e) => {
                    let _ = stop.send(true);
                    threads.into_iter().for_each(|thread| drop(thread.join()));
                    return Err(e);
                }
            }
        }
        Ok(LookupThreads { cores: Arc::new(LookupCores::over(handles)), stop, threads })
    }

    pub fn cores(&self) -> Arc<LookupCores> {
        self.cores.clone()
    }
}

/// One lookup thread and its runtime's handle, once it runs.
fn start_one(
    core: usize,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<(std::thread::JoinHandle<()>, Handle)> {
    let (started, handle) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("rocketns-lookup-{core}")).spawn(move || {
        // Connections arrive from the intake through the runtime's shared queue, which it looks at once
        // every 31 polls by default: a thousand settling at once waited up to 31,000 polls (0.4 s) behind
        // those already here. Every second poll serves it instead.
        let runtime = match tokio::runtime::Builder::new_current_thread().global_queue_interval(2).enable_all().build()
        {
            Ok(runtime) => runtime,
            Err(e) => return drop(started.send(Err(e))),
        };
        let _ = started.send(Ok(runtime.handle().clone()));
        runtime.block_on(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        });
        // Dropping the runtime drops the connections still on it: their tasks end as cancelled.
    })?;
    match handle.recv() {
        Ok(Ok(handle)) => Ok((thread, handle)),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(std::io::Error::other("a lookup thread ended as it started"))
        }
    }
}

impl Drop for LookupThreads {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_core_with_the_fewest() {
        let threads = LookupThreads::start(3).expect("threads");
        let cores = threads.cores();
        let seats: Vec<CoreSeat> = (0..6).map(|_| cores.seat().1).collect();
        assert_eq!(cores.connections(), vec![2, 2, 2]);
        let mut seats: Vec<Option<CoreSeat>> = seats.into_iter().map(Some).collect();
        // The two of core 1 leave: the next two go there.
        seats.iter_mut().filter(|s| s.as_ref().is_some_and(|s| s.core == 1)).for_each(|s| *s = None);
        assert_eq!(cores.connections(), vec![2, 0, 2]);
        let next: Vec<CoreSeat> = (0..2).map(|_| cores.seat().1).collect();
        assert!(next.iter().all(|s| s.core == 1));
        assert_eq!(cores.connections(), vec![2, 2, 2]);
    }

    #[test]
    fn a_task_on_a_core_runs_there_and_ends_when_the_threads_stop() {
        let threads = LookupThreads::start(2).expect("threads");
        let (handle, _seat) = threads.cores().seat();
        let name = std::sync::mpsc::channel();
        let sender = name.0.clone();
        handle.spawn(async move {
            let _ = sender.send(std::thread::current().name().map(str::to_string));
        });
        assert_eq!(name.1.recv().expect("ran").as_deref(), Some("rocketns-lookup-0"));
        let never = handle.spawn(std::future::pending::<()>());
        drop(threads);
        let ended = wait_outside(never);
        assert!(ended.is_err_and(|e| e.is_cancelled()), "the pending task was dropped with its runtime");
    }

    /// Waits for a join handle outside of any runtime.
    fn wait_outside<T>(task: tokio::task::JoinHandle<T>) -> Result<T, tokio::task::JoinError> {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(task)
    }
}
