//! The work lane: a second runtime, whose threads run at a lower priority than those that answer lookups.
//!
//! Route lookups are what clients wait for, and what a NameServer mostly does; everything else (a broker's
//! registration, an admin read of a 100,000-topic list, a KV change, and whatever a hostile client sends)
//! can wait a moment. tokio has no task priorities: a lookup waits behind every task ready on its worker,
//! and an attacker's connections, each parsing a 130 KB header or writing a 1.3 MB list, took lookups' p99
//! from 0.4 to 17 ms on one core (perf/README.md, issue 31). So a connection starts on the main runtime,
//! and the first time it sends anything but a lookup (or a frame over 16 KiB) it moves here for the rest of
//! its life: its reads, its requests, its writes, and the blocking-pool work they start (a registration's
//! decoding). The kernel then runs this lane's threads only when lookups leave them the CPU, and preempts
//! them when a lookup arrives. Lookups of a connection that moved (an admin tool's) are answered here too.
//!
//! Nice 10, not lower: at nice 10 the lane still gets about a tenth of a busy core, so registrations go on
//! under a lookup flood; at nice 19 (a sixtieth) they nearly stopped.

/// The lane's threads' `nice`.
pub const NICE: i32 = 10;

/// The lane's runtime. Drop it outside of any runtime (it waits for its threads), after the server.
pub struct WorkLane {
    runtime: tokio::runtime::Runtime,
}

impl WorkLane {
    /// A runtime of `threads` workers (and its blocking pool), every thread at nice [`NICE`].
    pub fn new(threads: usize) -> std::io::Result<WorkLane> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("rocketns-lane")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(WorkLane { runtime })
    }

    pub fn handle(&self) -> tokio::runtime::Handle {
        self.runtime.handle().clone()
    }
}

/// Lowers the calling thread's priority to [`NICE`]; a failure (no permission to change it) leaves it.
fn lower_priority() {
    use rustix::process::setpriority_process;
    let me = Some(rustix::thread::gettid());
    if let Err(e) = setpriority_process(me, NICE) {
        tracing::warn!(error = %e, "the work lane's thread keeps its priority");
    }
}
