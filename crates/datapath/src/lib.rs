//! The fast path: per-worker exact-match cache, signature-match cache and megaflow cache
//! in front of the slow path, processing batches with per-tier counters and TSC cycles, and the worker loop.
//!
//! Other cache tiers (XDP in the kernel, offloads, limiters) follow the caches through the
//! tier interface in [`tier`]; ports come in through the foundation's `Port` trait.

mod actions;
pub mod config;
pub mod controller;
mod ct_memo;
pub mod datapath;
pub mod emc;
mod encap;
pub mod guard;
pub mod hold;
pub mod l2;
pub mod megaflow;
mod recirc;
pub mod sink;
pub mod slot_index;
pub mod smc;
pub mod stats;
pub mod tier;
pub mod tunnel;
pub mod worker;

pub use controller::{
    ControllerPacket, ControllerQueue, PacketOut, PacketOutQueue, CONTROLLER_PORT,
    PACKET_OUTS_PER_POLL,
};
pub use datapath::{Datapath, DatapathConfig, OnRuleChange, OutputSink};
pub use emc::ExactMatchCache;
pub use flowpath_base::BATCH;
pub use guard::{MissGuard, MissLimits, PortMissStats};
pub use hold::{NeighbourHoldQueue, HOLD_MAX_AGE_SECS, HOLD_PER_REMOTE, HOLD_TOTAL};
pub use l2::{MacLearningConfig, MacLearningTable, NormalDecision, NormalDep};
pub use megaflow::{MegaflowCache, MegaflowCounters, MegaflowEntry};
pub use recirc::{MAX_PASSES, RECIRC_MAX};
pub use sink::{CaptureSink, CountingSink};
pub use slot_index::SlotIndex;
pub use smc::SignatureMatchCache;
pub use stats::{DatapathDrop, DatapathStats, StageCycles};
pub use tier::{MegaflowEvent, MegaflowId, MegaflowView, Tier};
pub use tunnel::{
    HopMiss, StaticUnderlay, TunnelKey, TunnelPort, TunnelRemote, Tunnels, UnderlayHop,
    UnderlayResolver, VXLAN_DST_PORT,
};
pub use worker::{PortOutputs, Worker, WorkerPort};

/// Start loading the cache line that holds `p` into the nearest cache (a hint: it never
/// faults, any address will do). The one place the caches and stages prefetch through.
#[inline(always)]
pub(crate) fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint and never faults.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
