//! Drives GET_ROUTEINFO_BY_TOPIC over one connection with a fixed number of requests in flight, verifying
//! every reply and recording its latency.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use rocketns::testing::client_headers::ClientHeader;

use crate::wire::{Field, header_int};

/// Which topics requests ask for.
pub struct TopicPicker {
    pub topics: Vec<String>,
    /// Cumulative Zipf weights (s = 1), or empty for uniform.
    zipf_cdf: Vec<f64>,
    pub miss_ratio: f64,
}

impl TopicPicker {
    pub fn new(topics: Vec<String>, zipf: bool, miss_ratio: f64) -> Self {
        let zipf_cdf = if zipf {
            let mut acc = 0.0;
            let mut cdf: Vec<f64> = (1..=topics.len())
                .map(|k| {
                    acc += 1.0 / k as f64;
                    acc
                })
                .collect();
            let total = acc;
            cdf.iter_mut().for_each(|c| *c /= total);
            cdf
        } else {
            Vec::new()
        };
        TopicPicker { topics, zipf_cdf, miss_ratio }
    }

    /// A topic name and whether it should exist.
    fn pick(&self, rng: &mut u64) -> (&str, bool) {
        let r = next_f64(rng);
        if r < self.miss_ratio {
            return ("no-such-topic", false);
        }
        let u = next_f64(rng);
        let i = if self.zipf_cdf.is_empty() {
            (u * self.topics.len() as f64) as usize
        } else {
            self.zipf_cdf.partition_point(|c| *c < u)
        };
        (&self.topics[i.min(self.topics.len() - 1)], true)
    }
}

fn next_f64(state: &mut u64) -> f64 {
    // xorshift64*
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Debug)]
pub struct ConnStats {
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub latency: Histogram<u64>,
    /// Lookups slower than `RequestShape::trace_slow`: when each was sent, and how long it took.
    pub slow: Vec<(Instant, Duration)>,
}

impl ConnStats {
    fn fail(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// How one connection sends its requests.
#[derive(Clone, Copy)]
pub struct RequestShape {
    pub header: ClientHeader,
    /// The first opaque (a long-lived client's counter is far along: ten digits, or negative once wrapped).
    pub opaque_start: i32,
    pub in_flight: usize,
    /// Keep the send time of every lookup slower than this (`--trace-slow-ms`).
    pub trace_slow: Option<Duration>,
}

/// When a connection stops sending.
#[derive(Clone, Copy)]
pub enum Stop {
    At(Instant),
    /// After this many requests (a starting client asking its topics' routes).
    After(u64),
}

/// Sends until `stop`, then waits for the replies still in flight.
pub async fn drive(addr: String, seed: u64, shape: RequestShape, picker: Arc<TopicPicker>, stop: Stop) -> ConnStats {
    let in_flight = shape.in_flight;
    let mut stats = ConnStats { ok: 0, errors: 0, first_error: None, latency: new_histogram(), slow: Vec::new() };
    let mut stream = match TcpStream::connect(&addr).await {
        Ok(s) => s,
        Err(e) => {
            stats.fail(format!("connect: {e}"));
            return stats;
        }
    };
    let _ = stream.set_nodelay(true);
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut decoder = rocketns::remoting::FrameDecoder::default();
    let mut rbuf = BytesMut::with_capacity(256 * 1024);
    let mut wbuf = Vec::with_capacity(in_flight * 160);
    // (opaque, sent at, expects a route)
    let mut pending: Vec<(i32, Instant, bool)> = Vec::with_capacity(in_flight);
    let mut next_opaque = shape.opaque_start;
    let mut sent = 0u64;
    let more = |sent: u64, now: Instant| match stop {
        Stop::At(deadline) => now < deadline,
        Stop::After(count) => sent < count,
    };
    let mut send = |wbuf: &mut Vec<u8>, pending: &mut Vec<(i32, Instant, bool)>, rng: &mut u64| {
        let (topic, hit) = picker.pick(rng);
        shape.header.put_route_request(wbuf, topic, next_opaque);
        pending.push((next_opaque, Instant::now(), hit));
        next_opaque = next_opaque.wrapping_add(1);
    };
    while pending.len() < in_flight && more(sent, Instant::now()) {
        send(&mut wbuf, &mut pending, &mut rng);
        sent += 1;
    }
    loop {
        if !wbuf.is_empty() {
            if let Err(e) = stream.write_all(&wbuf).await {
                stats.fail(format!("write: {e}"));
                return stats;
            }
            wbuf.clear();
        }
        if pending.is_empty() {
            return stats;
        }
        match tokio::time::timeout(Duration::from_secs(10), stream.read_buf(&mut rbuf)).await {
            Ok(Ok(n)) if n > 0 => {}
            other => {
                stats.fail(format!("read: {other:?} with {} in flight", pending.len()));
                return stats;
            }
        }
        let now = Instant::now();
        loop {
            let frame = match decoder.decode(&mut rbuf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    stats.fail(format!("frame: {e}"));
                    return stats;
                }
            };
            let binary = frame.serialize_type == rocketns::remoting::SerializeType::RocketMq;
            let opaque = header_int(&frame.header, binary, Field::Opaque).unwrap_or(-1) as i32;
            let code = header_int(&frame.header, binary, Field::Code).unwrap_or(-1);
            let Some(at) = pending.iter().position(|(o, _, _)| *o == opaque) else {
                stats.fail(format!("reply with unknown opaque {opaque}"));
                continue;
            };
            let (_, sent_at, hit) = pending.swap_remove(at);
            let took = now.duration_since(sent_at);
            let _ = stats.latency.record(took.as_nanos() as u64);
            if shape.trace_slow.is_some_and(|bound| took > bound) {
                stats.slow.push((sent_at, took));
            }
            let valid = if hit {
                code == 0
                    && frame.body.first() == Some(&b'{')
                    && memchr::memmem::find(&frame.body, b"\"queueDatas\"").is_some()
            } else {
                code == 17
            };
            if valid {
                stats.ok += 1;
            } else {
                stats.fail(format!(
                    "opaque {opaque}: code {code}, {} body bytes, expected a {}",
                    frame.body.len(),
                    if hit { "route" } else { "miss" }
                ));
            }
            if more(sent, now) {
                send(&mut wbuf, &mut pending, &mut rng);
                sent += 1;
            }
        }
    }
}
