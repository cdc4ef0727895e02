//! [`Field`]: the key's named byte ranges, read and written as big-endian numbers, and the
//! [`FlowKey`] accessors and `Debug` printing built on them.

use super::FlowKey;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A field of the flow key: a byte range, read and written as a big-endian number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    InPort,
    EthType,
    VlanTci,
    EthDst,
    VlanInnerTci,
    EthSrc,
    TcpFlags,
    NwProto,
    NwTos,
    NwTtl,
    NwFrag,
    TpSrc,
    TpDst,
    Ipv4Src,
    Ipv4Dst,
    Ipv6Src,
    Ipv6Dst,
    TunId,
    TunFlags,
    TunSrc,
    TunDst,
    /// OpenFlow's metadata register: 0 for every packet the parser keys; `write_metadata`
    /// sets it while a packet walks the tables, for later tables to match. flowpath keeps
    /// its low 24 bits (the room left in the key); the OpenFlow channel refuses values
    /// that need more.
    Metadata,
    /// Which pass of the pipeline a packet is on: 0 as parsed, set by a `ct(table=T)`
    /// action to the recirculation id of table T (see [`crate::ct::recirc_id`]). Rules do
    /// not match it; the slow path starts a recirculated packet in its table.
    RecircId,
    /// [`crate::ct::state`] flags, set by a `ct` action (0: not tracked).
    CtState,
    /// The original-direction protocol of the packet's connection.
    CtNwProto,
    CtZone,
    CtMark,
    CtTpSrc,
    CtTpDst,
    CtLabel,
    /// The original-direction IPv4 source (the first 4 bytes of [`Field::CtIpv6Src`]).
    CtNwSrc,
    CtNwDst,
    CtIpv6Src,
    CtIpv6Dst,
}

impl Field {
    /// Every field, in layout order.
    pub const ALL: [Field; 34] = [
        Field::InPort,
        Field::EthType,
        Field::VlanTci,
        Field::EthDst,
        Field::VlanInnerTci,
        Field::EthSrc,
        Field::TcpFlags,
        Field::NwProto,
        Field::NwTos,
        Field::NwTtl,
        Field::NwFrag,
        Field::TpSrc,
        Field::TpDst,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::Ipv6Src,
        Field::Ipv6Dst,
        Field::TunId,
        Field::TunFlags,
        Field::TunSrc,
        Field::TunDst,
        Field::Metadata,
        Field::RecircId,
        Field::CtState,
        Field::CtNwProto,
        Field::CtZone,
        Field::CtMark,
        Field::CtTpSrc,
        Field::CtTpDst,
        Field::CtLabel,
        Field::CtNwSrc,
        Field::CtNwDst,
        Field::CtIpv6Src,
        Field::CtIpv6Dst,
    ];

    /// The connection-tracking fields a `ct` action sets and `ct_clear` clears (the
    /// IPv4 views are inside the IPv6 ones).
    pub const CT: [Field; 9] = [
        Field::CtState,
        Field::CtNwProto,
        Field::CtZone,
        Field::CtMark,
        Field::CtTpSrc,
        Field::CtTpDst,
        Field::CtLabel,
        Field::CtIpv6Src,
        Field::CtIpv6Dst,
    ];

    /// Byte offset and length of the field inside the key.
    #[inline]
    pub const fn range(self) -> (usize, usize) {
        match self {
            Field::InPort => (0, 4),
            Field::EthType => (4, 2),
            Field::VlanTci => (6, 2),
            Field::EthDst => (8, 6),
            Field::VlanInnerTci => (14, 2),
            Field::EthSrc => (16, 6),
            Field::TcpFlags => (22, 2),
            Field::NwProto => (24, 1),
            Field::NwTos => (25, 1),
            Field::NwTtl => (26, 1),
            Field::NwFrag => (27, 1),
            Field::TpSrc => (28, 2),
            Field::TpDst => (30, 2),
            Field::Ipv4Src => (32, 4),
            Field::Ipv4Dst => (48, 4),
            Field::Ipv6Src => (32, 16),
            Field::Ipv6Dst => (48, 16),
            Field::TunId => (64, 4),
            Field::TunFlags => (68, 1),
            Field::TunSrc => (72, 16),
            Field::TunDst => (88, 16),
            Field::Metadata => (69, 3),
            Field::RecircId => (104, 4),
            Field::CtState => (108, 1),
            Field::CtNwProto => (109, 1),
            Field::CtZone => (110, 2),
            Field::CtMark => (112, 4),
            Field::CtTpSrc => (116, 2),
            Field::CtTpDst => (118, 2),
            Field::CtLabel => (120, 16),
            Field::CtNwSrc => (136, 4),
            Field::CtNwDst => (152, 4),
            Field::CtIpv6Src => (136, 16),
            Field::CtIpv6Dst => (152, 16),
        }
    }

    /// Width of the field in bits.
    pub const fn bits(self) -> u32 {
        match self {
            Field::TcpFlags => 12,
            Field::TunId => 24,
            _ => (self.range().1 * 8) as u32,
        }
    }

    /// Short lower-case name (the OVS-style name where one exists).
    pub const fn name(self) -> &'static str {
        match self {
            Field::InPort => "in_port",
            Field::EthType => "eth_type",
            Field::VlanTci => "vlan_tci",
            Field::EthDst => "eth_dst",
            Field::VlanInnerTci => "vlan_inner_tci",
            Field::EthSrc => "eth_src",
            Field::TcpFlags => "tcp_flags",
            Field::NwProto => "nw_proto",
            Field::NwTos => "nw_tos",
            Field::NwTtl => "nw_ttl",
            Field::NwFrag => "nw_frag",
            Field::TpSrc => "tp_src",
            Field::TpDst => "tp_dst",
            Field::Ipv4Src => "ipv4_src",
            Field::Ipv4Dst => "ipv4_dst",
            Field::Ipv6Src => "ipv6_src",
            Field::Ipv6Dst => "ipv6_dst",
            Field::TunId => "tun_id",
            Field::TunFlags => "tun_flags",
            Field::TunSrc => "tun_src",
            Field::TunDst => "tun_dst",
            Field::Metadata => "metadata",
            Field::RecircId => "recirc_id",
            Field::CtState => "ct_state",
            Field::CtNwProto => "ct_nw_proto",
            Field::CtZone => "ct_zone",
            Field::CtMark => "ct_mark",
            Field::CtTpSrc => "ct_tp_src",
            Field::CtTpDst => "ct_tp_dst",
            Field::CtLabel => "ct_label",
            Field::CtNwSrc => "ct_nw_src",
            Field::CtNwDst => "ct_nw_dst",
            Field::CtIpv6Src => "ct_ipv6_src",
            Field::CtIpv6Dst => "ct_ipv6_dst",
        }
    }

    /// The all-ones mask for this field, as a number.
    pub const fn full_mask(self) -> u128 {
        let b = self.bits();
        if b >= 128 {
            u128::MAX
        } else {
            (1u128 << b) - 1
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FlowKey {
    /// Read a field as a big-endian number. The widths fields have (1, 2, 4 and 16 bytes)
    /// are one load each; with a constant `f` the match folds away.
    #[inline]
    pub fn get(&self, f: Field) -> u128 {
        let (off, len) = f.range();
        let b = &self.bytes()[off..off + len];
        match len {
            1 => u128::from(b[0]),
            2 => u128::from(u16::from_be_bytes([b[0], b[1]])),
            4 => u128::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            16 => u128::from_be_bytes(b.try_into().expect("16 bytes")),
            _ => b.iter().fold(0u128, |v, &x| (v << 8) | u128::from(x)),
        }
    }

    /// Write a field from a big-endian number (excess high bits are discarded).
    #[inline]
    pub fn set(&mut self, f: Field, v: u128) {
        let (off, len) = f.range();
        let bytes = &mut self.bytes_mut()[off..off + len];
        match len {
            1 => bytes[0] = v as u8,
            2 => bytes.copy_from_slice(&(v as u16).to_be_bytes()),
            4 => bytes.copy_from_slice(&(v as u32).to_be_bytes()),
            16 => bytes.copy_from_slice(&v.to_be_bytes()),
            _ => bytes.copy_from_slice(&v.to_be_bytes()[16 - len..]),
        }
    }

    /// Set every bit of `f` in this key (used when the key is a mask).
    #[inline]
    pub fn set_all(&mut self, f: Field) {
        self.set(f, f.full_mask());
    }

    /// Set the bits of `mask` in field `f` (OR), used for un-wildcarding.
    #[inline]
    pub fn or_field(&mut self, f: Field, mask: u128) {
        let v = self.get(f) | (mask & f.full_mask());
        self.set(f, v);
    }

    pub fn ipv4_src(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.get(Field::Ipv4Src) as u32)
    }
    pub fn ipv4_dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.get(Field::Ipv4Dst) as u32)
    }
    pub fn ipv6_src(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get(Field::Ipv6Src))
    }
    pub fn ipv6_dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.get(Field::Ipv6Dst))
    }
}

impl fmt::Debug for FlowKey {
    /// Prints only the non-zero fields, e.g. `FlowKey{in_port=1,eth_type=0x800,...}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlowKey{{")?;
        let mut first = true;
        for field in Field::ALL {
            // IPv4 views overlap the IPv6 ones; print the wide form only.
            if matches!(
                field,
                Field::Ipv4Src | Field::Ipv4Dst | Field::CtNwSrc | Field::CtNwDst
            ) {
                continue;
            }
            let v = self.get(field);
            if v != 0 {
                if !first {
                    write!(f, ",")?;
                }
                first = false;
                write!(f, "{}={:#x}", field.name(), v)?;
            }
        }
        write!(f, "}}")
    }
}
