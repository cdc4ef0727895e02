//! The Nicira connection-tracking match fields as OVS puts them in an OF 1.3 OXM match:
//! class NXM_1 (0x0001) entries with the `NXM_NX_CT_*` numbers, widths and maskability of
//! OVS's `include/openvswitch/meta-flow.h` ([`CT_FIELDS`]), their key fields, and the
//! "CT" prerequisite of the original-direction tuple fields (`is_ct_valid` in OVS's
//! `lib/flow.h`).

use super::error::OfError;
use crate::consts::*;
use crate::oxm::Oxm;
use flowpath_packet::ct::state;
use flowpath_packet::Field;
use flowpath_pipeline::Match;

/// One `NXM_NX_CT_*` field.
#[derive(Clone, Copy, Debug)]
pub struct NxmField {
    /// The NXM field number (`NXM_NX_CT_STATE(105)` ...).
    pub number: u8,
    /// OVS's name for it in the flow syntax.
    pub name: &'static str,
    pub key: Field,
    /// Bytes of its value on the wire.
    pub width: usize,
    /// `Maskable: bitwise` (else only an all-ones or all-zeros mask is accepted).
    pub maskable: bool,
    /// `Prerequisites: CT`: the match must establish a valid connection state.
    pub needs_ct: bool,
}

const fn nxm(
    number: u8,
    name: &'static str,
    key: Field,
    width: usize,
    maskable: bool,
    needs_ct: bool,
) -> NxmField {
    NxmField {
        number,
        name,
        key,
        width,
        maskable,
        needs_ct,
    }
}

/// The ct fields, in the order OVS's `nx_put_raw` puts them in a match.
pub const CT_FIELDS: [NxmField; 11] = [
    nxm(105, "ct_state", Field::CtState, 4, true, false),
    nxm(106, "ct_zone", Field::CtZone, 2, false, false),
    nxm(107, "ct_mark", Field::CtMark, 4, true, false),
    nxm(108, "ct_label", Field::CtLabel, 16, true, false),
    nxm(120, "ct_nw_src", Field::CtNwSrc, 4, true, true),
    nxm(122, "ct_ipv6_src", Field::CtIpv6Src, 16, true, true),
    nxm(121, "ct_nw_dst", Field::CtNwDst, 4, true, true),
    nxm(123, "ct_ipv6_dst", Field::CtIpv6Dst, 16, true, true),
    nxm(119, "ct_nw_proto", Field::CtNwProto, 1, false, true),
    nxm(124, "ct_tp_src", Field::CtTpSrc, 2, true, true),
    nxm(125, "ct_tp_dst", Field::CtTpDst, 2, true, true),
];

/// `ct_mark` and `ct_label`: what a `ct(commit, exec(...))` may set.
pub(super) const CT_MARK: NxmField = CT_FIELDS[2];
pub(super) const CT_LABEL: NxmField = CT_FIELDS[3];

impl NxmField {
    /// The 32-bit NXM header without a mask (`class << 16 | number << 9 | width`).
    pub const fn header(self) -> u32 {
        ((OFPXMC_NXM_1 as u32) << 16) | ((self.number as u32) << 9) | self.width as u32
    }

    /// All bits of the wire value.
    pub const fn wire_mask(self) -> u128 {
        if self.width >= 16 {
            u128::MAX
        } else {
            (1u128 << (self.width * 8)) - 1
        }
    }

    /// The entry for `value` under `mask` (`None` for exact), as OVS writes it.
    pub fn oxm(self, value: u128, mask: Option<u128>) -> Oxm {
        let bytes = |v: u128| v.to_be_bytes()[16 - self.width..].to_vec();
        let mut payload = bytes(value);
        if let Some(m) = mask {
            payload.extend(bytes(m));
        }
        Oxm::Unknown {
            class: OFPXMC_NXM_1,
            field: self.number,
            has_mask: mask.is_some(),
            payload,
        }
    }

    /// The row of an NXM_1 entry with this field number.
    pub fn by_number(n: u8) -> Option<NxmField> {
        CT_FIELDS.iter().copied().find(|f| f.number == n)
    }
}

/// The ct field an OXM is, if it is one.
pub(super) fn ct_field(o: &Oxm) -> Option<NxmField> {
    match o {
        Oxm::Unknown {
            class: OFPXMC_NXM_1,
            field,
            ..
        } => NxmField::by_number(*field),
        _ => None,
    }
}

/// The ct entries of a match, by [`CT_FIELDS`] index: value and mask.
pub(super) struct CtGiven([Option<(u128, u128)>; 11]);

/// The ct entries of `oxms`, each checked as OVS's `nx_pull_match_entry` checks one:
/// its length (BAD_LEN), a mask on a field that takes none (BAD_MASK), value bits outside
/// the mask (BAD_WILDCARDS), ct_state bits OVS does not define (BAD_VALUE), a field given
/// twice, or ct_nw_src with ct_ipv6_src (one key field: DUP_FIELD).
pub(super) fn ct_given(oxms: &[Oxm]) -> Result<CtGiven, OfError> {
    let bad = |code| Err(OfError::new(et::BAD_MATCH, code));
    let mut got = [None; 11];
    for o in oxms {
        let (
            Some(f),
            Oxm::Unknown {
                has_mask, payload, ..
            },
        ) = (ct_field(o), o)
        else {
            continue;
        };
        if payload.len() != f.width * if *has_mask { 2 } else { 1 } {
            return bad(bmc::BAD_LEN);
        }
        let value = crate::oxm::be(&payload[..f.width]);
        let mask = if *has_mask {
            crate::oxm::be(&payload[f.width..])
        } else {
            f.wire_mask()
        };
        if !f.maskable && mask != 0 && mask != f.wire_mask() {
            return bad(bmc::BAD_MASK);
        }
        if value & !mask != 0 {
            return bad(bmc::BAD_WILDCARDS);
        }
        if f.key == Field::CtState && value & !0xff != 0 {
            return bad(bmc::BAD_VALUE);
        }
        let i = CT_FIELDS
            .iter()
            .position(|c| c.number == f.number)
            .unwrap_or(0);
        if got[i].is_some() {
            return bad(bmc::DUP_FIELD);
        }
        got[i] = Some((value, mask));
    }
    // ct_nw_src/ct_ipv6_src and ct_nw_dst/ct_ipv6_dst share key bytes.
    if (got[4].is_some() && got[5].is_some()) || (got[6].is_some() && got[7].is_some()) {
        return bad(bmc::DUP_FIELD);
    }
    Ok(CtGiven(got))
}

impl CtGiven {
    /// Does the match establish a valid connection (OVS's `is_ct_valid` with a mask):
    /// one of new, est, rel, rpl, snat, dnat matched as 1, or +trk-inv?
    fn ct_valid(&self) -> bool {
        let (v, m) = self.0[0].unwrap_or((0, 0));
        let valid = (state::NEW
            | state::ESTABLISHED
            | state::RELATED
            | state::REPLY_DIR
            | state::SRC_NAT
            | state::DST_NAT) as u128;
        let (trk, inv) = (state::TRACKED as u128, state::INVALID as u128);
        v & valid != 0 || (v & trk != 0 && m & inv != 0 && v & inv == 0)
    }

    /// `m` with the ct fields added; a tuple field without a valid connection state is
    /// BAD_PREREQ.
    pub(super) fn add(&self, mut m: Match) -> Result<Match, OfError> {
        for (f, given) in CT_FIELDS.iter().zip(self.0) {
            let Some((v, mk)) = given else { continue };
            if f.needs_ct && !self.ct_valid() {
                return Err(OfError::new(et::BAD_MATCH, bmc::BAD_PREREQ));
            }
            m = m.with(f.key, v, mk);
        }
        Ok(m)
    }
}

/// The ct fields of `m` as OVS puts them, in its order: exact where the key's whole field
/// is matched, masked otherwise. The original-direction addresses are IPv6's where the
/// match is IPv6 (`ipv6`) or the mask reaches past the first 4 bytes, IPv4's otherwise.
pub(super) fn ct_oxms(m: &Match, ipv6: bool, out: &mut Vec<Oxm>) {
    let low96 = (1u128 << 96) - 1;
    let v6 = ipv6 || (m.mask.get(Field::CtIpv6Src) | m.mask.get(Field::CtIpv6Dst)) & low96 != 0;
    for f in CT_FIELDS {
        let skip = match f.key {
            Field::CtNwSrc | Field::CtNwDst => v6,
            Field::CtIpv6Src | Field::CtIpv6Dst => !v6,
            _ => false,
        };
        let (v, mk) = (m.value.get(f.key), m.mask.get(f.key));
        if skip || mk == 0 {
            continue;
        }
        let full = f.key.full_mask();
        out.push(f.oxm(v & mk, (mk != full).then_some(mk)));
    }
}
