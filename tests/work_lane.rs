//! The work lane's floor (src/net/lane.rs): its threads run SCHED_IDLE; when threads at the normal priority
//! take every core (a lookup flood does), the watchdog lifts them to nice 10, a broker's registration is
//! answered, and once the cores are free again they go back to SCHED_IDLE. And the route writer's work is
//! the lane's: none of it runs on the threads of the runtime that serves lookups. And a storm of brokers
//! registering at once starts no more of the lane's threads than its cap. The tests count this process's
//! threads by name, so they run one at a time.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use common::*;
use rocketns::NameServer;
use rocketns::lane::WorkLane;

/// Held by each test: they count this process's threads by name.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A server on `runtime` that serves all but lookups on `lane`: its address, what stops it, and its task.
fn serve_on_lane(
    runtime: &tokio::runtime::Runtime,
    lane: &WorkLane,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, Serving) {
    runtime.block_on(async {
        let server = NameServer::bind(test_config(), None).await.expect("bind").with_work_lane(lane);
        let addr = server.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        (addr, stop, task)
    })
}

type Serving = tokio::task::JoinHandle<Result<(), rocketns::server::ServeError>>;

const SCHED_OTHER: u32 = 0;
const SCHED_IDLE: u32 = 5;

/// The CPU time, in clock ticks, that this process's threads named `name` have used (stat's utime and stime).
fn cpu_ticks(name: &str) -> u64 {
    thread_stats(name).iter().map(|f| f[14 - 3] + f[15 - 3]).sum()
}

/// The scheduling policy of each of this process's threads named `rocketns-lane`.
fn lane_policies() -> Vec<u32> {
    thread_policies("rocketns-lane")
}

#[test]
fn a_starved_lane_is_lifted_and_lowered_again() {
    let _alone = one_at_a_time();
    let lane = WorkLane::new(1).expect("work lane");
    if !lane.is_idle_policy() {
        eprintln!("SKIPPED: no permission to lift a SCHED_IDLE thread here (RLIMIT_NICE < 10, no CAP_SYS_NICE)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let (addr, stop, task) = serve_on_lane(&runtime, &lane);
    wait_until("the lane's worker at SCHED_IDLE", Duration::from_secs(5), || lane_policies().contains(&SCHED_IDLE));
    assert_eq!(lane.lifts(), 0, "lifted while nothing took the cores");

    // As many spinning threads at the normal priority as there are cores: the lane gets next to nothing.
    let spin = Arc::new(AtomicBool::new(true));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinners: Vec<_> = (0..cores)
        .map(|_| {
            let spin = spin.clone();
            std::thread::spawn(move || {
                while spin.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // A broker of 20,000 topics: tens of milliseconds of the lane's CPU, which SCHED_IDLE alone hands out
    // a few hundred microseconds a second.
    let names: Vec<String> = (0..20_000).map(|i| format!("topic-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 4, 4)).collect();
    let reply = runtime.block_on(async {
        let mut c = Client::connect(addr).await;
        let b = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911");
        tokio::time::timeout(Duration::from_secs(30), register(&mut c, &b, dv(1), &topics))
            .await
            .expect("a registration answered while every core spins")
    });
    assert_eq!(reply.code, 0, "registration: {:?}", reply.remark);
    assert!(lane.lifts() >= 1, "the registration waited for the CPU, yet the lane was never lifted");
    spin.store(false, Ordering::Relaxed);
    spinners.into_iter().for_each(|s| s.join().expect("spinner"));

    wait_until("the lane back at SCHED_IDLE once the cores are free", Duration::from_secs(10), || {
        let policies = lane_policies();
        !policies.is_empty() && policies.iter().all(|p| *p == SCHED_IDLE) && !policies.contains(&SCHED_OTHER)
    });
    let _ = stop.send(());
    runtime.block_on(async { task.await.expect("server task").expect("stopped cleanly") });
    drop(runtime);
    drop(lane);
}

/// The route writer's batches (building and publishing snapshots, freeing old ones), the saves and the
/// scans run on the lane and its blocking pool, not on the runtime the server runs on, whose threads answer
/// lookups: on a busy core they took a lookup's CPU for milliseconds at a time (a restart storm's lookups'
/// p99 went from 0.2 to 3.6 ms). The server runs here on a current-thread runtime whose blocking pool's
/// threads are named `rocketns-serve`; a broker of 50,000 topics registers (in turn, three times with a
/// new DataVersion, and the routes are saved at shutdown): those threads use no CPU for it, where with the
/// writer spawned beside the lookups they used 58 clock ticks to the lane's 155 (0 to 217 now).
#[test]
fn the_writers_work_runs_on_the_lane() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().expect("temp dir");
    let lane = WorkLane::new(1).expect("work lane");
    let runtime =
        tokio::runtime::Builder::new_current_thread().thread_name("rocketns-serve").enable_all().build().expect("rt");
    let names: Vec<String> = (0..50_000).map(|i| format!("topic-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 4, 4)).collect();
    runtime.block_on(async {
        let mut config = test_config();
        config.kv_config_path = dir.path().join("kv.json").display().to_string();
        let server = NameServer::bind(config.clone(), None).await.expect("bind").with_work_lane(&lane);
        let addr = server.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let mut c = Client::connect(addr).await;
        let b = Broker::new("DefaultCluster", "broker-a", 0, "127.0.0.1:10911");
        for version in 1..=3 {
            assert_eq!(register(&mut c, &b, dv(version), &topics).await.code, 0);
        }
        let _ = stop.send(());
        task.await.expect("server task").expect("stopped cleanly");
        assert!(config.route_snapshot_file().exists(), "the routes were saved at shutdown");
    });
    let (serve, on_lane) = (cpu_ticks("rocketns-serve"), cpu_ticks("rocketns-lane"));
    eprintln!("CPU ticks: the server's runtime's blocking threads {serve}, the lane's threads {on_lane}");
    assert!(on_lane > 0, "the lane did the work");
    assert!(serve * 20 <= on_lane, "{serve} ticks beside the lookups, {on_lane} on the lane");
    drop(runtime);
    drop(lane);
}

/// 600 brokers registering at once, each a body of 60 topics (under 16 KiB: decoded without a turn, on the
/// lane's blocking pool): every one is answered, and the lane never has more threads than its worker and
/// its blocking pool's cap. Uncapped, tokio starts a blocking thread whenever none is idle, up to 512 (269
/// for a storm of 1,000 brokers), each keeping its allocator's pages (src/net/lane.rs).
#[test]
fn a_storm_starts_no_more_lane_threads_than_the_cap() {
    let _alone = one_at_a_time();
    let lane = WorkLane::new(1).expect("work lane");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let (addr, stop, task) = serve_on_lane(&runtime, &lane);
    let serving = std::thread::spawn(move || runtime.block_on(task));
    let names: Vec<String> = (0..60).map(|i| format!("storm-topic-{i}")).collect();
    let topics: Vec<(&str, i32, i32)> = names.iter().map(|n| (n.as_str(), 8, 8)).collect();
    let frames: Vec<Vec<u8>> = (0..600)
        .map(|i| {
            let (name, broker_addr) = (format!("broker-{i}"), format!("127.0.0.1:{}", 20_000 + i));
            let b = Broker::new("DefaultCluster", &name, 0, &broker_addr);
            frame_bytes(&register_request(&b, dv(1), &topics))
        })
        .collect();
    assert!(frames.iter().all(|f| f.len() <= 16 * 1024), "each frame is a small one");
    let mut brokers: Vec<std::net::TcpStream> =
        frames.iter().map(|_| std::net::TcpStream::connect(addr).expect("connect")).collect();
    let mut most = 0;
    for (stream, frame) in brokers.iter_mut().zip(&frames) {
        std::io::Write::write_all(stream, frame).expect("send");
        most = most.max(thread_stats("rocketns-lane").len());
    }
    for stream in &mut brokers {
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let reply = blocking_reply(stream).expect("a registration answered");
        assert_eq!(reply.code, 0, "registration: {:?}", reply.remark);
        most = most.max(thread_stats("rocketns-lane").len());
    }
    // Idle blocking threads stay 10 s: the count now is at least the most there were at once.
    most = most.max(thread_stats("rocketns-lane").len());
    let cap = 1 + 1 + rocketns::lane::BLOCKING_BESIDE_WORKERS;
    eprintln!("the lane's threads: at most {most} at once (its cap: {cap})");
    assert!(most <= cap, "{most} lane threads, more than its worker and its blocking pool's cap ({cap})");
    let _ = stop.send(());
    serving.join().expect("server thread").expect("server task").expect("stopped cleanly");
    drop(lane);
}
