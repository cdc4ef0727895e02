//! AF_PACKET port: a TPACKET_V3 memory-mapped receive ring and batched transmit; works on any interface.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use std::io;

pub struct AfPacketPort {
    name: String,
}

impl AfPacketPort {
    pub fn open(name: &str, _interface: &str, _fanout: bool) -> io::Result<AfPacketPort> {
        let _ = name;
        Err(io::Error::new(io::ErrorKind::Unsupported, "not built yet"))
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn recv(&mut self, _batch: &mut RxBatch) -> io::Result<usize> {
        Ok(0)
    }
    fn send(&mut self, _frame: &[u8]) -> bool {
        false
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
    fn info(&self) -> PortInfo {
        PortInfo::default()
    }
}
