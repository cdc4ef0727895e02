//! The names the syntax knows: match fields (with their aliases), protocol shorthands,
//! keywords, and the OVS names flowpath recognises but does not support.

use flowpath_packet::Field;

/// A match field as the syntax names it (several names may map to one key field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum F {
    InPort,
    EthSrc,
    EthDst,
    EthType,
    DlVlan,
    DlVlanPcp,
    VlanTci,
    VlanVid,
    VlanPcp,
    DlVlan1,
    DlVlanPcp1,
    VlanTci1,
    NwSrc,
    NwDst,
    IpSrc,
    IpDst,
    ArpSpa,
    ArpTpa,
    ArpOp,
    Ipv6Src,
    Ipv6Dst,
    NwProto,
    NwTos,
    IpDscp,
    NwEcn,
    NwTtl,
    IpFrag,
    TpSrc,
    TpDst,
    TcpSrc,
    TcpDst,
    UdpSrc,
    UdpDst,
    TcpFlags,
    IcmpType,
    IcmpCode,
    Icmpv6Type,
    Icmpv6Code,
    TunId,
    TunSrc,
    TunDst,
    TunIpv6Src,
    TunIpv6Dst,
    TunFlags,
    Metadata,
    CtState,
    CtZone,
    CtMark,
    CtLabel,
    CtNwSrc,
    CtNwDst,
    CtIpv6Src,
    CtIpv6Dst,
    CtNwProto,
    CtTpSrc,
    CtTpDst,
}

/// Every `F`, in declaration order (so `ALL_FIELDS[f as usize] == f`).
pub(crate) const ALL_FIELDS: [F; 56] = [
    F::InPort,
    F::EthSrc,
    F::EthDst,
    F::EthType,
    F::DlVlan,
    F::DlVlanPcp,
    F::VlanTci,
    F::VlanVid,
    F::VlanPcp,
    F::DlVlan1,
    F::DlVlanPcp1,
    F::VlanTci1,
    F::NwSrc,
    F::NwDst,
    F::IpSrc,
    F::IpDst,
    F::ArpSpa,
    F::ArpTpa,
    F::ArpOp,
    F::Ipv6Src,
    F::Ipv6Dst,
    F::NwProto,
    F::NwTos,
    F::IpDscp,
    F::NwEcn,
    F::NwTtl,
    F::IpFrag,
    F::TpSrc,
    F::TpDst,
    F::TcpSrc,
    F::TcpDst,
    F::UdpSrc,
    F::UdpDst,
    F::TcpFlags,
    F::IcmpType,
    F::IcmpCode,
    F::Icmpv6Type,
    F::Icmpv6Code,
    F::TunId,
    F::TunSrc,
    F::TunDst,
    F::TunIpv6Src,
    F::TunIpv6Dst,
    F::TunFlags,
    F::Metadata,
    F::CtState,
    F::CtZone,
    F::CtMark,
    F::CtLabel,
    F::CtNwSrc,
    F::CtNwDst,
    F::CtIpv6Src,
    F::CtIpv6Dst,
    F::CtNwProto,
    F::CtTpSrc,
    F::CtTpDst,
];

/// Every accepted field name. The first name of each field in this list is not
/// necessarily the printed one (see `format.rs`).
pub(crate) const FIELDS: &[(&str, F)] = &[
    ("in_port", F::InPort),
    ("dl_src", F::EthSrc),
    ("dl_dst", F::EthDst),
    ("eth_src", F::EthSrc),
    ("eth_dst", F::EthDst),
    ("dl_type", F::EthType),
    ("eth_type", F::EthType),
    ("dl_vlan", F::DlVlan),
    ("dl_vlan_pcp", F::DlVlanPcp),
    ("vlan_tci", F::VlanTci),
    ("vlan_vid", F::VlanVid),
    ("vlan_pcp", F::VlanPcp),
    ("dl_vlan1", F::DlVlan1),
    ("dl_vlan_pcp1", F::DlVlanPcp1),
    ("vlan_tci1", F::VlanTci1),
    ("nw_src", F::NwSrc),
    ("nw_dst", F::NwDst),
    ("ip_src", F::IpSrc),
    ("ip_dst", F::IpDst),
    ("ipv4_src", F::IpSrc),
    ("ipv4_dst", F::IpDst),
    ("arp_spa", F::ArpSpa),
    ("arp_tpa", F::ArpTpa),
    ("arp_op", F::ArpOp),
    ("ipv6_src", F::Ipv6Src),
    ("ipv6_dst", F::Ipv6Dst),
    ("nw_proto", F::NwProto),
    ("ip_proto", F::NwProto),
    ("nw_tos", F::NwTos),
    ("ip_dscp", F::IpDscp),
    ("nw_ecn", F::NwEcn),
    ("ip_ecn", F::NwEcn),
    ("nw_ttl", F::NwTtl),
    ("ip_frag", F::IpFrag),
    ("nw_frag", F::IpFrag),
    ("tp_src", F::TpSrc),
    ("tp_dst", F::TpDst),
    ("tcp_src", F::TcpSrc),
    ("tcp_dst", F::TcpDst),
    ("udp_src", F::UdpSrc),
    ("udp_dst", F::UdpDst),
    ("tcp_flags", F::TcpFlags),
    ("icmp_type", F::IcmpType),
    ("icmp_code", F::IcmpCode),
    ("icmpv6_type", F::Icmpv6Type),
    ("icmpv6_code", F::Icmpv6Code),
    ("tun_id", F::TunId),
    ("tunnel_id", F::TunId),
    ("tun_src", F::TunSrc),
    ("tun_dst", F::TunDst),
    ("tun_ipv6_src", F::TunIpv6Src),
    ("tun_ipv6_dst", F::TunIpv6Dst),
    ("tun_flags", F::TunFlags),
    ("metadata", F::Metadata),
    ("ct_state", F::CtState),
    ("ct_zone", F::CtZone),
    ("ct_mark", F::CtMark),
    ("ct_label", F::CtLabel),
    ("ct_nw_src", F::CtNwSrc),
    ("ct_nw_dst", F::CtNwDst),
    ("ct_ipv6_src", F::CtIpv6Src),
    ("ct_ipv6_dst", F::CtIpv6Dst),
    ("ct_nw_proto", F::CtNwProto),
    ("ct_tp_src", F::CtTpSrc),
    ("ct_tp_dst", F::CtTpDst),
];

/// String equality that rejects on length, first and last byte before comparing the
/// rest: most candidates share a length with the word looked up.
#[inline]
fn same(a: &str, b: &[u8]) -> bool {
    let a = a.as_bytes();
    a.len() == b.len()
        && !b.is_empty()
        && a[0] == b[0]
        && a[a.len() - 1] == b[b.len() - 1]
        && a == b
}

pub(crate) fn field(name: &str) -> Option<F> {
    let b = name.as_bytes();
    FIELDS.iter().find(|(n, _)| same(n, b)).map(|&(_, f)| f)
}

/// What a word of the match part is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Field(F),
    Protocol(u16, Option<u8>),
    Actions,
    Table,
    Priority,
    Cookie,
    IdleTimeout,
    HardTimeout,
    /// Statistics `dump-flows` prints, which OVS ignores on input.
    Ignored,
    Unknown,
}

pub(crate) fn classify(name: &str) -> Word {
    let b = name.as_bytes();
    if let Some(&(_, f)) = FIELDS.iter().find(|(n, _)| same(n, b)) {
        return Word::Field(f);
    }
    if let Some(&(_, e, p)) = PROTOCOLS.iter().find(|(n, _, _)| same(n, b)) {
        return Word::Protocol(e, p);
    }
    match name {
        "actions" | "action" => Word::Actions,
        "table" => Word::Table,
        "priority" => Word::Priority,
        "cookie" => Word::Cookie,
        "idle_timeout" => Word::IdleTimeout,
        "hard_timeout" => Word::HardTimeout,
        n if IGNORED.contains(&n) => Word::Ignored,
        _ => Word::Unknown,
    }
}

/// Protocol shorthands: name, ethertype, IP protocol (OVS's `ofp_parse_protocol`).
pub(crate) const PROTOCOLS: &[(&str, u16, Option<u8>)] = &[
    ("ip", 0x0800, None),
    ("tcp", 0x0800, Some(6)),
    ("udp", 0x0800, Some(17)),
    ("icmp", 0x0800, Some(1)),
    ("arp", 0x0806, None),
    ("ipv6", 0x86dd, None),
    ("tcp6", 0x86dd, Some(6)),
    ("udp6", 0x86dd, Some(17)),
    ("icmp6", 0x86dd, Some(58)),
    ("sctp", 0x0800, Some(132)),
    ("sctp6", 0x86dd, Some(132)),
    ("ipv4", 0x0800, None),
    ("ip4", 0x0800, None),
    ("ip6", 0x86dd, None),
    ("rarp", 0x8035, None),
    ("mpls", 0x8847, None),
    ("mplsm", 0x8848, None),
];

/// Keywords that are not match fields.
pub(crate) const KEYWORDS: &[&str] = &[
    "table",
    "priority",
    "cookie",
    "idle_timeout",
    "hard_timeout",
    "actions",
];

/// What `ovs-ofctl dump-flows` prints and OVS ignores on input, so that a dump line can
/// be fed back.
pub(crate) const IGNORED: &[&str] = &["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

/// OVS match fields and flow-mod keywords flowpath does not have.
pub(crate) const UNSUPPORTED_FIELDS: &[&str] = &[
    "pkt_mark",
    "skb_priority",
    "recirc_id",
    "dp_hash",
    "conj_id",
    "actset_output",
    "packet_type",
    "eth",
    "in_port_oxm",
    "arp_sha",
    "arp_tha",
    "nd_target",
    "nd_sll",
    "nd_tll",
    "ipv6_label",
    "mpls_label",
    "mpls_tc",
    "mpls_bos",
    "mpls_ttl",
    "sctp_src",
    "sctp_dst",
    "igmp_type",
    "igmp_code",
    "tun_gbp_id",
    "tun_gbp_flags",
    "tun_tos",
    "tun_ttl",
    "out_port",
    "out_group",
    "importance",
    "send_flow_rem",
    "check_overlap",
    "reset_counts",
    "no_packet_counts",
    "no_byte_counts",
];

/// `reg0`..`reg15`, `xreg0`.., `xxreg0`..: OVS registers, which flowpath does not have.
pub(crate) fn is_register(name: &str) -> bool {
    let digits = name
        .strip_prefix("xxreg")
        .or_else(|| name.strip_prefix("xreg"))
        .or_else(|| name.strip_prefix("reg"));
    matches!(digits, Some(d) if !d.is_empty() && d.len() <= 2 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Fields a `ct` action's zone may come from, and fields `load:` writes in its `exec`:
/// the name OVS prints (`mf_format_subfield`'s NXM or OXM name), the flow-syntax name
/// (also accepted), the key field, and the field's width in OVS, which slices are checked
/// against (as the OpenFlow channel checks them; bits past flowpath's narrower `metadata`,
/// `tun_id` read as 0).
pub(crate) const SUBFIELDS: &[(&str, &str, Field, u32)] = &[
    ("NXM_OF_IN_PORT", "in_port", Field::InPort, 16),
    ("NXM_OF_ETH_DST", "eth_dst", Field::EthDst, 48),
    ("NXM_OF_ETH_SRC", "eth_src", Field::EthSrc, 48),
    ("NXM_OF_ETH_TYPE", "eth_type", Field::EthType, 16),
    ("NXM_OF_VLAN_TCI", "vlan_tci", Field::VlanTci, 16),
    ("NXM_NX_TUN_ID", "tun_id", Field::TunId, 64),
    ("OXM_OF_METADATA", "metadata", Field::Metadata, 64),
    ("NXM_NX_CT_ZONE", "ct_zone", Field::CtZone, 16),
    ("NXM_NX_CT_MARK", "ct_mark", Field::CtMark, 32),
    ("NXM_NX_CT_LABEL", "ct_label", Field::CtLabel, 128),
];

/// OVS's registers by their NXM/OXM names (`NXM_NX_REG0`, `NXM_NX_XXREG1`,
/// `OXM_OF_PKT_REG2`) or flow-syntax names (`reg0`, ...): flowpath has none.
pub(crate) fn is_any_register(name: &str) -> bool {
    is_register(name)
        || [
            "NXM_NX_REG",
            "NXM_NX_XREG",
            "NXM_NX_XXREG",
            "OXM_OF_PKT_REG",
        ]
        .iter()
        .any(|p| {
            name.strip_prefix(p)
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// Every name a match-part word may be, for suggestions.
pub(crate) fn match_part_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = Vec::with_capacity(FIELDS.len() + PROTOCOLS.len() + KEYWORDS.len());
    v.extend(FIELDS.iter().map(|&(n, _)| n));
    v.extend(PROTOCOLS.iter().map(|&(n, _, _)| n));
    v.extend(KEYWORDS.iter().copied());
    v
}

/// TCP flag names by bit, lowest first (OVS's `packet_tcp_flag_to_string`).
pub(crate) const TCP_FLAG_NAMES: [&str; 12] = [
    "fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]",
];

/// `ip_frag` names as OVS parses them (value, mask over FRAG_ANY = 1, FRAG_LATER = 2).
pub(crate) const FRAG_NAMES: [(&str, u8, u8); 5] = [
    ("no", 0, 3),
    ("yes", 1, 1),
    ("first", 1, 3),
    ("later", 3, 3),
    ("not_later", 0, 2),
];
