//! Traffic generation: frames built from specs, whole workloads ([`TrafficSpec`]), the in-memory
//! source and its [`GeneratedPort`], pcap files, and the classes and frame mixes of [`class`].

pub mod build;
pub mod class;
pub mod paced;
pub mod pcap;
pub mod port;
pub mod source;
pub mod spec;

pub use build::{build, FrameSpec, Vxlan, L3, L4};
pub use class::{FrameMix, TrafficClass, IMIX_PATTERN, VXLAN4_OVERHEAD};
pub use flowpath_base::capture::{read_capture_file, Capture};
pub use paced::PacedPort;
pub use pcap::{replay_pcap_file, replay_source, write_pcap_file, CaptureReplay, Summary};
pub use port::GeneratedPort;
pub use source::{InMemorySource, LentFrames, Lifetime, NEW_FLOW_V4_BASE};
pub use spec::{Churn, Encap, IpVersion, Popularity, Proto, Sizes, TrafficSpec};
