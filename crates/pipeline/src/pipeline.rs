//! The pipeline: tables 0..N walked with `goto_table`, producing a megaflow.
//!
//! [`Pipeline`] is an immutable, versioned snapshot (the rule store, `store/`, publishes a
//! new one for every batch of changes); [`Pipeline::translate`] classifies a key through it,
//! with each action's effect on the key in `translate.rs`.

use crate::actionset::ActionSet;
use crate::group::{Expand, GroupTable};
use crate::rule::{Rule, RuleSpec, GROUP_TABLE};
use crate::table::{Backend, Table};
use crate::translate::stamp_controller;
use flowpath_packet::{Action, Field, FlowKey};
use smallvec::SmallVec;
use std::sync::Arc;

pub use crate::rule::RuleRef;
pub use crate::translate::Ending;

/// The slow path's answer for one key: a megaflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The flattened actions, in execution order.
    pub actions: SmallVec<[Action; 4]>,
    /// Every key bit the decision depended on: any packet that agrees with the classified
    /// key on these bits gets the same actions.
    pub mask: FlowKey,
    /// The rules that matched, in table order (for counters).
    pub path: SmallVec<[RuleRef; 4]>,
    pub ending: Ending,
}

/// One table a traced key met ([`Pipeline::translate_traced`]).
#[derive(Clone, Copy, Debug)]
pub struct TableVisit {
    pub table: u8,
    /// The rule that matched; `None`: no rule did (table-miss, the packet is dropped).
    pub rule: Option<RuleRef>,
    /// The key as this table saw it, and as the rule's actions left it.
    pub key_before: FlowKey,
    pub key_after: FlowKey,
    /// The megaflow's mask so far: every bit the decision has depended on up to here.
    pub mask: FlowKey,
    /// How many of the translation's actions exist after this table.
    pub actions_after: usize,
}

impl TableVisit {
    fn missed(table: u8, k: &FlowKey, wc: &FlowKey, actions: usize) -> TableVisit {
        TableVisit {
            table,
            rule: None,
            key_before: *k,
            key_after: *k,
            mask: *wc,
            actions_after: actions,
        }
    }
}

/// An immutable snapshot of all tables.
#[derive(Debug)]
pub struct Pipeline {
    // The rule store builds snapshots field by field.
    pub(crate) tables: Vec<Arc<Table>>,
    pub(crate) version: u64,
    pub(crate) backend: Backend,
    pub(crate) seed: u64,
    pub(crate) groups: Arc<GroupTable>,
}

impl Pipeline {
    pub fn empty(backend: Backend, seed: u64) -> Pipeline {
        Pipeline {
            tables: Vec::new(),
            version: 0,
            backend,
            seed,
            groups: Arc::default(),
        }
    }

    /// The group table published with these rules.
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn table(&self, t: u8) -> Option<&Table> {
        self.tables.get(t as usize).map(|t| &**t)
    }

    pub fn n_tables(&self) -> usize {
        self.tables.len()
    }

    /// The rule `r` names; for a group or bucket entry of a path, a stand-in holding its
    /// counters (see [`RuleRef`]).
    pub fn rule(&self, r: RuleRef) -> &Rule {
        if r.table == GROUP_TABLE {
            return self.groups.slot(r.index);
        }
        &self.tables[r.table as usize].rules()[r.index as usize]
    }

    /// Bytes the snapshot's tables take, rules included ([`Table::memory_bytes`]).
    pub fn memory_bytes(&self) -> usize {
        self.tables.iter().map(|t| t.memory_bytes()).sum()
    }

    /// All rules, table by table.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.tables.iter().flat_map(|t| t.rules().iter())
    }

    /// Classify `key` through the tables and build its megaflow.
    pub fn translate(&self, key: &FlowKey) -> Translation {
        self.walk(key, |_| {})
    }

    /// [`Pipeline::translate`], telling `visit` about every table the key meets (for
    /// `flowpath trace`): the same walk, so a trace never disagrees with the datapath.
    pub fn translate_traced(&self, key: &FlowKey, visit: impl FnMut(&TableVisit)) -> Translation {
        self.walk(key, visit)
    }

    #[inline(always)]
    fn walk(&self, key: &FlowKey, mut visit: impl FnMut(&TableVisit)) -> Translation {
        let mut k = *key;
        let mut wc = FlowKey::ZERO;
        // Megaflows are per ingress port: outputs depend on it (no output to in_port).
        wc.set_all(Field::InPort);
        let mut actions = SmallVec::new();
        let mut path = SmallVec::new();
        // A recirculated key (after `ct(table=T)`) resumes in table T, and its megaflow
        // is for that pass only; a first pass leaves the recirculation id out of the mask,
        // which keeps stateless megaflows as wide as without connection tracking.
        let mut t = match flowpath_packet::ct::recirc_table(&k) {
            Some(table) => {
                wc.set_all(Field::RecircId);
                table
            }
            None => 0,
        };
        // The OpenFlow action set (write_actions), and the last group compensation.
        let mut set = ActionSet::default();
        let mut tail = None;
        let ending = loop {
            let Some(table) = self.tables.get(t as usize) else {
                visit(&TableVisit::missed(t, &k, &wc, actions.len()));
                break Ending::TableMiss(t);
            };
            let Some(i) = table.lookup(&k, &mut wc) else {
                visit(&TableVisit::missed(t, &k, &wc, actions.len()));
                break Ending::TableMiss(t);
            };
            let before = k;
            let added = actions.len();
            let rule = RuleRef { table: t, index: i };
            path.push(rule);
            let spec = &table.rules()[i as usize].spec;
            let mut ex = Expand {
                k: &mut k,
                wc: &mut wc,
                out: &mut actions,
                path: &mut path,
                tail: &mut tail,
            };
            let end = run_instructions(&mut ex, &self.groups, &mut set, t, spec);
            carry_metadata(&mut ex, added, key, before.get(Field::Metadata));
            visit(&TableVisit {
                table: t,
                rule: Some(rule),
                key_before: before,
                key_after: k,
                mask: wc,
                actions_after: actions.len(),
            });
            if let Some(end) = end {
                break end;
            }
            match spec.goto {
                Some(g) => t = g,
                None => break Ending::Done,
            }
        };
        Translation {
            actions,
            mask: wc,
            path,
            ending,
        }
    }
}

/// A recirculated pass keeps the packet's metadata register: where this rule's actions
/// (from `added` on) recirculate (`ct(table=T)`) while the walk's metadata (`md`, as the
/// rule found it: `write_metadata` is the rule's last instruction) differs from the
/// packet's own (`start`'s), a full `write_metadata` of it goes right before the first
/// such `ct`, for the datapath to put in the key it recirculates. Either way the
/// metadata is un-wildcarded: whether it is written depends on it.
fn carry_metadata(ex: &mut Expand<'_>, added: usize, start: &FlowKey, md: u128) {
    let recirculates = |a: &Action| matches!(a, Action::Ct(id) if id.spec().table.is_some());
    let Some(at) = ex.out[added..].iter().position(recirculates) else {
        return;
    };
    ex.wc.set_all(Field::Metadata);
    if md != start.get(Field::Metadata) {
        let write = Action::WriteMetadata {
            value: md as u32,
            mask: Field::Metadata.full_mask() as u32,
        };
        ex.out.insert(added + at, write);
    }
}

/// Run the instructions of `spec`, the rule table `t` matched (OpenFlow 1.3 §5.9):
/// apply-actions (groups expanded), clear-actions, write-actions into `set`; and when the
/// walk ends at this rule, the action set (§5.10). Returns how the walk ended, if it did
/// here for a reason other than a rule without `goto_table`.
#[inline(always)]
fn run_instructions(
    ex: &mut Expand<'_>,
    groups: &GroupTable,
    set: &mut ActionSet,
    t: u8,
    spec: &RuleSpec,
) -> Option<Ending> {
    let added = ex.out.len();
    let mut end = ex.run(groups, &spec.actions);
    stamp_controller(&mut ex.out[added..], t, spec);
    if spec.clear_actions {
        set.clear();
    }
    if !spec.write_actions.is_empty() {
        let mut w: SmallVec<[Action; 4]> = spec.write_actions.iter().copied().collect();
        stamp_controller(&mut w, t, spec);
        set.write(&w);
    }
    let last = end.is_some() || spec.goto.is_none();
    if last && end.is_none() && !set.is_empty() {
        // The walk ends here: the action set runs (OpenFlow 1.3 §5.10).
        let run: SmallVec<[Action; 8]> = set.actions().collect();
        end = ex.run(groups, &run);
    }
    if last {
        // A group's compensating rewrites with nothing after them are dropped
        // (only this table's: earlier visits have reported their counts).
        if let Some((start, stop)) = *ex.tail {
            if stop == ex.out.len() && start >= added {
                ex.out.truncate(start);
            }
        }
    }
    end
}
