//! The fast paths every frame tries first: untagged Ethernet, IPv4 or IPv6, TCP or UDP,
//! keyed a word at a time. Anything else they leave, untouched, to the general parser.

use super::outcome::PacketMeta;
use super::wire::{be16, hdr};
use crate::key::{ipproto, FlowKey};

/// The shape most traffic has: untagged Ethernet, IPv4 with a 20-byte header, not a
/// fragment, TCP or UDP (not to the VXLAN port), every length consistent. Such a frame's
/// key is built a word at a time (13 stores, no zeroing pass, no byte copies); any other
/// frame, or one that fails a check, returns false having written nothing and goes the
/// general way, which keys it or names its drop reason. What this accepts the general
/// parser accepts too, with the same key and offsets (`tests/l4_fast_path.rs` holds the
/// two together). Hand-written: it is the first thing every packet runs.
#[inline(always)]
pub(super) fn ipv4_l4_fast(
    data: &[u8],
    in_port: u32,
    vxlan_port: Option<u16>,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
) -> bool {
    // Ethernet (14) + IPv4 (20) + the first 16 bytes of L4 (TCP's data offset and flags).
    let Some(f) = data.first_chunk::<50>() else {
        return false;
    };
    // Ethertype 0x0800 and version 4 / IHL 5, as they sit in memory: one 32-bit load and
    // compare (written as three bytes, the compiler assembled them first: eight
    // instructions).
    if le32_at(f, 12) & 0x00ff_ffff != 0x0045_0008 {
        return false;
    }
    let total = usize::from(be16([f[16], f[17]]));
    // 20 <= total <= data.len() - 14 as one unsigned compare (data.len() >= 50 here).
    // Flags and fragment offset: DF may be set, nothing else.
    if total.wrapping_sub(20) > data.len() - 34 || be16([f[20], f[21]]) & 0x3fff != 0 {
        return false;
    }
    let proto = f[23];
    let Some(tcp_flags) = fast_l4(f, 34, total - 20, proto, vxlan_port) else {
        return false;
    };
    let w = &mut key.words;
    fast_l2_l4_words(w, f, in_port, tcp_flags, proto, f[15], f[22], 34);
    w[4] = u64::from(le32_at(f, 26));
    w[5] = 0;
    w[6] = u64::from(le32_at(f, 30));
    w[7..].fill(0);
    *meta = PacketMeta {
        l2: 0,
        l3: 14,
        l4: 34,
        vlans: 0,
    };
    true
}

/// The IPv6 twin of [`ipv4_l4_fast`]: untagged Ethernet, IPv6 whose next header is TCP or
/// UDP (no extension headers), lengths consistent, not to the VXLAN port. Same contract:
/// false having written nothing, or the key the general parser gives (held together by
/// `tests/l4_fast_path.rs`).
#[inline(always)]
pub(super) fn ipv6_l4_fast(
    data: &[u8],
    in_port: u32,
    vxlan_port: Option<u16>,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
) -> bool {
    // Ethernet (14) + IPv6 (40) + a UDP header (8): a 64-byte frame has these.
    let Some(f) = data.first_chunk::<62>() else {
        return false;
    };
    if [f[12], f[13]] != [0x86, 0xdd] || f[14] >> 4 != 6 {
        return false;
    }
    let plen = usize::from(be16([f[18], f[19]]));
    if plen > data.len() - 54 {
        return false;
    }
    let proto = f[20];
    // TCP's data offset and flags are past the 62 bytes: read them from `data`.
    let Some(tcp_flags) = fast_l4(data, 54, plen, proto, vxlan_port) else {
        return false;
    };
    let tos = (f[14] << 4) | (f[15] >> 4);
    let w = &mut key.words;
    fast_l2_l4_words(w, f, in_port, tcp_flags, proto, tos, f[21], 54);
    for (i, o) in [22, 30, 38, 46].into_iter().enumerate() {
        w[4 + i] = u64::from_le_bytes(f[o..o + 8].try_into().unwrap());
    }
    w[8..].fill(0);
    *meta = PacketMeta {
        l2: 0,
        l3: 14,
        l4: 54,
        vlans: 0,
    };
    true
}

/// The L4 checks of the fast paths, as the general parser makes them: UDP or TCP at `l4`
/// with `l4_len` bytes of IP payload, not UDP to the VXLAN port. Returns `tcp_flags` as key
/// word 2 holds them (0 for UDP), or None for the general parser to decide.
#[inline(always)]
fn fast_l4(d: &[u8], l4: usize, l4_len: usize, proto: u8, vxlan_port: Option<u16>) -> Option<u64> {
    match proto {
        ipproto::UDP => {
            let u: &[u8; 8] = hdr(d, l4)?;
            let len = usize::from(be16([u[4], u[5]]));
            // 8 <= len <= l4_len (so l4_len >= 8 too).
            if len < 8 || len > l4_len {
                return None;
            }
            if vxlan_port.is_some_and(|p| be16([u[2], u[3]]) == p) {
                return None;
            }
            Some(0)
        }
        ipproto::TCP => {
            let t: &[u8; 14] = hdr(d, l4)?;
            let doff = usize::from(t[12] >> 4) * 4;
            // 20 <= doff <= l4_len (so l4_len >= 20 too).
            if doff < 20 || doff > l4_len {
                return None;
            }
            // Key bytes 22..24, big-endian: the top two bytes of the little-endian word.
            Some(u64::from(be16([t[12], t[13]]) & 0x0fff).swap_bytes())
        }
        _ => None,
    }
}

/// Key words 0..4 of a fast-path frame: in_port, the ethertype and no VLAN; the MACs (and
/// `tcp_flags`); nw_proto, nw_tos, nw_ttl, nw_frag 0 and the two ports as on the wire.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fast_l2_l4_words(
    w: &mut [u64; crate::key::KEY_WORDS],
    f: &[u8],
    in_port: u32,
    tcp_flags: u64,
    proto: u8,
    tos: u8,
    ttl: u8,
    l4: usize,
) {
    const MAC: u64 = 0x0000_ffff_ffff_ffff;
    let le64 = |o: usize| u64::from_le_bytes(f[o..o + 8].try_into().unwrap());
    w[0] = u64::from(in_port.swap_bytes()) | u64::from(u16::from_le_bytes([f[12], f[13]])) << 32;
    w[1] = le64(0) & MAC;
    w[2] = le64(6) & MAC | tcp_flags;
    w[3] = u64::from(proto)
        | u64::from(tos) << 8
        | u64::from(ttl) << 16
        | u64::from(le32_at(f, l4)) << 32;
}

#[inline(always)]
fn le32_at(f: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(f[o..o + 4].try_into().unwrap())
}
