//! The work lane: a second runtime, whose threads run only when the threads that answer lookups leave them
//! the CPU.
//!
//! Route lookups are what clients wait for, and what a NameServer mostly does; everything else (a broker's
//! registration, an admin read of a 100,000-topic list, a KV change, and whatever a hostile client sends)
//! can wait a moment. tokio has no task priorities: a lookup waits behind every task ready on its worker,
//! and an attacker's connections, each parsing a 130 KB header or writing a 1.3 MB list, took lookups' p99
//! from 0.4 to 17 ms on one core (perf/README.md, issue 31). So a connection starts on the intake
//! (`intake.rs`) and, once settled, the runtime that answers lookups; the first time it sends anything but a
//! lookup (or a frame over 16 KiB) it moves here for the rest of its life: its reads, its requests, its writes, and the blocking-pool work they start (a registration's
//! decoding). Lookups of a connection that moved (an admin tool's) are answered here too.
//!
//! The lane's threads are SCHED_IDLE, not merely niced: at nice 10 the kernel still owes them a tenth of a
//! busy core and pays it at its scheduler tick, taking the core from a lookup's worker for a whole tick
//! (4 ms at HZ=250) about a dozen times a second, which was most of what lookups waited for under a flood
//! of large admin requests (p99 4.7 × quiet; 1.2 × with SCHED_IDLE). SCHED_IDLE alone would let a lookup
//! flood that takes every core starve registrations and heartbeats until their brokers expire, so the lane
//! has a floor: a watchdog thread at the normal priority reads the kernel's account of the lane's threads
//! (`/proc/self/task/*/schedstat`) every [`WATCH`], and when they spent more than half of it waiting for a
//! CPU yet ran less than [`FLOOR_PERCENT`] % of it, lifts them to SCHED_OTHER at nice [`NICE`] (a tenth of a
//! busy core, enough for registrations to go on; at nice 19 they nearly stopped) for [`LIFTED_FOR`].
//! Other processes on the machine count as lookups do: the lane runs on CPUs that nothing else wants, and
//! a busy neighbour (a broker on the same host) gets it lifted the same way. Going back up from SCHED_IDLE
//! needs `RLIMIT_NICE` of at least [`NICE`] (`LimitNICE=10` in systemd) or CAP_SYS_NICE; without either,
//! or without schedstat, the lane stays at nice 10 and says so at start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The lane's threads' `nice`, whether lifted or kept at it for want of permission.
pub const NICE: i32 = 10;
/// How often the watchdog reads the lane's threads' schedstat.
pub const WATCH: Duration = Duration::from_millis(100);
/// Below this share of one core (with work waiting for a CPU) the lane is starved and is lifted.
pub const FLOOR_PERCENT: u64 = 5;
/// How long the lane stays lifted before the watchdog lowers it again.
pub const LIFTED_FOR: Duration = Duration::from_secs(1);
/// Blocking-pool threads the lane may have beyond one a worker. What holds one for long takes a turn: large
/// bodies' decodings (half the cores at once), the route writer's batch, the route file's save, the KV
/// store's and the config file's writes, two whole-table encodings; all of them at once still leave small
/// bodies' decodings (no turn: microseconds each) a thread a worker. Without a cap tokio starts up to 512:
/// 1,000 brokers registering at once started 269, each keeping its allocator's pages, and back-to-back
/// storms took the server's RSS from 85 to 305 MB in 15 storms (to 46 MB once the threads had exited).
pub const BLOCKING_BESIDE_WORKERS: usize = 8;

/// The lane's runtime. Drop it outside of any runtime (it waits for its threads), after the server.
pub struct WorkLane {
    runtime: tokio::runtime::Runtime,
    floor: Arc<Floor>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

/// The lane's threads and the policy they run at.
struct Floor {
    /// SCHED_IDLE is used only where lifting back out of it was tried and allowed.
    idle_allowed: bool,
    threads: Mutex<Threads>,
    lifts: AtomicU64,
    stop: AtomicBool,
}

#[derive(Default)]
struct Threads {
    tids: Vec<i32>,
    lifted: bool,
}

impl WorkLane {
    /// A runtime of `threads` workers (and a blocking pool of at most `threads` + [`BLOCKING_BESIDE_WORKERS`]),
    /// every thread SCHED_IDLE with its floor (or at nice [`NICE`] where it could not be lifted again), and the
    /// watchdog thread that keeps the floor.
    pub fn new(threads: usize) -> std::io::Result<WorkLane> {
        let floor = Arc::new(Floor {
            idle_allowed: idle_round_trip_allowed(),
            threads: Mutex::new(Threads::default()),
            lifts: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        if !floor.idle_allowed {
            tracing::info!(
                "the work lane runs at nice {NICE}, not SCHED_IDLE: its floor needs /proc/self/task/*/schedstat and LimitNICE={NICE} or CAP_SYS_NICE"
            );
        }
        let (on_start, on_stop) = (floor.clone(), floor.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .max_blocking_threads(threads.max(1) + BLOCKING_BESIDE_WORKERS)
            .thread_name("rocketns-lane")
            .on_thread_start(move || on_start.join())
            .on_thread_stop(move || on_stop.leave())
            .enable_all()
            .build()?;
        let watched = floor.clone();
        let watchdog = std::thread::Builder::new().name("rocketns-lane-floor".into()).spawn(move || watched.watch())?;
        Ok(WorkLane { runtime, floor, watchdog: Some(watchdog) })
    }

    pub fn handle(&self) -> tokio::runtime::Handle {
        self.runtime.handle().clone()
    }

    /// Whether the lane's threads run SCHED_IDLE when not lifted (false: at nice [`NICE`], for want of
    /// permission to lift them).
    pub fn is_idle_policy(&self) -> bool {
        self.floor.idle_allowed
    }

    /// How many times the watchdog has lifted the lane since it started.
    pub fn lifts(&self) -> u64 {
        self.floor.lifts.load(Ordering::Relaxed)
    }
}

impl Drop for WorkLane {
    /// Stops the watchdog; the runtime, dropped next, waits for its threads.
    fn drop(&mut self) {
        self.floor.stop.store(true, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.thread().unpark();
            let _ = watchdog.join();
        }
    }
}

impl Floor {
    /// Runs on each new lane thread: nice [`NICE`], then SCHED_IDLE unless the lane is lifted.
    fn join(&self) {
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), NICE) {
            tracing::warn!(error = %e, "the work lane's thread keeps its priority");
            return;
        }
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        if self.idle_allowed && !threads.lifted {
            set_policy(tid.as_raw_nonzero().get(), libc::SCHED_IDLE);
        }
        threads.tids.push(tid.as_raw_nonzero().get());
    }

    /// Runs on a lane thread as it ends, before its id can be reused.
    fn leave(&self) {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        self.threads.lock().unwrap_or_else(PoisonError::into_inner).tids.retain(|t| *t != tid);
    }

    /// The watchdog: every [`WATCH`], lifts the lane if it was starved over the last one; lowers it again
    /// after [`LIFTED_FOR`].
    fn watch(&self) {
        if !self.idle_allowed {
            return;
        }
        let mut last: HashMap<i32, SchedStat> = HashMap::new();
        let mut lifted_at = Instant::now();
        let mut told_at: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(WATCH);
            let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut ran, mut waited) = (0, 0);
            let mut now = HashMap::with_capacity(threads.tids.len());
            for tid in &threads.tids {
                let Some(stat) = SchedStat::of(*tid) else { continue };
                if let Some(before) = last.get(tid) {
                    ran += stat.ran_ns.saturating_sub(before.ran_ns);
                    waited += stat.waited_ns.saturating_sub(before.waited_ns);
                }
                now.insert(*tid, stat);
            }
            last = now;
            let window = WATCH.as_nanos() as u64;
            let starved = waited > window / 2 && ran < window * FLOOR_PERCENT / 100;
            if !threads.lifted && starved {
                threads.lifted = true;
                threads.tids.iter().for_each(|tid| set_policy(*tid, libc::SCHED_OTHER));
                lifted_at = Instant::now();
                let lifts = self.lifts.fetch_add(1, Ordering::Relaxed) + 1;
                if told_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                    told_at = Some(Instant::now());
                    tracing::warn!(
                        ran_us = ran / 1000,
                        waited_us = waited / 1000,
                        lifts,
                        "lookups left the work lane no CPU: lifted to nice {NICE} (logged once a minute)"
                    );
                }
            } else if threads.lifted && lifted_at.elapsed() >= LIFTED_FOR {
                threads.lifted = false;
                threads.tids.iter().for_each(|tid| set_policy(*tid, libc::SCHED_IDLE));
            }
        }
    }
}

/// A thread's time on a CPU and waiting for one, from `/proc/self/task/TID/schedstat`.
struct SchedStat {
    ran_ns: u64,
    waited_ns: u64,
}

impl SchedStat {
    fn of(tid: i32) -> Option<SchedStat> {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        Some(SchedStat { ran_ns: fields.next()??, waited_ns: fields.next()?? })
    }
}

/// Whether the watchdog can see a thread's schedstat here, and a thread may go to SCHED_IDLE and come back
/// to SCHED_OTHER at nice [`NICE`]: tried on a thread of its own, which then ends.
fn idle_round_trip_allowed() -> bool {
    let tried = std::thread::Builder::new().name("rocketns-lane-probe".into()).spawn(|| {
        let tid = rustix::thread::gettid();
        SchedStat::of(tid.as_raw_nonzero().get()).is_some()
            && rustix::process::setpriority_process(Some(tid), NICE).is_ok()
            && sched_setscheduler(tid.as_raw_nonzero().get(), libc::SCHED_IDLE).is_ok()
            && sched_setscheduler(tid.as_raw_nonzero().get(), libc::SCHED_OTHER).is_ok()
    });
    tried.ok().and_then(|t| t.join().ok()).unwrap_or(false)
}

fn set_policy(tid: i32, policy: libc::c_int) {
    if let Err(e) = sched_setscheduler(tid, policy) {
        tracing::warn!(error = %e, tid, policy, "cannot change a work lane thread's scheduling policy");
    }
}

/// `sched_setscheduler(2)` for one thread, to a policy without a static priority (SCHED_OTHER, SCHED_IDLE),
/// keeping its nice value. rustix has no wrapper for it.
fn sched_setscheduler(tid: i32, policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: the kernel only reads `param`, which lives until the call returns. The tid is this process's
    // own: a lane thread takes itself off the list, under its lock, before it ends.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}
