//! The audit log: one structured line for every request that changes state other than a broker's own
//! registration, refused attempts included (`auditLogPath`, `rocketns_audit_events_total`).
//!
//! Without `auditLogPath` a line goes to the ordinary log under the target `rocketns::audit`. With it, lines
//! are appended to that file as JSON lines by a thread of its own, so no request handler ever waits for the
//! disk: a handler only queues the line (a bounded queue; a line that finds it full is counted as lost and
//! warned about, never waited for). Each line is one `write` to a file opened with `O_APPEND`, not fsynced:
//! a killed rocketns loses no line (the kernel has it), a machine crash may lose the last few seconds. An
//! fsync per line would let anyone who can reach the port turn refused writes into a disk flush each; the
//! changes themselves (KV, config) are fsynced by their own stores before SUCCESS.

use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use serde_json::{Map, Value, json};

use crate::error::shown;
use crate::ops::metrics::Metrics;
use crate::processor::acl::{ACCESS_KEY, SIGNATURE};
use crate::protocol::codes::{controller_request, request, response};
use crate::remoting::RemotingCommand;

/// Lines waiting for the file at most, and their bytes at most: a line that finds either full is lost
/// (counted), never waited for.
const QUEUE: usize = 4096;
pub const QUEUE_BYTES: usize = 4 << 20;
/// Longest request body kept in a line (UPDATE_NAMESRV_CONFIG's properties, REGISTER_TOPIC_IN_NAMESRV's
/// route); the line says how long the whole body was.
const BODY_SHOWN: usize = 2048;
/// Header fields kept in a line, and how much of each key and value: a line is at most about 6 KiB,
/// whatever a client sends (values are cut as remarks are, saying their whole length).
const FIELDS_SHOWN: usize = 16;
const KEY_SHOWN: usize = 64;
const VALUE_SHOWN: usize = 128;
/// Lines a second on average, and at once: a client repeating an audited request cannot make the server
/// write more than 600 kB of audit a second, to the file or to the log. Lines beyond are counted lost.
const LINES_PER_SECOND: u32 = 100;
const LINES_AT_ONCE: u32 = 1000;
/// The log target of audit lines without `auditLogPath`.
pub const TARGET: &str = "rocketns::audit";

/// The name of an audited request code; `None` for the codes not audited.
pub fn audited(code: i32) -> Option<&'static str> {
    Some(match code {
        request::PUT_KV_CONFIG => "PUT_KV_CONFIG",
        request::DELETE_KV_CONFIG => "DELETE_KV_CONFIG",
        request::UNREGISTER_BROKER => "UNREGISTER_BROKER",
        request::WIPE_WRITE_PERM_OF_BROKER => "WIPE_WRITE_PERM_OF_BROKER",
        request::ADD_WRITE_PERM_OF_BROKER => "ADD_WRITE_PERM_OF_BROKER",
        request::DELETE_TOPIC_IN_NAMESRV => "DELETE_TOPIC_IN_NAMESRV",
        request::REGISTER_TOPIC_IN_NAMESRV => "REGISTER_TOPIC_IN_NAMESRV",
        request::UPDATE_NAMESRV_CONFIG => "UPDATE_NAMESRV_CONFIG",
        // The controller's: elections (a broker's or the leader's own), its settings, a group's data cleaned.
        controller_request::ELECT_MASTER => "ELECT_MASTER",
        controller_request::UPDATE_CONTROLLER_CONFIG => "UPDATE_CONTROLLER_CONFIG",
        controller_request::CLEAN_BROKER_DATA => "CLEAN_BROKER_DATA",
        _ => return None,
    })
}

#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {path}: {source}")]
pub struct AuditOpenError {
    path: String,
    source: std::io::Error,
}

/// Where audit lines go, and what counts them.
pub struct AuditLog {
    /// The file's writer thread, with `auditLogPath`.
    file: Option<SyncSender<String>>,
    metrics: Arc<Metrics>,
    lines: crate::limits::throttle::LineBudget,
}

/// Bytes of lines queued for the file (`rocketns_audit_queue_bytes`).
fn queued(metrics: &Metrics) -> &std::sync::atomic::AtomicI64 {
    &metrics.budget.audit_queued
}

impl AuditLog {
    /// To the ordinary log.
    pub fn to_log(metrics: Arc<Metrics>) -> Self {
        AuditLog {
            file: None,
            metrics,
            lines: crate::limits::throttle::LineBudget::new(LINES_PER_SECOND, LINES_AT_ONCE),
        }
    }

    /// To the ordinary log when `path` is empty, else appended to the file at `path` (created if missing).
    pub fn open(path: &str, metrics: Arc<Metrics>) -> Result<Self, AuditOpenError> {
        if path.is_empty() {
            return Ok(AuditLog::to_log(metrics));
        }
        let failed = |source| AuditOpenError { path: path.to_string(), source };
        // KV values and config updates are in it: not for every local user (SECURITY.md).
        let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o640).open(path).map_err(failed)?;
        let (sender, lines) = std::sync::mpsc::sync_channel(QUEUE);
        let (path, counters) = (PathBuf::from(path), metrics.clone());
        std::thread::Builder::new()
            .name("rocketns-audit".into())
            .spawn(move || write_lines(file, &path, lines, &counters))
            .map_err(failed)?;
        Ok(AuditLog { file: Some(sender), ..AuditLog::to_log(metrics) })
    }

    /// Records one answered request, if its code is audited.
    pub fn record(&self, peer: Option<SocketAddr>, req: &RemotingCommand, resp: &RemotingCommand) {
        let Some(name) = audited(req.code) else { return };
        let counters = &self.metrics.audit;
        let counter = if resp.code == response::SUCCESS { &counters.succeeded } else { &counters.refused };
        counter.fetch_add(1, Ordering::Relaxed);
        if !self.lines.allow() {
            counters.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = line(peer, req, name, resp).to_string();
        let Some(file) = &self.file else {
            tracing::info!(target: TARGET, "{line}");
            return;
        };
        let bytes = line.len() as i64;
        let room = queued(&self.metrics).fetch_add(bytes, Ordering::Relaxed) + bytes <= QUEUE_BYTES as i64;
        // Full, or the writer thread is gone (it never ends while a sender lives, unless it panicked).
        let refused = if room {
            match file.try_send(line) {
                Ok(()) => return,
                Err(TrySendError::Full(line) | TrySendError::Disconnected(line)) => line,
            }
        } else {
            line
        };
        queued(&self.metrics).fetch_sub(bytes, Ordering::Relaxed);
        if counters.lost.fetch_add(1, Ordering::Relaxed).is_multiple_of(1000) {
            tracing::warn!(target: TARGET, "audit line not queued for the file: {refused}");
        }
    }
}

/// The audit line of one answered request.
fn line(peer: Option<SocketAddr>, req: &RemotingCommand, name: &str, resp: &RemotingCommand) -> Value {
    let mut args = Map::new();
    let fields = req.ext_fields.iter().flat_map(|e| e.iter());
    // The signature proves the caller; the access key names it, in a field of its own.
    let mut fields = fields.filter(|(key, _)| !matches!(*key, ACCESS_KEY | SIGNATURE));
    for (key, value) in fields.by_ref().take(FIELDS_SHOWN) {
        args.insert(shown(key, KEY_SHOWN).into_owned(), Value::from(shown(value, VALUE_SHOWN)));
    }
    let omitted = fields.count();
    if omitted > 0 {
        args.insert("fieldsNotShown".into(), Value::from(omitted));
    }
    if !req.body.is_empty() {
        let body = &req.body[..req.body.len().min(BODY_SHOWN)];
        args.insert("body".into(), Value::from(String::from_utf8_lossy(body)));
        args.insert("bodyBytes".into(), Value::from(req.body.len()));
    }
    json!({
        "time": now_rfc3339(),
        "remote": peer.map(|p| p.to_string()),
        "accessKey": req.ext(ACCESS_KEY).map(|key| shown(key, KEY_SHOWN)),
        "code": req.code,
        "request": name,
        "args": args,
        "outcome": if resp.code == response::SUCCESS { "success" } else { "refused" },
        "responseCode": resp.code,
        "remark": resp.remark.as_deref().map(|remark| shown(remark, VALUE_SHOWN)),
    })
}

/// The wall-clock time in RFC 3339, as the ordinary log writes it.
fn now_rfc3339() -> String {
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
    let mut text = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut text));
    text
}

/// The file's writer: each line in one `write`, until every sender is gone.
fn write_lines(mut file: std::fs::File, path: &Path, lines: Receiver<String>, metrics: &Metrics) {
    for mut line in lines {
        queued(metrics).fetch_sub(line.len() as i64, Ordering::Relaxed);
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes())
            && metrics.audit.lost.fetch_add(1, Ordering::Relaxed).is_multiple_of(1000)
        {
            tracing::error!(target: TARGET, path = %path.display(), error = %e, "cannot write the audit log");
        }
    }
}
