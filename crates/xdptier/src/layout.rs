//! The layout user space shares with `bpf/flow_tier.bpf.c`: limits, return codes, verdict
//! reasons, and the key, mask, action, value, counter and config structs of the maps, each
//! asserted against `bpf/flowkey.h`'s sizes and offsets at compile time.

use bytemuck::{Pod, Zeroable};
use flowpath_packet::key::ethertype;
use flowpath_packet::{Field, FlowKey};
use std::mem::{offset_of, size_of};

/// Name of the XDP program in the object.
pub const PROGRAM: &str = "flow_tier";
/// The object's baseline program: the tier's parser, then a redirect to `fp_ports[0]`
/// ([`crate::FlowTier::load_parse_forward`]).
pub const PARSE_FORWARD: &str = "parse_forward";
/// Megaflow masks the program tries (`FP_MAX_MASKS`).
pub const MAX_MASKS: usize = 8;
/// Entries of `fp_flows` and `fp_stats` (slots are `0..MAX_FLOWS`).
pub const MAX_FLOWS: u32 = 65536;
/// Entries of `fp_ports` (devmap indices are `0..MAX_DEVS`).
pub const MAX_DEVS: u32 = 256;
/// Entries of `xsks_map`: AF_XDP sockets of all interfaces together (`xsk_base + queue`).
pub const MAX_XSKS: u32 = 64;

/// XDP return codes (`enum xdp_action`).
pub mod xdp_action {
    pub const ABORTED: u32 = 0;
    pub const DROP: u32 = 1;
    pub const PASS: u32 = 2;
    pub const TX: u32 = 3;
    pub const REDIRECT: u32 = 4;
}

/// `fp_actions.flags` bits (`FP_ACT_*`).
pub mod act {
    pub const OUTPUT: u32 = 1 << 0;
    pub const SET_ETH_SRC: u32 = 1 << 1;
    pub const SET_ETH_DST: u32 = 1 << 2;
    pub const SET_IP4_SRC: u32 = 1 << 3;
    pub const SET_IP4_DST: u32 = 1 << 4;
    pub const SET_IP6_SRC: u32 = 1 << 5;
    pub const SET_IP6_DST: u32 = 1 << 6;
    pub const SET_TP_SRC: u32 = 1 << 7;
    pub const SET_TP_DST: u32 = 1 << 8;
    pub const SET_NW_TOS: u32 = 1 << 9;
    pub const DEC_TTL: u32 = 1 << 10;
    pub const PUSH_VLAN: u32 = 1 << 11;
    pub const SET_VLAN_TCI: u32 = 1 << 12;
    /// `pop_vlans > 0`: lets the program tell a plain output or drop from `flags` alone.
    pub const POP_VLANS: u32 = 1 << 13;
}

/// A `fp_config.version` no entry is stamped with: while it is set, every lookup is a miss.
pub const INVALID_VERSION: u32 = u32::MAX;

/// `fp_config.flags`: record every packet's key and verdict in `fp_debug[0]`.
pub const CFG_DEBUG: u32 = 1;

/// The program's verdict for one packet (`FP_R_*`: `fp_debug.reason`, `fp_reasons` index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Reason {
    HitOutput = 0,
    HitDrop = 1,
    Miss = 2,
    Stale = 3,
    /// flowpath's parser would reject the frame (malformed): to user space.
    UpParse = 4,
    /// VXLAN, IPv6 extension headers: to user space.
    UpUnsupported = 5,
    UpNoInPort = 6,
    UpTtl = 7,
    UpAction = 8,
}

impl Reason {
    pub const COUNT: usize = 9;
    pub const ALL: [Reason; Reason::COUNT] = [
        Reason::HitOutput,
        Reason::HitDrop,
        Reason::Miss,
        Reason::Stale,
        Reason::UpParse,
        Reason::UpUnsupported,
        Reason::UpNoInPort,
        Reason::UpTtl,
        Reason::UpAction,
    ];
    pub fn from_u32(v: u32) -> Option<Reason> {
        Reason::ALL.get(v as usize).copied()
    }
    /// Does the program hand such a packet to user space (xsk, or XDP_PASS without one)?
    pub fn is_upcall(self) -> bool {
        !matches!(self, Reason::HitOutput | Reason::HitDrop)
    }
}

/// `struct fp_key`: byte-for-byte a [`FlowKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C, align(8))]
pub struct FpKey {
    pub in_port: [u8; 4],
    pub eth_type: [u8; 2],
    pub vlan_tci: [u8; 2],
    pub eth_dst: [u8; 6],
    pub vlan_inner_tci: [u8; 2],
    pub eth_src: [u8; 6],
    pub tcp_flags: [u8; 2],
    pub nw_proto: u8,
    pub nw_tos: u8,
    pub nw_ttl: u8,
    pub nw_frag: u8,
    pub tp_src: [u8; 2],
    pub tp_dst: [u8; 2],
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
    pub tun_id: [u8; 4],
    pub tun_flags: u8,
    pub pad: [u8; 3],
    pub tun_src: [u8; 16],
    pub tun_dst: [u8; 16],
}

macro_rules! assert_at {
    ($t:ty, $f:ident, $field:expr) => {
        const _: () = assert!(offset_of!($t, $f) == $field.range().0);
    };
}
// The XDP program's key is the first 104 bytes of a FlowKey: everything before the
// recirculation and connection-tracking words, which a kernel-tier flow never has.
const _: () = assert!(size_of::<FpKey>() == Field::RecircId.range().0);
assert_at!(FpKey, in_port, Field::InPort);
assert_at!(FpKey, eth_type, Field::EthType);
assert_at!(FpKey, vlan_tci, Field::VlanTci);
assert_at!(FpKey, eth_dst, Field::EthDst);
assert_at!(FpKey, vlan_inner_tci, Field::VlanInnerTci);
assert_at!(FpKey, eth_src, Field::EthSrc);
assert_at!(FpKey, tcp_flags, Field::TcpFlags);
assert_at!(FpKey, nw_proto, Field::NwProto);
assert_at!(FpKey, nw_tos, Field::NwTos);
assert_at!(FpKey, nw_ttl, Field::NwTtl);
assert_at!(FpKey, nw_frag, Field::NwFrag);
assert_at!(FpKey, tp_src, Field::TpSrc);
assert_at!(FpKey, tp_dst, Field::TpDst);
assert_at!(FpKey, ip_src, Field::Ipv6Src);
assert_at!(FpKey, ip_dst, Field::Ipv6Dst);
assert_at!(FpKey, tun_id, Field::TunId);
assert_at!(FpKey, tun_flags, Field::TunFlags);
assert_at!(FpKey, tun_src, Field::TunSrc);
assert_at!(FpKey, tun_dst, Field::TunDst);

/// Bytes of the key that are looked up (`FP_LOOKUP_BYTES`): all but the tunnel fields,
/// which are always zero in the XDP tier.
pub const LOOKUP_BYTES: usize = 64;
const _: () = assert!(LOOKUP_BYTES == Field::TunId.range().0);

/// `struct fp_flow_key`: the `fp_flows` key (the masked key's first [`LOOKUP_BYTES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpFlowKey {
    pub mask_id: u32,
    pub pad: u32,
    pub key: [u8; LOOKUP_BYTES],
}
const _: () = assert!(size_of::<FpFlowKey>() == 72 && offset_of!(FpFlowKey, key) == 8);

/// `struct fp_mask`: one `fp_masks` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpMask {
    pub id: u32,
    /// Bit w: lookup word w of `mask` is all zero ([`FpMask::of`] sets it); the program
    /// neither masks nor hashes such a word.
    pub zero_words: u32,
    pub mask: FpKey,
    /// To 128 bytes: a mask's first cache line holds the fields above and lookup words 0..6.
    pub pad: [u32; 4],
}

impl FpMask {
    /// The `fp_masks` entry of `mask` under `id`.
    pub fn of(id: u32, mask: &FlowKey) -> FpMask {
        let zero_words = (0..LOOKUP_BYTES / 8)
            .filter(|&w| mask.words[w] == 0)
            .fold(0, |bits, w| bits | 1 << w);
        FpMask {
            id,
            zero_words,
            mask: key_from_flowkey(mask),
            pad: [0; 4],
        }
    }
}
const _: () = assert!(size_of::<FpMask>() == 128 && offset_of!(FpMask, mask) == 8);

/// `struct fp_actions`: what a cached flow does (see `act`, and the execution order in
/// `docs/xdp-tier.md`). Multi-byte `[u8; N]` fields are in network byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpActions {
    pub version: u32,
    pub flags: u32,
    pub out_port: u32,
    pub out_dev: u32,
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    pub push_tpid: [u8; 2],
    pub vlan_keep: u16,
    pub vlan_set: u16,
    pub pop_vlans: u8,
    pub nw_tos: u8,
    pub tp_src: [u8; 2],
    pub tp_dst: [u8; 2],
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
}
const _: () = {
    assert!(size_of::<FpActions>() == 72);
    assert!(offset_of!(FpActions, out_dev) == 12);
    assert!(offset_of!(FpActions, eth_src) == 16);
    assert!(offset_of!(FpActions, eth_dst) == 22);
    assert!(offset_of!(FpActions, push_tpid) == 28);
    assert!(offset_of!(FpActions, vlan_keep) == 30);
    assert!(offset_of!(FpActions, vlan_set) == 32);
    assert!(offset_of!(FpActions, pop_vlans) == 34);
    assert!(offset_of!(FpActions, nw_tos) == 35);
    assert!(offset_of!(FpActions, tp_src) == 36);
    assert!(offset_of!(FpActions, tp_dst) == 38);
    assert!(offset_of!(FpActions, ip_src) == 40);
    assert!(offset_of!(FpActions, ip_dst) == 56);
};

/// `struct fp_flow_value`: the `fp_flows` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpFlowValue {
    pub act: FpActions,
    pub slot: u32,
    pub pad: u32,
}
const _: () = assert!(size_of::<FpFlowValue>() == 80 && offset_of!(FpFlowValue, slot) == 72);

/// `struct fp_stat`: one CPU's counters of one slot (`fp_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpStat {
    pub packets: u64,
    pub bytes: u64,
}

/// `struct fp_inport`: the `fp_inport` (ifindex below [`INPORT_DIRECT`]) or
/// `fp_inport_hash` value of an ingress ifindex.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpInPort {
    /// flowpath port number (the key's `in_port`).
    pub port: u32,
    /// Upcalls of rx queue `q` go to `xsks_map[xsk_base + q]`.
    pub xsk_base: u16,
    /// [`INPORT_PRESENT`] (array slots exist, set or not).
    pub flags: u16,
}
const _: () = assert!(
    size_of::<FpInPort>() == 8
        && offset_of!(FpInPort, xsk_base) == 4
        && offset_of!(FpInPort, flags) == 6
);
/// `FP_INPORT_DIRECT`: `fp_inport` is an array indexed by ifindex below this.
pub const INPORT_DIRECT: u32 = 4096;
/// `FP_INPORT_PRESENT`.
pub const INPORT_PRESENT: u16 = 1;

/// `struct fp_config`: `fp_config[0]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpConfig {
    pub version: u32,
    pub n_masks: u32,
    pub flags: u32,
    pub vxlan_port: u16,
    pub pad: u16,
}
const _: () = assert!(size_of::<FpConfig>() == 16 && offset_of!(FpConfig, vxlan_port) == 12);

/// `struct fp_debug`: `fp_debug[0]`, the last packet's key and verdict (with [`CFG_DEBUG`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct FpDebug {
    pub key: FpKey,
    pub reason: u32,
    pub slot: u32,
    pub seq: u32,
    pub pad: u32,
}
const _: () = assert!(size_of::<FpDebug>() == 120 && offset_of!(FpDebug, seq) == 112);

// SAFETY: plain C structs of integers and byte arrays without padding (the asserts above).
unsafe impl aya::Pod for FpKey {}
unsafe impl aya::Pod for FpFlowKey {}
unsafe impl aya::Pod for FpMask {}
unsafe impl aya::Pod for FpActions {}
unsafe impl aya::Pod for FpFlowValue {}
unsafe impl aya::Pod for FpStat {}
unsafe impl aya::Pod for FpConfig {}
unsafe impl aya::Pod for FpInPort {}
unsafe impl aya::Pod for FpDebug {}

/// The kernel key of a flowpath key: the same bytes.
pub fn key_from_flowkey(k: &FlowKey) -> FpKey {
    bytemuck::pod_read_unaligned(&k.bytes()[..size_of::<FpKey>()])
}

/// The flowpath key of a kernel key.
pub fn flowkey_from_key(k: &FpKey) -> FlowKey {
    let mut out = FlowKey::ZERO;
    out.bytes_mut()[..size_of::<FpKey>()].copy_from_slice(bytemuck::bytes_of(k));
    out
}

/// The `fp_flows` key of `key` under mask `mask_id`; None when the masked key has
/// non-zero tunnel fields (no packet in the XDP tier has those: it would never hit).
pub fn flow_key(mask_id: u32, mask: &FlowKey, key: &FlowKey) -> Option<FpFlowKey> {
    let masked = key_from_flowkey(&key.and(mask));
    let bytes: &[u8] = bytemuck::bytes_of(&masked);
    if bytes[LOOKUP_BYTES..].iter().any(|&b| b != 0) {
        return None;
    }
    let mut k = FpFlowKey::zeroed();
    k.mask_id = mask_id;
    k.key.copy_from_slice(&bytes[..LOOKUP_BYTES]);
    Some(k)
}

/// Is `eth_type` one the program parses beyond the Ethernet header?
pub fn parses_l3(eth_type: u16) -> bool {
    matches!(eth_type, ethertype::IPV4 | ethertype::IPV6 | ethertype::ARP)
}
