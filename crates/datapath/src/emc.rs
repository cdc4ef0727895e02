//! `ExactMatchCache`: the first tier, one per worker, no locks.
//!
//! A direct-mapped table with two candidate slots per key (from two parts of the key's
//! hash), keyed by the full `FlowKey`. Each entry points at a megaflow slot and remembers
//! that slot's generation, so an evicted or revalidated-away megaflow is never used through
//! a stale entry. Insertion happens with probability 1/`insert_inv_prob` (OVS found that
//! inserting every flow makes a cache of many short flows thrash).
//!
//! Each entry also counts the cached keys whose first candidate it is but which live in
//! their second (`overflow`): a key that misses its first candidate is then known absent
//! without reading the second line unless some key overflowed from there, so a new flow's
//! lookup costs one line, not two (the second is not prefetched).
//!
//! Narrow keys (IPv4 without a tunnel: [`FlowKey::is_narrow`]) can live in a table of
//! one-line entries holding only the key's six [`NARROW_WORDS`]; the others live in a
//! table of two-line entries holding the whole key. A hit on an IPv4 flow then loads one
//! line and compares six words instead of two lines and thirteen (OVS's miniflow idea,
//! applied in the cache that every cached packet reads). The batch calls are told which
//! keys to treat as narrow (the datapath: those of the IPv4 fast path, known without a
//! test); the single-key calls test the key.

use crate::megaflow::MegaflowCache;
use crate::prefetch_line;
use flowpath_base::TableMemory;
use flowpath_packet::{FlowKey, NARROW_WORDS};

/// A wide entry is three cache lines, aligned. The hash, slot and generation come first:
/// a lookup checks them on the first line, which holds the key's first six words too (the
/// third line holds the connection-tracking words, read only when the first two agree).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    hash: u32,
    /// Megaflow slot + 1 (0 = empty).
    slot: u32,
    gen: u32,
    /// Cached keys whose first candidate this position is, held in their second.
    overflow: u32,
    key: FlowKey,
}

// Three lines exactly, the checked fields and the key's first six words on the first.
const _: () = assert!(
    std::mem::size_of::<Entry>() == 192 && std::mem::offset_of!(Entry, key) == 16,
    "EMC entry layout"
);

/// A narrow key's entry: one cache line, the hash first (a miss is mostly told by it
/// alone), then the six words that can be non-zero.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct NarrowEntry {
    hash: u32,
    /// Megaflow slot + 1 (0 = empty).
    slot: u32,
    gen: u32,
    /// Cached keys whose first candidate this position is, held in their second.
    overflow: u32,
    /// The key's words 0, 1, 2, 3, 4 and 6 ([`NARROW_WORDS`]).
    words: [u64; 6],
}

const _: () = assert!(
    std::mem::size_of::<NarrowEntry>() == 64 && std::mem::offset_of!(NarrowEntry, words) == 16,
    "narrow EMC entry layout"
);

impl NarrowEntry {
    const EMPTY: NarrowEntry = NarrowEntry {
        hash: 0,
        slot: 0,
        gen: 0,
        overflow: 0,
        words: [0; 6],
    };

    fn of(key: &FlowKey, hash: u32, slot: u32, gen: u32, overflow: u32) -> NarrowEntry {
        NarrowEntry {
            hash,
            slot: slot + 1,
            gen,
            overflow,
            words: NARROW_WORDS.map(|w| key.words[w]),
        }
    }

    /// Whether this entry holds `key` (with `hash`), which must be narrow.
    #[inline(always)]
    fn holds(&self, key: &FlowKey, hash: u32) -> bool {
        self.hash == hash && self.slot != 0 && narrow_words_eq(&self.words, key)
    }
}

/// Whether `key`'s [`NARROW_WORDS`] are `words`: words 0..4 with two vector compares, 4
/// and 6 as words. Hand-written SSE2 on x86-64: left to itself the compiler compares the
/// words one by one with a branch each, more instructions than the two-line compare it
/// replaces.
#[inline(always)]
fn narrow_words_eq(words: &[u64; 6], key: &FlowKey) -> bool {
    let k = &key.words;
    let tail = (words[4] ^ k[4]) | (words[5] ^ k[6]);
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8,
        };
        // SAFETY: SSE2 is part of x86-64; the loads read words 0..4 of both arrays.
        unsafe {
            let e = words.as_ptr().cast::<__m128i>();
            let k = k.as_ptr().cast::<__m128i>();
            let eq = |i| _mm_cmpeq_epi32(_mm_loadu_si128(e.add(i)), _mm_loadu_si128(k.add(i)));
            _mm_movemask_epi8(_mm_and_si128(eq(0), eq(1))) == 0xffff && tail == 0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        words[..4] == k[..4] && tail == 0
    }
}

pub struct ExactMatchCache {
    narrow: TableMemory<NarrowEntry>,
    wide: TableMemory<Entry>,
    mask: u32,
    insert_inv_prob: u32,
    rng: u64,
}

impl ExactMatchCache {
    /// Entries of each table for `entries` asked for (a power of two, at least 2).
    fn table_len(entries: usize) -> usize {
        entries.max(2).next_power_of_two()
    }

    /// Bytes the two tables of a cache of `entries` take (both are written when made).
    pub fn bytes_for(entries: usize) -> u64 {
        let n = Self::table_len(entries) as u64;
        n * (std::mem::size_of::<NarrowEntry>() + std::mem::size_of::<Entry>()) as u64
    }

    /// `entries` (per key shape: narrow and wide) is rounded up to a power of two (at
    /// least 2). `insert_inv_prob` of 1 inserts every flow; N inserts one in N on average.
    pub fn new(entries: usize, insert_inv_prob: u32) -> ExactMatchCache {
        let n = Self::table_len(entries);
        ExactMatchCache {
            narrow: TableMemory::new(n, NarrowEntry::EMPTY),
            wide: TableMemory::new(
                n,
                Entry {
                    hash: 0,
                    slot: 0,
                    gen: 0,
                    overflow: 0,
                    key: FlowKey::ZERO,
                },
            ),
            mask: n as u32 - 1,
            insert_inv_prob: insert_inv_prob.max(1),
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Entries per key shape (narrow and wide each have this many).
    pub fn capacity(&self) -> usize {
        self.wide.len()
    }

    #[inline(always)]
    fn positions(&self, hash: u32) -> [usize; 2] {
        [
            (hash & self.mask) as usize,
            (hash.rotate_left(16) & self.mask) as usize,
        ]
    }

    /// The narrow entry at a position [`ExactMatchCache::positions`] gave.
    #[inline(always)]
    fn narrow_at(&self, p: usize) -> &NarrowEntry {
        debug_assert!(p < self.narrow.len());
        // SAFETY: positions are masked with `mask`, which is the length of both tables
        // minus one (set once in `new`, a power of two). Every cached packet indexes the
        // table twice (prefetch and lookup); without the checks, and with the lookup's
        // loops split by shape, `emc_hit` ran ~10 instructions a packet fewer.
        unsafe { self.narrow.get_unchecked(p) }
    }

    /// The wide entry at a position [`ExactMatchCache::positions`] gave.
    #[inline(always)]
    fn wide_at(&self, p: usize) -> &Entry {
        debug_assert!(p < self.wide.len());
        // SAFETY: as in `narrow_at`.
        unsafe { self.wide.get_unchecked(p) }
    }

    /// Start loading the first candidate entry of `hash` into the cache (a batch computes
    /// all hashes and prefetches before the first lookup, hiding the memory latency):
    /// its one line for a narrow key, both for a wide one. The second candidate is not
    /// prefetched: a key is found in its first candidate unless two live flows collided
    /// there, and a prefetch that is hardly ever used costs a line fill per packet.
    #[inline(always)]
    pub fn prefetch(&self, hash: u32, narrow: bool) {
        let p = self.positions(hash)[0];
        if narrow {
            prefetch_line(self.narrow_at(p));
        } else {
            let e: *const Entry = self.wide_at(p);
            prefetch_line(e);
            prefetch_line(e.cast::<u8>().wrapping_add(64));
        }
    }

    /// The megaflow slot and generation cached for `key`, if any.
    #[inline(always)]
    pub fn lookup(&self, key: &FlowKey, hash: u32) -> Option<(u32, u32)> {
        self.find(key, hash, key.is_narrow())
    }

    /// [`ExactMatchCache::lookup`] in the narrow or the wide table. `narrow` must imply
    /// `key.is_narrow()` (a wide key looked up as narrow would match on six of its words);
    /// a narrow key may be kept wide as well, as long as it is inserted the same way.
    #[inline(always)]
    fn find(&self, key: &FlowKey, hash: u32, narrow: bool) -> Option<(u32, u32)> {
        debug_assert!(!narrow || key.is_narrow(), "a wide key taken for narrow");
        if narrow {
            self.find_narrow(key, hash)
        } else {
            self.find_wide(key, hash)
        }
    }

    /// [`ExactMatchCache::find`] in the narrow table.
    #[inline(always)]
    fn find_narrow(&self, key: &FlowKey, hash: u32) -> Option<(u32, u32)> {
        debug_assert!(key.is_narrow(), "a wide key taken for narrow");
        let [a, b] = self.positions(hash);
        let e = self.narrow_at(a);
        if e.holds(key, hash) {
            return Some((e.slot - 1, e.gen));
        }
        if e.overflow == 0 {
            return None;
        }
        let e = self.narrow_at(b);
        e.holds(key, hash).then(|| (e.slot - 1, e.gen))
    }

    /// [`ExactMatchCache::find`] in the wide table.
    #[inline(always)]
    fn find_wide(&self, key: &FlowKey, hash: u32) -> Option<(u32, u32)> {
        let holds = |e: &Entry| e.hash == hash && e.slot != 0 && e.key == *key;
        let [a, b] = self.positions(hash);
        let e = self.wide_at(a);
        if holds(e) {
            return Some((e.slot - 1, e.gen));
        }
        if e.overflow == 0 {
            return None;
        }
        let e = self.wide_at(b);
        holds(e).then(|| (e.slot - 1, e.gen))
    }

    /// Maybe cache `key -> (slot, gen)`: with probability 1/insert_inv_prob, into an empty
    /// candidate, else over the candidate that isn't the first (a cheap stand-in for LRU).
    #[inline]
    pub fn maybe_insert(&mut self, key: &FlowKey, hash: u32, slot: u32, gen: u32) {
        self.insert(key, hash, key.is_narrow(), slot, gen);
    }

    /// [`ExactMatchCache::maybe_insert`] into the narrow or the wide table (as for
    /// [`ExactMatchCache::find`]).
    #[inline]
    fn insert(&mut self, key: &FlowKey, hash: u32, narrow: bool, slot: u32, gen: u32) {
        debug_assert!(!narrow || key.is_narrow(), "a wide key taken for narrow");
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
        let mask = self.mask;
        // The entry overwritten at `p` leaves: if it sat in its second candidate, its
        // first no longer overflows to it. The new one at `p` overflows from `a` unless
        // `p` is `a`; `p` keeps its own count (it is about other keys).
        if narrow {
            let first = &self.narrow[a];
            let p = if first.slot == 0 || first.holds(key, hash) {
                a
            } else {
                b
            };
            let old = self.narrow[p];
            if old.slot != 0 && (old.hash & mask) as usize != p {
                self.narrow[(old.hash & mask) as usize].overflow -= 1;
            }
            self.narrow[p] = NarrowEntry::of(key, hash, slot, gen, self.narrow[p].overflow);
            if p != a {
                self.narrow[a].overflow += 1;
            }
        } else {
            let first = &self.wide[a];
            let p = if first.slot == 0 || first.key == *key {
                a
            } else {
                b
            };
            let old = &self.wide[p];
            let (old_first, overflow) = ((old.hash & mask) as usize, old.overflow);
            if old.slot != 0 && old_first != p {
                self.wide[old_first].overflow -= 1;
            }
            self.wide[p] = Entry {
                hash,
                slot: slot + 1,
                gen,
                overflow,
                key: *key,
            };
            if p != a {
                self.wide[a].overflow += 1;
            }
        }
    }

    /// The EMC stage of a batch: look up every key whose bit is set in `valid` by its
    /// hash in `hashes` (taken, and the entries prefetched, while the batch was parsed);
    /// a key whose bit is set in `narrow` (it must be narrow) is looked for in the narrow
    /// table, any other in the wide one.
    /// A hit counts only while its megaflow is still the entry that was cached (then it
    /// is pinned for the batch); its slot goes to `slots`. Returns the bits still
    /// unresolved.
    #[inline(always)]
    pub fn lookup_batch(
        &self,
        keys: &[FlowKey],
        valid: u32,
        narrow: u32,
        hashes: &[u32],
        slots: &mut [u32],
        megaflows: &mut MegaflowCache,
    ) -> u32 {
        // The narrow keys, then the wide ones: a loop each, without a per-key branch on
        // the shape.
        let mut pending = valid;
        let mut take = |i: usize, found: Option<(u32, u32)>| {
            if let Some((slot, gen)) = found {
                if megaflows.claim(slot, gen) {
                    slots[i] = slot;
                    pending &= !(1 << i);
                }
            }
        };
        let mut m = valid & narrow;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            take(i, self.find_narrow(&keys[i], hashes[i]));
        }
        let mut m = valid & !narrow;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            take(i, self.find_wide(&keys[i], hashes[i]));
        }
        pending
    }

    /// Offer the packets whose bit is set in `bits` (resolved to `slots` by a later tier)
    /// for insertion; `narrow` as for [`ExactMatchCache::lookup_batch`].
    #[inline(always)]
    pub fn insert_batch(
        &mut self,
        keys: &[FlowKey],
        narrow: u32,
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
            self.insert(&keys[i], hashes[i], narrow & (1 << i) != 0, slot, gen);
        }
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.narrow
            .iter_mut()
            .for_each(|e| (e.slot, e.overflow) = (0, 0));
        self.wide
            .iter_mut()
            .for_each(|e| (e.slot, e.overflow) = (0, 0));
    }

    /// Number of occupied entries (for statistics; walks the table).
    pub fn occupancy(&self) -> usize {
        let narrow = self.narrow.iter().filter(|e| e.slot != 0).count();
        narrow + self.wide.iter().filter(|e| e.slot != 0).count()
    }
}
