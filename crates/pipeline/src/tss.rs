//! Tuple-space search: one hash table per distinct mask, visited in order of the best rule
//! each holds, so a lookup stops once no remaining subtable can win.
//!
//! A port range that is not one prefix block is stored as the prefix blocks that cover it
//! (one entry per block, all naming the rule), which is what makes range-heavy ACLs spread
//! over hundreds of subtables here — the decision tree (`cuts/`) is built for those.

use crate::rule::{prefix_mask, range_prefixes, Match, Rule};
use crate::trie::{PrefixTrie, TrieWalk, TRIE_FIELDS};
use crate::wildcards::or_into;
use flowpath_packet::key::wide_hash;
use flowpath_packet::{Field, FlowKey, SubtableMask, KEY_WORDS};
use hashbrown::HashTable;
use smallvec::SmallVec;

#[derive(Clone, Debug)]
pub(crate) struct TupleSpace {
    subtables: Vec<Subtable>,
    entries: usize,
    /// One per [`TRIE_FIELDS`] field: the prefixes entries put on it, which let a lookup
    /// that records its wildcards skip a subtable on a few bits instead of its whole mask.
    /// `None`: whole masks only (`Backend::TupleSpaceWholeMasks`).
    tries: Option<Box<[PrefixTrie; TRIE_FIELDS.len()]>>,
}

#[derive(Clone, Debug)]
struct Subtable {
    /// The mask, and how the subtable hashes and compares under it.
    search: SubtableMask,
    /// The best (lowest) classifier order key of any rule in the subtable.
    best_key: u64,
    /// The prefix length the mask puts on each [`TRIE_FIELDS`] field, 0 when it is no
    /// prefix (or none): the fields on which the tries can rule the subtable out.
    plens: [u8; TRIE_FIELDS.len()],
    /// One slot per distinct masked value, found by its hash.
    slots: HashTable<Slot>,
    /// Each value's words as [`SubtableMask::write_row`] packs them, `search.row_len()`
    /// a row, row `Slot::row` at `row * row_len`. Kept apart from the slots and packed:
    /// with a whole `FlowKey` per entry (136-byte buckets) even a 1,000-rule pipeline
    /// spreads over ~130 KB, which the megaflow churn of a miss storm evicts between
    /// lookups; rows of 8–32 bytes and 12-byte slots stay cached.
    rows: Vec<u64>,
    /// Each row's rule indices, best first (read only when rules are added).
    rules: Vec<SmallVec<[u32; 2]>>,
}

/// What a lookup reads of an entry before its row: the hash, and the best rule the row
/// stands for (`rules[row][0]`).
#[derive(Clone, Copy, Debug)]
struct Slot {
    hash: u32,
    best: u32,
    row: u32,
}

impl Subtable {
    /// The packed words of row `r`.
    #[inline(always)]
    fn row(&self, r: u32) -> &[u64] {
        let n = self.search.row_len();
        let at = r as usize * n;
        &self.rows[at..at + n]
    }

    /// Store entry `value` (masked by this subtable's mask) for rule `i`: a new row, or
    /// one more rule on the row with the same words. Returns (hash, row) when the row
    /// already had a rule (its rules may now be out of order).
    fn add(&mut self, value: &FlowKey, i: u32, seed: u64) -> Option<(u32, u32)> {
        let h = self.search.hash(value, seed);
        let mut row = [0u64; KEY_WORDS];
        let row = &mut row[..self.search.row_len()];
        self.search.write_row(value, row);
        let same = self
            .slots
            .find(wide_hash(h), |s| s.hash == h && self.row(s.row) == &*row)
            .map(|s| s.row);
        match same {
            Some(r) => {
                self.rules[r as usize].push(i);
                Some((h, r))
            }
            None => {
                let r = self.rules.len() as u32;
                self.rows.extend_from_slice(row);
                self.rules.push(smallvec::smallvec![i]);
                self.slots.insert_unique(
                    wide_hash(h),
                    Slot {
                        hash: h,
                        best: i,
                        row: r,
                    },
                    |s| wide_hash(s.hash),
                );
                None
            }
        }
    }

    /// Give back what a fresh build reserved beyond its entries.
    fn shrink_to_fit(&mut self) {
        self.slots.shrink_to_fit(|s| wide_hash(s.hash));
        self.rows.shrink_to_fit();
        self.rules.shrink_to_fit();
    }
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
    pub(crate) fn build(rules: &[Rule], order: &[u64], seed: u64, tries: bool) -> TupleSpace {
        let mut ts = TupleSpace {
            subtables: Vec::new(),
            entries: 0,
            tries: tries.then(|| Box::new(TRIE_FIELDS.map(PrefixTrie::new))),
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
        // A fresh build: most tables have one big subtable.
        let capacity = if from == 0 {
            rules.len().min(1 << 16)
        } else {
            0
        };
        // (subtable, hash, row) of every row that gained a second or later rule.
        let mut touched: Vec<(usize, u32, u32)> = Vec::new();
        for (i, r) in rules.iter().enumerate().skip(from) {
            for (mask, value) in expand(&r.spec.matches) {
                self.entries += 1;
                let si = match last {
                    Some((m, si)) if m == mask => si,
                    _ => {
                        let si = *by_mask
                            .entry(mask)
                            .or_insert_with(|| self.new_subtable(mask, capacity));
                        last = Some((mask, si));
                        si
                    }
                };
                let st = &mut self.subtables[si];
                st.best_key = st.best_key.min(order[i]);
                for (t, &plen) in self
                    .tries
                    .iter_mut()
                    .flat_map(|t| t.iter_mut())
                    .zip(&st.plens)
                {
                    if plen > 0 {
                        t.insert(&value, plen as u32);
                    }
                }
                if let Some((h, row)) = st.add(&value, i as u32, seed) {
                    touched.push((si, h, row));
                }
            }
        }
        if from == 0 {
            for st in self.subtables.iter_mut() {
                st.shrink_to_fit();
            }
            for t in self.tries.iter_mut().flat_map(|t| t.iter_mut()) {
                t.shrink_to_fit();
            }
        }
        self.reorder(touched, order);
    }

    /// A new, empty subtable for `mask` (room for `capacity` entries); its index.
    fn new_subtable(&mut self, mask: FlowKey, capacity: usize) -> usize {
        self.subtables.push(Subtable {
            search: SubtableMask::new(mask),
            best_key: u64::MAX,
            plens: match &self.tries {
                Some(tries) => tries
                    .each_ref()
                    .map(|t| t.prefix_len(&mask).map_or(0, |l| l as u8)),
                None => [0; TRIE_FIELDS.len()],
            },
            slots: HashTable::with_capacity(capacity),
            rows: Vec::new(),
            rules: Vec::new(),
        });
        self.subtables.len() - 1
    }

    /// Put back the orders lookups rely on after adds: each `touched` row's rules best
    /// first (and its slot naming the best), and the subtables best rank first.
    fn reorder(&mut self, mut touched: Vec<(usize, u32, u32)>, order: &[u64]) {
        // Only rows that gained a rule can be out of order (on a fresh build, rows
        // with more than one rule: the rules are added in index order, not rank order).
        touched.sort_unstable_by_key(|&(si, _, r)| (si, r));
        touched.dedup_by_key(|&mut (si, _, r)| (si, r));
        for (si, h, r) in touched {
            let st = &mut self.subtables[si];
            let rules = &mut st.rules[r as usize];
            rules.sort_by_key(|&x| order[x as usize]);
            let best = rules[0];
            if let Some(s) = st.slots.find_mut(wide_hash(h), |s| s.row == r) {
                s.best = best;
            }
        }
        // Best rank first; ties by mask for a deterministic order.
        self.subtables.sort_by(|a, b| {
            a.best_key
                .cmp(&b.best_key)
                .then_with(|| a.search.mask().words.cmp(&b.search.mask().words))
        });
    }

    pub(crate) fn has_tries(&self) -> bool {
        self.tries.is_some()
    }

    pub(crate) fn subtables(&self) -> usize {
        self.subtables.len()
    }

    /// Hash entries (a rule with port ranges counts once per prefix block).
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.tries
            .iter()
            .flat_map(|t| t.iter())
            .map(PrefixTrie::memory_bytes)
            .sum::<usize>()
            + self
                .subtables
                .iter()
                .map(|st| {
                    std::mem::size_of::<Subtable>()
                        + st.slots.capacity() * (std::mem::size_of::<Slot>() + 1)
                        + st.rows.capacity() * 8
                        + st.rules.capacity() * std::mem::size_of::<SmallVec<[u32; 2]>>()
                })
                .sum::<usize>()
    }

    /// The best rule for `key`; with `wc`, OR-ing into it the bits the answer depended
    /// on: for a subtable the prefix tries rule out, the few bits that do it; for one
    /// probed, its whole mask.
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
        // Each field's trie walk, made when a subtable first asks for it.
        let mut walks: [Option<TrieWalk>; TRIE_FIELDS.len()] = [None; TRIE_FIELDS.len()];
        // The longest ruling-out prefix per trie field, put into `wc` once at the end (the
        // prefixes of one field nest, so their union is the longest).
        let mut pinned = [0u32; TRIE_FIELDS.len()];
        for st in &self.subtables {
            // Subtables are sorted by their best rank: nothing below can win.
            if st.best_key >= best_key {
                break;
            }
            let h = st.search.hash(key, seed);
            let found = st.slots.find(wide_hash(h), |s| {
                s.hash == h && st.search.row_matches(key, st.row(s.row))
            });
            if let Some(wc) = wc.as_deref_mut() {
                // A miss that the tries can pin on fewer bits than the mask holds (and
                // than the megaflow already has): no entry here can match any key that
                // agrees with this one on `bits` leading bits of `f`. The probe goes
                // first because it is cheaper than a walk, and a hit needs the mask.
                let narrower = match found {
                    None if !st.search.mask().is_subset_of(wc) => {
                        self.ruled_out(st, key, wc, &mut walks)
                    }
                    _ => None,
                };
                match narrower {
                    Some((i, bits)) => pinned[i] = pinned[i].max(bits),
                    // The probe's outcome depends on every bit of this mask.
                    None => wc.or_assign(st.search.mask()),
                }
            }
            if let Some(slot) = found {
                let cand = slot.best;
                if order[cand as usize] < best_key {
                    best = Some(cand);
                    best_key = order[cand as usize];
                }
            }
        }
        if let (Some(wc), Some(tries)) = (wc, &self.tries) {
            for (t, &bits) in tries.iter().zip(&pinned) {
                if bits > 0 {
                    or_into(wc, t.field(), prefix_mask(t.field().bits(), bits));
                }
            }
        }
        best
    }

    /// Whether a trie rules `st` out for `key`: the trie field (its index) and how many of
    /// its leading bits do it, the fewest of any field that can. (Those bits are always a subset of what
    /// the mask would add: the subtable's own prefix on the field is in its mask.) Each
    /// field's trie is walked at most once per lookup, and only when it could help: not
    /// when the mask adds nothing beyond that field's shortest ruling-out. After that a
    /// subtable costs a bit test per field, as OVS's prefix tracking does.
    #[inline]
    fn ruled_out(
        &self,
        st: &Subtable,
        key: &FlowKey,
        wc: &FlowKey,
        walks: &mut [Option<TrieWalk>; TRIE_FIELDS.len()],
    ) -> Option<(usize, u32)> {
        let tries = self.tries.as_ref()?;
        let mut best: Option<(usize, u32)> = None;
        for (i, &plen) in st.plens.iter().enumerate() {
            if plen == 0 {
                continue;
            }
            let trie = &tries[i];
            let walk = match walks[i] {
                Some(w) => w,
                None => {
                    let (mask, outside) = (st.search.mask(), trie.outside_shortest());
                    let beyond = (0..KEY_WORDS).fold(0, |acc, w| {
                        acc | (mask.words[w] & !wc.words[w] & outside.words[w])
                    });
                    if beyond == 0 {
                        continue;
                    }
                    *walks[i].insert(trie.walk(key))
                }
            };
            if let Some(bits) = walk.rules_out(plen as u32) {
                // Rounded up as the other backends round (fewer distinct megaflow masks),
                // never past the subtable's own length (its mask is what a probe costs).
                let bits = trie.round_up(bits).min(plen as u32);
                if best.is_none_or(|(_, b)| bits < b) {
                    best = Some((i, bits));
                }
            }
        }
        best
    }
}
