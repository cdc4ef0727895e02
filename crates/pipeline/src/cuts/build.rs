//! Cutting a rule set into trees: the fields to cut on, the split of rules into groups by
//! the addresses they pin, and per node the cut that leaves the smallest largest child
//! within the space budget.

use super::copies::copy_rules;
use super::tree::{low_mask, Dim, Forest, Node, Region, Tree};
use crate::rule::{port_slot, Rule};
use crate::wildcards::FIELDS;
use flowpath_packet::{Field, FlowKey, WordSet};

/// A leaf holds at most this many rules unless no cut separates them. (8 and a space
/// factor of 4, HiCuts' own defaults, measured best of 4/8/16 × 2/4/8 on the ClassBench
/// sets: 16 slows the firewall and IP-chain sets by a quarter, 8× the space factor
/// triples the ACL tree's memory for nothing.)
const LEAF_RULES: usize = 8;
/// A cut may copy rules into children up to this factor of the node's rule count.
const SPACE_FACTOR: usize = 4;
/// At most 2^this children per cut.
const MAX_CUT_BITS: u32 = 8;

/// Deeper than this, a node becomes a leaf whatever its size.
const MAX_DEPTH: usize = 24;

impl Forest {
    pub(super) fn build(rules: &[Rule], order: &[u64]) -> Forest {
        let mut union = FlowKey::ZERO;
        for r in rules {
            union.or_assign(&r.spec.matches.mask);
        }
        let dims = pick_dims(rules, &union);
        let words = WordSet::of_mask(&union);
        let nw = words.len();
        let (compact, ports) = copy_rules(rules, &words);
        let any_ranges = rules.iter().any(|r| r.spec.matches.has_ranges());
        // Every rule's interval on every dim, computed once.
        let boxes: Vec<Vec<(u128, u128)>> = rules
            .iter()
            .map(|r| dims.iter().map(|d| r.spec.matches.hull(d.field)).collect())
            .collect();
        let mut trees: Vec<Tree> = groups(&dims, &boxes)
            .into_iter()
            .map(|mut g| {
                g.sort_by_key(|&i| order[i as usize]);
                let best_key = g.first().map_or(u64::MAX, |&i| order[i as usize]);
                let mut t = Tree {
                    best_key,
                    nodes: Vec::new(),
                    leaves: Vec::new(),
                    skips: Vec::new(),
                };
                Builder {
                    dims: &dims,
                    boxes: &boxes,
                }
                .grow(&mut t, g);
                t
            })
            .collect();
        trees.sort_by_key(|t| t.best_key);
        Forest {
            dims,
            trees,
            words,
            stride: 2 * nw,
            compact,
            ports,
            any_ranges,
            order: order.to_vec(),
        }
    }
}

/// The fields worth cutting on: every field some rule constrains, with the 16-byte address
/// fields cut as their IPv4 top 32 bits when no rule looks further.
fn pick_dims(rules: &[Rule], union: &FlowKey) -> Vec<Dim> {
    let low96 = (1u128 << 96) - 1;
    let mut dims = Vec::new();
    for f in FIELDS {
        let used = union.get(f) != 0
            || port_slot(f)
                .is_some_and(|s| rules.iter().any(|r| !r.spec.matches.ports[s].is_any()));
        if !used {
            continue;
        }
        let f = match f {
            Field::Ipv6Src if union.get(f) & low96 == 0 => Field::Ipv4Src,
            Field::Ipv6Dst if union.get(f) & low96 == 0 => Field::Ipv4Dst,
            f => f,
        };
        dims.push(Dim::of(f));
    }
    dims
}

/// Split rules by which of the two most varied wide fields (addresses, in practice) they
/// pin to at most half their width: rules wild on a field then never get copied across
/// cuts on it (CutSplit's small/big split).
fn groups(dims: &[Dim], boxes: &[Vec<(u128, u128)>]) -> Vec<Vec<u32>> {
    let mut wide: Vec<(usize, usize)> = dims
        .iter()
        .enumerate()
        .filter(|(_, d)| d.w >= 32)
        .map(|(di, _)| {
            let mut distinct: Vec<(u128, u128)> = boxes.iter().map(|b| b[di]).collect();
            distinct.sort_unstable();
            distinct.dedup();
            (distinct.len(), di)
        })
        .collect();
    wide.sort_by(|a, b| b.cmp(a));
    wide.truncate(2);
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); 1 << wide.len()];
    for (i, b) in boxes.iter().enumerate() {
        let mut g = 0;
        for (bit, &(_, di)) in wide.iter().enumerate() {
            let w = dims[di].w as u32;
            let (lo, hi) = b[di];
            // "Small": the interval spans at most 2^(w/2) values.
            if (hi - lo) >> (w / 2) == 0 {
                g |= 1 << bit;
            }
        }
        out[g].push(i as u32);
    }
    out.retain(|g| !g.is_empty());
    out
}

struct Builder<'a> {
    dims: &'a [Dim],
    boxes: &'a [Vec<(u128, u128)>],
}

/// The chosen cut of a node: after skipping `skip` bits of `dim` that every rule shares
/// (`skip_value`), cut on the next `bits`; the resulting largest child and total copies.
struct Cut {
    dim: usize,
    skip: u32,
    skip_value: u128,
    bits: u32,
    largest: usize,
    total: usize,
}

impl Builder<'_> {
    /// Build `t` over `rules` (in classifier order), root at node 0.
    fn grow(&self, t: &mut Tree, rules: Vec<u32>) {
        let region: Region = vec![(0, 0); self.dims.len()];
        t.nodes.push(Node::LEAF);
        // (node index, rules, region, depth)
        let mut work = vec![(0usize, rules, region, 0usize)];
        while let Some((ni, rules, region, depth)) = work.pop() {
            let cut = if rules.len() <= LEAF_RULES || depth >= MAX_DEPTH {
                None
            } else {
                self.best_cut(&rules, &region)
            };
            let Some(cut) = cut else {
                t.nodes[ni] = Node {
                    a: t.leaves.len() as u32,
                    n: rules.len() as u32,
                    ..Node::LEAF
                };
                t.leaves.extend_from_slice(&rules);
                continue;
            };
            let w = self.dims[cut.dim].w as u32;
            let region = skipped(&region, cut.dim, w, cut.skip, cut.skip_value);
            let (plen, base) = region[cut.dim];
            let shift = w - plen - cut.bits;
            // Children sit together in `nodes`; one more after them: the empty leaf for
            // keys that differ in the skipped bits.
            let kids_at = t.nodes.len();
            t.nodes[ni] = Node {
                dim: cut.dim as u8,
                shift: shift as u8,
                bits: cut.bits as u8,
                skip: cut.skip as u8,
                a: kids_at as u32,
                n: t.skips.len() as u32,
            };
            t.skips.push(cut.skip_value);
            let children = self.split(&rules, &region, cut.dim, cut.bits);
            let k = children.len();
            t.nodes.resize(kids_at + k + 1, Node::LEAF);
            t.nodes[kids_at + k].a = t.leaves.len() as u32;
            let mut prev: Option<(Vec<u32>, Node)> = None;
            for (c, child) in children.into_iter().enumerate() {
                let cn = kids_at + c;
                if child.len() <= LEAF_RULES {
                    // Neighbours with the same few rules share one rule list (it is exactly
                    // the rules meeting either region). Subtrees are never shared: each is
                    // cut for its own region.
                    let leaf = match &prev {
                        Some((pr, leaf)) if *pr == child => *leaf,
                        _ => {
                            let leaf = Node {
                                a: t.leaves.len() as u32,
                                n: child.len() as u32,
                                ..Node::LEAF
                            };
                            t.leaves.extend_from_slice(&child);
                            prev = Some((child, leaf));
                            leaf
                        }
                    };
                    t.nodes[cn] = leaf;
                    continue;
                }
                prev = None;
                let mut r2 = region.clone();
                r2[cut.dim] = (plen + cut.bits, base | ((c as u128) << shift));
                work.push((cn, child, r2, depth + 1));
            }
        }
    }

    /// Each rule's span of children, `[first, last]`, when the node is cut on `dim` by `bits`.
    #[inline]
    fn span(&self, rule: u32, region: &Region, dim: usize, bits: u32) -> (usize, usize) {
        let (lo, hi) = self.clamped(rule, region, dim);
        let w = self.dims[dim].w as u32;
        let shift = w - region[dim].0 - bits;
        ((lo >> shift) as usize, (hi >> shift) as usize)
    }

    /// Rule `rule`'s interval on `dim` inside the node's block, relative to its start.
    #[inline]
    fn clamped(&self, rule: u32, region: &Region, dim: usize) -> (u128, u128) {
        let w = self.dims[dim].w as u32;
        let (plen, base) = region[dim];
        let node_hi = base | low_mask(w - plen);
        let (lo, hi) = self.boxes[rule as usize][dim];
        (lo.max(base) - base, hi.min(node_hi) - base)
    }

    /// How many of the node's free bits on `dim` every rule shares, and their value.
    fn common_bits(&self, rules: &[u32], region: &Region, dim: usize) -> (u32, u128) {
        let free = self.dims[dim].w as u32 - region[dim].0;
        let (mut lo, mut hi) = (u128::MAX, 0u128);
        for &r in rules {
            let (a, b) = self.clamped(r, region, dim);
            lo = lo.min(a);
            hi = hi.max(b);
        }
        let same = ((lo ^ hi) << (128 - free)).leading_zeros().min(free);
        // Leave at least one bit to cut on.
        let skip = same.min(free.saturating_sub(1));
        if skip == 0 {
            return (0, 0);
        }
        (skip, (lo >> (free - skip)) & low_mask(skip))
    }

    /// The cut that leaves the smallest largest child within the space budget, or `None`
    /// when no cut separates any rules.
    fn best_cut(&self, rules: &[u32], region: &Region) -> Option<Cut> {
        let n = rules.len();
        let mut best: Option<Cut> = None;
        let mut counts = Vec::new();
        for dim in 0..self.dims.len() {
            let w = self.dims[dim].w as u32;
            if region[dim].0 >= w {
                continue;
            }
            let (skip, skip_value) = self.common_bits(rules, region, dim);
            let r = skipped(region, dim, w, skip, skip_value);
            let free = w - r[dim].0;
            let mut chosen: Option<Cut> = None;
            for bits in 1..=free.min(MAX_CUT_BITS) {
                let k = 1usize << bits;
                counts.clear();
                counts.resize(k + 1, 0i64);
                for &rule in rules {
                    let (a, b) = self.span(rule, &r, dim, bits);
                    counts[a] += 1;
                    counts[b + 1] -= 1;
                }
                let (mut run, mut total, mut largest) = (0i64, 0usize, 0usize);
                for c in &counts[..k] {
                    run += c;
                    total += run as usize;
                    largest = largest.max(run as usize);
                }
                let fits = total + k <= SPACE_FACTOR * n;
                if !fits && chosen.is_some() {
                    break;
                }
                if chosen
                    .as_ref()
                    .is_none_or(|c| (largest, total) < (c.largest, c.total))
                {
                    chosen = Some(Cut {
                        dim,
                        skip,
                        skip_value,
                        bits,
                        largest,
                        total,
                    });
                }
                if !fits {
                    break;
                }
            }
            if let Some(c) = chosen {
                let better = best
                    .as_ref()
                    .is_none_or(|b| (c.largest, c.total) < (b.largest, b.total));
                if c.largest < n && better {
                    best = Some(c);
                }
            }
        }
        best
    }

    /// The rules of each child, in the parent's (classifier) order.
    fn split(&self, rules: &[u32], region: &Region, dim: usize, bits: u32) -> Vec<Vec<u32>> {
        let mut children = vec![Vec::new(); 1 << bits];
        for &r in rules {
            let (a, b) = self.span(r, region, dim, bits);
            for child in &mut children[a..=b] {
                child.push(r);
            }
        }
        children
    }
}

/// `region` with `skip` more bits of `dim` fixed to `value`.
fn skipped(region: &Region, dim: usize, w: u32, skip: u32, value: u128) -> Region {
    let mut r = region.clone();
    let (plen, base) = r[dim];
    if skip > 0 {
        r[dim] = (plen + skip, base | (value << (w - plen - skip)));
    }
    r
}
