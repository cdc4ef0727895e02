//! `MemoryPort`: an in-memory port that needs no privileges, fed and drained by a test (or
//! an embedding application) through its handle.

use crate::{PacketBatch, Port, PortInfo, PortStats, MAX_FRAME};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// Frames are kept back to back in one growing buffer per direction, so neither injecting
/// nor sending allocates per frame once the buffers have grown.
#[derive(Default)]
struct Shared {
    /// Injected, not yet received: bytes and frame lengths, consumed from the front.
    rx_data: Vec<u8>,
    rx_off: usize,
    rx_lens: VecDeque<u32>,
    /// Sent, not yet taken.
    tx_data: Vec<u8>,
    tx_lens: Vec<u32>,
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A test that panicked while holding the lock leaves consistent data behind.
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A port fed and drained by a test through its [`MemoryPortHandle`].
pub struct MemoryPort {
    name: String,
    shared: Arc<Mutex<Shared>>,
    stats: PortStats,
}

/// The test's side of a [`MemoryPort`]: inject frames it will receive, take what it sent.
#[derive(Clone)]
pub struct MemoryPortHandle {
    shared: Arc<Mutex<Shared>>,
}

impl MemoryPort {
    pub fn new(name: &str) -> (MemoryPort, MemoryPortHandle) {
        let shared = Arc::new(Mutex::new(Shared::default()));
        (
            MemoryPort {
                name: name.into(),
                shared: shared.clone(),
                stats: PortStats::default(),
            },
            MemoryPortHandle { shared },
        )
    }
}

impl MemoryPortHandle {
    /// Queue one frame for the port to receive.
    pub fn inject(&self, frame: &[u8]) {
        let mut s = lock(&self.shared);
        s.rx_data.extend_from_slice(frame);
        s.rx_lens.push_back(frame.len() as u32);
    }

    /// Queue several frames, in order.
    pub fn inject_many<I>(&self, frames: I)
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut s = lock(&self.shared);
        for f in frames {
            let f = f.as_ref();
            s.rx_data.extend_from_slice(f);
            s.rx_lens.push_back(f.len() as u32);
        }
    }

    /// Injected frames the port has not received yet.
    pub fn pending(&self) -> usize {
        lock(&self.shared).rx_lens.len()
    }

    /// Everything sent since the last call, in order.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        let mut s = lock(&self.shared);
        let mut out = Vec::with_capacity(s.tx_lens.len());
        let mut at = 0;
        for &l in &s.tx_lens {
            out.push(s.tx_data[at..at + l as usize].to_vec());
            at += l as usize;
        }
        s.tx_data.clear();
        s.tx_lens.clear();
        out
    }

    /// Frames sent and not yet taken.
    pub fn sent_len(&self) -> usize {
        lock(&self.shared).tx_lens.len()
    }
}

impl Port for MemoryPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        let mut s = lock(&self.shared);
        let s = &mut *s;
        let mut n = 0;
        while batch.room() > 0 {
            let Some(len) = s.rx_lens.pop_front() else {
                break;
            };
            let len = len as usize;
            let frame = &s.rx_data[s.rx_off..s.rx_off + len];
            s.rx_off += len;
            if len > MAX_FRAME {
                self.stats.rx_dropped += 1;
                continue;
            }
            batch.push(frame);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        if s.rx_lens.is_empty() {
            s.rx_data.clear();
            s.rx_off = 0;
        } else if s.rx_off > 1 << 20 && s.rx_off * 2 > s.rx_data.len() {
            // Reclaim the consumed front once it dominates.
            s.rx_data.drain(..s.rx_off);
            s.rx_off = 0;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> bool {
        let mut s = lock(&self.shared);
        s.tx_data.extend_from_slice(frame);
        s.tx_lens.push(frame.len() as u32);
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        true
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "memory",
            detail: "in-memory frames injected and collected by a test".into(),
        }
    }
}
