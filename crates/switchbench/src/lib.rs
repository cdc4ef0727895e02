//! Benchmarks that need the switch daemon: `flowpath bench openflow` (the OpenFlow channel
//! beside ovs-vswitchd) and `flowpath bench --replace` (a whole-table replace with the state file).

pub mod openflow;
pub mod replace;
