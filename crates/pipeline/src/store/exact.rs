//! Rules found by (table, priority, match) without copying the match: a hash table of
//! indices into the rules it stands over, comparing through them.
//!
//! A map keyed by the match itself holds a copy of it per entry (two 168-byte keys and
//! the port ranges, ~360 bytes with the index): a 100,000-rule replace built three such
//! maps, ~100 MB the allocator then kept. An entry here is the key's hash and an index.

use crate::rule::{Match, RuleSpec};
use hashbrown::HashTable;
use std::hash::{Hash, Hasher};

/// What identifies a rule for OpenFlow's "same priority and match replaces".
pub(super) type ExactKey<'a> = (u8, u16, &'a Match);

pub(super) fn key_of(s: &RuleSpec) -> ExactKey<'_> {
    (s.table, s.priority, &s.matches)
}

fn hash_of(key: ExactKey<'_>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// Indices of specs by [`ExactKey`]; the specs live elsewhere, and every call is given
/// the way to them (`spec(i)`, `None` for a hole).
#[derive(Debug, Default)]
pub(super) struct ExactIndex {
    /// (hash of the key, index).
    slots: HashTable<(u64, u32)>,
}

impl ExactIndex {
    pub(super) fn with_capacity(n: usize) -> ExactIndex {
        ExactIndex {
            slots: HashTable::with_capacity(n),
        }
    }

    /// The index of the spec with `key`.
    pub(super) fn get<'s>(
        &self,
        key: ExactKey<'_>,
        spec: impl Fn(usize) -> Option<&'s RuleSpec>,
    ) -> Option<usize> {
        let h = hash_of(key);
        let same =
            |&(sh, i): &(u64, u32)| sh == h && spec(i as usize).is_some_and(|s| key_of(s) == key);
        self.slots.find(h, same).map(|&(_, i)| i as usize)
    }

    /// Index spec `i` under `key` (its key), in place of the spec that had that key;
    /// returns that spec's index.
    pub(super) fn insert<'s>(
        &mut self,
        key: ExactKey<'_>,
        i: usize,
        spec: impl Fn(usize) -> Option<&'s RuleSpec>,
    ) -> Option<usize> {
        let h = hash_of(key);
        let same =
            |&(sh, j): &(u64, u32)| sh == h && spec(j as usize).is_some_and(|s| key_of(s) == key);
        if let Some(slot) = self.slots.find_mut(h, same) {
            let old = slot.1 as usize;
            slot.1 = i as u32;
            return Some(old);
        }
        self.slots.insert_unique(h, (h, i as u32), |&(sh, _)| sh);
        None
    }

    /// Forget spec `i` (whose key is `key`).
    pub(super) fn remove(&mut self, key: ExactKey<'_>, i: usize) {
        let h = hash_of(key);
        if let Ok(e) = self
            .slots
            .find_entry(h, |&(sh, j)| sh == h && j as usize == i)
        {
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::Field;

    #[test]
    fn finds_replaces_and_forgets_through_the_specs() {
        let m = |v| Match::any().exact(Field::NwProto, v);
        let mut specs = vec![
            Some(RuleSpec::new(0, 5, m(6))),
            Some(RuleSpec::new(0, 5, m(17))),
            Some(RuleSpec::new(1, 5, m(6))),
        ];
        let mut ix = ExactIndex::default();
        for (i, s) in specs.iter().enumerate() {
            let s = s.as_ref().unwrap();
            assert_eq!(ix.insert(key_of(s), i, |j| specs[j].as_ref()), None);
        }
        let probe = m(6);
        assert_eq!(ix.get((0, 5, &probe), |j| specs[j].as_ref()), Some(0));
        assert_eq!(ix.get((1, 5, &probe), |j| specs[j].as_ref()), Some(2));
        assert_eq!(ix.get((0, 4, &probe), |j| specs[j].as_ref()), None);
        // The same key again: the new index stands in for the old.
        specs.push(Some(RuleSpec::new(0, 5, m(6))));
        let r = ix.insert((0, 5, &probe), 3, |j| specs[j].as_ref());
        assert_eq!(r, Some(0));
        specs[0] = None;
        assert_eq!(ix.get((0, 5, &probe), |j| specs[j].as_ref()), Some(3));
        ix.remove((0, 5, &probe), 3);
        assert_eq!(ix.get((0, 5, &probe), |j| specs[j].as_ref()), None);
        assert_eq!(ix.get((0, 5, &m(17)), |j| specs[j].as_ref()), Some(1));
    }
}
