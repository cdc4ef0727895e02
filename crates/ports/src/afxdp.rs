//! AF_XDP port: one XDP socket per queue, UMEM on huge pages when possible, fed by the redirect program in xdp.rs.
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use std::io;

pub struct AfXdpPort {
    name: String,
}

impl AfXdpPort {
    pub fn open(
        name: &str,
        _interface: &str,
        _queue: u32,
        _opts: &AfXdpOptions,
    ) -> io::Result<AfXdpPort> {
        let _ = name;
        Err(io::Error::new(io::ErrorKind::Unsupported, "not built yet"))
    }
}

impl Port for AfXdpPort {
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

/// How to set up an AF_XDP queue.
#[derive(Clone, Debug, Default)]
pub struct AfXdpOptions {
    pub mode: crate::XdpMode,
    pub zero_copy: bool,
    pub hugepages: bool,
}
