//! The cache's bounds: installing a megaflow (a new subtable when its mask is new, a freed
//! slot reused), removing one, CLOCK eviction, making room for a new mask under
//! `max_masks`, and the dynamic flow limit.

use super::entry::NO_DIRECT_OUT;
use super::subtable::Subtable;
use super::{normalize_pass_mask, MegaflowCache, MegaflowEntry, MegaflowEvent, MIN_FLOW_LIMIT};
use flowpath_packet::key::wide_hash;
use flowpath_packet::{Action, FlowKey};
use flowpath_pipeline::{Pipeline, Translation};

impl MegaflowCache {
    /// Follow one revalidation that took `cycles` against a target of `target` cycles:
    /// above twice the target the limit falls to what the target would have allowed;
    /// above the target it falls by a quarter; under half of it, it grows by a sixteenth of
    /// the maximum (never past it, never under [`MIN_FLOW_LIMIT`]). Returns the new limit;
    /// entries beyond it go at the next [`MegaflowCache::trim`].
    pub fn adjust_limit(&mut self, cycles: u64, target: u64) -> usize {
        let floor = MIN_FLOW_LIMIT.min(self.max_entries);
        let old = self.limit;
        if cycles > 2 * target {
            let fit = (self.live.max(1) as u128 * target as u128 / cycles.max(1) as u128) as usize;
            self.limit = fit.min(self.limit).max(floor);
        } else if cycles > target {
            self.limit = (self.limit - self.limit / 4).max(floor);
        } else if cycles < target / 2 && self.limit < self.max_entries {
            self.limit = (self.limit + self.max_entries.div_ceil(16)).min(self.max_entries);
        }
        if self.limit < old {
            self.counters.flow_limit_shrinks += 1;
        } else if self.limit > old {
            self.counters.flow_limit_grows += 1;
        }
        self.limit
    }

    /// Install the megaflow `tr` built from `key`; evicts (crediting the evicted entry's
    /// counters to its rules in `pipeline`) when full. Returns the new slot.
    ///
    /// A new mask when `max_masks` subtables are in use must first get room with
    /// [`MegaflowCache::make_room_for_mask`]; past the limit it is created anyway (the
    /// caller decided), so the limit holds only for callers that ask.
    pub fn install(&mut self, key: &FlowKey, tr: Translation, pipeline: &Pipeline) -> u32 {
        let mut tr = tr;
        normalize_pass_mask(key, &mut tr.mask);
        let hint = self.find_subtable(&tr.mask);
        self.install_in(key, tr, pipeline, hint)
    }

    /// [`MegaflowCache::install`] with the result of [`MegaflowCache::find_subtable`] for
    /// `tr.mask`, taken just before (an eviction in between is allowed for). The mask
    /// should be normalised for `key`'s pass already ([`normalize_pass_mask`]); if it is
    /// not, it is here, and the subtable found again.
    pub fn install_in(
        &mut self,
        key: &FlowKey,
        tr: Translation,
        pipeline: &Pipeline,
        subtable: Option<u16>,
    ) -> u32 {
        let mut tr = tr;
        let mut subtable = subtable;
        if normalize_pass_mask(key, &mut tr.mask) {
            subtable = self.find_subtable(&tr.mask);
        }
        let si = self.room_and_subtable(&tr.mask, pipeline, subtable);
        let st = &self.subtables[si as usize];
        let masked = key.and(st.search.mask());
        let hash = st.search.hash(&masked, self.seed);
        let reuse = self.free.pop();
        let actions = self.actions_for(reuse, &tr.actions);
        let fresh = MegaflowEntry {
            key: masked,
            hash,
            subtable: si,
            gen: 0,
            live: true,
            // Not a use yet: only a hit in a later batch marks it (see
            // `Datapath::unmark_installed`); the batch pin keeps it for this batch.
            referenced: false,
            batch: self.batch,
            direct_out: match *tr.actions {
                [Action::Output(p)] => u16::try_from(p).unwrap_or(NO_DIRECT_OUT),
                _ => NO_DIRECT_OUT,
            },
            actions,
            path: tr.path,
            ending: tr.ending,
            packets: 0,
            bytes: 0,
            pushed_packets: 0,
            pushed_bytes: 0,
            used: 0,
        };
        let slot = match reuse {
            Some(s) => {
                let gen = self.entries[s as usize].gen;
                self.entries[s as usize] = MegaflowEntry { gen, ..fresh };
                s
            }
            None => {
                self.entries.push(fresh);
                self.entries.len() as u32 - 1
            }
        };
        self.subtables[si as usize].slots.insert(hash, slot);
        self.live += 1;
        self.counters.installs += 1;
        self.event(MegaflowEvent::Installed(self.id(slot)));
        slot
    }

    /// [`MegaflowCache::install_in`]'s first step: evict one entry when the cache is at
    /// its limit, then the subtable of `mask`: `hint` (unless the eviction emptied it),
    /// found again, or a new one.
    #[inline]
    fn room_and_subtable(&mut self, mask: &FlowKey, pipeline: &Pipeline, hint: Option<u16>) -> u16 {
        let mut hint = hint;
        if self.live >= self.limit {
            self.evict_one(pipeline);
            // The eviction may have emptied (and freed) the hinted subtable.
            if hint.is_some_and(|si| self.subtables[si as usize].slots.is_empty()) {
                hint = self.find_subtable(mask);
            }
        }
        match hint {
            Some(si) => si,
            None => self.new_subtable(*mask),
        }
    }

    /// A subtable for `mask` (an emptied one reused, else a new one), entered in the search
    /// order and the index by mask.
    fn new_subtable(&mut self, mask: FlowKey) -> u16 {
        let fresh = Subtable::new(mask, self.max_entries);
        let si = match self.free_subtables.pop() {
            Some(si) => {
                let old = std::mem::replace(&mut self.subtables[si as usize], fresh);
                // Keep the emptied table's allocation when it is a small one.
                if old.slots.capacity() <= 64 {
                    self.subtables[si as usize].slots = old.slots;
                }
                si
            }
            None => {
                self.subtables.push(fresh);
                (self.subtables.len() - 1) as u16
            }
        };
        let recirc = self.subtables[si as usize].recirc;
        self.order[recirc as usize].push(si);
        let subtables = &self.subtables;
        self.by_mask
            .insert_unique(wide_hash(mask.hash(self.seed)), si, |&s| {
                wide_hash(subtables[s as usize].search.mask().hash(self.seed))
            });
        si
    }

    /// The action array of a new entry holding `actions`.
    ///
    /// A freed slot keeps its action array (see `remove`): when it is as long as the new
    /// actions it is overwritten in place, so a miss that evicts (a full cache under
    /// new flows: every miss) neither frees nor allocates (a malloc and a free were ~190
    /// of a miss's ~3,500 instructions). Otherwise one allocation of exactly the actions
    /// (not `into_vec().into_boxed_slice()`, which allocates the inline capacity and then
    /// shrinks it with realloc: under a new-flow flood that fragments the worker's heap by
    /// ~1 MB a minute).
    #[inline]
    fn actions_for(&mut self, reuse: Option<u32>, actions: &[Action]) -> Box<[Action]> {
        match reuse {
            Some(s) if self.entries[s as usize].actions.len() == actions.len() => {
                let mut a = std::mem::take(&mut self.entries[s as usize].actions);
                a.copy_from_slice(actions);
                a
            }
            _ => Box::from(actions),
        }
    }

    /// Remove one entry, crediting its counters to its rules first.
    pub fn remove(&mut self, slot: u32, pipeline: &Pipeline) {
        self.remove_stamped(slot, pipeline, &mut 0);
    }

    /// [`MegaflowCache::remove`], crediting the rules at `*now` ([`now_ns`]; read into it
    /// when 0 and the entry has counts to credit).
    fn remove_stamped(&mut self, slot: u32, pipeline: &Pipeline, now: &mut u64) {
        self.push_entry_stats(slot, pipeline, now);
        self.event(MegaflowEvent::Removed(self.id(slot)));
        let e = &mut self.entries[slot as usize];
        debug_assert!(e.live);
        e.live = false;
        e.gen = e.gen.wrapping_add(1);
        // The action array stays with the dead slot for the next install to overwrite
        // (`install_in`); nothing reads a dead entry's actions.
        let (h, si) = (e.hash, e.subtable);
        let st = &mut self.subtables[si as usize];
        let filed = st.slots.remove(h, slot);
        debug_assert!(
            filed,
            "megaflow slot {slot} missing from its subtable's index"
        );
        if st.slots.is_empty() {
            // The subtable leaves the search at once; its index is reused.
            let h = wide_hash(st.search.mask().hash(self.seed));
            if let Ok(e) = self.by_mask.find_entry(h, |&s| s == si) {
                e.remove();
            }
            let order = &mut self.order[st.recirc as usize];
            if let Some(pos) = order.iter().position(|&o| o == si) {
                order.remove(pos);
            }
            self.free_subtables.push(si);
        }
        self.free.push(slot);
        self.live -= 1;
    }

    /// Before installing a megaflow with a new mask: true if there is room for one more
    /// subtable, making it by removing a subtable that had no hit since the last ranking
    /// and holds nothing the current batch uses (the least recently ranked such one).
    /// False (counted) when every subtable is busy: then the megaflow is not cached.
    pub fn make_room_for_mask(&mut self, pipeline: &Pipeline) -> bool {
        if self.subtables() < self.max_masks {
            return true;
        }
        // Each order is most-hit first: the coldest candidates are at their ends.
        let (first, recirc) = (&self.order[0], &self.order[1]);
        let victim = first
            .iter()
            .rev()
            .chain(recirc.iter().rev())
            .copied()
            .find(|&si| {
                let st = &self.subtables[si as usize];
                st.hits == 0
                    && st
                        .slots
                        .iter()
                        .all(|s| self.entries[s as usize].batch != self.batch)
            });
        let Some(si) = victim else {
            self.counters.mask_limit_refusals += 1;
            return false;
        };
        let slots: Vec<u32> = self.subtables[si as usize].slots.iter().collect();
        self.counters.subtables_evicted += 1;
        self.counters.subtable_evicted_entries += slots.len() as u64;
        for s in slots {
            self.remove(s, pipeline);
        }
        true
    }

    /// CLOCK: advance the hand, giving referenced entries a second chance and never
    /// taking one the current batch uses. If every entry is in use (a batch with more new
    /// flows than the cache holds), nothing is evicted and the cache runs over its limit
    /// until [`MegaflowCache::trim`].
    fn evict_one(&mut self, pipeline: &Pipeline) {
        let n = self.entries.len();
        for _ in 0..2 * n + 1 {
            let s = self.hand % n;
            self.hand = s + 1;
            let e = &mut self.entries[s];
            if !e.live || e.batch == self.batch {
                continue;
            }
            if e.referenced {
                e.referenced = false;
                continue;
            }
            let mut now = if self.evict_clock.0 == self.batch {
                self.evict_clock.1
            } else {
                0
            };
            self.remove_stamped(s as u32, pipeline, &mut now);
            if now != 0 {
                self.evict_clock = (self.batch, now);
            }
            self.counters.evictions += 1;
            self.prefetch_next_victim();
            return;
        }
    }

    /// After an eviction, start loading what the next one will read, while the slow path
    /// classifies the next miss (a thousand cycles and more). The hand moves one entry per
    /// miss, 320 bytes apart, too slowly for the hardware's stride prefetcher, so without
    /// help a full cache under new flows takes three misses to memory in every eviction:
    /// the hand's entry (~40 % of `install_in`'s samples in `miss`), its counters' line
    /// (`push_entry_stats`, ~60 % of its samples) and its bucket in the subtable index
    /// (`SlotIndex::remove`, ~90 %). So the entry after the hand's is fetched, and for the
    /// entry at the hand (fetched by the eviction before), if CLOCK would take it as things
    /// stand, its last line and its index bucket. A guess only: a hit in between saves
    /// the entry and the prefetch is wasted, nothing else.
    #[inline(always)]
    fn prefetch_next_victim(&self) {
        let n = self.entries.len();
        let (at, next) = (self.hand % n, (self.hand + 1) % n);
        crate::prefetch_line(&self.entries[next] as *const MegaflowEntry);
        let e = &self.entries[at];
        if e.live && !e.referenced {
            let p: *const MegaflowEntry = e;
            // `pushed_packets` and `pushed_bytes`, compared with the counts on eviction,
            // and the rule path the counts are credited to (on the line before theirs:
            // the path starts on the key's last line).
            crate::prefetch_line(
                p.cast::<u8>()
                    .wrapping_add(std::mem::offset_of!(MegaflowEntry, pushed_packets)),
            );
            crate::prefetch_line(
                p.cast::<u8>()
                    .wrapping_add(std::mem::offset_of!(MegaflowEntry, path)),
            );
            if let Some(st) = self.subtables.get(e.subtable as usize) {
                st.slots.prefetch(e.hash);
            }
        }
    }

    /// Evict down to the limit (after a batch that ran over it).
    pub fn trim(&mut self, pipeline: &Pipeline) {
        self.batch += 1;
        while self.live > self.limit {
            self.evict_one(pipeline);
        }
    }
}
