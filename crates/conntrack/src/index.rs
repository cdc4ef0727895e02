//! The index from a tuple's hash to the slab slot of its connection: buckets of seven
//! entries (a 32-bit signature and the slot), pre-sized by `max_connections` and split
//! into shards of contiguous buckets, each with its own writer lock.
//!
//! Readers take no lock: entries are atomic words, and a reader checks a candidate by
//! locking its slot and comparing the tuple. Writers (insert, remove) take their shard's
//! lock, so "is this tuple in use? if not, take it" is one step per shard. A bucket's
//! `passing` word counts the entries homed at an earlier bucket of its shard that were
//! placed past it; a lookup walks on to the next bucket only while that count is not zero.
//! Probing wraps inside the shard, so a writer never touches another shard's buckets.
//!
//! The bucket array is allocated zeroed in one piece (all-zero is "empty"): the allocator
//! hands large zeroed blocks out as untouched pages, so making a tracker costs no writes
//! and its memory is faulted in as connections land; the index never grows or rehashes.

use std::alloc::{self, Layout};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Entries per bucket (the eighth word of the cache line is `passing`).
pub(crate) const WAYS: usize = 7;
/// Buckets per shard (the most a probe walks).
pub(crate) const SHARD_BUCKETS: usize = 64;
/// The index is sized so that at `max_connections` (two entries each) it is at most this
/// full (percent).
pub(crate) const MAX_LOAD_PCT: usize = 60;

#[repr(C, align(64))]
pub(crate) struct Bucket {
    passing: AtomicU64,
    entries: [AtomicU64; WAYS],
}

/// An entry's word: signature in the high half, slot + 1 in the low (0 = empty).
#[inline]
fn entry(sig: u32, slot: u32) -> u64 {
    u64::from(sig) << 32 | u64::from(slot + 1)
}

#[inline]
fn sig_of(h: u64) -> u32 {
    (h >> 32) as u32
}

pub(crate) struct Index {
    buckets: Box<[Bucket]>,
    locks: Box<[Mutex<()>]>,
    mask: usize,
    shard_buckets: usize,
}

/// A slot an entry may name, for a lookup or a uniqueness check to verify.
pub(crate) type Slot = u32;

impl Index {
    /// An index for `max_conns` connections (two entries each).
    pub(crate) fn new(max_conns: usize) -> Index {
        let want = (2 * max_conns.max(1) * 100).div_ceil(WAYS * MAX_LOAD_PCT);
        let n = want.next_power_of_two().max(4);
        let shard_buckets = SHARD_BUCKETS.min(n);
        let locks = (0..n / shard_buckets).map(|_| Mutex::new(())).collect();
        Index {
            buckets: zeroed_buckets(n),
            locks,
            mask: n - 1,
            shard_buckets,
        }
    }

    /// The bucket array's size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        (self.mask + 1) * std::mem::size_of::<Bucket>()
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        h as usize & self.mask
    }

    /// The bucket `k` steps after `home`, wrapping inside its shard.
    #[inline]
    fn step(&self, home: usize, k: usize) -> usize {
        let base = home & !(self.shard_buckets - 1);
        base + ((home - base + k) & (self.shard_buckets - 1))
    }

    /// Every slot whose entry has `h`'s signature in `h`'s probe chain, until `f` returns
    /// `Some` (no lock; `f` verifies).
    #[inline]
    pub(crate) fn find<T>(&self, h: u64, mut f: impl FnMut(Slot) -> Option<T>) -> Option<T> {
        let sig = sig_of(h);
        let home = self.home(h);
        for k in 0..self.shard_buckets {
            let b = &self.buckets[self.step(home, k)];
            for e in &b.entries {
                let w = e.load(Ordering::Acquire);
                if w != 0 && (w >> 32) as u32 == sig {
                    if let Some(t) = f((w as u32) - 1) {
                        return Some(t);
                    }
                }
            }
            if b.passing.load(Ordering::Acquire) == 0 {
                break;
            }
        }
        None
    }

    /// Every occupied slot in the `buckets` buckets from `h`'s home (early drop's search).
    pub(crate) fn near<T>(
        &self,
        h: u64,
        buckets: usize,
        mut f: impl FnMut(Slot) -> Option<T>,
    ) -> Option<T> {
        let home = self.home(h);
        for k in 0..buckets.min(self.shard_buckets) {
            for e in &self.buckets[self.step(home, k)].entries {
                let w = e.load(Ordering::Acquire);
                if w != 0 {
                    if let Some(t) = f((w as u32) - 1) {
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// The writer lock of `h`'s shard.
    pub(crate) fn lock(&self, h: u64) -> ShardGuard<'_> {
        let shard = self.home(h) / self.shard_buckets;
        ShardGuard {
            _g: self.locks[shard].lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Add an entry for `slot` under `h`, holding `h`'s shard lock. False when every bucket
    /// of the shard is full.
    pub(crate) fn insert(&self, _g: &ShardGuard<'_>, h: u64, slot: Slot) -> bool {
        let home = self.home(h);
        for k in 0..self.shard_buckets {
            let b = &self.buckets[self.step(home, k)];
            if let Some(e) = b.entries.iter().find(|e| e.load(Ordering::Relaxed) == 0) {
                for j in 0..k {
                    self.buckets[self.step(home, j)]
                        .passing
                        .fetch_add(1, Ordering::Release);
                }
                e.store(entry(sig_of(h), slot), Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Remove `slot`'s entry under `h` (takes the shard lock). False when there is none.
    pub(crate) fn remove(&self, h: u64, slot: Slot) -> bool {
        let _g = self.lock(h);
        let want = entry(sig_of(h), slot);
        let home = self.home(h);
        for k in 0..self.shard_buckets {
            let b = &self.buckets[self.step(home, k)];
            if let Some(e) = b.entries.iter().find(|e| e.load(Ordering::Relaxed) == want) {
                e.store(0, Ordering::Release);
                for j in 0..k {
                    self.buckets[self.step(home, j)]
                        .passing
                        .fetch_sub(1, Ordering::Release);
                }
                return true;
            }
        }
        false
    }
}

/// Proof that a shard's writer lock is held.
pub(crate) struct ShardGuard<'a> {
    _g: MutexGuard<'a, ()>,
}

/// `n` zeroed buckets from the allocator's zeroed memory (untouched pages for large `n`).
fn zeroed_buckets(n: usize) -> Box<[Bucket]> {
    let layout = Layout::array::<Bucket>(n).expect("index size fits the address space");
    // SAFETY: `layout` has a non-zero size (n ≥ 4). A `Bucket` is atomics only, for which
    // all-zero bytes are a valid value, so the zeroed block is `n` initialised buckets; the
    // box frees it with the same layout (`Layout::for_value` of an `n`-bucket slice).
    unsafe {
        let p = alloc::alloc_zeroed(layout) as *mut Bucket;
        if p.is_null() {
            alloc::handle_alloc_error(layout);
        }
        advise_huge_pages(p.cast(), layout.size());
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// Ask for transparent huge pages over the block's whole 2 MB regions (hosts where they
/// are `madvise`-only). Every lookup lands on a random bucket: on 4 KB pages a table of a
/// few thousand connections is spread over as many pages, more than the TLB holds. The
/// memory is still faulted in as it is used, 2 MB at a time.
fn advise_huge_pages(p: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = (p as usize).next_multiple_of(HUGE);
    let end = (p as usize + len) & !(HUGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated; MADV_HUGEPAGE only
        // changes how the kernel backs it, not its contents. Failure (no THP) is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_with_overflow_chains() {
        let ix = Index::new(100);
        // Many entries with one home bucket: they spill along the shard and stay found.
        let hs: Vec<u64> = (0..40u64).map(|i| (i + 1) << 32).collect();
        for (i, &h) in hs.iter().enumerate() {
            let g = ix.lock(h);
            assert!(ix.insert(&g, h, i as u32));
        }
        for (i, &h) in hs.iter().enumerate() {
            assert_eq!(ix.find(h, |s| (s == i as u32).then_some(s)), Some(i as u32));
        }
        for (i, &h) in hs.iter().enumerate().step_by(2) {
            assert!(ix.remove(h, i as u32));
            assert!(!ix.remove(h, i as u32));
        }
        for (i, &h) in hs.iter().enumerate() {
            let found = ix.find(h, |s| (s == i as u32).then_some(s)).is_some();
            assert_eq!(found, i % 2 == 1);
        }
        for (i, &h) in hs.iter().enumerate().skip(1).step_by(2) {
            assert!(ix.remove(h, i as u32));
        }
        assert!(ix
            .buckets
            .iter()
            .all(|b| b.passing.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn a_full_shard_refuses() {
        let ix = Index::new(1);
        let n = ix.shard_buckets * WAYS;
        for i in 0..n as u32 {
            let g = ix.lock(0);
            assert!(ix.insert(&g, 0, i));
        }
        let g = ix.lock(0);
        assert!(!ix.insert(&g, 0, 99));
    }
}
