//! The fast path: per-worker exact-match cache and megaflow cache in front of the slow
//! path, processing batches of up to 32 packets with per-tier counters and TSC cycles.

pub mod datapath;
pub mod emc;
pub mod megaflow;
pub mod sink;
pub mod tsc;

pub use datapath::{
    ControllerPacket, Datapath, DatapathConfig, DatapathStats, OnRuleChange, OutputSink,
    StageCycles, BATCH,
};
pub use emc::ExactMatchCache;
pub use megaflow::{MegaflowCache, MegaflowEntry};
pub use sink::{CaptureSink, CountingSink};
