//! What every part of the parser shares: the key as bytes and its field offsets,
//! fixed-size header reads, and where the L4 parser found a VXLAN header.

use crate::key::{ethertype, KEY_BYTES};

pub(super) type Key = [u8; KEY_BYTES];

/// Key byte offsets (see the layout table in `key.rs`).
pub(super) mod at {
    pub const ETH_TYPE: usize = 4;
    pub const VLAN_TCI: usize = 6;
    pub const ETH_DST: usize = 8;
    pub const VLAN_INNER_TCI: usize = 14;
    pub const ETH_SRC: usize = 16;
    pub const TCP_FLAGS: usize = 22;
    pub const NW_PROTO: usize = 24;
    pub const NW_TOS: usize = 25;
    pub const NW_TTL: usize = 26;
    pub const NW_FRAG: usize = 27;
    pub const TP_SRC: usize = 28;
    pub const IP_SRC: usize = 32;
    pub const IP_DST: usize = 48;
    pub const TUN_ID: usize = 64;
    pub const TUN_FLAGS: usize = 68;
    pub const TUN_SRC: usize = 72;
    pub const TUN_DST: usize = 88;
}

/// Where a VXLAN header was found by the L4 parser: `hdr` is its offset (0 = none) and
/// `end` the end of the UDP payload, which bounds the inner frame.
#[derive(Clone, Copy)]
pub(super) struct Vxlan {
    pub(super) hdr: usize,
    pub(super) end: usize,
}

pub(super) const NO_VXLAN: Vxlan = Vxlan { hdr: 0, end: 0 };

/// The `N` bytes at `off`, if the data holds them. Fixed-size arrays let every later
/// access be checked at compile time.
#[inline(always)]
pub(super) fn hdr<const N: usize>(data: &[u8], off: usize) -> Option<&[u8; N]> {
    data.get(off..)?.first_chunk::<N>()
}

#[inline(always)]
pub(super) fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[inline(always)]
pub(super) fn is_vlan_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}
