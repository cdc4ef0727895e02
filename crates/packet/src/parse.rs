//! Zero-copy parsing of one frame into a [`FlowKey`] plus header offsets.
//!
//! Ethernet, up to two 802.1Q/802.1ad tags, ARP, IPv4 (options, fragments), IPv6 (skipping
//! hop-by-hop, routing, fragment and destination-options headers), TCP, UDP, ICMP, ICMPv6,
//! and VXLAN (UDP 4789 by default): the outer headers of a VXLAN packet go to the tunnel
//! fields and the inner frame is parsed as the packet. A truncated or malformed packet is
//! never a panic: it is reported as a [`DropReason`].

use crate::key::FlowKey;

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
    /// ARP that is not Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4).
    ArpMalformed,
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
    /// VXLAN header without the I flag (0x08), or reserved bits set.
    VxlanBadFlags,
}

impl DropReason {
    /// Every reason, in declaration order (index = `self as usize`).
    pub const ALL: [DropReason; 22] = [
        DropReason::EthTruncated,
        DropReason::VlanTruncated,
        DropReason::TooManyVlans,
        DropReason::ArpTruncated,
        DropReason::ArpMalformed,
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
            DropReason::ArpMalformed => "arp_malformed",
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
pub fn parse(
    data: &[u8],
    in_port: u32,
    opts: &ParseOptions,
    key: &mut FlowKey,
) -> Result<PacketMeta, DropReason> {
    let _ = (data, in_port, opts, key);
    todo!("parser: being written")
}
