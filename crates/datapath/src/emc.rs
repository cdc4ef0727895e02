//! `ExactMatchCache`: the first tier, one per worker, no locks.
//!
//! A direct-mapped table with two candidate slots per key (from two parts of the key's
//! hash), keyed by the full `FlowKey`. Each entry points at a megaflow slot and remembers
//! that slot's generation, so an evicted or revalidated-away megaflow is never used through
//! a stale entry. Insertion happens with probability 1/`insert_inv_prob` (OVS found that
//! inserting every flow makes a cache of many short flows thrash).

use crate::megaflow::MegaflowCache;
use flowpath_packet::FlowKey;

/// One entry is two cache lines, aligned, so a lookup touches at most two lines. The
/// hash, slot and generation come first: a lookup checks them on the first line, which
/// holds the key's first six words too.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    hash: u32,
    /// Megaflow slot + 1 (0 = empty).
    slot: u32,
    gen: u32,
    key: FlowKey,
}

// Two lines exactly, the checked fields and the key's first six words on the first.
const _: () = assert!(
    std::mem::size_of::<Entry>() == 128 && std::mem::offset_of!(Entry, key) == 16,
    "EMC entry layout"
);

pub struct ExactMatchCache {
    entries: Box<[Entry]>,
    mask: u32,
    insert_inv_prob: u32,
    rng: u64,
}

impl ExactMatchCache {
    /// `entries` is rounded up to a power of two (at least 2). `insert_inv_prob` of 1
    /// inserts every flow; N inserts one in N on average.
    pub fn new(entries: usize, insert_inv_prob: u32) -> ExactMatchCache {
        let n = entries.max(2).next_power_of_two();
        ExactMatchCache {
            entries: vec![
                Entry {
                    hash: 0,
                    slot: 0,
                    gen: 0,
                    key: FlowKey::ZERO,
                };
                n
            ]
            .into_boxed_slice(),
            mask: n as u32 - 1,
            insert_inv_prob: insert_inv_prob.max(1),
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    #[inline(always)]
    fn positions(&self, hash: u32) -> [usize; 2] {
        [
            (hash & self.mask) as usize,
            (hash.rotate_left(16) & self.mask) as usize,
        ]
    }

    /// Start loading the first candidate entry of `hash`, both its lines, into the cache
    /// (a batch computes all hashes and prefetches before the first lookup, hiding the
    /// memory latency). The second candidate is not prefetched: a key is found in its
    /// first candidate unless two live flows collided there, and a prefetch that is
    /// hardly ever used costs a line fill per packet.
    #[inline(always)]
    pub fn prefetch(&self, hash: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.positions(hash)[0];
            // SAFETY: prefetching is a hint; the addresses are inside a live element
            // (an entry is two lines, aligned).
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                let e = (&self.entries[p] as *const Entry).cast::<i8>();
                _mm_prefetch::<_MM_HINT_T0>(e);
                _mm_prefetch::<_MM_HINT_T0>(e.add(64));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// The megaflow slot and generation cached for `key`, if any.
    #[inline(always)]
    pub fn lookup(&self, key: &FlowKey, hash: u32) -> Option<(u32, u32)> {
        for p in self.positions(hash) {
            let e = &self.entries[p];
            if e.hash == hash && e.slot != 0 && e.key == *key {
                return Some((e.slot - 1, e.gen));
            }
        }
        None
    }

    /// Maybe cache `key -> (slot, gen)`: with probability 1/insert_inv_prob, into an empty
    /// candidate, else over the candidate that isn't the first (a cheap stand-in for LRU).
    #[inline]
    pub fn maybe_insert(&mut self, key: &FlowKey, hash: u32, slot: u32, gen: u32) {
        if self.insert_inv_prob > 1 {
            // xorshift64: per-packet coin flip, hand-written because it is on the hot path.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if self.rng % self.insert_inv_prob as u64 != 0 {
                return;
            }
        }
        let [a, b] = self.positions(hash);
        let p = if self.entries[a].slot == 0 || self.entries[a].key == *key {
            a
        } else {
            b
        };
        self.entries[p] = Entry {
            hash,
            slot: slot + 1,
            gen,
            key: *key,
        };
    }

    /// The EMC stage of a batch: look up every key whose bit is set in `valid` by its
    /// hash in `hashes` (taken, and the entries prefetched, while the batch was parsed).
    /// A hit counts only while its megaflow is still the entry that was cached (then it
    /// is pinned for the batch); its slot goes to `slots`. Returns the bits still
    /// unresolved.
    #[inline(always)]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        valid: u32,
        hashes: &[u32],
        slots: &mut [u32],
        megaflows: &mut MegaflowCache,
    ) -> u32 {
        let mut pending = valid;
        let mut m = valid;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some((slot, gen)) = self.lookup(&keys[i], hashes[i]) {
                if megaflows.claim(slot, gen) {
                    slots[i] = slot;
                    pending &= !(1 << i);
                }
            }
        }
        pending
    }

    /// Offer the packets whose bit is set in `bits` (resolved to `slots` by a later tier)
    /// for insertion.
    #[inline(always)]
    pub fn insert_batch(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        slots: &[u32],
        bits: u32,
        megaflows: &MegaflowCache,
    ) {
        let mut m = bits;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let slot = slots[i];
            let gen = megaflows.entry(slot).generation();
            self.maybe_insert(&keys[i], hashes[i], slot, gen);
        }
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.slot = 0;
        }
    }

    /// Number of occupied entries (for statistics; walks the table).
    pub fn occupancy(&self) -> usize {
        self.entries.iter().filter(|e| e.slot != 0).count()
    }
}
