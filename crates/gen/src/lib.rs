//! Traffic generation: packets built from a spec with lengths and checksums right, and an
//! in-memory source that hands the datapath batches without copying.

pub mod build;
pub mod source;

pub use build::{build, FrameSpec, Vxlan, L3, L4};
pub use source::{InMemorySource, RxBatch, MAX_BATCH};
