//! Connection tracking in OVS's model: one table of connections shared by every worker,
//! zones, TCP/UDP/ICMP state, NAT, per-state timeouts, limits and incremental expiry.
//!
//! The datapath's `ct(...)` action calls [`Tracker::execute`] with the packet, its parse
//! offsets and its key; the tracker finds (or, on `commit`, creates) the packet's
//! connection, moves its state, applies NAT to the frame, and writes the ct fields
//! (`ct_state`, `ct_zone`, `ct_mark`, `ct_label`, the original-direction tuple) into the key.
//! Operators read it through [`Tracker::dump`], [`Tracker::stats`] and [`Tracker::flush`].

mod admin;
mod config;
mod conn;
mod expire;
mod hint;
mod icmp;
mod index;
mod info;
mod limits;
pub mod nat;
pub mod nat_alloc;
mod table;
pub mod tcp;
mod tuple;
mod zones;

pub use config::{CtConfig, Timeouts};
pub use hint::ConnHint;
pub use info::{ConnInfo, CtStats, CtSummary, ZoneLimits};
pub use table::{Tracker, MAX_CONNECTIONS};
pub use tcp::TcpState;
pub use tuple::Tuple;

/// Why the tracker marked a packet `+inv` (counted per reason in [`CtStats::invalid`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    /// Not IPv4/IPv6, or a protocol header the tracker could not read.
    Malformed,
    /// A fragment: the tracker does not reassemble (see docs/conntrack.md).
    Fragment,
    /// TCP flags no connection state accepts (SYN+FIN, no flags, ...).
    TcpFlags,
    /// A TCP segment outside the connection's window.
    OutOfWindow,
    /// An ICMP error that quotes no tracked connection (or a malformed one).
    IcmpOrphan,
    /// A new connection refused by a table or zone limit.
    Limit,
    /// NAT found no free tuple in its range.
    NatExhausted,
}

impl InvalidReason {
    pub const ALL: [InvalidReason; 7] = [
        InvalidReason::Malformed,
        InvalidReason::Fragment,
        InvalidReason::TcpFlags,
        InvalidReason::OutOfWindow,
        InvalidReason::IcmpOrphan,
        InvalidReason::Limit,
        InvalidReason::NatExhausted,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            InvalidReason::Malformed => "malformed",
            InvalidReason::Fragment => "fragment",
            InvalidReason::TcpFlags => "tcp_flags",
            InvalidReason::OutOfWindow => "out_of_window",
            InvalidReason::IcmpOrphan => "icmp_orphan",
            InvalidReason::Limit => "limit",
            InvalidReason::NatExhausted => "nat_exhausted",
        }
    }
}
