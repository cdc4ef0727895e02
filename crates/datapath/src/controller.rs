//! The controller queue: packets a `controller` action hands to the application, with
//! their buffers recycled so that sending to the controller does not allocate per packet.

use crossbeam_queue::ArrayQueue;

/// A packet handed to the controller application (`Controller` action).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerPacket {
    pub in_port: u32,
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

    /// Queue a copy of `data`. False (nothing queued) when the queue is full.
    pub(crate) fn push(&self, in_port: u32, data: &[u8]) -> bool {
        if self.packets.is_full() {
            return false;
        }
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        match self.packets.push(ControllerPacket { in_port, data: buf }) {
            Ok(()) => true,
            Err(p) => {
                let _ = self.pool.push(p.data);
                false
            }
        }
    }
}
