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

use flowpath_packet::key::TUN_IPV6;
use flowpath_packet::FlowKey;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

// The hop types and resolver interface live with the packet types, where the underlay
// crate finds them without the datapath; re-exported here at their old paths.
pub use flowpath_packet::hop::{HopMiss, StaticUnderlay, UnderlayHop, UnderlayResolver};

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

/// A datapath's tunnel ports and the underlay they send through (`DatapathConfig::tunnels`).
#[derive(Clone)]
pub struct Tunnels {
    /// Most specific first (see [`TunnelPort`]).
    ports: Vec<TunnelPort>,
    /// `ports`' receive matches over the key's tunnel words, in the same order (a port that
    /// can match nothing is left out).
    rx: Vec<RxMatch>,
    pub underlay: Arc<dyn UnderlayResolver>,
}

/// Key words 8..13: `tun_id`, `tun_flags`, `metadata`, `tun_src`, `tun_dst`.
const TUN_WORDS: std::ops::Range<usize> = 8..13;

/// A tunnel port's receive match ([`Tunnels::lookup`]) as a masked compare of the key's
/// tunnel words: one AND and compare per word, with no address built.
#[derive(Clone, Copy, Debug)]
struct RxMatch {
    mask: [u64; 5],
    value: [u64; 5],
    port: u32,
}

impl RxMatch {
    /// `None` when the port can match no packet (a fixed remote and local of two families).
    fn new(p: &TunnelPort) -> Option<RxMatch> {
        // Byte offsets within key bytes 64..104.
        const ID: usize = 0;
        const FLAGS: usize = 4;
        const SRC: usize = 8;
        const DST: usize = 24;
        let mut mask = [0u8; 40];
        let mut value = [0u8; 40];
        if let TunnelKey::Fixed(k) = p.key {
            mask[ID..ID + 4].fill(0xff);
            value[ID..ID + 4].copy_from_slice(&k.to_be_bytes());
        }
        let mut family: Option<bool> = None;
        let remote = match p.remote {
            TunnelRemote::Fixed(r) => Some(r),
            TunnelRemote::Flow => None,
        };
        for (at, a) in [(SRC, remote), (DST, p.local)] {
            let Some(a) = a else { continue };
            let v6 = a.is_ipv6();
            if family.is_some_and(|f| f != v6) {
                return None;
            }
            family = Some(v6);
            match a {
                // The key holds an IPv4 tunnel address in its first 4 bytes.
                IpAddr::V4(a) => {
                    mask[at..at + 4].fill(0xff);
                    value[at..at + 4].copy_from_slice(&a.octets());
                }
                IpAddr::V6(a) => {
                    mask[at..at + 16].fill(0xff);
                    value[at..at + 16].copy_from_slice(&a.octets());
                }
            }
        }
        if let Some(v6) = family {
            mask[FLAGS] |= TUN_IPV6;
            if v6 {
                value[FLAGS] |= TUN_IPV6;
            }
        }
        let words = |b: [u8; 40]| -> [u64; 5] {
            std::array::from_fn(|i| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
        };
        Some(RxMatch {
            mask: words(mask),
            value: words(value),
            port: p.number,
        })
    }

    #[inline(always)]
    fn matches(&self, w: &[u64; 5]) -> bool {
        let mut diff = 0;
        for ((w, m), v) in w.iter().zip(&self.mask).zip(&self.value) {
            diff |= (w & m) ^ v;
        }
        diff == 0
    }
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
        let rx = ports.iter().filter_map(RxMatch::new).collect();
        Tunnels {
            ports,
            rx,
            underlay,
        }
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

    /// [`Tunnels::lookup`] for a decapsulated packet's key (its `tun_id`, `tun_flags`,
    /// `tun_src` and `tun_dst` as the parser wrote them).
    #[inline(always)]
    pub fn lookup_key(&self, key: &FlowKey) -> Option<u32> {
        let w: &[u64; 5] = key.words[TUN_WORDS].try_into().unwrap();
        self.rx.iter().find(|m| m.matches(w)).map(|m| m.port)
    }
}

/// Key byte of `tun_flags`.
pub(crate) const TUN_FLAGS_BYTE: usize = 68;

/// Map a decapsulated packet's outer fields to its tunnel port: rewrite `in_port`, or
/// false when no tunnel port takes it.
#[inline(always)]
pub(crate) fn map_tunnel(t: &Tunnels, key: &mut FlowKey) -> bool {
    match t.lookup_key(key) {
        Some(port) => {
            key.bytes_mut()[0..4].copy_from_slice(&port.to_be_bytes());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::key::TUN_PRESENT;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Small pools, so that ports and packets often agree.
    fn addr(r: u64) -> IpAddr {
        match r % 4 {
            0 => IpAddr::V4(Ipv4Addr::new(192, 0, 2, (r >> 8) as u8 % 3)),
            1 => IpAddr::V4(Ipv4Addr::new(198, 51, 100, (r >> 8) as u8 % 2)),
            2 => IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0,
                0,
                0,
                0,
                0,
                (r >> 8) as u16 % 3,
            )),
            // An IPv6 address whose first 4 bytes are an IPv4 address of the pool.
            _ => IpAddr::V6(Ipv6Addr::new(
                0xc000,
                0x0200,
                0,
                0,
                0,
                0,
                0,
                (r >> 8) as u16 % 2,
            )),
        }
    }

    /// A key as the parser leaves a decapsulated packet's.
    fn key(vni: u32, src: IpAddr, dst: IpAddr) -> FlowKey {
        let mut k = FlowKey::ZERO;
        let b = k.bytes_mut();
        b[64..68].copy_from_slice(&vni.to_be_bytes());
        b[68] = TUN_PRESENT | if src.is_ipv6() { TUN_IPV6 } else { 0 };
        for (at, a) in [(72, src), (88, dst)] {
            match a {
                IpAddr::V4(a) => b[at..at + 4].copy_from_slice(&a.octets()),
                IpAddr::V6(a) => b[at..at + 16].copy_from_slice(&a.octets()),
            }
        }
        k
    }

    #[test]
    fn lookup_key_is_lookup() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut matched = 0;
        for _ in 0..2000 {
            let ports: Vec<TunnelPort> = (0..1 + rnd() % 4)
                .map(|i| TunnelPort {
                    number: 10 + i as u32,
                    name: format!("vx{i}"),
                    remote: if rnd() % 3 == 0 {
                        TunnelRemote::Flow
                    } else {
                        TunnelRemote::Fixed(addr(rnd()))
                    },
                    local: (rnd() % 2 == 0).then(|| addr(rnd())),
                    key: if rnd() % 3 == 0 {
                        TunnelKey::Flow
                    } else {
                        TunnelKey::Fixed(
                            rnd() as u32 % 3 + if rnd() % 8 == 0 { 1 << 24 } else { 0 },
                        )
                    },
                    dst_port: VXLAN_DST_PORT,
                })
                .collect();
            let t = Tunnels::new(ports, Arc::new(StaticUnderlay::new()));
            for _ in 0..20 {
                let vni = rnd() as u32 % 3;
                let src = addr(rnd());
                // Both outer addresses of one family, as the parser writes them.
                let dst = loop {
                    let d = addr(rnd());
                    if d.is_ipv6() == src.is_ipv6() {
                        break d;
                    }
                };
                let want = t.lookup(vni, src, dst);
                matched += usize::from(want.is_some());
                assert_eq!(
                    t.lookup_key(&key(vni, src, dst)),
                    want,
                    "{:?} {vni} {src} {dst}",
                    t.ports()
                );
            }
        }
        assert!(matched > 1000, "too few matches to mean much: {matched}");
    }
}
