//! A change batch's working copy of the tables it touches (copy-on-write per table): the
//! lookups a change needs (by id, by priority and match, by selector), adds and removals
//! that keep indices valid, and the new snapshot's tables and groups built from it.

use super::exact::{key_of, ExactIndex, ExactKey};
use crate::group::{Group, GroupTable};
use crate::pipeline::Pipeline;
use crate::rule::{Match, Rule, RuleCounters, RuleError, RuleId, RuleSpec, Selector, MAX_TABLES};
use crate::table::Table;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// A change batch's working copy of the tables it touches (copy-on-write per table).
/// Removed rules leave a hole (`None`) until `finish`, so indices stay valid.
pub(super) struct Work<'a> {
    old: &'a Pipeline,
    tables: Vec<Option<TableWork>>,
    /// Rule id → (table, index), built on the first delete-by-id of the batch.
    ids: Option<HashMap<RuleId, (usize, usize)>>,
    /// The group table, copied on the batch's first group change.
    groups: Option<HashMap<u32, Group>>,
}

struct TableWork {
    rules: Vec<Option<Rule>>,
    /// (priority, match) → index, for OpenFlow's "same priority and match replaces". Built
    /// on first need past a few adds: a one-rule change into a 10,000-rule table looks the
    /// match up by a scan instead of hashing every rule's match.
    exact: Option<ExactIndex>,
    /// Adds into this table in this batch, answered by a scan so far.
    scanned_adds: usize,
}

/// Adds into one table answered by scanning before the (priority, match) index is built.
const SCANNED_ADDS: usize = 8;

/// The spec of live rule `i` of `rules`.
fn spec_at<'r>(rules: &'r [Option<Rule>]) -> impl Fn(usize) -> Option<&'r RuleSpec> {
    move |i| rules.get(i)?.as_ref().map(|r| &*r.spec)
}

impl TableWork {
    /// The (priority, match) index, built now if it was not.
    fn exact(&mut self) -> &mut ExactIndex {
        let rules = &self.rules;
        self.exact.get_or_insert_with(|| {
            let mut ix = ExactIndex::with_capacity(rules.len());
            for (i, r) in rules.iter().enumerate() {
                if let Some(r) = r {
                    ix.insert(key_of(&r.spec), i, spec_at(rules));
                }
            }
            ix
        })
    }

    /// The live rule with this key.
    fn find(&mut self, key: ExactKey<'_>) -> Option<usize> {
        if self.exact.is_none() && self.scanned_adds < SCANNED_ADDS {
            self.scanned_adds += 1;
            return self
                .rules
                .iter()
                .position(|r| r.as_ref().is_some_and(|r| key_of(&r.spec) == key));
        }
        self.exact();
        let rules = &self.rules;
        self.exact.as_ref()?.get(key, spec_at(rules))
    }
}

impl<'a> Work<'a> {
    pub(super) fn new(old: &'a Pipeline) -> Work<'a> {
        Work {
            old,
            tables: Vec::new(),
            ids: None,
            groups: None,
        }
    }

    pub(super) fn groups(&mut self) -> &mut HashMap<u32, Group> {
        let old = self.old;
        self.groups.get_or_insert_with(|| {
            old.groups
                .groups()
                .map(|g| (g.spec.id, g.clone()))
                .collect()
        })
    }

    fn has_group(&self, id: u32) -> bool {
        match &self.groups {
            Some(g) => g.contains_key(&id),
            None => self.old.groups.get(id).is_some(),
        }
    }

    /// Every group `spec` names exists (OpenFlow `OFPBAC_BAD_OUT_GROUP` otherwise).
    pub(super) fn check_groups(&self, spec: &RuleSpec) -> Result<(), RuleError> {
        match spec.groups().find(|&g| !self.has_group(g)) {
            Some(group) => Err(RuleError::UnknownGroupRef { group }),
            None => Ok(()),
        }
    }

    /// `check_overlap`: no rule in `spec`'s table with its priority may share a packet.
    pub(super) fn check_overlap(&mut self, spec: &RuleSpec) -> Result<(), RuleError> {
        let t = spec.table as usize;
        let clash =
            |r: &Rule| r.spec.priority == spec.priority && r.spec.matches.overlaps(&spec.matches);
        let with = match self.tables.get(t) {
            Some(Some(tw)) => tw.rules.iter().flatten().find(|r| clash(r)).map(|r| r.id),
            _ => self
                .old
                .tables
                .get(t)
                .and_then(|tb| tb.rules().iter().find(|r| clash(r)).map(|r| r.id)),
        };
        match with {
            Some(with) => Err(RuleError::Overlap {
                table: spec.table,
                priority: spec.priority,
                with,
            }),
            None => Ok(()),
        }
    }

    fn n_tables(&self) -> usize {
        self.tables.len().max(self.old.tables.len())
    }

    fn table(&mut self, t: usize) -> &mut TableWork {
        debug_assert!(t < MAX_TABLES);
        if self.tables.len() <= t {
            self.tables.resize_with(t + 1, || None);
        }
        let old = self.old;
        self.tables[t].get_or_insert_with(|| {
            let rules: Vec<Option<Rule>> = old
                .tables
                .get(t)
                .map(|t| t.rules().iter().cloned().map(Some).collect())
                .unwrap_or_default();
            TableWork {
                rules,
                exact: None,
                scanned_adds: 0,
            }
        })
    }

    /// Add `rule`, replacing one with the same table, priority and match; returns how many
    /// rules that removed (0 or 1).
    pub(super) fn add(&mut self, rule: Rule) -> usize {
        let t = rule.spec.table as usize;
        let id = rule.id;
        let tw = self.table(t);
        let i = tw.rules.len();
        let replaced = tw.find(key_of(&rule.spec));
        let spec = rule.spec.clone();
        tw.rules.push(Some(rule));
        if let Some(ix) = tw.exact.as_mut() {
            ix.insert(key_of(&spec), i, spec_at(&tw.rules));
        }
        if let Some(j) = replaced {
            let gone = tw.rules[j].take().map(|r| r.id);
            if let (Some(ids), Some(gone)) = (self.ids.as_mut(), gone) {
                ids.remove(&gone);
            }
        }
        if let Some(ids) = self.ids.as_mut() {
            ids.insert(id, (t, i));
        }
        replaced.is_some() as usize
    }

    /// The rule at (table, index), which a selection has copied into the batch.
    pub(super) fn rule_mut(&mut self, t: usize, i: usize) -> &mut Rule {
        self.tables[t].as_mut().unwrap().rules[i].as_mut().unwrap()
    }

    pub(super) fn remove(&mut self, t: usize, i: usize) -> Option<Rule> {
        let tw = self.table(t);
        let r = tw.rules[i].take()?;
        if let Some(ix) = tw.exact.as_mut() {
            ix.remove(key_of(&r.spec), i);
        }
        if let Some(ids) = self.ids.as_mut() {
            ids.remove(&r.id);
        }
        Some(r)
    }

    pub(super) fn find_id(&mut self, id: RuleId) -> Option<(usize, usize)> {
        if self.ids.is_none() {
            let mut ids = HashMap::default();
            for t in 0..self.n_tables() {
                match self.tables.get(t) {
                    Some(Some(tw)) => {
                        for (i, r) in tw.rules.iter().enumerate() {
                            if let Some(r) = r {
                                ids.insert(r.id, (t, i));
                            }
                        }
                    }
                    _ => {
                        if let Some(old) = self.old.tables.get(t) {
                            for (i, r) in old.rules().iter().enumerate() {
                                ids.insert(r.id, (t, i));
                            }
                        }
                    }
                }
            }
            self.ids = Some(ids);
        }
        self.ids.as_ref().unwrap().get(&id).copied()
    }

    pub(super) fn find_exact(&mut self, t: usize, priority: u16, m: &Match) -> Option<usize> {
        if t >= self.n_tables() {
            return None;
        }
        self.table(t).find((t as u8, priority, m))
    }

    /// (table, index) of every rule `sel` picks.
    pub(super) fn select(&mut self, sel: &Selector) -> Vec<(usize, usize)> {
        if let Some(p) = sel.priority {
            // Strict: at most one rule per table.
            let tables: Vec<usize> = match sel.table {
                Some(t) => vec![t as usize],
                None => (0..self.n_tables()).collect(),
            };
            return tables
                .into_iter()
                .filter_map(|t| {
                    let i = self.find_exact(t, p, &sel.matches)?;
                    let r = self.table(t).rules[i].as_ref()?;
                    sel.selects(&r.spec).then_some((t, i))
                })
                .collect();
        }
        self.select_where(sel.table, |s| sel.selects(s))
    }

    /// (table, index) of every rule (in `table`, or every table) `pick` picks.
    pub(super) fn select_where(
        &mut self,
        table: Option<u8>,
        pick: impl Fn(&RuleSpec) -> bool,
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for t in 0..self.n_tables() {
            if table.is_some_and(|s| s as usize != t) {
                continue;
            }
            // Look before copying: a table with nothing selected stays shared.
            let hit = match self.tables.get(t) {
                Some(Some(tw)) => tw.rules.iter().flatten().any(|r| pick(&r.spec)),
                _ => self
                    .old
                    .tables
                    .get(t)
                    .is_some_and(|tb| tb.rules().iter().any(|r| pick(&r.spec))),
            };
            if !hit {
                continue;
            }
            let tw = self.table(t);
            for (i, r) in tw.rules.iter().enumerate() {
                if r.as_ref().is_some_and(|r| pick(&r.spec)) {
                    out.push((t, i));
                }
            }
        }
        out
    }

    pub(super) fn clear(&mut self) -> Vec<Rule> {
        let mut gone = Vec::new();
        for t in 0..self.n_tables() {
            let tw = self.table(t);
            gone.extend(tw.rules.drain(..).flatten());
            tw.exact = Some(ExactIndex::default());
        }
        if let Some(ids) = self.ids.as_mut() {
            ids.clear();
        }
        gone
    }

    /// See [`crate::Change::Replace`]. Returns (added ids, modified, removed rules).
    pub(super) fn replace(
        &mut self,
        specs: Vec<RuleSpec>,
        mut new_id: impl FnMut() -> RuleId,
    ) -> (Vec<RuleId>, usize, Vec<Rule>) {
        // Current rules by (table, priority, match).
        let mut old: Vec<Option<Rule>> = Vec::new();
        for t in 0..self.n_tables() {
            let tw = self.table(t);
            old.append(&mut tw.rules);
            tw.exact = Some(ExactIndex::default());
        }
        old.retain(Option::is_some);
        let mut current = ExactIndex::with_capacity(old.len());
        for (i, r) in old.iter().enumerate() {
            let spec = &r.as_ref().expect("holes were dropped").spec;
            current.insert(key_of(spec), i, spec_at(&old));
        }
        self.ids = None;
        // Last duplicate wins: keep only the last spec per key.
        let mut keep = vec![false; specs.len()];
        {
            let mut last = ExactIndex::with_capacity(specs.len());
            for (i, s) in specs.iter().enumerate() {
                if let Some(prev) = last.insert(key_of(s), i, |j| specs.get(j)) {
                    keep[prev] = false;
                }
                keep[i] = true;
            }
        }
        let (mut added, mut modified) = (Vec::new(), 0);
        for (spec, keep) in specs.into_iter().zip(keep) {
            if !keep {
                continue;
            }
            let found = current.get(key_of(&spec), spec_at(&old));
            let rule = match found.and_then(|j| old[j].take()) {
                Some(mut r) => {
                    if *r.spec != spec {
                        modified += 1;
                        r.spec = Arc::new(shrunk(spec));
                    }
                    r
                }
                None => {
                    let id = new_id();
                    added.push(id);
                    Rule {
                        id,
                        spec: Arc::new(shrunk(spec)),
                        counters: Arc::new(RuleCounters::default()),
                    }
                }
            };
            self.add(rule);
        }
        // Tables the old set used but the new one does not must still be emptied.
        let mut removed: Vec<Rule> = old.into_iter().flatten().collect();
        removed.sort_by_key(|r| r.id);
        (added, modified, removed)
    }

    /// The new snapshot's group table: the batch's copy if a change touched the groups,
    /// else the old snapshot's, shared.
    pub(super) fn group_table(&mut self) -> Arc<GroupTable> {
        match self.groups.take() {
            Some(g) => Arc::new(GroupTable::build(g.into_values())),
            None => self.old.groups.clone(),
        }
    }

    /// Build the new snapshot's tables: rebuilt where touched, shared otherwise.
    pub(super) fn finish(self, old: &Pipeline) -> Vec<Arc<Table>> {
        let n = self.n_tables();
        let mut tables = self.tables;
        let mut new_tables = Vec::with_capacity(n);
        for t in 0..n {
            match tables.get_mut(t).and_then(Option::take) {
                Some(tw) => {
                    let mut rules: Vec<Rule> = tw.rules.into_iter().flatten().collect();
                    // Rules stay in id (insertion) order, as every table the store builds keeps them.
                    rules.sort_by_key(|r| r.id);
                    let prev = old.tables.get(t).map(|t| &**t);
                    new_tables.push(Arc::new(Table::build_from(
                        prev,
                        rules,
                        old.backend,
                        old.seed,
                    )))
                }
                None => new_tables.push(match old.tables.get(t) {
                    Some(table) => table.clone(),
                    None => Arc::new(Table::build(Vec::new(), old.backend, old.seed)),
                }),
            }
        }
        while new_tables.last().is_some_and(|t| t.rules().is_empty()) {
            new_tables.pop();
        }
        new_tables
    }
}

/// `spec` with its action lists no longer than they are: a parser's list may have room
/// to spare, which an installed rule would keep for its life.
pub(super) fn shrunk(mut spec: RuleSpec) -> RuleSpec {
    spec.actions.shrink_to_fit();
    spec.write_actions.shrink_to_fit();
    spec
}
