//! File descriptors as a budget: every kind of input that holds one has a cap of its own, and their sum,
//! with a reserve for the server's own files, fits the process's limit (`RLIMIT_NOFILE`). Where it does
//! not, `serverMaxConnections` is lowered to fit at start, and the log says so: remoting connections are
//! refused at their cap (accepted and closed, which needs a descriptor for a moment, also reserved), and
//! nothing else (the HTTP port, the controller's port, the 905 notifier's sends and the host names it
//! resolves) can take the descriptors that remoting accepts, the route file or the KV store need. Before,
//! 1,128 HTTP connections took every descriptor of a process whose limit was 1,024 and remoting accepts
//! failed (issue 44).

use crate::config::NamesrvConfig;

/// The server's own files and the descriptors its runtime keeps: the KV store, the config and route
/// files and their temporaries, the audit log, stdio, each runtime's epoll and wake-up descriptors
/// (a few a core), the upgrade socket, the address server's and the product environment's connections.
pub const OWN_FILES: u64 = 64;
/// Descriptors a core's runtimes keep beyond [`OWN_FILES`].
pub const PER_CORE: u64 = 4;
/// Remoting connections accepted beyond `serverMaxConnections` at once, to be closed: each holds a
/// descriptor until it is.
pub const REFUSALS: u64 = 16;
/// What the host names of outbound addresses (a broker's, for the 905 notices) hold while resolved.
pub const RESOLUTIONS: u64 = (crate::outbound::resolve::MAX_RESOLUTIONS * crate::outbound::resolve::FILES_EACH) as u64;
/// The fewest remoting connections a server is started with.
pub const MIN_CONNECTIONS: u64 = 64;

/// What each kind may hold, by the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptors {
    /// The process's limit, as read at start.
    pub limit: u64,
    /// Remoting connections at most: `serverMaxConnections`, or less to fit.
    pub remoting: u64,
    /// Everything else: own files, the HTTP port, the controller, outbound sends, refusals.
    pub others: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "the process may open {limit} files (RLIMIT_NOFILE), fewer than the {need} {what} needs: raise the limit \
     (ulimit -n, LimitNOFILE=) or turn off what it does not use"
)]
pub struct TooFewDescriptors {
    pub limit: u64,
    pub need: u64,
    /// What needs them: the configuration with its fewest remoting connections, or the controller alone.
    pub what: &'static str,
}

impl Descriptors {
    /// How `limit` descriptors are shared under `config` on `cores` cores.
    pub fn fit(config: &NamesrvConfig, limit: u64, cores: usize) -> Result<Descriptors, TooFewDescriptors> {
        let mut others = own(cores) + REFUSALS;
        if config.metrics_port != 0 {
            // Its connections, its listener, and one accepted to be refused while all are held.
            others += crate::ops::http_listener::DESCRIPTORS as u64 + 2;
        }
        if config.notify_min_broker_id_changed {
            others += crate::outbound::notify::MAX_IN_FLIGHT as u64;
        }
        if config.enable_controller_in_namesrv {
            others += controller(config);
        }
        let room = limit.saturating_sub(others);
        if room < MIN_CONNECTIONS {
            let what = "this configuration, with 64 remoting connections,";
            return Err(TooFewDescriptors { limit, need: others + MIN_CONNECTIONS, what });
        }
        Ok(Descriptors { limit, remoting: config.server_max_connections.min(room), others })
    }
}

/// What the process holds whatever it serves: its own files, its runtimes', host names being resolved.
fn own(cores: usize) -> u64 {
    OWN_FILES + PER_CORE * cores as u64 + RESOLUTIONS
}

/// This process's limit, first raised to its hard limit as the JVM raises it (`-XX:+MaxFDLimit`), and
/// its cores.
fn this_process() -> (u64, usize) {
    if let Err(e) = raise_limit() {
        tracing::warn!(error = %e, "the open-files limit could not be raised to its hard limit");
    }
    (current_limit(), std::thread::available_parallelism().map_or(1, usize::from))
}

/// The controller's connections, its peers', notices and log files.
fn controller(config: &NamesrvConfig) -> u64 {
    let peers = config.controller_dleger_peers.split(';').filter(|p| !p.trim().is_empty()).count();
    crate::controller::descriptors(peers)
}

/// With `--controller-only`, whether `limit` descriptors hold the controller's and the process's own
/// files: none of the NameServer's are opened, and a controller short of descriptors would fail its
/// peers' accepts rather than refuse strangers at its cap.
pub fn fit_controller_only(config: &NamesrvConfig, limit: u64, cores: usize) -> Result<u64, TooFewDescriptors> {
    let need = own(cores) + controller(config);
    if limit < need {
        return Err(TooFewDescriptors { limit, need, what: "the controller" });
    }
    Ok(need)
}

/// [`fit_controller_only`] with this process's limit, first raised to its hard limit.
pub fn controller_only_in_this_process(config: &NamesrvConfig) -> Result<u64, TooFewDescriptors> {
    let (limit, cores) = this_process();
    let need = fit_controller_only(config, limit, cores)?;
    size_table(need);
    Ok(need)
}

impl Descriptors {
    /// [`Descriptors::fit`] with this process's limit, first raised to its hard limit, and its cores; the
    /// log says when `serverMaxConnections` is lowered.
    pub fn of_this_process(config: &NamesrvConfig) -> Result<Descriptors, TooFewDescriptors> {
        let (limit, cores) = this_process();
        let fits = Descriptors::fit(config, limit, cores)?;
        if fits.remoting < config.server_max_connections {
            tracing::warn!(
                open_files = fits.limit,
                held_by_others = fits.others,
                "serverMaxConnections={} lowered to {}: the process may open {} files (raise ulimit -n or LimitNOFILE=)",
                config.server_max_connections,
                fits.remoting,
                fits.limit
            );
        }
        size_table(fits.remoting + fits.others);
        Ok(fits)
    }
}

/// Sizes the kernel's descriptor table of this process for `count` descriptors at once, so that it never
/// grows while connections arrive. The kernel doubles the table when a new descriptor does not fit, and
/// in a process of many threads the doubling waits for an RCU grace period, with every thread that opens a
/// descriptor meanwhile waiting too: under the hostile fleet the intake's `accept4` waited 13-15 ms each
/// time, three times within 70 ms as 1,800 connections arrived, and lookups on new connections with it
/// (issue 44). The table costs the kernel 8 bytes a descriptor, rounded up to a power of two (512 KiB
/// for 65,536), and never shrinks, so it is sized for at most [`TABLE_SIZED_FOR`]; opening one descriptor
/// at the highest number grows it at once, and closing it keeps the size.
/// A table that cannot be sized is said in the log; it grows as before.
fn size_table(count: u64) {
    let highest = count.min(TABLE_SIZED_FOR).saturating_sub(1) as i32;
    // The root directory, which every process can open (/dev/null may be missing in a container).
    let sized = std::fs::File::open("/").and_then(|probe| Ok(rustix::io::fcntl_dupfd_cloexec(&probe, highest)?));
    if let Err(e) = sized {
        tracing::warn!(error = %e, "the descriptor table was not sized at start: it grows as connections come");
    }
}

/// Descriptors the table is sized for at most at start (8 MiB of kernel memory): a larger budget, from
/// a raised `serverMaxConnections` and limit, grows the table as connections come.
const TABLE_SIZED_FOR: u64 = 1 << 20;

/// Raises the process's soft limit of open files to its hard limit, and returns it: the budget is shared
/// out of what the process may have.
pub fn raise_limit() -> std::io::Result<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit)?;
    }
    Ok(current_limit())
}

/// The process's soft limit of open files now (no limit reads as `u64::MAX`).
fn current_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> NamesrvConfig {
        let mut config = NamesrvConfig::default();
        for line in extra.lines() {
            let (key, value) = line.split_once('=').unwrap();
            config.set(key, value).unwrap();
        }
        config
    }

    /// The shipped unit's limit fits the defaults; a 1,024 limit lowers serverMaxConnections to what is
    /// left once the HTTP port, the notifier and the server's own files have theirs.
    #[test]
    fn remoting_connections_get_what_the_others_leave() {
        let fits = Descriptors::fit(&config(""), 65_536, 2).unwrap();
        assert_eq!(fits.remoting, 50_000);
        let all = config("metricsPort=9877\nnotifyMinBrokerIdChanged=true");
        let small = Descriptors::fit(&all, 1_024, 2).unwrap();
        assert_eq!(small.others, OWN_FILES + 2 * PER_CORE + REFUSALS + RESOLUTIONS + 82 + 16);
        assert_eq!(small.remoting + small.others, 1_024);
        let held = config("serverMaxConnections=500");
        assert_eq!(Descriptors::fit(&held, 1_024, 2).unwrap().remoting, 500);
    }

    /// A limit that leaves too few remoting connections stops the start, saying what it needs.
    #[test]
    fn too_small_a_limit_is_refused() {
        let controller = config("enableControllerInNamesrv=true");
        let refused = Descriptors::fit(&controller, 1_024, 2).unwrap_err();
        assert!(refused.need > 1_024, "{refused}");
        assert!(refused.to_string().contains("RLIMIT_NOFILE"), "{refused}");
        assert!(Descriptors::fit(&controller, 4_096, 2).is_ok());
    }

    /// `--controller-only` needs the controller's descriptors and the process's own, no NameServer's:
    /// a 1,024 limit is short of its 1,024 connections, and says so.
    #[test]
    fn the_controller_alone_needs_its_connections() {
        let group = config("controllerDLegerPeers=n0-127.0.0.1:9878;n1-127.0.0.1:9879;n2-127.0.0.1:9880");
        let refused = fit_controller_only(&group, 1_024, 2).unwrap_err();
        assert!(refused.to_string().contains("the controller needs"), "{refused}");
        let need = fit_controller_only(&group, 65_536, 2).unwrap();
        assert_eq!(need, OWN_FILES + 2 * PER_CORE + RESOLUTIONS + crate::controller::descriptors(3));
    }
}
