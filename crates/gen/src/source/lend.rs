//! Lending: frames handed out as [`Packet`] views into the source's own slots (no copy),
//! restored from their templates when an action modified them.

use super::lifetime::{draws_new_flow, step};
use super::stamp::stamp;
use super::InMemorySource;
use flowpath_base::{Packet, BATCH, HEADROOM};
use smallvec::SmallVec;
use std::ops::{Deref, DerefMut};

impl InMemorySource {
    /// Up to `max` (at most [`BATCH`], and at most the slot count) packets from the
    /// next consecutive slots, wrapping around. Each is `Packet::new(slot, HEADROOM, len)`
    /// with `modified == false`; with a new-flow share set, some are stamped as new flows
    /// (and so already marked modified). With a lifetime set, a slot whose flow was
    /// replaced is restamped in place to the flow's current identity and stays unmodified.
    pub fn lend(&mut self, max: usize) -> LentFrames<'_> {
        // One branch per batch; the loop without lifetimes is the same code as before they
        // existed.
        if self.life_on {
            self.rx::<true>(max)
        } else {
            self.rx::<false>(max)
        }
    }

    #[inline(always)]
    fn rx<const LIFE: bool>(&mut self, max: usize) -> LentFrames<'_> {
        // Restore what the previous batch modified. Rare in steady state (only rewritten
        // or stamped packets), so the division-free index arithmetic is not needed here.
        while let Some(i) = self.dirty.pop() {
            self.restore(i as usize);
        }

        let n_slots = self.slots.len();
        let ss = self.slot_size;
        let count = max.min(BATCH).min(n_slots);
        let first = self.next;
        let mut next = first + count;
        if next >= n_slots {
            next -= n_slots;
        }
        self.next = next;
        self.packets += count as u64;

        let InMemorySource {
            arena,
            base,
            slots,
            templates,
            dirty,
            rng,
            threshold,
            new_flows,
            life,
            ..
        } = self;
        let region = &mut arena[*base..*base + n_slots * ss];
        let base_addr = region.as_ptr() as usize;
        let (head, tail) = region.split_at_mut(first * ss);
        let from_tail = count.min(n_slots - first);
        let bufs = tail
            .chunks_exact_mut(ss)
            .take(from_tail)
            .chain(head.chunks_exact_mut(ss).take(count - from_tail));

        let mut pkts = SmallVec::<[Packet<'_>; BATCH]>::new();
        let mut idxs = SmallVec::<[u32; BATCH]>::new();
        let mut idx = first;
        let threshold = *threshold;
        for buf in bufs {
            if idx == n_slots {
                idx = 0;
            }
            let slot = slots[idx];
            let info = templates[slot.tpl as usize].stamp;
            // Without lifetimes the draw comes after the view exists; with them, before the
            // lifetime step (either way one draw per packet, as in `fill`).
            let new_flow = if LIFE {
                let n = draws_new_flow(rng, threshold, info.ip);
                if let Some(l) = life.as_deref_mut().filter(|_| !n) {
                    let frame = &mut buf[HEADROOM..HEADROOM + slot.len as usize];
                    step(l, templates, slot.tpl, idx, frame, new_flows);
                }
                n
            } else {
                draws_new_flow(rng, threshold, info.ip)
            };
            let mut p = Packet::new(buf, HEADROOM, slot.len as usize);
            if new_flow {
                stamp(p.data_mut(), &info, *new_flows);
                *new_flows += 1;
            }
            pkts.push(p);
            idxs.push(idx as u32);
            idx += 1;
        }
        LentFrames {
            pkts,
            slots: idxs,
            dirty,
            base_addr,
            end_addr: base_addr + n_slots * ss,
            slot_size: ss,
        }
    }
}

/// A batch of packets borrowed from an [`InMemorySource`]; derefs to `[Packet]`. When it
/// is dropped, the slots of packets marked `modified` are queued for restoring (finding
/// each packet's slot from its address, so reordering the packets inside the batch is
/// fine). A batch that is leaked (`mem::forget`) leaves its modifications in place.
pub struct LentFrames<'a> {
    pkts: SmallVec<[Packet<'a>; BATCH]>,
    slots: SmallVec<[u32; BATCH]>,
    dirty: &'a mut Vec<u32>,
    base_addr: usize,
    end_addr: usize,
    slot_size: usize,
}

impl<'a> LentFrames<'a> {
    /// Slot index of each packet, in the order they were handed out.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }
}

impl<'a> Deref for LentFrames<'a> {
    type Target = [Packet<'a>];
    fn deref(&self) -> &[Packet<'a>] {
        &self.pkts
    }
}

impl<'a> DerefMut for LentFrames<'a> {
    fn deref_mut(&mut self) -> &mut [Packet<'a>] {
        &mut self.pkts
    }
}

impl Drop for LentFrames<'_> {
    fn drop(&mut self) {
        for p in self.pkts.iter().filter(|p| p.modified) {
            // `start` never leaves the slot (it is at most HEADROOM + frame length, less
            // than the slot size), so the data address identifies the slot.
            let addr = p.data().as_ptr() as usize;
            if (self.base_addr..self.end_addr).contains(&addr) {
                self.dirty
                    .push(((addr - self.base_addr) / self.slot_size) as u32);
            }
        }
    }
}
