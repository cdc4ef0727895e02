//! The kernel's link, address and neighbour tables as far as the underlay needs them,
//! kept from dumps and events, and the one function that turns a route answer into a hop
//! or a named refusal ([`compute`]).

use std::collections::HashMap;
use std::net::IpAddr;

use flowpath_packet::hop::UnderlayHop;
use netlink_packet_route::address::{
    AddressAttribute, AddressHeaderFlags, AddressMessage, AddressScope,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::RouteType;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::nl::RouteAnswer;
use crate::route::{Refusal, Route};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub mac: Option<[u8; 6]>,
    pub up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr {
    pub ip: IpAddr,
    pub scope: AddressScope,
    /// Tentative (DAD not done) or DAD failed: not usable as a source.
    pub unusable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neigh {
    pub mac: Option<[u8; 6]>,
    pub state: NeighbourState,
}

impl Neigh {
    /// The MAC, if the entry's state makes it usable: REACHABLE, STALE, DELAY, PROBE
    /// (the kernel is re-confirming a MAC it has), PERMANENT, NOARP. INCOMPLETE, FAILED
    /// and NONE are not.
    pub fn usable_mac(&self) -> Option<[u8; 6]> {
        match self.state {
            NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp => self.mac,
            _ => None,
        }
    }
}

pub fn state_name(s: Option<NeighbourState>) -> &'static str {
    match s {
        None => "none",
        Some(NeighbourState::Incomplete) => "incomplete",
        Some(NeighbourState::Reachable) => "reachable",
        Some(NeighbourState::Stale) => "stale",
        Some(NeighbourState::Delay) => "delay",
        Some(NeighbourState::Probe) => "probe",
        Some(NeighbourState::Failed) => "failed",
        Some(NeighbourState::Noarp) => "noarp",
        Some(NeighbourState::Permanent) => "permanent",
        Some(NeighbourState::None) => "none",
        Some(_) => "other",
    }
}

/// What an event touched: neighbours only (recompute from the tables) or routes, links
/// or addresses (ask the kernel for every remote's route again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub neigh: bool,
    pub routes: bool,
}

impl std::ops::BitOrAssign for Touched {
    fn bitor_assign(&mut self, o: Touched) {
        self.neigh |= o.neigh;
        self.routes |= o.routes;
    }
}

#[derive(Default, Debug)]
pub struct Tables {
    pub links: HashMap<u32, Link>,
    pub addrs: HashMap<u32, Vec<Addr>>,
    pub neighs: HashMap<(u32, IpAddr), Neigh>,
}

fn mac6(b: &[u8]) -> Option<[u8; 6]> {
    b.try_into().ok()
}

impl Tables {
    pub fn ifindex_of(&self, name: &str) -> Option<u32> {
        self.links
            .iter()
            .find(|(_, l)| l.name == name)
            .map(|(i, _)| *i)
    }

    /// Apply one dumped or notified message.
    pub fn apply(&mut self, msg: &RouteNetlinkMessage) -> Touched {
        match msg {
            RouteNetlinkMessage::NewLink(l) => self.new_link(l),
            RouteNetlinkMessage::DelLink(l) => {
                let i = l.header.index;
                self.links.remove(&i);
                self.addrs.remove(&i);
                self.neighs.retain(|(idx, _), _| *idx != i);
                Touched {
                    neigh: true,
                    routes: true,
                }
            }
            RouteNetlinkMessage::NewAddress(a) => self.address(a, true),
            RouteNetlinkMessage::DelAddress(a) => self.address(a, false),
            RouteNetlinkMessage::NewNeighbour(n) => self.neighbour(n, true),
            RouteNetlinkMessage::DelNeighbour(n) => self.neighbour(n, false),
            RouteNetlinkMessage::NewRoute(_) | RouteNetlinkMessage::DelRoute(_) => Touched {
                neigh: false,
                routes: true,
            },
            _ => Touched::default(),
        }
    }

    /// A link appeared or changed (a change the next route lookups may see).
    fn new_link(&mut self, l: &LinkMessage) -> Touched {
        let mut name = None;
        let mut mac = None;
        for a in &l.attributes {
            match a {
                LinkAttribute::IfName(n) => name = Some(n.clone()),
                LinkAttribute::Address(b) => mac = mac6(b),
                _ => {}
            }
        }
        let old = self.links.get(&l.header.index);
        let link = Link {
            name: name
                .or_else(|| old.map(|o| o.name.clone()))
                .unwrap_or_default(),
            mac: mac.or_else(|| old.and_then(|o| o.mac)),
            up: l.header.flags.contains(LinkFlags::Up),
        };
        let changed = old != Some(&link);
        self.links.insert(l.header.index, link);
        Touched {
            neigh: false,
            routes: changed,
        }
    }

    /// An address was added (`added`) or removed.
    fn address(&mut self, a: &AddressMessage, added: bool) -> Touched {
        let mut ip = None;
        let mut local = None;
        let mut flags = None;
        for at in &a.attributes {
            match at {
                AddressAttribute::Address(x) => ip = Some(*x),
                AddressAttribute::Local(x) => local = Some(*x),
                AddressAttribute::Flags(f) => flags = Some(f.bits()),
                _ => {}
            }
        }
        // IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on
        // point-to-point links).
        let Some(ip) = local.or(ip) else {
            return Touched::default();
        };
        let hf = a.header.flags;
        let f = flags.unwrap_or(hf.bits() as u32);
        let tentative = AddressHeaderFlags::Tentative.bits() as u32;
        let dadfailed = AddressHeaderFlags::Dadfailed.bits() as u32;
        let addr = Addr {
            ip,
            scope: a.header.scope,
            unusable: f & (tentative | dadfailed) != 0,
        };
        let list = self.addrs.entry(a.header.index).or_default();
        list.retain(|x| x.ip != ip);
        if added {
            list.push(addr);
        }
        Touched {
            neigh: false,
            routes: true,
        }
    }

    /// A neighbour entry was added or changed (`added`) or removed.
    fn neighbour(&mut self, n: &NeighbourMessage, added: bool) -> Touched {
        if !matches!(n.header.family, AddressFamily::Inet | AddressFamily::Inet6) {
            return Touched::default();
        }
        let mut dst = None;
        let mut mac = None;
        for a in &n.attributes {
            match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                    dst = Some(IpAddr::V4(*v4))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    dst = Some(IpAddr::V6(*v6))
                }
                NeighbourAttribute::LinkLayerAddress(b) => mac = mac6(b),
                _ => {}
            }
        }
        let Some(dst) = dst else {
            return Touched::default();
        };
        let key = (n.header.ifindex, dst);
        let changed = if !added {
            self.neighs.remove(&key).is_some()
        } else {
            let old = self.neighs.get(&key);
            // An INCOMPLETE/FAILED update may come without the old lladdr.
            let new = Neigh {
                mac,
                state: n.header.state,
            };
            let changed = old != Some(&new);
            self.neighs.insert(key, new);
            changed
        };
        Touched {
            neigh: changed,
            routes: false,
        }
    }

    /// The source address for a packet out of `ifindex` of `remote`'s family: a usable
    /// global address first, then any usable one.
    fn source_for(&self, ifindex: u32, remote: IpAddr) -> Option<IpAddr> {
        let list = self.addrs.get(&ifindex)?;
        let fam = |a: &&Addr| a.ip.is_ipv4() == remote.is_ipv4() && !a.unusable;
        list.iter()
            .filter(fam)
            .find(|a| a.scope == AddressScope::Universe)
            .or_else(|| list.iter().find(fam))
            .map(|a| a.ip)
    }
}

fn kind_name(k: RouteType) -> String {
    match k {
        RouteType::Local => "local".into(),
        RouteType::Broadcast => "broadcast".into(),
        RouteType::Anycast => "anycast".into(),
        RouteType::Multicast => "multicast".into(),
        RouteType::BlackHole => "blackhole".into(),
        RouteType::Unreachable => "unreachable".into(),
        RouteType::Prohibit => "prohibit".into(),
        RouteType::Throw => "throw".into(),
        RouteType::Nat => "nat".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The hop to `remote` from the kernel's route answer, the tables and flowpath's
/// underlay ports (`ifindex → port number`), or why there is none.
pub fn compute(
    remote: IpAddr,
    answer: &RouteAnswer,
    ports: &HashMap<u32, u32>,
    t: &Tables,
) -> Result<Route, Refusal> {
    let (kind, oif, gateway, prefsrc) = match answer {
        RouteAnswer::Error(errno) => return Err(Refusal::NoRoute { errno: *errno }),
        RouteAnswer::Route {
            kind,
            oif,
            gateway,
            prefsrc,
        } => (*kind, *oif, *gateway, *prefsrc),
    };
    if kind != RouteType::Unicast {
        return Err(Refusal::RouteType {
            kind: kind_name(kind),
        });
    }
    let Some(oif) = oif else {
        return Err(Refusal::NoRoute {
            errno: libc::ENETUNREACH,
        });
    };
    let ifname = t
        .links
        .get(&oif)
        .map(|l| l.name.clone())
        .unwrap_or_else(|| format!("if{oif}"));
    let Some(&port) = ports.get(&oif) else {
        return Err(Refusal::NotFlowpathPort {
            ifindex: oif,
            ifname,
        });
    };
    let link = t.links.get(&oif);
    if !link.is_some_and(|l| l.up) {
        return Err(Refusal::LinkDown { ifname });
    }
    let Some(src_mac) = link.and_then(|l| l.mac) else {
        return Err(Refusal::NoLinkAddress { ifname });
    };
    // A prefsrc of the other family (IPv6 routes via an IPv4 gateway) is not usable.
    let src_ip = prefsrc
        .filter(|s| s.is_ipv4() == remote.is_ipv4())
        .or_else(|| t.source_for(oif, remote));
    let Some(src_ip) = src_ip else {
        return Err(Refusal::NoSourceAddress { ifname });
    };
    let next_hop = gateway.unwrap_or(remote);
    let neigh = t.neighs.get(&(oif, next_hop));
    let Some(dst_mac) = neigh.and_then(Neigh::usable_mac) else {
        return Err(Refusal::NeighbourUnresolved {
            next_hop,
            ifindex: oif,
            ifname,
            state: state_name(neigh.map(|n| n.state)),
        });
    };
    Ok(Route {
        hop: UnderlayHop {
            port,
            src_mac,
            dst_mac,
            src_ip,
        },
        ifindex: oif,
        ifname,
        next_hop,
        gateway,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use NeighbourState::{Failed, Reachable, Stale};

    fn tables() -> Tables {
        let mut t = Tables::default();
        t.links.insert(
            7,
            Link {
                name: "fp0".into(),
                mac: Some([2, 0, 0, 0, 0, 1]),
                up: true,
            },
        );
        t.links.insert(
            8,
            Link {
                name: "other0".into(),
                mac: Some([2, 0, 0, 0, 0, 2]),
                up: true,
            },
        );
        t.addrs.insert(
            7,
            vec![
                Addr {
                    ip: "fe80::1".parse().unwrap(),
                    scope: AddressScope::Link,
                    unusable: false,
                },
                Addr {
                    ip: "fd00::1".parse().unwrap(),
                    scope: AddressScope::Universe,
                    unusable: false,
                },
                Addr {
                    ip: "10.0.0.1".parse().unwrap(),
                    scope: AddressScope::Universe,
                    unusable: false,
                },
            ],
        );
        t
    }

    /// `ip`'s neighbour entry on link 7.
    fn neigh(t: &mut Tables, ip: IpAddr, mac: Option<[u8; 6]>, state: NeighbourState) {
        t.neighs.insert((7, ip), Neigh { mac, state });
    }

    fn ports() -> HashMap<u32, u32> {
        [(7, 3)].into_iter().collect()
    }

    fn route(oif: u32, gw: Option<&str>, src: Option<&str>) -> RouteAnswer {
        RouteAnswer::Route {
            kind: RouteType::Unicast,
            oif: Some(oif),
            gateway: gw.map(|g| g.parse().unwrap()),
            prefsrc: src.map(|s| s.parse().unwrap()),
        }
    }

    #[test]
    fn resolved_via_gateway_and_direct() {
        let mut t = tables();
        let gw: IpAddr = "10.0.0.254".parse().unwrap();
        neigh(&mut t, gw, Some([2, 0, 0, 0, 0, 0xfe]), Stale);
        let r = compute(
            "192.0.2.9".parse().unwrap(),
            &route(7, Some("10.0.0.254"), Some("10.0.0.1")),
            &ports(),
            &t,
        )
        .unwrap();
        assert_eq!(r.hop.port, 3);
        assert_eq!(r.hop.dst_mac, [2, 0, 0, 0, 0, 0xfe]);
        assert_eq!(r.hop.src_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(r.next_hop, gw);
        // Direct: the remote itself is the next hop, unresolved here.
        let e = compute(gw, &route(7, None, None), &ports(), &t).unwrap();
        assert_eq!(e.next_hop, gw);
        assert_eq!(e.hop.src_ip, "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn refusals_are_named() {
        let mut t = tables();
        let remote: IpAddr = "10.0.0.9".parse().unwrap();
        let e = compute(remote, &route(8, None, None), &ports(), &t).unwrap_err();
        assert_eq!(e.name(), "not_flowpath_port");
        assert!(e.to_string().contains("other0"), "{e}");
        let e = compute(remote, &route(7, None, None), &ports(), &t).unwrap_err();
        assert_eq!(e.name(), "neighbour_unresolved");
        neigh(&mut t, remote, None, Failed);
        let e = compute(remote, &route(7, None, None), &ports(), &t).unwrap_err();
        assert!(e.to_string().contains("failed"), "{e}");
        let e = compute(remote, &RouteAnswer::Error(libc::ENETUNREACH), &ports(), &t);
        assert_eq!(e.unwrap_err().name(), "no_route");
        let local = RouteAnswer::Route {
            kind: RouteType::Local,
            oif: Some(1),
            gateway: None,
            prefsrc: None,
        };
        let e = compute(remote, &local, &ports(), &t).unwrap_err();
        assert_eq!(e.to_string(), "route type local");
        t.links.get_mut(&7).unwrap().up = false;
        let e = compute(remote, &route(7, None, None), &ports(), &t).unwrap_err();
        assert_eq!(e.name(), "link_down");
    }

    #[test]
    fn ipv6_source_prefers_global_and_skips_tentative() {
        let mut t = tables();
        let remote: IpAddr = "fd00::2".parse().unwrap();
        neigh(&mut t, remote, Some([2, 0, 0, 0, 0, 9]), Reachable);
        let r = compute(remote, &route(7, None, None), &ports(), &t).unwrap();
        assert_eq!(r.hop.src_ip, "fd00::1".parse::<IpAddr>().unwrap());
        for a in t.addrs.get_mut(&7).unwrap() {
            a.unusable = a.ip.is_ipv6();
        }
        let e = compute(remote, &route(7, None, None), &ports(), &t).unwrap_err();
        assert_eq!(e.name(), "no_source_address");
    }
}
