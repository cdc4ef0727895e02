//! The leaf rule copies: each rule's mask and value on just the key words some rule's mask
//! touches (interleaved), and its port ranges, so that a leaf scan compares a few words
//! per rule and stays in a few cache lines.

use super::tree::Forest;
use crate::rule::Rule;
use flowpath_packet::WordSet;

/// `rules`' masks and values on `words`, interleaved (2 × words a rule), and their port
/// ranges (lo, hi, lo, hi).
pub(super) fn copy_rules(rules: &[Rule], words: &WordSet) -> (Vec<u64>, Vec<[u16; 4]>) {
    let mut compact = Vec::with_capacity(rules.len() * 2 * words.len());
    let mut ports = Vec::with_capacity(rules.len());
    for r in rules {
        let m = &r.spec.matches;
        for &w in words.indices() {
            compact.push(m.mask.words[w as usize]);
            compact.push(m.value.words[w as usize]);
        }
        let [s, d] = m.ports;
        ports.push([s.lo, s.hi, d.lo, d.hi]);
    }
    (compact, ports)
}

impl Forest {
    /// Does rule `i` match the key whose used words are `kw`?
    #[inline(always)]
    pub(super) fn matches(
        &self,
        i: u32,
        kw: &[u64; flowpath_packet::KEY_WORDS],
        ports: [u16; 2],
    ) -> bool {
        let base = i as usize * self.stride;
        let mv = &self.compact[base..base + self.stride];
        let mut diff = 0u64;
        for j in 0..self.stride / 2 {
            diff |= (kw[j] & mv[2 * j]) ^ mv[2 * j + 1];
        }
        if diff != 0 {
            return false;
        }
        if !self.any_ranges {
            return true;
        }
        let p = self.ports[i as usize];
        p[0] <= ports[0] && ports[0] <= p[1] && p[2] <= ports[1] && ports[1] <= p[3]
    }
}
