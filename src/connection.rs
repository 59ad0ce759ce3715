//! One client or broker connection: read frames, dispatch them, write the replies.
//!
//! All frames that arrived together are processed before the replies are written, together in one write.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use crate::frame_budget::{FrameBudget, LARGE_FRAME, LargeFrameError, Reservation, large_frame_buffer};
use crate::metrics::RequestTally;
use crate::protocol::codes::{request, response};
use crate::remoting::{FrameDecoder, OutQueue, announced_frame_len, decode_command};
use crate::route::ConnId;
use crate::state::ServerState;

/// A connection reads at most this much at first: a polling client's request with room to spare. Reads that
/// fill it double it, up to `MAX_READ` (as Netty's adaptive receive buffer grows for Java), so a pipelining
/// client gets large reads and 10,000 polling ones keep a kilobyte each.
const FIRST_READ: usize = 1024;
const MAX_READ: usize = 64 * 1024;
const MAX_IDLE_READ_BUFFER: usize = 256 * 1024;

/// Over plain TCP or TLS (`tls.server.mode`).
pub struct Connection<S> {
    stream: S,
    id: ConnId,
    /// The peer's address, for the audit log.
    peer: Option<std::net::SocketAddr>,
    state: ServerState,
    decoder: FrameDecoder,
    budget: FrameBudget,
    large_frame_timeout: Duration,
    registered_broker: bool,
    idle_timeout: Duration,
}

/// Why a connection waiting for its peer woke up.
enum Woke {
    Read(std::io::Result<usize>),
    /// A late reply was queued (`OutQueue::late_replies`): it is written next.
    LateReply,
    Idle,
}

/// Room in the large-frame budget held for the frame at the front of the read buffer, and when that frame
/// must be complete.
struct LargeFrame {
    _room: Reservation,
    len: usize,
    deadline: Instant,
}

fn frame_cap(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Every connection may send frames up to `frameMaxLength`, as with Java; frames over 64 KiB are
    /// buffered within the server-wide `budget`.
    pub fn new(stream: S, id: ConnId, peer: Option<std::net::SocketAddr>, state: ServerState, budget: FrameBudget) -> Self {
        let config = state.config.load();
        let decoder = FrameDecoder::new(frame_cap(config.frame_max_length));
        let idle_timeout = config.channel_idle_timeout();
        let large_frame_timeout = config.large_frame_timeout();
        Connection { stream, id, peer, state, decoder, budget, large_frame_timeout, registered_broker: false, idle_timeout }
    }

    /// Serves the connection until the peer closes it, it stays idle too long, it sends a frame that cannot
    /// be decoded (which closes only this connection, as in Java), or one of its large frames finds no room
    /// in the budget or arrives too slowly. Returns whether a broker registered over it (only then can its
    /// close remove brokers).
    pub async fn run(mut self) -> bool {
        self.serve().await;
        self.registered_broker
    }

    fn caller(&self) -> crate::processor::Caller {
        crate::processor::Caller { conn: self.id, addr: self.peer }
    }

    async fn serve(&mut self) {
        let mut read_buf = BytesMut::new();
        let mut read_size = FIRST_READ;
        let mut out = OutQueue::new(self.state.config.load().reply_serialize_type());
        let mut tally = RequestTally::default();
        let mut large: Option<LargeFrame> = None;
        // One timer for the connection, moved only when it fires early: arming and clearing a timer around
        // every read cost about 3 % of a request when each read brings one (1,000 connections x 1).
        let mut last_read = Instant::now();
        let timer = tokio::time::sleep_until(last_read + self.idle_timeout);
        tokio::pin!(timer);
        loop {
            loop {
                let frame = match self.decoder.decode(&mut read_buf) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(conn = self.id, error = %e, "undecodable frame, closing connection");
                        return;
                    }
                };
                // The budget's room is held until the large frame's request has been processed: it bounds
                // the large requests being received, parsed and applied at once.
                let room = large.take();
                if 8 + frame.header.len() + frame.body.len() > LARGE_FRAME {
                    // The frame shares the buffer's allocation: leave it to the frame alone (the handler
                    // frees a registration's body once parsed), and keep the rest in a small buffer.
                    let mut rest = BytesMut::with_capacity(read_size.max(read_buf.len()));
                    rest.extend_from_slice(&read_buf);
                    read_buf = rest;
                }
                let mut cmd = match decode_command(frame) {
                    Ok(cmd) => cmd,
                    Err(e) => {
                        tracing::warn!(conn = self.id, error = %e, "undecodable header, closing connection");
                        return;
                    }
                };
                if cmd.is_response() {
                    tracing::debug!(conn = self.id, opaque = cmd.opaque, "unexpected response frame ignored");
                    continue;
                }
                tracing::trace!(conn = self.id, code = cmd.code, opaque = cmd.opaque, version = cmd.version, "request");
                let sampled = cmd.code == request::GET_ROUTEINFO_BY_TOPIC && tally.sample_lookup();
                let started = sampled.then(std::time::Instant::now);
                let code = crate::processor::dispatch(&self.state, &mut cmd, self.caller(), &mut out).await;
                drop(room);
                if let Some(started) = started {
                    self.state.metrics.record_lookup_latency(started.elapsed());
                }
                tally.record(cmd.code, code == response::SUCCESS);
                if !self.registered_broker && cmd.code == request::REGISTER_BROKER && code == response::SUCCESS {
                    self.registered_broker = true;
                }
            }
            tally.flush(&self.state.metrics);
            // Many pipelined requests grew the buffer; do not keep it per connection.
            if read_buf.is_empty() && read_buf.capacity() > MAX_IDLE_READ_BUFFER {
                read_buf = BytesMut::new();
            }
            if let Err(e) = out.flush(&mut self.stream).await {
                tracing::debug!(conn = self.id, error = %e, "write failed, closing connection");
                return;
            }
            let large_frame_room = match self.make_room(&mut read_buf, &mut large).await {
                Ok(reserved) => reserved,
                Err(e) => {
                    self.refuse_large_frame(&e);
                    return;
                }
            };
            if let Some(frame) = &large
                && frame.deadline < timer.deadline()
            {
                timer.as_mut().reset(frame.deadline);
            }
            // A large frame's buffer has room for the rest of it: growing it by a read's worth near its end
            // would reallocate it and copy megabytes, on this worker thread.
            if !large_frame_room {
                read_buf.reserve(read_size);
            }
            let room = read_buf.capacity() - read_buf.len();
            let read = loop {
                tokio::select! {
                    biased;
                    read = self.stream.read_buf(&mut read_buf) => break Woke::Read(read),
                    reply = out.next_late_reply() => {
                        out.push(&reply);
                        break Woke::LateReply;
                    }
                    () = &mut timer => {
                        let idle_at = last_read + self.idle_timeout;
                        let deadline = large.as_ref().map_or(idle_at, |frame| frame.deadline.min(idle_at));
                        if Instant::now() >= deadline {
                            break Woke::Idle;
                        }
                        timer.as_mut().reset(deadline);
                    }
                }
            };
            match read {
                Woke::Idle => {
                    if let Some(frame) = &large
                        && Instant::now() >= frame.deadline
                    {
                        let timeout_ms = self.large_frame_timeout.as_millis() as u64;
                        self.refuse_large_frame(&LargeFrameError::TooSlow { len: frame.len, timeout_ms });
                    } else {
                        tracing::info!(conn = self.id, "connection idle, closing it");
                    }
                    return;
                }
                Woke::Read(Ok(0)) => {
                    if !read_buf.is_empty() {
                        tracing::debug!(conn = self.id, pending = read_buf.len(), "peer closed mid-frame");
                    }
                    return;
                }
                Woke::LateReply => {}
                Woke::Read(Ok(n)) => {
                    last_read = Instant::now();
                    if n == room {
                        read_size = (read_size * 2).min(MAX_READ);
                    }
                }
                Woke::Read(Err(_)) => return,
            }
        }
    }

    /// Reserves buffer space for the incomplete frame at the front of `read_buf`, once its length is known:
    /// a large frame first waits, without being read, for room in the budget, unless a broker has
    /// registered over this connection (a known broker's re-registration must not be refused because
    /// others flood the budget: closing its connection would remove it). Returns whether that was a large
    /// frame's room, which reads then fill.
    async fn make_room(
        &self,
        read_buf: &mut BytesMut,
        large: &mut Option<LargeFrame>,
    ) -> Result<bool, LargeFrameError> {
        let Some(len) = announced_frame_len(read_buf) else { return Ok(false) };
        if len > LARGE_FRAME && large.is_none() && !self.registered_broker {
            let deadline = Instant::now() + self.large_frame_timeout;
            let Ok(room) = tokio::time::timeout_at(deadline, self.budget.reserve(len)).await else {
                return Err(LargeFrameError::NoRoom { len, timeout_ms: self.large_frame_timeout.as_millis() as u64 });
            };
            *large = Some(LargeFrame { _room: room, len, deadline });
        }
        if len > LARGE_FRAME && read_buf.capacity() < len {
            let mut buf = large_frame_buffer(len).await;
            buf.extend_from_slice(read_buf);
            *read_buf = buf;
        }
        read_buf.reserve(len.saturating_sub(read_buf.len()));
        Ok(len > LARGE_FRAME)
    }

    fn refuse_large_frame(&self, error: &LargeFrameError) {
        tracing::warn!(conn = self.id, error = %error, "large frame refused, closing connection");
        self.budget.count_refusal(error);
    }
}
