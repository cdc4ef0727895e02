//! One connection as its request handlers see it: the hub it belongs to, its output
//! queue, and its socket, which only this connection's thread touches. Replies go through
//! the queue like asynchronous messages; when a reply (a long flow dump, say) has queued
//! more than [`OWN_FLUSH_AT`], the thread writes it out before making more, waiting for a
//! peer that reads slowly but giving up on one that stops reading.

use super::hub::{bump, Shared};
use super::out::{ConnOut, Refused};
use super::stream::{Stream, STAGE};
use flowpath_openflow::{Message, OfError};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Queued bytes past which the connection's own thread writes before it goes on.
pub(super) const OWN_FLUSH_AT: usize = 512 << 10;

pub(crate) struct Peer {
    pub(crate) sh: Arc<Shared>,
    pub(crate) out: Arc<ConnOut>,
    io: RefCell<Stream>,
}

impl Peer {
    pub(super) fn new(sh: Arc<Shared>, out: Arc<ConnOut>, io: Stream) -> Peer {
        Peer {
            sh,
            out,
            io: RefCell::new(io),
        }
    }

    pub(crate) fn send(&self, m: &Message, xid: u32) -> bool {
        self.send_raw(m.encode(xid))
    }

    /// Queue an encoded message; false when the connection is closed (or closes now).
    pub(crate) fn send_raw(&self, bytes: Vec<u8>) -> bool {
        match self.out.push(bytes) {
            Ok(()) => {}
            Err(Refused::Full | Refused::Closed) => return false,
        }
        if self.out.queued() > OWN_FLUSH_AT {
            return self.drain();
        }
        true
    }

    /// Send an OpenFlow error answering `request` (its first 64 bytes go back with it).
    pub(crate) fn error(&self, (type_, code): (u16, u16), request: &[u8], xid: u32) {
        bump(&self.sh.counters.errors_sent);
        self.send(&Message::error((type_, code), request), xid);
    }

    pub(crate) fn of_error(&self, e: OfError, request: &[u8], xid: u32) {
        self.error((e.type_, e.code), request, xid);
    }

    /// Move queued messages onto the socket as far as it takes them now: the bytes
    /// moved, or `None` when the socket broke.
    pub(super) fn pump(&self) -> Option<usize> {
        let mut io = self.io.borrow_mut();
        let mut total = 0;
        loop {
            if io.stage_room() {
                self.out.take_into(io.stage(), STAGE);
            }
            let n = io.flush().ok()?;
            total += n;
            if n == 0 || (!io.has_unsent() && self.out.queued() == 0) {
                return Some(total);
            }
        }
    }

    /// Write until the queue is back under [`OWN_FLUSH_AT`]. A peer that takes nothing
    /// for twice the probe interval is not reading: the connection closes.
    fn drain(&self) -> bool {
        let stall = self.sh.cfg.probe_interval * 2;
        let mut progress = Instant::now();
        while self.out.queued() > OWN_FLUSH_AT {
            match self.pump() {
                None => {
                    self.out.set_closed();
                    return false;
                }
                Some(0) => {}
                Some(_) => progress = Instant::now(),
            }
            if !self.out.is_alive() {
                return false;
            }
            if progress.elapsed() >= stall {
                self.out.mark_overflow();
                return false;
            }
            self.io.borrow().wait_writable(Duration::from_millis(100));
        }
        true
    }

    /// Borrow the socket (the connection's loop reads and waits through this).
    pub(super) fn io(&self) -> std::cell::RefMut<'_, Stream> {
        self.io.borrow_mut()
    }
}
