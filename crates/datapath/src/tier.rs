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

// The handle, view and events are the cache's own types (they sit beside its entry).
pub use crate::megaflow::{MegaflowEvent, MegaflowId, MegaflowView};

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
