//! One table of rules and the classifier that finds the best match for a key.
//!
//! Two backends sit behind the one call site [`Table::lookup`]: tuple-space search (the
//! default; one hash table per distinct mask, visited in order of the highest priority
//! they hold so the search stops early) and a linear list (the CLASShoFIREs baseline).
//! Both record, in the caller's wildcard mask, every key bit the decision depended on.

use crate::rule::Rule;
use flowpath_packet::key::wide_hash;
use flowpath_packet::{FlowKey, WordSet};
use hashbrown::HashTable;
use smallvec::SmallVec;

/// Which classifier a table uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Tuple-space search with per-subtable maximum priority for early exit.
    #[default]
    TupleSpace,
    /// Every rule in priority order until the first match.
    Linear,
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tss" | "tuple-space" => Ok(Backend::TupleSpace),
            "linear" => Ok(Backend::Linear),
            _ => Err(format!(
                "unknown classifier '{s}' (expected 'tss' or 'linear')"
            )),
        }
    }
}

/// An immutable table: rules plus the index built over them. Rule changes build a new
/// `Table` (copy-on-write), so lookups never take a lock.
#[derive(Debug)]
pub struct Table {
    rules: Vec<Rule>,
    index: Index,
    seed: u64,
}

#[derive(Debug)]
enum Index {
    TupleSpace(Vec<Subtable>),
    /// Rule indices sorted by classifier order.
    Linear(Vec<u32>),
}

#[derive(Debug)]
struct Subtable {
    mask: FlowKey,
    words: WordSet,
    max_priority: u16,
    buckets: HashTable<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    hash: u32,
    value: FlowKey,
    /// Rule indices with this masked value, best first.
    rules: SmallVec<[u32; 2]>,
}

impl Table {
    /// Build a table over `rules` (any order).
    pub fn build(rules: Vec<Rule>, backend: Backend, seed: u64) -> Table {
        let index = match backend {
            Backend::Linear => {
                let mut order: Vec<u32> = (0..rules.len() as u32).collect();
                order.sort_by(|&a, &b| {
                    order_key(&rules[a as usize]).cmp(&order_key(&rules[b as usize]))
                });
                Index::Linear(order)
            }
            Backend::TupleSpace => Index::TupleSpace(build_subtables(&rules, seed)),
        };
        Table { rules, index, seed }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn backend(&self) -> Backend {
        match self.index {
            Index::TupleSpace(_) => Backend::TupleSpace,
            Index::Linear(_) => Backend::Linear,
        }
    }

    /// Number of distinct masks (tuple-space subtables); the rule count for `Linear`.
    pub fn subtables(&self) -> usize {
        match &self.index {
            Index::TupleSpace(s) => s.len(),
            Index::Linear(o) => o.len(),
        }
    }

    /// The best rule matching `key`, OR-ing into `wc` every bit the answer depended on.
    #[inline]
    pub fn lookup(&self, key: &FlowKey, wc: &mut FlowKey) -> Option<u32> {
        match &self.index {
            Index::TupleSpace(subtables) => {
                let mut best: Option<u32> = None;
                for st in subtables {
                    if let Some(b) = best {
                        // Subtables are sorted by max priority: nothing below can win.
                        // (Equal priority still has to be looked at for the older-wins tie.)
                        if st.max_priority < self.rules[b as usize].spec.priority {
                            break;
                        }
                    }
                    // The probe's outcome depends on every bit of this mask.
                    wc.or_assign(&st.mask);
                    let h = key.masked_hash(&st.mask, &st.words, self.seed);
                    let found = st.buckets.find(wide_hash(h), |b| {
                        b.hash == h && key.matches_words(&st.mask, &b.value, &st.words)
                    });
                    if let Some(bucket) = found {
                        let cand = bucket.rules[0];
                        if best.is_none_or(|b| {
                            self.rules[cand as usize].beats(&self.rules[b as usize])
                        }) {
                            best = Some(cand);
                        }
                    }
                }
                best
            }
            Index::Linear(order) => {
                for &i in order {
                    let m = &self.rules[i as usize].spec.matches;
                    wc.or_assign(&m.mask);
                    if m.matches(key) {
                        return Some(i);
                    }
                }
                None
            }
        }
    }
}

/// Sort key for classifier order: higher priority, then older rule, first.
fn order_key(r: &Rule) -> (std::cmp::Reverse<u16>, u64) {
    (std::cmp::Reverse(r.spec.priority), r.id.0)
}

fn build_subtables(rules: &[Rule], seed: u64) -> Vec<Subtable> {
    let mut subtables: Vec<Subtable> = Vec::new();
    let mut by_mask: std::collections::HashMap<FlowKey, usize> = std::collections::HashMap::new();
    for (i, r) in rules.iter().enumerate() {
        let mask = r.spec.matches.mask;
        let si = *by_mask.entry(mask).or_insert_with(|| {
            subtables.push(Subtable {
                mask,
                words: WordSet::of_mask(&mask),
                max_priority: 0,
                buckets: HashTable::new(),
            });
            subtables.len() - 1
        });
        let st = &mut subtables[si];
        st.max_priority = st.max_priority.max(r.spec.priority);
        let value = r.spec.matches.value;
        let h = value.masked_hash(&mask, &st.words, seed);
        match st
            .buckets
            .find_mut(wide_hash(h), |b| b.hash == h && b.value == value)
        {
            Some(b) => b.rules.push(i as u32),
            None => {
                let mut v = SmallVec::new();
                v.push(i as u32);
                st.buckets.insert_unique(
                    wide_hash(h),
                    Bucket {
                        hash: h,
                        value,
                        rules: v,
                    },
                    |b| wide_hash(b.hash),
                );
            }
        }
    }
    for st in &mut subtables {
        for b in st.buckets.iter_mut() {
            b.rules.sort_by(|&x, &y| {
                order_key(&rules[x as usize]).cmp(&order_key(&rules[y as usize]))
            });
        }
    }
    // Highest max-priority first; ties by mask for a deterministic order.
    subtables.sort_by(|a, b| {
        b.max_priority
            .cmp(&a.max_priority)
            .then_with(|| a.mask.words.cmp(&b.mask.words))
    });
    subtables
}
