//! The `Port` trait: where packets enter and leave the switch, one queue at a time, a
//! batch per call; with the counters every port keeps and what `flowpath stats` shows of it.
//!
//! A worker owns one queue of each port it serves and uses it for both directions: it
//! `recv`s a batch into its own [`PacketBatch`] (one copy out of the ring, so the ring slot
//! goes back to the kernel at once and every packet has headroom for pushed headers), runs
//! the datapath over it, and `send`s outputs (a batch per port per received batch), which
//! are copied into the port's transmit ring and pushed out by one `flush` per loop.

use crate::batch::PacketBatch;
use std::io;

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
    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize>;
    /// Queue one frame for transmission. Returns false (and counts a tx drop) when it
    /// cannot be queued.
    fn send(&mut self, frame: &[u8]) -> bool;
    /// Queue several frames, in order; returns how many were queued (the rest are counted
    /// as tx drops). Workers call this once per port per batch, so a boxed port costs one
    /// dynamic call per batch rather than per packet.
    fn send_batch(&mut self, frames: &[&[u8]]) -> usize {
        frames.iter().filter(|f| self.send(f)).count()
    }
    /// Push queued frames out (at most one system call) and reclaim completed buffers.
    /// Ports that send at once keep the default, which does nothing.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn stats(&self) -> PortStats;
    fn info(&self) -> PortInfo;
}

impl<P: Port + ?Sized> Port for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        (**self).recv(batch)
    }
    fn send(&mut self, frame: &[u8]) -> bool {
        (**self).send(frame)
    }
    fn send_batch(&mut self, frames: &[&[u8]]) -> usize {
        (**self).send_batch(frames)
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
