//! `GeneratedPort`: an [`InMemorySource`] as a [`Port`], so generated traffic enters a
//! datapath the way every other traffic does (the bench, `flowpath run`, generator ports).

use crate::source::InMemorySource;
use flowpath_base::{PacketBatch, Port, PortInfo, PortStats};
use std::io;

/// Generated traffic: each `recv` copies the source's next frames into the worker's batch
/// ([`InMemorySource::fill`]: the datapath then rewrites its own copy, so the source's
/// slots stay as laid out); `send` only counts.
pub struct GeneratedPort {
    name: String,
    src: InMemorySource,
    stats: PortStats,
}

impl GeneratedPort {
    pub fn new(name: &str, src: InMemorySource) -> GeneratedPort {
        GeneratedPort {
            name: name.into(),
            src,
            stats: PortStats::default(),
        }
    }

    pub fn source(&self) -> &InMemorySource {
        &self.src
    }

    /// The source, to change churn or lifetimes between runs.
    pub fn source_mut(&mut self) -> &mut InMemorySource {
        &mut self.src
    }
}

impl Port for GeneratedPort {
    fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let f = self.src.fill(batch);
        self.stats.rx_packets += f.frames as u64;
        self.stats.rx_bytes += f.bytes;
        self.stats.rx_dropped += f.dropped as u64;
        Ok(f.frames)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        true
    }

    fn send_batch(&mut self, frames: &[&[u8]]) -> usize {
        self.stats.tx_packets += frames.len() as u64;
        self.stats.tx_bytes += frames.iter().map(|f| f.len() as u64).sum::<u64>();
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "generator",
            detail: format!(
                "in-memory generated traffic, {} templates over {} slots",
                self.src.template_count(),
                self.src.slot_count()
            ),
        }
    }
}
