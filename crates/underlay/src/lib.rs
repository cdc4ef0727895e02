//! Underlay routing for tunnel ports from the kernel: route, next hop MAC and source per remote,
//! kept current from rtnetlink events, as OVS's ovs-router and tunnel neighbour cache do.
//!
//! [`NetlinkUnderlay`] implements the datapath's [`UnderlayResolver`]. For every remote it
//! knows (given at start with [`NetlinkUnderlay::new`] or [`NetlinkUnderlay::watch`], or
//! first asked for with [`UnderlayResolver::resolve`]) it asks the kernel which route it
//! would take (`RTM_GETROUTE` for that destination, so policy rules, longest prefix,
//! metrics and multipath are the kernel's choice), checks that the route leaves by one of
//! flowpath's underlay ports, takes the gateway (or the remote itself) as the next hop, its
//! MAC from the neighbour table (REACHABLE, STALE, DELAY, PROBE, PERMANENT, NOARP are
//! usable; INCOMPLETE and FAILED are not), the route's preferred source (else the
//! interface's address) and the interface's MAC. The answers are published as one
//! immutable snapshot behind an `ArcSwap`: [`UnderlayResolver::hop`] is a hash lookup in
//! it, no lock and no system call.
//!
//! A background thread joins the rtnetlink groups for links, neighbours, IPv4/IPv6
//! addresses and IPv4/IPv6 routes. A neighbour event recomputes from its tables; a route,
//! address or link event asks the kernel again for every remote's route. A new snapshot is
//! published, and [`UnderlayResolver::generation`] bumped, only when some answer changed.
//! Lost events (`ENOBUFS`) cause a full re-dump.
//!
//! **Resolution.** [`UnderlayResolver::resolve`] never blocks: it queues the remote to the
//! thread (rate-limited per remote, [`UnderlayConfig::resolve_interval`]), which sends
//! `RTM_NEWNEIGH` with `NTF_USE` for the route's next hop on its interface. The kernel
//! treats that as a packet waiting on the entry: it creates it INCOMPLETE and sends an ARP
//! request or neighbour solicitation (or re-probes a FAILED one); when the answer comes the
//! neighbour event fills the hop in. Nothing is sent to the remote itself. Every
//! [`UnderlayConfig::stale_refresh`] the thread does the same for next hops in use whose
//! entry is STALE, so the kernel confirms them by a unicast probe: flowpath's own packets
//! bypass the kernel and would never confirm them, and a MAC that moved would otherwise
//! never be noticed.
//!
//! The kernel must see the ARP replies / neighbour advertisements: on an AF_XDP port the
//! XDP program has to pass ARP and ICMPv6 ND to the kernel (on AF_PACKET and tap ports it
//! does anyway).

mod config;
mod layered;
mod nl;
mod resolver;
mod route;
mod shared;
mod tables;
mod thread;

pub use config::{UnderlayConfig, UnderlayPort};
pub use flowpath_packet::hop::{HopMiss, UnderlayHop, UnderlayResolver};
pub use layered::Layered;
pub use resolver::{NetlinkUnderlay, UnderlayStats};
pub use route::{Refusal, RemoteStatus, Route};
