//! `SignatureMatchCache`: the second exact tier, for more flows than the EMC holds.
//!
//! OVS's SMC idea: a large table of 16-bit signatures of the key's hash, each pointing at
//! a megaflow slot. A lookup reads one 32-byte bucket (four ways), takes the slot whose
//! signature matches and checks the key against that megaflow's own masked key, so a hit is
//! always exact (two live megaflows never match one packet) and a stale or colliding entry
//! costs a failed check, never a wrong answer. At 6 bytes an entry, a million entries take
//! 8 MB where the EMC's 8,192 take 1 MB; with a million active flows it answers what the
//! EMC cannot, for one bucket and one megaflow entry instead of a search of every subtable.

const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Bucket {
    sig: [u16; WAYS],
    /// Megaflow slot + 1 (0 = empty).
    slot: [u32; WAYS],
}

pub struct SignatureMatchCache {
    buckets: Box<[Bucket]>,
    mask: u32,
}

impl SignatureMatchCache {
    /// About `entries` entries (rounded up to a power of two buckets of four).
    pub fn new(entries: usize) -> SignatureMatchCache {
        let n = (entries / WAYS).max(1).next_power_of_two();
        SignatureMatchCache {
            buckets: vec![Bucket::default(); n].into_boxed_slice(),
            mask: n as u32 - 1,
        }
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
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint; the address is that of a live element.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let b = &self.buckets[(hash & self.mask) as usize];
            _mm_prefetch::<_MM_HINT_T0>((b as *const Bucket).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// The megaflow slot whose signature matches `hash`, if any (to be checked against the
    /// megaflow's key by the caller).
    #[inline(always)]
    pub fn lookup(&self, hash: u32) -> Option<u32> {
        let (b, sig) = self.place(hash);
        let bucket = &self.buckets[b];
        (0..WAYS)
            .find(|&w| bucket.sig[w] == sig && bucket.slot[w] != 0)
            .map(|w| bucket.slot[w] - 1)
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
        assert_eq!(c.capacity(), 16);
        assert_eq!(c.lookup(0x1234_0001), None);
        c.insert(0x1234_0001, 7);
        assert_eq!(c.lookup(0x1234_0001), Some(7));
        // Same bucket (low bits), other signatures: four ways, then one is replaced.
        for (i, h) in [0x1111_0001u32, 0x2222_0001, 0x3333_0001, 0x4444_0001]
            .into_iter()
            .enumerate()
        {
            c.insert(h, 10 + i as u32);
        }
        let found = [
            0x1234_0001u32,
            0x1111_0001,
            0x2222_0001,
            0x3333_0001,
            0x4444_0001,
        ]
        .iter()
        .filter(|&&h| c.lookup(h).is_some())
        .count();
        assert_eq!(found, 4);
        assert_eq!(c.lookup(0x4444_0001), Some(13), "the newest is kept");
        // Re-pointing a signature overwrites its way.
        c.insert(0x4444_0001, 99);
        assert_eq!(c.lookup(0x4444_0001), Some(99));
        c.clear();
        assert_eq!(c.occupancy(), 0);
    }
}
