//! Buffers a worker thread lends the connection it is serving: one to read a request into, one to write its
//! replies from. A connection takes them when bytes arrive and gives them back once every frame it read is
//! answered and every reply written, so a connection waiting for its peer holds neither, and one polled
//! every 30 s costs no buffer between its polls. A connection that cannot give one back (a frame arrived in
//! part, a reply not yet taken by its peer) keeps it as its own until it can; the next connection on that
//! thread then gets a fresh one.
//!
//! Each thread keeps at most one of each, of at most [`KEPT_MAX`]: what a connection gives back beyond that
//! is freed. A buffer still shared with bytes split off it (a request's header kept by a task elsewhere) is
//! given back too: `BytesMut::reserve` takes fresh memory when the old cannot be reclaimed.

use std::cell::Cell;

use bytes::BytesMut;

/// The largest buffer a thread keeps to lend: larger ones (a batch of large replies) are freed.
pub const KEPT_MAX: usize = 64 * 1024;

thread_local! {
    static READ: Cell<Option<BytesMut>> = const { Cell::new(None) };
    static WRITE: Cell<Option<BytesMut>> = const { Cell::new(None) };
}

/// Which of a thread's two buffers.
#[derive(Clone, Copy)]
pub enum Lent {
    Read,
    Write,
}

impl Lent {
    fn slot(self) -> &'static std::thread::LocalKey<Cell<Option<BytesMut>>> {
        match self {
            Lent::Read => &READ,
            Lent::Write => &WRITE,
        }
    }

    /// This thread's buffer, or a fresh empty one when another connection has it (or none was given back).
    pub fn take(self) -> BytesMut {
        self.slot().with(Cell::take).unwrap_or_default()
    }

    /// Gives `buf` back if it holds nothing unread or unwritten, leaving the caller none (not even the
    /// share of an allocation an empty view keeps, once every byte was split off it); a buffer that holds
    /// bytes stays where it is, the caller's own.
    pub fn give_back(self, buf: &mut BytesMut) {
        if !buf.is_empty() {
            return;
        }
        let buf = std::mem::take(buf);
        if buf.capacity() > 0 && buf.capacity() <= KEPT_MAX {
            self.slot().with(|slot| {
                // A thread already holding one keeps it: the other is freed.
                let kept = slot.take();
                slot.set(Some(kept.unwrap_or(buf)));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_lent_again_and_one_in_use_is_not() {
        let mut buf = Lent::Read.take();
        buf.reserve(1024);
        let at = buf.as_ptr();
        buf.extend_from_slice(b"part of a frame");
        Lent::Read.give_back(&mut buf);
        assert!(!buf.is_empty(), "a buffer holding bytes stays with its connection");
        assert_eq!(Lent::Read.take().capacity(), 0, "nothing was given back");
        buf.clear();
        Lent::Read.give_back(&mut buf);
        assert_eq!(buf.capacity(), 0, "given back");
        let again = Lent::Read.take();
        assert_eq!(again.as_ptr(), at, "the same memory, lent again");
        assert_eq!(Lent::Write.take().capacity(), 0, "the write buffer is another");
    }

    #[test]
    fn a_thread_keeps_one_buffer_of_each_and_none_too_large() {
        let (mut a, mut b) = (BytesMut::with_capacity(100), BytesMut::with_capacity(200));
        Lent::Write.give_back(&mut a);
        Lent::Write.give_back(&mut b);
        assert_eq!(Lent::Write.take().capacity(), 100, "the first kept, the second freed");
        assert_eq!(Lent::Write.take().capacity(), 0);
        let mut large = BytesMut::with_capacity(KEPT_MAX + 1);
        Lent::Write.give_back(&mut large);
        assert_eq!(Lent::Write.take().capacity(), 0, "too large to keep");
    }
}
