//! In-memory ports that need no privileges: `MemoryPort` (frames injected and collected by a
//! test through a handle) and `GeneratedPort` (the traffic generator's frames as received traffic).
//! (stub: helper fills in)

use crate::{Port, PortInfo, PortStats, RxBatch};
use flowpath_gen::InMemorySource;
use std::io;

pub struct MemoryPort {
    name: String,
}

pub struct MemoryPortHandle;

impl MemoryPort {
    pub fn new(name: &str) -> (MemoryPort, MemoryPortHandle) {
        (MemoryPort { name: name.into() }, MemoryPortHandle)
    }
}

impl Port for MemoryPort {
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

pub struct GeneratedPort {
    name: String,
    #[allow(dead_code)]
    src: InMemorySource,
}

impl GeneratedPort {
    pub fn new(name: &str, src: InMemorySource) -> GeneratedPort {
        GeneratedPort {
            name: name.into(),
            src,
        }
    }
}

impl Port for GeneratedPort {
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
