//! New-flow stamps: where in a template to write a fresh source address, and writing it
//! with the checksums fixed incrementally.

use super::{NEW_FLOW_V4_BASE, NEW_FLOW_V4_MASK};
use crate::build::VXLAN_PORT;
use flowpath_packet::key::{ethertype, ipproto};

/// Where to stamp a template to make it a new flow (found by walking the template bytes at
/// construction; offsets are from the start of the frame).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StampInfo {
    /// 4 or 6 for the (inner) IP version; 0 for frames that are never stamped.
    pub(super) ip: u8,
    /// True when the L4 checksum is UDP's, where 0 means "no checksum".
    pub(super) udp: bool,
    /// Offset of the (inner, for VXLAN) IP header.
    l3: u32,
    /// Offset of the L4 checksum that covers the source address; 0 = none (ICMPv4, later
    /// fragments, unknown protocols).
    l4_csum: u32,
    /// Offset of the outer VXLAN UDP checksum, which covers the whole inner frame; 0 = none.
    pub(super) outer_csum: u32,
}

/// splitmix64, the foundation's (one copy for the project): once per packet when churn is on.
pub(crate) use flowpath_base::rng::next as splitmix64;

#[inline(always)]
pub(super) fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline(always)]
pub(super) fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

use flowpath_packet::checksum::{adjust as csum_adjust, word_delta};

/// Stamp `frame` as new flow number `n`: set the (inner) source address and fix the IPv4
/// header, L4 and outer VXLAN UDP checksums incrementally.
pub(super) fn stamp(frame: &mut [u8], info: &StampInfo, n: u64) {
    let l3 = info.l3 as usize;
    let (addr_off, new) = if info.ip == 4 {
        (l3 + 12, NEW_FLOW_V4_BASE | (n as u32 & NEW_FLOW_V4_MASK))
    } else {
        (l3 + 8 + 12, n as u32)
    };
    let (o0, o1) = (get16(frame, addr_off), get16(frame, addr_off + 2));
    let (n0, n1) = ((new >> 16) as u16, new as u16);
    put16(frame, addr_off, n0);
    put16(frame, addr_off + 2, n1);
    let d_addr = word_delta(o0, n0) + word_delta(o1, n1);
    // Every changed word under the outer VXLAN UDP checksum (which covers the inner frame).
    let mut d_outer = d_addr;

    if info.ip == 4 {
        let old = get16(frame, l3 + 10);
        let new = csum_adjust(old, d_addr);
        put16(frame, l3 + 10, new);
        d_outer += word_delta(old, new);
    }
    if info.l4_csum != 0 {
        let at = info.l4_csum as usize;
        let old = get16(frame, at);
        // A zero UDP checksum means "none" and stays zero.
        if !(info.udp && old == 0) {
            let mut new = csum_adjust(old, d_addr);
            if info.udp && new == 0 {
                new = 0xffff;
            }
            put16(frame, at, new);
            d_outer += word_delta(old, new);
        }
    }
    if info.outer_csum != 0 {
        let at = info.outer_csum as usize;
        let old = get16(frame, at);
        if old != 0 {
            let mut new = csum_adjust(old, d_outer);
            if new == 0 {
                new = 0xffff;
            }
            put16(frame, at, new);
        }
    }
}

/// Find where to stamp `frame` (see [`StampInfo`]). Walks Ethernet, any number of
/// 802.1Q/802.1ad tags, IPv4 or IPv6 (with hop-by-hop, routing, destination-options and
/// fragment headers), and VXLAN (UDP port 4789) once; a VXLAN frame whose inner frame is
/// IP is stamped inside, otherwise on the outer header.
pub(super) fn walk(frame: &[u8]) -> StampInfo {
    walk_eth(frame, 0, true).unwrap_or_default()
}

pub(super) fn walk_eth(f: &[u8], eth: usize, vxlan: bool) -> Option<StampInfo> {
    let mut o = eth + 12;
    let mut ty = get16(f.get(..o + 2)?, o);
    while ty == ethertype::VLAN || ty == ethertype::QINQ || ty == 0x9100 {
        o += 4;
        ty = get16(f.get(..o + 2)?, o);
    }
    let l3 = o + 2;
    let (ip, proto, l4) = match ty {
        ethertype::IPV4 => {
            let h = f.get(l3..l3 + 20)?;
            let ihl = (h[0] & 0x0f) as usize * 4;
            if h[0] >> 4 != 4 || ihl < 20 || f.len() < l3 + ihl {
                return None;
            }
            let later_fragment = get16(h, 6) & 0x1fff != 0;
            (4, h[9], (!later_fragment).then_some(l3 + ihl))
        }
        ethertype::IPV6 => {
            let h = f.get(l3..l3 + 40)?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let mut next = h[6];
            let mut o = l3 + 40;
            let mut l4 = Some(o);
            loop {
                match next {
                    ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => {
                        let e = f.get(o..o + 2)?;
                        next = e[0];
                        o += (e[1] as usize + 1) * 8;
                    }
                    ipproto::FRAGMENT => {
                        let e = f.get(o..o + 8)?;
                        next = e[0];
                        if get16(e, 2) & 0xfff8 != 0 {
                            l4 = None;
                            break;
                        }
                        o += 8;
                    }
                    _ => break,
                }
                l4 = Some(o);
            }
            (6, next, l4)
        }
        _ => return None,
    };
    let mut info = StampInfo {
        ip,
        l3: l3 as u32,
        ..StampInfo::default()
    };
    let Some(l4) = l4 else { return Some(info) };
    match proto {
        ipproto::UDP if f.len() >= l4 + 8 => {
            if vxlan && get16(f, l4 + 2) == VXLAN_PORT {
                if let Some(mut inner) = walk_eth(f, l4 + 16, false) {
                    inner.outer_csum = (l4 + 6) as u32;
                    return Some(inner);
                }
            }
            info.udp = true;
            info.l4_csum = (l4 + 6) as u32;
        }
        ipproto::TCP if f.len() >= l4 + 20 => info.l4_csum = (l4 + 16) as u32,
        ipproto::ICMPV6 if ip == 6 && f.len() >= l4 + 4 => info.l4_csum = (l4 + 2) as u32,
        _ => {}
    }
    Some(info)
}
