//! The numbers that name things: tables, rules, where a rule sits in a snapshot, and
//! groups (with OpenFlow's reserved group ids).

/// Number of tables a pipeline may have (OpenFlow's 0..=254).
pub const MAX_TABLES: usize = 255;

/// A rule's identity: unique for the life of the rule store, increasing with insertion
/// order, so that among equal-priority overlapping rules the oldest wins deterministically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u64);

/// The highest group id a group may have (OpenFlow's `OFPG_MAX`).
pub const GROUP_MAX: u32 = 0xffff_ff00;
/// `DeleteGroup(GROUP_ALL)` deletes every group (OpenFlow's `OFPG_ALL`).
pub const GROUP_ALL: u32 = 0xffff_fffc;
/// "Any group" in OpenFlow filters (`OFPG_ANY`): no filter.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// The `table` of a [`RuleRef`] that stands for a group or one of its buckets in a
/// translation's `path` (no rule table has this number: tables are 0..=254).
pub const GROUP_TABLE: u8 = MAX_TABLES as u8;

/// Where a rule sits in a snapshot: (table, index into that table's rules). With table
/// [`GROUP_TABLE`] it stands for a group or one of its buckets that the translation went
/// through ([`crate::GroupTable::resolve`] says which): [`crate::Pipeline::rule`] gives a
/// stand-in rule holding its counters, so a path is credited the same way for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleRef {
    pub table: u8,
    pub index: u32,
}

impl RuleRef {
    /// Does this stand for a group or bucket rather than a rule?
    pub fn is_group(&self) -> bool {
        self.table == GROUP_TABLE
    }
}
