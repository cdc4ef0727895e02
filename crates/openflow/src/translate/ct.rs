//! The Nicira `ct`, `nat` and `ct_clear` actions as flowpath's [`Action::Ct`] (an interned
//! [`CtSpec`]) and [`Action::CtClear`], and back. Refused as OVS's `decode_NXAST_RAW_CT`,
//! `decode_NXAST_RAW_NAT`, `ofpacts_verify_nested` and `check_CT` refuse them; beyond OVS,
//! flowpath refuses what it cannot carry out: an ALG, `ct` flag bits OVS does not define,
//! a zone from a field it does not hold (registers among them), two NATs in one `ct`.

use super::error::OfError;
use super::matches::Pinned;
use super::nxm::{NxmField, CT_LABEL, CT_MARK};
use crate::actions::OfAction;
use crate::consts::*;
use crate::nx::*;
use crate::oxm::{be, Oxm};
use flowpath_packet::ct::{CtZoneSrc, NatFlags, NatKind, NatSpec};
use flowpath_packet::{Action, CtId, CtSpec, Field};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Fields a `ct` zone may come from: the NXM/OXM header OVS's `nxm_header_from_mff`
/// writes for it, the key field, and the field's width in OVS (what `mf_check_src` checks
/// the bit range against). Registers (`NXM_NX_REG*`) are not here: flowpath has none.
const ZONE_FIELDS: [(u32, Field, u32); 10] = [
    (0x0000_0002, Field::InPort, 16),   // NXM_OF_IN_PORT(0)
    (0x0000_0206, Field::EthDst, 48),   // NXM_OF_ETH_DST(1)
    (0x0000_0406, Field::EthSrc, 48),   // NXM_OF_ETH_SRC(2)
    (0x0000_0602, Field::EthType, 16),  // NXM_OF_ETH_TYPE(3)
    (0x0000_0802, Field::VlanTci, 16),  // NXM_OF_VLAN_TCI(4)
    (0x0001_2008, Field::TunId, 64),    // NXM_NX_TUN_ID(16)
    (0x8000_0408, Field::Metadata, 64), // OXM_OF_METADATA(2)
    (0x0001_d402, Field::CtZone, 16),   // NXM_NX_CT_ZONE(106)
    (0x0001_d604, Field::CtMark, 32),   // NXM_NX_CT_MARK(107)
    (0x0001_d810, Field::CtLabel, 128), // NXM_NX_CT_LABEL(108)
];

fn bad(code: u16) -> OfError {
    OfError::bad_action(code)
}

/// A `ct` action, checked against what the rule's match pins, as [`Action::Ct`]. The
/// interner full is OFPBAC_TOO_MANY.
pub(super) fn ct_action(c: &NxConntrack, pinned: Pinned) -> Result<Action, OfError> {
    let spec = ct_spec(c)?;
    // check_CT: tracking needs IP; committing a packet matched as invalid cannot work.
    if !pinned.is_ip() || (spec.commit && pinned.ct_inv) {
        return Err(bad(bac::MATCH_INCONSISTENT));
    }
    CtId::intern(spec)
        .map(Action::Ct)
        .map_err(|_| bad(bac::TOO_MANY))
}

/// The spec an `nx_action_conntrack` describes (its checks in `decode_NXAST_RAW_CT`'s
/// order: flags, zone, nested actions, then "only a bare nat without commit").
fn ct_spec(c: &NxConntrack) -> Result<CtSpec, OfError> {
    let (commit, force) = (
        c.flags & ct_flags::COMMIT != 0,
        c.flags & ct_flags::FORCE != 0,
    );
    if c.flags & !(ct_flags::COMMIT | ct_flags::FORCE) != 0 || (force && !commit) {
        return Err(bad(bac::BAD_ARGUMENT));
    }
    let zone = zone(c.zone_src, c.zone)?;
    if c.alg != 0 {
        return Err(bad(bac::BAD_ARGUMENT));
    }
    let mut spec = CtSpec {
        commit,
        force,
        zone,
        table: (c.recirc_table != NX_CT_RECIRC_NONE).then_some(c.recirc_table),
        ..CtSpec::new()
    };
    for a in &c.actions {
        nested(a, &mut spec)?;
    }
    let bare_nat = NatSpec {
        kind: None,
        addrs: None,
        ports: None,
        flags: NatFlags::default(),
    };
    let acts_needing_commit = spec.set_mark.is_some()
        || spec.set_label.is_some()
        || spec.nat.is_some_and(|n| n != bare_nat);
    if acts_needing_commit && !commit {
        return Err(bad(bac::BAD_ARGUMENT));
    }
    Ok(spec)
}

/// The zone: `zone_imm`, or 16 bits of a field (`decode_ct_zone`: an unknown field is
/// BAD_SET_TYPE, a bit range outside it or not 16 bits wide BAD_SET_LEN).
fn zone(zone_src: u32, ofs_nbits: u16) -> Result<CtZoneSrc, OfError> {
    if zone_src == 0 {
        return Ok(CtZoneSrc::Value(ofs_nbits));
    }
    let &(_, field, width) = ZONE_FIELDS
        .iter()
        .find(|z| z.0 == zone_src)
        .ok_or(bad(bac::BAD_SET_TYPE))?;
    let (ofs, n_bits) = ((ofs_nbits >> 6) as u32, (ofs_nbits & 63) as u32 + 1);
    if ofs >= width || ofs + n_bits > width || n_bits != 16 {
        return Err(bad(bac::BAD_SET_LEN));
    }
    Ok(CtZoneSrc::Field {
        field,
        ofs: ofs as u8,
        bits: 16,
    })
}

/// One action nested in `ct`: a NAT, or a write of ct_mark/ct_label (set_field, or the
/// register loads OVS sends a masked set_field as). Anything else, a `ct` among them, is
/// BAD_ARGUMENT (`ofpacts_verify_nested`).
fn nested(a: &OfAction, spec: &mut CtSpec) -> Result<(), OfError> {
    let nx = match NxAction::of(a) {
        Some(nx) => nx?,
        None => {
            let OfAction::SetField(o) = a else {
                return Err(bad(bac::BAD_ARGUMENT));
            };
            return set_ct_field(o, spec);
        }
    };
    match nx {
        NxAction::Nat(n) if spec.nat.is_none() => spec.nat = Some(nat(&n)?),
        NxAction::RegLoad {
            ofs_nbits,
            dst,
            value,
        } => {
            let f = [CT_MARK, CT_LABEL]
                .into_iter()
                .find(|f| f.header() == dst)
                .ok_or(bad(bac::BAD_ARGUMENT))?;
            let (ofs, n) = ((ofs_nbits >> 6) as u32, (ofs_nbits & 63) as u32 + 1);
            if ofs + n > f.width as u32 * 8 {
                return Err(bad(bac::BAD_SET_LEN));
            }
            if n < 64 && value >> n != 0 {
                return Err(bad(bac::BAD_ARGUMENT));
            }
            let mask = (u64::MAX >> (64 - n)) as u128;
            merge(spec, f, (value as u128) << ofs, mask << ofs);
        }
        NxAction::RegLoad2(o) => return set_ct_field(&o, spec),
        _ => return Err(bad(bac::BAD_ARGUMENT)),
    }
    Ok(())
}

/// A set_field (or reg_load2) of ct_mark or ct_label inside `ct`.
fn set_ct_field(o: &Oxm, spec: &mut CtSpec) -> Result<(), OfError> {
    let f = match o {
        Oxm::Unknown {
            class: OFPXMC_NXM_1,
            field,
            ..
        } => [CT_MARK, CT_LABEL].into_iter().find(|f| f.number == *field),
        _ => None,
    };
    let (
        Some(f),
        Oxm::Unknown {
            has_mask, payload, ..
        },
    ) = (f, o)
    else {
        return Err(bad(bac::BAD_ARGUMENT));
    };
    if payload.len() != f.width * if *has_mask { 2 } else { 1 } {
        return Err(bad(bac::BAD_SET_LEN));
    }
    let value = be(&payload[..f.width]);
    let mask = if *has_mask {
        be(&payload[f.width..])
    } else {
        f.wire_mask()
    };
    merge(spec, f, value & mask, mask);
    Ok(())
}

/// Write `value` under `mask` into the spec's ct_mark or ct_label write.
fn merge(spec: &mut CtSpec, f: NxmField, value: u128, mask: u128) {
    let put = |old: Option<(u128, u128)>| {
        let (v, m) = old.unwrap_or((0, 0));
        ((v & !mask) | (value & mask), m | mask)
    };
    if f.key == Field::CtMark {
        let (v, m) = put(spec.set_mark.map(|(v, m)| (v as u128, m as u128)));
        spec.set_mark = Some((v as u32, m as u32));
    } else {
        spec.set_label = Some(put(spec.set_label));
    }
}

/// An `nx_action_nat` as a [`NatSpec`], refused as `decode_NXAST_RAW_NAT` refuses it
/// (BAD_ARGUMENT): unknown flags, src with dst, hash with random, an address range of
/// both families, a maximum without its minimum or below it, a zero minimum, ports
/// without an address range.
fn nat(n: &NxNat) -> Result<NatSpec, OfError> {
    use nat_flags::*;
    let f = n.flags;
    let err = || bad(bac::BAD_ARGUMENT);
    if f & !MASK != 0
        || (f & SRC != 0 && f & DST != 0)
        || (f & PROTO_HASH != 0 && f & PROTO_RANDOM != 0)
    {
        return Err(err());
    }
    let v4 = |a: u32| IpAddr::V4(Ipv4Addr::from(a));
    let v6 = |a: u128| IpAddr::V6(Ipv6Addr::from(a));
    let addrs = match (n.ipv4_min, n.ipv4_max, n.ipv6_min, n.ipv6_max) {
        (None, None, None, None) => None,
        (Some(lo), hi, None, None) if lo != 0 && hi.is_none_or(|h| h >= lo) => {
            Some((v4(lo), v4(hi.unwrap_or(lo))))
        }
        (None, None, Some(lo), hi) if lo != 0 && hi.is_none_or(|h| h >= lo) => {
            Some((v6(lo), v6(hi.unwrap_or(lo))))
        }
        _ => return Err(err()),
    };
    let ports = match (n.proto_min, n.proto_max) {
        (None, None) => None,
        (Some(lo), hi) if addrs.is_some() && lo != 0 && hi.is_none_or(|h| h >= lo) => {
            Some((lo, hi.unwrap_or(lo)))
        }
        _ => return Err(err()),
    };
    let kind = match f & (SRC | DST) {
        SRC => Some(NatKind::Src),
        DST => Some(NatKind::Dst),
        _ => None,
    };
    Ok(NatSpec {
        kind,
        addrs,
        ports,
        flags: NatFlags {
            random: f & PROTO_RANDOM != 0,
            hash: f & PROTO_HASH != 0,
            persistent: f & PERSISTENT != 0,
        },
    })
}

/// A `ct` action as OVS's `encode_CT` sends it: the NAT first, then the ct_mark and
/// ct_label writes (`set_field` for a whole field, `reg_load`s otherwise, as
/// `encode_SET_FIELD` does for OpenFlow 1.3). `None` when the zone comes from a field
/// with no NXM header here (the action is left out of the encoding).
pub(super) fn ct_to_of_action(spec: &CtSpec) -> Option<OfAction> {
    let (zone_src, zone) = match spec.zone {
        CtZoneSrc::Value(z) => (0, z),
        CtZoneSrc::Field { field, ofs, bits } => {
            let (h, _, _) = ZONE_FIELDS.iter().find(|z| z.1 == field)?;
            (*h, ((ofs as u16) << 6) | (bits.max(1) - 1) as u16)
        }
    };
    let mut actions = Vec::new();
    if let Some(n) = &spec.nat {
        actions.push(NxAction::Nat(nat_to_nx(n)).to_of_action());
    }
    if let Some((v, m)) = spec.set_mark {
        write_ct_field(&mut actions, CT_MARK, v as u128, m as u128);
    }
    if let Some((v, m)) = spec.set_label {
        write_ct_field(&mut actions, CT_LABEL, v, m);
    }
    let flags = if spec.commit { ct_flags::COMMIT } else { 0 }
        | if spec.force { ct_flags::FORCE } else { 0 };
    let c = NxConntrack {
        flags,
        zone_src,
        zone,
        recirc_table: spec.table.unwrap_or(NX_CT_RECIRC_NONE),
        alg: 0,
        actions,
    };
    Some(NxAction::Ct(c).to_of_action())
}

/// `value` under `mask` into `f`: one set_field for the whole field, else a `reg_load`
/// per run of mask bits (at most 64 bits each), as OVS's `next_load_segment` cuts them.
fn write_ct_field(out: &mut Vec<OfAction>, f: NxmField, value: u128, mask: u128) {
    if mask == f.wire_mask() {
        out.push(OfAction::SetField(f.oxm(value, None)));
        return;
    }
    let bits = f.width as u32 * 8;
    let mut pos = 0u32;
    while pos < bits {
        let rest = mask >> pos;
        if rest == 0 {
            break;
        }
        let ofs = pos + rest.trailing_zeros();
        let n = ((!(mask >> ofs)).trailing_zeros()).min(64).min(bits - ofs);
        let v = ((value >> ofs) as u64) & (u64::MAX >> (64 - n));
        out.push(
            NxAction::RegLoad {
                ofs_nbits: ((ofs as u16) << 6) | (n - 1) as u16,
                dst: f.header(),
                value: v,
            }
            .to_of_action(),
        );
        pos = ofs + n;
    }
}

/// A [`NatSpec`] as `encode_NAT` writes it: an address or port maximum only where it
/// differs from the minimum, ports only with an address range.
fn nat_to_nx(n: &NatSpec) -> NxNat {
    use nat_flags::*;
    let bit = |on: bool, b: u16| if on { b } else { 0 };
    let mut out = NxNat {
        flags: match n.kind {
            Some(NatKind::Src) => SRC,
            Some(NatKind::Dst) => DST,
            None => 0,
        } | bit(n.flags.persistent, PERSISTENT)
            | bit(n.flags.hash, PROTO_HASH)
            | bit(n.flags.random, PROTO_RANDOM),
        ..NxNat::default()
    };
    let Some((lo, hi)) = n.addrs else {
        return out;
    };
    match (lo, hi) {
        (IpAddr::V4(lo), hi) => {
            out.ipv4_min = Some(u32::from(lo));
            if let IpAddr::V4(hi) = hi {
                out.ipv4_max = (hi != lo).then_some(u32::from(hi));
            }
        }
        (IpAddr::V6(lo), hi) => {
            out.ipv6_min = Some(u128::from(lo));
            if let IpAddr::V6(hi) = hi {
                out.ipv6_max = (hi != lo).then_some(u128::from(hi));
            }
        }
    }
    if let Some((plo, phi)) = n.ports {
        out.proto_min = Some(plo);
        out.proto_max = (phi != plo).then_some(phi);
    }
    out
}

/// `ct_clear` as the codec carries it.
pub(super) fn ct_clear_of_action() -> OfAction {
    NxAction::CtClear.to_of_action()
}
