//! Walking a key down the trees: the leaf it falls in (with the cuts on the way as
//! megaflow bits), and the best live rule over every tree that can still win.

use super::tree::{low_mask, Forest, Tree};
use crate::rule::{key_ports, prefix_mask};
use crate::wildcards::or_into;
use flowpath_packet::{FlowKey, KEY_BYTES};

impl Forest {
    /// The leaf `key` falls in; with `wc`, un-wildcarding the bits each cut looked at.
    #[inline(always)]
    pub(super) fn leaf<'t>(
        &self,
        t: &'t Tree,
        b: &[u8; KEY_BYTES],
        mut wc: Option<&mut FlowKey>,
    ) -> &'t [u32] {
        let mut n = t.nodes[0];
        while n.bits != 0 {
            let d = &self.dims[n.dim as usize];
            let v = d.read(b);
            let mut child = (v >> n.shift) as usize & ((1 << n.bits) - 1);
            // Bits the region now fixes (a prefix of the field).
            let w = d.w as u32;
            let mut fixed = w - n.shift as u32;
            if n.skip != 0 {
                let skip = n.skip as u32;
                let diff = ((v >> (n.shift + n.bits)) & low_mask(skip)) ^ t.skips[n.n as usize];
                if diff != 0 {
                    child = 1 << n.bits;
                    // Down to the first bit that differs from every rule below.
                    let above = w - n.shift as u32 - n.bits as u32 - skip;
                    fixed = above + (diff << (128 - skip)).leading_zeros() + 1;
                }
            }
            if let Some(wc) = wc.as_deref_mut() {
                or_into(wc, d.field, prefix_mask(w, fixed));
            }
            n = t.nodes[n.a as usize + child];
        }
        &t.leaves[n.a as usize..(n.a + n.n) as usize]
    }

    /// The best rule for `key` in the trees that still exists (per `remap`) and beats
    /// `bound`: (forest index, order key).
    #[inline]
    pub(super) fn best(
        &self,
        key: &FlowKey,
        remap: Option<&[u32]>,
        mut bound: u64,
    ) -> Option<(u32, u64)> {
        let mut kw = [0u64; flowpath_packet::KEY_WORDS];
        for (j, &w) in self.words.indices().iter().enumerate() {
            kw[j] = key.words[w as usize];
        }
        let ports = key_ports(key);
        let b = key.bytes();
        let mut best = None;
        for t in &self.trees {
            if t.best_key >= bound {
                break;
            }
            for &i in self.leaf(t, b, None) {
                let k = self.order[i as usize];
                if k >= bound {
                    break;
                }
                if self.matches(i, &kw, ports) && live(remap, i) {
                    best = Some((i, k));
                    bound = k;
                    break;
                }
            }
        }
        best
    }
}

/// Forest rules deleted since the forest was built map to this.
pub(super) const DELETED: u32 = u32::MAX;

#[inline(always)]
pub(super) fn live(remap: Option<&[u32]>, i: u32) -> bool {
    remap.is_none_or(|m| m[i as usize] != DELETED)
}
