//! The slow path: tables of prioritised rules (masks and port ranges) looked up by
//! tuple-space search, a decision tree or a list; classifying a key yields a megaflow.
//!
//! The modules stand in layers, each using only those below it: the rule vocabulary
//! (`rule`: matches, port ranges, specs, installed rules, ids); the classifier backends
//! (`wildcards`, `trie`, `tss`, `cuts`) behind `table`; the walk through the tables
//! (`translate`, `actionset`, `group`, `pipeline`); and on top the rule store that
//! publishes snapshots (`store`); `memory` gives back what big rule changes freed.
//! `reference` and `testing` serve the property tests.

mod actionset;
mod cuts;
pub mod group;
pub mod memory;
pub mod pipeline;
pub mod reference;
pub mod rule;
pub mod store;
pub mod table;
mod translate;
mod trie;
mod tss;
mod wildcards;

pub use actionset::ActionSet;
pub use group::{
    Bucket, Group, GroupCounters, GroupSpec, GroupTable, GroupType, GROUP_ALL, GROUP_ANY,
    GROUP_MAX, GROUP_TABLE,
};
pub use pipeline::{Ending, Pipeline, RuleRef, TableVisit, Translation};
pub use rule::{
    key_ports, now_ns, port_slot, FlowFlags, Match, PortRange, Rule, RuleCounters, RuleError,
    RuleId, RuleSpec, Selector, MAX_TABLES,
};
pub use store::{Applied, Change, RemovalReason, Removed, RuleStore};
pub use table::{Backend, Table};
pub use translate::replay_on_key;

#[cfg(feature = "testing")]
pub mod testing;
