//! Zero-copy parsing of one frame into a [`FlowKey`] plus header offsets.
//!
//! Ethernet, up to two 802.1Q/802.1ad tags, ARP, IPv4 (options, fragments), IPv6 (skipping
//! hop-by-hop, routing, fragment and destination-options headers), TCP, UDP, ICMP, ICMPv6,
//! and VXLAN (UDP 4789 by default): the outer headers of a VXLAN packet go to the tunnel
//! fields and the inner frame is parsed as the packet. A truncated or malformed packet is
//! never a panic: it is reported as a [`DropReason`].

use crate::key::{
    ethertype, ipproto, FlowKey, FRAG_ANY, FRAG_LATER, KEY_BYTES, TUN_IPV6, TUN_PRESENT,
    VLAN_PRESENT,
};

/// Why a packet was dropped by the parser. Each has a stable snake_case name for counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header (14 bytes).
    EthTruncated,
    /// A VLAN tag is cut off.
    VlanTruncated,
    /// More than two VLAN tags.
    TooManyVlans,
    /// ARP shorter than its 28-byte Ethernet/IPv4 body.
    ArpTruncated,
    /// Shorter than a 20-byte IPv4 header or than its IHL says.
    Ipv4Truncated,
    /// IPv4 ethertype but version field is not 4.
    Ipv4BadVersion,
    /// IHL below 5.
    Ipv4BadHeaderLength,
    /// Total length below the header length or beyond the frame.
    Ipv4BadTotalLength,
    /// Shorter than a 40-byte IPv6 header.
    Ipv6Truncated,
    /// IPv6 ethertype but version field is not 6.
    Ipv6BadVersion,
    /// Payload length beyond the frame.
    Ipv6BadPayloadLength,
    /// An IPv6 extension header is cut off.
    Ipv6ExtTruncated,
    /// More extension headers than the parser walks (8): a cheap DoS otherwise.
    Ipv6TooManyExtHeaders,
    /// TCP header cut off (first fragment or unfragmented).
    TcpTruncated,
    /// TCP data offset below 5 or beyond the IP payload.
    TcpBadDataOffset,
    /// UDP header cut off.
    UdpTruncated,
    /// UDP length field below 8 or beyond the IP payload.
    UdpBadLength,
    /// ICMP header (type, code, checksum) cut off.
    IcmpTruncated,
    /// ICMPv6 header cut off.
    Icmpv6Truncated,
    /// VXLAN header (8 bytes) cut off.
    VxlanTruncated,
    /// VXLAN header without the I flag (0x08). Other reserved bits are ignored, as
    /// RFC 7348 asks of receivers.
    VxlanBadFlags,
}

impl DropReason {
    /// Every reason, in declaration order (index = `self as usize`).
    pub const ALL: [DropReason; 21] = [
        DropReason::EthTruncated,
        DropReason::VlanTruncated,
        DropReason::TooManyVlans,
        DropReason::ArpTruncated,
        DropReason::Ipv4Truncated,
        DropReason::Ipv4BadVersion,
        DropReason::Ipv4BadHeaderLength,
        DropReason::Ipv4BadTotalLength,
        DropReason::Ipv6Truncated,
        DropReason::Ipv6BadVersion,
        DropReason::Ipv6BadPayloadLength,
        DropReason::Ipv6ExtTruncated,
        DropReason::Ipv6TooManyExtHeaders,
        DropReason::TcpTruncated,
        DropReason::TcpBadDataOffset,
        DropReason::UdpTruncated,
        DropReason::UdpBadLength,
        DropReason::IcmpTruncated,
        DropReason::Icmpv6Truncated,
        DropReason::VxlanTruncated,
        DropReason::VxlanBadFlags,
    ];

    /// Stable counter name, e.g. `ipv4_truncated`.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::EthTruncated => "eth_truncated",
            DropReason::VlanTruncated => "vlan_truncated",
            DropReason::TooManyVlans => "too_many_vlans",
            DropReason::ArpTruncated => "arp_truncated",
            DropReason::Ipv4Truncated => "ipv4_truncated",
            DropReason::Ipv4BadVersion => "ipv4_bad_version",
            DropReason::Ipv4BadHeaderLength => "ipv4_bad_header_length",
            DropReason::Ipv4BadTotalLength => "ipv4_bad_total_length",
            DropReason::Ipv6Truncated => "ipv6_truncated",
            DropReason::Ipv6BadVersion => "ipv6_bad_version",
            DropReason::Ipv6BadPayloadLength => "ipv6_bad_payload_length",
            DropReason::Ipv6ExtTruncated => "ipv6_ext_truncated",
            DropReason::Ipv6TooManyExtHeaders => "ipv6_too_many_ext_headers",
            DropReason::TcpTruncated => "tcp_truncated",
            DropReason::TcpBadDataOffset => "tcp_bad_data_offset",
            DropReason::UdpTruncated => "udp_truncated",
            DropReason::UdpBadLength => "udp_bad_length",
            DropReason::IcmpTruncated => "icmp_truncated",
            DropReason::Icmpv6Truncated => "icmpv6_truncated",
            DropReason::VxlanTruncated => "vxlan_truncated",
            DropReason::VxlanBadFlags => "vxlan_bad_flags",
        }
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the headers of the parsed frame are, as byte offsets from the start of the data
/// given to [`parse`]. For a VXLAN packet these describe the inner frame (`l2` is the
/// inner Ethernet header); the datapath strips everything before `l2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Start of the (inner) Ethernet header.
    pub l2: u16,
    /// Start of the IPv4/IPv6/ARP header, or 0 when there is none.
    pub l3: u16,
    /// Start of the TCP/UDP/ICMP/ICMPv6 header, or 0 when there is none (other protocols,
    /// later fragments).
    pub l4: u16,
    /// Number of VLAN tags in the (inner) frame: 0, 1 or 2.
    pub vlans: u8,
}

impl PacketMeta {
    /// Make a VXLAN packet its inner frame: strip everything before `l2` from `pkt` and
    /// rebase the offsets. A no-op for a packet that was not decapsulated (`l2 == 0`).
    #[inline(always)]
    pub fn strip_outer(&mut self, pkt: &mut crate::Packet<'_>) {
        if self.l2 != 0 {
            let l2 = self.l2;
            pkt.pull_front(l2 as usize);
            self.l2 = 0;
            self.l3 = self.l3.saturating_sub(l2);
            self.l4 = self.l4.saturating_sub(l2);
        }
    }
}

/// Parser settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// UDP destination port recognised as VXLAN (decapsulated); `None` disables VXLAN.
    pub vxlan_port: Option<u16>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            vxlan_port: Some(4789),
        }
    }
}

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
/// returning the small struct by value made the caller re-read it as one word right after
/// the parser wrote it field by field, a store-forwarding stall on every packet.
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

/// The shape most traffic has: untagged Ethernet, IPv4 with a 20-byte header, not a
/// fragment, TCP or UDP (not to the VXLAN port), every length consistent. Such a frame's
/// key is built a word at a time (13 stores, no zeroing pass, no byte copies); any other
/// frame, or one that fails a check, returns false having written nothing and goes the
/// general way, which keys it or names its drop reason. What this accepts the general
/// parser accepts too, with the same key and offsets (`tests/l4_fast_path.rs` holds the
/// two together). Hand-written: it is the first thing every packet runs.
#[inline(always)]
fn ipv4_l4_fast(
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
fn ipv6_l4_fast(
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

type Key = [u8; KEY_BYTES];

/// Key byte offsets (see the layout table in `key.rs`).
mod at {
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
struct Vxlan {
    hdr: usize,
    end: usize,
}

const NO_VXLAN: Vxlan = Vxlan { hdr: 0, end: 0 };

/// The `N` bytes at `off`, if the data holds them. Fixed-size arrays let every later
/// access be checked at compile time.
#[inline(always)]
fn hdr<const N: usize>(data: &[u8], off: usize) -> Option<&[u8; N]> {
    data.get(off..)?.first_chunk::<N>()
}

#[inline(always)]
fn be16(b: [u8; 2]) -> u16 {
    u16::from_be_bytes(b)
}

#[inline(always)]
fn is_vlan_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

/// Parse one Ethernet frame starting at `l2` (0, or the inner frame of a VXLAN packet).
#[inline(always)]
fn parse_frame(
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

/// The outer headers become the tunnel fields; the inner frame becomes the packet.
#[inline(never)]
fn decap_vxlan(
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
fn decap_fast(
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
