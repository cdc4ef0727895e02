//! Filling: frames copied into a port's [`PacketBatch`], what a port's `recv` does.

use super::lifetime::{draws_new_flow, step};
use super::stamp::stamp;
use super::InMemorySource;
use flowpath_base::{PacketBatch, HEADROOM};

impl InMemorySource {
    /// Copy the next frames (as many as `batch` has room for, at most the slot count) into
    /// `batch`, wrapping around: what a port's `recv` does. New-flow stamps are written into
    /// the copies, so the slots stay as laid out (no restoring later); lifetimes restamp
    /// the slots themselves, as with [`InMemorySource::lend`]. The same slots, random draws
    /// and stamps as `lend` would give.
    pub fn fill(&mut self, batch: &mut PacketBatch) -> Filled {
        if self.life_on {
            self.fill_with::<true>(batch)
        } else {
            self.fill_with::<false>(batch)
        }
    }

    #[inline(always)]
    fn fill_with<const LIFE: bool>(&mut self, batch: &mut PacketBatch) -> Filled {
        while let Some(i) = self.dirty.pop() {
            self.restore(i as usize);
        }
        let n_slots = self.slots.len();
        let count = batch.room().min(n_slots);
        let (ss, base, threshold) = (self.slot_size, self.base, self.threshold);
        let mut idx = self.next;
        let mut out = Filled::default();
        for _ in 0..count {
            if idx == n_slots {
                idx = 0;
            }
            let slot = self.slots[idx];
            let at = base + idx * ss + HEADROOM;
            let len = slot.len as usize;
            // The arena is larger than L1: start loading a slot a few frames ahead.
            prefetch(&self.arena, base + ((idx + 8) % n_slots) * ss + HEADROOM);
            let info = &self.templates[slot.tpl as usize].stamp;
            let new_flow = if LIFE {
                let n = draws_new_flow(&mut self.rng, threshold, info.ip);
                if let Some(l) = self.life.as_deref_mut().filter(|_| !n) {
                    let frame = &mut self.arena[at..at + len];
                    step(
                        l,
                        &mut self.templates,
                        slot.tpl,
                        idx,
                        frame,
                        &mut self.new_flows,
                    );
                }
                n
            } else {
                draws_new_flow(&mut self.rng, threshold, info.ip)
            };
            idx += 1;
            // Whole cache lines: the slot's tailroom and the batch slot both have room for
            // the rounded-up length, and fixed 64-byte copies inline as vector moves where a
            // variable-length copy would call memcpy per frame.
            let lines = len.div_ceil(64) * 64;
            let Some(dst) = batch.next_slot().filter(|d| d.len() >= lines) else {
                out.dropped += 1;
                continue;
            };
            let src = &self.arena[at..at + lines];
            for (d, s) in dst[..lines].chunks_exact_mut(64).zip(src.chunks_exact(64)) {
                d.copy_from_slice(s);
            }
            out.frames += 1;
            out.bytes += len as u64;
            if new_flow {
                stamp(
                    &mut dst[..len],
                    &self.templates[slot.tpl as usize].stamp,
                    self.new_flows,
                );
                self.new_flows += 1;
            }
            batch.commit(len);
        }
        self.next = if idx == n_slots { 0 } else { idx };
        self.packets += count as u64;
        out
    }
}

/// A hint to load the cache line at `buf[at]` (ignored off x86_64 or out of bounds).
#[inline(always)]
fn prefetch(buf: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = buf.get(at) {
        // SAFETY: prefetching is a hint; the address is that of a live element.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((b as *const u8).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, at);
}

/// What one [`InMemorySource::fill`] delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filled {
    pub frames: usize,
    pub bytes: u64,
    /// Frames longer than a batch slot holds, not delivered.
    pub dropped: usize,
}
