//! Rules: a priority, a match (value/mask over the flow key), actions and an optional
//! `goto_table`, with packet and byte counters that live as long as the rule.

use flowpath_packet::{Action, Field, FlowKey};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Number of tables a pipeline may have (OpenFlow's 0..=254).
pub const MAX_TABLES: usize = 255;

/// An inclusive range of transport ports (`lo..=hi`); `0..=65535` is "any".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange { lo: 0, hi: 0xffff };

    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }

    #[inline(always)]
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }

    /// `Some((value, prefix length))` when the range is exactly one prefix block.
    pub fn as_prefix(&self) -> Option<(u16, u32)> {
        if self.lo > self.hi {
            return None;
        }
        let span = (self.hi - self.lo) as u32 + 1;
        if !span.is_power_of_two() || self.lo as u32 % span != 0 {
            return None;
        }
        Some((self.lo, 16 - span.trailing_zeros()))
    }
}

/// The prefix blocks (value, prefix length) that exactly cover `lo..=hi`, fewest first
/// (at most 30 for 16 bits): how tuple-space search stores a range.
pub fn range_prefixes(lo: u16, hi: u16) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (lo as u32, hi as u32);
    while lo <= hi {
        // The largest aligned block starting at `lo` that ends at or before `hi`.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            1 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, 16 - size.trailing_zeros()));
        lo += size;
    }
    out
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange::ANY
    }
}

/// A match: the packet's key, ANDed with `mask`, must equal `value` (kept pre-masked), and
/// its transport ports must lie in `ports` (source, destination). A range that is one
/// prefix block is kept as a mask instead ([`Match::port_range`]), so `ports` holds only
/// ranges no single mask can express; a port field with a range has no mask bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Match {
    pub value: FlowKey,
    pub mask: FlowKey,
    pub ports: [PortRange; 2],
}

/// The position in [`Match::ports`] of a port field (`TpSrc` 0, `TpDst` 1).
pub fn port_slot(f: Field) -> Option<usize> {
    match f {
        Field::TpSrc => Some(0),
        Field::TpDst => Some(1),
        _ => None,
    }
}

/// The transport ports of a key (source, destination), read straight from its bytes.
#[inline(always)]
pub fn key_ports(key: &FlowKey) -> [u16; 2] {
    let b = key.bytes();
    [
        u16::from_be_bytes([b[28], b[29]]),
        u16::from_be_bytes([b[30], b[31]]),
    ]
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

    /// Add a port range condition on `TpSrc` or `TpDst`: kept as a mask when the range is
    /// one prefix block (`1024-2047` is `0x400/0xfc00`), as a range otherwise. The field
    /// must not already have mask bits or a range (the flow syntax refuses duplicates).
    pub fn port_range(mut self, field: Field, range: PortRange) -> Match {
        let slot = port_slot(field).expect("port_range is for TpSrc and TpDst");
        match range.as_prefix() {
            Some((v, len)) => self.prefix(field, v as u128, len),
            None => {
                self.ports[slot] = range;
                self
            }
        }
    }

    /// Does the match carry a port range (not expressible as one mask)?
    #[inline(always)]
    pub fn has_ranges(&self) -> bool {
        !(self.ports[0].is_any() && self.ports[1].is_any())
    }

    /// Does `key` satisfy this match?
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.mask, &self.value) && self.ports_match(key)
    }

    /// Do `key`'s ports lie in this match's port ranges?
    #[inline(always)]
    pub fn ports_match(&self, key: &FlowKey) -> bool {
        if !self.has_ranges() {
            return true;
        }
        let p = key_ports(key);
        self.ports[0].contains(p[0]) && self.ports[1].contains(p[1])
    }

    /// The set of values field `f` may take, as an interval, when it is one (no mask bits
    /// and a range, or a prefix mask); `None` for a non-prefix mask.
    pub fn interval(&self, f: Field) -> Option<(u128, u128)> {
        let m = self.mask.get(f);
        let full = f.full_mask();
        if let Some(slot) = port_slot(f) {
            if m == 0 {
                let r = self.ports[slot];
                return Some((r.lo as u128, r.hi as u128));
            }
        }
        // A prefix mask: ones then zeros.
        let inv = !m & full;
        if inv & inv.wrapping_add(1) != 0 {
            return None;
        }
        let v = self.value.get(f);
        Some((v, v | inv))
    }

    /// The smallest interval holding every value field `f` may take (its leading-ones
    /// mask block, cut to its port range if any).
    pub fn hull(&self, f: Field) -> (u128, u128) {
        let w = f.bits();
        let m = self.mask.get(f);
        let lead = (m << (128 - w)).leading_ones().min(w);
        let keep = crate::wildcards::prefix_mask(w, lead);
        let lo = self.value.get(f) & keep;
        let hi = lo | (f.full_mask() & !keep);
        match port_slot(f) {
            Some(slot) => (
                lo.max(self.ports[slot].lo as u128),
                hi.min(self.ports[slot].hi as u128),
            ),
            None => (lo, hi),
        }
    }

    /// Is `self` at least as general as `other` (every packet `other` matches, `self`
    /// matches too)? OpenFlow's non-strict selection for modify and delete.
    pub fn covers(&self, other: &Match) -> bool {
        if !self.has_ranges() && !other.has_ranges() {
            return self.mask.is_subset_of(&other.mask)
                && other.value.and(&self.mask) == self.value;
        }
        // Port fields compare as intervals; a non-prefix mask there is compared exactly.
        for f in [Field::TpSrc, Field::TpDst] {
            let same = self.mask.get(f) == other.mask.get(f)
                && self.value.get(f) == other.value.get(f)
                && self.ports == other.ports;
            let wider = match (self.interval(f), other.hull(f)) {
                (Some((a, b)), (c, d)) => a <= c && d <= b,
                _ => false,
            };
            if !same && !wider {
                return false;
            }
        }
        let mut sm = self.mask;
        let mut om = other.mask;
        for f in [Field::TpSrc, Field::TpDst] {
            sm.set(f, 0);
            om.set(f, 0);
        }
        sm.is_subset_of(&om) && other.value.and(&sm) == self.value.and(&sm)
    }
}

impl Match {
    /// Could one packet match both `self` and `other`? Where both masks have a bit, the
    /// values must agree; on the transport ports, some port must lie in both ranges and
    /// satisfy both masks there (OpenFlow's CHECK_OVERLAP test, exact: two matches that
    /// overlap by this test do share a packet, as far as the key's bits go).
    pub fn overlaps(&self, other: &Match) -> bool {
        let both = self.mask.and(&other.mask);
        if self.value.and(&both) != other.value.and(&both) {
            return false;
        }
        if !self.has_ranges() && !other.has_ranges() {
            return true;
        }
        for (slot, f) in [Field::TpSrc, Field::TpDst].into_iter().enumerate() {
            let (a, b) = (self.ports[slot], other.ports[slot]);
            let (lo, hi) = (a.lo.max(b.lo), a.hi.min(b.hi));
            if lo > hi {
                return false;
            }
            let m = (self.mask.get(f) | other.mask.get(f)) as u16;
            let v = (self.value.get(f) | other.value.get(f)) as u16;
            if next_masked(lo, m, v).is_none_or(|p| p > hi) {
                return false;
            }
        }
        true
    }
}

/// The smallest `p >= lo` with `p & m == v` (`v` within `m`), if any.
fn next_masked(lo: u16, m: u16, v: u16) -> Option<u16> {
    if lo & m == v {
        return Some(lo);
    }
    // Else `p` agrees with `lo` above some bit `i`, has 1 at `i` where `lo` has 0, and
    // below `i` is as small as the mask allows (`v`'s bits); the lowest such `i` is the
    // smallest `p`. Bits above `i` must be compatible with the mask.
    for i in 0..16u32 {
        let bit = 1u16 << i;
        if lo & bit != 0 || (m & bit != 0 && v & bit == 0) {
            continue;
        }
        let above = if i == 15 { 0 } else { !((bit << 1) - 1) };
        if (lo & above & m) != (v & above) {
            continue;
        }
        let below = bit - 1;
        return Some((lo & above) | bit | (v & below));
    }
    None
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
        for (name, r) in ["tp_src", "tp_dst"].iter().zip(self.ports) {
            if !r.is_any() {
                write!(
                    f,
                    "{}{name}={}-{}",
                    if first { "" } else { "," },
                    r.lo,
                    r.hi
                )?;
                first = false;
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
                Action::Group(g) => *g > crate::group::GROUP_MAX,
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
                crate::group::GROUP_MAX
            ),
            RuleError::BadGroup { group, what } => write!(f, "group {group}: {what}"),
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
            self.add_at(packets, bytes, now_ns());
        }
    }

    /// [`RuleCounters::add`] at time `now` ([`now_ns`]): a caller crediting many rules
    /// reads the clock once (a read is a `clock_gettime` call, tens of nanoseconds; an
    /// evicted megaflow credits every rule on its path).
    pub fn add_at(&self, packets: u64, bytes: u64, now: u64) {
        if packets != 0 {
            self.packets.fetch_add(packets, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.last_used_ns.store(now, Ordering::Relaxed);
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
    pub spec: Arc<RuleSpec>,
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
    fn next_masked_is_the_smallest_port_at_or_above() {
        let cases = [
            0u16, 1, 0x00ff, 0x0f0f, 0xff00, 0x8001, 0xfff0, 0xffff, 0x1234,
        ];
        for m in cases {
            for v0 in cases {
                let v = v0 & m;
                for lo in [0u16, 1, 79, 80, 1023, 1024, 0x7fff, 0x8000, 0xfffe, 0xffff] {
                    let want = (lo..=u16::MAX).find(|p| p & m == v);
                    assert_eq!(next_masked(lo, m, v), want, "lo {lo:#x} m {m:#x} v {v:#x}");
                }
            }
        }
    }

    /// The overlap test against brute force over the ports (the other fields: masks).
    #[test]
    fn overlap_is_exact_on_masks_and_port_ranges() {
        let tp = |m: Match, f: Field, v: u128, mask: u128| m.with(f, v, mask);
        let ranged = |f, lo, hi| Match::any().port_range(f, PortRange { lo, hi });
        let matches = [
            Match::any(),
            tp(Match::any(), Field::TpDst, 80, 0xffff),
            tp(Match::any(), Field::TpDst, 0x50, 0xfff0),
            tp(Match::any(), Field::TpDst, 0x1, 0x1),
            tp(Match::any(), Field::TpDst, 0x0, 0x8001),
            ranged(Field::TpDst, 81, 1000),
            ranged(Field::TpDst, 3, 77),
            ranged(Field::TpDst, 1001, 65000),
            tp(ranged(Field::TpSrc, 5, 9), Field::TpDst, 443, 0xffff),
            ranged(Field::TpSrc, 10, 20),
            Match::any().prefix(Field::Ipv4Dst, 0x0a00_0000, 8),
            Match::any()
                .prefix(Field::Ipv4Dst, 0x0a01_0000, 16)
                .exact(Field::NwProto, 6),
            Match::any().prefix(Field::Ipv4Dst, 0x0b00_0000, 8),
            Match::any().exact(Field::NwProto, 17),
        ];
        let mut k = FlowKey::ZERO;
        for a in &matches {
            for b in &matches {
                // Brute force: the non-port bits by masks, the ports by trying all.
                let mut am = a.mask;
                let mut bm = b.mask;
                for f in [Field::TpSrc, Field::TpDst] {
                    am.set(f, 0);
                    bm.set(f, 0);
                }
                let both = am.and(&bm);
                let bits = a.value.and(&both) == b.value.and(&both);
                let mut port_ok = |slot: usize, f: Field| {
                    (0..=u16::MAX).any(|p| {
                        k.set(f, p as u128);
                        let inm = |m: &Match| {
                            k.and(&m.mask).get(f) == m.value.get(f) && m.ports[slot].contains(p)
                        };
                        inm(a) && inm(b)
                    })
                };
                let want = bits && port_ok(0, Field::TpSrc) && port_ok(1, Field::TpDst);
                assert_eq!(a.overlaps(b), want, "{a:?} vs {b:?}");
                assert_eq!(b.overlaps(a), want);
            }
        }
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
