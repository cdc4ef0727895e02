//! Hashing keys: the whole key for the exact-match cache, a key under a mask for the
//! tuple-space subtables, and the arithmetic both share.

use super::{FlowKey, WordSet, KEY_WORDS};

impl FlowKey {
    /// Hash of the whole key (for the exact-match cache).
    #[inline(always)]
    pub fn hash(&self, seed: u64) -> u32 {
        hash_all(&self.words, seed)
    }

    /// [`FlowKey::hash`] of a key whose tunnel and metadata words (8..13) are zero, as
    /// every key the parser's fast paths build is: those words are not read. Called
    /// right after such a key is built, it hashes the values still in registers.
    #[inline(always)]
    pub fn hash_no_tunnel(&self, seed: u64) -> u32 {
        let w = &self.words;
        debug_assert!(w[8..].iter().all(|&x| x == 0), "a key with tunnel words");
        let acc = pair(w[0] ^ K[0], w[1] ^ K[1], seed)
            .wrapping_add(pair(w[2] ^ K[2], w[3] ^ K[3], seed))
            .wrapping_add(pair(w[4] ^ K[4], w[6] ^ K[6], seed))
            .wrapping_add(if w[5] | w[7] == 0 {
                0
            } else {
                pair(w[5] ^ K[5], w[7] ^ K[7], seed)
            });
        finish(acc)
    }

    /// Hash of `self & mask` over the words in `set` (for tuple-space subtables).
    #[inline(always)]
    pub fn masked_hash(&self, mask: &FlowKey, set: &WordSet, seed: u64) -> u32 {
        let w = |a: u8| {
            // SAFETY: a WordSet holds only word indices below KEY_WORDS (its fields are
            // private; `of_mask` is the one constructor). This runs once per probed
            // subtable per packet, and the three bounds checks per word would be a tenth of
            // the megaflow search's instructions.
            unsafe {
                let a = a as usize;
                (self.words.get_unchecked(a) & mask.words.get_unchecked(a)) ^ K.get_unchecked(a)
            }
        };
        // Masks of up to four words (most megaflows) without a loop; the same value as
        // the loop: pairs in order, an odd last word paired with K[KEY_WORDS].
        let tail = K[KEY_WORDS];
        let acc = match *set.indices() {
            // No words: every key is the same masked key.
            [] => seed,
            [a] => pair(w(a), tail, seed),
            [a, b] => pair(w(a), w(b), seed),
            [a, b, c] => pair(w(a), w(b), seed).wrapping_add(pair(w(c), tail, seed)),
            [a, b, c, d] => pair(w(a), w(b), seed).wrapping_add(pair(w(c), w(d), seed)),
            ref idx => {
                let mut acc = 0u64;
                let mut pairs = idx.chunks_exact(2);
                for p in &mut pairs {
                    acc = acc.wrapping_add(pair(w(p[0]), w(p[1]), seed));
                }
                if let [a] = pairs.remainder() {
                    acc = acc.wrapping_add(pair(w(*a), tail, seed));
                }
                acc
            }
        };
        finish(acc)
    }

    /// `(self & mask) == value` over only the words in `set` (all others are zero in
    /// `mask` and `value`).
    #[inline(always)]
    pub fn matches_words(&self, mask: &FlowKey, value: &FlowKey, set: &WordSet) -> bool {
        let mut diff = 0u64;
        for &w in set.indices() {
            // SAFETY: as in `masked_hash`, every index is below KEY_WORDS.
            unsafe {
                let w = w as usize;
                diff |= (self.words.get_unchecked(w) & mask.words.get_unchecked(w))
                    ^ value.words.get_unchecked(w);
            }
        }
        diff == 0
    }
}

/// Widen a 32-bit key hash for `hashbrown`, which takes its 7-bit control tag from the
/// top bits of a 64-bit hash: a plain `u32 as u64` would give every entry the same tag.
#[inline(always)]
pub fn wide_hash(h: u32) -> u64 {
    ((h as u64) << 32) | h as u64
}

// Hand-written hashing: this runs once per packet (exact-match cache) and once per
// probed subtable, so it must be a few cycles. Folded 64x64->128 multiplies over pairs of
// words are independent of each other, so the CPU overlaps them; the per-position
// constants make the hash sensitive to where a word sits. The seed is chosen at random per
// datapath and goes into a factor of every product, so crafted keys cannot aim at one
// bucket. The sum is folded to 32 bits without a last multiply, which would end every
// hash's dependency chain (about 8 % of the `megaflow_hit_4` bench case; see `finish`).
pub(super) const K: [u64; KEY_WORDS + 1] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6c,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
    0x9216_d5d9_8979_fb1b,
    0xd131_0ba6_98df_b5ac,
    0x2ffd_72db_d01a_dfb7,
    0xb8e1_afed_6a26_7e96,
    0xba7c_9045_f12c_7f99,
    0x636f_6e6e_7472_6163,
    0x858e_fc16_6369_64e5,
    0x7b54_a41d_c25a_59b5,
    0x9c30_d539_2af2_6013,
    0xc5d1_b023_2860_85f0,
    0xca41_7918_b8db_38ef,
    0x8e79_dcb0_603a_180e,
    0x6c9e_0e8b_b01e_8a3e,
    0x24a1_9947_b391_6cf7,
];

#[inline(always)]
pub(super) const fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// One pair's term: the seed goes into a factor of every product, so which keys collide
/// (in the whole hash or in a table's low bits) depends on it.
#[inline(always)]
pub(super) const fn pair(a: u64, b: u64, seed: u64) -> u64 {
    fold_mul(a ^ seed, b)
}

/// The 32-bit hash of a sum of terms: its two halves folded. No multiply here: every term
/// already folds its product's high half into the low one, so each bit of the sum depends
/// on every bit of the words.
#[inline(always)]
pub(super) fn finish(acc: u64) -> u32 {
    (acc ^ (acc >> 32)) as u32
}

/// The whole key's hash: the sum of the terms of word pairs (0,1) (2,3) (4,6), of (5,7)
/// unless both words are zero, and of (8,9) (10,11) (12,-) unless all five words are.
/// The words an IPv4 packet without a tunnel leaves zero (the IPv6 halves 5 and 7, the
/// tunnel and metadata words 8..13) are tested, not multiplied: three multiplies, not
/// seven.
#[inline(always)]
fn hash_all(w: &[u64; KEY_WORDS], seed: u64) -> u32 {
    let mut acc = pair(w[0] ^ K[0], w[1] ^ K[1], seed)
        .wrapping_add(pair(w[2] ^ K[2], w[3] ^ K[3], seed))
        .wrapping_add(pair(w[4] ^ K[4], w[6] ^ K[6], seed));
    if w[5] | w[7] != 0 {
        acc = acc.wrapping_add(pair(w[5] ^ K[5], w[7] ^ K[7], seed));
    }
    if w[8] | w[9] | w[10] | w[11] | w[12] != 0 {
        acc = acc
            .wrapping_add(pair(w[8] ^ K[8], w[9] ^ K[9], seed))
            .wrapping_add(pair(w[10] ^ K[10], w[11] ^ K[11], seed))
            .wrapping_add(pair(w[12] ^ K[12], K[KEY_WORDS], seed));
    }
    // The connection-tracking words (13..21): zero in every key before a `ct` action.
    if w[13..].iter().fold(0, |d, x| d | x) != 0 {
        acc = acc
            .wrapping_add(pair(w[13] ^ K[13], w[14] ^ K[14], seed))
            .wrapping_add(pair(w[15] ^ K[15], w[16] ^ K[16], seed))
            .wrapping_add(pair(w[17] ^ K[17], w[18] ^ K[18], seed))
            .wrapping_add(pair(w[19] ^ K[19], w[20] ^ K[20], seed));
    }
    finish(acc)
}
