//! VXLAN tunnel ports: which received VXLAN packets belong to which tunnel port (decap),
//! and the outer headers an output to a tunnel port is sent with (encap), via an underlay hop.
//!
//! A tunnel port has an OpenFlow port number like any other but no device: its packets
//! arrive on (and leave by) an underlay port. On receive the parser has already put the
//! outer headers into the key (`tun_id`, `tun_src`, `tun_dst`, `tun_flags`); the datapath
//! maps them to a tunnel port here ([`Tunnels::lookup`]) and rewrites the key's `in_port`
//! before any cache is consulted, so the EMC and megaflows are per tunnel port. On send,
//! `output:<tunnel>` is carried out at execution time: the hop (underlay port, MACs,
//! source address) is read from the [`UnderlayResolver`] for every packet, so nothing
//! cached depends on the underlay and a route or neighbour change needs no flush.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The IANA VXLAN UDP port, the default `dst_port`.
pub const VXLAN_DST_PORT: u16 = 4789;

/// Where a tunnel port sends to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelRemote {
    /// Always this remote VTEP; received packets must come from it.
    Fixed(IpAddr),
    /// The packet's `tun_dst` (set by `set_field:…->tun_dst`, or as received); receives
    /// from any remote.
    Flow,
}

/// The VNI a tunnel port sends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKey {
    /// Always this VNI (24 bits); received packets must carry it.
    Fixed(u32),
    /// The packet's `tun_id` (set by `set_tunnel`, or as received); receives any VNI.
    Flow,
}

/// One `type = "vxlan"` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelPort {
    /// Its OpenFlow port number (`in_port=`, `output:`).
    pub number: u32,
    pub name: String,
    pub remote: TunnelRemote,
    /// The local VTEP address: received packets must be sent to it, and sent packets come
    /// from it (`None`: any, and the underlay hop's source address).
    pub local: Option<IpAddr>,
    pub key: TunnelKey,
    /// UDP destination port (default [`VXLAN_DST_PORT`]).
    pub dst_port: u16,
}

impl TunnelPort {
    /// A VXLAN port with a fixed remote and VNI, any local address, port 4789.
    pub fn vxlan(number: u32, name: &str, remote: IpAddr, vni: u32) -> TunnelPort {
        TunnelPort {
            number,
            name: name.into(),
            remote: TunnelRemote::Fixed(remote),
            local: None,
            key: TunnelKey::Fixed(vni & 0x00ff_ffff),
            dst_port: VXLAN_DST_PORT,
        }
    }

    /// How specific the receive match is: fixed key and fixed remote first (OVS picks the
    /// most specific port a packet matches).
    fn specificity(&self) -> u8 {
        u8::from(matches!(self.key, TunnelKey::Fixed(_))) * 2
            + u8::from(matches!(self.remote, TunnelRemote::Fixed(_)))
            + u8::from(self.local.is_some())
    }
}

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

/// A datapath's tunnel ports and the underlay they send through (`DatapathConfig::tunnels`).
#[derive(Clone)]
pub struct Tunnels {
    /// Most specific first (see [`TunnelPort`]).
    ports: Vec<TunnelPort>,
    pub underlay: Arc<dyn UnderlayResolver>,
}

impl fmt::Debug for Tunnels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tunnels")
            .field("ports", &self.ports)
            .field("underlay_generation", &self.underlay.generation())
            .finish()
    }
}

impl Tunnels {
    pub fn new(ports: Vec<TunnelPort>, underlay: Arc<dyn UnderlayResolver>) -> Tunnels {
        let mut ports = ports;
        ports.sort_by_key(|p| std::cmp::Reverse(p.specificity()));
        Tunnels { ports, underlay }
    }

    pub fn ports(&self) -> &[TunnelPort] {
        &self.ports
    }

    /// The tunnel port numbered `number`.
    #[inline(always)]
    pub fn port(&self, number: u32) -> Option<&TunnelPort> {
        self.ports.iter().find(|p| p.number == number)
    }

    /// The UDP destination port the parser decapsulates (all tunnel ports share one).
    pub fn dst_port(&self) -> Option<u16> {
        self.ports.first().map(|p| p.dst_port)
    }

    /// The tunnel port a received packet with these outer fields belongs to.
    #[inline]
    pub fn lookup(&self, vni: u32, remote: IpAddr, local: IpAddr) -> Option<u32> {
        self.ports
            .iter()
            .find(|p| {
                (match p.key {
                    TunnelKey::Fixed(k) => k == vni,
                    TunnelKey::Flow => true,
                }) && (match p.remote {
                    TunnelRemote::Fixed(r) => r == remote,
                    TunnelRemote::Flow => true,
                }) && p.local.is_none_or(|l| l == local)
            })
            .map(|p| p.number)
    }
}
