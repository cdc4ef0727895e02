//! `SlotIndex`: a megaflow subtable's index, from a masked key's 32-bit hash to the slots
//! of the entries with that hash, probed once per subtable per packet in the megaflow search.
//!
//! Written here rather than taken from a crate because it is the search's inner loop and
//! because it knows what a general hash table cannot: the full 32-bit hash is the whole key
//! it stores (no second hash, no tag derived from it), and the slots are the only values.
//! Each bucket is one cache line of seven (hash, slot) ways plus an *overflow* count, the
//! entries whose home bucket is this one or an earlier one and that were placed past it
//! (folly's F14 keeps the same count). A lookup compares the line's seven hashes at once and
//! stops at the first bucket without overflow, so a miss (most probes: a packet is looked up
//! in every subtable before the one that holds its megaflow) reads one line and its hit
//! candidates are only entries with the very same hash. `hashbrown`'s table, before it, did
//! the same through a control-byte group, a separate slot array and the entry's own hash;
//! this one took 2 % of the instructions off a 16-subtable search and 2 % off `many_flows`
//! (callgrind), ~3 % of `megaflow_hit_16`'s cycles, and costs a miss's install +0.5 %.
//!
//! An index doubles when it is 5/7 full. The table it doubles into is made while it fills
//! its last three eighths, a few buckets an insert: written (so faulted in), then filled
//! with copies of the entries, inserts and removals in copied buckets done in both. The
//! doubling insert only swaps tables, so a new-flow flood does not stall a batch on page
//! faults and a rehash (3.6–4.4 M cycles at 40,960 entries done in one insert; `bench
//! --first-flood`). Lookups never see the second table: moving entries after the doubling
//! and searching both tables meanwhile costs `megaflow_hit_16` 14 %.

use flowpath_base::{TableBuilder, TableMemory};

/// Ways per bucket: seven hashes (28 bytes), the overflow count, seven slots.
const WAYS: usize = 7;
/// A way's slot when the way is empty.
const EMPTY: u32 = u32::MAX;
/// Buckets (of 64 bytes) past which an index is [`SlotIndex::is_large`].
const LARGE_BUCKETS: usize = 4096;
/// Most entries per bucket, on average, before the table doubles (5 of 7 ways).
const FILL: usize = 5;
/// Buckets of the next table written with each insert once the index is five eighths
/// full. With B buckets the index has 1.875 B inserts left before it doubles: 2 B buckets
/// take B of them to write, and copying the B buckets in, 0.5 B more.
const WRITE_AHEAD: usize = 2;
/// Buckets of the index copied into the next table with each insert once it is written.
const COPY_AHEAD: usize = 2;
/// Tables from this many buckets (one 4 KB page) up are made ahead; a smaller one costs
/// at most one page fault when the index doubles into it.
const AHEAD_FROM: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    hash: [u32; WAYS],
    /// Entries whose home bucket is this one or an earlier one, placed past this one.
    overflow: u32,
    slot: [u32; WAYS],
    _pad: u32,
}

const _: () = assert!(
    std::mem::size_of::<Bucket>() == 64,
    "a slot-index bucket is one line"
);

const EMPTY_BUCKET: Bucket = Bucket {
    hash: [0; WAYS],
    overflow: 0,
    slot: [EMPTY; WAYS],
    _pad: 0,
};

/// Bit `w` set for each way `w` of `bucket` whose hash is `h` (the slot not checked: an
/// empty way keeps an old hash).
#[inline(always)]
fn hash_matches(bucket: &Bucket, h: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: two aligned 16-byte loads of the 64-byte, 64-aligned bucket's first 32
        // bytes (the seven hashes and the overflow count, whose lane is masked off below);
        // SSE2 is part of x86_64.
        unsafe {
            use core::arch::x86_64::*;
            let p = bucket as *const Bucket as *const __m128i;
            let s = _mm_set1_epi32(h as i32);
            let a = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_load_si128(p), s));
            let b = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_load_si128(p.add(1)), s));
            let m = _mm_movemask_ps(a) as u32 | (_mm_movemask_ps(b) as u32) << 4;
            m & ((1 << WAYS) - 1)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (0..WAYS)
            .filter(|&w| bucket.hash[w] == h)
            .fold(0, |m, w| m | 1 << w)
    }
}

/// A power of two of buckets with open addressing from each hash's home bucket.
struct Table {
    buckets: TableMemory<Bucket>,
    /// Buckets - 1.
    mask: usize,
}

impl Table {
    fn new(buckets: TableMemory<Bucket>) -> Table {
        debug_assert!(buckets.len().is_power_of_two());
        Table {
            mask: buckets.len() - 1,
            buckets,
        }
    }

    /// The first slot with hash `h` for which `is_it(slot)` holds.
    #[inline(always)]
    fn find(&self, h: u32, is_it: &mut impl FnMut(u32) -> bool) -> Option<u32> {
        let mut b = h as usize & self.mask;
        loop {
            // SAFETY: b is masked with buckets.len() - 1 (a power of two, at least one).
            let bucket = unsafe { self.buckets.get_unchecked(b) };
            let mut m = hash_matches(bucket, h);
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                m &= m - 1;
                // SAFETY: `hash_matches` sets only bits below WAYS.
                let s = unsafe { *bucket.slot.get_unchecked(w) };
                if s != EMPTY && is_it(s) {
                    return Some(s);
                }
            }
            if bucket.overflow == 0 {
                return None;
            }
            b = (b + 1) & self.mask;
        }
    }

    /// Put `(h, slot)` in the first bucket from its home with an empty way, counting the
    /// overflow on every full bucket passed (there is always room: the fill stays below
    /// the ways); returns that bucket.
    fn place(&mut self, h: u32, slot: u32) -> usize {
        let mut b = h as usize & self.mask;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = bucket.slot.iter().position(|&s| s == EMPTY) {
                bucket.hash[w] = h;
                bucket.slot[w] = slot;
                return b;
            }
            bucket.overflow += 1;
            b = (b + 1) & self.mask;
        }
    }

    /// Remove `slot`, filed under hash `h`; the bucket it was in, or None if it is not
    /// here.
    fn remove(&mut self, h: u32, slot: u32) -> Option<usize> {
        let home = h as usize & self.mask;
        let mut b = home;
        let mut passed = 0;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = (0..WAYS).find(|&w| bucket.slot[w] == slot && bucket.hash[w] == h) {
                bucket.slot[w] = EMPTY;
                break;
            }
            if bucket.overflow == 0 {
                return None;
            }
            passed += 1;
            b = (b + 1) & self.mask;
        }
        // The buckets from home up to the one it was in no longer overflow on its account.
        for i in 0..passed {
            self.buckets[(home + i) & self.mask].overflow -= 1;
        }
        Some(b)
    }

    /// Place the entries of this table's buckets `from..to` in `into`.
    fn copy_into(&self, into: &mut Table, from: usize, to: usize) {
        for bucket in &self.buckets[from..to] {
            for w in 0..WAYS {
                if bucket.slot[w] != EMPTY {
                    into.place(bucket.hash[w], bucket.slot[w]);
                }
            }
        }
    }

    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets
            .iter()
            .flat_map(|b| b.slot.iter().copied().filter(|&s| s != EMPTY))
    }
}

/// The table an index will double into, made while the index fills its last three eighths:
/// first written (faulted in) a few buckets an insert, then filled with the entries of
/// the index's buckets before `cursor`, also a few an insert, the index's inserts and
/// removals in those buckets done in both tables meanwhile. The index's lookups see only
/// its own table: nothing of this is on the search's line.
enum Ahead {
    Writing(TableBuilder<Bucket>),
    Copying { table: Table, cursor: usize },
}

/// Megaflow slots by the 32-bit hash of their masked key (several slots may share a hash).
pub struct SlotIndex {
    table: Table,
    len: usize,
    /// The table the index doubles into next, made ahead from five eighths full. Made and
    /// filled in the one insert that doubles, it would cost that insert, for 40,960 entries
    /// into 1 MB, ~256 page faults (1–2.5 M cycles, ~10,000 a fault on this project's VM)
    /// and ~0.9 M cycles of moving, in one batch of a new-flow flood.
    ahead: Option<Box<Ahead>>,
    /// Entries the index will hold at most (its owner's bound): a table past what that
    /// needs is not made ahead.
    most: usize,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex::new()
    }
}

impl SlotIndex {
    /// An empty index of one bucket.
    pub fn new() -> SlotIndex {
        SlotIndex {
            table: Table::new(TableMemory::new(1, EMPTY_BUCKET)),
            len: 0,
            ahead: None,
            most: usize::MAX,
        }
    }

    /// An empty index that will hold at most `most` entries (more still go in, but the
    /// table for them is not made ahead).
    pub fn holding_at_most(most: usize) -> SlotIndex {
        SlotIndex {
            most,
            ..SlotIndex::new()
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries it holds before it grows.
    pub fn capacity(&self) -> usize {
        self.table.buckets.len() * FILL
    }

    /// The first slot with hash `h` for which `is_it(slot)` holds.
    #[inline(always)]
    pub fn find(&self, h: u32, mut is_it: impl FnMut(u32) -> bool) -> Option<u32> {
        self.table.find(h, &mut is_it)
    }

    /// Whether the buckets take more than 256 KiB (half this machine kind's L2): probes
    /// then mostly wait for memory, and a batch's buckets are worth fetching ahead.
    #[inline(always)]
    pub fn is_large(&self) -> bool {
        self.table.buckets.len() > LARGE_BUCKETS
    }

    /// Start loading the bucket where a lookup, insert or removal of hash `h` begins.
    #[inline(always)]
    pub fn prefetch(&self, h: u32) {
        if let Some(b) = self.table.buckets.get(h as usize & self.table.mask) {
            crate::prefetch_line(b as *const Bucket);
        }
    }

    /// Add `slot` under hash `h` (the caller never adds one slot twice).
    pub fn insert(&mut self, h: u32, slot: u32) {
        debug_assert_ne!(slot, EMPTY, "slot {EMPTY} is the empty mark");
        if self.len + 1 > self.capacity() {
            self.grow();
        } else if 8 * self.len >= 5 * self.capacity() {
            self.work_ahead();
        }
        let b = self.table.place(h, slot);
        if let Some(Ahead::Copying { table, cursor }) = self.ahead.as_deref_mut() {
            // A bucket already copied: the new entry goes in both.
            if b < *cursor {
                table.place(h, slot);
            }
        }
        self.len += 1;
    }

    /// One insert's share of making the next table: [`WRITE_AHEAD`] of its buckets
    /// written, or once it is written, [`COPY_AHEAD`] of this table's buckets copied in.
    fn work_ahead(&mut self) {
        let n = self.table.buckets.len() * 2;
        if n < AHEAD_FROM || self.capacity() >= self.most {
            return;
        }
        let ahead = self
            .ahead
            .get_or_insert_with(|| Box::new(Ahead::Writing(TableBuilder::new(n, EMPTY_BUCKET))));
        match &mut **ahead {
            Ahead::Writing(b) => {
                b.write(WRITE_AHEAD);
                if b.remaining() == 0 {
                    if let Some(Ahead::Writing(b)) = self.ahead.take().map(|a| *a) {
                        self.ahead = Some(Box::new(Ahead::Copying {
                            table: Table::new(b.finish()),
                            cursor: 0,
                        }));
                    }
                }
            }
            Ahead::Copying { table, cursor } => {
                let to = (*cursor + COPY_AHEAD).min(self.table.buckets.len());
                self.table.copy_into(table, *cursor, to);
                *cursor = to;
            }
        }
    }

    fn grow(&mut self) {
        let n = self.table.buckets.len() * 2;
        let fresh = match self.ahead.take().map(|a| *a) {
            Some(Ahead::Copying { mut table, cursor }) if table.buckets.len() == n => {
                self.table
                    .copy_into(&mut table, cursor, self.table.buckets.len());
                table
            }
            ahead => {
                // Not made ahead, or not that far (removals held the index below five
                // eighths part of the time): the rest of it now.
                let memory = match ahead {
                    Some(Ahead::Writing(b)) if b.len() == n => b.finish(),
                    _ => TableMemory::new(n, EMPTY_BUCKET),
                };
                let mut table = Table::new(memory);
                self.table
                    .copy_into(&mut table, 0, self.table.buckets.len());
                table
            }
        };
        self.table = fresh;
    }

    /// Remove `slot`, filed under hash `h`; false if it is not there.
    pub fn remove(&mut self, h: u32, slot: u32) -> bool {
        let Some(b) = self.table.remove(h, slot) else {
            return false;
        };
        if let Some(Ahead::Copying { table, cursor }) = self.ahead.as_deref_mut() {
            // From a bucket already copied: out of the next table too.
            if b < *cursor {
                let removed = table.remove(h, slot);
                debug_assert!(removed.is_some(), "a copied entry is in the next table");
            }
        }
        self.len -= 1;
        true
    }

    /// Remove everything, keeping the allocation.
    pub fn clear(&mut self) {
        self.table.buckets.fill(EMPTY_BUCKET);
        self.ahead = None;
        self.len = 0;
    }

    /// Every slot, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.table.slots()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32),
        Remove(usize),
        Find(u32),
    }

    /// Hashes from a small set, so buckets fill, overflow and share hashes.
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..48).prop_map(|h| Op::Insert(h.wrapping_mul(0x9e37_79b9) >> 3 | h)),
            2 => any::<usize>().prop_map(Op::Remove),
            3 => (0u32..48).prop_map(|h| Op::Find(h.wrapping_mul(0x9e37_79b9) >> 3 | h)),
        ]
    }

    /// Every find sees exactly the slots with its hash, as a set of (hash, slot) has them,
    /// through `ops`; then every slot is listed and every overflow count is right.
    fn check_against_a_set(ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut t = SlotIndex::new();
        let mut reference: BTreeSet<(u32, u32)> = BTreeSet::new();
        let mut next_slot = 0u32;
        for op in ops {
            match op {
                Op::Insert(h) => {
                    t.insert(h, next_slot);
                    reference.insert((h, next_slot));
                    next_slot += 1;
                }
                Op::Remove(i) => {
                    if reference.is_empty() {
                        prop_assert!(!t.remove(7, 12345));
                        continue;
                    }
                    let &(h, s) = reference.iter().nth(i % reference.len()).unwrap();
                    prop_assert!(t.remove(h, s));
                    prop_assert!(!t.remove(h, s), "removed twice");
                    reference.remove(&(h, s));
                }
                Op::Find(h) => {
                    let want: BTreeSet<u32> =
                        reference.iter().filter(|e| e.0 == h).map(|e| e.1).collect();
                    let mut seen = BTreeSet::new();
                    let r = t.find(h, |s| {
                        seen.insert(s);
                        false
                    });
                    prop_assert_eq!(r, None);
                    prop_assert_eq!(&seen, &want, "hash {:#x}", h);
                    if let Some(&last) = want.iter().next_back() {
                        prop_assert_eq!(t.find(h, |s| s == last), Some(last));
                    }
                }
            }
            prop_assert_eq!(t.len(), reference.len());
        }
        let all: BTreeSet<u32> = t.iter().collect();
        let want: BTreeSet<u32> = reference.iter().map(|e| e.1).collect();
        prop_assert_eq!(all, want);
        // Every overflow count, of the table and of the next one being made, is accounted
        // for by an entry placed past its home.
        prop_assert_eq!(
            overflow_counts(&t.table),
            expected_overflow_counts(&t.table)
        );
        if let Some(Ahead::Copying { table, .. }) = t.ahead.as_deref() {
            prop_assert_eq!(overflow_counts(table), expected_overflow_counts(table));
        }
        Ok(())
    }

    fn overflow_counts(t: &Table) -> Vec<u32> {
        t.buckets.iter().map(|b| b.overflow).collect()
    }

    fn expected_overflow_counts(t: &Table) -> Vec<u32> {
        let mut expect = vec![0u32; t.buckets.len()];
        for (b, bucket) in t.buckets.iter().enumerate() {
            for w in 0..WAYS {
                if bucket.slot[w] != EMPTY {
                    let mut i = bucket.hash[w] as usize & t.mask;
                    while i != b {
                        expect[i] += 1;
                        i = (i + 1) & t.mask;
                    }
                }
            }
        }
        expect
    }

    /// Mostly inserts, over more hashes: the index crosses five eighths full several
    /// times, so removals and inserts meet the next table being written and copied.
    fn growing_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u32..4096).prop_map(|h| Op::Insert(h.wrapping_mul(0x9e37_79b9) >> 3 | h)),
            3 => any::<usize>().prop_map(Op::Remove),
            2 => (0u32..4096).prop_map(|h| Op::Find(h.wrapping_mul(0x9e37_79b9) >> 3 | h)),
        ]
    }

    proptest! {
        /// Through inserts, removes (overflow counts going down) and growth.
        #[test]
        fn agrees_with_a_set(ops in prop::collection::vec(op(), 1..400)) {
            check_against_a_set(ops)?;
        }

        /// Through doublings into tables made ahead (from 64 buckets up), removals and
        /// inserts landing in buckets already copied into the next table and not yet.
        #[test]
        fn agrees_with_a_set_through_tables_made_ahead(
            ops in prop::collection::vec(growing_op(), 1500..3000)
        ) {
            check_against_a_set(ops)?;
        }
    }

    /// Through several doublings into tables made ahead (from 64 buckets up), with
    /// removals holding the index below three quarters for a while (so the next table is
    /// part written when it is needed) and hashes that collide: every entry is found, the
    /// removed ones are not, and an index bounded to what it holds makes nothing ahead.
    #[test]
    fn grows_into_tables_made_ahead() {
        let mut t = SlotIndex::new();
        let mut live = BTreeSet::new();
        let hash = |s: u32| s.wrapping_mul(0x9e37_79b9) >> 2 | (s % 3);
        for s in 0..20_000u32 {
            t.insert(hash(s), s);
            live.insert(s);
            // Between 3,000 and 6,000, remove one for every two that go in: the index
            // fills slower there, across its three-quarter mark at 3,840.
            if (3_000..6_000).contains(&s) && s % 2 == 0 {
                let victim = s - 1_000;
                if live.remove(&victim) {
                    assert!(t.remove(hash(victim), victim));
                }
            }
        }
        assert_eq!(t.len(), live.len());
        for s in 0..20_000u32 {
            let found = t.find(hash(s), |x| x == s);
            assert_eq!(found.is_some(), live.contains(&s), "slot {s}");
        }
        let all: BTreeSet<u32> = t.iter().collect();
        assert_eq!(all, live);

        let mut bounded = SlotIndex::holding_at_most(5_000);
        for s in 0..5_000u32 {
            bounded.insert(hash(s), s);
        }
        assert!(
            bounded.ahead.is_none(),
            "a table past the bound was made ahead"
        );
        assert!((0..5_000).all(|s| bounded.find(hash(s), |x| x == s) == Some(s)));
    }

    /// The insert that doubles a 512 KB index into 1 MB finds the new table written: it
    /// faults no pages in (made at that insert, as before, the table took ~256 faults).
    #[test]
    fn doubling_faults_nothing_in() {
        let mut t = SlotIndex::new();
        let hash = |s: u32| s.wrapping_mul(0x9e37_79b9);
        let mut s = 0;
        while t.len() < t.capacity() || t.table.buckets.len() < 8192 {
            t.insert(hash(s), s);
            s += 1;
        }
        let before = flowpath_base::table_memory::minor_page_faults();
        t.insert(hash(s), s);
        let faults = flowpath_base::table_memory::minor_page_faults() - before;
        assert_eq!(
            t.table.buckets.len(),
            16_384,
            "the insert doubled the index"
        );
        assert!(faults < 16, "{faults} page faults in the doubling insert");
    }

    #[test]
    fn one_hash_many_slots_overflows_and_clears() {
        let mut t = SlotIndex::new();
        for s in 0..40 {
            t.insert(0xabcd_0000, s);
        }
        assert_eq!(t.len(), 40);
        let mut seen = Vec::new();
        assert_eq!(
            t.find(0xabcd_0000, |s| {
                seen.push(s);
                false
            }),
            None
        );
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        assert_eq!(t.find(0xabcd_0001, |_| true), None);
        for s in (0..40).step_by(2) {
            assert!(t.remove(0xabcd_0000, s));
        }
        assert_eq!(t.find(0xabcd_0000, |s| s == 39), Some(39));
        assert_eq!(t.find(0xabcd_0000, |s| s == 38), None);
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.iter().count(), 0);
        assert_eq!(t.find(0xabcd_0000, |_| true), None);
    }
}
