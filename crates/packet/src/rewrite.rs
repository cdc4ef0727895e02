//! Header rewrites: the actions that change packet bytes, with checksums kept right.
//!
//! Everything here runs once per packet and action, so it allocates nothing and never
//! panics: every read goes through a bounds-checked helper, and when a header is not where
//! `meta` says it is (which a correct parser never produces) the action is a no-op.
//! Checksums are updated incrementally (RFC 1624) rather than recomputed, so the cost of a
//! rewrite does not depend on the payload length.

use crate::action::Action;
use crate::checksum;
use crate::key::{ethertype, ipproto};
use crate::packet::Packet;
use crate::parse::PacketMeta;

/// Why a rewrite dropped the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewriteDrop {
    /// `DecTtl` on a packet whose TTL / hop limit is 0 or 1.
    TtlExpired,
    /// A VLAN push with neither headroom nor tailroom left in the buffer.
    NoRoom,
    /// `PushVlan` (or `SetVlanVid`/`SetVlanPcp` pushing) onto a packet that already has two
    /// tags: flowpath parses at most two, so a third is refused and the packet dropped.
    TooManyVlans,
}

/// Apply one rewrite action to `pkt`, whose headers `meta` describes (offsets from the
/// start of `pkt.data()`, with `meta.l2 == 0`); `meta` is updated when headers move.
/// Non-rewrite actions (outputs of every kind, `SetTunnel`) and `ct` are a no-op here.
pub fn apply(
    action: &Action,
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
) -> Result<(), RewriteDrop> {
    match *action {
        Action::Output(_)
        | Action::InPort
        | Action::Controller { .. }
        | Action::SetTunnel(_)
        | Action::SetTunnelDst(_)
        | Action::Normal
        | Action::Flood
        | Action::All
        | Action::Table
        | Action::Group(_)
        | Action::WriteMetadata { .. }
        // The datapath runs these (the tracker rewrites NAT'd packets itself).
        | Action::Ct(_)
        | Action::CtClear => {}
        Action::SetEthSrc(mac) => set_bytes(pkt, 6, &mac),
        Action::SetEthDst(mac) => set_bytes(pkt, 0, &mac),
        Action::SetIpv4Src(addr) => set_ipv4_addr(pkt, meta, IPV4_SRC, addr),
        Action::SetIpv4Dst(addr) => set_ipv4_addr(pkt, meta, IPV4_DST, addr),
        Action::SetIpv6Src(addr) => set_ipv6_addr(pkt, meta, IPV6_SRC, addr),
        Action::SetIpv6Dst(addr) => set_ipv6_addr(pkt, meta, IPV6_DST, addr),
        Action::SetNwTos(tos) => set_nw_tos(pkt, meta, tos),
        Action::SetTpSrc(port) => set_tp_port(pkt, meta, 0, port),
        Action::SetTpDst(port) => set_tp_port(pkt, meta, 2, port),
        Action::PushVlan { tpid } => push_vlan(pkt, meta, tpid)?,
        Action::PopVlan => pop_vlan(pkt, meta),
        Action::SetVlanVid(vid) => {
            ensure_vlan(pkt, meta)?;
            set_outer_tci(pkt, meta, !VLAN_VID_BITS, vid & VLAN_VID_BITS);
        }
        Action::SetVlanPcp(pcp) => {
            ensure_vlan(pkt, meta)?;
            set_outer_tci(pkt, meta, !VLAN_PCP_BITS, u16::from(pcp & 7) << 13);
        }
        Action::DecTtl => dec_ttl(pkt, meta)?,
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Header layout constants (offsets inside their header).

/// Bytes of the two MAC addresses at the start of the frame.
const MACS_LEN: usize = 12;
/// Size of one 802.1Q / 802.1ad tag (TPID + TCI).
const VLAN_TAG_LEN: usize = 4;
/// VID bits of a TCI.
const VLAN_VID_BITS: u16 = 0x0fff;
/// PCP bits of a TCI.
const VLAN_PCP_BITS: u16 = 0xe000;

const IPV4_MIN_LEN: usize = 20;
const IPV4_TOS: usize = 1;
const IPV4_TTL: usize = 8;
const IPV4_PROTO: usize = 9;
const IPV4_CSUM: usize = 10;
const IPV4_SRC: usize = 12;
const IPV4_DST: usize = 16;

const IPV6_LEN: usize = 40;
const IPV6_NEXT_HEADER: usize = 6;
const IPV6_HOP_LIMIT: usize = 7;
const IPV6_SRC: usize = 8;
const IPV6_DST: usize = 24;

/// Offset of the checksum inside the TCP, UDP and ICMPv6 headers.
const TCP_CSUM: usize = 16;
const UDP_CSUM: usize = 6;
const ICMPV6_CSUM: usize = 2;

// ---------------------------------------------------------------------------------------
// Checksum fields ([`checksum`] does the arithmetic).

/// The transport checksum a rewrite has to keep right: where it is and whether it is a
/// UDP checksum (for which zero means "not computed").
#[derive(Clone, Copy)]
struct L4Csum {
    /// Offset of the checksum field from the start of the frame.
    off: usize,
    udp: bool,
}

/// Update the transport checksum at `c` for a covered field changing from `old` to `new`.
///
/// UDP: a zero checksum means the sender did not compute one, so it stays zero (OVS does
/// the same, also for IPv6 where zero is formally invalid); and since a computed UDP
/// checksum of zero must be sent as 0xffff (RFC 768), a result of zero becomes 0xffff.
#[inline(always)]
fn update_l4_csum(d: &mut [u8], c: L4Csum, old: &[u8], new: &[u8]) {
    let Some(cur) = rd16(d, c.off) else { return };
    if c.udp && cur == 0 {
        return;
    }
    let mut next = checksum::update(cur, old, new);
    if c.udp && next == 0 {
        next = 0xffff;
    }
    wr16(d, c.off, next);
}

// ---------------------------------------------------------------------------------------
// Bounds-checked byte access.

#[inline(always)]
fn rd16(d: &[u8], off: usize) -> Option<u16> {
    match d.get(off..off.checked_add(2)?) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

#[inline(always)]
fn rd8(d: &[u8], off: usize) -> Option<u8> {
    d.get(off).copied()
}

/// Write a big-endian 16-bit value; silently nothing if out of bounds (callers check the
/// header fits before writing, so this never happens in practice).
#[inline(always)]
fn wr16(d: &mut [u8], off: usize, v: u16) {
    if let Some(dst) = off.checked_add(2).and_then(|end| d.get_mut(off..end)) {
        dst.copy_from_slice(&v.to_be_bytes());
    }
}

/// Copy `N` bytes at `off` out of `d`.
#[inline(always)]
fn rd_array<const N: usize>(d: &[u8], off: usize) -> Option<[u8; N]> {
    let src = d.get(off..off.checked_add(N)?)?;
    let mut out = [0u8; N];
    out.copy_from_slice(src);
    Some(out)
}

/// Overwrite `bytes.len()` bytes at `off` (no-op if the frame is too short).
fn set_bytes(pkt: &mut Packet<'_>, off: usize, bytes: &[u8]) {
    if off + bytes.len() <= pkt.len() {
        pkt.data_mut()[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

// ---------------------------------------------------------------------------------------
// Locating headers.

/// The ethertype after the frame's `meta.vlans` tags.
#[inline(always)]
fn frame_ethertype(d: &[u8], meta: &PacketMeta) -> Option<u16> {
    rd16(d, MACS_LEN + VLAN_TAG_LEN * usize::from(meta.vlans))
}

/// Offset of the IPv4 header if the frame is IPv4 and the fixed header is all there.
#[inline(always)]
fn ipv4_l3(d: &[u8], meta: &PacketMeta) -> Option<usize> {
    let l3 = usize::from(meta.l3);
    (l3 != 0
        && frame_ethertype(d, meta)? == ethertype::IPV4
        && l3 + IPV4_MIN_LEN <= d.len()
        && d[l3] >> 4 == 4)
        .then_some(l3)
}

/// Offset of the IPv6 header if the frame is IPv6 and the fixed header is all there.
#[inline(always)]
fn ipv6_l3(d: &[u8], meta: &PacketMeta) -> Option<usize> {
    let l3 = usize::from(meta.l3);
    (l3 != 0
        && frame_ethertype(d, meta)? == ethertype::IPV6
        && l3 + IPV6_LEN <= d.len()
        && d[l3] >> 4 == 6)
        .then_some(l3)
}

/// What the IPv6 extension-header chain says about the header at `meta.l4`.
struct Ipv6Upper {
    /// The upper-layer protocol (the next-header value that leads to `meta.l4`).
    proto: u8,
    /// A routing header with segments left is present: the transport pseudo-header then
    /// uses the final destination from the routing header, not the IPv6 destination field.
    routing_pending: bool,
}

/// Walk the IPv6 extension headers (hop-by-hop, routing, fragment, destination options:
/// the ones the parser skips) from the fixed header at `l3` to `meta.l4`, and return the
/// upper-layer protocol found there. `None` if there is no L4 header, the chain does not
/// end exactly at `meta.l4`, or it contains a header this walk does not know.
fn ipv6_upper(d: &[u8], l3: usize, meta: &PacketMeta) -> Option<Ipv6Upper> {
    let l4 = usize::from(meta.l4);
    if l4 == 0 {
        return None;
    }
    let mut nh = rd8(d, l3 + IPV6_NEXT_HEADER)?;
    let mut off = l3 + IPV6_LEN;
    let mut routing_pending = false;
    // Every extension header is at least 8 bytes, so this loop ends after at most
    // (l4 - l3) / 8 steps.
    while off < l4 {
        let len = match nh {
            ipproto::HOPOPTS | ipproto::DSTOPTS => (usize::from(rd8(d, off + 1)?) + 1) * 8,
            ipproto::ROUTING => {
                // Segments left is the fourth byte of every routing header.
                routing_pending |= rd8(d, off + 3)? != 0;
                (usize::from(rd8(d, off + 1)?) + 1) * 8
            }
            ipproto::FRAGMENT => 8,
            _ => return None,
        };
        nh = rd8(d, off)?;
        off += len;
    }
    (off == l4).then_some(Ipv6Upper {
        proto: nh,
        routing_pending,
    })
}

/// Where the TCP or UDP checksum is, given the protocol found for the header at `l4`
/// (`None` for other protocols or a truncated header). ICMPv6 is included only when
/// `icmpv6` is set: its checksum covers the IPv6 pseudo-header but not any ports.
#[inline(always)]
fn l4_csum(d: &[u8], l4: usize, proto: u8, icmpv6: bool) -> Option<L4Csum> {
    if l4 == 0 {
        return None;
    }
    let (off, udp) = match proto {
        ipproto::TCP => (l4 + TCP_CSUM, false),
        ipproto::UDP => (l4 + UDP_CSUM, true),
        ipproto::ICMPV6 if icmpv6 => (l4 + ICMPV6_CSUM, false),
        _ => return None,
    };
    (off + 2 <= d.len()).then_some(L4Csum { off, udp })
}

// ---------------------------------------------------------------------------------------
// The rewrites.

/// Set the IPv4 source (`field` = 12) or destination (16) address, fixing the header
/// checksum and the TCP/UDP checksum (whose pseudo-header covers both addresses).
fn set_ipv4_addr(pkt: &mut Packet<'_>, meta: &PacketMeta, field: usize, new: [u8; 4]) {
    let d = pkt.data();
    let Some(l3) = ipv4_l3(d, meta) else { return };
    let Some(old) = rd_array::<4>(d, l3 + field) else {
        return;
    };
    // ICMP has no pseudo-header; a later fragment has l4 == 0 (no transport header).
    let l4 = d
        .get(l3 + IPV4_PROTO)
        .and_then(|&proto| l4_csum(d, usize::from(meta.l4), proto, false));
    let d = pkt.data_mut();
    d[l3 + field..l3 + field + 4].copy_from_slice(&new);
    if let Some(hc) = rd16(d, l3 + IPV4_CSUM) {
        wr16(d, l3 + IPV4_CSUM, checksum::update(hc, &old, &new));
    }
    if let Some(c) = l4 {
        update_l4_csum(d, c, &old, &new);
    }
}

/// Set the IPv6 source (`field` = 8) or destination (24) address, fixing the TCP, UDP or
/// ICMPv6 checksum (IPv6 has no header checksum; all three cover the pseudo-header).
fn set_ipv6_addr(pkt: &mut Packet<'_>, meta: &PacketMeta, field: usize, new: [u8; 16]) {
    let d = pkt.data();
    let Some(l3) = ipv6_l3(d, meta) else { return };
    let Some(old) = rd_array::<16>(d, l3 + field) else {
        return;
    };
    let l4 = ipv6_upper(d, l3, meta).and_then(|up| {
        // With a routing header still to be processed the pseudo-header holds the final
        // destination, which is not the field being rewritten (as OVS does).
        if field == IPV6_DST && up.routing_pending {
            None
        } else {
            l4_csum(d, usize::from(meta.l4), up.proto, true)
        }
    });
    let d = pkt.data_mut();
    d[l3 + field..l3 + field + 16].copy_from_slice(&new);
    if let Some(c) = l4 {
        update_l4_csum(d, c, &old, &new);
    }
}

/// Set the DSCP bits of the IPv4 TOS / IPv6 traffic class to `tos & 0xfc`, keeping ECN.
fn set_nw_tos(pkt: &mut Packet<'_>, meta: &PacketMeta, tos: u8) {
    let d = pkt.data();
    if let Some(l3) = ipv4_l3(d, meta) {
        let old_word = [d[l3], d[l3 + IPV4_TOS]];
        let new_tos = (tos & 0xfc) | (old_word[1] & 0x03);
        let new_word = [old_word[0], new_tos];
        let d = pkt.data_mut();
        d[l3 + IPV4_TOS] = new_tos;
        // Version/IHL and TOS form the first 16-bit word of the header.
        if let Some(hc) = rd16(d, l3 + IPV4_CSUM) {
            wr16(
                d,
                l3 + IPV4_CSUM,
                checksum::update(hc, &old_word, &new_word),
            );
        }
    } else if let Some(l3) = ipv6_l3(d, meta) {
        // Bytes 0-1: version (4 bits), traffic class (8), top 4 bits of the flow label.
        let (b0, b1) = (d[l3], d[l3 + 1]);
        let old_tc = (b0 << 4) | (b1 >> 4);
        let new_tc = (tos & 0xfc) | (old_tc & 0x03);
        let d = pkt.data_mut();
        d[l3] = (b0 & 0xf0) | (new_tc >> 4);
        d[l3 + 1] = (b1 & 0x0f) | (new_tc << 4);
    }
}

/// Set the TCP/UDP source (`field` = 0) or destination (2) port, fixing the checksum.
/// No-op on other protocols and when there is no transport header (later fragments).
fn set_tp_port(pkt: &mut Packet<'_>, meta: &PacketMeta, field: usize, port: u16) {
    let d = pkt.data();
    let l4 = usize::from(meta.l4);
    if l4 == 0 {
        return;
    }
    let proto = if let Some(l3) = ipv4_l3(d, meta) {
        d[l3 + IPV4_PROTO]
    } else if let Some(l3) = ipv6_l3(d, meta) {
        match ipv6_upper(d, l3, meta) {
            Some(up) => up.proto,
            None => return,
        }
    } else {
        return;
    };
    // Only TCP and UDP have ports; `l4_csum` also checks the header reaches its checksum,
    // which lies beyond both ports.
    let Some(c) = l4_csum(d, l4, proto, false) else {
        return;
    };
    let Some(old) = rd16(d, l4 + field) else {
        return;
    };
    let d = pkt.data_mut();
    wr16(d, l4 + field, port);
    update_l4_csum(d, c, &old.to_be_bytes(), &port.to_be_bytes());
}

/// Most tags a packet may carry (the parser drops frames with more).
const MAX_VLANS: u8 = 2;

/// Insert a `tpid` tag after the MAC addresses, copying the TCI of the current outer tag
/// (or 0 when untagged). A third tag is refused (checked before room, so the outcome does
/// not depend on the buffer).
fn push_vlan(pkt: &mut Packet<'_>, meta: &mut PacketMeta, tpid: u16) -> Result<(), RewriteDrop> {
    if meta.vlans >= MAX_VLANS {
        return Err(RewriteDrop::TooManyVlans);
    }
    if pkt.len() < MACS_LEN {
        return Ok(()); // not an Ethernet frame; the parser never lets one through
    }
    let tci = if meta.vlans > 0 {
        rd16(pkt.data(), MACS_LEN + 2).unwrap_or(0)
    } else {
        0
    };
    if !pkt.push_front(VLAN_TAG_LEN) {
        return Err(RewriteDrop::NoRoom);
    }
    // The frame grew by 4 at the front: slide the MACs down over the new bytes, leaving
    // a 4-byte gap in front of the old tag / ethertype for the new tag.
    let d = pkt.data_mut();
    d.copy_within(VLAN_TAG_LEN..VLAN_TAG_LEN + MACS_LEN, 0);
    wr16(d, MACS_LEN, tpid);
    wr16(d, MACS_LEN + 2, tci);
    meta.vlans += 1;
    shift_offsets(meta, true);
    Ok(())
}

/// Remove the outer tag (no-op when untagged).
fn pop_vlan(pkt: &mut Packet<'_>, meta: &mut PacketMeta) {
    if meta.vlans == 0 || pkt.len() < MACS_LEN + VLAN_TAG_LEN {
        return;
    }
    let d = pkt.data_mut();
    d.copy_within(0..MACS_LEN, VLAN_TAG_LEN);
    pkt.pull_front(VLAN_TAG_LEN);
    meta.vlans -= 1;
    shift_offsets(meta, false);
}

/// Move the L3/L4 offsets by one tag after a push (`grow`) or pop.
#[inline(always)]
fn shift_offsets(meta: &mut PacketMeta, grow: bool) {
    const TAG: u16 = VLAN_TAG_LEN as u16;
    for off in [&mut meta.l3, &mut meta.l4] {
        if *off != 0 {
            *off = if grow {
                off.saturating_add(TAG)
            } else {
                off.saturating_sub(TAG)
            };
        }
    }
}

/// Make sure there is an outer tag to modify: push an 802.1Q tag with TCI 0 if untagged.
fn ensure_vlan(pkt: &mut Packet<'_>, meta: &mut PacketMeta) -> Result<(), RewriteDrop> {
    if meta.vlans == 0 {
        push_vlan(pkt, meta, ethertype::VLAN)?;
    }
    Ok(())
}

/// Outer TCI = (TCI & keep) | set.
fn set_outer_tci(pkt: &mut Packet<'_>, meta: &PacketMeta, keep: u16, set: u16) {
    if meta.vlans == 0 {
        return;
    }
    let Some(tci) = rd16(pkt.data(), MACS_LEN + 2) else {
        return;
    };
    let new = (tci & keep) | set;
    if new != tci {
        wr16(pkt.data_mut(), MACS_LEN + 2, new);
    }
}

/// Decrement the IPv4 TTL (fixing the header checksum) or the IPv6 hop limit; drop the
/// packet, unchanged, when it is 0 or 1.
fn dec_ttl(pkt: &mut Packet<'_>, meta: &PacketMeta) -> Result<(), RewriteDrop> {
    let d = pkt.data();
    if let Some(l3) = ipv4_l3(d, meta) {
        let (ttl, proto) = (d[l3 + IPV4_TTL], d[l3 + IPV4_PROTO]);
        if ttl <= 1 {
            return Err(RewriteDrop::TtlExpired);
        }
        let d = pkt.data_mut();
        d[l3 + IPV4_TTL] = ttl - 1;
        // TTL and protocol form one 16-bit word of the header.
        if let Some(hc) = rd16(d, l3 + IPV4_CSUM) {
            let old = u16::from_be_bytes([ttl, proto]);
            let new = u16::from_be_bytes([ttl - 1, proto]);
            wr16(d, l3 + IPV4_CSUM, checksum::update16(hc, old, new));
        }
    } else if let Some(l3) = ipv6_l3(d, meta) {
        let hops = d[l3 + IPV6_HOP_LIMIT];
        if hops <= 1 {
            return Err(RewriteDrop::TtlExpired);
        }
        pkt.data_mut()[l3 + IPV6_HOP_LIMIT] = hops - 1;
    }
    Ok(())
}
