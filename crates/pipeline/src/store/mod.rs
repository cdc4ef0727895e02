//! [`RuleStore`]: the owner of the rule set. It applies batches of changes and publishes a
//! new versioned [`crate::Pipeline`] snapshot for each (copy-on-write per table), so
//! readers never lock and a batch of changes is seen all at once or not at all.
//!
//! In layers, each file using only those above it in this list: what a change and its
//! outcome are (`change.rs`), rules found by table, priority and match (`exact.rs`), a
//! batch's copy-on-write working copy of the tables (`work.rs`), each change carried out
//! on it (`apply.rs`), the store that publishes versioned snapshots (`snapshots.rs`), and
//! rule timeouts (`expire.rs`).

mod apply;
mod change;
mod exact;
mod expire;
mod snapshots;
mod work;

pub use change::{Applied, Change, RemovalReason, Removed};
pub use snapshots::RuleStore;
