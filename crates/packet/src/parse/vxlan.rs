//! VXLAN decapsulation: the outer headers become the tunnel fields and the inner frame the
//! packet, by way of the general parser's outer key or of a fast path for the common shape.

use super::general::parse_frame;
use super::outcome::{DropReason, PacketMeta};
use super::wire::{at, be16, hdr, is_vlan_tpid, Key, Vxlan};
use crate::key::{ethertype, ipproto, TUN_IPV6, TUN_PRESENT};

/// The outer headers become the tunnel fields; the inner frame becomes the packet.
#[inline(never)]
pub(super) fn decap_vxlan(
    data: &[u8],
    vxlan: Vxlan,
    k: &mut Key,
    meta: &mut PacketMeta,
) -> Result<(), DropReason> {
    let outer_v6 = k[at::ETH_TYPE..at::ETH_TYPE + 2] == ethertype::IPV6.to_be_bytes();
    // IPv4 addresses sit in the first 4 bytes of the 16-byte IP fields with the rest
    // zero, which is exactly the tunnel fields' convention: take all 16.
    let src = *k[at::IP_SRC..].first_chunk::<16>().unwrap();
    let dst = *k[at::IP_DST..].first_chunk::<16>().unwrap();
    // Everything between in_port and the tunnel fields described the outer packet.
    k[at::ETH_TYPE..at::TUN_ID].fill(0);
    decap_inner(data, vxlan, &src, &dst, outer_v6, k, meta)
}

/// Check the VXLAN header, write the tunnel fields and parse the inner frame; `k` is zero
/// but for `in_port`. Shared by the general path and [`decap_fast`], so both validate
/// the VXLAN header and the inner frame alike.
#[inline(always)]
fn decap_inner(
    data: &[u8],
    vxlan: Vxlan,
    src: &[u8; 16],
    dst: &[u8; 16],
    outer_v6: bool,
    k: &mut Key,
    meta: &mut PacketMeta,
) -> Result<(), DropReason> {
    // From here on the offsets are the inner frame's (none yet, also on error).
    *meta = PacketMeta::default();
    // The UDP parser checked `end` against the IP payload, which lies within `data`.
    let data = data.get(..vxlan.end).ok_or(DropReason::VxlanTruncated)?;
    let vx: &[u8; 8] = hdr(data, vxlan.hdr).ok_or(DropReason::VxlanTruncated)?;
    if vx[0] & 0x08 == 0 {
        return Err(DropReason::VxlanBadFlags);
    }
    k[at::TUN_SRC..at::TUN_SRC + 16].copy_from_slice(src);
    k[at::TUN_DST..at::TUN_DST + 16].copy_from_slice(dst);
    k[at::TUN_ID..at::TUN_ID + 4].copy_from_slice(&[0, vx[4], vx[5], vx[6]]);
    k[at::TUN_FLAGS] = if outer_v6 {
        TUN_PRESENT | TUN_IPV6
    } else {
        TUN_PRESENT
    };
    let inner = parse_frame(data, vxlan.hdr + 8, k, meta, None)?;
    debug_assert_eq!(inner.hdr, 0);
    Ok(())
}

/// The common VXLAN packet without the general parser's detour through the outer key
/// fields: Ethernet with at most one VLAN tag, IPv4 with a 20-byte header and no
/// fragmentation or IPv6 without extension headers, UDP to `port`. `None` (nothing
/// written) for anything else, or for any outer header the general parser would reject
/// or not decapsulate: that goes the general way, which names the drop reason. What this
/// accepts, the general parser accepts too and decapsulates at the same offsets, so the
/// VXLAN header and inner frame are checked by the same code ([`decap_inner`]) and give
/// the same key, offsets and drop reasons.
#[inline(always)]
pub(super) fn decap_fast(
    data: &[u8],
    port: u16,
    k: &mut Key,
    meta: &mut PacketMeta,
) -> Option<Result<(), DropReason>> {
    let eth: &[u8; 18] = hdr(data, 0)?;
    let mut etype = be16([eth[12], eth[13]]);
    // Untagged IPv4 not to the port (most traffic) leaves with the fewest tests.
    if etype == ethertype::IPV4 && data.get(36..38) != Some(&port.to_be_bytes()) {
        return None;
    }
    let mut l3 = 14;
    if is_vlan_tpid(etype) {
        // One tag (the general parser keys it, but decapsulation zeroes it again).
        etype = be16([eth[16], eth[17]]);
        if is_vlan_tpid(etype) {
            return None;
        }
        l3 = 18;
    }
    // The UDP destination port is tested first: every other packet leaves after a few
    // loads and compares (and the general parser finds them in the cache).
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    let (l4, end, v6) = if etype == ethertype::IPV4 {
        let ip: &[u8; 28] = hdr(data, l3)?;
        // UDP to `port` (where it is with a 20-byte header); version 4, IHL 5; neither MF
        // nor a fragment offset.
        if be16([ip[22], ip[23]]) != port
            || ip[0] != 0x45
            || ip[9] != ipproto::UDP
            || (ip[6] & 0x3f) | ip[7] != 0
        {
            return None;
        }
        // The UDP header within the total length, the total length within the frame.
        let total = usize::from(be16([ip[2], ip[3]]));
        if total < 28 || total > data.len() - l3 {
            return None;
        }
        src[..4].copy_from_slice(&ip[12..16]);
        dst[..4].copy_from_slice(&ip[16..20]);
        (l3 + 20, l3 + total, false)
    } else if etype == ethertype::IPV6 {
        let ip: &[u8; 48] = hdr(data, l3)?;
        // UDP to `port` straight after the fixed header; version 6.
        if be16([ip[42], ip[43]]) != port || ip[6] != ipproto::UDP || ip[0] >> 4 != 6 {
            return None;
        }
        let end = l3 + 40 + usize::from(be16([ip[4], ip[5]]));
        if end > data.len() || end < l3 + 48 {
            return None;
        }
        src.copy_from_slice(&ip[8..24]);
        dst.copy_from_slice(&ip[24..40]);
        (l3 + 40, end, true)
    } else {
        return None;
    };
    // In bounds: `hdr` above read the UDP header with the IP header.
    let len = usize::from(be16([data[l4 + 4], data[l4 + 5]]));
    if len < 8 || len > end - l4 {
        return None;
    }
    let vxlan = Vxlan {
        hdr: l4 + 8,
        end: l4 + len,
    };
    Some(decap_inner(data, vxlan, &src, &dst, v6, k, meta))
}
