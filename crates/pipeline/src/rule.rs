//! Rules: a priority, a match (value/mask over the flow key), actions and an optional
//! `goto_table`, with packet and byte counters that live as long as the rule.

use flowpath_packet::{Action, Field, FlowKey};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Number of tables a pipeline may have (OpenFlow's 0..=254).
pub const MAX_TABLES: usize = 255;

/// A match: the packet's key, ANDed with `mask`, must equal `value` (kept pre-masked).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    pub value: FlowKey,
    pub mask: FlowKey,
}

impl Match {
    /// Matches every packet.
    pub fn any() -> Match {
        Match::default()
    }

    /// Add a condition: `(key.field & mask) == value & mask`.
    pub fn with(mut self, field: Field, value: u128, mask: u128) -> Match {
        let mask = mask & field.full_mask();
        let mut m = self.mask.get(field) | mask;
        m &= field.full_mask();
        self.mask.set(field, m);
        let old = self.value.get(field) & !mask;
        self.value.set(field, old | (value & mask));
        self
    }

    /// Add an exact-match condition on `field`.
    pub fn exact(self, field: Field, value: u128) -> Match {
        self.with(field, value, field.full_mask())
    }

    /// Add a prefix condition (IP addresses): the top `len` bits of `field` equal `value`'s.
    pub fn prefix(self, field: Field, value: u128, len: u32) -> Match {
        let bits = field.bits();
        let len = len.min(bits);
        let mask = if len == 0 {
            0
        } else {
            (field.full_mask() >> (bits - len)) << (bits - len)
        };
        self.with(field, value, mask)
    }

    /// Does `key` satisfy this match?
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.mask, &self.value)
    }

    /// Is `self` at least as general as `other` (every packet `other` matches, `self`
    /// matches too)? OpenFlow's non-strict selection for modify and delete.
    pub fn covers(&self, other: &Match) -> bool {
        self.mask.is_subset_of(&other.mask) && other.value.and(&self.mask) == self.value
    }
}

impl fmt::Debug for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Match{{")?;
        let mut first = true;
        for field in Field::ALL {
            if matches!(field, Field::Ipv4Src | Field::Ipv4Dst) {
                continue;
            }
            let m = self.mask.get(field);
            if m != 0 {
                if !first {
                    write!(f, ",")?;
                }
                first = false;
                if m == field.full_mask() {
                    write!(f, "{}={:#x}", field, self.value.get(field))?;
                } else {
                    write!(f, "{}={:#x}/{:#x}", field, self.value.get(field), m)?;
                }
            }
        }
        write!(f, "}}")
    }
}

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
        }
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
        if let Some(g) = self.goto {
            if g <= self.table || g as usize >= MAX_TABLES {
                return Err(RuleError::BadGoto {
                    table: self.table,
                    goto: g,
                });
            }
        }
        for (i, a) in self.actions.iter().enumerate() {
            let bad = match a {
                Action::SetVlanVid(v) => *v > 0x0fff,
                Action::SetVlanPcp(p) => *p > 7,
                Action::PushVlan { tpid } => *tpid != 0x8100 && *tpid != 0x88a8,
                Action::Output(p) => *p == 0,
                Action::SetTunnel(id) => *id > 0x00ff_ffff,
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
    BadGoto { table: u8, goto: u8 },
    BadAction { index: usize, action: Action },
    NoSuchRule(RuleId),
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
        }
    }

    pub fn selects(&self, spec: &RuleSpec) -> bool {
        if self.table.is_some_and(|t| t != spec.table) {
            return false;
        }
        if (spec.cookie ^ self.cookie) & self.cookie_mask != 0 {
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
        }
    }
}

impl std::error::Error for RuleError {}

/// A rule's identity: unique for the life of the rule store, increasing with insertion
/// order, so that among equal-priority overlapping rules the oldest wins deterministically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u64);

/// Nanoseconds on a monotonic clock that starts when the process first asks for it: the
/// time base of rule ages and idle times (cheap to store in an atomic).
pub fn now_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    // Start at 1 so that 0 can mean "never".
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
        + 1
}

/// Packet and byte counters of one rule, and when it was added and last used; shared by
/// every snapshot the rule is in.
#[derive(Debug)]
pub struct RuleCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// [`now_ns`] when the rule was added.
    pub added_ns: u64,
    /// [`now_ns`] when counts were last credited (packets seen), or `added_ns`. Counts
    /// reach rules when the datapath pushes megaflow stats, so this lags by that period.
    pub last_used_ns: AtomicU64,
}

impl Default for RuleCounters {
    fn default() -> Self {
        let now = now_ns();
        RuleCounters {
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            added_ns: now,
            last_used_ns: AtomicU64::new(now),
        }
    }
}

impl RuleCounters {
    pub fn add(&self, packets: u64, bytes: u64) {
        if packets != 0 {
            self.packets.fetch_add(packets, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.last_used_ns.store(now_ns(), Ordering::Relaxed);
        }
    }

    pub fn last_used_ns(&self) -> u64 {
        self.last_used_ns.load(Ordering::Relaxed)
    }

    pub fn get(&self) -> (u64, u64) {
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// An installed rule.
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: RuleId,
    pub spec: RuleSpec,
    pub counters: Arc<RuleCounters>,
}

impl Rule {
    /// Has this rule's hard timeout passed, or has it been idle past its idle timeout, at
    /// `now` ([`now_ns`])?
    pub fn expired_at(&self, now: u64) -> bool {
        const NS: u64 = 1_000_000_000;
        let hard = self.spec.hard_timeout as u64 * NS;
        let idle = self.spec.idle_timeout as u64 * NS;
        let c = &self.counters;
        (hard != 0 && now.saturating_sub(c.added_ns) >= hard)
            || (idle != 0 && now.saturating_sub(c.last_used_ns()) >= idle)
    }

    /// The classifier order: higher priority first, then older (smaller id) first.
    #[inline]
    pub fn beats(&self, other: &Rule) -> bool {
        (self.spec.priority, std::cmp::Reverse(self.id))
            > (other.spec.priority, std::cmp::Reverse(other.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_masks_top_bits() {
        let m = Match::any().prefix(Field::Ipv4Dst, 0x0a01_0203, 16);
        assert_eq!(m.mask.get(Field::Ipv4Dst), 0xffff_0000);
        assert_eq!(m.value.get(Field::Ipv4Dst), 0x0a01_0000);
        let mut k = FlowKey::ZERO;
        k.set(Field::Ipv4Dst, 0x0a01_ffff);
        assert!(m.matches(&k));
        k.set(Field::Ipv4Dst, 0x0a02_0000);
        assert!(!m.matches(&k));
        assert_eq!(Match::any().prefix(Field::Ipv4Dst, 1, 0), Match::any());
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
