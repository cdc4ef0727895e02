//! Tuple-space search: one hash table per distinct mask, visited in order of the best rule
//! each holds, so a lookup stops once no remaining subtable can win.
//!
//! A port range that is not one prefix block is stored as the prefix blocks that cover it
//! (one entry per block, all naming the rule), which is what makes range-heavy ACLs spread
//! over hundreds of subtables here — the decision tree (`cuts.rs`) is built for those.

use crate::rule::{range_prefixes, Match, Rule};
use flowpath_packet::key::wide_hash;
use flowpath_packet::{Field, FlowKey, SubtableMask};
use hashbrown::HashTable;
use smallvec::SmallVec;

#[derive(Clone, Debug)]
pub(crate) struct TupleSpace {
    subtables: Vec<Subtable>,
    entries: usize,
}

#[derive(Clone, Debug)]
struct Subtable {
    /// The mask, and how the subtable hashes and compares under it.
    search: SubtableMask,
    /// The best (lowest) classifier order key of any rule in the subtable.
    best_key: u64,
    buckets: HashTable<Bucket>,
}

#[derive(Clone, Debug)]
struct Bucket {
    hash: u32,
    value: FlowKey,
    /// Rule indices with this masked value, best first.
    rules: SmallVec<[u32; 2]>,
}

/// The (mask, value) pairs a match is stored as: itself, or one per combination of the
/// prefix blocks covering its port ranges.
pub(crate) fn expand(m: &Match) -> SmallVec<[(FlowKey, FlowKey); 1]> {
    if !m.has_ranges() {
        // The common case: no allocation.
        return smallvec::smallvec![(m.mask, m.value)];
    }
    let blocks = |i: usize| {
        let r = m.ports[i];
        if r.is_any() {
            vec![(0u16, 0u32)]
        } else {
            range_prefixes(r.lo, r.hi)
        }
    };
    let mut out = SmallVec::new();
    for (sv, sl) in blocks(0) {
        for &(dv, dl) in &blocks(1) {
            let mut e = Match {
                ports: Default::default(),
                ..*m
            };
            if sl > 0 {
                e = e.prefix(Field::TpSrc, sv as u128, sl);
            }
            if dl > 0 {
                e = e.prefix(Field::TpDst, dv as u128, dl);
            }
            out.push((e.mask, e.value));
        }
    }
    out
}

impl TupleSpace {
    /// Build over `rules`; `order[i]` is rule `i`'s position in classifier order.
    pub(crate) fn build(rules: &[Rule], order: &[u64], seed: u64) -> TupleSpace {
        let mut ts = TupleSpace {
            subtables: Vec::new(),
            entries: 0,
        };
        ts.insert(rules, order, 0, seed);
        ts
    }

    /// This index with `rules[from..]` added: the rules before `from` are the ones it was
    /// built over, at the same positions (the rule store appends new rules, whose ids are
    /// larger). Cloning the hash tables is a copy, much cheaper than hashing every rule
    /// again, so a one-rule add (an OpenFlow flow_mod followed by a barrier, as ovs-ofctl
    /// sends them) costs a copy of the table, not a rebuild.
    pub(crate) fn with_added(
        &self,
        rules: &[Rule],
        order: &[u64],
        from: usize,
        seed: u64,
    ) -> TupleSpace {
        let mut ts = self.clone();
        ts.insert(rules, order, from, seed);
        ts
    }

    /// Add `rules[from..]`, then restore the orders lookups rely on.
    fn insert(&mut self, rules: &[Rule], order: &[u64], from: usize, seed: u64) {
        // Subtable by mask. Consecutive rules usually share a mask: check the last one
        // before hashing the 104-byte mask.
        let mut by_mask: rustc_hash::FxHashMap<FlowKey, usize> = self
            .subtables
            .iter()
            .enumerate()
            .map(|(i, st)| (*st.search.mask(), i))
            .collect();
        let mut last: Option<(FlowKey, usize)> = None;
        let mut touched: Vec<(usize, u32, FlowKey)> = Vec::new();
        let subtables = &mut self.subtables;
        for (i, r) in rules.iter().enumerate().skip(from) {
            for (mask, value) in expand(&r.spec.matches) {
                self.entries += 1;
                let si = match last {
                    Some((m, si)) if m == mask => si,
                    _ => {
                        let si = *by_mask.entry(mask).or_insert_with(|| {
                            subtables.push(Subtable {
                                search: SubtableMask::new(mask),
                                best_key: u64::MAX,
                                buckets: HashTable::with_capacity(if from == 0 {
                                    // A fresh build: most tables have one big subtable.
                                    rules.len().min(1 << 16)
                                } else {
                                    0
                                }),
                            });
                            subtables.len() - 1
                        });
                        last = Some((mask, si));
                        si
                    }
                };
                let st = &mut subtables[si];
                st.best_key = st.best_key.min(order[i]);
                let h = st.search.hash(&value, seed);
                match st
                    .buckets
                    .find_mut(wide_hash(h), |b| b.hash == h && b.value == value)
                {
                    Some(b) => {
                        b.rules.push(i as u32);
                        if from > 0 {
                            touched.push((si, h, value));
                        }
                    }
                    None => {
                        st.buckets.insert_unique(
                            wide_hash(h),
                            Bucket {
                                hash: h,
                                value,
                                rules: smallvec::smallvec![i as u32],
                            },
                            |b| wide_hash(b.hash),
                        );
                    }
                }
            }
        }
        if from == 0 {
            for st in subtables.iter_mut() {
                st.buckets.shrink_to_fit(|b| wide_hash(b.hash));
                for b in st.buckets.iter_mut() {
                    if b.rules.len() > 1 {
                        b.rules.sort_by_key(|&x| order[x as usize]);
                    }
                }
            }
        } else {
            // Only buckets that gained a rule can be out of order.
            for (si, h, value) in touched {
                if let Some(b) = subtables[si]
                    .buckets
                    .find_mut(wide_hash(h), |b| b.hash == h && b.value == value)
                {
                    b.rules.sort_by_key(|&x| order[x as usize]);
                }
            }
        }
        // Best rank first; ties by mask for a deterministic order.
        subtables.sort_by(|a, b| {
            a.best_key
                .cmp(&b.best_key)
                .then_with(|| a.search.mask().words.cmp(&b.search.mask().words))
        });
    }

    pub(crate) fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Hash entries (a rule with port ranges counts once per prefix block).
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.subtables
            .iter()
            .map(|st| {
                std::mem::size_of::<Subtable>()
                    + st.buckets.capacity() * (std::mem::size_of::<Bucket>() + 1)
            })
            .sum()
    }

    /// The best rule for `key`; with `wc`, OR-ing into it every probed subtable's mask.
    #[inline]
    pub(crate) fn lookup(
        &self,
        key: &FlowKey,
        order: &[u64],
        seed: u64,
        mut wc: Option<&mut FlowKey>,
    ) -> Option<u32> {
        let mut best: Option<u32> = None;
        let mut best_key = u64::MAX;
        for st in &self.subtables {
            // Subtables are sorted by their best rank: nothing below can win.
            if st.best_key >= best_key {
                break;
            }
            // The probe's outcome depends on every bit of this mask.
            if let Some(wc) = wc.as_deref_mut() {
                wc.or_assign(st.search.mask());
            }
            let h = st.search.hash(key, seed);
            let found = st.buckets.find(wide_hash(h), |b| {
                b.hash == h && st.search.matches(key, &b.value)
            });
            if let Some(bucket) = found {
                let cand = bucket.rules[0];
                if order[cand as usize] < best_key {
                    best = Some(cand);
                    best_key = order[cand as usize];
                }
            }
        }
        best
    }
}
