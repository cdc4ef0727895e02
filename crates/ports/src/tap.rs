//! TAP port: a VM-facing tap device, read and written frame by frame.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use std::io;

pub struct TapPort {
    name: String,
}

impl TapPort {
    pub fn open(name: &str, _ifname: &str) -> io::Result<TapPort> {
        let _ = name;
        Err(io::Error::new(io::ErrorKind::Unsupported, "not built yet"))
    }
}

impl Port for TapPort {
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
