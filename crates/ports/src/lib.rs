//! Ports: where packets enter and leave the switch (AF_XDP, AF_PACKET, TAP, pcap files,
//! in-memory traffic) behind one small batch trait, with tracing and fault-injection wrappers.
//!
//! A worker owns one queue of each port it serves and uses it for both directions: it
//! `recv`s a batch into its own [`RxBatch`] (one copy out of the ring, so the ring slot goes
//! back to the kernel at once and every packet has headroom for pushed headers), runs the
//! datapath over it, and `send`s outputs, which are copied into the port's transmit ring
//! and pushed out by one `flush` per loop iteration.

pub mod afpacket;
pub mod afxdp;
pub mod config;
pub mod fault;
pub mod memory;
pub mod pcap;
pub mod tap;
pub mod trace;
pub mod xdp;
pub mod xdpgen;

pub use config::{PortConfig, PortKind, XdpMode};
pub use fault::{FaultConfig, FaultInjector};
pub use memory::{GeneratedPort, MemoryPort, MemoryPortHandle};
pub use trace::PcapTracer;

use flowpath_packet::packet::HEADROOM;
use flowpath_packet::Packet;
use std::io;

/// Frames per receive batch (and the datapath's batch size).
pub const BATCH: usize = 32;
/// Bytes of worker buffer per received frame, headroom included.
pub const FRAME: usize = 2048;
/// Longest frame a port delivers into an [`RxBatch`]; longer ones are dropped and counted.
pub const MAX_FRAME: usize = FRAME - HEADROOM;

/// Counters every port keeps. Monotonic; read by `flowpath stats` and the metrics endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames the port received but could not deliver (too long, ring overrun reported by
    /// the kernel, injected faults).
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames handed to `send` that never left (ring full, too long, injected faults).
    pub tx_dropped: u64,
    /// System calls that failed (each also logged once by the worker).
    pub errors: u64,
}

impl std::ops::AddAssign for PortStats {
    fn add_assign(&mut self, o: PortStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_dropped += o.tx_dropped;
        self.errors += o.errors;
    }
}

/// What a port is, for `flowpath stats`: e.g. `afxdp`, `copy mode, native XDP, huge pages`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortInfo {
    pub kind: &'static str,
    pub detail: String,
}

/// One queue of a port, used by one worker for receiving and transmitting.
///
/// Implementations never block: `recv` returns what is there, `send` refuses when the ring
/// is full. An error from `recv`/`flush` means the device is gone or broken; the worker
/// logs it, stops polling that port and carries on with the others.
pub trait Port: Send {
    /// The port's configured name (not necessarily the interface's).
    fn name(&self) -> &str;
    /// Append up to `batch.room()` received frames to `batch`; returns how many.
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize>;
    /// Queue one frame for transmission. Returns false (and counts a tx drop) when it
    /// cannot be queued.
    fn send(&mut self, frame: &[u8]) -> bool;
    /// Push queued frames out (at most one system call) and reclaim completed buffers.
    fn flush(&mut self) -> io::Result<()>;
    fn stats(&self) -> PortStats;
    fn info(&self) -> PortInfo;
}

impl<P: Port + ?Sized> Port for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        (**self).recv(batch)
    }
    fn send(&mut self, frame: &[u8]) -> bool {
        (**self).send(frame)
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
    fn stats(&self) -> PortStats {
        (**self).stats()
    }
    fn info(&self) -> PortInfo {
        (**self).info()
    }
}

/// A worker's receive buffers: [`BATCH`] frames of [`FRAME`] bytes, each starting after
/// [`HEADROOM`] bytes so VLAN pushes and encapsulation do not move the payload.
pub struct RxBatch {
    buf: Box<[u8]>,
    lens: [u16; BATCH],
    n: usize,
}

impl Default for RxBatch {
    fn default() -> Self {
        RxBatch::new()
    }
}

impl RxBatch {
    pub fn new() -> RxBatch {
        RxBatch {
            buf: vec![0u8; BATCH * FRAME].into_boxed_slice(),
            lens: [0; BATCH],
            n: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Frames that can still be appended.
    pub fn room(&self) -> usize {
        BATCH - self.n
    }

    pub fn clear(&mut self) {
        self.n = 0;
    }

    /// Copy `frame` in as the next packet. Returns false (nothing appended) when the batch
    /// is full or the frame is longer than [`MAX_FRAME`]; the port counts that as a drop.
    #[inline]
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.n == BATCH || frame.len() > MAX_FRAME {
            return false;
        }
        let at = self.n * FRAME + HEADROOM;
        self.buf[at..at + frame.len()].copy_from_slice(frame);
        self.lens[self.n] = frame.len() as u16;
        self.n += 1;
        true
    }

    /// The writable area of the next slot ([`MAX_FRAME`] bytes), for ports that read
    /// straight into it (e.g. `read(2)` on a TAP); follow with [`RxBatch::commit`].
    /// `None` when the batch is full.
    pub fn next_slot(&mut self) -> Option<&mut [u8]> {
        if self.n == BATCH {
            return None;
        }
        let at = self.n * FRAME + HEADROOM;
        Some(&mut self.buf[at..at + MAX_FRAME])
    }

    /// Make the first `len` bytes written through [`RxBatch::next_slot`] the next packet.
    ///
    /// # Panics
    /// If the batch is full or `len` exceeds [`MAX_FRAME`] (a bug in the port).
    pub fn commit(&mut self, len: usize) {
        assert!(
            self.n < BATCH && len <= MAX_FRAME,
            "RxBatch::commit out of range"
        );
        self.lens[self.n] = len as u16;
        self.n += 1;
    }

    /// Frame `i` as received.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.n);
        let at = i * FRAME + HEADROOM;
        &self.buf[at..at + self.lens[i] as usize]
    }

    /// Mutable bytes of frame `i` (fault injection corrupts through this).
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.n);
        let at = i * FRAME + HEADROOM;
        let len = self.lens[i] as usize;
        &mut self.buf[at..at + len]
    }

    /// Remove frame `i`, keeping the order of the others.
    pub fn remove(&mut self, i: usize) {
        assert!(i < self.n);
        for j in i..self.n - 1 {
            let (a, b) = self.buf.split_at_mut((j + 1) * FRAME);
            let len = self.lens[j + 1] as usize;
            a[j * FRAME + HEADROOM..j * FRAME + HEADROOM + len]
                .copy_from_slice(&b[HEADROOM..HEADROOM + len]);
            self.lens[j] = self.lens[j + 1];
        }
        self.n -= 1;
    }

    /// Run `f` over the batch as datapath packets (views into these buffers, no copy and
    /// no allocation).
    #[inline]
    pub fn with_packets<R>(&mut self, f: impl FnOnce(&mut [Packet<'_>]) -> R) -> R {
        let mut pkts: smallvec::SmallVec<[Packet<'_>; BATCH]> = smallvec::SmallVec::new();
        for (chunk, &len) in self.buf.chunks_exact_mut(FRAME).zip(&self.lens[..self.n]) {
            pkts.push(Packet::new(chunk, HEADROOM, len as usize));
        }
        f(&mut pkts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_push_remove_and_views() {
        let mut b = RxBatch::new();
        for i in 0..BATCH {
            assert!(b.push(&[i as u8; 60]));
        }
        assert!(!b.push(&[0; 60]), "a full batch refuses");
        assert_eq!(b.room(), 0);
        b.remove(3);
        assert_eq!(b.len(), BATCH - 1);
        assert_eq!(b.frame(2)[0], 2);
        assert_eq!(b.frame(3)[0], 4);
        let lens = b.with_packets(|p| {
            p.iter()
                .map(|p| (p.len(), p.headroom()))
                .collect::<Vec<_>>()
        });
        assert_eq!(lens.len(), BATCH - 1);
        assert!(lens.iter().all(|&(l, h)| l == 60 && h == HEADROOM));
        b.clear();
        assert!(!b.push(&vec![0; MAX_FRAME + 1]), "too long is refused");
        assert!(b.push(&vec![7; MAX_FRAME]));
        let s = b.next_slot().unwrap();
        s[..3].copy_from_slice(&[1, 2, 3]);
        b.commit(3);
        assert_eq!(b.frame(1), &[1, 2, 3]);
    }
}
