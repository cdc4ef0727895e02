//! The sending side of a connection: a bounded queue of encoded messages that any thread
//! pushes to (replies from the connection's own thread, packet-ins, FLOW_REMOVED and
//! PORT_STATUS from the hub's threads) and the connection's thread drains onto the socket.
//! A push never blocks: when the queue would pass its bound the peer is not reading, and
//! the connection is closed instead of growing the queue.

use flowpath_openflow::consts::*;
use flowpath_openflow::{AsyncConfig, Message, SwitchConfig};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// Why a push was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The connection is closed (or closing).
    Closed,
    /// The queue would pass its bound: the connection is closed now.
    Full,
}

/// Encoded messages waiting for the socket, and their total size.
#[derive(Default)]
struct Queue {
    msgs: VecDeque<Vec<u8>>,
    bytes: usize,
}

/// The sending side of a connection, shared with the threads that send asynchronous
/// messages.
pub(crate) struct ConnOut {
    pub(super) id: u64,
    pub(crate) peer: String,
    /// An active (`tcp:`/`ssl:`) connection to a controller, as opposed to a client that
    /// connected to a listener.
    pub(super) active: bool,
    queue: Mutex<Queue>,
    /// Most bytes the queue holds; a push past it closes the connection.
    max_bytes: usize,
    /// Written to wake the connection's thread (an eventfd).
    wake: OwnedFd,
    pub(super) role: AtomicU32,
    pub(crate) async_cfg: Mutex<AsyncConfig>,
    pub(crate) config: Mutex<SwitchConfig>,
    /// HELLO exchanged: asynchronous messages may flow.
    ready: AtomicBool,
    alive: AtomicBool,
    /// Set once when the peer stopped reading (the connection counts it as it ends).
    overflowed: AtomicBool,
}

impl ConnOut {
    /// A connection's sending side with an empty queue of at most `max_bytes`.
    pub(super) fn new(
        id: u64,
        peer: String,
        active: bool,
        max_bytes: usize,
    ) -> std::io::Result<ConnOut> {
        // SAFETY: eventfd returns a new descriptor or -1; a new one is ours to own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ConnOut {
            id,
            peer,
            active,
            queue: Mutex::new(Queue::default()),
            max_bytes,
            wake,
            role: AtomicU32::new(OFPCR_ROLE_EQUAL),
            async_cfg: Mutex::new(default_async()),
            config: Mutex::new(SwitchConfig {
                flags: OFPC_FRAG_NORMAL,
                miss_send_len: 128,
            }),
            ready: AtomicBool::new(false),
            alive: AtomicBool::new(true),
            overflowed: AtomicBool::new(false),
        })
    }

    /// Queue encoded messages for the connection's thread to send. False when the
    /// connection is closed, or is closed now because the queue would pass its bound.
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> bool {
        self.push(bytes.to_vec()).is_ok()
    }

    /// [`ConnOut::send_raw`] of an owned buffer, saying why it was refused.
    pub(super) fn push(&self, bytes: Vec<u8>) -> Result<(), Refused> {
        if !self.is_alive() {
            return Err(Refused::Closed);
        }
        let was_empty = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.bytes + bytes.len() > self.max_bytes {
                drop(q);
                self.mark_overflow();
                return Err(Refused::Full);
            }
            q.bytes += bytes.len();
            q.msgs.push_back(bytes);
            q.msgs.len() == 1
        };
        if was_empty {
            self.wake();
        }
        Ok(())
    }

    pub(crate) fn send(&self, m: &Message, xid: u32) -> bool {
        self.push(m.encode(xid)).is_ok()
    }

    /// Bytes waiting in the queue.
    pub(super) fn queued(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Move queued messages onto the end of `buf` until it holds at least `upto` bytes or
    /// the queue is empty.
    pub(super) fn take_into(&self, buf: &mut Vec<u8>, upto: usize) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        while buf.len() < upto {
            let Some(m) = q.msgs.pop_front() else { break };
            q.bytes -= m.len();
            buf.extend_from_slice(&m);
        }
    }

    /// The peer stopped reading: close the connection and say so when it ends.
    pub(super) fn mark_overflow(&self) {
        self.overflowed.store(true, Ordering::Relaxed);
        self.set_closed();
    }

    /// Did a push find the queue full, or did writing stall (the peer stopped reading)?
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// The descriptor the connection's thread polls to be woken.
    pub(super) fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Wake the connection's thread (something to send, or closing).
    fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd; a full counter (EAGAIN)
        // still leaves it readable, which is all a wake needs.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reset the wake descriptor after the connection's thread saw it.
    pub(super) fn clear_wake(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub(super) fn role(&self) -> u32 {
        self.role.load(Ordering::Relaxed)
    }

    pub(super) fn is_slave(&self) -> bool {
        self.role() == OFPCR_ROLE_SLAVE
    }

    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Nothing more is sent on the connection; its thread wakes and closes it.
    pub(super) fn set_closed(&self) {
        self.alive.store(false, Ordering::Relaxed);
        self.wake();
    }

    /// HELLO exchanged: asynchronous messages may flow from now on.
    pub(super) fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Does this connection want asynchronous message `kind` (0 packet-in, 1 port status,
    /// 2 flow removed) with `reason`? By its role and its SET_ASYNC masks.
    pub(super) fn wants(&self, kind: usize, reason: u8) -> bool {
        if !self.ready.load(Ordering::Relaxed) || !self.is_alive() {
            return false;
        }
        let slave = self.role() == OFPCR_ROLE_SLAVE;
        let a = self.async_cfg.lock().unwrap_or_else(|e| e.into_inner());
        let masks = match kind {
            0 => a.packet_in_mask,
            1 => a.port_status_mask,
            _ => a.flow_removed_mask,
        };
        let m = masks[usize::from(slave)];
        reason < 32 && m & (1 << reason) != 0
    }
}

/// The OpenFlow 1.3 default asynchronous configuration (§7.3.10): master/equal get every
/// packet-in, port status and flow-removed reason; slaves get port status only.
fn default_async() -> AsyncConfig {
    AsyncConfig {
        packet_in_mask: [0b111, 0],
        port_status_mask: [0b111, 0b111],
        flow_removed_mask: [0b1111, 0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_and_drains_in_order() {
        let o = ConnOut::new(1, "t".into(), false, 100).unwrap();
        assert!(o.send_raw(&[1; 40]));
        assert!(o.send_raw(&[2; 40]));
        assert_eq!(o.queued(), 80);
        let mut b = Vec::new();
        o.take_into(&mut b, 1);
        assert_eq!(b, vec![1; 40], "one message is enough to pass `upto`");
        assert_eq!(o.queued(), 40);
        assert!(o.send_raw(&[3; 60]), "100 bytes queued is within the bound");
        assert!(!o.overflowed());
        assert_eq!(o.push(vec![4]), Err(Refused::Full));
        assert!(
            o.overflowed() && !o.is_alive(),
            "an overflow closes the connection"
        );
        assert_eq!(
            o.push(vec![4]),
            Err(Refused::Closed),
            "nothing more is queued once closed"
        );
        o.take_into(&mut b, usize::MAX);
        assert_eq!(b.len(), 140);
        assert_eq!(o.queued(), 0);
    }
}
