//! The store's words: one change to the rule set ([`Change`]), what a batch did
//! ([`Applied`]), and which rules left and why ([`Removed`], [`RemovalReason`]).

use crate::group::GroupSpec;
use crate::rule::{Match, Rule, RuleId, RuleSpec, Selector};
use flowpath_packet::Action;

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
    /// Add a group ([`crate::RuleError::GroupExists`] if its id is taken).
    AddGroup(GroupSpec),
    /// Replace a group's type and buckets ([`crate::RuleError::NoSuchGroup`] if there is none);
    /// rules naming it keep naming it.
    ModifyGroup(GroupSpec),
    /// Delete group N, or every group with [`crate::GROUP_ALL`], and (OpenFlow 1.3 §6.5) every
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

/// What one [`crate::RuleStore::apply`] did.
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

impl Applied {
    /// Record `rule` (if there was one) as removed for `reason`.
    pub(super) fn gone(&mut self, rule: Option<Rule>, reason: RemovalReason) {
        if let Some(rule) = rule {
            self.removed += 1;
            self.removed_rules.push(Removed { rule, reason });
        }
    }
}
