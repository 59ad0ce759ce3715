//! What `hostile` and `storm` measure the server with, while they load it: paced lookups on a thread and
//! runtime of their own (ahead of the load generator's other threads where allowed), and the server's
//! peak resident set.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::{encode, read_reply};

/// GET_ROUTEINFO_BY_TOPIC for `topic`.
pub fn lookup(topic: &str) -> rocketns::remoting::RemotingCommand {
    rocketns::remoting::RemotingCommand::request(105, [("topic", topic)].into_iter().collect())
}

/// Runs `count` lookup tasks (`task(i)`) on a thread and runtime of their own, at real-time priority where
/// allowed and on core `cpu` alone where given: the load generator's own work (not the server's) must not
/// show as lookups' latency. The thread returns what the tasks returned.
pub fn lookup_thread<T, F, Fut>(count: usize, cpu: Option<usize>, task: F) -> std::thread::JoinHandle<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    std::thread::spawn(move || {
        if let Err(e) = ahead_of_the_load() {
            eprintln!("lookups at the load's priority ({e}): their latency includes the generator's CPU");
        }
        if let Some(cpu) = cpu
            && let Err(e) = on_core(cpu)
        {
            eprintln!("lookups not moved to core {cpu} ({e}): they share the generator's cores");
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let tasks: Vec<_> = (0..count).map(|i| tokio::spawn(task(i))).collect();
            let mut all = Vec::new();
            for t in tasks {
                if let Ok(r) = t.await {
                    all.push(r);
                }
            }
            all
        })
    })
}

/// One connection's lookups, one at a time, every `pace`, until `done()`: each answered SUCCESS is
/// `record`ed with when it was asked and how long it took; returns how many failed (a connection that
/// fails is opened again).
pub async fn paced_lookups(
    addr: &str,
    pace: Duration,
    mut topic: impl FnMut() -> String,
    mut record: impl FnMut(Instant, Duration),
    done: impl Fn() -> bool,
) -> u64 {
    let mut failed = 0;
    let Ok(mut s) = TcpStream::connect(addr).await else { return 1 };
    let _ = s.set_nodelay(true);
    let mut next = Instant::now();
    while !done() {
        tokio::time::sleep_until(next).await;
        next = (next + pace).max(Instant::now() - pace);
        let frame = encode(&lookup(&topic()));
        let asked = Instant::now();
        let answered = async {
            s.write_all(&frame).await?;
            read_reply(&mut s).await
        };
        match tokio::time::timeout(Duration::from_secs(10), answered).await {
            Ok(Ok(r)) if r.code == 0 => record(asked, asked.elapsed()),
            Ok(Ok(_)) => failed += 1,
            _ => {
                failed += 1;
                match TcpStream::connect(addr).await {
                    Ok(new) => s = new,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
    }
    failed
}

/// The server's resident set now, and its peak since the last reset, in bytes.
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |field: &str| -> Option<u64> {
        text.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
    };
    Some((kb("VmRSS:")? * 1024, kb("VmHWM:")? * 1024))
}

/// The server's peak resident set, sampled from /proc every `every` on a thread of its own until stopped.
pub struct PeakRss {
    sampling: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl PeakRss {
    /// Samples `pid`, if any (without one, the peak is 0).
    pub fn start(pid: Option<u32>, every: Duration) -> PeakRss {
        let sampling = Arc::new(AtomicBool::new(true));
        let thread = pid.map(|pid| {
            let sampling = sampling.clone();
            std::thread::spawn(move || {
                let mut peak = 0;
                while sampling.load(Ordering::Relaxed) {
                    if let Some((now, hwm)) = rss(pid) {
                        peak = peak.max(now).max(hwm);
                    }
                    std::thread::sleep(every);
                }
                peak
            })
        });
        PeakRss { sampling, thread }
    }

    pub fn stop(mut self) -> u64 {
        self.sampling.store(false, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

/// Milliseconds at quantile `q` of a histogram of nanoseconds.
pub fn ms(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

/// One line of a phase's lookups: how many, p50, p99, p99.9 and max.
pub fn print_lookups(phase: &str, h: &hdrhistogram::Histogram<u64>) {
    println!(
        "lookups {phase}: {} answered, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        h.len(),
        ms(h, 0.5),
        ms(h, 0.99),
        ms(h, 0.999),
        h.max() as f64 / 1e6
    );
}

/// Puts the calling thread (the lookups') ahead of every other thread of the load generator on a shared
/// core, as a real-time thread (SCHED_FIFO, the lowest priority; needs root): the load's own CPU, which is
/// the generator's and not the server's, must not show as lookups' latency. A woken real-time thread
/// preempts the others at once, where a higher nice only gives it a larger share, after their time slice.
fn ahead_of_the_load() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler reads `param`, which lives until it returns, for the calling thread (0).
    #[allow(unsafe_code)]
    let failed = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0;
    if failed { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Moves the calling thread to core `cpu`, away from the rest of the generator (`taskset` put it
/// elsewhere): sending a storm's hundreds of megabytes over loopback costs its sender's core softirq time,
/// which runs ahead of any thread, so lookups measured on that core see the generator's sending as latency.
fn on_core(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it, bounds checked by the libc crate.
    #[allow(unsafe_code)]
    let failed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
    };
    if failed { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// A histogram's count and quantiles, as the report's JSON has them.
pub fn stats_json(h: &hdrhistogram::Histogram<u64>) -> String {
    format!(
        r#"{{"n":{},"p50_ms":{:.3},"p99_ms":{:.3},"p999_ms":{:.3},"max_ms":{:.3}}}"#,
        h.len(),
        ms(h, 0.5),
        ms(h, 0.99),
        ms(h, 0.999),
        h.max() as f64 / 1e6
    )
}
