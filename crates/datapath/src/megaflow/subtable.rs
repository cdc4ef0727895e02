//! A megaflow subtable (the entries of one mask) and the tuple-space search over them:
//! finding a mask's subtable, the batch lookup subtable by subtable, one-key lookups, and
//! the ranking that orders the search by hits.

use super::{is_recirculated, MegaflowCache, MegaflowEntry};
use crate::slot_index::SlotIndex;
use flowpath_packet::key::wide_hash;
use flowpath_packet::{Field, FlowKey, SubtableMask};

/// The entries of one mask: the mask's search form, an index of their masked keys'
/// hashes, and its hits since the last ranking.
pub(super) struct Subtable {
    pub(super) search: SubtableMask,
    pub(super) slots: SlotIndex,
    pub(super) hits: u64,
    /// Whether the mask has `recirc_id` (the subtable of a recirculated pass).
    pub(super) recirc: bool,
}

impl Subtable {
    /// A subtable for `mask` in a cache of at most `max_entries`.
    pub(super) fn new(mask: FlowKey, max_entries: usize) -> Subtable {
        Subtable {
            recirc: mask.get(Field::RecircId) != 0,
            search: SubtableMask::new(mask),
            slots: SlotIndex::holding_at_most(max_entries),
            hits: 0,
        }
    }

    /// The slot of the entry `key` falls in, `h` being its masked hash here; a hit is
    /// pinned for `batch` and counted for the subtable ranking.
    #[inline(always)]
    fn probe(
        &mut self,
        entries: &mut [MegaflowEntry],
        batch: u64,
        key: &FlowKey,
        h: u32,
    ) -> Option<u32> {
        // The index holds the entry's own hash: a candidate is checked on its key alone.
        let slot = self
            .slots
            .find(h, |s| self.search.matches(key, &entries[s as usize].key))?;
        entries[slot as usize].batch = batch;
        self.hits += 1;
        Some(slot)
    }
}

/// The first pass of a subtable's search: the masked hash `hash` of every key whose bit is
/// set in `pending` (all below `keys.len()`), into `hashes`. `FAR`: the index `slots` is
/// too big for the nearer caches (a full cache's one subtable under new flows: `miss`),
/// so each key's bucket is fetched too; a small one's not (16 prefetches a packet cost
/// `megaflow_hit_16` ~14 %).
#[inline(always)]
fn hash_pending<const FAR: bool>(
    keys: &[FlowKey],
    pending: u32,
    hashes: &mut [u32; 32],
    slots: &SlotIndex,
    hash: impl Fn(&FlowKey) -> u32,
) {
    let mut m = pending;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        debug_assert!(i < keys.len());
        // SAFETY: the caller cut `pending` to the bits below keys.len().
        let key = unsafe { keys.get_unchecked(i) };
        let h = hash(key);
        hashes[i & 31] = h;
        if FAR {
            slots.prefetch(h);
        }
    }
}

impl MegaflowCache {
    /// The subtable holding entries of `mask`, if any (pass it to
    /// [`MegaflowCache::install_in`] to save a second lookup).
    #[inline]
    pub fn find_subtable(&self, mask: &FlowKey) -> Option<u16> {
        let subtables = &self.subtables;
        // Misses mostly end in the subtable the one before ended in (one rule set, few
        // masks): that one is compared first, without hashing the 104-byte mask. A
        // subtable with entries is always the one of its mask (an emptied one has none).
        let last = self.last_found.get();
        if let Some(st) = subtables.get(last as usize) {
            if !st.slots.is_empty() && *st.search.mask() == *mask {
                return Some(last);
            }
        }
        let si = self
            .by_mask
            .find(wide_hash(mask.hash(self.seed)), |&si| {
                *subtables[si as usize].search.mask() == *mask
            })
            .copied();
        if let Some(si) = si {
            self.last_found.set(si);
        }
        si
    }

    /// Look up every packet whose bit is set in `pending`, subtable by subtable (each
    /// subtable's mask and table stay hot while the whole batch is probed against it).
    /// Found slots go to `out`; returns the bits still unresolved. The keys are first-pass
    /// keys (`recirc_id` 0, as parsed); a recirculated pass's batch uses
    /// [`MegaflowCache::lookup_batch_pass`].
    #[inline]
    pub fn lookup_batch(&mut self, keys: &[FlowKey], pending: u32, out: &mut [u32]) -> u32 {
        self.lookup_batch_pass(keys, pending, out, false)
    }

    /// [`MegaflowCache::lookup_batch`] for a batch of one pass: `recirc` false, first-pass
    /// keys, searched in the first-pass subtables; true, recirculated keys, searched in
    /// the subtables whose mask has `recirc_id`.
    #[inline]
    pub fn lookup_batch_pass(
        &mut self,
        keys: &[FlowKey],
        pending: u32,
        out: &mut [u32],
        recirc: bool,
    ) -> u32 {
        // Bits past the keys (or past 32) name no packet; checked once here so the loops
        // below index without bounds checks.
        let n = keys.len().min(32);
        assert!(
            out.len() >= n,
            "lookup_batch: {} slots for {n} keys",
            out.len()
        );
        let mut pending = if n == 32 {
            pending
        } else {
            pending & ((1u32 << n) - 1)
        };
        let mut hashes = [0u32; 32];
        for &si in &self.order[recirc as usize] {
            if pending == 0 {
                break;
            }
            let st = &mut self.subtables[si as usize];
            if st.slots.is_empty() {
                continue;
            }
            // Two passes: every pending key's masked hash first (independent multiplies the
            // CPU overlaps), then the probes. The mask's form is dispatched on once for
            // the pass, not once a key.
            let seed = self.seed;
            let (h, ix) = (&mut hashes, &st.slots);
            let hash = |k: &FlowKey| st.search.hash(k, seed);
            match (st.search.lanes(), ix.is_large()) {
                (Some(l), false) => {
                    hash_pending::<false>(keys, pending, h, ix, |k| l.hash(k, seed))
                }
                (Some(l), true) => hash_pending::<true>(keys, pending, h, ix, |k| l.hash(k, seed)),
                (None, false) => hash_pending::<false>(keys, pending, h, ix, hash),
                (None, true) => hash_pending::<true>(keys, pending, h, ix, hash),
            }
            let mut m = pending;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                // SAFETY: as above; out.len() >= n was asserted.
                let key = unsafe { keys.get_unchecked(i) };
                if let Some(slot) = st.probe(&mut self.entries, self.batch, key, hashes[i & 31]) {
                    // SAFETY: i < n <= out.len().
                    unsafe { *out.get_unchecked_mut(i) = slot };
                    pending &= !(1 << i);
                }
            }
        }
        pending
    }

    /// Look up one key: what [`MegaflowCache::lookup_batch`] does for one packet, without
    /// its per-batch arrays.
    pub fn lookup(&mut self, key: &FlowKey) -> Option<u32> {
        let pass = is_recirculated(key) as usize;
        (0..self.order[pass].len()).find_map(|j| self.probe_subtable(self.order[pass][j], key))
    }

    /// [`MegaflowCache::lookup`] in the subtables `subtables` only (indices as
    /// [`MegaflowCache::subtable_of`] gives them; an emptied one is skipped): the slow
    /// path's check before an upcall, in the subtables its batch installed into. A
    /// subtable of the other pass than `key`'s is skipped.
    pub fn lookup_in(&mut self, key: &FlowKey, subtables: &[u16]) -> Option<u32> {
        let recirc = is_recirculated(key);
        subtables.iter().find_map(|&si| {
            (self.subtables[si as usize].recirc == recirc)
                .then(|| self.probe_subtable(si, key))
                .flatten()
        })
    }

    /// One key in subtable `si` (none when it is empty).
    #[inline]
    fn probe_subtable(&mut self, si: u16, key: &FlowKey) -> Option<u32> {
        let st = &mut self.subtables[si as usize];
        if st.slots.is_empty() {
            return None;
        }
        let h = st.search.hash(key, self.seed);
        st.probe(&mut self.entries, self.batch, key, h)
    }

    /// Re-rank subtables by hits since the last ranking (most hit first).
    pub fn rerank(&mut self) {
        let subtables = &self.subtables;
        for order in &mut self.order {
            order.sort_by_key(|&si| std::cmp::Reverse(subtables[si as usize].hits));
        }
        for st in &mut self.subtables {
            st.hits = 0;
        }
        self.counters.reranks += 1;
    }
}
