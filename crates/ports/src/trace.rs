//! `PcapTracer`: wraps any port and records every frame it receives and sends to a pcap file.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use std::io;
use std::path::Path;

pub struct PcapTracer<P: Port> {
    inner: P,
}

impl<P: Port> PcapTracer<P> {
    pub fn new(inner: P, _path: &Path) -> io::Result<PcapTracer<P>> {
        Ok(PcapTracer { inner })
    }
}

impl<P: Port> Port for PcapTracer<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        self.inner.recv(batch)
    }
    fn send(&mut self, frame: &[u8]) -> bool {
        self.inner.send(frame)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
    fn info(&self) -> PortInfo {
        self.inner.info()
    }
}
