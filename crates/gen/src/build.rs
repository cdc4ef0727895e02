//! Frames built from a [`FrameSpec`], with every length and checksum right.
//!
//! Sizes follow the RFC 2544 convention: [`FrameSpec::frame_size`] counts the 4-byte FCS
//! (64, 128, …, 1518, 9000), but the FCS itself is not generated, so [`build`] returns
//! `frame_size - 4` bytes. The space after the headers is filled with a byte pattern
//! (`payload[i] = i as u8`). When the headers alone do not fit in `frame_size - 4` bytes
//! (e.g. IPv6 + two VLAN tags + TCP at 64 bytes, or any VXLAN frame at 64 bytes), the
//! frame is the smallest one that holds the headers: no payload at all.

use std::net::{Ipv4Addr, Ipv6Addr};

use flowpath_packet::checksum::{finish, sum16};
use flowpath_packet::key::{ethertype, ipproto};

/// Length of the Ethernet frame check sequence, counted in `frame_size` but not generated.
pub const FCS_LEN: usize = 4;
/// The IANA VXLAN UDP destination port.
pub const VXLAN_PORT: u16 = 4789;
/// Default source MAC (locally administered, unicast).
pub const DEFAULT_ETH_SRC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// Default destination MAC (locally administered, unicast).
pub const DEFAULT_ETH_DST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
/// Default outer source MAC of VXLAN frames.
pub const DEFAULT_OUTER_ETH_SRC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x01, 0x01];
/// Default outer destination MAC of VXLAN frames.
pub const DEFAULT_OUTER_ETH_DST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x01, 0x02];

const ETH_LEN: usize = 14;
const VLAN_LEN: usize = 4;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
const TCP_LEN: usize = 20;
const ICMP_LEN: usize = 8;
const VXLAN_LEN: usize = 8;

/// Everything that describes one frame. Multi-byte numbers are in host representation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    /// VLAN tags, outermost first, as `(tpid, tci)`, e.g. `(0x88a8, 100), (0x8100, 200)`.
    /// For a VXLAN frame these are the inner frame's tags (see [`Vxlan::outer_vlans`]).
    pub vlans: Vec<(u16, u16)>,
    pub l3: L3,
    pub l4: L4,
    /// Ethernet frame size including the 4-byte FCS (RFC 2544); for VXLAN the size of the
    /// whole outer frame. See the module documentation for frames too small for their headers.
    pub frame_size: usize,
    /// Encapsulate the frame described above in VXLAN.
    pub vxlan: Option<Vxlan>,
}

/// The network layer: an IPv4 header without options or an IPv6 header without extension
/// headers. IPv4 frames have identification 0 and the don't-fragment flag set (as most
/// hosts send them); IPv6 frames have flow label 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ttl: u8,
        tos: u8,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        tclass: u8,
    },
}

/// The transport layer. TCP headers have no options, sequence number 1, acknowledgement
/// number 1 if `flags` has ACK (0x10) else 0, window 65535. ICMP is ICMPv4 over IPv4 and
/// ICMPv6 over IPv6, with an echo-style 8-byte header (identifier 1, sequence 1) whatever
/// the type; the echo data is the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Udp { sport: u16, dport: u16 },
    Tcp { sport: u16, dport: u16, flags: u8 },
    Icmp { ty: u8, code: u8 },
}

/// VXLAN encapsulation: outer Ethernet (+ optional tags), outer IP, UDP to port 4789, and
/// the 8-byte VXLAN header (flags 0x08, `vni`). The outer UDP checksum is 0 over IPv4
/// (allowed by RFC 7348) and computed over IPv6 (where it is required).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vxlan {
    /// 24-bit VXLAN network identifier (higher bits are ignored).
    pub vni: u32,
    pub outer_eth_src: [u8; 6],
    pub outer_eth_dst: [u8; 6],
    /// Outer VLAN tags, outermost first, as `(tpid, tci)`.
    pub outer_vlans: Vec<(u16, u16)>,
    pub outer: L3,
    /// Outer UDP source port (the destination is [`VXLAN_PORT`]).
    pub sport: u16,
}

impl Vxlan {
    /// VXLAN over IPv4 between `src` and `dst`, default MACs, TTL 64, source port 49152.
    pub fn v4(vni: u32, src: Ipv4Addr, dst: Ipv4Addr) -> Vxlan {
        Vxlan {
            vni,
            outer_eth_src: DEFAULT_OUTER_ETH_SRC,
            outer_eth_dst: DEFAULT_OUTER_ETH_DST,
            outer_vlans: Vec::new(),
            outer: L3::v4(src, dst),
            sport: 49152,
        }
    }

    /// VXLAN over IPv6 between `src` and `dst`, default MACs, hop limit 64, source port 49152.
    pub fn v6(vni: u32, src: Ipv6Addr, dst: Ipv6Addr) -> Vxlan {
        Vxlan {
            outer: L3::v6(src, dst),
            ..Vxlan::v4(vni, Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED)
        }
    }
}

impl L3 {
    /// IPv4 from `src` to `dst`, TTL 64, TOS 0.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr) -> L3 {
        L3::V4 {
            src,
            dst,
            ttl: 64,
            tos: 0,
        }
    }

    /// IPv6 from `src` to `dst`, hop limit 64, traffic class 0.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr) -> L3 {
        L3::V6 {
            src,
            dst,
            hop_limit: 64,
            tclass: 0,
        }
    }

    fn header_len(&self) -> usize {
        match self {
            L3::V4 { .. } => IPV4_LEN,
            L3::V6 { .. } => IPV6_LEN,
        }
    }
}

impl L4 {
    fn header_len(&self) -> usize {
        match self {
            L4::Udp { .. } => UDP_LEN,
            L4::Tcp { .. } => TCP_LEN,
            L4::Icmp { .. } => ICMP_LEN,
        }
    }
}

impl FrameSpec {
    /// An untagged, unencapsulated frame with the default MACs.
    pub fn new(l3: L3, l4: L4, frame_size: usize) -> FrameSpec {
        FrameSpec {
            eth_src: DEFAULT_ETH_SRC,
            eth_dst: DEFAULT_ETH_DST,
            vlans: Vec::new(),
            l3,
            l4,
            frame_size,
            vxlan: None,
        }
    }

    /// UDP over IPv4, TTL 64, TOS 0, default MACs.
    pub fn udp4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        dport: u16,
        frame_size: usize,
    ) -> FrameSpec {
        FrameSpec::new(L3::v4(src, dst), L4::Udp { sport, dport }, frame_size)
    }

    /// UDP over IPv6, hop limit 64, traffic class 0, default MACs.
    pub fn udp6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        sport: u16,
        dport: u16,
        frame_size: usize,
    ) -> FrameSpec {
        FrameSpec::new(L3::v6(src, dst), L4::Udp { sport, dport }, frame_size)
    }

    /// TCP over IPv4, TTL 64, TOS 0, default MACs.
    pub fn tcp4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        dport: u16,
        flags: u8,
        frame_size: usize,
    ) -> FrameSpec {
        FrameSpec::new(
            L3::v4(src, dst),
            L4::Tcp {
                sport,
                dport,
                flags,
            },
            frame_size,
        )
    }

    /// Add a VLAN tag inside the existing ones (builder style).
    pub fn with_vlan(mut self, tpid: u16, tci: u16) -> FrameSpec {
        self.vlans.push((tpid, tci));
        self
    }

    /// Encapsulate in VXLAN (builder style).
    pub fn with_vxlan(mut self, vxlan: Vxlan) -> FrameSpec {
        self.vxlan = Some(vxlan);
        self
    }

    /// Length of the headers of the (inner) frame: Ethernet, tags, L3, L4.
    fn inner_header_len(&self) -> usize {
        ETH_LEN + VLAN_LEN * self.vlans.len() + self.l3.header_len() + self.l4.header_len()
    }

    /// Bytes the VXLAN encapsulation adds in front of the inner frame (0 without VXLAN).
    fn outer_len(&self) -> usize {
        self.vxlan.as_ref().map_or(0, |v| {
            ETH_LEN + VLAN_LEN * v.outer_vlans.len() + v.outer.header_len() + UDP_LEN + VXLAN_LEN
        })
    }

    /// Smallest frame (without FCS) that holds all the headers.
    pub fn min_len(&self) -> usize {
        self.outer_len() + self.inner_header_len()
    }

    /// Length of the frame [`build`] returns: `max(frame_size - 4, min_len())`.
    pub fn frame_len(&self) -> usize {
        self.frame_size.saturating_sub(FCS_LEN).max(self.min_len())
    }
}

/// Build the frame described by `spec` (without FCS): `spec.frame_len()` bytes.
pub fn build(spec: &FrameSpec) -> Vec<u8> {
    let total = spec.frame_len();
    let outer = spec.outer_len();
    let mut out = vec![0u8; total];
    let payload_len = total - outer - spec.inner_header_len();
    write_frame(
        &mut out[outer..],
        spec.eth_src,
        spec.eth_dst,
        &spec.vlans,
        &spec.l3,
        &spec.l4,
        payload_len,
    );
    if let Some(v) = &spec.vxlan {
        write_vxlan_outer(&mut out, outer, v);
    }
    out
}

/// Write Ethernet + tags, return the offset after them. `ty` is the innermost ethertype.
fn write_eth(buf: &mut [u8], src: [u8; 6], dst: [u8; 6], vlans: &[(u16, u16)], ty: u16) -> usize {
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    let mut o = 12;
    for &(tpid, tci) in vlans {
        put16(buf, o, tpid);
        put16(buf, o + 2, tci);
        o += VLAN_LEN;
    }
    put16(buf, o, ty);
    o + 2
}

fn l3_ethertype(l3: &L3) -> u16 {
    match l3 {
        L3::V4 { .. } => ethertype::IPV4,
        L3::V6 { .. } => ethertype::IPV6,
    }
}

/// Write the IP header for `l4_total` bytes of L4 data at `buf[0..]`.
fn write_ip(buf: &mut [u8], l3: &L3, proto: u8, l4_total: usize) {
    match *l3 {
        L3::V4 { src, dst, ttl, tos } => {
            let h = &mut buf[..IPV4_LEN];
            h[0] = 0x45;
            h[1] = tos;
            put16(h, 2, (IPV4_LEN + l4_total) as u16);
            // identification 0; don't fragment, offset 0
            put16(h, 6, 0x4000);
            h[8] = ttl;
            h[9] = proto;
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&dst.octets());
            let c = finish(sum16(h, 0));
            put16(h, 10, c);
        }
        L3::V6 {
            src,
            dst,
            hop_limit,
            tclass,
        } => {
            let h = &mut buf[..IPV6_LEN];
            let vtf = (6u32 << 28) | ((tclass as u32) << 20);
            h[0..4].copy_from_slice(&vtf.to_be_bytes());
            put16(h, 4, l4_total as u16);
            h[6] = proto;
            h[7] = hop_limit;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&dst.octets());
        }
    }
}

/// One's-complement sum of the pseudo-header for `proto` carrying `len` bytes.
fn pseudo_sum(l3: &L3, proto: u8, len: usize) -> u64 {
    match l3 {
        L3::V4 { src, dst, .. } => {
            let s = sum16(&src.octets(), 0);
            let s = sum16(&dst.octets(), s);
            s + proto as u64 + len as u64
        }
        L3::V6 { src, dst, .. } => {
            let s = sum16(&src.octets(), 0);
            let s = sum16(&dst.octets(), s);
            s + (len as u64 >> 16) + (len as u64 & 0xffff) + proto as u64
        }
    }
}

/// Write a whole (inner) frame into `buf`, which is exactly its length.
fn write_frame(
    buf: &mut [u8],
    src: [u8; 6],
    dst: [u8; 6],
    vlans: &[(u16, u16)],
    l3: &L3,
    l4: &L4,
    payload_len: usize,
) {
    let l3_off = write_eth(buf, src, dst, vlans, l3_ethertype(l3));
    let l4_off = l3_off + l3.header_len();
    let l4_total = l4.header_len() + payload_len;
    debug_assert_eq!(l4_off + l4_total, buf.len());
    let v6 = matches!(l3, L3::V6 { .. });
    let proto = match l4 {
        L4::Udp { .. } => ipproto::UDP,
        L4::Tcp { .. } => ipproto::TCP,
        L4::Icmp { .. } if v6 => ipproto::ICMPV6,
        L4::Icmp { .. } => ipproto::ICMP,
    };
    write_ip(&mut buf[l3_off..], l3, proto, l4_total);

    let seg = &mut buf[l4_off..];
    let hl = l4.header_len();
    for (i, b) in seg[hl..].iter_mut().enumerate() {
        *b = i as u8;
    }
    match *l4 {
        L4::Udp { sport, dport } => {
            put16(seg, 0, sport);
            put16(seg, 2, dport);
            put16(seg, 4, l4_total as u16);
            let c = finish(sum16(seg, pseudo_sum(l3, proto, l4_total)));
            // A computed 0 is sent as 0xffff: 0 means "no checksum" (RFC 768).
            put16(seg, 6, if c == 0 { 0xffff } else { c });
        }
        L4::Tcp {
            sport,
            dport,
            flags,
        } => {
            put16(seg, 0, sport);
            put16(seg, 2, dport);
            seg[4..8].copy_from_slice(&1u32.to_be_bytes());
            let ack = if flags & 0x10 != 0 { 1u32 } else { 0 };
            seg[8..12].copy_from_slice(&ack.to_be_bytes());
            seg[12] = 5 << 4;
            seg[13] = flags;
            put16(seg, 14, 65535);
            let c = finish(sum16(seg, pseudo_sum(l3, proto, l4_total)));
            put16(seg, 16, c);
        }
        L4::Icmp { ty, code } => {
            seg[0] = ty;
            seg[1] = code;
            put16(seg, 4, 1);
            put16(seg, 6, 1);
            // ICMPv4 has no pseudo-header; ICMPv6 does.
            let init = if v6 {
                pseudo_sum(l3, proto, l4_total)
            } else {
                0
            };
            let c = finish(sum16(seg, init));
            put16(seg, 2, c);
        }
    }
}

/// Write the VXLAN encapsulation into `out[..outer]`; the inner frame is already in place.
fn write_vxlan_outer(out: &mut [u8], outer: usize, v: &Vxlan) {
    let l3_off = write_eth(
        out,
        v.outer_eth_src,
        v.outer_eth_dst,
        &v.outer_vlans,
        l3_ethertype(&v.outer),
    );
    let udp_off = l3_off + v.outer.header_len();
    let udp_total = out.len() - udp_off;
    write_ip(&mut out[l3_off..], &v.outer, ipproto::UDP, udp_total);
    let seg = &mut out[udp_off..];
    put16(seg, 0, v.sport);
    put16(seg, 2, VXLAN_PORT);
    put16(seg, 4, udp_total as u16);
    seg[8] = 0x08; // flags: VNI valid
    seg[12..15].copy_from_slice(&v.vni.to_be_bytes()[1..4]);
    debug_assert_eq!(udp_off + UDP_LEN + VXLAN_LEN, outer);
    if let L3::V6 { .. } = v.outer {
        let c = finish(sum16(seg, pseudo_sum(&v.outer, ipproto::UDP, udp_total)));
        put16(seg, 6, if c == 0 { 0xffff } else { c });
    }
}

#[inline]
fn put16(buf: &mut [u8], off: usize, v: u16) {
    buf[off..off + 2].copy_from_slice(&v.to_be_bytes());
}
