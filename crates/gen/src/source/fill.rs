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
            // No draw, and no look at the template, without a new-flow share.
            let new_flow = threshold != 0 && {
                let ip = self.templates[slot.tpl as usize].stamp.ip;
                draws_new_flow(&mut self.rng, threshold, ip)
            };
            if LIFE && !new_flow {
                if let Some(l) = self.life.as_deref_mut() {
                    let frame = &mut self.arena[at..at + len];
                    let (t, n) = (&mut self.templates, &mut self.new_flows);
                    step(l, t, slot.tpl, idx, frame, n);
                }
            }
            idx += 1;
            // Whole cache lines: the slot's tailroom has room for the rounded-up length.
            let lines = len.div_ceil(64) * 64;
            let Some(dst) = batch.push_lines(&self.arena[at..at + lines], len) else {
                out.dropped += 1;
                continue;
            };
            out.frames += 1;
            out.bytes += len as u64;
            if new_flow {
                let info = &self.templates[slot.tpl as usize].stamp;
                stamp(dst, info, self.new_flows);
                self.new_flows += 1;
            }
        }
        self.next = if idx == n_slots { 0 } else { idx };
        self.packets += count as u64;
        out
    }
}

/// What one [`InMemorySource::fill`] delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filled {
    pub frames: usize,
    pub bytes: u64,
    /// Frames longer than a batch slot holds, not delivered.
    pub dropped: usize,
}
