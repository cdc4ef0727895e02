//! The tier interface: how a cache tier outside the datapath (the XDP kernel tier, a
//! hardware offload, a miss-storm limiter) follows the megaflow cache without touching it.
//!
//! A tier never holds a reference into the cache. It learns what the cache did from
//! [`MegaflowEvent`]s (install, removal — eviction, revalidation or flush — and "the rules
//! changed and the survivors were revalidated"), names entries by [`MegaflowId`] (slot and
//! generation, so a reused slot is never mistaken for its former entry), reads them through
//! [`MegaflowView`], and credits the packets it forwarded itself with
//! [`crate::Datapath::credit_megaflow`], which also keeps the entry alive for CLOCK. The
//! worker loop calls a tier's [`Tier`] hooks; nothing else of the datapath is open to it.

use crate::Datapath;
use flowpath_packet::{Action, FlowKey};
use flowpath_pipeline::Ending;

/// A megaflow as another tier names it: its slot and the slot's generation at install.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MegaflowId {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

impl MegaflowId {
    /// The cache slot (unique among live entries; reused after removal).
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

/// What the megaflow cache did, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MegaflowEvent {
    /// The slow path installed this megaflow.
    Installed(MegaflowId),
    /// Gone: evicted, removed by revalidation, or timed out.
    Removed(MegaflowId),
    /// Every megaflow is gone at once (no `Removed` for each).
    Flushed,
    /// The rules changed; every megaflow still live keeps its decision under the new
    /// version ([`Datapath::rule_version`]).
    Revalidated,
}

/// Read-only view of one live megaflow.
#[derive(Clone, Copy)]
pub struct MegaflowView<'a> {
    pub(crate) entry: &'a crate::megaflow::MegaflowEntry,
    pub(crate) mask: &'a FlowKey,
}

impl<'a> MegaflowView<'a> {
    /// The masked key.
    pub fn key(&self) -> &'a FlowKey {
        self.entry.key()
    }
    pub fn mask(&self) -> &'a FlowKey {
        self.mask
    }
    pub fn actions(&self) -> &'a [Action] {
        self.entry.actions()
    }
    pub fn ending(&self) -> Ending {
        self.entry.ending()
    }
    /// Packets and bytes counted for this megaflow (its own hits and credited ones).
    pub fn counts(&self) -> (u64, u64) {
        (self.entry.packets(), self.entry.bytes())
    }
    /// TSC when a packet last used it; 0: never.
    pub fn used_tsc(&self) -> u64 {
        self.entry.used_tsc()
    }
}

/// A cache tier driven by the worker loop.
pub trait Tier: Send {
    /// After every batch and after every rule catch-up: follow the cache's events
    /// ([`Datapath::take_megaflow_events`]). Cheap when nothing happened.
    fn after_batch(&mut self, dp: &mut Datapath);
    /// Credit what the tier forwarded itself to the megaflows, looking at no more than
    /// `budget` of its entries, continuing where the last call stopped; `usize::MAX`
    /// sweeps everything (before a flow dump, or when stopping).
    fn collect(&mut self, dp: &mut Datapath, budget: usize);
    /// The worker stops: remove everything the tier holds for it.
    fn clear(&mut self, dp: &mut Datapath);
    /// Counters for `flowpath stats`: (hits served, entries held, megaflows not taken).
    fn counters(&self) -> (u64, u64, u64);
    /// A tier that takes only megaflows that proved themselves: (waiting now, dropped
    /// without proving themselves, of those taken later after all).
    fn waiting(&self) -> (u64, u64, u64) {
        (0, 0, 0)
    }
    /// Whether the tier holds `id` itself (for dumps: which tier answers a megaflow).
    fn holds(&self, _id: MegaflowId) -> bool {
        false
    }
}
