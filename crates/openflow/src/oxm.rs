//! OXM (OpenFlow Extensible Match) TLVs and `ofp_match`: the OPENFLOW_BASIC fields typed
//! by [`OxmField`], anything else kept as [`Oxm::Unknown`] so the caller can refuse it.

use crate::consts::*;
use crate::wire::{pad8, DecodeError, Reader, Writer};

/// The OPENFLOW_BASIC (class 0x8000) match fields of OpenFlow 1.3, numbered as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum OxmField {
    InPort = 0,
    InPhyPort = 1,
    Metadata = 2,
    EthDst = 3,
    EthSrc = 4,
    EthType = 5,
    VlanVid = 6,
    VlanPcp = 7,
    IpDscp = 8,
    IpEcn = 9,
    IpProto = 10,
    Ipv4Src = 11,
    Ipv4Dst = 12,
    TcpSrc = 13,
    TcpDst = 14,
    UdpSrc = 15,
    UdpDst = 16,
    SctpSrc = 17,
    SctpDst = 18,
    Icmpv4Type = 19,
    Icmpv4Code = 20,
    ArpOp = 21,
    ArpSpa = 22,
    ArpTpa = 23,
    ArpSha = 24,
    ArpTha = 25,
    Ipv6Src = 26,
    Ipv6Dst = 27,
    Ipv6Flabel = 28,
    Icmpv6Type = 29,
    Icmpv6Code = 30,
    Ipv6NdTarget = 31,
    Ipv6NdSll = 32,
    Ipv6NdTll = 33,
    MplsLabel = 34,
    MplsTc = 35,
    MplsBos = 36,
    PbbIsid = 37,
    TunnelId = 38,
    Ipv6Exthdr = 39,
}

/// The low `b` bits set (all 128 from 128 up).
const fn low_bits(b: u32) -> u128 {
    if b >= 128 {
        u128::MAX
    } else {
        (1u128 << b) - 1
    }
}

impl OxmField {
    /// Every field, in wire order.
    pub const ALL: [OxmField; 40] = {
        use OxmField::*;
        [
            InPort,
            InPhyPort,
            Metadata,
            EthDst,
            EthSrc,
            EthType,
            VlanVid,
            VlanPcp,
            IpDscp,
            IpEcn,
            IpProto,
            Ipv4Src,
            Ipv4Dst,
            TcpSrc,
            TcpDst,
            UdpSrc,
            UdpDst,
            SctpSrc,
            SctpDst,
            Icmpv4Type,
            Icmpv4Code,
            ArpOp,
            ArpSpa,
            ArpTpa,
            ArpSha,
            ArpTha,
            Ipv6Src,
            Ipv6Dst,
            Ipv6Flabel,
            Icmpv6Type,
            Icmpv6Code,
            Ipv6NdTarget,
            Ipv6NdSll,
            Ipv6NdTll,
            MplsLabel,
            MplsTc,
            MplsBos,
            PbbIsid,
            TunnelId,
            Ipv6Exthdr,
        ]
    };

    pub fn from_u8(n: u8) -> Option<OxmField> {
        OxmField::ALL.get(n as usize).copied()
    }

    /// Size of the value on the wire, in bytes.
    pub const fn width(self) -> usize {
        use OxmField::*;
        match self {
            InPort | InPhyPort | Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa | Ipv6Flabel | MplsLabel => 4,
            Metadata | TunnelId => 8,
            EthDst | EthSrc | ArpSha | ArpTha | Ipv6NdSll | Ipv6NdTll => 6,
            EthType | VlanVid | TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst | ArpOp
            | Ipv6Exthdr => 2,
            VlanPcp | IpDscp | IpEcn | IpProto | Icmpv4Type | Icmpv4Code | Icmpv6Type
            | Icmpv6Code | MplsTc | MplsBos => 1,
            Ipv6Src | Ipv6Dst | Ipv6NdTarget => 16,
            PbbIsid => 3,
        }
    }

    /// Bits of the value the field uses (the rest must be zero).
    pub const fn bits(self) -> u32 {
        use OxmField::*;
        match self {
            VlanVid => 13,
            VlanPcp | MplsTc => 3,
            IpDscp => 6,
            IpEcn => 2,
            Ipv6Flabel | MplsLabel => 20,
            MplsBos => 1,
            Ipv6Exthdr => 9,
            _ => (self.width() * 8) as u32,
        }
    }

    /// May the field carry a mask (OF 1.3 table 12)?
    pub const fn maskable(self) -> bool {
        use OxmField::*;
        matches!(
            self,
            Metadata
                | EthDst
                | EthSrc
                | VlanVid
                | Ipv4Src
                | Ipv4Dst
                | ArpSpa
                | ArpTpa
                | ArpSha
                | ArpTha
                | Ipv6Src
                | Ipv6Dst
                | Ipv6Flabel
                | PbbIsid
                | TunnelId
                | Ipv6Exthdr
        )
    }

    /// All value bits of the field.
    pub const fn full_mask(self) -> u128 {
        low_bits(self.bits())
    }

    /// All bits of the field's wire width.
    pub const fn width_mask(self) -> u128 {
        low_bits(self.width() as u32 * 8)
    }

    /// The specification's lower-case name (`eth_dst`, `vlan_vid`, ...).
    pub const fn name(self) -> &'static str {
        use OxmField::*;
        match self {
            InPort => "in_port",
            InPhyPort => "in_phy_port",
            Metadata => "metadata",
            EthDst => "eth_dst",
            EthSrc => "eth_src",
            EthType => "eth_type",
            VlanVid => "vlan_vid",
            VlanPcp => "vlan_pcp",
            IpDscp => "ip_dscp",
            IpEcn => "ip_ecn",
            IpProto => "ip_proto",
            Ipv4Src => "ipv4_src",
            Ipv4Dst => "ipv4_dst",
            TcpSrc => "tcp_src",
            TcpDst => "tcp_dst",
            UdpSrc => "udp_src",
            UdpDst => "udp_dst",
            SctpSrc => "sctp_src",
            SctpDst => "sctp_dst",
            Icmpv4Type => "icmpv4_type",
            Icmpv4Code => "icmpv4_code",
            ArpOp => "arp_op",
            ArpSpa => "arp_spa",
            ArpTpa => "arp_tpa",
            ArpSha => "arp_sha",
            ArpTha => "arp_tha",
            Ipv6Src => "ipv6_src",
            Ipv6Dst => "ipv6_dst",
            Ipv6Flabel => "ipv6_flabel",
            Icmpv6Type => "icmpv6_type",
            Icmpv6Code => "icmpv6_code",
            Ipv6NdTarget => "ipv6_nd_target",
            Ipv6NdSll => "ipv6_nd_sll",
            Ipv6NdTll => "ipv6_nd_tll",
            MplsLabel => "mpls_label",
            MplsTc => "mpls_tc",
            MplsBos => "mpls_bos",
            PbbIsid => "pbb_isid",
            TunnelId => "tunnel_id",
            Ipv6Exthdr => "ipv6_exthdr",
        }
    }

    /// The 32-bit OXM header of this field (without mask), as table features list them.
    pub const fn header(self) -> u32 {
        ((OFPXMC_OPENFLOW_BASIC as u32) << 16) | ((self as u32) << 9) | self.width() as u32
    }
}

/// One OXM TLV.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Oxm {
    /// An OPENFLOW_BASIC field. `value` (and `mask`) hold the field's wire bytes as a
    /// big-endian number, within [`OxmField::width_mask`].
    Basic {
        field: OxmField,
        value: u128,
        mask: Option<u128>,
    },
    /// Any other class (NXM, experimenter) or an unassigned OPENFLOW_BASIC field number:
    /// kept as it came, `payload` being everything after the 4-byte header.
    Unknown {
        class: u16,
        field: u8,
        has_mask: bool,
        payload: Vec<u8>,
    },
}

impl Oxm {
    /// An exact-match field (the value is cut to the field's width).
    pub fn exact(field: OxmField, value: u128) -> Oxm {
        Oxm::Basic {
            field,
            value: value & field.width_mask(),
            mask: None,
        }
    }

    /// A masked field (value and mask cut to the field's width).
    pub fn masked(field: OxmField, value: u128, mask: u128) -> Oxm {
        Oxm::Basic {
            field,
            value: value & field.width_mask(),
            mask: Some(mask & field.width_mask()),
        }
    }

    /// `in_port` (what a packet_in's match carries).
    pub fn in_port(port: u32) -> Oxm {
        Oxm::exact(OxmField::InPort, port as u128)
    }

    /// The basic field, if this is one.
    pub fn field(&self) -> Option<OxmField> {
        match self {
            Oxm::Basic { field, .. } => Some(*field),
            Oxm::Unknown { .. } => None,
        }
    }

    /// Length on the wire, header included.
    pub fn wire_len(&self) -> usize {
        4 + match self {
            Oxm::Basic { field, mask, .. } => field.width() * if mask.is_some() { 2 } else { 1 },
            Oxm::Unknown { payload, .. } => payload.len(),
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        match self {
            Oxm::Basic { field, value, mask } => {
                let width = field.width();
                let len = width * if mask.is_some() { 2 } else { 1 };
                w.u16(OFPXMC_OPENFLOW_BASIC);
                w.u8(((*field as u8) << 1) | mask.is_some() as u8);
                w.u8(len as u8);
                w.bytes(&value.to_be_bytes()[16 - width..]);
                if let Some(m) = mask {
                    w.bytes(&m.to_be_bytes()[16 - width..]);
                }
            }
            Oxm::Unknown {
                class,
                field,
                has_mask,
                payload,
            } => {
                w.u16(*class);
                w.u8(((field & 0x7f) << 1) | *has_mask as u8);
                w.u8(payload.len().min(255) as u8);
                w.bytes(&payload[..payload.len().min(255)]);
            }
        }
    }

    /// Decode one OXM TLV; failures are `err` (a match's or a set_field's length error).
    pub(crate) fn decode(r: &mut Reader, err: DecodeError) -> Result<Oxm, DecodeError> {
        let class = r.u16().map_err(|_| err)?;
        let fh = r.u8().map_err(|_| err)?;
        let len = r.u8().map_err(|_| err)? as usize;
        let payload = r.bytes(len).map_err(|_| err)?;
        let (field, has_mask) = (fh >> 1, fh & 1 == 1);
        if class == OFPXMC_OPENFLOW_BASIC {
            if let Some(f) = OxmField::from_u8(field) {
                let width = f.width();
                if len != width * if has_mask { 2 } else { 1 } {
                    return Err(err);
                }
                let value = be(&payload[..width]);
                let mask = has_mask.then(|| be(&payload[width..]));
                return Ok(Oxm::Basic {
                    field: f,
                    value,
                    mask,
                });
            }
        }
        if class == OFPXMC_EXPERIMENTER && len < 4 {
            // The experimenter id is part of the payload.
            return Err(err);
        }
        if has_mask && len % 2 != 0 {
            return Err(err);
        }
        Ok(Oxm::Unknown {
            class,
            field,
            has_mask,
            payload: payload.to_vec(),
        })
    }
}

pub(crate) fn be(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |v, &c| (v << 8) | c as u128)
}

/// Encode an `ofp_match` (type OXM) with its fields, padded to 8 bytes; the length field
/// counts the header and the fields, not the padding.
pub(crate) fn encode_match(w: &mut Writer, fields: &[Oxm]) {
    let start = w.len();
    let len = 4 + fields.iter().map(Oxm::wire_len).sum::<usize>();
    w.u16(OFPMT_OXM);
    w.u16(len.min(0xffff) as u16);
    for f in fields {
        f.encode(w);
    }
    w.pad_from(start);
}

/// Encoded size of an `ofp_match`, padding included.
pub(crate) fn match_wire_len(fields: &[Oxm]) -> usize {
    let len = 4 + fields.iter().map(Oxm::wire_len).sum::<usize>();
    len + pad8(len)
}

/// Decode an `ofp_match` and its padding.
pub(crate) fn decode_match(r: &mut Reader) -> Result<Vec<Oxm>, DecodeError> {
    let e = DecodeError::BadMatchLen;
    let ty = r.u16().map_err(|_| e)?;
    let len = r.u16().map_err(|_| e)? as usize;
    if ty != OFPMT_OXM {
        return Err(DecodeError::BadMatchType(ty));
    }
    if len < 4 {
        return Err(e);
    }
    let mut body = r.sub(len - 4, e).map_err(|_| e)?;
    r.skip(pad8(len)).map_err(|_| e)?;
    let mut out = Vec::new();
    while !body.is_empty() {
        out.push(Oxm::decode(&mut body, e)?);
    }
    Ok(out)
}
