//! VXLAN encapsulation: push outer Ethernet / IPv4 or IPv6 / UDP / VXLAN headers in front
//! of a frame, in its headroom (RFC 7348; the outer fields as Linux's vxlan driver sets them).
//!
//! IPv4: DF set, TTL 64, ID 0, header checksum; UDP checksum 0 (allowed over IPv4).
//! IPv6: hop limit 64, flow label from the inner flow hash, UDP checksum computed (RFC 6935
//! allows zero only with care; Linux and OVS compute it by default). The UDP source port
//! comes from the inner flow hash, in 49152..=65535, so the underlay's RSS and ECMP spread
//! tunnels by inner flow.

use crate::checksum;
use crate::packet::Packet;
use std::net::IpAddr;

/// Outer header bytes over IPv4: Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8.
pub const VXLAN_V4_OVERHEAD: usize = 50;
/// Outer header bytes over IPv6: Ethernet 14 + IPv6 40 + UDP 8 + VXLAN 8.
pub const VXLAN_V6_OVERHEAD: usize = 70;

/// What the outer headers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VxlanEncap {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// Outer source and destination: both IPv4 or both IPv6.
    pub src: IpAddr,
    pub dst: IpAddr,
    /// 24 bits.
    pub vni: u32,
    pub dst_port: u16,
    /// A hash of the inner flow: the UDP source port and the IPv6 flow label.
    pub flow_hash: u32,
}

/// Why a packet could not be encapsulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncapError {
    /// Neither headroom nor tailroom for the outer headers.
    NoRoom,
    /// The outer source and destination are not of one address family.
    FamilyMismatch,
}

/// [`checksum::sum16`] four bytes at a time (the one's-complement sum of 32-bit words
/// folds to the same 16-bit sum); the tail by 16-bit words.
#[inline(always)]
fn sum32(data: &[u8], mut acc: u64) -> u64 {
    let mut c = data.chunks_exact(4);
    for w in &mut c {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    checksum::sum16(c.remainder(), acc)
}

/// The UDP source port for an inner flow hash: 49152..=65535.
#[inline(always)]
pub fn src_port(flow_hash: u32) -> u16 {
    // The high bits of the hash are the better mixed ones.
    0xc000 | ((flow_hash >> 16) as u16 & 0x3fff)
}

/// Push the outer headers in front of `pkt` (whose data is the inner Ethernet frame).
/// On success the packet is the whole encapsulated frame; [`Packet::pull_front`] by the
/// returned overhead gives back the inner frame.
#[inline]
pub fn vxlan_encap(pkt: &mut Packet<'_>, e: &VxlanEncap) -> Result<usize, EncapError> {
    let inner = pkt.len();
    let (v6, over) = match (e.src, e.dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (false, VXLAN_V4_OVERHEAD),
        (IpAddr::V6(_), IpAddr::V6(_)) => (true, VXLAN_V6_OVERHEAD),
        _ => return Err(EncapError::FamilyMismatch),
    };
    if !pkt.push_front(over) {
        return Err(EncapError::NoRoom);
    }
    let d = pkt.data_mut();
    let sport = src_port(e.flow_hash);
    d[0..6].copy_from_slice(&e.dst_mac);
    d[6..12].copy_from_slice(&e.src_mac);
    let udp_len = (inner + 16) as u16;
    let l4 = if v6 { 54 } else { 34 };
    match (e.src, e.dst) {
        (IpAddr::V4(s), IpAddr::V4(t)) => {
            d[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut d[14..34];
            let total = (inner + 36) as u16;
            ip[0] = 0x45;
            ip[1] = 0;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[4..6].copy_from_slice(&[0, 0]);
            ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
            ip[8] = 64;
            ip[9] = 17;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&t.octets());
            let c = checksum::finish(checksum::sum16(ip, 0));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(t)) => {
            d[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut d[14..54];
            let label = e.flow_hash & 0x000f_ffff;
            ip[0..4].copy_from_slice(&(0x6000_0000u32 | label).to_be_bytes());
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = 17;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&t.octets());
        }
        _ => unreachable!("families checked above"),
    }
    let udp = &mut d[l4..l4 + 16];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&e.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    // VXLAN: flags (I), 3 reserved bytes, VNI, 1 reserved byte.
    udp[8..12].copy_from_slice(&[0x08, 0, 0, 0]);
    let vni = (e.vni & 0x00ff_ffff) << 8;
    udp[12..16].copy_from_slice(&vni.to_be_bytes());
    if v6 {
        // Pseudo-header (addresses, length, next header) + the UDP datagram.
        let mut acc = sum32(&d[22..54], 0);
        acc += u64::from(udp_len) + 17;
        acc = sum32(&d[l4..], acc);
        let mut c = checksum::finish(acc);
        if c == 0 {
            c = 0xffff;
        }
        d[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    Ok(over)
}
