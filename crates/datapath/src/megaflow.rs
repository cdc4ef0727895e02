//! `MegaflowCache`: the second tier, wildcarded entries found by tuple-space search.
//!
//! Each entry is a masked key plus the actions the slow path chose for it. Entries with the
//! same mask live in one subtable (a [`SlotIndex`](crate::slot_index::SlotIndex) of their masked keys' hashes); a lookup
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

mod entry;
mod install;
mod maintain;
mod subtable;

pub use entry::{MegaflowEntry, MegaflowEvent, MegaflowId, MegaflowView};

use flowpath_base::table_memory;
use flowpath_packet::{Field, FlowKey};
use hashbrown::HashTable;
use subtable::Subtable;

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
    /// Indices of the subtables that hold entries, most hit first: `order[0]` the
    /// first-pass subtables (masks without `recirc_id`), `order[1]` the recirculated
    /// passes' (masks with all of `recirc_id`). A key searches only its pass's order (see
    /// [`normalize_pass_mask`]).
    order: [Vec<u16>; 2],
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
    /// The rule clock ([`now_ns`](flowpath_pipeline::rule::now_ns)) as read at this batch's first eviction, and that batch's
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

/// Whether `key` is of a recirculated pass (`recirc_id` not 0).
#[inline]
pub fn is_recirculated(key: &FlowKey) -> bool {
    key.get(Field::RecircId) != 0
}

/// Make `mask` say which pass its megaflow serves: all of `recirc_id` for a key of a
/// recirculated pass, none of it for a first-pass key; true if it changed. Every cached
/// mask is so (installs and revalidation normalise), so the two passes' megaflows live in
/// different subtables and never match each other's keys: a recirculated key searches
/// only subtables with `recirc_id` in their mask (where its value is exact), a first-pass
/// key only those without (where it is 0 for every key).
pub fn normalize_pass_mask(key: &FlowKey, mask: &mut FlowKey) -> bool {
    let want = if is_recirculated(key) {
        Field::RecircId.full_mask()
    } else {
        0
    };
    if mask.get(Field::RecircId) == want {
        return false;
    }
    mask.set(Field::RecircId, want);
    true
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
    /// The arena of `max_entries` entries (320 bytes each: 20 MB for 65,536) is allocated
    /// and faulted in here, on huge pages where the kernel gives them, so that a flood of
    /// new flows on a fresh datapath neither copies the arena as it grows nor faults its
    /// pages in one by one (see `flowpath_base::table_memory`).
    pub fn with_limits(max_entries: usize, max_masks: usize, seed: u64) -> MegaflowCache {
        MegaflowCache {
            entries: arena(max_entries.max(1)),
            free: Vec::new(),
            subtables: Vec::new(),
            order: [Vec::new(), Vec::new()],
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
        self.order[0].len() + self.order[1].len()
    }

    /// Of those, the ones of recirculated passes (masks with `recirc_id`).
    pub fn recirc_subtables(&self) -> usize {
        self.order[1].len()
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

    /// If the entry in `slot` is live, of `key`'s pass, and `key` falls inside it (agrees
    /// with its masked key on its mask), its generation: how the signature-match cache
    /// checks a candidate. A key inside a live megaflow of its pass gets that megaflow's
    /// decision, whatever pointed there.
    #[inline(always)]
    pub fn verify(&self, slot: u32, key: &FlowKey) -> Option<u32> {
        self.verify_pass(slot, key, is_recirculated(key))
    }

    /// [`MegaflowCache::verify`] for a key of the pass the caller knows (`recirc`: a
    /// recirculated pass), as the datapath's batches do: one compare of the subtable's
    /// pass, no look at the key's `recirc_id`.
    #[inline(always)]
    pub fn verify_pass(&self, slot: u32, key: &FlowKey, recirc: bool) -> Option<u32> {
        let e = self.entries.get(slot as usize)?;
        if !e.live {
            return None;
        }
        let st = &self.subtables[e.subtable as usize];
        (st.recirc == recirc && st.search.matches(key, &e.key)).then_some(e.gen)
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

    /// The subtable live entry `slot` is filed in.
    pub fn subtable_of(&self, slot: u32) -> u16 {
        self.entries[slot as usize].subtable
    }
}
