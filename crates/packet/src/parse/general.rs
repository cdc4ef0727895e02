//! The complete parser, for every frame the fast paths leave: VLAN stacks, ARP, IPv4 with
//! options and fragments, IPv6 and its extension headers, TCP, UDP, ICMP and ICMPv6. It
//! keys a frame or names its drop reason, and reports where a VXLAN header starts.

use super::outcome::{DropReason, PacketMeta};
use super::wire::{at, be16, hdr, is_vlan_tpid, Key, Vxlan, NO_VXLAN};
use crate::key::{ethertype, ipproto, FRAG_ANY, FRAG_LATER, VLAN_PRESENT};

/// Parse one Ethernet frame starting at `l2` (0, or the inner frame of a VXLAN packet).
#[inline(always)]
pub(super) fn parse_frame(
    data: &[u8],
    l2: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<Vxlan, DropReason> {
    let eth: &[u8; 14] = hdr(data, l2).ok_or(DropReason::EthTruncated)?;
    k[at::ETH_DST..at::ETH_DST + 6].copy_from_slice(&eth[0..6]);
    k[at::ETH_SRC..at::ETH_SRC + 6].copy_from_slice(&eth[6..12]);
    meta.l2 = l2 as u16;
    let mut etype = be16([eth[12], eth[13]]);
    let mut l3 = l2 + 14;
    if is_vlan_tpid(etype) {
        (etype, l3) = parse_vlans(data, l3, k, meta)?;
    }
    if etype < 0x0600 {
        // An 802.3 length, not a type: keyed as OVS keys it (the XDP tier does the same).
        etype = ethertype::NONE;
    }
    k[at::ETH_TYPE..at::ETH_TYPE + 2].copy_from_slice(&etype.to_be_bytes());
    match etype {
        ethertype::IPV4 => parse_ipv4(data, l3, k, meta, vxlan_port),
        ethertype::IPV6 => parse_ipv6(data, l3, k, meta, vxlan_port),
        ethertype::ARP => parse_arp(data, l3, k, meta).map(|()| NO_VXLAN),
        // Anything else (802.3 frames as 0x05ff) is keyed on its ethertype alone.
        _ => Ok(NO_VXLAN),
    }
}

/// Parse the VLAN tags that start at `off` (just after the first TPID); returns the
/// ethertype after the tags and the offset of the L3 header.
#[inline(never)]
fn parse_vlans(
    data: &[u8],
    mut off: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
) -> Result<(u16, usize), DropReason> {
    for slot in [at::VLAN_TCI, at::VLAN_INNER_TCI] {
        let tag: &[u8; 4] = hdr(data, off).ok_or(DropReason::VlanTruncated)?;
        // OVS's convention: the DEI/CFI bit is replaced by "tag present".
        let tci = be16([tag[0], tag[1]]) | VLAN_PRESENT;
        k[slot..slot + 2].copy_from_slice(&tci.to_be_bytes());
        meta.vlans += 1;
        off += 4;
        let etype = be16([tag[2], tag[3]]);
        if !is_vlan_tpid(etype) {
            return Ok((etype, off));
        }
    }
    Err(DropReason::TooManyVlans)
}

#[inline(never)]
fn parse_arp(data: &[u8], l3: usize, k: &mut Key, meta: &mut PacketMeta) -> Result<(), DropReason> {
    // The fixed part: hardware and protocol types and sizes, and the opcode.
    let fixed: &[u8; 8] = hdr(data, l3).ok_or(DropReason::ArpTruncated)?;
    meta.l3 = l3 as u16;
    if fixed[0..6] != [0, 1, 0x08, 0x00, 6, 4] {
        // Not Ethernet/IPv4 ARP (another hardware or protocol type, other sizes): keyed
        // on the ethertype alone, its ARP fields zero, as OVS keys it. Not malformed,
        // however long its addresses are.
        return Ok(());
    }
    let arp: &[u8; 28] = hdr(data, l3).ok_or(DropReason::ArpTruncated)?;
    k[at::NW_PROTO] = arp[7];
    k[at::IP_SRC..at::IP_SRC + 4].copy_from_slice(&arp[14..18]);
    k[at::IP_DST..at::IP_DST + 4].copy_from_slice(&arp[24..28]);
    Ok(())
}

#[inline(always)]
fn parse_ipv4(
    data: &[u8],
    l3: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<Vxlan, DropReason> {
    let ip: &[u8; 20] = hdr(data, l3).ok_or(DropReason::Ipv4Truncated)?;
    if ip[0] >> 4 != 4 {
        return Err(DropReason::Ipv4BadVersion);
    }
    let hlen = usize::from(ip[0] & 0x0f) * 4;
    if hlen < 20 {
        return Err(DropReason::Ipv4BadHeaderLength);
    }
    // `hdr` succeeded, so `l3 < data.len()`.
    let avail = data.len() - l3;
    if hlen > avail {
        return Err(DropReason::Ipv4Truncated);
    }
    let total = usize::from(be16([ip[2], ip[3]]));
    if total < hlen || total > avail {
        return Err(DropReason::Ipv4BadTotalLength);
    }
    let proto = ip[9];
    k[at::NW_PROTO] = proto;
    k[at::NW_TOS] = ip[1];
    k[at::NW_TTL] = ip[8];
    k[at::IP_SRC..at::IP_SRC + 4].copy_from_slice(&ip[12..16]);
    k[at::IP_DST..at::IP_DST + 4].copy_from_slice(&ip[16..20]);
    meta.l3 = l3 as u16;

    let mut vxlan_port = vxlan_port;
    let frag = be16([ip[6], ip[7]]);
    if frag & 0x3fff != 0 {
        // MF or a fragment offset. A fragment cannot be decapsulated: the inner frame
        // is incomplete.
        vxlan_port = None;
        if frag & 0x1fff != 0 {
            k[at::NW_FRAG] = FRAG_ANY | FRAG_LATER;
            return Ok(NO_VXLAN);
        }
        k[at::NW_FRAG] = FRAG_ANY;
    }
    // Ethernet padding after `total` is not part of the L4 payload.
    let data = &data[..l3 + total];
    parse_l4::<false>(data, l3 + hlen, proto, k, meta, vxlan_port)
}

#[inline(never)]
fn parse_ipv6(
    data: &[u8],
    l3: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<Vxlan, DropReason> {
    let ip: &[u8; 40] = hdr(data, l3).ok_or(DropReason::Ipv6Truncated)?;
    if ip[0] >> 4 != 6 {
        return Err(DropReason::Ipv6BadVersion);
    }
    let end = l3 + 40 + usize::from(be16([ip[4], ip[5]]));
    let data = data.get(..end).ok_or(DropReason::Ipv6BadPayloadLength)?;
    k[at::NW_TOS] = (ip[0] << 4) | (ip[1] >> 4);
    k[at::NW_TTL] = ip[7];
    k[at::IP_SRC..at::IP_DST + 16].copy_from_slice(&ip[8..40]);
    meta.l3 = l3 as u16;

    let (proto, l4) = match walk_ipv6_ext(data, l3 + 40, ip[6], k)? {
        Some(upper) => upper,
        None => return Ok(NO_VXLAN),
    };
    k[at::NW_PROTO] = proto;
    let vxlan_port = if k[at::NW_FRAG] != 0 {
        None
    } else {
        vxlan_port
    };
    parse_l4::<true>(data, l4, proto, k, meta, vxlan_port)
}

/// Most extension headers walked before giving up.
const MAX_IPV6_EXT: usize = 8;

/// Skip IPv6 extension headers; returns the upper-layer protocol and its offset, or
/// `None` for a non-first fragment (whose next header is still recorded as `nw_proto`).
#[inline(always)]
fn walk_ipv6_ext(
    data: &[u8],
    mut off: usize,
    mut next: u8,
    k: &mut Key,
) -> Result<Option<(u8, usize)>, DropReason> {
    let mut count = 0;
    loop {
        let len = match next {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => {
                let h: &[u8; 8] = hdr(data, off).ok_or(DropReason::Ipv6ExtTruncated)?;
                (usize::from(h[1]) + 1) * 8
            }
            ipproto::FRAGMENT => 8,
            _ => return Ok(Some((next, off))),
        };
        count += 1;
        if count > MAX_IPV6_EXT {
            return Err(DropReason::Ipv6TooManyExtHeaders);
        }
        let h: &[u8; 8] = hdr(data, off).ok_or(DropReason::Ipv6ExtTruncated)?;
        if data.len() - off < len {
            return Err(DropReason::Ipv6ExtTruncated);
        }
        if next == ipproto::FRAGMENT {
            let frag = be16([h[2], h[3]]);
            if frag & 0xfff9 != 0 {
                k[at::NW_FRAG] |= FRAG_ANY;
            }
            if frag & 0xfff8 != 0 {
                k[at::NW_FRAG] |= FRAG_LATER;
                k[at::NW_PROTO] = h[0];
                return Ok(None);
            }
        }
        next = h[0];
        off += len;
    }
}

/// Parse the L4 header at `l4`; `data` ends where the IP payload ends. ICMP is only
/// recognised under IPv4 and ICMPv6 only under IPv6 (`V6`).
#[inline(always)]
fn parse_l4<const V6: bool>(
    data: &[u8],
    l4: usize,
    proto: u8,
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<Vxlan, DropReason> {
    match proto {
        ipproto::UDP => parse_udp(data, l4, k, meta, vxlan_port),
        ipproto::TCP => parse_tcp(data, l4, k, meta).map(|()| NO_VXLAN),
        ipproto::ICMP if !V6 => parse_icmp(data, l4, k, meta, DropReason::IcmpTruncated),
        ipproto::ICMPV6 if V6 => parse_icmp(data, l4, k, meta, DropReason::Icmpv6Truncated),
        _ => Ok(NO_VXLAN),
    }
}

#[inline(always)]
fn parse_udp(
    data: &[u8],
    l4: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<Vxlan, DropReason> {
    let udp: &[u8; 8] = hdr(data, l4).ok_or(DropReason::UdpTruncated)?;
    let len = usize::from(be16([udp[4], udp[5]]));
    // A first fragment's UDP length covers the whole datagram, not just this fragment.
    let whole = k[at::NW_FRAG] & FRAG_ANY == 0;
    if len < 8 || (whole && len > data.len() - l4) {
        return Err(DropReason::UdpBadLength);
    }
    k[at::TP_SRC..at::TP_SRC + 4].copy_from_slice(&udp[0..4]);
    meta.l4 = l4 as u16;
    match vxlan_port {
        Some(port) if be16([udp[2], udp[3]]) == port => Ok(Vxlan {
            hdr: l4 + 8,
            end: l4 + len,
        }),
        _ => Ok(NO_VXLAN),
    }
}

#[inline(never)]
fn parse_tcp(data: &[u8], l4: usize, k: &mut Key, meta: &mut PacketMeta) -> Result<(), DropReason> {
    let tcp: &[u8; 20] = hdr(data, l4).ok_or(DropReason::TcpTruncated)?;
    let doff = usize::from(tcp[12] >> 4) * 4;
    if doff < 20 || doff > data.len() - l4 {
        return Err(DropReason::TcpBadDataOffset);
    }
    k[at::TP_SRC..at::TP_SRC + 4].copy_from_slice(&tcp[0..4]);
    let flags = be16([tcp[12], tcp[13]]) & 0x0fff;
    k[at::TCP_FLAGS..at::TCP_FLAGS + 2].copy_from_slice(&flags.to_be_bytes());
    meta.l4 = l4 as u16;
    Ok(())
}

/// ICMP and ICMPv6: type and code are keyed as 16-bit "ports".
#[inline(never)]
fn parse_icmp(
    data: &[u8],
    l4: usize,
    k: &mut Key,
    meta: &mut PacketMeta,
    truncated: DropReason,
) -> Result<Vxlan, DropReason> {
    let icmp: &[u8; 4] = hdr(data, l4).ok_or(truncated)?;
    k[at::TP_SRC..at::TP_SRC + 4].copy_from_slice(&[0, icmp[0], 0, icmp[1]]);
    meta.l4 = l4 as u16;
    Ok(NO_VXLAN)
}
