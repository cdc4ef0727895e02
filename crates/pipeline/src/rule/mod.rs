//! The vocabulary every other module speaks: what a rule matches (a value/mask over the
//! flow key, and port ranges), what a rule is (priority, actions, instructions, flags),
//! an installed rule with its counters, and the ids that name rules, tables and groups.
//! Nothing here knows a classifier, a table or a snapshot.

mod ids;
mod installed;
mod matching;
mod ports;
mod spec;

pub use ids::{RuleId, RuleRef, GROUP_ALL, GROUP_ANY, GROUP_MAX, GROUP_TABLE, MAX_TABLES};
pub use installed::{now_ns, Rule, RuleCounters};
pub(crate) use matching::prefix_mask;
pub use matching::Match;
pub use ports::{key_ports, port_slot, range_prefixes, PortRange};
pub use spec::{FlowFlags, RuleError, RuleSpec, Selector};
