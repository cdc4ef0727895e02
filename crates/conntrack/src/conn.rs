//! One connection as the table stores it, the slab of slots that holds them (pages
//! allocated as the table fills, never moved), and what a connection shows a packet: its
//! timeout, state name and the ct fields it writes into the key.

use crate::config::Timeouts;
use crate::tcp::{TcpConn, TcpState};
use crate::tuple::Tuple;
use flowpath_packet::key::ipproto;
use flowpath_packet::{Field, FlowKey};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// A slot's life: free, being created (its tuples claimed, not yet answering packets),
/// live, dying (ended, being unlinked from the index; its tuples are free again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Life {
    Free,
    Creating,
    Live,
    Dying,
}

/// Which NAT a connection has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nat {
    None,
    Src,
    Dst,
}

/// One tracked connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conn {
    pub orig: Tuple,
    /// The reply direction's tuple as packets arrive in it (NAT'd when the connection has
    /// NAT).
    pub reply: Tuple,
    pub label: u128,
    pub expires_ms: u64,
    pub mark: u32,
    pub tcp: Option<TcpConn>,
    pub life: Life,
    pub seen_reply: bool,
    /// Has been assured (see [`Conn::assure`]); stays so.
    pub assured: bool,
    pub nat: Nat,
}

impl Conn {
    pub(crate) const FREE: Conn = Conn {
        orig: ZERO_TUPLE,
        reply: ZERO_TUPLE,
        label: 0,
        expires_ms: 0,
        mark: 0,
        tcp: None,
        life: Life::Free,
        seen_reply: false,
        assured: false,
        nat: Nat::None,
    };

    pub(crate) fn live(&self) -> bool {
        self.life == Life::Live
    }

    /// Mark the connection assured once it has been seen in both directions (TCP: and
    /// reached ESTABLISHED), as Linux's `IPS_ASSURED`: early drop never evicts it.
    pub(crate) fn assure(&mut self) {
        self.assured |=
            self.seen_reply && self.tcp.is_none_or(|t| t.state == TcpState::Established);
    }

    /// Whether a packet in this direction is `+est` (Linux: the connection has seen a
    /// reply, or the packet is one).
    pub(crate) fn established(&self, reply: bool) -> bool {
        reply || self.seen_reply || self.tcp.is_some_and(|t| t.established())
    }

    /// Idle timeout in seconds for the connection's state.
    pub(crate) fn timeout(&self, t: &Timeouts) -> u32 {
        match (self.tcp, self.orig.proto) {
            (Some(tcp), _) => match tcp.state {
                TcpState::SynSent => t.tcp_syn_sent,
                TcpState::SynRecv => t.tcp_syn_recv,
                TcpState::Established => t.tcp_established,
                TcpState::FinWait => t.tcp_fin_wait,
                TcpState::CloseWait => t.tcp_close_wait,
                TcpState::LastAck => t.tcp_last_ack,
                TcpState::TimeWait => t.tcp_time_wait,
                TcpState::Close => t.tcp_close,
            },
            (None, ipproto::UDP) if self.seen_reply => t.udp_stream,
            (None, ipproto::UDP) => t.udp,
            (None, ipproto::ICMP | ipproto::ICMPV6) => t.icmp,
            _ => t.generic,
        }
    }

    /// The state name `summary()` counts it under.
    pub(crate) fn state_name(&self) -> &'static str {
        match self.tcp {
            Some(t) => t.state.name(),
            None if self.seen_reply => "REPLIED",
            None => "UNREPLIED",
        }
    }
}

const ZERO_TUPLE: Tuple = Tuple {
    src: 0,
    dst: 0,
    src_port: 0,
    dst_port: 0,
    proto: 0,
    ipv6: false,
    zone: 0,
};

/// The connection fields a tracked packet carries: mark, label, original tuple (OVS's
/// `ct_orig_tuple`: ports for TCP/UDP, type and code for ICMP).
pub(crate) fn write_conn_fields(key: &mut FlowKey, orig: &Tuple, mark: u32, label: u128) {
    key.set(Field::CtMark, mark as u128);
    key.set(Field::CtLabel, label);
    key.set(Field::CtNwProto, orig.proto as u128);
    key.set(Field::CtIpv6Src, orig.src);
    key.set(Field::CtIpv6Dst, orig.dst);
    let (sp, dp) = match orig.proto {
        ipproto::TCP | ipproto::UDP => (orig.src_port, orig.dst_port),
        ipproto::ICMP | ipproto::ICMPV6 => (orig.dst_port, 0),
        _ => (0, 0),
    };
    key.set(Field::CtTpSrc, sp as u128);
    key.set(Field::CtTpDst, dp as u128);
}

/// Slots per slab page.
pub(crate) const PAGE: usize = 1024;

pub(crate) type SlotLock = Mutex<Conn>;

/// The connections' storage: `capacity` slots in pages allocated on first use. A slot's
/// number never changes while the connection lives, so the index names slots.
pub(crate) struct Slab {
    pages: Box<[OnceLock<Box<[SlotLock]>>]>,
    /// Slots below this have been handed out at least once.
    high: AtomicU32,
    /// Freed slots, reused first (a lock on create and remove only; lookups never take it).
    free: Mutex<Vec<u32>>,
    capacity: u32,
}

impl Slab {
    pub(crate) fn new(capacity: u32) -> Slab {
        Slab {
            pages: (0..(capacity as usize).div_ceil(PAGE))
                .map(|_| OnceLock::new())
                .collect(),
            high: AtomicU32::new(0),
            free: Mutex::new(Vec::new()),
            capacity,
        }
    }

    /// Slots handed out so far (the expiry scan's range).
    pub(crate) fn high(&self) -> u32 {
        self.high.load(Ordering::Acquire).min(self.capacity)
    }

    /// Lock slot `i` (which must have been handed out).
    #[inline]
    pub(crate) fn lock(&self, i: u32) -> MutexGuard<'_, Conn> {
        let page = self.pages[i as usize / PAGE]
            .get()
            .expect("a handed-out slot's page exists");
        page[i as usize % PAGE]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Lock slot `i` if its page exists (the expiry scan may reach a slot whose page another
    /// worker is still making).
    pub(crate) fn try_get(&self, i: u32) -> Option<MutexGuard<'_, Conn>> {
        let page = self.pages.get(i as usize / PAGE)?.get()?;
        Some(
            page[i as usize % PAGE]
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// A free slot, or `None` when every slot is in use.
    pub(crate) fn alloc(&self) -> Option<u32> {
        if let Some(i) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(i);
        }
        let i = self
            .high
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                (h < self.capacity).then_some(h + 1)
            })
            .ok()?;
        self.pages[i as usize / PAGE]
            .get_or_init(|| (0..PAGE).map(|_| Mutex::new(Conn::FREE)).collect());
        Some(i)
    }

    /// Give slot `i` back (its connection already unlinked from the index).
    pub(crate) fn release(&self, i: u32) {
        *self.lock(i) = Conn::FREE;
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(i);
    }
}
