//! `SignatureMatchCache`: the second exact tier, for more flows than the EMC holds.
//!
//! OVS's SMC idea: a large table of 16-bit signatures of the key's hash, each pointing at
//! a megaflow slot. A lookup reads one 64-byte bucket (ten ways, one cache line), takes the
//! slot whose signature matches and checks the key against that megaflow's own masked key,
//! so a hit is always exact (two live megaflows never match one packet) and a stale or
//! colliding entry costs a failed check, never a wrong answer. At 6.4 bytes an entry,
//! 1.3 million entries take 8 MB where the EMC's 8,192 take 1 MB; with a million active
//! flows it answers what the EMC cannot, for one line and one megaflow entry instead of a
//! search of every subtable.
//!
//! Ten ways to a line rather than four to a half line: the same 8 MB holds a quarter more
//! entries (no padding) and a full bucket is far rarer. A million flows looked up in turn
//! found their entry 71 % of the time in the 4-way table and 91 % in this one, in a
//! simulation of both; `flowpath bench --case many_flows` measures 73 % and 92 % (smc%).

use flowpath_base::TableMemory;

/// Ways per bucket: ten signatures (20 bytes) and ten slots (40 bytes) fill a line.
const WAYS: usize = 10;

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    sig: [u16; WAYS],
    /// Megaflow slot + 1 (0 = empty).
    slot: [u32; WAYS],
}

const _: () = assert!(
    std::mem::size_of::<Bucket>() == 64,
    "an SMC bucket is one line"
);

/// Bit `w` set for each way `w` of `bucket` whose signature is `sig` (slot not checked).
#[inline(always)]
fn sig_matches(bucket: &Bucket, sig: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: two unaligned 16-byte loads inside the 64-byte bucket (bytes 0..32);
        // SSE2 is part of x86_64. Lanes past the ten signatures are masked off below.
        unsafe {
            use core::arch::x86_64::*;
            let p = bucket as *const Bucket as *const __m128i;
            let s = _mm_set1_epi16(sig as i16);
            let a = _mm_cmpeq_epi16(_mm_loadu_si128(p), s);
            let b = _mm_cmpeq_epi16(_mm_loadu_si128(p.add(1)), s);
            // One byte per lane: lanes 0..8 from `a`, 8..16 from `b`.
            let m = _mm_movemask_epi8(_mm_packs_epi16(a, b)) as u32;
            m & ((1 << WAYS) - 1)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (0..WAYS)
            .filter(|&w| bucket.sig[w] == sig)
            .fold(0, |m, w| m | 1 << w)
    }
}

pub struct SignatureMatchCache {
    buckets: TableMemory<Bucket>,
    mask: u32,
}

impl SignatureMatchCache {
    /// At least `entries` entries: a power of two buckets of ten (1 << 20 asked gives
    /// 131,072 buckets, 1,310,720 entries, 8 MB).
    pub fn new(entries: usize) -> SignatureMatchCache {
        let n = Self::buckets_for(entries);
        SignatureMatchCache {
            buckets: TableMemory::new(n, Bucket::default()),
            mask: n as u32 - 1,
        }
    }

    /// Buckets for `entries` asked for (a power of two, at least one).
    fn buckets_for(entries: usize) -> usize {
        entries.div_ceil(WAYS).max(1).next_power_of_two()
    }

    /// Bytes a cache of `entries` takes (written when made).
    pub fn bytes_for(entries: usize) -> u64 {
        (Self::buckets_for(entries) * std::mem::size_of::<Bucket>()) as u64
    }

    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// The bucket takes the hash's low bits, the signature its high half (so the two are
    /// independent for any table of up to 2^16 buckets, and nearly so beyond).
    #[inline(always)]
    fn place(&self, hash: u32) -> (usize, u16) {
        ((hash & self.mask) as usize, (hash >> 16) as u16)
    }

    /// Start loading the bucket of `hash`.
    #[inline(always)]
    pub fn prefetch(&self, hash: u32) {
        crate::prefetch_line(&self.buckets[(hash & self.mask) as usize]);
    }

    /// The megaflow slot whose signature matches `hash`, if any (to be checked against the
    /// megaflow's key by the caller).
    #[inline(always)]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let (b, sig) = self.place(hash);
        let bucket = &self.buckets[b];
        let mut m = sig_matches(bucket, sig);
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            m &= m - 1;
            if bucket.slot[w] != 0 {
                return Some(bucket.slot[w] - 1);
            }
        }
        None
    }

    /// Point `hash`'s signature at megaflow `slot`: over the way with the same signature,
    /// else an empty way, else a way chosen by the hash (a cheap stand-in for LRU).
    #[inline(always)]
    pub fn insert(&mut self, hash: u32, slot: u32) {
        let (b, sig) = self.place(hash);
        let bucket = &mut self.buckets[b];
        let w = (0..WAYS)
            .find(|&w| bucket.sig[w] == sig && bucket.slot[w] != 0)
            .or_else(|| (0..WAYS).find(|&w| bucket.slot[w] == 0))
            .unwrap_or((hash >> 12) as usize % WAYS);
        bucket.sig[w] = sig;
        bucket.slot[w] = slot + 1;
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
    }

    /// Entries in use (for statistics; walks the table).
    pub fn occupancy(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.slot.iter().filter(|&&s| s != 0).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_finds_its_slot_and_a_full_bucket_replaces_a_way() {
        let mut c = SignatureMatchCache::new(16);
        assert_eq!(c.capacity(), 20);
        assert_eq!(c.lookup(0x1234_0001), None);
        c.insert(0x1234_0001, 7);
        assert_eq!(c.lookup(0x1234_0001), Some(7));
        // Same bucket (low bits), other signatures: ten ways, then one is replaced.
        let others: Vec<u32> = (1..=10u32).map(|i| i << 16 | 1).collect();
        for (i, &h) in others.iter().enumerate() {
            c.insert(h, 10 + i as u32);
        }
        let found = std::iter::once(0x1234_0001u32)
            .chain(others.iter().copied())
            .filter(|&h| c.lookup(h).is_some())
            .count();
        assert_eq!(found, WAYS);
        assert_eq!(c.lookup(0x000a_0001), Some(19), "the newest is kept");
        // Every way answers for its own signature (the vector compare covers all ten).
        let mut d = SignatureMatchCache::new(1);
        for w in 0..WAYS as u32 {
            d.insert((w + 1) << 16, 100 + w);
        }
        for w in 0..WAYS as u32 {
            assert_eq!(d.lookup((w + 1) << 16), Some(100 + w));
        }
        assert_eq!(d.lookup(11 << 16), None);
        // Re-pointing a signature overwrites its way.
        c.insert(0x4444_0001, 99);
        assert_eq!(c.lookup(0x4444_0001), Some(99));
        c.clear();
        assert_eq!(c.occupancy(), 0);
    }
}
