//! What the cache does for the rules between packets: crediting entries' counts to the
//! rules they went through, flushing, and revalidating entries after a rule change.

use super::{normalize_pass_mask, MegaflowCache, MegaflowEvent};
use flowpath_packet::FlowKey;
use flowpath_pipeline::rule::now_ns;
use flowpath_pipeline::{Pipeline, Translation};

impl MegaflowCache {
    /// Credit what one entry counted since the last push to the rules it went through,
    /// stamped with `*now` ([`now_ns`]; read here when 0 and kept for the caller's next
    /// entries: one clock read per sweep or eviction, not one per rule credited).
    pub(super) fn push_entry_stats(&mut self, slot: u32, pipeline: &Pipeline, now: &mut u64) {
        let e = &mut self.entries[slot as usize];
        let (dp, db) = (e.packets - e.pushed_packets, e.bytes - e.pushed_bytes);
        if dp == 0 {
            return;
        }
        if *now == 0 {
            *now = now_ns();
        }
        for r in &e.path {
            pipeline.rule(*r).counters.add_at(dp, db, *now);
        }
        e.pushed_packets = e.packets;
        e.pushed_bytes = e.bytes;
    }

    /// Credit every entry's new counts to its rules (the revalidator's stats push).
    pub fn push_stats(&mut self, pipeline: &Pipeline) {
        let mut now = 0;
        for s in 0..self.entries.len() {
            if self.entries[s].live {
                self.push_entry_stats(s as u32, pipeline, &mut now);
            }
        }
    }

    /// Credit the new counts of at most `max` entry slots from `*cursor` on, wrapping
    /// around; `*cursor` moves past them. The worker's periodic push: a slice at a time,
    /// so a full cache never stalls a batch for a whole sweep.
    pub fn push_stats_slice(&mut self, pipeline: &Pipeline, cursor: &mut usize, max: usize) {
        let n = self.entries.len();
        if n == 0 {
            return;
        }
        let mut now = 0;
        for _ in 0..max.min(n) {
            let s = *cursor % n;
            *cursor = s + 1;
            if self.entries[s].live {
                self.push_entry_stats(s as u32, pipeline, &mut now);
            }
        }
    }

    /// Remove every entry (counters credited to `pipeline`'s rules first).
    pub fn flush(&mut self, pipeline: &Pipeline) {
        self.push_stats(pipeline);
        for e in self.entries.iter_mut() {
            if e.live {
                e.live = false;
                e.gen = e.gen.wrapping_add(1);
                e.actions = Box::new([]);
            }
        }
        self.free = (0..self.entries.len() as u32).rev().collect();
        self.subtables.clear();
        self.order.iter_mut().for_each(Vec::clear);
        self.by_mask.clear();
        self.free_subtables.clear();
        self.live = 0;
        self.counters.flushes += 1;
        self.event(MegaflowEvent::Flushed);
    }

    /// After a rule change: keep an entry only if classifying its masked key under `new`
    /// gives the same mask, actions and ending (then no packet it covers is decided any
    /// differently, and it still overlaps no other entry); otherwise remove it. Counters are
    /// credited to `old`'s rules first. Returns (kept, removed).
    pub fn revalidate(&mut self, old: &Pipeline, new: &Pipeline) -> (usize, usize) {
        self.revalidate_with(old, new, |_, _, _| {})
    }

    /// [`MegaflowCache::revalidate`], with `resolve(slot, key, translation)` finishing each
    /// translation as the slow path does (the datapath resolves `NORMAL` there) before it
    /// is compared.
    pub fn revalidate_with(
        &mut self,
        old: &Pipeline,
        new: &Pipeline,
        mut resolve: impl FnMut(u32, &FlowKey, &mut Translation),
    ) -> (usize, usize) {
        self.push_stats(old);
        let (mut kept, mut removed) = (0, 0);
        for s in 0..self.entries.len() as u32 {
            if !self.entries[s as usize].live {
                continue;
            }
            let key = self.entries[s as usize].key;
            // The stored key is masked: a recirculated megaflow's has its `recirc_id` (in
            // its mask) and the ct fields its mask covers, so it re-translates as its pass.
            let mut tr = new.translate(&key);
            resolve(s, &key, &mut tr);
            normalize_pass_mask(&key, &mut tr.mask);
            if self.keep_if_same(s, tr) {
                kept += 1;
            } else {
                self.remove(s, old);
                removed += 1;
            }
        }
        self.counters.revalidated_kept += kept as u64;
        self.counters.revalidated_removed += removed as u64;
        self.event(MegaflowEvent::Revalidated);
        (kept, removed)
    }

    /// Whether live entry `slot` still decides as `tr` says (same mask, actions and
    /// ending); if so its rule path is updated.
    fn keep_if_same(&mut self, slot: u32, tr: Translation) -> bool {
        let e = &self.entries[slot as usize];
        let same = tr.mask == *self.subtables[e.subtable as usize].search.mask()
            && *tr.actions == *e.actions
            && tr.ending == e.ending;
        if same {
            self.entries[slot as usize].path = tr.path;
        }
        same
    }

    /// Revalidate one live entry against `tr`, its key's translation now: keep it if the
    /// decision is unchanged, else remove it (counters credited to `pipeline`'s rules).
    /// Returns whether it was kept.
    pub fn revalidate_one(&mut self, slot: u32, tr: Translation, pipeline: &Pipeline) -> bool {
        if !self.entries[slot as usize].live {
            return false;
        }
        let mut tr = tr;
        normalize_pass_mask(&self.entries[slot as usize].key, &mut tr.mask);
        if self.keep_if_same(slot, tr) {
            self.counters.revalidated_kept += 1;
            true
        } else {
            self.remove(slot, pipeline);
            self.counters.revalidated_removed += 1;
            false
        }
    }
}
