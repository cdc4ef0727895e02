//! Matches: an OXM match as a flowpath [`Match`] ([`oxm_to_match`], one row of
//! [`FIELD_MAP`] a field) and a [`Match`] as OXM fields ([`match_to_oxm`]), with what a
//! match pins for the prerequisites of fields and set_field actions ([`Pinned`]).

use super::error::OfError;
use super::nxm;
use crate::consts::*;
use crate::oxm::{Oxm, OxmField};
use flowpath_packet::ct::state;
use flowpath_packet::key::{ethertype, VLAN_PRESENT};
use flowpath_packet::Field;
use flowpath_pipeline::Match;

pub(super) const ETH_IPV4: u128 = ethertype::IPV4 as u128;
pub(super) const ETH_IPV6: u128 = ethertype::IPV6 as u128;
const ETH_ARP: u128 = ethertype::ARP as u128;

/// The metadata bits flowpath keeps (the key's `Field::Metadata`): a match or a
/// write_metadata needing bits above them is refused (their value is always zero).
pub const METADATA_BITS: u64 = 0x00ff_ffff;

/// The ethertype and IP protocol a match pins to one value, whether it pins the packet
/// as VLAN-tagged, and whether it matches `+inv`: what the prerequisites of fields and the
/// checks of set_field and ct actions look at.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pinned {
    pub(super) eth: Option<u128>,
    pub(super) proto: Option<u128>,
    pub(super) tagged: bool,
    pub(super) ct_inv: bool,
}

impl Pinned {
    /// What a flowpath match pins: the fields it matches exactly, and the VLAN present bit.
    pub(super) fn of_match(m: &Match) -> Pinned {
        let exact = |f: Field| (m.mask.get(f) == f.full_mask()).then(|| m.value.get(f));
        let (tci, tci_m) = (m.value.get(Field::VlanTci), m.mask.get(Field::VlanTci));
        let inv = state::INVALID as u128;
        Pinned {
            eth: exact(Field::EthType),
            proto: exact(Field::NwProto),
            tagged: tci_m & 0x1000 != 0 && tci & 0x1000 != 0,
            ct_inv: m.value.get(Field::CtState) & m.mask.get(Field::CtState) & inv != 0,
        }
    }

    pub(super) fn is_ip(self) -> bool {
        matches!(self.eth, Some(ETH_IPV4 | ETH_IPV6))
    }
}

/// What a match field needs the rest of the match to pin (OF 1.3 §7.2.3.6).
#[derive(Clone, Copy, Debug)]
enum Needs {
    Nothing,
    /// A VLAN tag (vlan_vid with the present bit).
    Tagged,
    /// IPv4 or IPv6.
    Ip,
    /// This ethertype.
    Eth(u128),
    /// IPv4 or IPv6 with this IP protocol.
    IpProto(u128),
    /// This ethertype and this IP protocol.
    EthProto(u128, u128),
}

impl Needs {
    fn met(self, p: Pinned) -> bool {
        match self {
            Needs::Nothing => true,
            Needs::Tagged => p.tagged,
            Needs::Ip => p.is_ip(),
            Needs::Eth(e) => p.eth == Some(e),
            Needs::IpProto(n) => p.is_ip() && p.proto == Some(n),
            Needs::EthProto(e, n) => p.eth == Some(e) && p.proto == Some(n),
        }
    }
}

/// How an OXM field's value lands in its key field.
#[derive(Clone, Copy, Debug)]
enum Put {
    /// The whole key field, exactly.
    Exact,
    /// The OXM's mask (all ones without one), cut to these key bits.
    Masked(u128),
    /// The value shifted left this far, under this fixed key mask.
    Shifted(u32, u128),
}

/// One OXM field the flow key holds: the key field it lands in, how, the value bits it
/// may use (BAD_VALUE beyond them) and what it needs (BAD_PREREQ without it).
#[derive(Clone, Copy, Debug)]
struct FieldRow {
    oxm: OxmField,
    key: Field,
    put: Put,
    value_bits: u128,
    needs: Needs,
}

const fn row(oxm: OxmField, key: Field, put: Put, value_bits: u128, needs: Needs) -> FieldRow {
    FieldRow {
        oxm,
        key,
        put,
        value_bits,
        needs,
    }
}

/// Every OXM field the flow key holds, in OXM field order, and where it lands: ip_dscp and
/// ip_ecn share the key's `nw_tos`, arp_op its `nw_proto` (the opcode's low byte), arp_spa
/// and arp_tpa its IPv4 addresses, the ICMP type and code its transport ports; tunnel_id is
/// the key's 24-bit VNI and metadata keeps [`METADATA_BITS`].
const FIELD_MAP: [FieldRow; 26] = {
    use Field as K;
    use Needs::*;
    use OxmField as O;
    use Put::*;
    const ALL: u128 = u128::MAX;
    const MD: u128 = METADATA_BITS as u128;
    const VNI: u128 = 0xff_ffff;
    [
        row(O::InPort, K::InPort, Exact, ALL, Nothing),
        row(O::Metadata, K::Metadata, Masked(MD), MD, Nothing),
        row(O::EthDst, K::EthDst, Masked(ALL), ALL, Nothing),
        row(O::EthSrc, K::EthSrc, Masked(ALL), ALL, Nothing),
        row(O::EthType, K::EthType, Exact, ALL, Nothing),
        row(O::VlanVid, K::VlanTci, Masked(0x1fff), 0x1fff, Nothing),
        row(O::VlanPcp, K::VlanTci, Shifted(13, 0xe000), 7, Tagged),
        row(O::IpDscp, K::NwTos, Shifted(2, 0xfc), 0x3f, Ip),
        row(O::IpEcn, K::NwTos, Shifted(0, 0x03), 3, Ip),
        row(O::IpProto, K::NwProto, Exact, ALL, Ip),
        row(O::Ipv4Src, K::Ipv4Src, Masked(ALL), ALL, Eth(ETH_IPV4)),
        row(O::Ipv4Dst, K::Ipv4Dst, Masked(ALL), ALL, Eth(ETH_IPV4)),
        row(O::TcpSrc, K::TpSrc, Masked(ALL), ALL, IpProto(6)),
        row(O::TcpDst, K::TpDst, Masked(ALL), ALL, IpProto(6)),
        row(O::UdpSrc, K::TpSrc, Masked(ALL), ALL, IpProto(17)),
        row(O::UdpDst, K::TpDst, Masked(ALL), ALL, IpProto(17)),
        row(O::Icmpv4Type, K::TpSrc, Exact, ALL, EthProto(ETH_IPV4, 1)),
        row(O::Icmpv4Code, K::TpDst, Exact, ALL, EthProto(ETH_IPV4, 1)),
        row(O::ArpOp, K::NwProto, Exact, 0xff, Eth(ETH_ARP)),
        row(O::ArpSpa, K::Ipv4Src, Masked(ALL), ALL, Eth(ETH_ARP)),
        row(O::ArpTpa, K::Ipv4Dst, Masked(ALL), ALL, Eth(ETH_ARP)),
        row(O::Ipv6Src, K::Ipv6Src, Masked(ALL), ALL, Eth(ETH_IPV6)),
        row(O::Ipv6Dst, K::Ipv6Dst, Masked(ALL), ALL, Eth(ETH_IPV6)),
        row(O::Icmpv6Type, K::TpSrc, Exact, ALL, EthProto(ETH_IPV6, 58)),
        row(O::Icmpv6Code, K::TpDst, Exact, ALL, EthProto(ETH_IPV6, 58)),
        row(O::TunnelId, K::TunId, Masked(VNI), VNI, Nothing),
    ]
};

/// Fields of the flow key that have an OXM (what [`oxm_to_match`] accepts).
pub const SUPPORTED_FIELDS: [OxmField; 26] = {
    let mut out = [OxmField::InPort; 26];
    let mut i = 0;
    while i < out.len() {
        out[i] = FIELD_MAP[i].oxm;
        i += 1;
    }
    out
};

fn key_has(f: OxmField) -> bool {
    SUPPORTED_FIELDS.contains(&f)
}

/// An OXM's value and mask, by field number.
type Given = [Option<(u128, Option<u128>)>; 40];

/// An OXM match as a flowpath [`Match`], checked as OF 1.3 §7.2.3 asks: unknown or
/// unsupported fields (OFPBMC_BAD_FIELD), duplicates (DUP_FIELD), masks on fields that take
/// none (BAD_MASK), value bits outside the mask (BAD_WILDCARDS), out-of-range values
/// (BAD_VALUE) and prerequisites (BAD_PREREQ).
pub fn oxm_to_match(oxms: &[Oxm]) -> Result<Match, OfError> {
    let got = given_fields(oxms)?;
    let ct = nxm::ct_given(oxms)?;
    // An exact (unmasked) value of a field, for prerequisites.
    let exact = |f: OxmField| match got[f as usize] {
        Some((v, None)) => Some(v),
        _ => None,
    };
    let pinned = Pinned {
        eth: exact(OxmField::EthType),
        proto: exact(OxmField::IpProto),
        tagged: matches!(got[OxmField::VlanVid as usize], Some((vv, vm))
            if vv & 0x1000 != 0 && vm.unwrap_or(0x1fff) & 0x1000 != 0),
        ct_inv: false,
    };
    let mut m = Match::any();
    for r in &FIELD_MAP {
        if let Some((v, mask)) = got[r.oxm as usize] {
            m = r.add(m, v, mask.unwrap_or(r.oxm.width_mask()), pinned)?;
        }
    }
    ct.add(m)
}

/// The OXMs by field, each checked on its own: an OPENFLOW_BASIC field the key holds,
/// given once, masked only where it takes a mask, and no value bits outside its mask.
fn given_fields(oxms: &[Oxm]) -> Result<Given, OfError> {
    let mut got: Given = [None; 40];
    for o in oxms {
        if nxm::ct_field(o).is_some() {
            continue;
        }
        let Oxm::Basic { field, value, mask } = o else {
            return Err(OfError::bad_match(bmc::BAD_FIELD));
        };
        let slot = &mut got[*field as usize];
        if slot.is_some() {
            return Err(OfError::bad_match(bmc::DUP_FIELD));
        }
        if !key_has(*field) {
            return Err(OfError::bad_match(bmc::BAD_FIELD));
        }
        if let Some(m) = mask {
            // Transport ports take masks, as OVS has it.
            let ports = matches!(
                field,
                OxmField::TcpSrc | OxmField::TcpDst | OxmField::UdpSrc | OxmField::UdpDst
            );
            if !field.maskable() && !ports {
                return Err(OfError::bad_match(bmc::BAD_MASK));
            }
            if value & !m != 0 {
                return Err(OfError::bad_match(bmc::BAD_WILDCARDS));
            }
        }
        *slot = Some((*value, *mask));
    }
    Ok(got)
}

impl FieldRow {
    /// `m` with this field's value `v` under mask `mk` added, once the value is in range,
    /// the prerequisites hold, and (vlan_vid) the VID and its present bit agree.
    fn add(&self, m: Match, v: u128, mk: u128, pinned: Pinned) -> Result<Match, OfError> {
        if v & !self.value_bits != 0 {
            return Err(OfError::bad_match(bmc::BAD_VALUE));
        }
        if !self.needs.met(pinned) {
            return Err(OfError::bad_match(bmc::BAD_PREREQ));
        }
        // A VID without the present bit, matched on the present bit: no packet has it.
        let present = VLAN_PRESENT as u128;
        let untagged_vid = v & present == 0 && v & 0x0fff != 0 && mk & present != 0;
        if self.oxm == OxmField::VlanVid && untagged_vid {
            return Err(OfError::bad_match(bmc::BAD_VALUE));
        }
        Ok(match self.put {
            Put::Exact => m.exact(self.key, v),
            Put::Masked(bits) => m.with(self.key, v, mk & bits),
            Put::Shifted(shift, key_mask) => m.with(self.key, v << shift, key_mask),
        })
    }
}

/// The OXM fields of a flowpath [`Match`], in field order, so that a flow added by OXM dumps
/// with the same fields. A field masked in a way OXM cannot say, the key fields OXM has no
/// field for, and port ranges are left out (see the [`crate::translate`] module doc).
pub fn match_to_oxm(m: &Match) -> Vec<Oxm> {
    let pinned = Pinned::of_match(m);
    let mut out = Vec::new();
    ethernet_oxms(m, pinned, &mut out);
    ip_oxms(m, pinned, &mut out);
    transport_oxms(m, pinned, &mut out);
    pipeline_oxms(m, &mut out);
    out.sort_by_key(|o| o.field());
    nxm::ct_oxms(m, pinned.eth == Some(ETH_IPV6), &mut out);
    out
}

/// Add `f` with value `v` under mask `mk`: nothing for no mask, exact for the `full` one.
fn put(out: &mut Vec<Oxm>, f: OxmField, v: u128, mk: u128, full: u128) {
    if mk == full {
        out.push(Oxm::exact(f, v));
    } else if mk != 0 {
        out.push(Oxm::masked(f, v & mk, mk));
    }
}

/// in_port, the Ethernet addresses and type, vlan_vid and vlan_pcp.
fn ethernet_oxms(m: &Match, pinned: Pinned, out: &mut Vec<Oxm>) {
    use OxmField as O;
    let (val, mask) = (|f: Field| m.value.get(f), |f: Field| m.mask.get(f));
    if mask(Field::InPort) == Field::InPort.full_mask() {
        out.push(Oxm::exact(O::InPort, val(Field::InPort)));
    }
    let mac = 0xffff_ffff_ffff;
    put(out, O::EthDst, val(Field::EthDst), mask(Field::EthDst), mac);
    put(out, O::EthSrc, val(Field::EthSrc), mask(Field::EthSrc), mac);
    if let Some(e) = pinned.eth {
        out.push(Oxm::exact(O::EthType, e));
    }
    let (tci, tci_m) = (val(Field::VlanTci), mask(Field::VlanTci));
    put(out, O::VlanVid, tci & 0x1fff, tci_m & 0x1fff, 0x1fff);
    if tci_m & 0xe000 == 0xe000 && tci & 0x1000 != 0 && tci_m & 0x1000 != 0 {
        out.push(Oxm::exact(O::VlanPcp, tci >> 13));
    }
}

/// ip_dscp and ip_ecn, ip_proto (arp_op for ARP), and the IPv4, ARP or IPv6 addresses.
fn ip_oxms(m: &Match, pinned: Pinned, out: &mut Vec<Oxm>) {
    use OxmField as O;
    let (val, mask) = (|f: Field| m.value.get(f), |f: Field| m.mask.get(f));
    let (tos, tos_m) = (val(Field::NwTos), mask(Field::NwTos));
    if tos_m & 0xfc == 0xfc {
        out.push(Oxm::exact(O::IpDscp, tos >> 2));
    }
    if tos_m & 0x03 == 0x03 {
        out.push(Oxm::exact(O::IpEcn, tos & 3));
    }
    let arp = pinned.eth == Some(ETH_ARP);
    if let Some(p) = pinned.proto {
        out.push(Oxm::exact(if arp { O::ArpOp } else { O::IpProto }, p));
    }
    let low96 = (1u128 << 96) - 1;
    let v6 =
        pinned.eth == Some(ETH_IPV6) || (mask(Field::Ipv6Src) | mask(Field::Ipv6Dst)) & low96 != 0;
    if v6 {
        for (f, k) in [(O::Ipv6Src, Field::Ipv6Src), (O::Ipv6Dst, Field::Ipv6Dst)] {
            put(out, f, val(k), mask(k), f.width_mask());
        }
    } else {
        let (s, d) = if arp {
            (O::ArpSpa, O::ArpTpa)
        } else {
            (O::Ipv4Src, O::Ipv4Dst)
        };
        put(
            out,
            s,
            val(Field::Ipv4Src),
            mask(Field::Ipv4Src),
            0xffff_ffff,
        );
        put(
            out,
            d,
            val(Field::Ipv4Dst),
            mask(Field::Ipv4Dst),
            0xffff_ffff,
        );
    }
}

/// The transport ports as TCP's or UDP's, or the ICMP type and code.
fn transport_oxms(m: &Match, pinned: Pinned, out: &mut Vec<Oxm>) {
    use OxmField as O;
    let icmp4 = pinned.proto == Some(1) && pinned.eth == Some(ETH_IPV4);
    let icmp6 = pinned.proto == Some(58) && pinned.eth == Some(ETH_IPV6);
    let (src, dst) = match pinned.proto {
        _ if icmp4 => (O::Icmpv4Type, O::Icmpv4Code),
        _ if icmp6 => (O::Icmpv6Type, O::Icmpv6Code),
        Some(17) => (O::UdpSrc, O::UdpDst),
        _ => (O::TcpSrc, O::TcpDst),
    };
    for (f, k) in [(src, Field::TpSrc), (dst, Field::TpDst)] {
        let (v, mk) = (m.value.get(k), m.mask.get(k));
        if icmp4 || icmp6 {
            if mk & 0xff == 0xff {
                out.push(Oxm::exact(f, v & 0xff));
            }
        } else {
            put(out, f, v, mk, f.width_mask());
        }
    }
}

/// tunnel_id (the key's 24-bit VNI) and metadata (the bits flowpath keeps).
fn pipeline_oxms(m: &Match, out: &mut Vec<Oxm>) {
    let (tun, tun_m) = (m.value.get(Field::TunId), m.mask.get(Field::TunId));
    put(out, OxmField::TunnelId, tun, tun_m, 0xff_ffff);
    let (md, md_m) = (m.value.get(Field::Metadata), m.mask.get(Field::Metadata));
    put(out, OxmField::Metadata, md, md_m, METADATA_BITS as u128);
}
