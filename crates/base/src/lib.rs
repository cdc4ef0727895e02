//! The floor every flowpath crate stands on: packets, batches ([`BATCH`]), the [`Port`] trait,
//! captures, the TSC clock, CPU pinning, big tables, [`Summary`], input quoted in messages.
//!
//! Nothing here knows about flow keys, caches, rules or traffic generation: `packet`,
//! `ports`, `gen` and `datapath` all build on this crate, and none of them on each other
//! for these types. See docs/architecture.md for the whole crate graph.

pub mod batch;
pub mod capture;
pub mod clock;
pub mod cpu;
pub mod packet;
pub mod port;
pub mod progress;
pub mod rng;
pub mod samples;
pub mod table_memory;
pub mod text;

pub use batch::{PacketBatch, BATCH, FRAME, MAX_FRAME};
pub use packet::{Packet, HEADROOM};
pub use port::{Port, PortInfo, PortStats};
pub use rng::SplitMix64;
pub use samples::{median, median_by_key, Summary};
pub use table_memory::{TableBuilder, TableMemory};
