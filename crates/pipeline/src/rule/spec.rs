//! What a rule is before it is installed ([`RuleSpec`]: table, priority, match,
//! instructions, cookie, timeouts and flow_mod flags), how it is checked, why a change is
//! refused ([`RuleError`]), and which installed rules a modify or delete picks
//! ([`Selector`]).

use super::ids::{RuleId, GROUP_MAX, MAX_TABLES};
use super::matching::Match;
use flowpath_packet::{Action, Field};
use std::fmt;

/// What a rule is, before it is installed: everything except its identity and counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSpec {
    pub table: u8,
    pub priority: u16,
    pub matches: Match,
    /// Apply-actions, executed in order; an empty list with no `goto` drops the packet.
    pub actions: Vec<Action>,
    /// Continue classification in this (strictly later) table.
    pub goto: Option<u8>,
    /// Opaque controller value (OpenFlow cookie).
    pub cookie: u64,
    /// Remove the rule after this many seconds without a packet (0 = never).
    pub idle_timeout: u16,
    /// Remove the rule this many seconds after it was added (0 = never).
    pub hard_timeout: u16,
    /// OpenFlow's write-actions instruction (empty: none): merged into the packet's action
    /// set (one action per type, a set-field per field; a later write replaces), which runs
    /// when the pipeline ends at a rule without `goto` (OpenFlow 1.3 §5.10; see
    /// [`crate::ActionSet`]).
    pub write_actions: Vec<Action>,
    /// OpenFlow's clear-actions instruction: empty the action set (before this rule's
    /// `write_actions` are merged in, as the instruction order of §5.9 has it).
    pub clear_actions: bool,
    /// OpenFlow flow_mod flags.
    pub flags: FlowFlags,
}

/// A rule's OpenFlow flow_mod flags (`OFPFF_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowFlags {
    /// Report the rule's removal (FLOW_REMOVED): [`crate::Applied::removed_rules`] and
    /// [`crate::RuleStore::expire_removed`] carry every removed rule with its reason; the
    /// channel sends the message for those with this flag.
    pub send_flow_rem: bool,
    /// Refuse the add ([`RuleError::Overlap`]) when a rule in the same table with the same
    /// priority could match a packet this one matches ([`Match::overlaps`]).
    pub check_overlap: bool,
    /// On a modify: the selected rules' counters start again from zero.
    pub reset_counts: bool,
    /// Accepted and kept, not acted on: flowpath always counts packets and bytes.
    pub no_pkt_counts: bool,
    /// Accepted and kept, not acted on.
    pub no_byt_counts: bool,
}

impl FlowFlags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;

    /// From OpenFlow 1.3's `ofp_flow_mod_flags` bits (unknown bits are ignored).
    pub fn from_bits(b: u16) -> FlowFlags {
        FlowFlags {
            send_flow_rem: b & Self::SEND_FLOW_REM != 0,
            check_overlap: b & Self::CHECK_OVERLAP != 0,
            reset_counts: b & Self::RESET_COUNTS != 0,
            no_pkt_counts: b & Self::NO_PKT_COUNTS != 0,
            no_byt_counts: b & Self::NO_BYT_COUNTS != 0,
        }
    }

    /// As OpenFlow 1.3's `ofp_flow_mod_flags` bits.
    pub fn bits(&self) -> u16 {
        (self.send_flow_rem as u16 * Self::SEND_FLOW_REM)
            | (self.check_overlap as u16 * Self::CHECK_OVERLAP)
            | (self.reset_counts as u16 * Self::RESET_COUNTS)
            | (self.no_pkt_counts as u16 * Self::NO_PKT_COUNTS)
            | (self.no_byt_counts as u16 * Self::NO_BYT_COUNTS)
    }
}

impl RuleSpec {
    pub fn new(table: u8, priority: u16, matches: Match) -> RuleSpec {
        RuleSpec {
            table,
            priority,
            matches,
            actions: Vec::new(),
            goto: None,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            write_actions: Vec::new(),
            clear_actions: false,
            flags: FlowFlags::default(),
        }
    }

    /// Set the write-actions instruction.
    pub fn write_actions(mut self, actions: impl IntoIterator<Item = Action>) -> RuleSpec {
        self.write_actions = actions.into_iter().collect();
        self
    }

    /// Set the clear-actions instruction.
    pub fn clear_actions(mut self, clear: bool) -> RuleSpec {
        self.clear_actions = clear;
        self
    }

    pub fn flags(mut self, flags: FlowFlags) -> RuleSpec {
        self.flags = flags;
        self
    }

    pub fn cookie(mut self, cookie: u64) -> RuleSpec {
        self.cookie = cookie;
        self
    }

    /// The groups this rule's instructions name (apply- and write-actions).
    pub fn groups(&self) -> impl Iterator<Item = u32> + '_ {
        self.actions
            .iter()
            .chain(&self.write_actions)
            .filter_map(|a| match a {
                Action::Group(g) => Some(*g),
                _ => None,
            })
    }

    /// Does any of this rule's instructions output to `port` (OpenFlow's `out_port`
    /// filter)? `InPort` and `Controller` count as the reserved ports `IN_PORT` (0xfffffff8)
    /// and `CONTROLLER` (0xfffffffd).
    pub fn outputs_to(&self, port: u32) -> bool {
        self.actions
            .iter()
            .chain(&self.write_actions)
            .any(|a| match *a {
                Action::Output(p) => p == port,
                Action::InPort => port == 0xffff_fff8,
                Action::Controller { .. } => port == 0xffff_fffd,
                _ => false,
            })
    }

    pub fn actions(mut self, actions: impl IntoIterator<Item = Action>) -> RuleSpec {
        self.actions = actions.into_iter().collect();
        self
    }

    pub fn goto(mut self, table: u8) -> RuleSpec {
        self.goto = Some(table);
        self
    }

    /// Check what the pipeline needs of a rule; the error says which part is wrong.
    pub fn validate(&self) -> Result<(), RuleError> {
        if self.table as usize >= MAX_TABLES {
            return Err(RuleError::BadTable(self.table));
        }
        if self.matches.mask.get(Field::RecircId) != 0 {
            return Err(RuleError::InternalField(Field::RecircId));
        }
        if let Some(g) = self.goto {
            if g <= self.table || g as usize >= MAX_TABLES {
                return Err(RuleError::BadGoto {
                    table: self.table,
                    goto: g,
                });
            }
        }
        let n_apply = self.actions.len();
        for (i, a) in self.actions.iter().chain(&self.write_actions).enumerate() {
            let bad = match a {
                // An instruction held as the last apply-action (see `Action::WriteMetadata`).
                Action::WriteMetadata { value, mask } => {
                    i + 1 != n_apply || *value > 0x00ff_ffff || *mask > 0x00ff_ffff
                }
                Action::SetVlanVid(v) => *v > 0x0fff,
                Action::SetVlanPcp(p) => *p > 7,
                Action::PushVlan { tpid } => *tpid != 0x8100 && *tpid != 0x88a8,
                Action::Output(p) => *p == 0,
                Action::SetTunnel(id) => *id > 0x00ff_ffff,
                Action::Group(g) => *g > GROUP_MAX,
                _ => false,
            };
            if bad {
                return Err(RuleError::BadAction {
                    index: i,
                    action: *a,
                });
            }
        }
        Ok(())
    }
}

/// Why a rule (or a batch of rule changes) was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleError {
    BadTable(u8),
    BadGoto {
        table: u8,
        goto: u8,
    },
    BadAction {
        index: usize,
        action: Action,
    },
    NoSuchRule(RuleId),
    /// The match names a field only the switch sets ([`Field::RecircId`]: which pass of
    /// the pipeline a packet is on; a recirculated packet starts in its table instead).
    InternalField(Field),
    /// `check_overlap`: an installed rule in the same table with the same priority could
    /// match a packet the new one matches (OpenFlow `OFPFMFC_OVERLAP`).
    Overlap {
        table: u8,
        priority: u16,
        with: RuleId,
    },
    /// A rule's `group:N` names no group (OpenFlow `OFPBAC_BAD_OUT_GROUP`).
    UnknownGroupRef {
        group: u32,
    },
    /// An add of a group whose id exists (`OFPGMFC_GROUP_EXISTS`).
    GroupExists(u32),
    /// A modify of a group that does not exist (`OFPGMFC_UNKNOWN_GROUP`).
    NoSuchGroup(u32),
    /// A group id above `GROUP_MAX` (`OFPGMFC_INVALID_GROUP`).
    BadGroupId(u32),
    /// A group flowpath does not implement: fast-failover (`OFPGMFC_BAD_TYPE`), a group
    /// in a bucket (`OFPGMFC_CHAINING_UNSUPPORTED`), an INDIRECT group without exactly one
    /// bucket (`OFPGMFC_INVALID_GROUP`), `dec_ttl` in a bucket, or a bucket action
    /// out of range (`OFPGMFC_BAD_BUCKET`): `what` says which.
    BadGroup {
        group: u32,
        what: &'static str,
    },
}

/// Which installed rules a modify or delete applies to (OpenFlow's flow selection).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// `None`: every table.
    pub table: Option<u8>,
    pub matches: Match,
    /// `Some(p)`: strict — the rule's priority is `p` and its match is exactly `matches`.
    /// `None`: non-strict — every rule whose match is at least as specific as `matches`.
    pub priority: Option<u16>,
    /// Only rules with `(cookie & cookie_mask) == (self.cookie & cookie_mask)`.
    pub cookie: u64,
    pub cookie_mask: u64,
    /// Only rules that output to this port ([`RuleSpec::outputs_to`]; OpenFlow's
    /// `out_port`, which OpenFlow applies to deletes only: leave it `None` for modifies).
    pub out_port: Option<u32>,
    /// Only rules whose instructions name this group (OpenFlow's `out_group`).
    pub out_group: Option<u32>,
}

impl Selector {
    /// Every rule in every table.
    pub fn all() -> Selector {
        Selector {
            table: None,
            matches: Match::any(),
            priority: None,
            cookie: 0,
            cookie_mask: 0,
            out_port: None,
            out_group: None,
        }
    }

    pub fn selects(&self, spec: &RuleSpec) -> bool {
        if self.table.is_some_and(|t| t != spec.table) {
            return false;
        }
        if (spec.cookie ^ self.cookie) & self.cookie_mask != 0 {
            return false;
        }
        if self.out_port.is_some_and(|p| !spec.outputs_to(p)) {
            return false;
        }
        if self
            .out_group
            .is_some_and(|g| !spec.groups().any(|x| x == g))
        {
            return false;
        }
        match self.priority {
            Some(p) => spec.priority == p && spec.matches == self.matches,
            None => self.matches.covers(&spec.matches),
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::BadTable(t) => write!(f, "table {t} is out of range (0..={})", MAX_TABLES - 1),
            RuleError::BadGoto { table, goto } => write!(
                f,
                "goto_table:{goto} in table {table}: the target must be a later table (>{table}) below {MAX_TABLES}"
            ),
            RuleError::BadAction { index, action } => {
                write!(f, "action #{} ({action:?}) has an out-of-range argument", index + 1)
            }
            RuleError::NoSuchRule(id) => write!(f, "no rule with id {}", id.0),
            RuleError::InternalField(field) => write!(
                f,
                "{field} is internal to the switch and cannot be matched (ct(table=T) resumes a packet in table T: match there instead)"
            ),
            RuleError::Overlap { table, priority, with } => write!(
                f,
                "the flow overlaps rule {} in table {table} at priority {priority} (check_overlap)",
                with.0
            ),
            RuleError::UnknownGroupRef { group } => write!(f, "group {group} does not exist"),
            RuleError::GroupExists(g) => write!(f, "group {g} already exists"),
            RuleError::NoSuchGroup(g) => write!(f, "no group with id {g}"),
            RuleError::BadGroupId(g) => write!(
                f,
                "group id {g} is out of range (0..={})",
                GROUP_MAX
            ),
            RuleError::BadGroup { group, what } => write!(f, "group {group}: {what}"),
        }
    }
}

impl std::error::Error for RuleError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_refuses_a_match_on_the_recirculation_id() {
        let r = RuleSpec::new(1, 1, Match::any().exact(Field::RecircId, 2));
        let e = r.validate().unwrap_err();
        assert_eq!(e, RuleError::InternalField(Field::RecircId));
        assert!(e.to_string().contains("recirc_id is internal"), "{e}");
        let ct = Match::any().exact(Field::CtState, 0x22);
        assert!(RuleSpec::new(1, 1, ct).validate().is_ok());
    }

    #[test]
    fn validate_rejects_backward_goto_and_bad_vid() {
        let r = RuleSpec::new(2, 1, Match::any()).goto(2);
        assert!(matches!(r.validate(), Err(RuleError::BadGoto { .. })));
        let r = RuleSpec::new(0, 1, Match::any()).actions([Action::SetVlanVid(5000)]);
        let e = r.validate().unwrap_err();
        assert!(e.to_string().contains("action #1"), "{e}");
        assert!(RuleSpec::new(0, 1, Match::any()).goto(1).validate().is_ok());
    }
}
