//! `FlowKey`: the fixed-layout, maskable, hashable summary of a parsed packet.
//!
//! The key is 21 machine words (168 bytes). Every field is stored as a byte string in
//! network byte order at a fixed offset, so a mask is simply another `FlowKey`, masking is
//! a word-wise AND and equality under a mask is a word-wise compare. Fields that are
//! usually matched together share words, so that a typical IPv4 5-tuple mask touches only
//! four of the thirteen words (see [`WordSet`]).
//!
//! Layout (byte offsets):
//!
//! | bytes   | field                                                       |
//! |---------|-------------------------------------------------------------|
//! | 0..4    | `in_port`                                                   |
//! | 4..6    | `eth_type` (the innermost ethertype, after VLAN tags)       |
//! | 6..8    | `vlan_tci` outer tag; bit 0x1000 set means "tag present"    |
//! | 8..14   | `eth_dst`                                                   |
//! | 14..16  | `vlan_inner_tci` second tag (802.1ad QinQ), same convention |
//! | 16..22  | `eth_src`                                                   |
//! | 22..24  | `tcp_flags` (12 bits)                                       |
//! | 24      | `nw_proto` (ARP: low byte of the opcode)                    |
//! | 25      | `nw_tos` (DSCP << 2 \| ECN; IPv6 traffic class)             |
//! | 26      | `nw_ttl` (IPv6 hop limit)                                   |
//! | 27      | `nw_frag` ([`FRAG_ANY`], [`FRAG_LATER`])                    |
//! | 28..30  | `tp_src` (ICMP/ICMPv6: type)                                |
//! | 30..32  | `tp_dst` (ICMP/ICMPv6: code)                                |
//! | 32..48  | `ip_src`: IPv6, or IPv4 / ARP SPA in bytes 32..36           |
//! | 48..64  | `ip_dst`: IPv6, or IPv4 / ARP TPA in bytes 48..52           |
//! | 64..68  | `tun_id` (VXLAN VNI, 24 bits)                               |
//! | 68      | `tun_flags` ([`TUN_PRESENT`], [`TUN_IPV6`])                 |
//! | 69..72  | `metadata` (OpenFlow's pipeline register, low 24 bits)      |
//! | 72..88  | `tun_src` outer source (IPv4 in the first 4 bytes)          |
//! | 88..104 | `tun_dst` outer destination                                 |
//! | 104..108| `recirc_id` (0: first pass; see [`crate::ct`])              |
//! | 108     | `ct_state` ([`crate::ct::state`] flags)                     |
//! | 109     | `ct_nw_proto` (the connection's original-direction protocol)|
//! | 110..112| `ct_zone`                                                   |
//! | 112..116| `ct_mark`                                                   |
//! | 116..118| `ct_tp_src` original direction                              |
//! | 118..120| `ct_tp_dst` original direction                              |
//! | 120..136| `ct_label` (128 bits)                                       |
//! | 136..152| `ct_ipv6_src`, or `ct_nw_src` in bytes 136..140             |
//! | 152..168| `ct_ipv6_dst`, or `ct_nw_dst` in bytes 152..156             |
//!
//! The C side of the XDP tier mirrors the first 104 bytes; keep the two in step. Words
//! 13..21 (recirculation and connection tracking) are zero in every key the parser builds
//! and are never offered to the XDP tier.
//!
//! Here: the layout, the key's words and the word-wise operations on them, and [`WordSet`].
//! [`Field`] and the accessors by field are in `field`, hashing in `hash`, and the forms
//! of a subtable's mask in `mask`.

mod field;
mod hash;
mod mask;

pub use field::Field;
pub use hash::wide_hash;
pub use mask::{MaskLanes, SubtableMask};

use bytemuck::{Pod, Zeroable};

/// Number of 64-bit words in a [`FlowKey`].
pub const KEY_WORDS: usize = 21;
/// Size of a [`FlowKey`] in bytes.
pub const KEY_BYTES: usize = KEY_WORDS * 8;
/// The words a *narrow* key may have non-zero: in_port, Ethernet and VLAN fields (0..3), the
/// IP and L4 fields (3), the IPv4 source (4) and destination (6). The others (5 and 7: the low halves of IPv6 addresses;
/// 8..13: tunnel and metadata; 13..21: recirculation and connection tracking) are zero in every IPv4 key without a tunnel, so a cache can
/// keep and compare only these six for such keys (see [`FlowKey::is_narrow`]).
pub const NARROW_WORDS: [usize; 6] = [0, 1, 2, 3, 4, 6];

/// `vlan_tci` bit meaning "a tag is present" (OVS's convention: the CFI/DEI bit).
pub const VLAN_PRESENT: u16 = 0x1000;
/// VLAN id bits of a TCI.
pub const VLAN_VID_MASK: u16 = 0x0fff;
/// VLAN priority bits of a TCI.
pub const VLAN_PCP_MASK: u16 = 0xe000;

/// `nw_frag`: the packet is a fragment (first or later).
pub const FRAG_ANY: u8 = 0x01;
/// `nw_frag`: the packet is a non-first fragment (no L4 header).
pub const FRAG_LATER: u8 = 0x02;

/// `tun_flags`: the packet arrived VXLAN-encapsulated; tunnel fields are valid.
pub const TUN_PRESENT: u8 = 0x01;
/// `tun_flags`: the outer header was IPv6.
pub const TUN_IPV6: u8 = 0x02;

/// Ethertypes the parser understands.
pub mod ethertype {
    /// What an 802.3 frame (a length, below 0x0600, where the type would be) is keyed as:
    /// OVS's `FLOW_DL_TYPE_NONE`, so `dl_type=0x05ff` matches every such frame.
    pub const NONE: u16 = 0x05ff;
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

/// IP protocol numbers the parser understands.
pub mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ICMPV6: u8 = 58;
    pub const NONE: u8 = 59;
    pub const DSTOPTS: u8 = 60;
}

/// A parsed packet's flow key; also used as a mask (1-bits = "this bit matters").
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(8))]
pub struct FlowKey {
    pub words: [u64; KEY_WORDS],
}

// Equality is on the hot path (exact-match cache hits): compare all words branch-free and
// inline, rather than the derived comparison that calls out to memcmp.
impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &FlowKey) -> bool {
        let mut diff = 0u64;
        for i in 0..KEY_WORDS {
            diff |= self.words[i] ^ other.words[i];
        }
        diff == 0
    }
}

impl Eq for FlowKey {}

impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.words.hash(state);
    }
}

impl Default for FlowKey {
    fn default() -> Self {
        Self::ZERO
    }
}

impl FlowKey {
    pub const ZERO: FlowKey = FlowKey {
        words: [0; KEY_WORDS],
    };
    pub const ONES: FlowKey = FlowKey {
        words: [u64::MAX; KEY_WORDS],
    };

    #[inline(always)]
    pub fn bytes(&self) -> &[u8; KEY_BYTES] {
        bytemuck::cast_ref(&self.words)
    }

    #[inline(always)]
    pub fn bytes_mut(&mut self) -> &mut [u8; KEY_BYTES] {
        bytemuck::cast_mut(&mut self.words)
    }

    #[inline(always)]
    pub fn and(&self, mask: &FlowKey) -> FlowKey {
        let mut out = FlowKey::ZERO;
        for i in 0..KEY_WORDS {
            out.words[i] = self.words[i] & mask.words[i];
        }
        out
    }

    #[inline(always)]
    pub fn or_assign(&mut self, other: &FlowKey) {
        for i in 0..KEY_WORDS {
            self.words[i] |= other.words[i];
        }
    }

    /// Is every 1-bit of `self` also set in `other`? (All words folded, no early exit: the
    /// compiler makes it a few vector and-nots, cheaper than a branch per word in the TSS
    /// lookup's per-subtable test.)
    #[inline]
    pub fn is_subset_of(&self, other: &FlowKey) -> bool {
        let mut extra = 0u64;
        for i in 0..KEY_WORDS {
            extra |= self.words[i] & !other.words[i];
        }
        extra == 0
    }

    /// `(self & mask) == value`, where `value` is already masked.
    #[inline(always)]
    pub fn matches(&self, mask: &FlowKey, value: &FlowKey) -> bool {
        let mut diff = 0u64;
        for i in 0..KEY_WORDS {
            diff |= (self.words[i] & mask.words[i]) ^ value.words[i];
        }
        diff == 0
    }

    /// Whether every word but the [`NARROW_WORDS`] is zero (every IPv4 key without a
    /// tunnel): then those six words are the whole key.
    #[inline(always)]
    pub fn is_narrow(&self) -> bool {
        let w = &self.words;
        w[5] | w[7..].iter().fold(0, |d, w| d | w) == 0
    }
}

/// The indices of the words a mask actually uses, so that masked hashing and comparing
/// touch only those (the idea of OVS's miniflow, in its simplest form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WordSet {
    // Invariant (the unchecked indexing in `masked_hash` relies on it): `idx[..len]` are
    // word indices below KEY_WORDS. Private, so `of_mask` is the only way to make one.
    idx: [u8; KEY_WORDS],
    len: u8,
}

impl WordSet {
    /// The indices of the words in use, ascending.
    #[inline(always)]
    pub fn indices(&self) -> &[u8] {
        // SAFETY: len <= KEY_WORDS by construction.
        unsafe { self.idx.get_unchecked(..self.len as usize) }
    }

    /// How many words are in use.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// No word in use (the mask of a match-everything rule).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn of_mask(mask: &FlowKey) -> WordSet {
        let mut s = WordSet {
            idx: [0; KEY_WORDS],
            len: 0,
        };
        for (i, w) in mask.words.iter().enumerate() {
            if *w != 0 {
                s.idx[s.len as usize] = i as u8;
                s.len += 1;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::hash::{finish, fold_mul, K};
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn fields_fit_and_do_not_overlap_except_ip_views() {
        let mut seen = [None::<Field>; KEY_BYTES];
        for f in Field::ALL {
            let (off, len) = f.range();
            assert!(off + len <= KEY_BYTES, "{f} out of range");
            if matches!(
                f,
                Field::Ipv4Src | Field::Ipv4Dst | Field::CtNwSrc | Field::CtNwDst
            ) {
                continue;
            }
            for (b, slot) in seen.iter_mut().enumerate().skip(off).take(len) {
                assert!(slot.is_none(), "{f} overlaps {:?} at byte {b}", slot);
                *slot = Some(f);
            }
        }
    }

    #[test]
    fn get_set_round_trip_big_endian() {
        let mut k = FlowKey::ZERO;
        k.set(Field::EthType, 0x86dd);
        assert_eq!(k.bytes()[4..6], [0x86, 0xdd]);
        k.set(Field::Ipv4Dst, 0x0a00_0001);
        assert_eq!(k.ipv4_dst(), Ipv4Addr::new(10, 0, 0, 1));
        k.set(Field::Ipv6Src, u128::MAX);
        assert_eq!(k.get(Field::Ipv4Src), 0xffff_ffff);
        k.set(Field::TunId, 0x0123_4567);
        assert_eq!(k.get(Field::TunId), 0x0123_4567);
    }

    #[test]
    fn masked_hash_ignores_bits_outside_mask() {
        let mut mask = FlowKey::ZERO;
        mask.set_all(Field::Ipv4Dst);
        mask.set_all(Field::TpDst);
        let set = WordSet::of_mask(&mask);
        assert_eq!(set.len(), 2);
        let mut a = FlowKey::ZERO;
        a.set(Field::Ipv4Dst, 0x0a000001);
        a.set(Field::TpDst, 80);
        let mut b = a;
        b.set(Field::Ipv4Src, 0x01020304);
        b.set(Field::InPort, 7);
        assert_eq!(a.masked_hash(&mask, &set, 1), b.masked_hash(&mask, &set, 1));
        assert!(b.matches_words(&mask, &a.and(&mask), &set));
        b.set(Field::TpDst, 81);
        assert_ne!(a.masked_hash(&mask, &set, 1), b.masked_hash(&mask, &set, 1));
        assert!(!b.matches_words(&mask, &a.and(&mask), &set));
    }

    /// The unrolled masked hash equals the plain loop over word pairs for every word count
    /// (0..=21 words in use), and `matches_words` equals comparing all 21 masked words.
    #[test]
    fn masked_hash_and_match_equal_the_plain_loops() {
        use proptest::prelude::*;
        let reference = |k: &FlowKey, m: &FlowKey, set: &WordSet, seed: u64| {
            let idx = set.indices();
            if idx.is_empty() {
                return finish(seed);
            }
            let mut acc = 0u64;
            let mut i = 0;
            while i < idx.len() {
                let a = idx[i] as usize;
                let x = (k.words[a] & m.words[a]) ^ K[a];
                let y = match idx.get(i + 1) {
                    Some(&b) => (k.words[b as usize] & m.words[b as usize]) ^ K[b as usize],
                    None => K[KEY_WORDS],
                };
                acc = acc.wrapping_add(fold_mul(x ^ seed, y));
                i += 2;
            }
            finish(acc)
        };
        let words = || proptest::array::uniform21(any::<u64>());
        proptest!(|(k in words(), m in words(), v in words(), used in 0u32..1 << 21,
                    seed in any::<u64>())| {
            let mut mask = FlowKey::ZERO;
            for (i, (w, r)) in mask.words.iter_mut().zip(m).enumerate() {
                if used & (1 << i) != 0 {
                    *w = r | 1;
                }
            }
            let set = WordSet::of_mask(&mask);
            prop_assert_eq!(set.len(), used.count_ones() as usize);
            let key = FlowKey { words: k };
            prop_assert_eq!(key.masked_hash(&mask, &set, seed), reference(&key, &mask, &set, seed));
            let mut value = key.and(&mask);
            prop_assert!(key.matches_words(&mask, &value, &set));
            let w = (v[0] % KEY_WORDS as u64) as usize;
            value.words[w] ^= v[1] & mask.words[w];
            let all_equal = (0..KEY_WORDS).all(|i| key.words[i] & mask.words[i] == value.words[i]);
            prop_assert_eq!(key.matches_words(&mask, &value, &set), all_equal);
            // The packed rows a subtable keeps: the same answers as the whole values, and
            // rows as long as the lanes (or the words) say.
            let search = SubtableMask::new(mask);
            prop_assert_eq!(search.row_len(), if (1..=4).contains(&set.len()) { 4 } else { set.len() });
            let mut row = vec![0u64; search.row_len()];
            search.write_row(&value, &mut row);
            prop_assert_eq!(search.row_matches(&key, &row), all_equal);
            prop_assert_eq!(search.matches(&key, &value), all_equal);
            search.write_row(&key, &mut row);
            prop_assert!(search.row_matches(&key, &row));
            // The four-lane form, for masks of one to four words: the same matches, and
            // a hash that sees only the masked bits.
            let lanes = MaskLanes::of(&mask, &set);
            prop_assert_eq!(lanes.is_some(), (1..=4).contains(&set.len()));
            if let Some(l) = lanes {
                prop_assert_eq!(l.matches(&key, &value), all_equal);
                let masked = key.and(&mask);
                prop_assert!(l.matches(&key, &masked));
                // A change in each word of the mask in turn is seen.
                for &a in set.indices() {
                    let mut other = masked;
                    other.words[a as usize] ^= mask.words[a as usize] & (v[3] | 1 << 63 | 1);
                    prop_assert!(!l.matches(&key, &other), "word {} unseen", a);
                }
                prop_assert_eq!(l.hash(&key, seed), l.hash(&masked, seed));
                let mut outside = key;
                outside.words[w] ^= v[2] & !mask.words[w];
                prop_assert_eq!(l.hash(&outside, seed), l.hash(&key, seed));
                prop_assert!(l.matches(&outside, &masked));
            }
        });
    }

    /// The four-lane hash tells apart keys that differ inside the mask (a spot check of
    /// its spread: 4,096 keys differing in one masked word, no collision).
    #[test]
    fn mask_lanes_hash_spreads() {
        let mut mask = FlowKey::ZERO;
        mask.set(Field::Ipv4Src, 0xffff_ffff);
        mask.set(Field::TpDst, 0xffff);
        let lanes = MaskLanes::of(&mask, &WordSet::of_mask(&mask)).unwrap();
        let mut seen = std::collections::HashSet::new();
        for i in 0..4096u128 {
            let mut k = FlowKey::ZERO;
            k.set(Field::Ipv4Src, 0x0a00_0000 + i);
            assert!(seen.insert(lanes.hash(&k, 7)), "collision at {i}");
        }
    }

    #[test]
    fn full_hash_spreads_single_bit_changes() {
        let base = FlowKey::ZERO;
        let h0 = base.hash(3);
        let mut seen = std::collections::HashSet::new();
        for byte in 0..KEY_BYTES {
            let mut k = base;
            k.bytes_mut()[byte] = 1;
            let h = k.hash(3);
            assert_ne!(h, h0, "byte {byte} does not change the hash");
            seen.insert(h);
        }
        assert_eq!(seen.len(), KEY_BYTES);
    }

    /// Keys a switch sees in bulk (a source address and a port counting up) spread over a
    /// table's buckets as random keys would, in each of the three hashes, and which of them
    /// share a bucket depends on the seed.
    #[test]
    fn hashes_spread_counting_keys_and_the_seed_decides_collisions() {
        let key = |i: u32| {
            let mut k = FlowKey::ZERO;
            k.set(Field::InPort, 1);
            k.set(Field::EthType, 0x0800);
            k.set(Field::Ipv4Src, u128::from(0x0a00_0000 | (i & 0x3ff)));
            k.set(Field::Ipv4Dst, 0x0a01_0001);
            k.set(Field::TpSrc, u128::from(1024 + (i >> 10)));
            k
        };
        let mut mask = FlowKey::ZERO;
        mask.set_all(Field::Ipv4Src);
        mask.set_all(Field::TpSrc);
        mask.set_all(Field::TpDst);
        let set = WordSet::of_mask(&mask);
        let lanes = SubtableMask::new(mask);
        let (n, buckets) = (8192u32, 1024usize);
        type Hash<'a> = Box<dyn Fn(&FlowKey, u64) -> u32 + 'a>;
        let hashes: [(&str, Hash); 3] = [
            ("key", Box::new(|k: &FlowKey, s| k.hash(s))),
            (
                "masked",
                Box::new(|k: &FlowKey, s| k.masked_hash(&mask, &set, s)),
            ),
            ("lanes", Box::new(|k: &FlowKey, s| lanes.hash(k, s))),
        ];
        for (name, h) in &hashes {
            let mut shared = [0usize; 2];
            for (j, seed) in [0x5eed_u64, 0x9e37_79b9_7f4a_7c15].into_iter().enumerate() {
                let mut load = vec![0u32; buckets];
                for i in 0..n {
                    load[h(&key(i), seed) as usize % buckets] += 1;
                }
                // Eight keys a bucket on average; random keys put ~20 in the fullest.
                let max = *load.iter().max().unwrap();
                assert!(
                    max <= 26,
                    "{name} hash, seed {seed:#x}: {max} keys in one bucket"
                );
                // Pairs of keys 0..256 that share a bucket under seed 0x5eed, checked again
                // under the other seed.
                for a in 0..256 {
                    for b in a + 1..256 {
                        let [x, y] = [a, b].map(|i| h(&key(i), 0x5eed) as usize % buckets);
                        if x == y {
                            let [x, y] = [a, b].map(|i| h(&key(i), seed) as usize % buckets);
                            shared[j] += usize::from(x == y);
                        }
                    }
                }
            }
            assert!(
                shared[0] > 0,
                "{name} hash: no pair shares a bucket (the check is void)"
            );
            assert!(
                shared[1] * 4 <= shared[0],
                "{name} hash: {} of {} colliding pairs still collide under another seed",
                shared[1],
                shared[0]
            );
        }
    }

    /// A key without tunnel words hashes alike both ways.
    #[test]
    fn hash_no_tunnel_is_hash() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in 0..1000u64 {
            let mut k = FlowKey::ZERO;
            for i in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if (n >> i) & 1 == 1 || i == 0 {
                    k.words[i] = x;
                }
            }
            assert_eq!(k.hash_no_tunnel(n), k.hash(n));
        }
    }

    /// The zero-pair shortcuts give exactly what multiplying every pair gives.
    #[test]
    fn zero_pair_shortcuts_equal_the_full_sum() {
        // The sum over the groups of pairs, a group whose words are all zero adding zero.
        fn full(w: &[u64; KEY_WORDS], seed: u64) -> u32 {
            let groups: [&[(usize, usize)]; 4] = [
                &[(0, 1), (2, 3), (4, 6)],
                &[(5, 7)],
                &[(8, 9), (10, 11), (12, KEY_WORDS)],
                &[(13, 14), (15, 16), (17, 18), (19, 20)],
            ];
            let word = |i: usize| w.get(i).copied().unwrap_or(0) ^ K[i];
            let mut acc = 0u64;
            for (g, pairs) in groups.iter().enumerate() {
                if g > 0
                    && pairs
                        .iter()
                        .all(|&(a, b)| w[a] == 0 && w.get(b).is_none_or(|&x| x == 0))
                {
                    continue;
                }
                for &(a, b) in *pairs {
                    acc = acc.wrapping_add(fold_mul(word(a) ^ seed, word(b)));
                }
            }
            (acc ^ (acc >> 32)) as u32
        }
        let mut x = 0x1234_5678_9abc_def0u64;
        for n in 0..2000u64 {
            let mut k = FlowKey::ZERO;
            for i in 0..KEY_WORDS {
                // xorshift; leave some words zero in each pattern
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if (n >> (i % 6)) & 1 == 1 {
                    k.words[i] = x;
                }
            }
            assert_eq!(k.hash(n), full(&k.words, n), "key {:?}", k.words);
        }
    }
}
