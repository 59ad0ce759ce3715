//! `OutQueue`: the replies a connection has yet to write, and how they are written.
//!
//! A reply is copied into one contiguous buffer with the others of its batch (a route body is about a
//! kilobyte: the copy costs far less than a slice of a vectored write, which the kernel walks and copies
//! anyway), and the batch goes out in one write. A body over `COPY_LIMIT` (a large cluster info or topic
//! list) goes out as its own slice, straight from the snapshot's shared bytes, with the room it holds in the
//! memory budget's replies pool until it is written (`push_large`). The buffer is the worker thread's
//! (`lent.rs`), given back once its replies are written: a connection waiting for its peer holds none.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::lent::Lent;
use super::{RemotingCommand, SerializeType};
use crate::limits::budget::Charge;

pub struct OutQueue {
    serialize_type: SerializeType,
    chunks: VecDeque<Bytes>,
    /// The room of the large bodies among `chunks`, given back once everything is written.
    held: Vec<Charge>,
    scratch: BytesMut,
    /// Replies that tasks of their own answer later (cluster-test lookups), out of order as Java's are;
    /// made when the connection first needs them.
    late: Option<LateReplies>,
    /// What large bodies are written at (`largeReplyBytesPerSecond`); none paces nothing.
    pacer: Option<std::sync::Arc<crate::limits::throttle::BytePacer>>,
}

struct LateReplies {
    tx: mpsc::UnboundedSender<RemotingCommand>,
    rx: mpsc::UnboundedReceiver<RemotingCommand>,
}

/// Room for a reply's frame prefix and header when a reply is queued (more if its header needs it).
const HEADER_ROOM: usize = 256;
/// At most this many buffers go into one vectored write.
const MAX_IOVECS: usize = 64;
/// A large body is written at most this much at a time, the task yielding between: copying a 1.3 MB topic
/// list into the socket at once held the worker, and every lookup queued there, for a quarter of a
/// millisecond.
const WRITE_STEP: usize = 16 * 1024;

impl OutQueue {
    /// Bodies up to this size are copied into the write buffer; larger ones need room of their own.
    pub const COPY_LIMIT: usize = 16 * 1024;

    /// Replies are written with `serialize_type`'s header (`rocketmq.serialize.type`), whatever the request's.
    pub fn new(serialize_type: SerializeType) -> Self {
        OutQueue {
            serialize_type,
            chunks: VecDeque::new(),
            held: Vec::new(),
            scratch: BytesMut::new(),
            late: None,
            pacer: None,
        }
    }

    /// Large bodies are written at `pacer`'s rate, with every other connection's.
    pub fn paced(mut self, pacer: std::sync::Arc<crate::limits::throttle::BytePacer>) -> Self {
        self.pacer = Some(pacer);
        self
    }

    /// Bytes queued and not written yet.
    pub fn pending_bytes(&self) -> usize {
        self.scratch.len() + self.chunks.iter().map(Bytes::len).sum::<usize>()
    }

    /// Whether a large body (one with room of its own) waits to be written.
    pub fn holds_large(&self) -> bool {
        !self.held.is_empty()
    }

    /// Queues a reply whose body is over `COPY_LIMIT`, with the room it holds until it is written.
    pub fn push_large(&mut self, resp: &RemotingCommand, room: Charge) {
        self.push(resp);
        if room.bytes() > 0 {
            self.held.push(room);
        }
    }

    /// Where a task answering a request later sends its reply (with the request's opaque).
    pub fn late_replies(&mut self) -> mpsc::UnboundedSender<RemotingCommand> {
        let late = self.late.get_or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            LateReplies { tx, rx }
        });
        late.tx.clone()
    }

    /// The next late reply; never ready on a connection that has none to wait for. Cancel-safe.
    pub async fn next_late_reply(&mut self) -> RemotingCommand {
        match &mut self.late {
            // The queue holds a sender itself, so it never ends.
            Some(late) => match late.rx.recv().await {
                Some(reply) => reply,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    pub fn push(&mut self, resp: &RemotingCommand) {
        self.push_with_body(resp, &[&resp.body]);
    }

    /// Queues `resp`'s header followed by `body`, its parts in order, in place of `resp.body`. A route reply
    /// passes the snapshot's bytes while it holds the snapshot: they are copied here, so no reply keeps a
    /// reference to them, and their reference counts, which every connection asking for those brokers'
    /// topics would write, are not touched.
    pub fn push_with_body(&mut self, resp: &RemotingCommand, body: &[&Bytes]) {
        let body_len = body.iter().map(|part| part.len()).sum();
        let copied = body_len <= Self::COPY_LIMIT;
        if self.scratch.capacity() == 0 {
            self.scratch = Lent::Write.take();
        }
        // Room for the whole reply at once: a fresh buffer would otherwise grow by doubling, a reallocation
        // and a copy each time, on every new connection.
        self.scratch.reserve(HEADER_ROOM + if copied { body_len } else { 0 });
        resp.encode_head(self.serialize_type, body_len, &mut self.scratch);
        if copied {
            for part in body {
                self.scratch.extend_from_slice(part);
            }
        } else {
            self.chunks.push_back(self.scratch.split().freeze());
            self.chunks.extend(body.iter().filter(|part| !part.is_empty()).map(|part| Bytes::clone(part)));
        }
    }

    /// Writes everything queued; the room of large bodies is given back once they are written.
    pub async fn flush<W: AsyncWrite + Unpin>(&mut self, stream: &mut W) -> std::io::Result<()> {
        let written = self.write(stream).await;
        if written.is_ok() {
            self.held = Vec::new();
        }
        written
    }

    async fn write<W: AsyncWrite + Unpin>(&mut self, stream: &mut W) -> std::io::Result<()> {
        if self.chunks.is_empty() {
            // The common case: one buffer, one write, and the buffer given back to the thread once written.
            let result = stream.write_all(&self.scratch).await;
            self.scratch.clear();
            Lent::Write.give_back(&mut self.scratch);
            return result;
        }
        // Boxed: a large reply's writing is rare, and its state would otherwise sit in every connection.
        Box::pin(self.write_chunks(stream)).await
    }

    /// Writes a batch that holds a large body: the chunks, a step at a time, at the pacer's rate.
    async fn write_chunks<W: AsyncWrite + Unpin>(&mut self, stream: &mut W) -> std::io::Result<()> {
        if !self.scratch.is_empty() {
            self.chunks.push_back(self.scratch.split().freeze());
        }
        while !self.chunks.is_empty() {
            let mut left = WRITE_STEP;
            let slices: Vec<IoSlice<'_>> = self
                .chunks
                .iter()
                .take(MAX_IOVECS)
                .map_while(|c| {
                    let part = &c[..c.len().min(left)];
                    left -= part.len();
                    (!part.is_empty()).then(|| IoSlice::new(part))
                })
                .collect();
            if let Some(pacer) = &self.pacer {
                // What this write may send, not a whole step: a list's last few kilobytes cost what they are.
                pacer.take(WRITE_STEP - left).await;
            }
            let mut written = stream.write_vectored(&slices).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            while written > 0 {
                let Some(front) = self.chunks.front_mut() else { break };
                if written >= front.len() {
                    written -= front.len();
                    self.chunks.pop_front();
                } else {
                    front.advance(written);
                    written = 0;
                }
            }
            if !self.chunks.is_empty() {
                tokio::task::yield_now().await;
            }
        }
        // Nothing of a large batch is kept once it is written.
        self.chunks = VecDeque::new();
        Lent::Write.give_back(&mut self.scratch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body in parts, small or large, reaches the peer as the one body its frame announces.
    #[tokio::test]
    async fn parts_are_written_as_one_body() {
        for part_len in [3, OutQueue::COPY_LIMIT] {
            let mut out = OutQueue::new(SerializeType::Json);
            let (a, b) = (Bytes::from(vec![b'a'; part_len]), Bytes::from(vec![b'b'; 5]));
            let mut resp = RemotingCommand::response(0, None);
            resp.opaque = 7;
            out.push_with_body(&resp, &[&a, &b]);
            out.push(&resp);
            let mut written = Vec::new();
            out.flush(&mut written).await.expect("a Vec takes every byte");
            let mut expected = BytesMut::new();
            resp.body = Bytes::from([&a[..], &b[..]].concat());
            resp.encode(SerializeType::Json, &mut expected);
            resp.body = Bytes::new();
            resp.encode(SerializeType::Json, &mut expected);
            assert_eq!(written, expected);
        }
    }
}
