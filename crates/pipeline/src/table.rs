//! One table of rules and the classifier that finds the best match for a key.
//!
//! Three backends sit behind the one call site [`Table::lookup`]: tuple-space search
//! (`tss.rs`), a decision tree built for range-heavy ACLs (`cuts/`), and a linear list
//! (the reference). All record, in the caller's wildcard mask, the key bits the decision
//! depended on; the tree and the linear list record only the bits that separate the key
//! from the rules that would have won (`wildcards.rs`), so megaflows stay wide.

use crate::cuts::TreeIndex;
use crate::rule::Rule;
use crate::tss::TupleSpace;
use crate::wildcards::{exclude, include, quantize};
use flowpath_packet::FlowKey;

/// Which classifier a table uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Tuple-space search: a hash table per mask, the best-ranked first, early exit; prefix
    /// tries on addresses and ports rule subtables out on a few bits (OVS's prefix
    /// tracking), so a rule on one address does not make every megaflow exact on it.
    #[default]
    TupleSpace,
    /// Tuple-space search without the prefix tries: every probed subtable's whole mask
    /// goes into the megaflow (OVS with `prefixes=none`). For measurements that want each
    /// new address to be a new megaflow; the classification is the same.
    TupleSpaceWholeMasks,
    /// A decision tree (cuts on field prefixes) with short leaves: for ACLs with ranges.
    Tree,
    /// Every rule in classifier order until the first match.
    Linear,
}

impl Backend {
    /// Every backend, in the order reports list them.
    pub const ALL: [Backend; 4] = [
        Backend::TupleSpace,
        Backend::TupleSpaceWholeMasks,
        Backend::Tree,
        Backend::Linear,
    ];
    /// The distinct classifiers (`TupleSpaceWholeMasks` classifies as `TupleSpace` does):
    /// what `flowpath bench classifier` compares by default.
    pub const CLASSIFIERS: [Backend; 3] = [Backend::TupleSpace, Backend::Tree, Backend::Linear];

    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Backend::TupleSpace => "tss",
            Backend::TupleSpaceWholeMasks => "tss-whole-masks",
            Backend::Tree => "tree",
            Backend::Linear => "linear",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tss" | "tuple-space" => Ok(Backend::TupleSpace),
            "tss-whole-masks" => Ok(Backend::TupleSpaceWholeMasks),
            "tree" | "cuts" => Ok(Backend::Tree),
            "linear" => Ok(Backend::Linear),
            _ => Err(format!(
                "unknown classifier '{s}' (expected 'tss', 'tss-whole-masks', 'tree' or 'linear')"
            )),
        }
    }
}

/// An immutable table: rules plus the index built over them. Rule changes build a new
/// `Table` (copy-on-write), so lookups never take a lock.
#[derive(Debug)]
pub struct Table {
    rules: Vec<Rule>,
    /// Each rule's classifier order key (smaller wins): priority, then older first.
    order: Vec<u64>,
    index: Index,
    seed: u64,
}

#[derive(Debug)]
enum Index {
    TupleSpace(TupleSpace),
    Tree(TreeIndex),
    /// Rule indices in classifier order.
    Linear(Vec<u32>),
}

impl Table {
    /// Build a table over `rules` (any order).
    pub fn build(rules: Vec<Rule>, backend: Backend, seed: u64) -> Table {
        Table::build_from(None, rules, backend, seed)
    }

    /// Build the next version of `prev` over `rules` (sorted by id, as the rule store
    /// keeps them). A tree index is carried over when few rules changed (see
    /// `TreeIndex::derive` in `cuts/index.rs`): a one-rule change does not rebuild the tree.
    pub fn build_from(
        prev: Option<&Table>,
        rules: Vec<Rule>,
        backend: Backend,
        seed: u64,
    ) -> Table {
        // A table lives as long as its version: no spare room kept (a working copy's list
        // has room for the holes of removed rules and for its adds).
        let mut rules = rules;
        rules.shrink_to_fit();
        // Only rules added since `prev` (an append: the store keeps rules sorted by id and
        // new ids are larger)? Then the tuple-space index is extended, not rebuilt.
        if let (Backend::TupleSpace | Backend::TupleSpaceWholeMasks, Some(p)) = (backend, prev) {
            if let Index::TupleSpace(ts) = &p.index {
                let n = p.rules.len();
                if rules.len() > n
                    && p.seed == seed
                    && rules[..n].iter().zip(&p.rules).all(|(a, b)| a.id == b.id)
                {
                    // Exactly as long as needed: a clone then an extend would double it.
                    let mut order = Vec::with_capacity(rules.len());
                    order.extend_from_slice(&p.order);
                    order.extend(rules[n..].iter().map(order_key));
                    let index = Index::TupleSpace(ts.with_added(&rules, &order, n, seed));
                    return Table {
                        rules,
                        order,
                        index,
                        seed,
                    };
                }
            }
        }
        let order: Vec<u64> = rules.iter().map(order_key).collect();
        let index = match backend {
            Backend::Linear => {
                let mut by_order: Vec<u32> = (0..rules.len() as u32).collect();
                by_order.sort_by_key(|&i| order[i as usize]);
                Index::Linear(by_order)
            }
            Backend::TupleSpace => Index::TupleSpace(TupleSpace::build(&rules, &order, seed, true)),
            Backend::TupleSpaceWholeMasks => {
                Index::TupleSpace(TupleSpace::build(&rules, &order, seed, false))
            }
            Backend::Tree => {
                let derived = match prev.map(|p| (&p.index, &p.rules)) {
                    Some((Index::Tree(t), old)) => t.derive(old, &rules, &order),
                    _ => None,
                };
                Index::Tree(derived.unwrap_or_else(|| TreeIndex::build(&rules, &order)))
            }
        };
        Table {
            rules,
            order,
            index,
            seed,
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn backend(&self) -> Backend {
        match self.index {
            Index::TupleSpace(ref s) if s.has_tries() => Backend::TupleSpace,
            Index::TupleSpace(_) => Backend::TupleSpaceWholeMasks,
            Index::Tree(_) => Backend::Tree,
            Index::Linear(_) => Backend::Linear,
        }
    }

    /// The index's shape: tuple-space subtables, the tree's trees, or the rule count.
    pub fn subtables(&self) -> usize {
        match &self.index {
            Index::TupleSpace(s) => s.subtables(),
            Index::Tree(f) => f.trees(),
            Index::Linear(o) => o.len(),
        }
    }

    /// Entries in the index: tuple-space hash entries (one per prefix block of a range),
    /// rule references in the tree's leaves (rules copied across cuts count once per
    /// leaf), or the rule count.
    pub fn entries(&self) -> usize {
        match &self.index {
            Index::TupleSpace(s) => s.entries(),
            Index::Tree(f) => f.entries(),
            Index::Linear(o) => o.len(),
        }
    }

    /// Bytes the index takes beyond the rules themselves (an estimate from its arrays).
    pub fn index_bytes(&self) -> usize {
        match &self.index {
            Index::TupleSpace(s) => s.memory_bytes(),
            Index::Tree(f) => f.memory_bytes(),
            Index::Linear(o) => o.len() * 4,
        }
    }

    /// Bytes this table takes, rules included (an estimate from the sizes of its
    /// allocations; a rule shared with another version of the table counts in each): the
    /// rule list, the order keys, the index, and each rule's spec, action lists and counters.
    pub fn memory_bytes(&self) -> usize {
        self.rules.capacity() * std::mem::size_of::<Rule>()
            + self.order.capacity() * std::mem::size_of::<u64>()
            + self.index_bytes()
            + self.rules.iter().map(Rule::heap_bytes).sum::<usize>()
    }

    /// The best rule matching `key`, without recording the bits it depended on (the
    /// classifier alone, as a benchmark against other classifiers measures it).
    #[inline]
    pub fn classify(&self, key: &FlowKey) -> Option<u32> {
        match &self.index {
            Index::TupleSpace(s) => s.lookup(key, &self.order, self.seed, None),
            Index::Tree(t) => t.classify(key, &self.rules, &self.order),
            Index::Linear(order) => order
                .iter()
                .copied()
                .find(|&i| self.rules[i as usize].spec.matches.matches(key)),
        }
    }

    /// The best rule matching `key`, OR-ing into `wc` every bit the answer depended on.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<u32> {
        match &self.index {
            Index::TupleSpace(s) => s.lookup(key, &self.order, self.seed, Some(wc)),
            Index::Tree(t) => t.lookup(key, &self.rules, &self.order, wc),
            Index::Linear(order) => {
                let mut best = None;
                for &i in order {
                    let m = &self.rules[i as usize].spec.matches;
                    if m.matches(key) {
                        include(m, key, wc);
                        best = Some(i);
                        break;
                    }
                    exclude(m, key, wc);
                }
                quantize(wc);
                best
            }
        }
    }
}

/// Classifier order as one number (smaller wins): higher priority, then older rule first.
/// It depends on the rule alone, so it stays valid across versions of a table (ids are
/// below 2^48: a store would need centuries of changes to run out).
fn order_key(r: &Rule) -> u64 {
    ((0xffff - r.spec.priority as u64) << 48) | (r.id.0 & ((1 << 48) - 1))
}
