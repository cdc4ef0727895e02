//! What the parser is given and gives back: its [`ParseOptions`], the [`PacketMeta`] header
//! offsets of a keyed frame, and the [`DropReason`] of one it drops.

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
/// given to [`parse`](super::parse). For a VXLAN packet these describe the inner frame
/// (`l2` is the inner Ethernet header); the datapath strips everything before `l2`.
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
