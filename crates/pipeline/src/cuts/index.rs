//! The tree index a table holds: a forest shared by later versions of the table while the
//! rule set changes little, the rules added and deleted since, and the lookups over both.

use super::tree::Forest;
use super::walk::{live, DELETED};
use crate::rule::{key_ports, Rule};
use crate::wildcards::{exclude, include, quantize};
use flowpath_packet::FlowKey;
use std::sync::Arc;

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
const MAX_EXTRA: usize = 64;

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
        let mut kw = [0u64; flowpath_packet::KEY_WORDS];
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
