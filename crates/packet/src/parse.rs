//! Zero-copy parsing of one frame into a [`FlowKey`] plus header offsets.
//!
//! Ethernet, up to two 802.1Q/802.1ad tags, ARP, IPv4 (options, fragments), IPv6 (skipping
//! hop-by-hop, routing, fragment and destination-options headers), TCP, UDP, ICMP, ICMPv6,
//! and VXLAN (UDP 4789 by default): the outer headers of a VXLAN packet go to the tunnel
//! fields and the inner frame is parsed as the packet. A truncated or malformed packet is
//! never a panic: it is reported as a [`DropReason`].
//!
//! Here: the entry points. Most frames are keyed by the hand-written fast paths in `fast`
//! (untagged IPv4/IPv6 TCP and UDP); the rest by the complete parser in `general` (VLAN
//! stacks, ARP, IPv4 options and fragments, IPv6 extension headers, ICMP) and, for VXLAN,
//! `vxlan`. `outcome` holds what the parser is given and gives back, `wire` the key
//! offsets and header reads they all share.

mod fast;
mod general;
mod outcome;
mod vxlan;
mod wire;

pub use outcome::{DropReason, PacketMeta, ParseOptions};

use crate::key::FlowKey;
use fast::{ipv4_l4_fast, ipv6_l4_fast};
use general::parse_frame;
use vxlan::{decap_fast, decap_vxlan};
use wire::Key;

/// Parse `data` (one Ethernet frame) received on `in_port` into `key`.
///
/// `key` is fully overwritten on success (every field not present in the packet is zero);
/// on error its contents are unspecified. Only one level of VXLAN is decapsulated: an
/// inner UDP packet to the VXLAN port is an ordinary UDP packet.
#[inline]
pub fn parse(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
) -> Result<PacketMeta, DropReason> {
    let mut meta = PacketMeta::default();
    parse_into(data, in_port, opts, key, &mut meta)?;
    Ok(meta)
}

/// [`parse`], writing the header offsets into `meta` in place. The datapath uses this:
/// returning the small struct by value makes the caller re-read it as one word right after
/// the parser writes it field by field, a store-forwarding stall on every packet.
///
/// The IPv4 TCP/UDP fast path is inlined into the caller; every other frame calls out.
#[inline(always)]
pub fn parse_into(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
) -> Result<(), DropReason> {
    if ipv4_l4_fast(data, in_port, opts.vxlan_port, key, meta)
        || ipv6_l4_fast(data, in_port, opts.vxlan_port, key, meta)
    {
        return Ok(());
    }
    parse_into_other(data, in_port, opts, key, meta)
}

/// [`parse_into`] that also returns, when a fast path took the frame, the key's
/// [`FlowKey::hash`] with `seed` (the exact-match cache's index), hashed from the words
/// just built without reading the key back or testing its tunnel words, and whether the
/// key is known to be narrow ([`FlowKey::is_narrow`]; said of the IPv4 fast path's keys,
/// which always are). `None` for a frame the general parser keyed (a VXLAN packet, whose
/// key the caller may still change before hashing it, among them).
#[inline(always)]
pub fn parse_into_hashed(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
    seed: u64,
) -> Result<Option<(u32, bool)>, DropReason> {
    // Two returns rather than one after `||`: the IPv4 key's zero words stay constants
    // through the hash (no test of words 5 and 7).
    if ipv4_l4_fast(data, in_port, opts.vxlan_port, key, meta) {
        return Ok(Some((key.hash_no_tunnel(seed), true)));
    }
    if ipv6_l4_fast(data, in_port, opts.vxlan_port, key, meta) {
        return Ok(Some((key.hash_no_tunnel(seed), false)));
    }
    parse_into_other(data, in_port, opts, key, meta).map(|()| None)
}

/// [`parse_into`] for what the fast paths did not take.
#[inline(never)]
fn parse_into_other(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
) -> Result<(), DropReason> {
    let k = fresh(key, meta, in_port);
    if let Some(port) = opts.vxlan_port {
        if let Some(r) = decap_fast(data, port, k, meta) {
            return r;
        }
    }
    parse_general(data, k, meta, opts.vxlan_port)
}

/// [`parse_into`] without the VXLAN fast path: every frame by the general parser. For the
/// tests that hold the two to the same keys, offsets and drop reasons.
#[doc(hidden)]
pub fn parse_into_general(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
    meta: &mut PacketMeta,
) -> Result<(), DropReason> {
    let k = fresh(key, meta, in_port);
    parse_general(data, k, meta, opts.vxlan_port)
}

/// A zero key with only `in_port` set, and zero offsets: where every parse starts.
#[inline(always)]
fn fresh<'k>(key: &'k mut FlowKey, meta: &mut PacketMeta, in_port: u32) -> &'k mut Key {
    *key = FlowKey::ZERO;
    *meta = PacketMeta::default();
    let k = key.bytes_mut();
    k[0..4].copy_from_slice(&in_port.to_be_bytes());
    k
}

#[inline(always)]
fn parse_general(
    data: &[u8],
    k: &mut Key,
    meta: &mut PacketMeta,
    vxlan_port: Option<u16>,
) -> Result<(), DropReason> {
    let vxlan = parse_frame(data, 0, k, meta, vxlan_port)?;
    if vxlan.hdr != 0 {
        decap_vxlan(data, vxlan, k, meta)?;
    }
    Ok(())
}
