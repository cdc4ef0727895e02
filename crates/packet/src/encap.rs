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

/// The outer headers of one (tunnel, hop), built once by [`VxlanTemplate::new`]: per packet
/// [`VxlanTemplate::encap`] copies them and writes only what varies (lengths, UDP source
/// port, VNI, IPv6 flow label, the checksums from partial sums taken here). The bytes
/// equal [`vxlan_encap`]'s for the same [`VxlanEncap`].
#[derive(Clone, Copy, Debug)]
pub struct VxlanTemplate {
    /// The outer headers with the varying fields zero; the first `over` bytes are used.
    hdr: [u8; VXLAN_V6_OVERHEAD],
    v6: bool,
    /// IPv4: the header's one's-complement sum but for the total length (checksum 0).
    /// IPv6: the UDP checksum's sum over the pseudo-header's addresses and next header,
    /// the UDP destination port and the VXLAN flags.
    partial: u32,
}

impl VxlanTemplate {
    /// The headers `e` describes (its `vni` and `flow_hash` are ignored: they are given
    /// per packet).
    pub fn new(e: &VxlanEncap) -> Result<VxlanTemplate, EncapError> {
        let v6 = match (e.src, e.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            _ => return Err(EncapError::FamilyMismatch),
        };
        let mut h = [0u8; VXLAN_V6_OVERHEAD];
        h[0..6].copy_from_slice(&e.dst_mac);
        h[6..12].copy_from_slice(&e.src_mac);
        let l4 = match (e.src, e.dst) {
            (IpAddr::V4(s), IpAddr::V4(t)) => {
                h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut h[14..34];
                ip[0] = 0x45;
                ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
                ip[8] = 64;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&t.octets());
                34
            }
            (IpAddr::V6(s), IpAddr::V6(t)) => {
                h[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut h[14..54];
                ip[0] = 0x60;
                ip[6] = 17;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&t.octets());
                54
            }
            _ => unreachable!("families checked above"),
        };
        h[l4 + 2..l4 + 4].copy_from_slice(&e.dst_port.to_be_bytes());
        h[l4 + 8] = 0x08; // VXLAN I flag
        let partial = if v6 {
            checksum::sum16(&h[22..54], 0) + 17 + checksum::sum16(&h[l4..l4 + 16], 0)
        } else {
            checksum::sum16(&h[14..34], 0)
        };
        Ok(VxlanTemplate {
            hdr: h,
            v6,
            // At most 26 words of 16 bits: far below 2^32.
            partial: partial as u32,
        })
    }

    /// Outer header bytes this template pushes.
    #[inline(always)]
    pub fn overhead(&self) -> usize {
        if self.v6 {
            VXLAN_V6_OVERHEAD
        } else {
            VXLAN_V4_OVERHEAD
        }
    }

    /// [`vxlan_encap`] with this template's headers, VNI `vni` (24 bits) and the inner
    /// flow hash `flow_hash`.
    #[inline(always)]
    pub fn encap(
        &self,
        pkt: &mut Packet<'_>,
        vni: u32,
        flow_hash: u32,
    ) -> Result<usize, EncapError> {
        if self.v6 {
            self.encap_v6(pkt, vni, flow_hash)
        } else {
            self.encap_v4(pkt, vni, flow_hash)
        }
    }

    #[inline(always)]
    fn encap_v4(
        &self,
        pkt: &mut Packet<'_>,
        vni: u32,
        flow_hash: u32,
    ) -> Result<usize, EncapError> {
        const OVER: usize = VXLAN_V4_OVERHEAD;
        let inner = pkt.len();
        if !pkt.push_front(OVER) {
            return Err(EncapError::NoRoom);
        }
        let Some(d) = pkt.data_mut().first_chunk_mut::<OVER>() else {
            unreachable!("just pushed")
        };
        *d = *self.hdr.first_chunk::<OVER>().unwrap();
        let total = (inner + 36) as u16;
        d[16..18].copy_from_slice(&total.to_be_bytes());
        let c = fold_finish(self.partial + u32::from(total));
        d[24..26].copy_from_slice(&c.to_be_bytes());
        d[34..36].copy_from_slice(&src_port(flow_hash).to_be_bytes());
        d[38..40].copy_from_slice(&((inner + 16) as u16).to_be_bytes());
        d[46..50].copy_from_slice(&((vni & 0x00ff_ffff) << 8).to_be_bytes());
        Ok(OVER)
    }

    #[inline(always)]
    fn encap_v6(
        &self,
        pkt: &mut Packet<'_>,
        vni: u32,
        flow_hash: u32,
    ) -> Result<usize, EncapError> {
        const OVER: usize = VXLAN_V6_OVERHEAD;
        let inner = pkt.len();
        if !pkt.push_front(OVER) {
            return Err(EncapError::NoRoom);
        }
        let (d, payload) = pkt.data_mut().split_at_mut(OVER);
        let Some(d) = d.first_chunk_mut::<OVER>() else {
            unreachable!("just pushed")
        };
        *d = self.hdr;
        let udp_len = (inner + 16) as u16;
        let label = 0x6000_0000u32 | (flow_hash & 0x000f_ffff);
        d[14..18].copy_from_slice(&label.to_be_bytes());
        d[18..20].copy_from_slice(&udp_len.to_be_bytes());
        let sport = src_port(flow_hash);
        d[54..56].copy_from_slice(&sport.to_be_bytes());
        d[58..60].copy_from_slice(&udp_len.to_be_bytes());
        let vni = (vni & 0x00ff_ffff) << 8;
        d[66..70].copy_from_slice(&vni.to_be_bytes());
        // The pseudo-header's and the UDP header's length, the varying words, the frame.
        let acc = self.partial
            + 2 * u32::from(udp_len)
            + u32::from(sport)
            + (vni >> 16)
            + (vni & 0xffff)
            + u32::from(checksum::sum_words(payload));
        let mut c = fold_finish(acc);
        if c == 0 {
            c = 0xffff;
        }
        d[60..62].copy_from_slice(&c.to_be_bytes());
        Ok(OVER)
    }
}

/// Fold a 32-bit one's-complement accumulator (below 2^31) and complement it.
#[inline(always)]
fn fold_finish(mut s: u32) -> u16 {
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn frame(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn template_encap_equals_vxlan_encap() {
        let addrs = [
            (
                IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                IpAddr::V4(Ipv4Addr::new(198, 51, 100, 254)),
            ),
            (
                IpAddr::V4(Ipv4Addr::new(255, 255, 255, 255)),
                IpAddr::V4(Ipv4Addr::new(255, 255, 255, 254)),
            ),
            (
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
                IpAddr::V6(Ipv6Addr::new(0xfe80, 0xffff, 0xffff, 0, 0, 0xffff, 9, 2)),
            ),
            (
                IpAddr::V6(Ipv6Addr::from([0xffu8; 16])),
                IpAddr::V6(Ipv6Addr::from([0xfeu8; 16])),
            ),
        ];
        let mut n = 0u32;
        for (src, dst) in addrs {
            for len in [0usize, 1, 14, 59, 60, 61, 64, 113, 1500] {
                for (vni, hash) in [
                    (0u32, 0u32),
                    (42, 0xdead_beef),
                    (0xff_ffff, u32::MAX),
                    (0x1234_5678, 7),
                ] {
                    n += 1;
                    let e = VxlanEncap {
                        src_mac: [2, 0, 0, 0, 0, n as u8],
                        dst_mac: [0xff, 0xfe, 1, 2, 3, 4],
                        src,
                        dst,
                        vni,
                        dst_port: 4789 + (n as u16 & 3) * 0x4000,
                        flow_hash: hash,
                    };
                    let t = VxlanTemplate::new(&e).unwrap();
                    let inner = frame(len, n);
                    let mut a = vec![0u8; 128 + len];
                    a[128..].copy_from_slice(&inner);
                    let mut b = a.clone();
                    let mut pa = Packet::new(&mut a, 128, len);
                    let mut pb = Packet::new(&mut b, 128, len);
                    assert_eq!(vxlan_encap(&mut pa, &e), t.encap(&mut pb, vni, hash));
                    assert_eq!(pa.data(), pb.data(), "{e:?} len {len}");
                    assert_eq!(t.overhead(), pa.len() - len);
                }
            }
        }
    }

    #[test]
    fn template_needs_room_and_one_family() {
        let e = VxlanEncap {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            src: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dst: IpAddr::V6(Ipv6Addr::LOCALHOST),
            vni: 1,
            dst_port: 4789,
            flow_hash: 0,
        };
        assert_eq!(
            VxlanTemplate::new(&e).unwrap_err(),
            EncapError::FamilyMismatch
        );
        let e = VxlanEncap {
            dst: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ..e
        };
        let t = VxlanTemplate::new(&e).unwrap();
        let mut buf = vec![0u8; 60];
        let mut p = Packet::new(&mut buf, 0, 60);
        assert_eq!(t.encap(&mut p, 1, 0), Err(EncapError::NoRoom));
    }
}
