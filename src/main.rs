//! `rocketns`: start the NameServer, like `mqnamesrv`.

// Two unsafe calls, the prctl and the allocator's collection below; the library forbids unsafe code altogether.
#![deny(unsafe_code)]
// Functions short enough to read at once (clippy.toml sets the limit: 60 lines).
#![warn(clippy::too_many_lines)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rocketns::config::ClientProperties;
use rocketns::{NameServer, NamesrvConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A drop-in Apache RocketMQ NameServer. Listens on port 9876 unless the config file says otherwise.
#[derive(Parser, Debug)]
#[command(name = "rocketns", version, about)]
struct Cli {
    /// Java properties file with NameServer keys (listenPort, scanNotActiveBrokerInterval, kvConfigPath, …).
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// Print every config key with its effective value, then exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Accepted for compatibility with mqnamesrv; a NameServer has no use for it.
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDRS")]
    namesrv_addr: Option<String>,
    /// A system property, as a Java NameServer's JVM takes them (`JAVA_OPT`): cluster-test mode reads
    /// rocketmq.namesrv.addr, rocketmq.namesrv.domain and rocketmq.namesrv.domain.subgroup.
    #[arg(short = 'D', value_name = "KEY=VALUE", value_parser = parse_define)]
    define: Vec<(String, String)>,
    /// Take the listening sockets over from the rocketns serving with the same upgradeSocketPath, which
    /// then drains and exits: an upgrade that refuses no connection.
    #[arg(long = "take-over")]
    take_over: bool,
    /// While another process (a Java NameServer being replaced) holds listenPort, wait up to SECONDS for
    /// it to go, then listen at once: start this first, stop the other, and the port is closed for about a
    /// millisecond. The routes are copied from namesrvPeers before the wait (list the node being replaced).
    #[arg(long = "wait-for-port", value_name = "SECONDS", conflicts_with = "take_over",
        value_parser = clap::value_parser!(u64).range(0..=86_400))]
    wait_for_port: Option<u64>,
    /// Run the controller alone, like Java's `mqcontroller`: its keys (controllerDLegerPeers, …) from the
    /// `-c` file, its port the peer address of controllerDLegerSelfId; no NameServer port.
    #[arg(long = "controller-only")]
    controller_only: bool,
}

fn parse_define(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').unwrap_or((text, ""));
    if key.is_empty() {
        return Err("expected KEY=VALUE".to_string());
    }
    Ok((key.to_string(), value.to_string()))
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    release_freed_memory_periodically();
    let cli = Cli::parse();
    let config = match load_config(cli.config_file.as_deref()) {
        Ok(c) => c,
        Err(e) => return failed(&e),
    };
    if cli.print_config {
        print!("{}", config.effective().to_properties_text(true));
        return ExitCode::SUCCESS;
    }
    if cli.controller_only {
        return controller_only(&config);
    }
    let threads = match Threads::start() {
        Ok(threads) => threads,
        Err(e) => return failed(&e),
    };
    let code = threads.intake.block_on(serve(cli, config, &threads.lane, threads.lookups.cores()));
    threads.stop();
    code
}

fn failed(message: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("rocketns: {message}");
    ExitCode::FAILURE
}

/// Reads and checks the `-c` file (the defaults without one), and starts logging. The config decides the
/// log's format, so it is read before logging starts, and read again once logging runs for its warnings
/// (unknown keys, doubtful values) to be seen.
fn load_config(file: Option<&std::path::Path>) -> Result<NamesrvConfig, String> {
    let load = || match file {
        Some(path) => NamesrvConfig::load_file(path),
        None => Ok(NamesrvConfig::default()),
    };
    let json_log = matches!(load(), Ok(c) if c.log_format == "json");
    // Logs go to stderr, so that `-p` output stays clean on stdout.
    rocketns::logging::init(json_log);
    let config = load().map_err(|e| e.to_string())?;
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// The server's threads, by what they serve.
struct Threads {
    /// Settled connections' lookups: a single-threaded runtime a core, each connection on one of them for
    /// the rest of its life (src/net/cores.rs says why not one multi-threaded runtime).
    lookups: rocketns::cores::LookupThreads,
    /// Everything but route lookups, at a lower priority (src/net/lane.rs); as many threads as cores, so
    /// that it has them all when lookups leave them.
    lane: rocketns::lane::WorkLane,
    /// The main thread's runtime: connections are accepted, and served until they settle, here
    /// (src/net/intake.rs), so that churn is not served beside the lookups of established connections.
    intake: tokio::runtime::Runtime,
}

impl Threads {
    fn start() -> Result<Self, String> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let lookups = rocketns::cores::LookupThreads::start(cores)
            .map_err(|e| format!("cannot start the lookup threads: {e}"))?;
        let lane = rocketns::lane::WorkLane::new(cores).map_err(|e| format!("cannot start the work lane: {e}"))?;
        let intake = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the intake runtime: {e}"))?;
        Ok(Threads { lookups, lane, intake })
    }

    /// The intake first; the others' threads wait for nothing then, and are stopped outside of any
    /// runtime, as they must be.
    fn stop(self) {
        drop(self.intake);
        drop(self.lookups);
        drop(self.lane);
    }
}

/// Binds (or takes the sockets over), serves until SIGINT or SIGTERM, and says how it ended.
async fn serve(
    cli: Cli,
    config: NamesrvConfig,
    lane: &rocketns::lane::WorkLane,
    lookups: std::sync::Arc<rocketns::cores::LookupCores>,
) -> ExitCode {
    let mut signals = match ShutdownSignals::install() {
        Ok(s) => s,
        Err(e) => return failed(&format!("cannot install signal handlers: {e}")),
    };
    let serialize_type = config.serialize_type.clone();
    let properties = ClientProperties::from_defines(&cli.define);
    let started = if cli.take_over {
        NameServer::take_over(config, cli.config_file, properties).await
    } else {
        let wait = std::time::Duration::from_secs(cli.wait_for_port.unwrap_or(0));
        // A signal while the routes are copied or the port is waited for stops the start, as asked.
        tokio::select! {
            started = NameServer::bind_waiting(config, cli.config_file, properties, wait) => started,
            () = signals.recv_once() => {
                tracing::info!("The Name Server stopped before it served");
                return ExitCode::SUCCESS;
            }
        }
    };
    let server = match started {
        Ok(s) => s.with_work_lane(lane).with_lookup_cores(lookups),
        Err(e) => return failed(&e),
    };
    let addr = server.local_addr().map(|a| a.to_string()).unwrap_or_default();
    tracing::info!("The Name Server boot success. serializeType={}, address {addr}", serialize_type);
    if let Some(metrics) = server.metrics_addr() {
        tracing::info!("metrics, health and route dumps on http://{metrics}/metrics");
    }
    match server.run(signals.recv()).await {
        Ok(()) => {
            tracing::info!("The Name Server stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "The Name Server stopped on a failure");
            ExitCode::FAILURE
        }
    }
}

/// `--controller-only`: the controller on its own runtime (`Controller::start`, as beside the NameServer)
/// until SIGINT or SIGTERM; this thread only waits for it and for the signals. Its work is a few requests a
/// second from brokers, so nothing of the NameServer's threads is started.
fn controller_only(config: &NamesrvConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return failed(&format!("cannot start the signals' runtime: {e}")),
    };
    runtime.block_on(async {
        let signals = match ShutdownSignals::install() {
            Ok(s) => s,
            Err(e) => return failed(&format!("cannot install signal handlers: {e}")),
        };
        let controller = match rocketns::Controller::bind_alone(config) {
            Ok(c) => c,
            Err(e) => return failed(&e),
        };
        let addr = controller.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!("The Controller Server boot success. serializeType={}, address {addr}", config.serialize_type);
        let (task, _own_runtime) = controller.start(signals.recv());
        match task.await {
            Ok(rocketns::ControllerError::Stopped) => {
                tracing::info!("The Controller Server stopped");
                ExitCode::SUCCESS
            }
            Ok(e) => {
                tracing::error!(error = %e, "The Controller Server stopped on a failure");
                ExitCode::FAILURE
            }
            Err(e) => {
                tracing::error!(error = %e, "The Controller Server's task failed");
                ExitCode::FAILURE
            }
        }
    })
}

/// Turns transparent huge pages off for this process (where the kernel's setting is `always`). The first
/// touch of fresh memory then zeroes a 4 KiB page, not a 2 MiB one: with huge pages a worker thread that
/// reached new memory stalled for milliseconds in the kernel, in front of the lookups queued on it, and the
/// allocator's arenas held twice the memory a small table needs (reference table: peak RSS 23-34 MB with
/// them, 11-12 MB without; the same CPU per lookup, and the same peak at 100,000 topics: perf/README.md).
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        #[allow(unsafe_code)]
        let failed = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0;
        if failed {
            eprintln!("rocketns: transparent huge pages stay on: {}", std::io::Error::last_os_error());
        }
    }
}

/// How often memory the allocator holds freed is handed back to the system.
const RELEASE_FREED_MEMORY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Hands memory freed back to the system every few seconds, from a thread of its own. mimalloc releases
/// freed pages (program-wide, from its arenas) only when a thread that allocates gets round to it, and the
/// route writer's threads of the blocking pool park for good after a registration storm, and a million
/// routes' worth of freed pages stayed resident (perf/README.md, "Restart storms"). Releasing at once
/// instead (`MIMALLOC_PURGE_DELAY=0`) does the same for memory but makes every lookup's frees dearer.
fn release_freed_memory_periodically() {
    let spawned = std::thread::Builder::new().name("rocketns-release-memory".into()).spawn(|| {
        loop {
            std::thread::sleep(RELEASE_FREED_MEMORY_EVERY);
            // SAFETY: takes a plain flag; collects this thread's (empty) heap and purges freed arena memory.
            #[allow(unsafe_code)]
            unsafe {
                libmimalloc_sys::mi_collect(true)
            };
        }
    });
    if let Err(e) = spawned {
        eprintln!("rocketns: freed memory is released only as the allocator gets round to it: {e}");
    }
}

/// Listens for SIGINT and SIGTERM from the moment it is created, so a signal sent right after the boot line
/// is never missed.
struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(ShutdownSignals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
    }

    async fn recv(mut self) {
        self.recv_once().await;
    }

    async fn recv_once(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => tracing::info!("SIGINT received, stopping"),
            _ = self.terminate.recv() => tracing::info!("SIGTERM received, stopping"),
        }
    }
}
