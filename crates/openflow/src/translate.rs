//! Translation between OpenFlow 1.3 and flowpath's rule types, with the specification's
//! error codes for everything flowpath cannot express ([`OfError`]).
//!
//! **Match fields.** Every OXM field the flow key holds maps to a `flowpath_pipeline::Match`:
//! in_port, eth_dst/eth_src (masked), eth_type, vlan_vid (OFPVID_PRESENT, OFPVID_NONE and
//! the present-only 0x1000/0x1000; the key's TCI keeps bit 0x1000 as "present"), vlan_pcp,
//! ip_dscp and ip_ecn (the key's `nw_tos`), ip_proto, ipv4_src/dst (masked), tcp and udp
//! ports (masks accepted, as OVS does), icmpv4/icmpv6 type and code (the key's transport
//! ports), arp_op (the key keeps the opcode's low byte: an opcode above 255 is BAD_VALUE),
//! arp_spa/arp_tpa (the key's IPv4 addresses, masked), ipv6_src/dst (masked), tunnel_id
//! (masked; the key's 24-bit VNI: a value above 24 bits is BAD_VALUE) and metadata
//! (masked; the key keeps 24 bits, [`METADATA_BITS`]: the rest are always zero, so a value
//! needing one of them is BAD_VALUE and a write_metadata setting one is UNSUP_METADATA).
//!
//! Fields the key lacks are OFPBMC_BAD_FIELD: in_phy_port, sctp_src/sctp_dst
//! (the parser does not read SCTP, so the key's ports are zero for it), arp_sha/arp_tha,
//! ipv6_flabel, ipv6_nd_target/sll/tll, mpls_label/tc/bos, pbb_isid, ipv6_exthdr, and every
//! non-OPENFLOW_BASIC class. Key fields with no OF 1.3 OXM (nw_ttl, nw_frag, tcp_flags,
//! the inner VLAN, tunnel flags and endpoints) and port ranges (flow syntax `tp_dst=LO-HI`
//! that are not one prefix) are left out of [`match_to_oxm`]: such a rule dumps with a
//! wider match than it has.

use crate::actions::{Instruction, OfAction};
use crate::codec::{Bucket as OfBucket, FlowMod, FlowRemoved, GroupMod};
use crate::consts::*;
use crate::multipart::{FlowStats, GroupDesc, TableFeatureProp, TableFeatures};
use crate::oxm::{Oxm, OxmField};
use crate::wire::DecodeError;
use flowpath_packet::key::{ethertype, VLAN_PRESENT};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{
    Bucket, FlowFlags, GroupSpec, GroupType, Match, RuleError, RuleSpec, Selector, MAX_TABLES,
};
use std::fmt;

/// An OpenFlow error (type, code) to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OfError {
    pub type_: u16,
    pub code: u16,
}

impl OfError {
    pub const fn new(type_: u16, code: u16) -> OfError {
        OfError { type_, code }
    }
    const fn bad_match(code: u16) -> OfError {
        OfError::new(et::BAD_MATCH, code)
    }
    const fn bad_action(code: u16) -> OfError {
        OfError::new(et::BAD_ACTION, code)
    }
    const fn bad_inst(code: u16) -> OfError {
        OfError::new(et::BAD_INSTRUCTION, code)
    }
    /// As the (type, code) pair [`crate::Message::error`] takes.
    pub fn pair(self) -> (u16, u16) {
        (self.type_, self.code)
    }
}

impl From<DecodeError> for OfError {
    fn from(e: DecodeError) -> OfError {
        let (type_, code) = e.to_of_error();
        OfError { type_, code }
    }
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenFlow error type {} code {}", self.type_, self.code)
    }
}

impl std::error::Error for OfError {}

const ETH_IPV4: u128 = ethertype::IPV4 as u128;
const ETH_IPV6: u128 = ethertype::IPV6 as u128;
const ETH_ARP: u128 = ethertype::ARP as u128;

/// Fields of the flow key that have an OXM (what [`oxm_to_match`] accepts).
pub const SUPPORTED_FIELDS: [OxmField; 26] = {
    use OxmField::*;
    [
        InPort, Metadata, EthDst, EthSrc, EthType, VlanVid, VlanPcp, IpDscp, IpEcn, IpProto,
        Ipv4Src, Ipv4Dst, TcpSrc, TcpDst, UdpSrc, UdpDst, Icmpv4Type, Icmpv4Code, ArpOp, ArpSpa,
        ArpTpa, Ipv6Src, Ipv6Dst, Icmpv6Type, Icmpv6Code, TunnelId,
    ]
};

/// The metadata bits flowpath keeps (the key's `Field::Metadata`): a match or a
/// write_metadata needing bits above them is refused (their value is always zero).
pub const METADATA_BITS: u64 = 0x00ff_ffff;

/// Fields a set_field action may write (what [`of_actions_to_actions`] accepts).
pub const SETTABLE_FIELDS: [OxmField; 14] = {
    use OxmField::*;
    [
        EthDst, EthSrc, VlanVid, VlanPcp, IpDscp, Ipv4Src, Ipv4Dst, TcpSrc, TcpDst, UdpSrc, UdpDst,
        Ipv6Src, Ipv6Dst, TunnelId,
    ]
};

fn key_has(f: OxmField) -> bool {
    SUPPORTED_FIELDS.contains(&f)
}

/// An OXM match as a flowpath [`Match`], checked as OF 1.3 §7.2.3 asks: unknown or
/// unsupported fields (OFPBMC_BAD_FIELD), duplicates (DUP_FIELD), masks on fields that take
/// none (BAD_MASK), value bits outside the mask (BAD_WILDCARDS), out-of-range values
/// (BAD_VALUE) and prerequisites (BAD_PREREQ).
pub fn oxm_to_match(oxms: &[Oxm]) -> Result<Match, OfError> {
    let mut got: [Option<(u128, Option<u128>)>; 40] = [None; 40];
    for o in oxms {
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
    let get = |f: OxmField| got[f as usize];
    // An exact (unmasked) value of a field, for prerequisites.
    let exact = |f: OxmField| match get(f) {
        Some((v, None)) => Some(v),
        _ => None,
    };
    let eth = exact(OxmField::EthType);
    let proto = exact(OxmField::IpProto);
    let is_ip = matches!(eth, Some(ETH_IPV4 | ETH_IPV6));
    let mut m = Match::any();
    for f in OxmField::ALL {
        let Some((v, mask)) = get(f) else { continue };
        let full = f.width_mask();
        let mk = mask.unwrap_or(full);
        let value_bits = |bits: u128| {
            if v & !bits != 0 {
                Err(OfError::bad_match(bmc::BAD_VALUE))
            } else {
                Ok(())
            }
        };
        let prereq = |ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(OfError::bad_match(bmc::BAD_PREREQ))
            }
        };
        use OxmField::*;
        match f {
            InPort => m = m.exact(Field::InPort, v),
            EthDst => m = m.with(Field::EthDst, v, mk),
            EthSrc => m = m.with(Field::EthSrc, v, mk),
            EthType => m = m.exact(Field::EthType, v),
            VlanVid => {
                value_bits(0x1fff)?;
                let present = VLAN_PRESENT as u128;
                // A VID without the present bit, matched on the present bit: no packet has it.
                if v & present == 0 && v & 0x0fff != 0 && mk & present != 0 {
                    return Err(OfError::bad_match(bmc::BAD_VALUE));
                }
                m = m.with(Field::VlanTci, v, mk & 0x1fff);
            }
            VlanPcp => {
                value_bits(7)?;
                let tagged = matches!(get(VlanVid), Some((vv, vm))
                    if vv & 0x1000 != 0 && vm.unwrap_or(0x1fff) & 0x1000 != 0);
                prereq(tagged)?;
                m = m.with(Field::VlanTci, v << 13, 0xe000);
            }
            IpDscp => {
                value_bits(0x3f)?;
                prereq(is_ip)?;
                m = m.with(Field::NwTos, v << 2, 0xfc);
            }
            IpEcn => {
                value_bits(3)?;
                prereq(is_ip)?;
                m = m.with(Field::NwTos, v, 0x03);
            }
            IpProto => {
                prereq(is_ip)?;
                m = m.exact(Field::NwProto, v);
            }
            Ipv4Src | Ipv4Dst => {
                prereq(eth == Some(ETH_IPV4))?;
                let k = if f == Ipv4Src {
                    Field::Ipv4Src
                } else {
                    Field::Ipv4Dst
                };
                m = m.with(k, v, mk);
            }
            TcpSrc | TcpDst | UdpSrc | UdpDst => {
                let want = if matches!(f, TcpSrc | TcpDst) { 6 } else { 17 };
                prereq(is_ip && proto == Some(want))?;
                let k = if matches!(f, TcpSrc | UdpSrc) {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                m = m.with(k, v, mk);
            }
            Icmpv4Type | Icmpv4Code => {
                prereq(eth == Some(ETH_IPV4) && proto == Some(1))?;
                let k = if f == Icmpv4Type {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                m = m.exact(k, v);
            }
            Icmpv6Type | Icmpv6Code => {
                prereq(eth == Some(ETH_IPV6) && proto == Some(58))?;
                let k = if f == Icmpv6Type {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                m = m.exact(k, v);
            }
            ArpOp => {
                value_bits(0xff)?;
                prereq(eth == Some(ETH_ARP))?;
                m = m.exact(Field::NwProto, v);
            }
            ArpSpa | ArpTpa => {
                prereq(eth == Some(ETH_ARP))?;
                let k = if f == ArpSpa {
                    Field::Ipv4Src
                } else {
                    Field::Ipv4Dst
                };
                m = m.with(k, v, mk);
            }
            Ipv6Src | Ipv6Dst => {
                prereq(eth == Some(ETH_IPV6))?;
                let k = if f == Ipv6Src {
                    Field::Ipv6Src
                } else {
                    Field::Ipv6Dst
                };
                m = m.with(k, v, mk);
            }
            TunnelId => {
                // The key holds a 24-bit VNI: bits above it are always zero.
                if v & !0xff_ffff != 0 {
                    return Err(OfError::bad_match(bmc::BAD_VALUE));
                }
                m = m.with(Field::TunId, v, mk & 0xff_ffff);
            }
            Metadata => {
                // 24 bits kept: the bits above are always zero, so a match needing one of
                // them set could never match.
                if v & !(METADATA_BITS as u128) != 0 {
                    return Err(OfError::bad_match(bmc::BAD_VALUE));
                }
                m = m.with(Field::Metadata, v, mk & METADATA_BITS as u128);
            }
            _ => return Err(OfError::bad_match(bmc::BAD_FIELD)),
        }
    }
    Ok(m)
}

/// The OXM fields of a flowpath [`Match`], in field order, so that a flow added by OXM dumps
/// with the same fields. A field masked in a way OXM cannot say, the key fields OXM has no
/// field for, and port ranges are left out (see the module doc).
pub fn match_to_oxm(m: &Match) -> Vec<Oxm> {
    let mut out = Vec::new();
    let mask = |f: Field| m.mask.get(f);
    let val = |f: Field| m.value.get(f);
    let mut push = |f: OxmField, v: u128, mk: u128, full: u128| {
        if mk == 0 {
            return;
        }
        if mk == full {
            out.push(Oxm::exact(f, v));
        } else {
            out.push(Oxm::masked(f, v & mk, mk));
        }
    };
    let exact = |f: Field| (mask(f) == f.full_mask()).then(|| val(f));
    let eth = exact(Field::EthType);
    let proto = exact(Field::NwProto);
    use OxmField as O;
    if mask(Field::InPort) == Field::InPort.full_mask() {
        push(O::InPort, val(Field::InPort), 1, 1);
    }
    push(
        O::EthDst,
        val(Field::EthDst),
        mask(Field::EthDst),
        0xffff_ffff_ffff,
    );
    push(
        O::EthSrc,
        val(Field::EthSrc),
        mask(Field::EthSrc),
        0xffff_ffff_ffff,
    );
    if let Some(e) = eth {
        push(O::EthType, e, 1, 1);
    }
    let (tci, tci_m) = (val(Field::VlanTci), mask(Field::VlanTci));
    push(O::VlanVid, tci & 0x1fff, tci_m & 0x1fff, 0x1fff);
    if tci_m & 0xe000 == 0xe000 && tci & 0x1000 != 0 && tci_m & 0x1000 != 0 {
        push(O::VlanPcp, tci >> 13, 1, 1);
    }
    let (tos, tos_m) = (val(Field::NwTos), mask(Field::NwTos));
    if tos_m & 0xfc == 0xfc {
        push(O::IpDscp, tos >> 2, 1, 1);
    }
    if tos_m & 0x03 == 0x03 {
        push(O::IpEcn, tos & 3, 1, 1);
    }
    let arp = eth == Some(ETH_ARP);
    let ipv6 = eth == Some(ETH_IPV6);
    if let Some(p) = proto {
        if !arp {
            push(O::IpProto, p, 1, 1);
        }
    }
    let low96 = (1u128 << 96) - 1;
    let v6 = ipv6 || (mask(Field::Ipv6Src) | mask(Field::Ipv6Dst)) & low96 != 0;
    if !v6 {
        let (s, d) = if arp {
            (O::ArpSpa, O::ArpTpa)
        } else {
            (O::Ipv4Src, O::Ipv4Dst)
        };
        push(s, val(Field::Ipv4Src), mask(Field::Ipv4Src), 0xffff_ffff);
        push(d, val(Field::Ipv4Dst), mask(Field::Ipv4Dst), 0xffff_ffff);
    }
    if arp {
        if let Some(p) = proto {
            out.push(Oxm::exact(O::ArpOp, p));
        }
    }
    let icmp4 = proto == Some(1) && eth == Some(ETH_IPV4);
    let icmp6 = proto == Some(58) && ipv6;
    let (src, dst) = match proto {
        _ if icmp4 => (O::Icmpv4Type, O::Icmpv4Code),
        _ if icmp6 => (O::Icmpv6Type, O::Icmpv6Code),
        Some(17) => (O::UdpSrc, O::UdpDst),
        _ => (O::TcpSrc, O::TcpDst),
    };
    for (f, k) in [(src, Field::TpSrc), (dst, Field::TpDst)] {
        let (v, mk) = (val(k), mask(k));
        if icmp4 || icmp6 {
            if mk & 0xff == 0xff {
                out.push(Oxm::exact(f, v & 0xff));
            }
        } else {
            out.push_masked_opt(f, v, mk);
        }
    }
    if v6 {
        out.push_masked_opt(O::Ipv6Src, val(Field::Ipv6Src), mask(Field::Ipv6Src));
        out.push_masked_opt(O::Ipv6Dst, val(Field::Ipv6Dst), mask(Field::Ipv6Dst));
    }
    let (tun, tun_m) = (val(Field::TunId), mask(Field::TunId));
    if tun_m == 0xff_ffff {
        out.push(Oxm::exact(O::TunnelId, tun));
    } else if tun_m != 0 {
        out.push(Oxm::masked(O::TunnelId, tun & tun_m, tun_m));
    }
    let (md, md_m) = (val(Field::Metadata), mask(Field::Metadata));
    if md_m == METADATA_BITS as u128 {
        out.push(Oxm::exact(O::Metadata, md));
    } else if md_m != 0 {
        out.push(Oxm::masked(O::Metadata, md & md_m, md_m));
    }
    out.sort_by_key(|o| o.field());
    out
}

trait PushMasked {
    fn push_masked_opt(&mut self, f: OxmField, v: u128, m: u128);
}

impl PushMasked for Vec<Oxm> {
    fn push_masked_opt(&mut self, f: OxmField, v: u128, m: u128) {
        if m == f.width_mask() {
            self.push(Oxm::exact(f, v));
        } else if m != 0 {
            self.push(Oxm::masked(f, v & m, m));
        }
    }
}

/// Where an action list comes from: a rule's instructions, or a packet_out (which may
/// output to OFPP_TABLE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionContext {
    /// An apply-actions or write-actions instruction, or a group bucket.
    Rule,
    /// A packet_out's action list.
    PacketOut,
}

/// OpenFlow actions as flowpath actions, checked against the rule's match (set_field of
/// a field whose prerequisites the match does not establish, or of the VLAN on a packet
/// not known to be tagged, is OFPBAC_MATCH_INCONSISTENT, as OVS has it).
pub fn of_actions_to_actions(
    acts: &[OfAction],
    m: &Match,
    ctx: ActionContext,
) -> Result<Vec<Action>, OfError> {
    let exact = |f: Field| (m.mask.get(f) == f.full_mask()).then(|| m.value.get(f));
    let eth = exact(Field::EthType);
    let proto = exact(Field::NwProto);
    let is_ip = matches!(eth, Some(ETH_IPV4 | ETH_IPV6));
    let (tci, tci_m) = (m.value.get(Field::VlanTci), m.mask.get(Field::VlanTci));
    let mut tagged = tci_m & 0x1000 != 0 && tci & 0x1000 != 0;
    let inconsistent = OfError::bad_action(bac::MATCH_INCONSISTENT);
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        let x = match a {
            OfAction::Output { port, max_len } => match *port {
                OFPP_IN_PORT => Action::InPort,
                OFPP_CONTROLLER => Action::controller(*max_len),
                OFPP_NORMAL => Action::Normal,
                OFPP_FLOOD => Action::Flood,
                OFPP_ALL => Action::All,
                OFPP_TABLE if ctx == ActionContext::PacketOut => Action::Table,
                p if p == 0 || p > OFPP_MAX => return Err(OfError::bad_action(bac::BAD_OUT_PORT)),
                p => Action::Output(p),
            },
            OfAction::PushVlan(tpid) => {
                if *tpid != ethertype::VLAN && *tpid != ethertype::QINQ {
                    return Err(OfError::bad_action(bac::BAD_ARGUMENT));
                }
                tagged = true;
                Action::PushVlan { tpid: *tpid }
            }
            OfAction::PopVlan => {
                if !tagged {
                    return Err(inconsistent);
                }
                // What is under the popped tag is not known from the match.
                tagged = false;
                Action::PopVlan
            }
            OfAction::DecNwTtl => Action::DecTtl,
            OfAction::Group(g) => {
                if *g > OFPG_MAX {
                    return Err(OfError::bad_action(bac::BAD_OUT_GROUP));
                }
                Action::Group(*g)
            }
            OfAction::SetField(o) => {
                let Oxm::Basic { field, value, .. } = o else {
                    return Err(OfError::bad_action(bac::BAD_SET_TYPE));
                };
                let v = *value;
                let arg = |ok: bool| {
                    if ok {
                        Ok(())
                    } else {
                        Err(OfError::bad_action(bac::BAD_SET_ARGUMENT))
                    }
                };
                let pre = |ok: bool| if ok { Ok(()) } else { Err(inconsistent) };
                let mac = |v: u128| {
                    let b = v.to_be_bytes();
                    [b[10], b[11], b[12], b[13], b[14], b[15]]
                };
                let ip4 = |v: u128| (v as u32).to_be_bytes();
                use OxmField as O;
                match field {
                    O::EthSrc => Action::SetEthSrc(mac(v)),
                    O::EthDst => Action::SetEthDst(mac(v)),
                    O::VlanVid => {
                        arg(v & !0x1fff == 0)?;
                        pre(tagged)?;
                        Action::SetVlanVid((v & 0x0fff) as u16)
                    }
                    O::VlanPcp => {
                        arg(v <= 7)?;
                        pre(tagged)?;
                        Action::SetVlanPcp(v as u8)
                    }
                    O::IpDscp => {
                        arg(v <= 0x3f)?;
                        pre(is_ip)?;
                        Action::SetNwTos((v as u8) << 2)
                    }
                    O::Ipv4Src | O::Ipv4Dst => {
                        pre(eth == Some(ETH_IPV4))?;
                        if *field == O::Ipv4Src {
                            Action::SetIpv4Src(ip4(v))
                        } else {
                            Action::SetIpv4Dst(ip4(v))
                        }
                    }
                    O::Ipv6Src | O::Ipv6Dst => {
                        pre(eth == Some(ETH_IPV6))?;
                        if *field == O::Ipv6Src {
                            Action::SetIpv6Src(v.to_be_bytes())
                        } else {
                            Action::SetIpv6Dst(v.to_be_bytes())
                        }
                    }
                    O::TcpSrc | O::TcpDst | O::UdpSrc | O::UdpDst => {
                        let want = if matches!(field, O::TcpSrc | O::TcpDst) {
                            6
                        } else {
                            17
                        };
                        pre(is_ip && proto == Some(want))?;
                        if matches!(field, O::TcpSrc | O::UdpSrc) {
                            Action::SetTpSrc(v as u16)
                        } else {
                            Action::SetTpDst(v as u16)
                        }
                    }
                    O::TunnelId => {
                        arg(v <= 0xff_ffff)?;
                        Action::SetTunnel(v as u32)
                    }
                    _ => return Err(OfError::bad_action(bac::BAD_SET_TYPE)),
                }
            }
            OfAction::Experimenter { .. } => {
                return Err(OfError::bad_action(bac::BAD_EXPERIMENTER))
            }
            // MPLS, PBB, queues and TTL copies/sets: the datapath has none of them.
            OfAction::CopyTtlOut
            | OfAction::CopyTtlIn
            | OfAction::SetMplsTtl(_)
            | OfAction::DecMplsTtl
            | OfAction::PushMpls(_)
            | OfAction::PopMpls(_)
            | OfAction::SetQueue(_)
            | OfAction::SetNwTtl(_)
            | OfAction::PushPbb(_)
            | OfAction::PopPbb => return Err(OfError::bad_action(bac::BAD_TYPE)),
        };
        out.push(x);
    }
    Ok(out)
}

/// flowpath actions as OpenFlow actions (flow stats, group desc); `m` decides whether a
/// port rewrite is TCP's or UDP's.
pub fn actions_to_of_actions(acts: &[Action], m: &Match) -> Vec<OfAction> {
    let udp = m.mask.get(Field::NwProto) == 0xff && m.value.get(Field::NwProto) == 17;
    let set = |f: OxmField, v: u128| OfAction::SetField(Oxm::exact(f, v));
    // A tunnel destination has no standard OXM (OVS uses the Nicira NXM_NX_TUN_IPV4_DST
    // extension, which this channel does not speak): it is left out, as metadata writes are.
    acts.iter()
        .filter(|a| !matches!(a, Action::WriteMetadata { .. } | Action::SetTunnelDst(_)))
        .map(|a| match *a {
            Action::Output(p) => OfAction::output(p),
            Action::InPort => OfAction::output(OFPP_IN_PORT),
            Action::Controller { max_len, .. } => OfAction::Output {
                port: OFPP_CONTROLLER,
                max_len,
            },
            Action::Normal => OfAction::output(OFPP_NORMAL),
            Action::Flood => OfAction::output(OFPP_FLOOD),
            Action::All => OfAction::output(OFPP_ALL),
            Action::Table => OfAction::output(OFPP_TABLE),
            Action::SetEthSrc(b) => set(OxmField::EthSrc, crate::oxm::be(&b)),
            Action::SetEthDst(b) => set(OxmField::EthDst, crate::oxm::be(&b)),
            Action::SetIpv4Src(b) => set(OxmField::Ipv4Src, crate::oxm::be(&b)),
            Action::SetIpv4Dst(b) => set(OxmField::Ipv4Dst, crate::oxm::be(&b)),
            Action::SetIpv6Src(b) => set(OxmField::Ipv6Src, u128::from_be_bytes(b)),
            Action::SetIpv6Dst(b) => set(OxmField::Ipv6Dst, u128::from_be_bytes(b)),
            Action::SetNwTos(t) => set(OxmField::IpDscp, (t >> 2) as u128),
            Action::SetTpSrc(p) => set(
                if udp {
                    OxmField::UdpSrc
                } else {
                    OxmField::TcpSrc
                },
                p as u128,
            ),
            Action::SetTpDst(p) => set(
                if udp {
                    OxmField::UdpDst
                } else {
                    OxmField::TcpDst
                },
                p as u128,
            ),
            Action::PushVlan { tpid } => OfAction::PushVlan(tpid),
            Action::PopVlan => OfAction::PopVlan,
            Action::SetVlanVid(v) => set(OxmField::VlanVid, (v | OFPVID_PRESENT) as u128),
            Action::SetVlanPcp(p) => set(OxmField::VlanPcp, p as u128),
            Action::DecTtl => OfAction::DecNwTtl,
            Action::SetTunnel(id) => set(OxmField::TunnelId, id as u128),
            Action::Group(g) => OfAction::Group(g),
            Action::WriteMetadata { .. } | Action::SetTunnelDst(_) => {
                unreachable!("filtered out above")
            }
        })
        .collect()
}

/// The instruction parts of a rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleInstructions {
    pub actions: Vec<Action>,
    pub goto: Option<u8>,
    pub write_actions: Vec<Action>,
    pub clear_actions: bool,
}

/// A flow_mod's instructions for a rule in `table` with match `m`: apply_actions,
/// write_actions, clear_actions and goto_table (which must name a later table:
/// OFPBIC_BAD_TABLE_ID). write_metadata becomes the rule's last apply-action
/// (`Action::WriteMetadata`, 24 bits: a higher bit is OFPBIC_UNSUP_METADATA); meter is
/// OFPBIC_UNSUP_INST (flowpath has no meters), experimenter instructions OFPBIC_BAD_EXPERIMENTER,
/// and an instruction type given twice OFPBIC_UNSUP_INST (OF 1.3 has no DUP_INST code).
pub fn instructions_to_rule(
    table: u8,
    instrs: &[Instruction],
    m: &Match,
) -> Result<RuleInstructions, OfError> {
    let mut out = RuleInstructions::default();
    let mut seen = 0u32;
    // write_metadata runs after the apply-actions: the rule holds it as the last one.
    let mut metadata_write = None;
    for i in instrs {
        let bit = 1u32 << (i.type_() & 31);
        if seen & bit != 0 {
            return Err(OfError::bad_inst(bic::UNSUP_INST));
        }
        seen |= bit;
        match i {
            Instruction::GotoTable(t) => {
                if *t <= table || *t as usize >= MAX_TABLES {
                    return Err(OfError::bad_inst(bic::BAD_TABLE_ID));
                }
                out.goto = Some(*t);
            }
            Instruction::ApplyActions(a) => {
                out.actions = of_actions_to_actions(a, m, ActionContext::Rule)?;
            }
            Instruction::WriteActions(a) => {
                // The action set runs at the end: a VLAN set may follow a push written
                // in the same set.
                let mut probe = *m;
                if a.iter().any(|x| matches!(x, OfAction::PushVlan(_))) {
                    probe = probe.with(Field::VlanTci, 0x1000, 0x1000);
                }
                out.write_actions = of_actions_to_actions(a, &probe, ActionContext::Rule)?;
            }
            Instruction::ClearActions => out.clear_actions = true,
            Instruction::WriteMetadata { metadata, mask } => {
                if metadata & mask & !METADATA_BITS != 0 {
                    return Err(OfError::bad_inst(bic::UNSUP_METADATA));
                }
                let mask = (mask & METADATA_BITS) as u32;
                metadata_write = Some(Action::WriteMetadata {
                    value: (*metadata as u32) & mask,
                    mask,
                });
            }
            Instruction::Meter(_) => return Err(OfError::bad_inst(bic::UNSUP_INST)),
            Instruction::Experimenter { .. } => {
                return Err(OfError::bad_inst(bic::BAD_EXPERIMENTER))
            }
        }
    }
    out.actions.extend(metadata_write);
    Ok(out)
}

/// A rule's instructions as OpenFlow instructions (flow stats): apply_actions,
/// clear_actions, write_actions, goto_table, the order OF 1.3 §5.9 runs them in.
pub fn rule_to_instructions(spec: &RuleSpec) -> Vec<Instruction> {
    let mut out = Vec::new();
    let (apply, metadata) = match spec.actions.split_last() {
        Some((Action::WriteMetadata { value, mask }, rest)) => (rest, Some((*value, *mask))),
        _ => (&spec.actions[..], None),
    };
    if !apply.is_empty() {
        out.push(Instruction::ApplyActions(actions_to_of_actions(
            apply,
            &spec.matches,
        )));
    }
    if spec.clear_actions {
        out.push(Instruction::ClearActions);
    }
    if !spec.write_actions.is_empty() {
        out.push(Instruction::WriteActions(actions_to_of_actions(
            &spec.write_actions,
            &spec.matches,
        )));
    }
    if let Some((value, mask)) = metadata {
        // All the bits flowpath keeps is "all of them" to a controller (the rest are 0).
        let mask = if mask as u64 == METADATA_BITS {
            u64::MAX
        } else {
            mask as u64
        };
        out.push(Instruction::WriteMetadata {
            metadata: value as u64,
            mask,
        });
    }
    if let Some(t) = spec.goto {
        out.push(Instruction::GotoTable(t));
    }
    out
}

/// The rule an ADD (or the new instructions a MODIFY) flow_mod describes. Refused:
/// table OFPTT_ALL or above the last table (OFPFMFC_BAD_TABLE_ID), unknown flag bits
/// (OFPFMFC_BAD_FLAGS), and whatever the match and instructions are refused for. The
/// buffer_id is the caller's (flowpath keeps no buffers: answer a set one with
/// OFPBRC_BUFFER_UNKNOWN after applying the flow_mod).
pub fn flow_mod_to_spec(fm: &FlowMod) -> Result<RuleSpec, OfError> {
    if fm.table_id as usize >= MAX_TABLES {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID));
    }
    if fm.flags & !0x1f != 0 {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_FLAGS));
    }
    let matches = oxm_to_match(&fm.match_)?;
    let parts = instructions_to_rule(fm.table_id, &fm.instructions, &matches)?;
    let mut spec = RuleSpec::new(fm.table_id, fm.priority, matches)
        .actions(parts.actions)
        .write_actions(parts.write_actions)
        .clear_actions(parts.clear_actions)
        .flags(FlowFlags::from_bits(fm.flags))
        .cookie(fm.cookie);
    spec.goto = parts.goto;
    spec.idle_timeout = fm.idle_timeout;
    spec.hard_timeout = fm.hard_timeout;
    spec.validate().map_err(|e| rule_error(&e))?;
    Ok(spec)
}

/// Which rules a MODIFY/MODIFY_STRICT/DELETE/DELETE_STRICT flow_mod selects (table
/// OFPTT_ALL is every table; out_port/out_group filter deletes only, as OF 1.3 says).
pub fn flow_mod_selector(fm: &FlowMod) -> Result<Selector, OfError> {
    let strict = matches!(fm.command, OFPFC_MODIFY_STRICT | OFPFC_DELETE_STRICT);
    let delete = matches!(fm.command, OFPFC_DELETE | OFPFC_DELETE_STRICT);
    if !matches!(fm.command, OFPFC_MODIFY | OFPFC_MODIFY_STRICT) && !delete {
        return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND));
    }
    let table = match fm.table_id {
        OFPTT_ALL => None,
        t if t as usize >= MAX_TABLES => {
            return Err(OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID))
        }
        t => Some(t),
    };
    let mut sel = Selector::all();
    sel.table = table;
    sel.matches = oxm_to_match(&fm.match_)?;
    sel.priority = strict.then_some(fm.priority);
    sel.cookie = fm.cookie;
    sel.cookie_mask = fm.cookie_mask;
    if delete {
        sel.out_port = (fm.out_port != OFPP_ANY).then_some(fm.out_port);
        sel.out_group = (fm.out_group != OFPG_ANY).then_some(fm.out_group);
    }
    Ok(sel)
}

/// The OpenFlow error for a rule store's refusal.
pub fn rule_error(e: &RuleError) -> OfError {
    match e {
        RuleError::BadTable(_) => OfError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID),
        RuleError::BadGoto { .. } => OfError::bad_inst(bic::BAD_TABLE_ID),
        RuleError::BadAction { action, .. } => match action {
            Action::Output(_) => OfError::bad_action(bac::BAD_OUT_PORT),
            Action::Group(_) => OfError::bad_action(bac::BAD_OUT_GROUP),
            _ => OfError::bad_action(bac::BAD_ARGUMENT),
        },
        RuleError::NoSuchRule(_) => OfError::new(et::FLOW_MOD_FAILED, fmfc::UNKNOWN),
        RuleError::Overlap { .. } => OfError::new(et::FLOW_MOD_FAILED, fmfc::OVERLAP),
        RuleError::UnknownGroupRef { .. } => OfError::bad_action(bac::BAD_OUT_GROUP),
        RuleError::GroupExists(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::GROUP_EXISTS),
        RuleError::NoSuchGroup(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP),
        RuleError::BadGroupId(_) => OfError::new(et::GROUP_MOD_FAILED, gmfc::INVALID_GROUP),
        RuleError::BadGroup { what, .. } => {
            let code = if what.contains("fast-failover") {
                gmfc::BAD_TYPE
            } else if what.contains("chaining") {
                gmfc::CHAINING_UNSUPPORTED
            } else if what.contains("indirect") {
                gmfc::INVALID_GROUP
            } else {
                gmfc::BAD_BUCKET
            };
            OfError::new(et::GROUP_MOD_FAILED, code)
        }
    }
}

/// The group an ADD or MODIFY group_mod describes (bucket actions as in a rule with an
/// empty match, so set_field prerequisites must hold for any packet). Unknown group type:
/// OFPGMFC_BAD_TYPE; id above OFPG_MAX: OFPGMFC_INVALID_GROUP.
pub fn group_mod_to_spec(gm: &GroupMod) -> Result<GroupSpec, OfError> {
    let kind = GroupType::from_code(gm.group_type)
        .ok_or(OfError::new(et::GROUP_MOD_FAILED, gmfc::BAD_TYPE))?;
    if gm.group_id > OFPG_MAX {
        return Err(OfError::new(et::GROUP_MOD_FAILED, gmfc::INVALID_GROUP));
    }
    let any = Match::any();
    let mut buckets = Vec::with_capacity(gm.buckets.len());
    for b in &gm.buckets {
        buckets.push(Bucket {
            weight: b.weight,
            watch_port: b.watch_port,
            watch_group: b.watch_group,
            actions: of_actions_to_actions(&b.actions, &any, ActionContext::Rule)?,
        });
    }
    let spec = GroupSpec::new(gm.group_id, kind, buckets);
    spec.validate().map_err(|e| rule_error(&e))?;
    Ok(spec)
}

/// A group as a GROUP_DESC reply entry.
pub fn group_desc(spec: &GroupSpec) -> GroupDesc {
    let any = Match::any();
    GroupDesc {
        group_type: spec.kind.code(),
        group_id: spec.id,
        buckets: spec
            .buckets
            .iter()
            .map(|b| OfBucket {
                weight: b.weight,
                watch_port: b.watch_port,
                watch_group: b.watch_group,
                actions: actions_to_of_actions(&b.actions, &any),
            })
            .collect(),
    }
}

/// Split nanoseconds into (seconds, nanoseconds) as OpenFlow durations are.
pub fn duration(ns: u64) -> (u32, u32) {
    (
        (ns / 1_000_000_000).min(u32::MAX as u64) as u32,
        (ns % 1_000_000_000) as u32,
    )
}

/// A rule as a FLOW stats reply entry.
pub fn flow_stats(spec: &RuleSpec, packets: u64, bytes: u64, age_ns: u64) -> FlowStats {
    let (duration_sec, duration_nsec) = duration(age_ns);
    FlowStats {
        table_id: spec.table,
        duration_sec,
        duration_nsec,
        priority: spec.priority,
        idle_timeout: spec.idle_timeout,
        hard_timeout: spec.hard_timeout,
        flags: spec.flags.bits(),
        cookie: spec.cookie,
        packet_count: packets,
        byte_count: bytes,
        match_: match_to_oxm(&spec.matches),
        instructions: rule_to_instructions(spec),
    }
}

/// A removed rule as a FLOW_REMOVED message body (`reason`: OFPRR_*).
pub fn flow_removed(
    spec: &RuleSpec,
    reason: u8,
    packets: u64,
    bytes: u64,
    age_ns: u64,
) -> FlowRemoved {
    let (duration_sec, duration_nsec) = duration(age_ns);
    FlowRemoved {
        cookie: spec.cookie,
        priority: spec.priority,
        reason,
        table_id: spec.table,
        duration_sec,
        duration_nsec,
        idle_timeout: spec.idle_timeout,
        hard_timeout: spec.hard_timeout,
        packet_count: packets,
        byte_count: bytes,
        match_: match_to_oxm(&spec.matches),
    }
}

/// What flowpath's tables support, as a TABLE_FEATURES reply body for tables
/// `0..n_tables` (each allowing goto to every later table). Long: send it with
/// [`crate::encode_multipart_reply`], which splits it.
pub fn table_features(n_tables: u8, max_entries: u32) -> Vec<TableFeatures> {
    let insts = vec![
        inst::GOTO_TABLE,
        inst::WRITE_METADATA,
        inst::WRITE_ACTIONS,
        inst::APPLY_ACTIONS,
        inst::CLEAR_ACTIONS,
    ];
    let acts = vec![
        act::OUTPUT,
        act::PUSH_VLAN,
        act::POP_VLAN,
        act::GROUP,
        act::DEC_NW_TTL,
        act::SET_FIELD,
    ];
    let hdr = |f: OxmField, masked: bool| {
        let h = f.header();
        if masked {
            (h & !0xff) | 0x100 | (2 * f.width() as u32)
        } else {
            h
        }
    };
    let fields: Vec<u32> = SUPPORTED_FIELDS
        .iter()
        .filter(|f| key_has(**f))
        .map(|f| hdr(*f, f.maskable()))
        .collect();
    let wild: Vec<u32> = SUPPORTED_FIELDS
        .iter()
        .filter(|f| key_has(**f))
        .map(|f| hdr(*f, false))
        .collect();
    let sets: Vec<u32> = SETTABLE_FIELDS.iter().map(|f| hdr(*f, false)).collect();
    (0..n_tables)
        .map(|t| {
            let last = t as usize + 1 >= n_tables as usize;
            let mut my_insts = insts.clone();
            if last {
                my_insts.retain(|i| *i != inst::GOTO_TABLE);
            }
            let next: Vec<u8> = (t.saturating_add(1)..n_tables).collect();
            let mut props = Vec::new();
            for miss in [false, true] {
                props.push(TableFeatureProp::Instructions {
                    miss,
                    ids: my_insts.clone(),
                });
                props.push(TableFeatureProp::NextTables {
                    miss,
                    tables: if last { Vec::new() } else { next.clone() },
                });
                props.push(TableFeatureProp::WriteActions {
                    miss,
                    ids: acts.clone(),
                });
                props.push(TableFeatureProp::ApplyActions {
                    miss,
                    ids: acts.clone(),
                });
            }
            props.push(TableFeatureProp::Match(fields.clone()));
            props.push(TableFeatureProp::Wildcards(wild.clone()));
            for miss in [false, true] {
                props.push(TableFeatureProp::WriteSetfield {
                    miss,
                    oxms: sets.clone(),
                });
                props.push(TableFeatureProp::ApplySetfield {
                    miss,
                    oxms: sets.clone(),
                });
            }
            TableFeatures {
                table_id: t,
                name: format!("table{t}"),
                metadata_match: METADATA_BITS,
                metadata_write: METADATA_BITS,
                config: 0,
                max_entries,
                properties: props,
            }
        })
        .collect()
}
