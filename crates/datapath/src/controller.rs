//! The controller queue: packets a `controller` action hands to the application (with
//! what an OpenFlow PACKET_IN says about them), their buffers recycled so that sending to
//! the controller does not allocate per packet; and the packet-out queue the other way.

use crossbeam_queue::ArrayQueue;
use flowpath_packet::Action;

/// The port number a packet-out from the controller "arrived" on when it names no real
/// port (OpenFlow's `OFPP_CONTROLLER`).
pub const CONTROLLER_PORT: u32 = 0xffff_fffd;

/// A packet handed to the controller application (`Controller` action): an OpenFlow
/// PACKET_IN's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerPacket {
    /// The port it came in on ([`CONTROLLER_PORT`] for a packet-out's packet).
    pub in_port: u32,
    /// `flowpath_packet::packet_in_reason`: `NO_MATCH` (0) from a table-miss rule
    /// (priority 0, all wildcards), `ACTION` (1) from any other controller action.
    pub reason: u8,
    /// Table and cookie of the rule whose controller action sent it.
    pub table_id: u8,
    pub cookie: u64,
    /// The whole frame's length (PACKET_IN's `total_len`), before truncation.
    pub total_len: u32,
    /// The frame, truncated to the action's `max_len` (0xffff: all of it), as the actions
    /// before the controller action left it.
    pub data: Vec<u8>,
}

/// Bounded queue from the worker to the application, plus a pool of spent buffers going
/// back. The worker takes a pooled buffer when one is there (allocating only while the pool
/// is still empty, i.e. until the application starts recycling), so in steady state a
/// `controller` action copies the packet and allocates nothing.
pub struct ControllerQueue {
    packets: ArrayQueue<ControllerPacket>,
    pool: ArrayQueue<Vec<u8>>,
}

impl ControllerQueue {
    pub fn new(capacity: usize) -> ControllerQueue {
        let capacity = capacity.max(1);
        ControllerQueue {
            packets: ArrayQueue::new(capacity),
            pool: ArrayQueue::new(capacity),
        }
    }

    /// The next packet for the application, if any.
    pub fn pop(&self) -> Option<ControllerPacket> {
        self.packets.pop()
    }

    pub fn len(&self) -> usize {
        self.packets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Give a handled packet's buffer back for reuse.
    pub fn recycle(&self, p: ControllerPacket) {
        let _ = self.pool.push(p.data);
    }

    /// Queue a copy of `frame` for a `Controller` action `a` (truncated to its
    /// `max_len`). False (nothing queued) when the queue is full.
    pub(crate) fn push(&self, in_port: u32, a: &Action, frame: &[u8]) -> bool {
        let Action::Controller {
            max_len,
            reason,
            table,
            ..
        } = *a
        else {
            return false;
        };
        if self.packets.is_full() {
            return false;
        }
        let n = frame.len().min(max_len as usize);
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&frame[..n]);
        let p = ControllerPacket {
            in_port,
            reason,
            table_id: table,
            cookie: a.cookie(),
            total_len: frame.len() as u32,
            data: buf,
        };
        match self.packets.push(p) {
            Ok(()) => true,
            Err(p) => {
                let _ = self.pool.push(p.data);
                false
            }
        }
    }
}

/// A packet the control side hands a worker to send (OpenFlow PACKET_OUT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// The port it is deemed to have come in on: a real port, or `None` for none
    /// (`OFPP_CONTROLLER`; the datapath then uses [`CONTROLLER_PORT`]).
    pub in_port: Option<u32>,
    /// Run in order: outputs (`Output`, `InPort`, `Normal`, `Flood`, `All`, `Controller`),
    /// rewrites, and `Table` (the packet as it is then goes through the pipeline from table
    /// 0 as if received on `in_port`; what follows `Table` is ignored, as OpenFlow allows
    /// TABLE only as an output of a packet-out).
    pub actions: Vec<Action>,
    /// The whole frame.
    pub data: Vec<u8>,
}

/// Bounded, lock-free queue of packet-outs from the control side to one worker. The
/// worker drains it between batches (at most [`PACKET_OUTS_PER_POLL`] per poll) and sends
/// the outputs through the same ports as its traffic.
pub struct PacketOutQueue {
    q: ArrayQueue<PacketOut>,
}

/// Packet-outs one worker poll executes at most (the rest wait for the next poll).
pub const PACKET_OUTS_PER_POLL: usize = 64;

impl PacketOutQueue {
    pub fn new(capacity: usize) -> PacketOutQueue {
        PacketOutQueue {
            q: ArrayQueue::new(capacity.max(1)),
        }
    }

    /// Queue `p` for the worker; when the queue is full it is handed back (the caller
    /// reports the error — nothing blocks).
    pub fn push(&self, p: PacketOut) -> Result<(), PacketOut> {
        self.q.push(p)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.q.capacity()
    }

    pub(crate) fn pop(&self) -> Option<PacketOut> {
        self.q.pop()
    }
}
