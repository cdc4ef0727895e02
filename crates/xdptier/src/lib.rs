//! The XDP tier: `bpf/flow_tier.bpf.c` parses frames into flowpath's `FlowKey`, looks them up
//! in BPF maps of cached flows and runs their actions; this crate mirrors its types and loads it.
//!
//! The map contract (names, key and value layouts, versions) is in `docs/xdp-tier.md`; the C
//! definitions are `bpf/flowkey.h`, and every size and offset below is asserted against the
//! same numbers at compile time.

use aya::maps::{Array, DevMap, HashMap, MapData, PerCpuArray, XskMap};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{TestRun, TestRunOptions, Xdp, XdpMode as AyaMode};
use aya::Ebpf;
use bytemuck::{Pod, Zeroable};
use flowpath_packet::key::ethertype;
use flowpath_packet::{Action, Field, FlowKey, KEY_BYTES};
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;
use std::path::Path;
use std::time::Duration;

pub mod table;
pub use table::{FlowTable, TABLE_ENTRIES};

/// The compiled program (empty when the crate was built without clang).
static OBJ: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/flow_tier.bpf.o"));

/// Name of the XDP program in the object.
pub const PROGRAM: &str = "flow_tier";
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
const _: () = assert!(size_of::<FpKey>() == KEY_BYTES);
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
    pub mask: FpKey,
    pub id: u32,
    pub pad: u32,
}
const _: () = assert!(size_of::<FpMask>() == 112 && offset_of!(FpMask, id) == 104);

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
    bytemuck::cast(*k)
}

/// The flowpath key of a kernel key.
pub fn flowkey_from_key(k: &FpKey) -> FlowKey {
    bytemuck::cast(*k)
}

/// The cached form of a flowpath action list, or `None` when the program cannot run it
/// with the same result: `Controller`, `InPort`, `SetTunnel` (and so VXLAN), more than one
/// output, anything after the output, an output port `port_to_dev` has no devmap index
/// for, `DecTtl` twice, both an IPv4 and an IPv6 rewrite of the same address, and VLAN
/// actions out of the order the program runs them (pops, then at most one push, then
/// VID/PCP sets). Without an output the flow drops. `version` is left 0:
/// [`FlowTier::insert`] stamps the current one.
///
/// Output to the packet's own ingress port (which flowpath skips) is checked by the
/// program, which hands such packets to user space.
pub fn actions_from(
    actions: &[Action],
    port_to_dev: impl Fn(u32) -> Option<u32>,
) -> Option<FpActions> {
    let mut a = FpActions::zeroed();
    a.vlan_keep = 0xffff;
    // 0: pops allowed; 1: after a push; 2: after a TCI set.
    let mut vlan_phase = 0u8;
    for act in actions {
        if a.flags & act::OUTPUT != 0 {
            return None; // nothing may follow the output
        }
        match *act {
            Action::Output(p) => {
                let dev = port_to_dev(p)?;
                if dev >= MAX_DEVS {
                    return None;
                }
                a.flags |= act::OUTPUT;
                a.out_port = p;
                a.out_dev = dev;
            }
            Action::InPort | Action::Controller { .. } | Action::SetTunnel(_) => return None,
            Action::SetEthSrc(m) => {
                a.flags |= act::SET_ETH_SRC;
                a.eth_src = m;
            }
            Action::SetEthDst(m) => {
                a.flags |= act::SET_ETH_DST;
                a.eth_dst = m;
            }
            Action::SetIpv4Src(ip) => {
                if a.flags & act::SET_IP6_SRC != 0 {
                    return None;
                }
                a.flags |= act::SET_IP4_SRC;
                a.ip_src[..4].copy_from_slice(&ip);
            }
            Action::SetIpv4Dst(ip) => {
                if a.flags & act::SET_IP6_DST != 0 {
                    return None;
                }
                a.flags |= act::SET_IP4_DST;
                a.ip_dst[..4].copy_from_slice(&ip);
            }
            Action::SetIpv6Src(ip) => {
                if a.flags & act::SET_IP4_SRC != 0 {
                    return None;
                }
                a.flags |= act::SET_IP6_SRC;
                a.ip_src = ip;
            }
            Action::SetIpv6Dst(ip) => {
                if a.flags & act::SET_IP4_DST != 0 {
                    return None;
                }
                a.flags |= act::SET_IP6_DST;
                a.ip_dst = ip;
            }
            Action::SetNwTos(t) => {
                a.flags |= act::SET_NW_TOS;
                a.nw_tos = t & 0xfc;
            }
            Action::SetTpSrc(p) => {
                a.flags |= act::SET_TP_SRC;
                a.tp_src = p.to_be_bytes();
            }
            Action::SetTpDst(p) => {
                a.flags |= act::SET_TP_DST;
                a.tp_dst = p.to_be_bytes();
            }
            Action::DecTtl => {
                if a.flags & act::DEC_TTL != 0 {
                    return None;
                }
                a.flags |= act::DEC_TTL;
            }
            Action::PopVlan => {
                if vlan_phase != 0 {
                    return None;
                }
                // A packet has at most two tags: further pops are no-ops.
                a.pop_vlans = (a.pop_vlans + 1).min(2);
            }
            Action::PushVlan { tpid } => {
                if vlan_phase != 0 {
                    return None;
                }
                vlan_phase = 1;
                a.flags |= act::PUSH_VLAN;
                a.push_tpid = tpid.to_be_bytes();
            }
            Action::SetVlanVid(vid) => {
                vlan_phase = 2;
                a.flags |= act::SET_VLAN_TCI;
                compose_tci(&mut a, !0x0fff, vid & 0x0fff);
            }
            Action::SetVlanPcp(pcp) => {
                vlan_phase = 2;
                a.flags |= act::SET_VLAN_TCI;
                compose_tci(&mut a, !0xe000, u16::from(pcp & 7) << 13);
            }
        }
    }
    Some(a)
}

/// Follow `tci = (tci & keep) | set` by another such step.
fn compose_tci(a: &mut FpActions, keep: u16, set: u16) {
    a.vlan_keep &= keep;
    a.vlan_set = (a.vlan_set & keep) | set;
}

/// How to attach the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// Native, falling back to generic.
    Auto,
    Native,
    Generic,
}

/// Where the program ended up on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attached {
    Native,
    Generic,
}

/// One `BPF_PROG_TEST_RUN` of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// The XDP return code ([`xdp_action`]).
    pub action: u32,
    /// The frame as the program left it.
    pub data: Vec<u8>,
}

fn err(what: impl std::fmt::Display) -> io::Error {
    io::Error::other(what.to_string())
}

/// Whether the program was compiled in (clang was present at build time).
pub fn bpf_available() -> bool {
    !OBJ.is_empty()
}

/// The loaded program and its maps.
pub struct FlowTier {
    ebpf: Ebpf,
    links: Vec<(u32, XdpLinkId, Attached)>,
    cfg: FpConfig,
    /// `fp_flows`, mapped into this process.
    table: FlowTable,
}

impl FlowTier {
    /// Load the program (not attached anywhere yet): version 1, no masks, VXLAN port 4789
    /// (flowpath's default `ParseOptions`).
    pub fn load() -> io::Result<FlowTier> {
        if OBJ.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "flowpath-xdptier was built without clang; install clang and libbpf-dev and rebuild",
            ));
        }
        FlowTier::load_object(OBJ)
    }

    /// Load another object in place of the built-in one: a program of your own that keeps
    /// the map contract (docs/xdp-tier.md): an XDP program named `flow_tier` and maps
    /// with the same names, types and sizes. A map that is missing or of another shape is
    /// reported by name when it is first used.
    pub fn load_object(obj: &[u8]) -> io::Result<FlowTier> {
        let mut ebpf = Ebpf::load(obj).map_err(|e| err(format!("loading XDP object: {e}")))?;
        let p: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| err("object has no flow_tier program"))?
            .try_into()
            .map_err(|e| err(format!("{PROGRAM}: {e}")))?;
        p.load()
            .map_err(|e| err(format!("loading {PROGRAM} (verifier): {e}")))?;
        let table = match ebpf.map("fp_flows") {
            Some(aya::maps::Map::Array(md)) => FlowTable::map(md)?,
            Some(_) => return Err(err("fp_flows is not an array (see docs/xdp-tier.md)")),
            None => return Err(err("object has no map fp_flows")),
        };
        let mut t = FlowTier {
            ebpf,
            table,
            links: Vec::new(),
            cfg: FpConfig {
                version: 1,
                vxlan_port: 4789,
                ..FpConfig::zeroed()
            },
        };
        t.write_config()?;
        Ok(t)
    }

    fn write_config(&mut self) -> io::Result<()> {
        let cfg = self.cfg;
        let mut m: Array<&mut MapData, FpConfig> = self.map("fp_config")?;
        m.set(0, cfg, 0).map_err(|e| err(format!("fp_config: {e}")))
    }

    fn map<'a, T>(&'a mut self, name: &str) -> io::Result<T>
    where
        T: TryFrom<&'a mut aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self
            .ebpf
            .map_mut(name)
            .ok_or_else(|| err(format!("object has no map {name}")))?;
        T::try_from(m).map_err(|e| err(format!("{name}: {e}")))
    }

    fn map_ro<'a, T>(&'a self, name: &str) -> io::Result<T>
    where
        T: TryFrom<&'a aya::maps::Map, Error = aya::maps::MapError>,
    {
        let m = self
            .ebpf
            .map(name)
            .ok_or_else(|| err(format!("object has no map {name}")))?;
        T::try_from(m).map_err(|e| err(format!("{name}: {e}")))
    }

    /// The current configuration (`fp_config[0]`).
    pub fn config(&self) -> FpConfig {
        self.cfg
    }

    /// The current entry version.
    pub fn version(&self) -> u32 {
        self.cfg.version
    }

    /// Invalidate every cached entry at once (one map write): entries carrying the old
    /// version are misses from now on. Returns the new version.
    pub fn bump_version(&mut self) -> io::Result<u32> {
        self.cfg.version = self.cfg.version.wrapping_add(1);
        self.write_config()?;
        Ok(self.cfg.version)
    }

    /// Make `version` the one entries must carry (one map write). [`INVALID_VERSION`] turns
    /// every entry into a miss.
    pub fn set_version(&mut self, version: u32) -> io::Result<()> {
        self.cfg.version = version;
        self.write_config()
    }

    /// UDP destination port handed to user space as VXLAN (`None`: none), to match the
    /// datapath's `ParseOptions::vxlan_port`.
    pub fn set_vxlan_port(&mut self, port: Option<u16>) -> io::Result<()> {
        self.cfg.vxlan_port = port.unwrap_or(0);
        self.write_config()
    }

    /// Record each packet's key and verdict in `fp_debug[0]` (for tests and tracing).
    pub fn set_debug(&mut self, on: bool) -> io::Result<()> {
        if on {
            self.cfg.flags |= CFG_DEBUG;
        } else {
            self.cfg.flags &= !CFG_DEBUG;
        }
        self.write_config()
    }

    /// The masks, tried in this order; each `(id, mask)` keys its entries by `id`.
    pub fn set_masks(&mut self, masks: &[(u32, FlowKey)]) -> io::Result<()> {
        if masks.len() > MAX_MASKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} masks, the XDP tier tries at most {MAX_MASKS}",
                    masks.len()
                ),
            ));
        }
        // Shrink the count first so the program never reads a half-written mask list.
        self.cfg.n_masks = self.cfg.n_masks.min(masks.len() as u32);
        self.write_config()?;
        {
            let mut m: Array<&mut MapData, FpMask> = self.map("fp_masks")?;
            for (i, (id, mask)) in masks.iter().enumerate() {
                let v = FpMask {
                    mask: key_from_flowkey(mask),
                    id: *id,
                    pad: 0,
                };
                m.set(i as u32, v, 0)
                    .map_err(|e| err(format!("fp_masks[{i}]: {e}")))?;
            }
        }
        self.cfg.n_masks = masks.len() as u32;
        self.write_config()
    }

    /// Cache a flow: packets whose key ANDed with mask `mask_id` equals `key & mask`
    /// (`mask` must be the one registered under that id) run `actions`, counted in `slot`.
    /// The entry gets the current version.
    pub fn insert(
        &mut self,
        mask_id: u32,
        mask: &FlowKey,
        key: &FlowKey,
        actions: FpActions,
        slot: u32,
    ) -> io::Result<()> {
        let version = self.cfg.version;
        self.insert_versioned(mask_id, mask, key, actions, slot, version)
    }

    /// As [`FlowTier::insert`], but stamped with `version` (the rule version the flow was
    /// classified under) instead of the current one: it is a hit only while
    /// `fp_config.version == version`.
    pub fn insert_versioned(
        &mut self,
        mask_id: u32,
        mask: &FlowKey,
        key: &FlowKey,
        actions: FpActions,
        slot: u32,
        version: u32,
    ) -> io::Result<()> {
        if slot >= MAX_FLOWS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("slot {slot} >= {MAX_FLOWS}"),
            ));
        }
        let k = flow_key(mask_id, mask, key).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the megaflow matches non-zero tunnel fields: never a hit in the XDP tier",
            )
        })?;
        let v = FpFlowValue {
            act: FpActions { version, ..actions },
            slot,
            pad: 0,
        };
        self.table.insert(k, v).map(|_| ()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::StorageFull,
                "fp_flows: both entries of the flow's bucket hold other flows",
            )
        })
    }

    /// Remove a cached flow (as inserted).
    pub fn remove(&mut self, mask_id: u32, mask: &FlowKey, key: &FlowKey) -> io::Result<()> {
        let Some(k) = flow_key(mask_id, mask, key) else {
            return Ok(()); // never inserted
        };
        if self.table.remove(&k) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "fp_flows: no such flow",
            ))
        }
    }

    /// The kernel flow table, as mapped into this process.
    pub fn table(&self) -> &FlowTable {
        &self.table
    }

    /// The same, to write (what `insert`/`remove` use; mind the seqlock protocol).
    pub fn table_mut(&mut self) -> &mut FlowTable {
        &mut self.table
    }

    /// Cached flows in `fp_flows` (a scan of the whole table).
    pub fn flow_count(&self) -> usize {
        self.table.len()
    }

    /// Packets arriving on `ifindex` get `in_port = port` in their key; their upcalls go
    /// to `xsks_map[xsk_base + rx queue]`.
    pub fn set_in_port(&mut self, ifindex: u32, port: u32, xsk_base: u32) -> io::Result<()> {
        let v = FpInPort {
            port,
            xsk_base: u16::try_from(xsk_base)
                .map_err(|_| err(format!("xsk_base {xsk_base} > 65535")))?,
            flags: INPORT_PRESENT,
        };
        if ifindex < INPORT_DIRECT {
            let mut m: Array<&mut MapData, FpInPort> = self.map("fp_inport")?;
            m.set(ifindex, v, 0)
        } else {
            let mut m: HashMap<&mut MapData, u32, FpInPort> = self.map("fp_inport_hash")?;
            m.insert(ifindex, v, 0)
        }
        .map_err(|e| err(format!("fp_inport[{ifindex}]: {e}")))
    }

    /// Output through devmap index `dev` goes to interface `ifindex`.
    pub fn set_output_dev(&mut self, dev: u32, ifindex: u32) -> io::Result<()> {
        let mut m: DevMap<&mut MapData> = self.map("fp_ports")?;
        m.set(dev, ifindex, None, 0)
            .map_err(|e| err(format!("fp_ports[{dev}]: {e}")))
    }

    /// Upcalls for `xsks_map[index]` (`xsk_base + rx queue`) go to the AF_XDP socket `fd`.
    pub fn register_xsk(&mut self, index: u32, fd: RawFd) -> io::Result<()> {
        let mut m: XskMap<&mut MapData> = self.map("xsks_map")?;
        m.set(index, fd, 0)
            .map_err(|e| err(format!("xsks_map[{index}]: {e}")))
    }

    /// Empty `xsks_map[index]` (upcalls there go to the kernel stack).
    pub fn unregister_xsk(&mut self, index: u32) -> io::Result<()> {
        let mut m: XskMap<&mut MapData> = self.map("xsks_map")?;
        m.unset(index)
            .map_err(|e| err(format!("xsks_map[{index}]: {e}")))
    }

    /// How the program is attached to `ifindex`, if it is.
    pub fn attached(&self, ifindex: u32) -> Option<Attached> {
        self.links
            .iter()
            .find(|(i, _, _)| *i == ifindex)
            .map(|(_, _, a)| *a)
    }

    /// A slot's counters summed over CPUs.
    pub fn stats(&self, slot: u32) -> io::Result<FpStat> {
        let m: PerCpuArray<&MapData, FpStat> = self.map_ro("fp_stats")?;
        let v = m
            .get(&slot, 0)
            .map_err(|e| err(format!("fp_stats[{slot}]: {e}")))?;
        Ok(v.iter().fold(FpStat::default(), |a, s| FpStat {
            packets: a.packets + s.packets,
            bytes: a.bytes + s.bytes,
        }))
    }

    /// How many packets got each verdict (summed over CPUs), indexed by `Reason as usize`.
    pub fn reason_counts(&self) -> io::Result<[u64; Reason::COUNT]> {
        let m: PerCpuArray<&MapData, u64> = self.map_ro("fp_reasons")?;
        let mut out = [0u64; Reason::COUNT];
        for (i, o) in out.iter_mut().enumerate() {
            let v = m
                .get(&(i as u32), 0)
                .map_err(|e| err(format!("fp_reasons: {e}")))?;
            *o = v.iter().sum();
        }
        Ok(out)
    }

    /// The last packet's record (with [`FlowTier::set_debug`]).
    pub fn last_debug(&self) -> io::Result<FpDebug> {
        let m: Array<&MapData, FpDebug> = self.map_ro("fp_debug")?;
        m.get(&0, 0).map_err(|e| err(format!("fp_debug: {e}")))
    }

    /// Run the program once on `frame` as if it arrived on `ifindex`, rx queue 0, with
    /// `BPF_PROG_TEST_RUN` (not live: a redirect is only a return code, nothing is sent).
    /// `ifindex` must exist (the kernel checks); `lo` (1) will do.
    pub fn test_run(&self, frame: &[u8], ifindex: u32) -> io::Result<RunResult> {
        // Room for the frame to grow by a pushed tag (and then some).
        let mut out = vec![0u8; frame.len() + 64];
        let r = self.prog_test_run(frame, ifindex, 1, Some(&mut out))?;
        out.truncate(r.data_size_out as usize);
        Ok(RunResult {
            action: r.return_value,
            data: out,
        })
    }

    /// The program's mean time per run on `frame` over `repeat` runs of
    /// `BPF_PROG_TEST_RUN` (the kernel times the loop; nothing is sent): what parsing,
    /// the lookups and the actions cost, without the driver and the redirect.
    pub fn time_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> io::Result<Duration> {
        Ok(self
            .prog_test_run(frame, ifindex, repeat.max(1), None)?
            .duration)
    }

    fn prog_test_run(
        &self,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
        data_out: Option<&mut [u8]>,
    ) -> io::Result<aya::programs::TestRunResult> {
        let prog: &Xdp = self
            .ebpf
            .program(PROGRAM)
            .ok_or_else(|| err("flow_tier missing"))?
            .try_into()
            .map_err(|e| err(format!("{PROGRAM}: {e}")))?;
        // struct xdp_md { data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex }: data = metadata length (none), data_end = frame length.
        let md: [u32; 6] = [0, frame.len() as u32, 0, ifindex, 0, 0];
        prog.test_run(TestRunOptions {
            data_in: Some(frame),
            data_out,
            ctx_in: Some(bytemuck::cast_slice(&md)),
            repeat,
            ..TestRunOptions::new()
        })
        .map_err(|e| err(format!("BPF_PROG_TEST_RUN: {e}")))
    }

    /// Attach to `ifname` (Auto: native, then generic); says which mode it got.
    pub fn attach(&mut self, ifname: &str, mode: XdpMode) -> io::Result<Attached> {
        let idx = ifindex(ifname)?;
        let p: &mut Xdp = self
            .ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| err("flow_tier missing"))?
            .try_into()
            .map_err(|e| err(format!("{PROGRAM}: {e}")))?;
        let tries: &[(AyaMode, Attached)] = match mode {
            XdpMode::Auto => &[
                (AyaMode::Driver, Attached::Native),
                (AyaMode::Skb, Attached::Generic),
            ],
            XdpMode::Native => &[(AyaMode::Driver, Attached::Native)],
            XdpMode::Generic => &[(AyaMode::Skb, Attached::Generic)],
        };
        let mut last = String::new();
        for &(m, a) in tries {
            match p.attach_to_if_index(idx, m) {
                Ok(id) => {
                    self.links.push((idx, id, a));
                    return Ok(a);
                }
                Err(e) => last = format!("{a:?} attach to {ifname}: {e}"),
            }
        }
        Err(err(last))
    }

    /// Detach from `ifname` (no-op if not attached there).
    pub fn detach(&mut self, ifname: &str) -> io::Result<()> {
        let idx = ifindex(ifname)?;
        let p: &mut Xdp = self
            .ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| err("flow_tier missing"))?
            .try_into()
            .map_err(|e| err(format!("{PROGRAM}: {e}")))?;
        let mut keep = Vec::new();
        for (i, id, a) in self.links.drain(..) {
            if i == idx {
                p.detach(id).map_err(|e| err(format!("detach: {e}")))?;
            } else {
                keep.push((i, id, a));
            }
        }
        self.links = keep;
        Ok(())
    }

    /// Pin every map as `dir/<map name>` (dir on a bpffs, e.g.
    /// `/sys/fs/bpf/flowpath/<name>`; created if missing), so another program can share
    /// them (see docs/xdp-tier.md).
    pub fn pin_maps(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, map) in self.ebpf.maps() {
            if name.starts_with('.') {
                continue; // .rodata/.bss of the object, not part of the contract
            }
            map.pin(dir.join(name))
                .map_err(|e| err(format!("pinning {name}: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for FlowTier {
    fn drop(&mut self) {
        if let Some(p) = self.ebpf.program_mut(PROGRAM) {
            if let Ok(x) = <&mut Xdp>::try_from(p) {
                for (_, id, _) in self.links.drain(..) {
                    let _ = x.detach(id);
                }
            }
        }
    }
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

/// The interface index of `ifname`.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let c =
        std::ffi::CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface '{ifname}'"),
        ));
    }
    Ok(idx)
}

/// Is `eth_type` one the program parses beyond the Ethernet header?
pub fn parses_l3(eth_type: u16) -> bool {
    matches!(eth_type, ethertype::IPV4 | ethertype::IPV6 | ethertype::ARP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_packet::key::{FRAG_ANY, VLAN_PRESENT};

    #[test]
    fn key_is_the_same_bytes() {
        let mut k = FlowKey::ZERO;
        k.set(Field::InPort, 7);
        k.set(Field::EthType, 0x0800);
        k.set(Field::VlanTci, u128::from(VLAN_PRESENT | 5));
        k.set(Field::TpDst, 80);
        k.set(Field::NwFrag, u128::from(FRAG_ANY));
        k.set(Field::Ipv4Dst, 0x0a00_0001);
        let f = key_from_flowkey(&k);
        assert_eq!(f.in_port, [0, 0, 0, 7]);
        assert_eq!(f.eth_type, [8, 0]);
        assert_eq!(f.vlan_tci, [0x10, 5]);
        assert_eq!(f.tp_dst, [0, 80]);
        assert_eq!(f.nw_frag, FRAG_ANY);
        assert_eq!(f.ip_dst[..4], [10, 0, 0, 1]);
        assert_eq!(flowkey_from_key(&f), k);
    }

    #[test]
    fn actions_conversion_accepts_and_refuses() {
        let dev = |p: u32| (p < 10).then_some(p + 100);
        let a = actions_from(
            &[
                Action::SetEthDst([1, 2, 3, 4, 5, 6]),
                Action::DecTtl,
                Action::Output(3),
            ],
            dev,
        )
        .unwrap();
        assert_eq!(a.flags, act::SET_ETH_DST | act::DEC_TTL | act::OUTPUT);
        assert_eq!((a.out_port, a.out_dev), (3, 103));
        assert_eq!(actions_from(&[], dev).unwrap().flags, 0); // drop
        for bad in [
            vec![Action::Output(1), Action::Output(2)],
            vec![Action::Controller { max_len: 64 }],
            vec![Action::InPort],
            vec![Action::SetTunnel(5), Action::Output(1)],
            vec![Action::Output(11)],
            vec![Action::Output(1), Action::SetEthSrc([0; 6])],
            vec![Action::DecTtl, Action::DecTtl],
            vec![Action::PushVlan { tpid: 0x8100 }, Action::PopVlan],
            vec![Action::SetVlanVid(3), Action::PushVlan { tpid: 0x8100 }],
            vec![Action::SetIpv4Src([1; 4]), Action::SetIpv6Src([1; 16])],
        ] {
            assert!(actions_from(&bad, dev).is_none(), "{bad:?} accepted");
        }
        let v = actions_from(
            &[
                Action::PopVlan,
                Action::PushVlan { tpid: 0x88a8 },
                Action::SetVlanVid(0x123),
                Action::SetVlanPcp(5),
                Action::SetVlanVid(0x456),
            ],
            dev,
        )
        .unwrap();
        assert_eq!(v.pop_vlans, 1);
        assert_eq!(v.push_tpid, [0x88, 0xa8]);
        assert_eq!(v.vlan_keep, 0x1000);
        assert_eq!(v.vlan_set, 0xa456);
    }
}
