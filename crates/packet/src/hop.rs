//! The next hop an encapsulated packet leaves by ([`UnderlayHop`]), the resolver interface
//! that finds it ([`UnderlayResolver`]) and why it may have none ([`HopMiss`]), with a fixed
//! map of hops ([`StaticUnderlay`]).
//!
//! The datapath asks a resolver for every encapsulated packet (see
//! `flowpath_datapath::tunnel`); `flowpath_underlay` implements one over the kernel's
//! routing and neighbour tables. Both sides meet here so that neither depends on the other.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// How to reach a remote VTEP: the underlay port packets leave by, the outer Ethernet
/// addresses, and the outer source IP (used when the tunnel port has no `local`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnderlayHop {
    /// The underlay port number encapsulated packets are output to.
    pub port: u32,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: IpAddr,
}

/// Why there is no hop for a remote (counted under a named drop reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HopMiss {
    /// No route to the remote (`tunnel_no_route`).
    NoRoute,
    /// A route, but the next hop's MAC is not known yet (`tunnel_neigh_unresolved`).
    NeighUnresolved,
}

/// The underlay's routes and neighbours as the datapath sees them. Implemented by
/// [`StaticUnderlay`] (fixed hops) and by `flowpath_underlay::NetlinkUnderlay` (the
/// kernel's routing and neighbour tables over netlink).
pub trait UnderlayResolver: Send + Sync {
    /// The hop to `remote`, if known. Called per encapsulated packet: must be cheap
    /// (back it by a snapshot; no locks held long, no system calls).
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop>;
    /// Ask for `remote` to be resolved (route lookup, ARP / neighbour solicitation);
    /// called when [`UnderlayResolver::hop`] had nothing. Must not block.
    fn resolve(&self, remote: IpAddr);
    /// Bumps on any change of what `hop` answers.
    fn generation(&self) -> u64;
    /// Why `hop(remote)` had nothing (called only then, so it may be slower).
    fn miss(&self, _remote: IpAddr) -> HopMiss {
        HopMiss::NeighUnresolved
    }
}

/// A fixed map of remote → hop (tests, benches, and configs that give `underlay_port` and
/// `next_hop_mac`), with an optional default hop for any other remote.
#[derive(Default)]
pub struct StaticUnderlay {
    hops: RwLock<HashMap<IpAddr, UnderlayHop>>,
    default: RwLock<Option<UnderlayHop>>,
    generation: AtomicU64,
    /// Remotes asked for with [`UnderlayResolver::resolve`] (tests look).
    asked: RwLock<Vec<IpAddr>>,
}

impl StaticUnderlay {
    pub fn new() -> StaticUnderlay {
        StaticUnderlay::default()
    }

    /// With one hop.
    pub fn with(remote: IpAddr, hop: UnderlayHop) -> StaticUnderlay {
        let s = StaticUnderlay::new();
        s.insert(remote, hop);
        s
    }

    pub fn insert(&self, remote: IpAddr, hop: UnderlayHop) {
        self.hops.write().unwrap().insert(remote, hop);
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub fn remove(&self, remote: IpAddr) {
        self.hops.write().unwrap().remove(&remote);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The hop for remotes without one of their own (of the same address family as its
    /// `src_ip`).
    pub fn set_default(&self, hop: Option<UnderlayHop>) {
        *self.default.write().unwrap() = hop;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Remotes that were asked for and had no hop, in order.
    pub fn asked(&self) -> Vec<IpAddr> {
        self.asked.read().unwrap().clone()
    }
}

impl UnderlayResolver for StaticUnderlay {
    fn hop(&self, remote: IpAddr) -> Option<UnderlayHop> {
        if let Some(h) = self.hops.read().unwrap().get(&remote) {
            return Some(*h);
        }
        let d = *self.default.read().unwrap();
        d.filter(|h| h.src_ip.is_ipv4() == remote.is_ipv4())
    }

    fn resolve(&self, remote: IpAddr) {
        let mut a = self.asked.write().unwrap();
        if a.len() < 1024 {
            a.push(remote);
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn miss(&self, _remote: IpAddr) -> HopMiss {
        HopMiss::NoRoute
    }
}
