//! A decision-tree classifier for range-heavy rule sets: HiCuts-style equal-size cuts on
//! the top bits of a field, with rules first split by which addresses they pin (as
//! EffiCuts and CutSplit do) so that wide rules are not copied into every branch.
//!
//! Every cut takes the next most-significant bits of one field, so each node's region is a
//! prefix of each field: the path a lookup took is itself a valid megaflow mask, and the
//! leaf's short rule list is all the megaflow has to be kept apart from (`wildcards.rs`).
//! Leaves hold rule indices in classifier order; rules are matched against a compact copy
//! of their masks (only the key words some rule uses), so a leaf scan stays in a few cache
//! lines. Hand-written: no crate offers a packet-classification tree over this key.
//!
//! In layers, each file using only those above it in this list: the tree's shapes
//! (`tree.rs`), the compact rule copies leaves are matched against (`copies.rs`), cutting
//! a rule set into trees (`build.rs`), walking a key down them (`walk.rs`), and the index
//! a table holds, carried across versions of the table (`index.rs`).

mod build;
mod copies;
mod index;
mod tree;
mod walk;

pub(crate) use index::TreeIndex;
