//! Prefix tries over the address fields, as OVS's prefix tracking: which prefix
//! lengths some rule puts on a field at a key's value, so that tuple-space search can skip
//! a subtable no rule of which can match and un-wildcard only the bits that decide that.
//!
//! Without them a subtable that was probed and missed puts its whole mask into the
//! megaflow: with a rule on `nw_src=10.10.1.254` every other source address got a megaflow
//! of its own (`nw_src=10.1.0.7`, one per host). With them the megaflow keeps only the bits
//! up to where the key leaves every rule's prefix (`nw_src=10.0.0.0/13`, rounded up to
//! `/16` as the other backends round). Hand-written: a binary trie of at most a few nodes per rule
//! bit, walked once per field per slow-path lookup; no crate offers it over this key.

use crate::rule::prefix_mask;
use crate::wildcards::{leading_ones, read, ADDR_STEP, PORT_STEP};
use flowpath_packet::{Field, FlowKey};

/// The fields that get a trie: source and destination addresses (IPv4 addresses are the
/// top 32 bits of these 16-byte fields), as OVS's default `prefixes`. The ports (where
/// tuple-space search stores ranges as prefix blocks) get no trie: on the ClassBench 1k
/// sets tries there give more megaflows and masks, not fewer (acl2_1k: 819,643 megaflows
/// over 105 masks against 802,362 over 65), and dearer misses.
pub(crate) const TRIE_FIELDS: [Field; 2] = [Field::Ipv6Src, Field::Ipv6Dst];

/// The multiple a megaflow's prefix length on `field` is rounded up to.
fn step_of(field: Field) -> u32 {
    match field {
        Field::TpSrc | Field::TpDst => PORT_STEP,
        _ => ADDR_STEP,
    }
}

/// One field's trie: every (value, length) prefix some stored entry has on the field.
///
/// Four bits a level (a 32-bit address is 8 dependent loads, not 32: a miss walks up to
/// four of these). A node at depth `d` (a multiple of 4) covers depths `d..d + 3` inside
/// it, at 15 positions numbered heap-style: position `2^j - 1 + b` is depth `d + j` where
/// the key's next `j` bits are `b`; its 16 children are the nodes at depth `d + 4`.
#[derive(Clone, Debug)]
pub(crate) struct PrefixTrie {
    field: Field,
    /// `nodes[0]` is the root (depth 0); a child index of 0 means none.
    nodes: Vec<TrieNode>,
    /// Every key bit except the field's top [`PrefixTrie::step`] bits (the least a
    /// ruling-out on this field puts into a megaflow).
    outside_shortest: FlowKey,
}

#[derive(Clone, Copy, Debug, Default)]
struct TrieNode {
    child: [u32; 16],
    /// Bit `p`: a stored prefix ends at position `p` (its length is that depth).
    ends: u16,
    /// Bit `p`: some stored prefix passes through or ends at position `p` (0 always).
    path: u16,
    /// Bit `x`: a stored prefix ends at depth `d + 4` on nibble `x`, where no child is: the
    /// child it would have had holds nothing else (most stored prefixes end so: a /32
    /// address's last node), so it is not made.
    leaf: u16,
}

/// The positions of depths `d + 1`, `d + 2`, `d + 3` on nibble `x`'s way through a node.
#[inline(always)]
fn positions(x: usize) -> [usize; 3] {
    [1 + (x >> 3), 3 + (x >> 2), 7 + (x >> 1)]
}

/// What a key's walk down one trie found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TrieWalk {
    /// Bit `l - 1` set: a stored prefix of length `l` matches the key.
    pub lens: u128,
    /// How many leading bits of the key some stored prefix's path follows: any key that
    /// agrees with it on `depth + 1` bits matches no stored prefix longer than `depth`.
    pub depth: u32,
}

impl TrieWalk {
    /// Whether no stored prefix of length `plen` (1..=width) matches the key, and if so
    /// how many of the key's leading bits keep that true for every key agreeing on them.
    #[inline]
    pub(crate) fn rules_out(&self, plen: u32) -> Option<u32> {
        if self.lens >> (plen - 1) & 1 == 1 {
            return None;
        }
        // Shorter than the path: the node at depth `plen` is the same for every key
        // agreeing on `plen` bits. Longer: they all leave the trie at `depth + 1`.
        Some(plen.min(self.depth + 1))
    }
}

impl PrefixTrie {
    pub(crate) fn new(field: Field) -> PrefixTrie {
        debug_assert!(field.bits() % 4 == 0, "whole nibbles");
        PrefixTrie {
            field,
            nodes: vec![TrieNode {
                path: 1,
                ..TrieNode::default()
            }],
            outside_shortest: {
                let mut k = FlowKey::ZERO;
                k.words = [u64::MAX; flowpath_packet::KEY_WORDS];
                k.set(
                    field,
                    field.full_mask() & !prefix_mask(field.bits(), step_of(field)),
                );
                k
            },
        }
    }

    /// Every key bit except the field's top `step` bits.
    #[inline]
    pub(crate) fn outside_shortest(&self) -> &FlowKey {
        &self.outside_shortest
    }

    /// The 4 bits of `v` (a `w`-bit field) from depth `d`.
    #[inline(always)]
    fn nibble(v: u128, w: u32, d: u32) -> usize {
        (v >> (w - d - 4) & 0xf) as usize
    }

    pub(crate) fn field(&self) -> Field {
        self.field
    }

    /// `bits` rounded up to the multiple of the field's step (a power of two) that
    /// megaflow prefix lengths on it are rounded to.
    #[inline]
    pub(crate) fn round_up(&self, bits: u32) -> u32 {
        let step = step_of(self.field);
        debug_assert!(step.is_power_of_two());
        (bits + step - 1) & !(step - 1)
    }

    /// The prefix length `mask` puts on this field: `Some(len)` for a non-empty prefix
    /// mask (the only kind a trie can rule out), `None` otherwise.
    pub(crate) fn prefix_len(&self, mask: &FlowKey) -> Option<u32> {
        let w = self.field.bits();
        let m = read(mask, self.field);
        let len = leading_ones(m, w);
        (len > 0 && m == prefix_mask(w, len)).then_some(len)
    }

    /// Store the prefix of length `len` of `value`'s field.
    pub(crate) fn insert(&mut self, value: &FlowKey, len: u32) {
        let w = self.field.bits();
        let v = read(value, self.field);
        let (mut n, mut d) = (0usize, 0u32);
        while d + 4 <= len {
            let x = Self::nibble(v, w, d);
            for p in positions(x) {
                self.nodes[n].path |= 1 << p;
            }
            if d + 4 == len && self.nodes[n].child[x] == 0 {
                self.nodes[n].leaf |= 1 << x;
                return;
            }
            n = match self.nodes[n].child[x] {
                0 => {
                    // A leaf on this nibble becomes the new child's own end.
                    let ends = self.nodes[n].leaf >> x & 1;
                    self.nodes[n].leaf &= !(1 << x);
                    self.nodes.push(TrieNode {
                        path: 1,
                        ends,
                        ..TrieNode::default()
                    });
                    let c = self.nodes.len() - 1;
                    self.nodes[n].child[x] = c as u32;
                    c
                }
                c => c as usize,
            };
            d += 4;
        }
        let r = (len - d) as usize; // 0..=3 more bits inside node n
        let end = if r == 0 {
            0
        } else {
            let ps = positions(Self::nibble(v, w, d));
            for &p in &ps[..r] {
                self.nodes[n].path |= 1 << p;
            }
            ps[r - 1]
        };
        self.nodes[n].ends |= 1 << end;
    }

    /// Walk `key`'s field down the trie.
    pub(crate) fn walk(&self, key: &FlowKey) -> TrieWalk {
        let w = self.field.bits();
        let v = read(key, self.field);
        let (mut lens, mut n, mut d) = (0u128, 0usize, 0u32);
        loop {
            let node = &self.nodes[n];
            if d == w {
                // Only the node itself: a prefix of the whole width.
                lens |= ((node.ends & 1) as u128) << (w - 1);
                return TrieWalk { lens, depth: w };
            }
            let x = Self::nibble(v, w, d);
            let [p1, p2, p3] = positions(x);
            // Lengths d..d+3 that end on the key's way (bit j: length d + j).
            let ends = (node.ends & 1)
                | (node.ends >> p1 & 1) << 1
                | (node.ends >> p2 & 1) << 2
                | (node.ends >> p3 & 1) << 3;
            // Length l is bit l - 1; length 0 (the root itself) drops out.
            lens |= ((ends as u128) << d) >> 1;
            let c = node.child[x];
            if c == 0 && node.leaf >> x & 1 == 1 {
                // A prefix of length d + 4 ends on the key's way, and nothing goes deeper.
                return TrieWalk {
                    lens: lens | 1 << (d + 3),
                    depth: d + 4,
                };
            }
            if c == 0 {
                // How far inside this node the key's way goes.
                let inside = if node.path >> p1 & 1 == 0 {
                    0
                } else if node.path >> p2 & 1 == 0 {
                    1
                } else if node.path >> p3 & 1 == 0 {
                    2
                } else {
                    3
                };
                return TrieWalk {
                    lens,
                    depth: d + inside,
                };
            }
            n = c as usize;
            d += 4;
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<TrieNode>()
    }

    /// Give back what the node list reserved beyond its nodes.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.nodes.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Match;
    use proptest::prelude::*;

    fn src(addr: u32) -> FlowKey {
        Match::any()
            .prefix(Field::Ipv6Src, (addr as u128) << 96, 32)
            .value
    }

    /// The reference: does a stored prefix of length `plen` match `key`?
    fn matches_len(stored: &[(u32, u32)], key: u32, plen: u32) -> bool {
        let m = |l: u32| if l == 0 { 0 } else { u32::MAX << (32 - l) };
        stored
            .iter()
            .any(|&(v, l)| l == plen && (v ^ key) & m(l) == 0)
    }

    #[test]
    fn the_lab_rule_rules_out_other_sources_with_twelve_bits() {
        let mut t = PrefixTrie::new(Field::Ipv6Src);
        t.insert(&src(0x0a0a_01fe), 32); // 10.10.1.254/32
        let walk = t.walk(&src(0x0a01_0007)); // 10.1.0.7
                                              // 10.1 and 10.10 share their first 12 bits: the 13th tells them apart.
        assert_eq!(walk.depth, 12);
        assert_eq!(walk.rules_out(32), Some(13));
        assert_eq!(t.walk(&src(0x0a0a_01fe)).rules_out(32), None);
    }

    /// Port-width keys: a 16-bit field, where a prefix can be the whole width.
    fn port(p: u16) -> FlowKey {
        let mut k = FlowKey::ZERO;
        k.set(Field::TpSrc, p as u128);
        k
    }

    proptest! {
        /// The walk says exactly what a scan of the stored prefixes says: which lengths
        /// match, and the deepest bit any stored prefix follows the key to.
        #[test]
        fn walk_equals_a_scan_of_the_prefixes(
            stored in prop::collection::vec((any::<u16>(), 1u32..=16), 1..30),
            key in any::<u16>(),
        ) {
            let key = if key % 3 == 0 { stored[key as usize % stored.len()].0 ^ (key >> 9) } else { key };
            let mut t = PrefixTrie::new(Field::TpSrc);
            for &(v, l) in &stored {
                t.insert(&port(v), l);
            }
            let walk = t.walk(&port(key));
            let m = |l: u32| if l == 0 { 0 } else { u16::MAX << (16 - l) };
            let mut lens = 0u128;
            let mut depth = 0;
            for &(v, l) in &stored {
                if (v ^ key) & m(l) == 0 {
                    lens |= 1 << (l - 1);
                }
                depth = depth.max(((v ^ key).leading_zeros()).min(l));
            }
            prop_assert_eq!(walk.lens, lens);
            prop_assert_eq!(walk.depth, depth);
        }

        /// Soundness: whenever the walk rules a length out, every key agreeing with the
        /// walked one on the bits it names matches no stored prefix of that length.
        #[test]
        fn ruling_out_holds_for_every_key_agreeing_on_the_bits(
            stored in prop::collection::vec((any::<u32>(), 1u32..=32), 1..20),
            key in any::<u32>(),
            others in prop::collection::vec(any::<u32>(), 16),
            plen in 1u32..=32,
        ) {
            // Keys near the stored prefixes too, not only random ones.
            let key = if key % 2 == 0 { stored[key as usize % stored.len()].0 ^ (key >> 8) } else { key };
            let mut t = PrefixTrie::new(Field::Ipv6Src);
            for &(v, l) in &stored {
                t.insert(&src(v), l);
            }
            let walk = t.walk(&src(key));
            prop_assert_eq!(walk.rules_out(plen).is_none(), matches_len(&stored, key, plen));
            if let Some(bits) = walk.rules_out(plen) {
                prop_assert!(bits <= plen);
                let keep = u32::MAX << (32 - bits);
                for o in others {
                    let other = (key & keep) | (o & !keep);
                    prop_assert!(!matches_len(&stored, other, plen));
                }
            }
        }
    }
}
