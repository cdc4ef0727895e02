//! Generated traffic put to use: sent out of a real interface (template frames over the
//! ports' XDP transmitter), written to pcap files or replayed from them, and reported.
//!
//! The work of `flowpath gen` once its flags are parsed. It needs both the gen crate (the
//! traffic) and the ports crate (the transmitter), which must not depend on each other, so
//! it lives above both. Each job returns the text to print (or JSON).

mod files;
mod report;
mod transmit;

pub use files::{generate, replay, Looped};
pub use flowpath_ports::xdpgen::FlowOrder;
pub use transmit::{set_outer_udp_sport, transmit, TxFrames, TxJob};

use flowpath_gen::spec::SpecError;

/// Why a job failed: the input at fault, and the message.
pub enum Failure {
    /// The spec (its field says which).
    Spec(SpecError),
    /// The capture being replayed.
    Replay(String),
    /// Writing the packets out.
    Out(String),
    /// The transmit interface.
    Tx(String),
}
