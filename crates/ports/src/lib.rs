//! Ports: where packets enter and leave the switch (AF_XDP, AF_PACKET, TAP, pcap, test
//! handles) behind [`Port`], with tracing and fault wrappers, port config and `gen --tx`.
//!
//! The trait and the batch live in `flowpath-base`, so that other crates (the traffic
//! generator's in-memory source) can be ports without depending on this crate.

pub mod afpacket;
pub mod afxdp;
pub mod config;
pub mod fault;
pub mod memory;
pub mod pcap;
pub mod tap;
pub mod trace;
pub mod xdp;
pub mod xdpgen;

pub use config::{
    parse_mac, register_generator, GeneratorOpener, PortConfig, PortKind, TunnelKeyConfig,
    VxlanSettings, XdpMode, DEFAULT_LOCAL_MAC,
};
pub use fault::{FaultConfig, FaultInjector};
pub use memory::{MemoryPort, MemoryPortHandle};
pub use trace::PcapTracer;

pub use flowpath_base::{PacketBatch, Port, PortInfo, PortStats, BATCH, FRAME, MAX_FRAME};
