//! [`RuleStore`]: the owner of the rule set. It applies batches of changes and publishes a
//! new versioned [`Pipeline`] snapshot for each (copy-on-write per table), so readers never
//! lock and a batch of changes is seen all at once or not at all.

use crate::group::{Group, GroupSpec, GroupTable, GROUP_ALL};
use crate::pipeline::Pipeline;
use crate::rule::{Match, Rule, RuleCounters, RuleError, RuleId, RuleSpec, Selector, MAX_TABLES};
use crate::table::{Backend, Table};
use arc_swap::ArcSwap;
use flowpath_packet::Action;
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One change to the rule set.
#[derive(Clone, Debug)]
pub enum Change {
    /// Add a rule. OpenFlow semantics: a rule in the same table with the same priority and
    /// identical match is replaced (its counters start again from zero).
    Add(RuleSpec),
    /// Remove one rule by id.
    Delete(RuleId),
    /// Remove the rule with exactly this table, priority and match (OpenFlow delete-strict).
    DeleteStrict {
        table: u8,
        priority: u16,
        matches: Match,
    },
    /// Remove every rule the selector picks (OpenFlow delete / delete-strict).
    DeleteWhere(Selector),
    /// Give every rule the selector picks these instructions — apply-actions, `goto_table`,
    /// write-actions and clear-actions, all replaced (OpenFlow modify / modify-strict); the
    /// rules keep their identity, cookie, timeouts, flags, age and (unless `reset_counts`)
    /// counters. Picking no rule is not an error and adds nothing (OpenFlow 1.1+ semantics).
    Modify {
        selector: Selector,
        actions: Vec<Action>,
        goto: Option<u8>,
        write_actions: Vec<Action>,
        clear_actions: bool,
        /// OpenFlow's `OFPFF_RESET_COUNTS`: the picked rules' counters start from zero
        /// (their age stays).
        reset_counts: bool,
    },
    /// Remove every rule.
    Clear,
    /// Make the rule set exactly these rules (`ovs-ofctl replace-flows`). A rule with the
    /// same table, priority and match as an installed one keeps that one's identity,
    /// counters and age, and takes the new actions, cookie and timeouts; the others are
    /// added; installed rules not in the list are removed. Among duplicates the last wins.
    Replace(Vec<RuleSpec>),
    /// Add a group ([`RuleError::GroupExists`] if its id is taken).
    AddGroup(GroupSpec),
    /// Replace a group's type and buckets ([`RuleError::NoSuchGroup`] if there is none);
    /// rules naming it keep naming it.
    ModifyGroup(GroupSpec),
    /// Delete group N, or every group with [`GROUP_ALL`], and (OpenFlow 1.3 §6.5) every
    /// rule whose instructions name a deleted group (removed with
    /// [`RemovalReason::GroupDelete`]). A group that does not exist is not an error.
    DeleteGroup(u32),
}

/// Why a rule left the rule set (OpenFlow's `ofp_flow_removed_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovalReason {
    IdleTimeout,
    HardTimeout,
    /// A delete, clear or replace.
    Delete,
    /// Its group was deleted.
    GroupDelete,
}

impl RemovalReason {
    /// OpenFlow 1.3's `ofp_flow_removed_reason` value.
    pub fn code(self) -> u8 {
        match self {
            RemovalReason::IdleTimeout => 0,
            RemovalReason::HardTimeout => 1,
            RemovalReason::Delete => 2,
            RemovalReason::GroupDelete => 3,
        }
    }
}

/// A rule that was removed, with its final counters (the `Rule` still holds them: counts
/// the datapath pushes after the removal still land there) and why.
#[derive(Clone, Debug)]
pub struct Removed {
    pub rule: Rule,
    pub reason: RemovalReason,
}

/// What one [`RuleStore::apply`] did.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// The version of the snapshot published (unchanged when `changes` was empty).
    pub version: u64,
    /// Ids of rules added, in order.
    pub added: Vec<RuleId>,
    /// Rules whose actions (or cookie and timeouts, for `Replace`) were changed in place.
    pub modified: usize,
    /// Rules removed (including rules replaced by an identical-match `Add`).
    pub removed: usize,
    /// Every rule removed by a delete, clear, replace or group delete, with the reason,
    /// in order (for FLOW_REMOVED: the channel sends it for rules with `send_flow_rem`).
    /// Rules replaced by an identical-match `Add` are not listed (OpenFlow sends nothing).
    pub removed_rules: Vec<Removed>,
    /// Groups added, modified and removed.
    pub groups_added: usize,
    pub groups_modified: usize,
    pub groups_removed: usize,
}

/// The owner of the rule set: applies changes and publishes versioned snapshots.
#[derive(Debug)]
pub struct RuleStore {
    current: ArcSwap<Pipeline>,
    version: AtomicU64,
    next_id: AtomicU64,
    writer: Mutex<()>,
}

impl RuleStore {
    pub fn new(backend: Backend) -> RuleStore {
        // A per-process random seed keeps crafted keys from aiming at one hash bucket.
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5eed);
            h.finish()
        };
        RuleStore {
            current: ArcSwap::from_pointee(Pipeline::empty(backend, seed)),
            version: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            writer: Mutex::new(()),
        }
    }

    /// The version of the newest snapshot: one atomic load, cheap enough to check per batch.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The newest snapshot.
    pub fn snapshot(&self) -> Arc<Pipeline> {
        self.current.load_full()
    }

    /// Apply `changes` atomically, in order: either all are valid and one new snapshot is
    /// published, or nothing changes. Each change costs O(1) per rule it adds or names
    /// (selectors scan their tables), and each touched table is rebuilt once, so a batch
    /// of 100,000 adds is linear.
    pub fn apply(&self, changes: Vec<Change>) -> Result<Applied, RuleError> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current.load_full();
        let mut work = Work::new(&old);
        let mut done = Applied::default();
        let any = !changes.is_empty();
        // Ids are handed out under the writer lock; a refused batch gives its ids back.
        let first_id = self.next_id.load(Ordering::Relaxed);
        if let Err(e) = self.apply_to(&mut work, &mut done, changes) {
            self.next_id.store(first_id, Ordering::Relaxed);
            return Err(e);
        }
        if !any {
            done.version = old.version;
            return Ok(done);
        }
        let groups = match work.groups.take() {
            Some(g) => Arc::new(GroupTable::build(g.into_values())),
            None => old.groups.clone(),
        };
        let new_tables = work.finish(&old);
        let version = old.version + 1;
        self.current.store(Arc::new(Pipeline {
            tables: new_tables,
            version,
            backend: old.backend,
            seed: old.seed,
            groups,
        }));
        self.version.store(version, Ordering::Release);
        done.version = version;
        Ok(done)
    }

    fn apply_to(
        &self,
        work: &mut Work<'_>,
        done: &mut Applied,
        changes: Vec<Change>,
    ) -> Result<(), RuleError> {
        for change in changes {
            match change {
                Change::Add(spec) => {
                    spec.validate()?;
                    work.check_groups(&spec)?;
                    if spec.flags.check_overlap {
                        work.check_overlap(&spec)?;
                    }
                    let id = self.new_id();
                    done.removed += work.add(Rule {
                        id,
                        spec: Arc::new(spec),
                        counters: Arc::new(RuleCounters::default()),
                    });
                    done.added.push(id);
                }
                Change::Delete(id) => {
                    let (t, i) = work.find_id(id).ok_or(RuleError::NoSuchRule(id))?;
                    done.gone(work.remove(t, i), RemovalReason::Delete);
                }
                Change::DeleteStrict {
                    table,
                    priority,
                    matches,
                } => {
                    if let Some(i) = work.find_exact(table as usize, priority, &matches) {
                        done.gone(work.remove(table as usize, i), RemovalReason::Delete);
                    }
                }
                Change::DeleteWhere(sel) => {
                    for (t, i) in work.select(&sel) {
                        done.gone(work.remove(t, i), RemovalReason::Delete);
                    }
                }
                Change::Modify {
                    selector,
                    actions,
                    goto,
                    write_actions,
                    clear_actions,
                    reset_counts,
                } => {
                    let picked = work.select(&selector);
                    for (t, i) in picked {
                        let rule = work.tables[t].as_mut().unwrap().rules[i].as_mut().unwrap();
                        let mut spec = (*rule.spec).clone();
                        spec.actions.clone_from(&actions);
                        spec.goto = goto;
                        spec.write_actions.clone_from(&write_actions);
                        spec.clear_actions = clear_actions;
                        spec.validate()?;
                        rule.spec = Arc::new(spec);
                        if reset_counts {
                            rule.counters = Arc::new(RuleCounters {
                                added_ns: rule.counters.added_ns,
                                ..RuleCounters::default()
                            });
                        }
                        let spec = rule.spec.clone();
                        work.check_groups(&spec)?;
                        done.modified += 1;
                    }
                }
                Change::Clear => {
                    for r in work.clear() {
                        done.gone(Some(r), RemovalReason::Delete);
                    }
                }
                Change::Replace(specs) => {
                    for spec in &specs {
                        spec.validate()?;
                        work.check_groups(spec)?;
                    }
                    let (added, modified, removed) = work.replace(specs, || self.new_id());
                    done.added.extend(added);
                    done.modified += modified;
                    for r in removed {
                        done.gone(Some(r), RemovalReason::Delete);
                    }
                }
                Change::AddGroup(spec) => {
                    spec.validate()?;
                    let groups = work.groups();
                    if groups.contains_key(&spec.id) {
                        return Err(RuleError::GroupExists(spec.id));
                    }
                    groups.insert(spec.id, Group::new(spec));
                    done.groups_added += 1;
                }
                Change::ModifyGroup(spec) => {
                    spec.validate()?;
                    let groups = work.groups();
                    let Some(g) = groups.get_mut(&spec.id) else {
                        return Err(RuleError::NoSuchGroup(spec.id));
                    };
                    *g = g.modified(spec);
                    done.groups_modified += 1;
                }
                Change::DeleteGroup(id) => {
                    let groups = work.groups();
                    let gone: Vec<u32> = if id == GROUP_ALL {
                        groups.drain().map(|(id, _)| id).collect()
                    } else {
                        groups.remove(&id).map(|_| id).into_iter().collect()
                    };
                    done.groups_removed += gone.len();
                    if !gone.is_empty() {
                        let names = |s: &RuleSpec| s.groups().any(|g| gone.contains(&g));
                        for (t, i) in work.select_where(None, names) {
                            done.gone(work.remove(t, i), RemovalReason::GroupDelete);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn new_id(&self) -> RuleId {
        RuleId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// [`RuleStore::expire`], with why each rule went (hard timeout when both passed).
    pub fn expire_removed(&self, now: u64) -> Result<Vec<Removed>, RuleError> {
        const NS: u64 = 1_000_000_000;
        Ok(self
            .expire(now)?
            .into_iter()
            .map(|rule| {
                let hard = rule.spec.hard_timeout as u64 * NS;
                let reason = if hard != 0 && now.saturating_sub(rule.counters.added_ns) >= hard {
                    RemovalReason::HardTimeout
                } else {
                    RemovalReason::IdleTimeout
                };
                Removed { rule, reason }
            })
            .collect())
    }

    /// Remove, in one atomic change, every rule whose hard timeout has passed or that has
    /// been idle longer than its idle timeout at `now` ([`crate::rule::now_ns`]). Returns
    /// the removed rules with their final counters. Idle time is measured from the last
    /// time counts were credited to the rule, so it lags by the datapath's stats-push period.
    pub fn expire(&self, now: u64) -> Result<Vec<Rule>, RuleError> {
        let snap = self.snapshot();
        let expired: Vec<Rule> = snap
            .rules()
            .filter(|r| r.expired_at(now))
            .cloned()
            .collect();
        if expired.is_empty() {
            return Ok(expired);
        }
        // A rule removed or changed meanwhile is not an error: delete what is still there.
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.current.load_full();
        drop(_w);
        let still: std::collections::HashSet<RuleId> = cur.rules().map(|r| r.id).collect();
        let changes = expired
            .iter()
            .filter(|r| still.contains(&r.id))
            .map(|r| Change::Delete(r.id))
            .collect();
        self.apply(changes)?;
        Ok(expired)
    }

    /// Convenience: add rules in one atomic change.
    pub fn add(&self, specs: impl IntoIterator<Item = RuleSpec>) -> Result<Vec<RuleId>, RuleError> {
        Ok(self
            .apply(specs.into_iter().map(Change::Add).collect())?
            .added)
    }
}

impl Applied {
    fn gone(&mut self, rule: Option<Rule>, reason: RemovalReason) {
        if let Some(rule) = rule {
            self.removed += 1;
            self.removed_rules.push(Removed { rule, reason });
        }
    }
}

type ExactKey = (u16, Match);

/// A change batch's working copy of the tables it touches (copy-on-write per table).
/// Removed rules leave a hole (`None`) until `finish`, so indices stay valid.
struct Work<'a> {
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
    /// match up by a scan instead of hashing every rule's 200-byte match.
    exact: Option<HashMap<ExactKey, usize>>,
    /// Adds into this table in this batch, answered by a scan so far.
    scanned_adds: usize,
}

/// Adds into one table answered by scanning before the (priority, match) map is built.
const SCANNED_ADDS: usize = 8;

impl TableWork {
    /// The (priority, match) map, built now if it was not.
    fn exact(&mut self) -> &mut HashMap<ExactKey, usize> {
        let rules = &self.rules;
        self.exact.get_or_insert_with(|| {
            rules
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().map(|r| ((r.spec.priority, r.spec.matches), i)))
                .collect()
        })
    }

    /// The live rule with this priority and match.
    fn find(&mut self, key: &ExactKey) -> Option<usize> {
        if self.exact.is_none() && self.scanned_adds < SCANNED_ADDS {
            self.scanned_adds += 1;
            return self.rules.iter().position(|r| {
                r.as_ref()
                    .is_some_and(|r| r.spec.priority == key.0 && r.spec.matches == key.1)
            });
        }
        self.exact().get(key).copied()
    }
}

impl<'a> Work<'a> {
    fn new(old: &'a Pipeline) -> Work<'a> {
        Work {
            old,
            tables: Vec::new(),
            ids: None,
            groups: None,
        }
    }

    fn groups(&mut self) -> &mut HashMap<u32, Group> {
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
    fn check_groups(&self, spec: &RuleSpec) -> Result<(), RuleError> {
        match spec.groups().find(|&g| !self.has_group(g)) {
            Some(group) => Err(RuleError::UnknownGroupRef { group }),
            None => Ok(()),
        }
    }

    /// `check_overlap`: no rule in `spec`'s table with its priority may share a packet.
    fn check_overlap(&mut self, spec: &RuleSpec) -> Result<(), RuleError> {
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
    fn add(&mut self, rule: Rule) -> usize {
        let t = rule.spec.table as usize;
        let id = rule.id;
        let key = (rule.spec.priority, rule.spec.matches);
        let tw = self.table(t);
        let i = tw.rules.len();
        let replaced = tw.find(&key);
        tw.rules.push(Some(rule));
        if let Some(map) = tw.exact.as_mut() {
            map.insert(key, i);
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

    fn remove(&mut self, t: usize, i: usize) -> Option<Rule> {
        let tw = self.table(t);
        let r = tw.rules[i].take()?;
        if let Some(map) = tw.exact.as_mut() {
            map.remove(&(r.spec.priority, r.spec.matches));
        }
        if let Some(ids) = self.ids.as_mut() {
            ids.remove(&r.id);
        }
        Some(r)
    }

    fn find_id(&mut self, id: RuleId) -> Option<(usize, usize)> {
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

    fn find_exact(&mut self, t: usize, priority: u16, m: &Match) -> Option<usize> {
        if t >= self.n_tables() {
            return None;
        }
        self.table(t).exact().get(&(priority, *m)).copied()
    }

    /// (table, index) of every rule `sel` picks.
    fn select(&mut self, sel: &Selector) -> Vec<(usize, usize)> {
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
    fn select_where(
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

    fn clear(&mut self) -> Vec<Rule> {
        let mut gone = Vec::new();
        for t in 0..self.n_tables() {
            let tw = self.table(t);
            gone.extend(tw.rules.drain(..).flatten());
            tw.exact = Some(HashMap::default());
        }
        if let Some(ids) = self.ids.as_mut() {
            ids.clear();
        }
        gone
    }

    /// See [`Change::Replace`]. Returns (added ids, modified, removed rules).
    fn replace(
        &mut self,
        specs: Vec<RuleSpec>,
        mut new_id: impl FnMut() -> RuleId,
    ) -> (Vec<RuleId>, usize, Vec<Rule>) {
        // Current rules by (table, priority, match).
        let mut current: HashMap<(u8, ExactKey), Rule> = HashMap::default();
        for t in 0..self.n_tables() {
            let tw = self.table(t);
            for r in tw.rules.drain(..).flatten() {
                current.insert((t as u8, (r.spec.priority, r.spec.matches)), r);
            }
            tw.exact = Some(HashMap::default());
        }
        self.ids = None;
        // Last duplicate wins: keep the index of the last spec per key.
        let mut last: HashMap<(u8, ExactKey), usize> =
            HashMap::with_capacity_and_hasher(specs.len(), Default::default());
        for (i, s) in specs.iter().enumerate() {
            last.insert((s.table, (s.priority, s.matches)), i);
        }
        let (mut added, mut modified) = (Vec::new(), 0);
        for (i, spec) in specs.into_iter().enumerate() {
            let key = (spec.table, (spec.priority, spec.matches));
            if last[&key] != i {
                continue;
            }
            let rule = match current.remove(&key) {
                Some(mut r) => {
                    if *r.spec != spec {
                        modified += 1;
                        r.spec = Arc::new(spec);
                    }
                    r
                }
                None => {
                    let id = new_id();
                    added.push(id);
                    Rule {
                        id,
                        spec: Arc::new(spec),
                        counters: Arc::new(RuleCounters::default()),
                    }
                }
            };
            self.add(rule);
        }
        // Tables the old set used but the new one does not must still be emptied.
        let mut removed: Vec<Rule> = current.into_values().collect();
        removed.sort_by_key(|r| r.id);
        (added, modified, removed)
    }

    /// Build the new snapshot's tables: rebuilt where touched, shared otherwise.
    fn finish(self, old: &Pipeline) -> Vec<Arc<Table>> {
        let n = self.n_tables();
        let mut tables = self.tables;
        let mut new_tables = Vec::with_capacity(n);
        for t in 0..n {
            match tables.get_mut(t).and_then(Option::take) {
                Some(tw) => {
                    let mut rules: Vec<Rule> = tw.rules.into_iter().flatten().collect();
                    // Keep rule order stable by id (insertion order), as before.
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
