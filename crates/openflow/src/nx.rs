//! Nicira extension actions (experimenter `NX_VENDOR_ID`, 0x00002320) for connection
//! tracking, as Open vSwitch's `lib/ofp-actions.c` lays them out and `ovs-ofctl -O
//! OpenFlow13` sends them: `ct` (`struct nx_action_conntrack` and the actions nested in
//! it), `nat` (`struct nx_action_nat`), `ct_clear`, and the register loads OVS uses for a
//! masked `set_field` on `ct_mark`/`ct_label` (`struct nx_action_reg_load`, and
//! `NXAST_REG_LOAD2`). The codec carries every experimenter action as
//! [`OfAction::Experimenter`]; [`NxAction::decode`] reads the data of an NX one and
//! [`NxAction::to_of_action`] makes one. What the fields mean for a rule is
//! `translate`'s business.

use crate::actions::{decode_list, encode_list, OfAction};
use crate::oxm::Oxm;
use crate::wire::{DecodeError, Reader, Writer};

/// Nicira's experimenter id (`NX_VENDOR_ID`, `include/openflow/openflow-common.h`).
pub const NX_VENDOR_ID: u32 = 0x0000_2320;

/// NX action subtypes (`NXAST_RAW_*` in `lib/ofp-actions.c`: the number in `NX1.0+(N)`).
pub mod nxast {
    pub const REG_LOAD: u16 = 7;
    pub const REG_LOAD2: u16 = 33;
    pub const CT: u16 = 35;
    pub const NAT: u16 = 36;
    pub const CT_CLEAR: u16 = 43;
}

/// `nx_action_conntrack.flags` (`enum nx_conntrack_flags`, `ofp-actions.h`).
pub mod ct_flags {
    pub const COMMIT: u16 = 1 << 0;
    pub const FORCE: u16 = 1 << 1;
}

/// `nx_action_conntrack.recirc_table` for "no recirculation" (`NX_CT_RECIRC_NONE`, which
/// OVS defines as `OFPTT_ALL`).
pub const NX_CT_RECIRC_NONE: u8 = 0xff;

/// `nx_action_nat.flags` (`enum nx_nat_flags`, `ofp-actions.h`).
pub mod nat_flags {
    pub const SRC: u16 = 1 << 0;
    pub const DST: u16 = 1 << 1;
    pub const PERSISTENT: u16 = 1 << 2;
    pub const PROTO_HASH: u16 = 1 << 3;
    pub const PROTO_RANDOM: u16 = 1 << 4;
    /// Every defined flag (`NX_NAT_F_MASK`).
    pub const MASK: u16 = 0x1f;
}

/// `nx_action_nat.range_present` bits (`enum nx_nat_range`, `ofp-actions.c`): which
/// optional fields follow the fixed part, in this order.
pub mod nat_range {
    pub const IPV4_MIN: u16 = 1 << 0;
    pub const IPV4_MAX: u16 = 1 << 1;
    pub const IPV6_MIN: u16 = 1 << 2;
    pub const IPV6_MAX: u16 = 1 << 3;
    pub const PROTO_MIN: u16 = 1 << 4;
    pub const PROTO_MAX: u16 = 1 << 5;
}

/// `struct nx_action_conntrack` (24 bytes) and the actions that follow it inside its
/// length: `flags` (`ct_flags`), `zone_src` (an NXM/OXM header, 0 for an immediate
/// zone), `zone` (`zone_ofs_nbits` with a source field, `zone_imm` without), the
/// recirculation table ([`NX_CT_RECIRC_NONE`] for none) and the ALG (0: none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NxConntrack {
    pub flags: u16,
    pub zone_src: u32,
    pub zone: u16,
    pub recirc_table: u8,
    pub alg: u16,
    /// The nested actions, as the codec decodes any action list (an NX one among them
    /// is an [`OfAction::Experimenter`] again).
    pub actions: Vec<OfAction>,
}

/// `struct nx_action_nat` (16 bytes) and its optional fields: each `Some` is present
/// (its `range_present` bit set) and on the wire in field order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NxNat {
    pub flags: u16,
    pub ipv4_min: Option<u32>,
    pub ipv4_max: Option<u32>,
    pub ipv6_min: Option<u128>,
    pub ipv6_max: Option<u128>,
    pub proto_min: Option<u16>,
    pub proto_max: Option<u16>,
}

impl NxNat {
    /// The `range_present` bits of the fields that are there.
    pub fn range_present(&self) -> u16 {
        use nat_range::*;
        let bit = |present: bool, b: u16| if present { b } else { 0 };
        bit(self.ipv4_min.is_some(), IPV4_MIN)
            | bit(self.ipv4_max.is_some(), IPV4_MAX)
            | bit(self.ipv6_min.is_some(), IPV6_MIN)
            | bit(self.ipv6_max.is_some(), IPV6_MAX)
            | bit(self.proto_min.is_some(), PROTO_MIN)
            | bit(self.proto_max.is_some(), PROTO_MAX)
    }
}

/// One NX action of the connection-tracking family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NxAction {
    Ct(NxConntrack),
    Nat(NxNat),
    CtClear,
    /// `struct nx_action_reg_load`: `value` into bits `ofs_nbits >> 6` .. of the field
    /// `dst` (an NXM header), `(ofs_nbits & 63) + 1` of them.
    RegLoad {
        ofs_nbits: u16,
        dst: u32,
        value: u64,
    },
    /// `NXAST_REG_LOAD2`: one NXM/OXM entry, value and optional mask.
    RegLoad2(Oxm),
}

impl NxAction {
    /// The action's NX subtype.
    pub fn subtype(&self) -> u16 {
        match self {
            NxAction::Ct(_) => nxast::CT,
            NxAction::Nat(_) => nxast::NAT,
            NxAction::CtClear => nxast::CT_CLEAR,
            NxAction::RegLoad { .. } => nxast::REG_LOAD,
            NxAction::RegLoad2(_) => nxast::REG_LOAD2,
        }
    }

    /// Read the data of an NX experimenter action (what follows the experimenter id, up
    /// to the action's length). Too short for its structure: OFPBAC_BAD_LEN; a subtype
    /// not of this family: OFPBAC_BAD_EXPERIMENTER_TYPE (`BadExperimenterType`); NAT
    /// fields `range_present` promises and the length does not hold: OFPBAC_BAD_ARGUMENT,
    /// as OVS answers them.
    pub fn decode(data: &[u8]) -> Result<NxAction, DecodeError> {
        let e = DecodeError::BadActionLen;
        // `struct ext_action_header` is 16 bytes: 8 of them after the experimenter id.
        if data.len() < 8 {
            return Err(e);
        }
        let mut r = Reader::new(data, e);
        let subtype = r.u16()?;
        let fixed = |want: usize| if data.len() == want { Ok(()) } else { Err(e) };
        Ok(match subtype {
            nxast::CT => {
                // 24 bytes in all: 16 after the experimenter id.
                if data.len() < 16 {
                    return Err(e);
                }
                let flags = r.u16()?;
                let zone_src = r.u32()?;
                let zone = r.u16()?;
                let recirc_table = r.u8()?;
                r.skip(3)?;
                let alg = r.u16()?;
                let actions = decode_list::<OfAction>(r)?;
                NxAction::Ct(NxConntrack {
                    flags,
                    zone_src,
                    zone,
                    recirc_table,
                    alg,
                    actions,
                })
            }
            nxast::NAT => NxAction::Nat(decode_nat(r)?),
            nxast::CT_CLEAR => fixed(8).map(|_| NxAction::CtClear)?,
            nxast::REG_LOAD => {
                fixed(16)?;
                let ofs_nbits = r.u16()?;
                let dst = r.u32()?;
                let value = r.u64()?;
                NxAction::RegLoad {
                    ofs_nbits,
                    dst,
                    value,
                }
            }
            nxast::REG_LOAD2 => {
                let o = Oxm::decode(&mut r, DecodeError::BadSetLen)?;
                if r.rest().iter().any(|&b| b != 0) {
                    return Err(DecodeError::BadSetArgument);
                }
                NxAction::RegLoad2(o)
            }
            _ => return Err(DecodeError::BadExperimenterType),
        })
    }

    /// The NX action `a` is, if it is one: `None` for any other action (an experimenter
    /// action of another vendor among them).
    pub fn of(a: &OfAction) -> Option<Result<NxAction, DecodeError>> {
        match a {
            OfAction::Experimenter { experimenter, data } if *experimenter == NX_VENDOR_ID => {
                Some(NxAction::decode(data))
            }
            _ => None,
        }
    }

    /// The action as the codec carries it: the experimenter id and the body, padded to
    /// a multiple of 8 bytes.
    pub fn to_of_action(&self) -> OfAction {
        let mut w = Writer::default();
        w.u16(self.subtype());
        match self {
            NxAction::Ct(c) => {
                w.u16(c.flags);
                w.u32(c.zone_src);
                w.u16(c.zone);
                w.u8(c.recirc_table);
                w.zeros(3);
                w.u16(c.alg);
                encode_list(&mut w, &c.actions);
            }
            NxAction::Nat(n) => encode_nat(&mut w, n),
            NxAction::CtClear => w.zeros(6),
            NxAction::RegLoad {
                ofs_nbits,
                dst,
                value,
            } => {
                w.u16(*ofs_nbits);
                w.u32(*dst);
                w.u64(*value);
            }
            NxAction::RegLoad2(o) => o.encode(&mut w),
        }
        // The 8 bytes before the data (type, length, experimenter id) keep the alignment.
        w.pad_from(0);
        OfAction::Experimenter {
            experimenter: NX_VENDOR_ID,
            data: w.buf,
        }
    }
}

/// `struct nx_action_nat` after its subtype: 2 bytes of padding, flags, range_present,
/// then the optional fields `range_present` names, in bit order (as `decode_NXAST_RAW_NAT`
/// pulls them; a field it names and the length does not hold is OFPBAC_BAD_ARGUMENT).
/// Range bits above `PROTO_MAX` name nothing and are ignored, as OVS ignores them.
fn decode_nat(mut r: Reader) -> Result<NxNat, DecodeError> {
    r.skip(2)?;
    let flags = r.u16()?;
    let present = r.u16()?;
    let mut opts = Reader::new(r.rest(), DecodeError::BadArgument);
    let has = |b: u16| present & b != 0;
    use nat_range::*;
    let mut n = NxNat {
        flags,
        ..NxNat::default()
    };
    n.ipv4_min = has(IPV4_MIN).then(|| opts.u32()).transpose()?;
    n.ipv4_max = has(IPV4_MAX).then(|| opts.u32()).transpose()?;
    n.ipv6_min = has(IPV6_MIN)
        .then(|| opts.array::<16>().map(u128::from_be_bytes))
        .transpose()?;
    n.ipv6_max = has(IPV6_MAX)
        .then(|| opts.array::<16>().map(u128::from_be_bytes))
        .transpose()?;
    n.proto_min = has(PROTO_MIN).then(|| opts.u16()).transpose()?;
    n.proto_max = has(PROTO_MAX).then(|| opts.u16()).transpose()?;
    Ok(n)
}

/// The NAT body after its subtype, as `encode_NAT` writes it (the caller pads).
fn encode_nat(w: &mut Writer, n: &NxNat) {
    w.zeros(2);
    w.u16(n.flags);
    w.u16(n.range_present());
    n.ipv4_min.into_iter().for_each(|v| w.u32(v));
    n.ipv4_max.into_iter().for_each(|v| w.u32(v));
    n.ipv6_min
        .into_iter()
        .for_each(|v| w.bytes(&v.to_be_bytes()));
    n.ipv6_max
        .into_iter()
        .for_each(|v| w.bytes(&v.to_be_bytes()));
    n.proto_min.into_iter().for_each(|v| w.u16(v));
    n.proto_max.into_iter().for_each(|v| w.u16(v));
}
