//! Traffic generation: packets built from a spec with lengths and checksums right, an
//! in-memory source that hands the datapath batches without copying, whole workloads
//! ([`TrafficSpec`]: flows, popularity, sizes, churn, encapsulation), and pcap files.

pub mod build;
pub mod pcap;
pub mod source;
pub mod spec;

pub use build::{build, FrameSpec, Vxlan, L3, L4};
pub use pcap::{read_capture_file, replay_pcap_file, replay_source, write_pcap_file, Summary};
pub use source::{InMemorySource, Lifetime, RxBatch, MAX_BATCH, NEW_FLOW_V4_BASE};
pub use spec::{Churn, Encap, IpVersion, Popularity, Proto, Sizes, TrafficSpec};
