//! The process's own log (stderr): every line rocketns or a library in it writes is held here to a length
//! and a rate, whatever its call site did.
//!
//! Call sites that quote a client clip what they quote (`crate::error::shown`) and take a turn of
//! `client_log!`'s rate; this is the floor under them, for the call site that forgets and for the
//! libraries' own lines (openraft logged 443,000 lines in 2 minutes on a node a forged snapshot had broken,
//! issue 43). Every field of a line, its message included, is cut at [`FIELD_MAX`] bytes and has its
//! control characters escaped, so that a value can neither make a line long nor start a line of its own;
//! and at most [`LINES_PER_SECOND`] lines a second are written ([`LINES_AT_ONCE`] at once), the rest
//! counted (`rocketns_log_lines_dropped_total`) before they are formatted.

use std::fmt::{self, Write as _};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::field::{MakeVisitor, RecordFields, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;

use crate::limits::throttle::LineBudget;

/// The most of one field's value a line keeps. The audit log's lines, written here without
/// `auditLogPath`, are held by `audit.rs` to about 6 KiB and fit.
pub const FIELD_MAX: usize = 8 * 1024;
/// Log lines a second on average, all of them together; what a client causes has 50 of them
/// (`client_log!`). A quiet server writes a few a minute.
pub const LINES_PER_SECOND: u32 = 200;
/// Log lines at once, beyond the rate.
pub const LINES_AT_ONCE: u32 = 2_000;
/// What a cut value ends with.
const CUT: &str = "...(cut)";

/// Every line's turn, for the metrics.
pub fn lines() -> &'static LineBudget {
    static LINES: std::sync::OnceLock<LineBudget> = std::sync::OnceLock::new();
    LINES.get_or_init(|| LineBudget::new(LINES_PER_SECOND, LINES_AT_ONCE))
}

/// Starts the process's log on stderr, as text or (`logFormat=json`) one JSON object a line; `RUST_LOG`
/// filters it (default `info`).
pub fn init(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let subscriber = subscriber(json, ansi, std::io::stderr, lines()).with(filter);
    // try_init also routes the `log` crate's records (rustls's) here.
    if let Err(e) = tracing_subscriber::util::SubscriberInitExt::try_init(subscriber) {
        eprintln!("rocketns: logging not started: {e}");
    }
}

/// The log's subscriber, writing to `writer` within `budget`.
fn subscriber<W>(json: bool, ansi: bool, writer: W, budget: &'static LineBudget) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_writer(writer).with_ansi(ansi);
    if json {
        Box::new(builder.event_format(Budgeted { budget, format: JsonLine }).finish())
    } else {
        let format = tracing_subscriber::fmt::format().with_ansi(ansi);
        Box::new(builder.fmt_fields(ClippedFields).event_format(Budgeted { budget, format }).finish())
    }
}

/// A line format that writes nothing (and formats nothing) once the budget has no turn left.
struct Budgeted<F> {
    budget: &'static LineBudget,
    format: F,
}

impl<S, N, F> FormatEvent<S, N> for Budgeted<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        // Audit lines have a rate of their own (100 a second, `audit.rs`), and are counted when lost: the
        // floor must not drop them uncounted for a flood of other lines.
        if event.metadata().target() != crate::ops::audit::TARGET && !self.budget.allow() {
            return Ok(());
        }
        self.format.format_event(ctx, writer, event)
    }
}

/// tracing-subscriber's text fields, each value cut and escaped first.
struct ClippedFields;

impl<'w> FormatFields<'w> for ClippedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut inner = DefaultFields::new().make_visitor(writer);
        fields.record(&mut Clipping { inner: &mut inner });
        inner.finish()
    }
}

/// Hands another visitor each value as at most [`FIELD_MAX`] bytes of text, control characters escaped.
struct Clipping<'a> {
    inner: &'a mut dyn Visit,
}

impl Visit for Clipping<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = clipped(format_args!("{value:?}"), Escape::All);
        self.inner.record_debug(field, &format_args!("{text}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            // Text is shown quoted (Debug), as tracing-subscriber shows it.
            self.record_debug(field, &value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.inner.record_i64(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.inner.record_u64(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.inner.record_f64(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.inner.record_bool(field, value);
    }
}

/// Characters that end a line or reorder what a terminal shows: control characters (C0, DEL, C1), the
/// Unicode line and paragraph separators, and the bidirectional marks and overrides.
fn breaks_a_line(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// At most [`FIELD_MAX`] bytes of `value` formatted, ending in [`CUT`] where it was cut; formatting stops
/// there, so a long value costs no more than a short one. What [`breaks_a_line`] (as `escape` says) is written
/// as a JSON escape (`\u000a`, valid inside the audit log's JSON lines too), so that nothing a client sent
/// starts a line or hides one.
fn clipped(value: fmt::Arguments<'_>, escape: Escape) -> String {
    let mut clip = Clip { text: String::new(), escape, cut: false };
    if clip.write_fmt(value).is_err() && clip.cut {
        clip.text.push_str(CUT);
    }
    clip.text
}

struct Clip {
    text: String,
    escape: Escape,
    cut: bool,
}

/// Which characters [`clipped`] escapes.
#[derive(Clone, Copy, PartialEq)]
enum Escape {
    /// Every one that [`breaks_a_line`] (text lines).
    All,
    /// Those that JSON leaves as they are (JSON lines): all but C0 controls, which it escapes itself.
    BeyondJson,
}

impl fmt::Write for Clip {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            let before = self.text.len();
            if breaks_a_line(c) && (self.escape == Escape::All || c >= ' ') {
                write!(self.text, "\\u{:04x}", u32::from(c))?;
            } else {
                self.text.push(c);
            }
            if self.text.len() > FIELD_MAX {
                self.text.truncate(before);
                self.cut = true;
                return Err(fmt::Error);
            }
        }
        Ok(())
    }
}

/// One JSON object a line: `timestamp`, `level`, `target` and the event's fields, each cut and escaped
/// as the text's are (JSON escapes C0 controls itself, not DEL, C1 or the separators).
struct JsonLine;

impl<S, N> FormatEvent<S, N> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut line = Map::new();
        let mut time = String::new();
        SystemTime.format_time(&mut Writer::new(&mut time))?;
        line.insert("timestamp".into(), Value::from(time));
        line.insert("level".into(), Value::from(event.metadata().level().as_str()));
        let mut fields = Map::new();
        event.record(&mut JsonFields(&mut fields));
        line.insert("target".into(), Value::from(event.metadata().target()));
        for (name, value) in fields {
            // A field named like the line's own keys keeps its value under `fields.NAME`.
            let name = if line.contains_key(&name) { format!("fields.{name}") } else { name };
            line.insert(name, value);
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

struct JsonFields<'a>(&'a mut Map<String, Value>);

impl Visit for JsonFields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), Value::from(clipped(format_args!("{value:?}"), Escape::BeyondJson)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
}

/// A panic's payload as a log line's text: its message, when it has one.
pub(crate) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// What a subscriber wrote, shared with the test that reads it (this module's and others').
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl Written {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("not poisoned").clone()).expect("the log is UTF-8")
    }
}

#[cfg(test)]
impl std::io::Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(json: bool, budget: &'static LineBudget, log: impl FnOnce()) -> String {
        let written = Written::default();
        let sink = written.clone();
        tracing::subscriber::with_default(subscriber(json, false, move || sink.clone(), budget), log);
        written.text()
    }

    fn budget() -> &'static LineBudget {
        Box::leak(Box::new(LineBudget::new(LINES_PER_SECOND, LINES_AT_ONCE)))
    }

    /// A call site that forgets to clip: its line keeps FIELD_MAX of the value, on one line.
    #[test]
    fn a_long_value_is_cut_and_cannot_start_a_line() {
        let long = format!("{}\n2026-12-06T00:00:00Z  INFO forged: line\n", "a".repeat(1 << 20));
        for json in [false, true] {
            let out = logged(json, budget(), || {
                tracing::warn!(addr = %long, quoted = long.as_str(), "{long}");
                tracing::warn!(short = "x\ny", "fine");
            });
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 2, "json {json}: {}", &out[..200]);
            assert!(lines[0].len() < 3 * FIELD_MAX + 200, "json {json}: a line of {} bytes", lines[0].len());
            assert_eq!(lines[0].matches(CUT).count(), 3, "json {json}");
            if json {
                let line: Value = serde_json::from_str(lines[0]).unwrap();
                assert!(line["addr"].as_str().unwrap().len() <= FIELD_MAX + CUT.len());
                assert_eq!(serde_json::from_str::<Value>(lines[1]).unwrap()["short"], "x\ny");
            } else {
                assert!(lines[1].contains(r#"short="x\ny""#), "{}", lines[1]);
            }
        }
    }

    /// Look-alike line breaks, direction overrides, DEL and C1 controls are escaped in both formats.
    #[test]
    fn separators_and_overrides_are_escaped() {
        let value = "a\u{2028}b\u{202e}c\u{7f}d\u{9b}e";
        for json in [false, true] {
            let out = logged(json, budget(), || tracing::warn!(addr = %value, "{value}"));
            for c in ['\u{2028}', '\u{202e}', '\u{7f}', '\u{9b}'] {
                assert!(!out.contains(c), "json {json}: {c:?} raw in {out:?}");
            }
            assert!(out.contains("\\u2028") || out.contains(r"\u2028"), "json {json}: {out}");
        }
    }

    /// Audit lines have their own rate: the floor does not drop them for other lines' flood.
    #[test]
    fn audit_lines_are_not_dropped_by_the_floor() {
        let out = logged(false, budget(), || {
            for i in 0..LINES_AT_ONCE + 100 {
                tracing::warn!(i, "flood");
            }
            tracing::info!(target: crate::ops::audit::TARGET, "an audit line");
        });
        assert!(out.ends_with("an audit line\n"), "{}", &out[out.len() - 200..]);
    }

    /// Short values are written as tracing-subscriber writes them.
    #[test]
    fn short_values_are_kept() {
        let out = logged(false, budget(), || tracing::info!(brokers = 3, addr = %"10.0.0.1:10911", "registered"));
        assert!(out.ends_with("registered brokers=3 addr=10.0.0.1:10911\n"), "{out}");
        let out = logged(true, budget(), || tracing::info!(brokers = 3, addr = %"10.0.0.1:10911", "registered"));
        let line: Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!((line["brokers"].as_u64(), line["addr"].as_str()), (Some(3), Some("10.0.0.1:10911")));
        assert_eq!((line["level"].as_str(), line["message"].as_str()), (Some("INFO"), Some("registered")));
        assert!(line["target"].as_str().unwrap().starts_with("rocketns"));
    }

    /// Past the lines at once, lines are counted, not written.
    #[test]
    fn lines_past_the_budget_are_counted_not_written() {
        let budget = budget();
        let out = logged(false, budget, || {
            for i in 0..LINES_AT_ONCE + 500 {
                tracing::warn!(i, "flood");
            }
        });
        let written = out.lines().count() as u64;
        assert!((u64::from(LINES_AT_ONCE)..u64::from(LINES_AT_ONCE) + 10).contains(&written), "{written}");
        let dropped = budget.dropped.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(written + dropped, u64::from(LINES_AT_ONCE) + 500);
    }
}
