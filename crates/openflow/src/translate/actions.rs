//! Actions and instructions: OpenFlow actions as flowpath actions
//! ([`of_actions_to_actions`], checked against the rule's match) and back
//! ([`actions_to_of_actions`]), and a flow_mod's instructions as a rule's parts
//! ([`instructions_to_rule`]) and back ([`rule_to_instructions`]).

use super::ct::{ct_action, ct_clear_of_action, ct_to_of_action};
use super::error::OfError;
use super::matches::{Pinned, ETH_IPV4, ETH_IPV6, METADATA_BITS};
use super::nxm;
use crate::actions::{Instruction, OfAction};
use crate::consts::*;
use crate::nx::{NxAction, NX_VENDOR_ID};
use crate::oxm::{be, Oxm, OxmField};
use flowpath_packet::key::ethertype;
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec, MAX_TABLES};

/// Fields a set_field action may write (what [`of_actions_to_actions`] accepts).
pub const SETTABLE_FIELDS: [OxmField; 14] = {
    use OxmField::*;
    [
        EthDst, EthSrc, VlanVid, VlanPcp, IpDscp, Ipv4Src, Ipv4Dst, TcpSrc, TcpDst, UdpSrc, UdpDst,
        Ipv6Src, Ipv6Dst, TunnelId,
    ]
};

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
    let mut pinned = Pinned::of_match(m);
    let mut out = Vec::with_capacity(acts.len());
    for a in acts {
        out.push(of_action(a, &mut pinned, ctx)?);
    }
    Ok(out)
}

/// One action, where `pinned` is what holds when it runs (its `tagged` follows the VLAN
/// pushes and pops before it).
fn of_action(a: &OfAction, pinned: &mut Pinned, ctx: ActionContext) -> Result<Action, OfError> {
    Ok(match a {
        OfAction::Output { port, max_len } => output(*port, *max_len, ctx)?,
        OfAction::PushVlan(tpid) => {
            if *tpid != ethertype::VLAN && *tpid != ethertype::QINQ {
                return Err(OfError::bad_action(bac::BAD_ARGUMENT));
            }
            pinned.tagged = true;
            Action::PushVlan { tpid: *tpid }
        }
        OfAction::PopVlan => {
            if !pinned.tagged {
                return Err(OfError::bad_action(bac::MATCH_INCONSISTENT));
            }
            // What is under the popped tag is not known from the match.
            pinned.tagged = false;
            Action::PopVlan
        }
        OfAction::DecNwTtl => Action::DecTtl,
        OfAction::Group(g) => {
            if *g > OFPG_MAX {
                return Err(OfError::bad_action(bac::BAD_OUT_GROUP));
            }
            Action::Group(*g)
        }
        // ct_mark and ct_label are written inside ct(commit, exec(...)) only.
        OfAction::SetField(o) if is_ct_write(o) => {
            return Err(OfError::bad_action(bac::BAD_SET_ARGUMENT))
        }
        OfAction::SetField(o) => set_field(o, *pinned)?,
        OfAction::Experimenter { experimenter, .. } if *experimenter == NX_VENDOR_ID => {
            nx_action(a, *pinned)?
        }
        OfAction::Experimenter { .. } => return Err(OfError::bad_action(bac::BAD_EXPERIMENTER)),
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
    })
}

/// A Nicira action outside `ct`: `ct` and `ct_clear`. A NAT, or a write of ct_mark or
/// ct_label, outside `ct` is OFPBAC_BAD_SET_ARGUMENT, as OVS answers; other register
/// loads OFPBAC_BAD_SET_TYPE (flowpath has no registers), an unknown subtype
/// OFPBAC_BAD_EXPERIMENTER_TYPE.
fn nx_action(a: &OfAction, pinned: Pinned) -> Result<Action, OfError> {
    let Some(nx) = NxAction::of(a) else {
        return Err(OfError::bad_action(bac::BAD_EXPERIMENTER));
    };
    let ct_dst = |h: u32| h == nxm::CT_MARK.header() || h == nxm::CT_LABEL.header();
    Ok(match nx? {
        NxAction::Ct(c) => ct_action(&c, pinned)?,
        NxAction::CtClear => Action::CtClear,
        NxAction::Nat(_) => return Err(OfError::bad_action(bac::BAD_SET_ARGUMENT)),
        NxAction::RegLoad { dst, .. } if ct_dst(dst) => {
            return Err(OfError::bad_action(bac::BAD_SET_ARGUMENT))
        }
        NxAction::RegLoad2(o) if is_ct_write(&o) => {
            return Err(OfError::bad_action(bac::BAD_SET_ARGUMENT))
        }
        NxAction::RegLoad { .. } | NxAction::RegLoad2(_) => {
            return Err(OfError::bad_action(bac::BAD_SET_TYPE))
        }
    })
}

/// Is `o` a ct_mark or ct_label entry (which only `ct(commit, exec(...))` may write)?
fn is_ct_write(o: &Oxm) -> bool {
    nxm::ct_field(o).is_some_and(|f| f.key == Field::CtMark || f.key == Field::CtLabel)
}

/// An output to `port`: a reserved port's own action, or a port number in range.
fn output(port: u32, max_len: u16, ctx: ActionContext) -> Result<Action, OfError> {
    Ok(match port {
        OFPP_IN_PORT => Action::InPort,
        OFPP_CONTROLLER => Action::controller(max_len),
        OFPP_NORMAL => Action::Normal,
        OFPP_FLOOD => Action::Flood,
        OFPP_ALL => Action::All,
        OFPP_TABLE if ctx == ActionContext::PacketOut => Action::Table,
        p if p == 0 || p > OFPP_MAX => return Err(OfError::bad_action(bac::BAD_OUT_PORT)),
        p => Action::Output(p),
    })
}

/// A set_field: a settable field (BAD_SET_TYPE), its value in range (BAD_SET_ARGUMENT),
/// and the prerequisites `pinned` must hold (MATCH_INCONSISTENT).
fn set_field(o: &Oxm, pinned: Pinned) -> Result<Action, OfError> {
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
    let pre = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(OfError::bad_action(bac::MATCH_INCONSISTENT))
        }
    };
    let mac = |v: u128| {
        let b = v.to_be_bytes();
        [b[10], b[11], b[12], b[13], b[14], b[15]]
    };
    let ip4 = |v: u128| (v as u32).to_be_bytes();
    use OxmField as O;
    Ok(match field {
        O::EthSrc => Action::SetEthSrc(mac(v)),
        O::EthDst => Action::SetEthDst(mac(v)),
        O::VlanVid => {
            arg(v & !0x1fff == 0)?;
            pre(pinned.tagged)?;
            Action::SetVlanVid((v & 0x0fff) as u16)
        }
        O::VlanPcp => {
            arg(v <= 7)?;
            pre(pinned.tagged)?;
            Action::SetVlanPcp(v as u8)
        }
        O::IpDscp => {
            arg(v <= 0x3f)?;
            pre(pinned.is_ip())?;
            Action::SetNwTos((v as u8) << 2)
        }
        O::Ipv4Src | O::Ipv4Dst => {
            pre(pinned.eth == Some(ETH_IPV4))?;
            if *field == O::Ipv4Src {
                Action::SetIpv4Src(ip4(v))
            } else {
                Action::SetIpv4Dst(ip4(v))
            }
        }
        O::Ipv6Src | O::Ipv6Dst => {
            pre(pinned.eth == Some(ETH_IPV6))?;
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
            pre(pinned.is_ip() && pinned.proto == Some(want))?;
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
    })
}

/// flowpath actions as OpenFlow actions (flow stats, group desc); `m` decides whether a
/// port rewrite is TCP's or UDP's. `ct` and `ct_clear` are Nicira actions, as OVS sends
/// them.
pub fn actions_to_of_actions(acts: &[Action], m: &Match) -> Vec<OfAction> {
    let udp = m.mask.get(Field::NwProto) == 0xff && m.value.get(Field::NwProto) == 17;
    let set = |f: OxmField, v: u128| OfAction::SetField(Oxm::exact(f, v));
    let (tp_src, tp_dst) = if udp {
        (OxmField::UdpSrc, OxmField::UdpDst)
    } else {
        (OxmField::TcpSrc, OxmField::TcpDst)
    };
    // A tunnel destination has no standard OXM (OVS uses the Nicira NXM_NX_TUN_IPV4_DST
    // extension, which this channel does not speak): it is left out, as metadata writes are.
    acts.iter()
        .filter_map(|a| {
            Some(match *a {
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
                Action::SetEthSrc(b) => set(OxmField::EthSrc, be(&b)),
                Action::SetEthDst(b) => set(OxmField::EthDst, be(&b)),
                Action::SetIpv4Src(b) => set(OxmField::Ipv4Src, be(&b)),
                Action::SetIpv4Dst(b) => set(OxmField::Ipv4Dst, be(&b)),
                Action::SetIpv6Src(b) => set(OxmField::Ipv6Src, u128::from_be_bytes(b)),
                Action::SetIpv6Dst(b) => set(OxmField::Ipv6Dst, u128::from_be_bytes(b)),
                Action::SetNwTos(t) => set(OxmField::IpDscp, (t >> 2) as u128),
                Action::SetTpSrc(p) => set(tp_src, p as u128),
                Action::SetTpDst(p) => set(tp_dst, p as u128),
                Action::PushVlan { tpid } => OfAction::PushVlan(tpid),
                Action::PopVlan => OfAction::PopVlan,
                Action::SetVlanVid(v) => set(OxmField::VlanVid, (v | OFPVID_PRESENT) as u128),
                Action::SetVlanPcp(p) => set(OxmField::VlanPcp, p as u128),
                Action::DecTtl => OfAction::DecNwTtl,
                Action::SetTunnel(id) => set(OxmField::TunnelId, id as u128),
                Action::Group(g) => OfAction::Group(g),
                Action::Ct(id) => return ct_to_of_action(id.spec()),
                Action::CtClear => ct_clear_of_action(),
                Action::WriteMetadata { .. } | Action::SetTunnelDst(_) => return None,
            })
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
