//! `MegaflowCache`: the second tier, wildcarded entries found by tuple-space search.
//!
//! Each entry is a masked key plus the actions the slow path chose for it. Entries with the
//! same mask live in one subtable (a [`SlotIndex`] of their masked keys' hashes); a lookup
//! probes the subtables in order of recent hit count (re-ranked periodically) and the
//! first hit wins: the slow path builds megaflows so that no two can match one packet. The
//! cache is bounded; when full, the CLOCK policy evicts an entry not hit since the hand
//! last passed it.
//!
//! Limits (the miss-storm and tuple-space-explosion defence, see `guard.rs`):
//! - **Entries**: at most the *flow limit*, which starts at the configured maximum and
//!   shrinks when revalidating the cache takes longer than its target (OVS's dynamic
//!   flow limit), growing back while revalidation stays quick.
//! - **Masks**: at most `max_masks` subtables. A megaflow with a new mask when the limit
//!   is reached takes the place of a subtable that had no hit since the last ranking
//!   (all its entries are removed); if every subtable is busy, it is not cached.
//! - A subtable that loses its last entry leaves the search order at once and its
//!   memory is reused, so masks an attacker once created cost nothing after eviction.

use crate::slot_index::SlotIndex;
use crate::tier::{MegaflowEvent, MegaflowId, MegaflowView};
use flowpath_base::table_memory;
use flowpath_packet::key::wide_hash;
use flowpath_packet::{Action, FlowKey, SubtableMask};
use flowpath_pipeline::rule::now_ns;
use flowpath_pipeline::{Ending, Pipeline, RuleRef, Translation};
use hashbrown::HashTable;
use smallvec::SmallVec;

/// One cached megaflow. Its fields are the cache's own: other code reads them through the
/// accessors, and another tier reaches entries only by [`MegaflowId`] (see `tier.rs`).
///
/// Laid out by hand (`repr(C)`, one entry per four cache lines): everything a cache hit
/// touches (generation, liveness, the batch pin, counters, actions) is in the first line,
/// and the key follows, so an exact-match hit reads one line of the entry and a
/// signature/subtable hit on an IPv4 mask reads two. The compiler's order spread a hit
/// over all four lines of a 224-byte, unaligned entry.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct MegaflowEntry {
    /// Bumped whenever the slot is freed, so stale references can tell.
    gen: u32,
    hash: u32,
    live: bool,
    /// Hit since the CLOCK hand last passed.
    referenced: bool,
    ending: Ending,
    subtable: u16,
    /// The port of a megaflow whose actions are one output to a port below
    /// [`NO_DIRECT_OUT`] (the common megaflow), else `NO_DIRECT_OUT`: such a hit goes
    /// straight to its port from this line, without reading the actions (a separate
    /// allocation, one more dependent load a packet).
    direct_out: u16,
    /// The batch that last used this entry: entries the current batch resolved to are
    /// pinned (never evicted before the batch's actions have run).
    batch: u64,
    packets: u64,
    bytes: u64,
    /// TSC of the batch that last counted a packet for it (0: none yet), for dumps.
    used: u64,
    actions: Box<[Action]>,
    /// The masked key (every bit outside the subtable's mask is zero).
    key: FlowKey,
    path: SmallVec<[RuleRef; 4]>,
    /// What has already been credited to the rules on `path`.
    pushed_packets: u64,
    pushed_bytes: u64,
}

// What a hit touches (up to the actions' pointer and length) is on the first line.
const _: () = assert!(
    std::mem::offset_of!(MegaflowEntry, actions) + 16 <= 64,
    "megaflow entry: a hit's fields span two lines"
);

/// [`MegaflowEntry`]'s `direct_out` when the actions are not one output to a port below it.
const NO_DIRECT_OUT: u16 = u16::MAX;

impl MegaflowEntry {
    /// The port every packet goes to when the actions are one output to a port below
    /// 65,535 and nothing else (the same as `[Action::Output(port)]`).
    #[inline(always)]
    pub fn direct_out(&self) -> Option<u32> {
        (self.direct_out != NO_DIRECT_OUT).then_some(u32::from(self.direct_out))
    }
    /// The masked key.
    pub fn key(&self) -> &FlowKey {
        &self.key
    }
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }
    pub fn ending(&self) -> Ending {
        self.ending
    }
    /// The rules this megaflow's decision went through (their counters get its counts).
    pub fn path(&self) -> &[RuleRef] {
        &self.path
    }
    pub fn packets(&self) -> u64 {
        self.packets
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// TSC when a packet last used it (the start of that batch); 0: never.
    pub fn used_tsc(&self) -> u64 {
        self.used
    }
    pub fn is_live(&self) -> bool {
        self.live
    }
    pub fn generation(&self) -> u32 {
        self.gen
    }
}

struct Subtable {
    search: SubtableMask,
    slots: SlotIndex,
    hits: u64,
}

impl Subtable {
    /// A subtable for `mask` in a cache of at most `max_entries`.
    fn new(mask: FlowKey, max_entries: usize) -> Subtable {
        Subtable {
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

/// Counters of the cache's own housekeeping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MegaflowCounters {
    pub installs: u64,
    pub evictions: u64,
    /// Subtables removed whole to make room for a new mask (and their entries).
    pub subtables_evicted: u64,
    pub subtable_evicted_entries: u64,
    /// Megaflows not cached because every one of `max_masks` subtables was busy.
    pub mask_limit_refusals: u64,
    /// Times the dynamic flow limit shrank (revalidation too slow) and grew back.
    pub flow_limit_shrinks: u64,
    pub flow_limit_grows: u64,
    pub revalidated_kept: u64,
    pub revalidated_removed: u64,
    pub flushes: u64,
    pub reranks: u64,
}

pub struct MegaflowCache {
    entries: Vec<MegaflowEntry>,
    free: Vec<u32>,
    subtables: Vec<Subtable>,
    /// Indices of the subtables that hold entries, most hit first.
    order: Vec<u16>,
    /// Subtable index by mask (hashed with the key's own hash: this is looked up on every
    /// upcall, and SipHash over 104 bytes cost ~100 cycles there).
    by_mask: HashTable<u16>,
    /// Subtables without entries, to reuse for the next new mask.
    free_subtables: Vec<u16>,
    /// The subtable [`MegaflowCache::find_subtable`] found last (checked first next time).
    last_found: std::cell::Cell<u16>,
    /// The configured maximum of entries.
    max_entries: usize,
    /// The dynamic flow limit (≤ `max_entries`).
    limit: usize,
    /// Most subtables (distinct masks).
    max_masks: usize,
    live: usize,
    hand: usize,
    seed: u64,
    /// Number of the batch being processed (see [`MegaflowCache::begin_batch`]).
    batch: u64,
    /// The TSC at the start of that batch (stamps `used`).
    now: u64,
    /// The rule clock ([`now_ns`]) as read at this batch's first eviction, and that batch's
    /// number (0: none): an eviction credits its entry's counts to the rules stamped with
    /// it, so a batch of misses that each evict reads the clock once, not once a miss.
    evict_clock: (u64, u64),
    pub counters: MegaflowCounters,
    /// What happened to entries since the last [`MegaflowCache::take_events`], when some
    /// other tier watches (see [`MegaflowCache::watch`]).
    events: Option<Vec<MegaflowEvent>>,
}

/// An empty entry arena with room for `n`: advised onto huge pages and faulted in.
fn arena(n: usize) -> Vec<MegaflowEntry> {
    let mut v = Vec::with_capacity(n);
    let spare = v.spare_capacity_mut();
    let (ptr, len) = (
        spare.as_mut_ptr().cast::<u8>(),
        std::mem::size_of_val(spare),
    );
    table_memory::advise_huge_pages(ptr, len);
    // SAFETY: a new Vec's spare capacity: allocated, owned, and holding no value yet.
    unsafe { table_memory::fault_in(ptr, len) };
    v
}

/// The smallest the dynamic flow limit goes.
pub const MIN_FLOW_LIMIT: usize = 1024;

impl MegaflowCache {
    pub fn new(max_entries: usize, seed: u64) -> MegaflowCache {
        MegaflowCache::with_limits(max_entries, usize::MAX, seed)
    }

    /// Bytes the arena of a cache of `max_entries` takes from the start.
    pub fn bytes_for(max_entries: usize) -> u64 {
        max_entries.max(1) as u64 * std::mem::size_of::<MegaflowEntry>() as u64
    }

    /// A cache of at most `max_entries` megaflows in at most `max_masks` subtables.
    ///
    /// The arena of `max_entries` entries (256 bytes each: 16 MB for 65,536) is allocated
    /// and faulted in here, on huge pages where the kernel gives them, so that a flood of
    /// new flows on a fresh datapath neither copies the arena as it grows nor faults its
    /// pages in one by one (see `flowpath_base::table_memory`).
    pub fn with_limits(max_entries: usize, max_masks: usize, seed: u64) -> MegaflowCache {
        MegaflowCache {
            entries: arena(max_entries.max(1)),
            free: Vec::new(),
            subtables: Vec::new(),
            order: Vec::new(),
            by_mask: HashTable::new(),
            free_subtables: Vec::new(),
            last_found: std::cell::Cell::new(u16::MAX),
            max_entries: max_entries.max(1),
            limit: max_entries.max(1),
            max_masks: max_masks.clamp(1, u16::MAX as usize),
            live: 0,
            hand: 0,
            seed,
            batch: 1,
            now: 0,
            evict_clock: (0, 0),
            counters: MegaflowCounters::default(),
            events: None,
        }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Subtables that currently hold entries.
    pub fn subtables(&self) -> usize {
        self.order.len()
    }

    /// The configured maximum of entries.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The dynamic flow limit now (entries beyond it are evicted).
    pub fn flow_limit(&self) -> usize {
        self.limit
    }

    /// Most subtables.
    pub fn max_masks(&self) -> usize {
        self.max_masks
    }

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

    /// Whether the live entries exceed the flow limit.
    #[inline(always)]
    pub fn over_limit(&self) -> bool {
        self.live > self.limit
    }

    #[inline(always)]
    pub fn entry(&self, slot: u32) -> &MegaflowEntry {
        &self.entries[slot as usize]
    }

    /// Count one packet of `bytes` against `slot` and mark it recently used (CLOCK).
    #[inline(always)]
    pub fn hit(&mut self, slot: u32, bytes: u64) -> &MegaflowEntry {
        let now = self.now;
        let e = &mut self.entries[slot as usize];
        e.packets += 1;
        e.bytes += bytes;
        e.referenced = true;
        e.used = now;
        e
    }

    /// Clear `slot`'s CLOCK mark: what marked it does not count as a use (the packets of
    /// the batch that installed it, see `Datapath::unmark_installed`).
    pub fn unmark(&mut self, slot: u32) {
        self.entries[slot as usize].referenced = false;
    }

    /// The handle another tier keeps for the live entry in `slot`.
    pub fn id(&self, slot: u32) -> MegaflowId {
        MegaflowId {
            slot,
            gen: self.entries[slot as usize].gen,
        }
    }

    /// The entry `id` names, if it is still that entry.
    pub fn get(&self, id: MegaflowId) -> Option<MegaflowView<'_>> {
        let e = self.entries.get(id.slot as usize)?;
        (e.live && e.gen == id.gen).then(|| MegaflowView {
            entry: e,
            mask: self.subtables[e.subtable as usize].search.mask(),
        })
    }

    /// Credit packets another tier forwarded for `id` (counted and marked recently used,
    /// as if they had hit here). False when `id` is gone.
    pub fn credit(&mut self, id: MegaflowId, packets: u64, bytes: u64) -> bool {
        let Some(e) = self.entries.get_mut(id.slot as usize) else {
            return false;
        };
        if !e.live || e.gen != id.gen {
            return false;
        }
        if packets > 0 {
            e.packets += packets;
            e.bytes += bytes;
            e.referenced = true;
            e.used = flowpath_base::clock::rdtsc();
            // These packets came after the batch's eviction stamp: the next eviction
            // reads the clock afresh.
            self.evict_clock.0 = 0;
        }
        true
    }

    /// Record installs, removals, flushes and revalidations for another tier (off by
    /// default: then recording costs one branch per install or removal).
    pub fn watch(&mut self, on: bool) {
        self.events = on.then(|| Vec::with_capacity(256));
    }

    /// The events since the last call, appended to `out` (in order).
    pub fn take_events(&mut self, out: &mut Vec<MegaflowEvent>) {
        if let Some(ev) = &mut self.events {
            out.append(ev);
        }
    }

    /// Whether events are waiting.
    #[inline(always)]
    pub fn has_events(&self) -> bool {
        self.events.as_ref().is_some_and(|e| !e.is_empty())
    }

    #[inline(always)]
    fn event(&mut self, ev: MegaflowEvent) {
        if let Some(l) = &mut self.events {
            l.push(ev);
        }
    }

    /// Start a new batch: entries used from now on are pinned until the next call.
    #[inline(always)]
    pub fn begin_batch(&mut self) {
        self.batch += 1;
    }

    /// [`MegaflowCache::begin_batch`], at TSC `now` (what hits in this batch stamp as their
    /// last use).
    #[inline(always)]
    pub fn begin_batch_at(&mut self, now: u64) {
        self.batch += 1;
        self.now = now;
    }

    /// If `slot` is still the entry that had generation `gen`, pin it for this batch.
    #[inline(always)]
    pub fn claim(&mut self, slot: u32, gen: u32) -> bool {
        let e = &mut self.entries[slot as usize];
        let ok = e.live && e.gen == gen;
        if ok {
            e.batch = self.batch;
        }
        ok
    }

    /// Start loading the entry in `slot`: its hot line and its key's first line.
    #[inline(always)]
    pub fn prefetch_entry(&self, slot: u32) {
        if let Some(e) = self.entries.get(slot as usize) {
            let p: *const MegaflowEntry = e;
            crate::prefetch_line(p);
            crate::prefetch_line(p.cast::<u8>().wrapping_add(64));
        }
    }

    /// If the entry in `slot` is live and `key` falls inside it (agrees with its masked
    /// key on its mask), its generation: how the signature-match cache checks a candidate.
    /// A key inside a live megaflow gets that megaflow's decision, whatever pointed there.
    #[inline(always)]
    pub fn verify(&self, slot: u32, key: &FlowKey) -> Option<u32> {
        let e = self.entries.get(slot as usize)?;
        if !e.live {
            return None;
        }
        self.subtables[e.subtable as usize]
            .search
            .matches(key, &e.key)
            .then_some(e.gen)
    }

    /// Live entries.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &MegaflowEntry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.live)
            .map(|(i, e)| (i as u32, e))
    }

    /// The mask of a live entry.
    pub fn mask_of(&self, slot: u32) -> &FlowKey {
        self.subtables[self.entries[slot as usize].subtable as usize]
            .search
            .mask()
    }

    /// Look up every packet whose bit is set in `pending`, subtable by subtable (each
    /// subtable's mask and table stay hot while the whole batch is probed against it).
    /// Found slots go to `out`; returns the bits still unresolved.
    #[inline]
    pub fn lookup_batch(&mut self, keys: &[FlowKey], pending: u32, out: &mut [u32]) -> u32 {
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
        for &si in &self.order {
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
        (0..self.order.len()).find_map(|j| self.probe_subtable(self.order[j], key))
    }

    /// [`MegaflowCache::lookup`] in the subtables `subtables` only (indices as
    /// [`MegaflowCache::subtable_of`] gives them; an emptied one is skipped): the slow
    /// path's check before an upcall, in the subtables its batch installed into.
    pub fn lookup_in(&mut self, key: &FlowKey, subtables: &[u16]) -> Option<u32> {
        subtables
            .iter()
            .find_map(|&si| self.probe_subtable(si, key))
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

    /// The subtable live entry `slot` is filed in.
    pub fn subtable_of(&self, slot: u32) -> u16 {
        self.entries[slot as usize].subtable
    }

    /// Install the megaflow `tr` built from `key`; evicts (crediting the evicted entry's
    /// counters to its rules in `pipeline`) when full. Returns the new slot.
    ///
    /// A new mask when `max_masks` subtables are in use must first get room with
    /// [`MegaflowCache::make_room_for_mask`]; past the limit it is created anyway (the
    /// caller decided), so the limit holds only for callers that ask.
    pub fn install(&mut self, key: &FlowKey, tr: Translation, pipeline: &Pipeline) -> u32 {
        let hint = self.find_subtable(&tr.mask);
        self.install_in(key, tr, pipeline, hint)
    }

    /// [`MegaflowCache::install`] with the result of [`MegaflowCache::find_subtable`] for
    /// `tr.mask`, taken just before (an eviction in between is allowed for).
    pub fn install_in(
        &mut self,
        key: &FlowKey,
        tr: Translation,
        pipeline: &Pipeline,
        subtable: Option<u16>,
    ) -> u32 {
        let mut hint = subtable;
        if self.live >= self.limit {
            self.evict_one(pipeline);
            // The eviction may have emptied (and freed) the hinted subtable.
            if hint.is_some_and(|si| self.subtables[si as usize].slots.is_empty()) {
                hint = self.find_subtable(&tr.mask);
            }
        }
        let si = match hint {
            Some(si) => si,
            None => {
                let fresh = Subtable::new(tr.mask, self.max_entries);
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
                self.order.push(si);
                let subtables = &self.subtables;
                self.by_mask
                    .insert_unique(wide_hash(tr.mask.hash(self.seed)), si, |&s| {
                        wide_hash(subtables[s as usize].search.mask().hash(self.seed))
                    });
                si
            }
        };
        let st = &self.subtables[si as usize];
        let masked = key.and(st.search.mask());
        let hash = st.search.hash(&masked, self.seed);
        let reuse = self.free.pop();
        // A freed slot keeps its action array (see `remove`): when it is as long as the new
        // actions it is overwritten in place, so a miss that evicts (a full cache under
        // new flows: every miss) neither frees nor allocates (a malloc and a free were ~190
        // of a miss's ~3,500 instructions). Otherwise one allocation of exactly the actions
        // (`into_vec().into_boxed_slice()` allocated the inline capacity and then shrank it
        // with realloc on every install: under a new-flow flood that fragmented the
        // worker's heap by ~1 MB a minute).
        let actions = match reuse {
            Some(s) if self.entries[s as usize].actions.len() == tr.actions.len() => {
                let mut a = std::mem::take(&mut self.entries[s as usize].actions);
                a.copy_from_slice(&tr.actions);
                a
            }
            _ => Box::from(tr.actions.as_slice()),
        };
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
            if let Some(pos) = self.order.iter().position(|&o| o == si) {
                self.order.remove(pos);
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
        if self.order.len() < self.max_masks {
            return true;
        }
        // The order is most-hit first: the coldest candidates are at the end.
        let victim = self.order.iter().rev().copied().find(|&si| {
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
    /// miss, 256 bytes apart, too slowly for the hardware's stride prefetcher, so a full
    /// cache under new flows took three misses to memory in every eviction: the hand's
    /// entry (~40 % of `install_in`'s samples in `miss`), its counters' line
    /// (`push_entry_stats`, ~60 % of its samples) and its bucket in the subtable index
    /// (`SlotIndex::remove`, ~90 %). Now the entry after the hand's is fetched, and for the
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

    /// Credit what one entry counted since the last push to the rules it went through,
    /// stamped with `*now` ([`now_ns`]; read here when 0 and kept for the caller's next
    /// entries: one clock read per sweep or eviction, not one per rule credited).
    fn push_entry_stats(&mut self, slot: u32, pipeline: &Pipeline, now: &mut u64) {
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
        self.order.clear();
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
            let mut tr = new.translate(&key);
            resolve(s, &key, &mut tr);
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
        if self.keep_if_same(slot, tr) {
            self.counters.revalidated_kept += 1;
            true
        } else {
            self.remove(slot, pipeline);
            self.counters.revalidated_removed += 1;
            false
        }
    }

    /// Re-rank subtables by hits since the last ranking (most hit first).
    pub fn rerank(&mut self) {
        let subtables = &self.subtables;
        self.order
            .sort_by_key(|&si| std::cmp::Reverse(subtables[si as usize].hits));
        for st in &mut self.subtables {
            st.hits = 0;
        }
        self.counters.reranks += 1;
    }
}

#[cfg(test)]
mod layout {
    use super::MegaflowEntry as E;
    use std::mem::{align_of, offset_of, size_of};

    /// What a hit touches stays in the entry's first cache line, the key starts the second.
    #[test]
    fn hit_fields_share_the_first_line() {
        assert_eq!(align_of::<E>(), 64);
        for end in [
            offset_of!(E, gen) + 4,
            offset_of!(E, live) + 1,
            offset_of!(E, batch) + 8,
            offset_of!(E, packets) + 8,
            offset_of!(E, bytes) + 8,
            offset_of!(E, used) + 8,
            offset_of!(E, referenced) + 1,
            offset_of!(E, ending) + 2,
            offset_of!(E, actions) + 16,
        ] {
            assert!(end <= 64, "a hit field ends at byte {end}");
        }
        assert_eq!(offset_of!(E, key), 64);
        assert_eq!(size_of::<E>(), 256);
    }
}
