//! pcap port: replays a capture file as received traffic and writes sent frames to another.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use std::io;

pub struct PcapPort {
    name: String,
}

impl PcapPort {
    pub fn open(
        name: &str,
        _rx: Option<&std::path::Path>,
        _tx: Option<&std::path::Path>,
    ) -> io::Result<PcapPort> {
        let _ = name;
        Err(io::Error::new(io::ErrorKind::Unsupported, "not built yet"))
    }
}

impl Port for PcapPort {
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
