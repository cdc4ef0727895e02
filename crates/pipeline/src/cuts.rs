//! A decision-tree classifier for range-heavy rule sets: HiCuts-style equal-size cuts on
//! the top bits of a field, with rules first split by which addresses they pin (as
//! EffiCuts and CutSplit do) so that wide rules are not copied into every branch.
//!
//! Every cut takes the next most-significant bits of one field, so each node's region is a
//! prefix of each field: the path a lookup took is itself a valid megaflow mask, and the
//! leaf's short rule list is all the megaflow has to be kept apart from (`wildcards.rs`).
//! Leaves hold rule indices in classifier order; rules are matched against a compact copy
//! of their masks (only the key words some rule uses), so a leaf scan stays in a few cache
//! lines. Hand-written: no crate offers a packet-classification tree over this key.

use crate::rule::{key_ports, prefix_mask, Rule};
use crate::wildcards::{exclude, include, or_into, quantize, read_bytes};
use flowpath_packet::{Field, FlowKey, WordSet, KEY_BYTES};
use std::sync::Arc;

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

/// A field the tree cuts on.
#[derive(Clone, Copy, Debug)]
struct Dim {
    field: Field,
    off: u8,
    len: u8,
    /// Width in bits.
    w: u8,
}

impl Dim {
    fn of(field: Field) -> Dim {
        let (off, len) = field.range();
        Dim {
            field,
            off: off as u8,
            len: len as u8,
            w: field.bits() as u8,
        }
    }

    /// The field's value in `key`, as a number.
    #[inline(always)]
    fn read(&self, b: &[u8; KEY_BYTES]) -> u128 {
        read_bytes(b, self.off as usize, self.len as usize)
    }
}

/// One node: a cut (`bits > 0`; children at `nodes[a..a + 2^bits]`) or a leaf (`bits == 0`;
/// rules at `leaves[a..a + n]`). A cut may first check `skip` bits above the ones it cuts
/// on against `skips[n]` (path compression: every rule below shares them); a key that
/// differs there goes to the empty leaf at `nodes[a + 2^bits]`.
#[derive(Clone, Copy, Debug)]
struct Node {
    dim: u8,
    shift: u8,
    bits: u8,
    skip: u8,
    a: u32,
    n: u32,
}

impl Node {
    const LEAF: Node = Node {
        dim: 0,
        shift: 0,
        bits: 0,
        skip: 0,
        a: 0,
        n: 0,
    };
}

/// The low `n` bits set.
#[inline(always)]
fn low_mask(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

#[derive(Debug)]
struct Tree {
    /// The best classifier order key of any rule in the tree.
    best_key: u64,
    nodes: Vec<Node>,
    leaves: Vec<u32>,
    skips: Vec<u128>,
}

/// Several trees (one per group of rules) over one table's rules.
#[derive(Debug)]
pub(crate) struct Forest {
    dims: Vec<Dim>,
    trees: Vec<Tree>,
    /// The key words any rule's mask touches, and each rule's mask and value on just those
    /// words, interleaved (`stride` = 2 × words).
    words: WordSet,
    stride: usize,
    compact: Vec<u64>,
    /// Each rule's port ranges (lo, hi, lo, hi); `[0, 0xffff, 0, 0xffff]` when none.
    ports: Vec<[u16; 4]>,
    any_ranges: bool,
    /// Each rule's classifier order key (`table::order_key`; smaller wins), by the
    /// forest's own rule numbering (the table's at build time).
    order: Vec<u64>,
}

/// A node's region on every dim: (prefix length, value).
type Region = Vec<(u32, u128)>;

impl Forest {
    pub(crate) fn build(rules: &[Rule], order: &[u64]) -> Forest {
        let mut union = FlowKey::ZERO;
        for r in rules {
            union.or_assign(&r.spec.matches.mask);
        }
        let dims = pick_dims(rules, &union);
        let words = WordSet::of_mask(&union);
        let nw = words.len();
        let mut compact = Vec::with_capacity(rules.len() * 2 * nw);
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

    pub(crate) fn entries(&self) -> usize {
        self.trees.iter().map(|t| t.leaves.len()).sum()
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        let trees: usize = self
            .trees
            .iter()
            .map(|t| t.nodes.len() * 12 + t.leaves.len() * 4 + t.skips.len() * 16)
            .sum();
        trees + self.compact.len() * 8 + self.ports.len() * 8
    }

    /// Does rule `i` match the key whose used words are `kw`?
    #[inline(always)]
    fn matches(&self, i: u32, kw: &[u64; 13], ports: [u16; 2]) -> bool {
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

    /// The leaf `key` falls in; with `wc`, un-wildcarding the bits each cut looked at.
    #[inline(always)]
    fn leaf<'t>(
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
    fn best(&self, key: &FlowKey, remap: Option<&[u32]>, mut bound: u64) -> Option<(u32, u64)> {
        let mut kw = [0u64; 13];
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
pub(crate) const DELETED: u32 = u32::MAX;

#[inline(always)]
fn live(remap: Option<&[u32]>, i: u32) -> bool {
    remap.is_none_or(|m| m[i as usize] != DELETED)
}

/// A table's tree index: a forest, shared by later versions of the table while the rule set
/// changes little. Rules deleted since the build are skipped through `remap` (forest index
/// → table index, or [`DELETED`]); rules added since are scanned in `extra` (table indices
/// in classifier order). A one-rule change is then a merge over the rule ids instead of a
/// rebuild; past [`MAX_EXTRA`] added rules, or a quarter deleted, the table is rebuilt.
#[derive(Debug)]
pub(crate) struct TreeIndex {
    forest: Arc<Forest>,
    remap: Option<Vec<u32>>,
    extra: Vec<u32>,
}

/// Added rules scanned beside the forest before a table is rebuilt instead.
pub(crate) const MAX_EXTRA: usize = 64;

impl TreeIndex {
    pub(crate) fn build(rules: &[Rule], order: &[u64]) -> TreeIndex {
        TreeIndex {
            forest: Arc::new(Forest::build(rules, order)),
            remap: None,
            extra: Vec::new(),
        }
    }

    /// This index for the table's next version, or `None` when it should be rebuilt.
    /// Both rule lists are sorted by id (as the rule store builds tables).
    pub(crate) fn derive(&self, old: &[Rule], new: &[Rule], order: &[u64]) -> Option<TreeIndex> {
        // Old table index → new table index, by one merge over the ids.
        let mut old_to_new = vec![DELETED; old.len()];
        let mut added = Vec::new();
        let (mut i, mut j) = (0, 0);
        while j < new.len() {
            if i < old.len() && old[i].id < new[j].id {
                i += 1;
            } else if i < old.len() && old[i].id == new[j].id {
                old_to_new[i] = j as u32;
                i += 1;
                j += 1;
            } else {
                added.push(j as u32);
                j += 1;
            }
        }
        let remap: Vec<u32> = match &self.remap {
            Some(m) => m
                .iter()
                .map(|&o| {
                    if o == DELETED {
                        DELETED
                    } else {
                        old_to_new[o as usize]
                    }
                })
                .collect(),
            None => old_to_new.clone(),
        };
        let mut extra: Vec<u32> = self
            .extra
            .iter()
            .map(|&o| old_to_new[o as usize])
            .filter(|&n| n != DELETED)
            .chain(added)
            .collect();
        let deleted = remap.iter().filter(|&&n| n == DELETED).count();
        if extra.len() > MAX_EXTRA || deleted * 4 > remap.len().max(1) {
            return None;
        }
        extra.sort_by_key(|&n| order[n as usize]);
        Some(TreeIndex {
            forest: self.forest.clone(),
            remap: Some(remap),
            extra,
        })
    }

    pub(crate) fn trees(&self) -> usize {
        self.forest.trees.len()
    }

    pub(crate) fn entries(&self) -> usize {
        self.forest.entries() + self.extra.len()
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.forest.memory_bytes()
            + self.remap.as_ref().map_or(0, |m| m.len() * 4)
            + self.extra.len() * 4
    }

    #[inline(always)]
    fn table_index(&self, i: u32) -> u32 {
        self.remap.as_ref().map_or(i, |m| m[i as usize])
    }

    /// The best rule for `key` (index into the table's rules).
    #[inline]
    pub(crate) fn classify(&self, key: &FlowKey, rules: &[Rule], order: &[u64]) -> Option<u32> {
        let tree = self.forest.best(key, self.remap.as_deref(), u64::MAX);
        let mut best = tree.map(|(i, k)| (self.table_index(i), k));
        for &n in &self.extra {
            if best.is_some_and(|(_, k)| order[n as usize] >= k) {
                break;
            }
            if rules[n as usize].spec.matches.matches(key) {
                best = Some((n, order[n as usize]));
                break;
            }
        }
        best.map(|(n, _)| n)
    }

    /// [`TreeIndex::classify`], un-wildcarding in `wc` exactly what the answer needed: the
    /// cuts on the way to each leaf that could have held a better rule, one separating
    /// prefix per better rule there (and among the added rules), and the winner's fields.
    pub(crate) fn lookup(
        &self,
        key: &FlowKey,
        rules: &[Rule],
        order: &[u64],
        wc: &mut FlowKey,
    ) -> Option<u32> {
        let f = &*self.forest;
        let remap = self.remap.as_deref();
        // One walk per tree: its leaf and the cuts on the way there (in a mask of its own,
        // since a tree whose rules all lose to the final winner adds nothing).
        let mut kw = [0u64; 13];
        for (j, &w) in f.words.indices().iter().enumerate() {
            kw[j] = key.words[w as usize];
        }
        let ports = key_ports(key);
        let (mut best, mut bound) = (None, u64::MAX);
        let mut seen: smallvec::SmallVec<[(u64, &[u32], FlowKey); 4]> = smallvec::SmallVec::new();
        for t in &f.trees {
            if t.best_key >= bound {
                break;
            }
            let mut path = FlowKey::ZERO;
            let leaf = f.leaf(t, key.bytes(), Some(&mut path));
            for &i in leaf {
                let k = f.order[i as usize];
                if k >= bound {
                    break;
                }
                if f.matches(i, &kw, ports) && live(remap, i) {
                    best = Some(self.table_index(i));
                    bound = k;
                    break;
                }
            }
            seen.push((t.best_key, leaf, path));
        }
        for &n in &self.extra {
            if order[n as usize] >= bound {
                break;
            }
            if rules[n as usize].spec.matches.matches(key) {
                best = Some(n);
                bound = order[n as usize];
                break;
            }
        }
        for (tree_best, leaf, path) in &seen {
            if *tree_best >= bound {
                continue;
            }
            wc.or_assign(path);
            for &i in *leaf {
                if f.order[i as usize] >= bound {
                    break;
                }
                if live(remap, i) {
                    exclude(&rules[self.table_index(i) as usize].spec.matches, key, wc);
                }
            }
        }
        for &n in &self.extra {
            if order[n as usize] >= bound {
                break;
            }
            exclude(&rules[n as usize].spec.matches, key, wc);
        }
        if let Some(n) = best {
            include(&rules[n as usize].spec.matches, key, wc);
        }
        quantize(wc);
        best
    }
}

/// The fields worth cutting on: every field some rule constrains, with the 16-byte address
/// fields cut as their IPv4 top 32 bits when no rule looks further.
fn pick_dims(rules: &[Rule], union: &FlowKey) -> Vec<Dim> {
    let low96 = (1u128 << 96) - 1;
    let mut dims = Vec::new();
    for f in crate::wildcards::FIELDS {
        let used = union.get(f) != 0
            || crate::rule::port_slot(f)
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
