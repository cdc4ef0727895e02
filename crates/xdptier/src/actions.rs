//! Which cached action lists the program can run, and their kernel form.

use crate::layout::{act, FpActions, MAX_DEVS};
use bytemuck::Zeroable;
use flowpath_packet::Action;

/// The cached form of a flowpath action list, or `None` when the program cannot run it
/// with the same result: `Controller`, `InPort`, `SetTunnel` (and so VXLAN), more than one
/// output, anything after the output, an output port `port_to_dev` has no devmap index
/// for, `DecTtl` twice, both an IPv4 and an IPv6 rewrite of the same address, and VLAN
/// actions out of the order the program runs them (pops, then at most one push, then
/// VID/PCP sets). Without an output the flow drops. `version` is left 0:
/// [`FlowTier::insert`] stamps the current one.
///
/// Output to the packet's own ingress port (which flowpath skips) is checked by the
/// program, which hands such packets to user space.
pub fn actions_from(
    actions: &[Action],
    port_to_dev: impl Fn(u32) -> Option<u32>,
) -> Option<FpActions> {
    let mut a = FpActions::zeroed();
    a.vlan_keep = 0xffff;
    // 0: pops allowed; 1: after a push; 2: after a TCI set.
    let mut vlan_phase = 0u8;
    for act in actions {
        if a.flags & act::OUTPUT != 0 {
            return None; // nothing may follow the output
        }
        match *act {
            Action::Output(p) => {
                let dev = port_to_dev(p).filter(|&d| d < MAX_DEVS)?;
                a.flags |= act::OUTPUT;
                a.out_port = p;
                a.out_dev = dev;
            }
            // Controller, NORMAL (MAC learning), FLOOD/ALL (the port list) and TABLE are the
            // userspace datapath's.
            Action::InPort
            | Action::Controller { .. }
            | Action::SetTunnel(_)
            | Action::SetTunnelDst(_)
            | Action::Normal
            | Action::Flood
            | Action::All
            | Action::Table
            // The slow path expands groups; a megaflow never holds one.
            | Action::Group(_) => return None,
            Action::PopVlan | Action::PushVlan { .. } => {
                vlan_push_pop(&mut a, act, &mut vlan_phase)?
            }
            Action::SetVlanVid(_) | Action::SetVlanPcp(_) => {
                vlan_phase = 2;
                vlan_set(&mut a, act);
            }
            _ => rewrite(&mut a, act)?,
        }
    }
    Some(a)
}

/// Whether a megaflow may be offered to the XDP tier at all, before its actions are
/// converted. Tunnel traffic never is: a megaflow whose key came from a decapsulated
/// packet (`tun_flags` present: the program does not map outer headers to tunnel ports)
/// or that outputs to a tunnel port (`is_tunnel`: encapsulation needs the underlay hop,
/// which only user space resolves) stays in user space, where the EMC and megaflow cache
/// serve it; its packets reach user space through the program's miss path. Neither is
/// stateful traffic: a megaflow that runs `ct`/`ct_clear`, or whose key is a recirculated
/// pass (recirculation id or ct fields set), needs the connection tracker in user space.
pub fn offerable(
    key: &flowpath_packet::FlowKey,
    actions: &[Action],
    is_tunnel: impl Fn(u32) -> bool,
) -> bool {
    let tun_flags = key.get(flowpath_packet::Field::TunFlags) as u8;
    if tun_flags & flowpath_packet::key::TUN_PRESENT != 0 {
        return false;
    }
    let ct_words = flowpath_packet::Field::RecircId.range().0 / 8;
    if key.words[ct_words..].iter().any(|&w| w != 0) {
        return false;
    }
    !actions.iter().any(|a| match *a {
        Action::Output(p) => is_tunnel(p),
        Action::SetTunnel(_) | Action::SetTunnelDst(_) | Action::Ct(_) | Action::CtClear => true,
        _ => false,
    })
}

/// A header rewrite (MAC, IP, TOS, ports, TTL); `None` when it conflicts with an earlier
/// one (an IPv4 and an IPv6 rewrite of the same address, `dec_ttl` twice).
fn rewrite(a: &mut FpActions, act: &Action) -> Option<()> {
    let refuse = |conflict: u32| (a.flags & conflict == 0).then_some(());
    match *act {
        Action::SetEthSrc(m) => {
            a.flags |= act::SET_ETH_SRC;
            a.eth_src = m;
        }
        Action::SetEthDst(m) => {
            a.flags |= act::SET_ETH_DST;
            a.eth_dst = m;
        }
        Action::SetIpv4Src(ip) => {
            refuse(act::SET_IP6_SRC)?;
            a.flags |= act::SET_IP4_SRC;
            a.ip_src[..4].copy_from_slice(&ip);
        }
        Action::SetIpv4Dst(ip) => {
            refuse(act::SET_IP6_DST)?;
            a.flags |= act::SET_IP4_DST;
            a.ip_dst[..4].copy_from_slice(&ip);
        }
        Action::SetIpv6Src(ip) => {
            refuse(act::SET_IP4_SRC)?;
            a.flags |= act::SET_IP6_SRC;
            a.ip_src = ip;
        }
        Action::SetIpv6Dst(ip) => {
            refuse(act::SET_IP4_DST)?;
            a.flags |= act::SET_IP6_DST;
            a.ip_dst = ip;
        }
        Action::SetNwTos(t) => {
            a.flags |= act::SET_NW_TOS;
            a.nw_tos = t & 0xfc;
        }
        Action::SetTpSrc(p) => {
            a.flags |= act::SET_TP_SRC;
            a.tp_src = p.to_be_bytes();
        }
        Action::SetTpDst(p) => {
            a.flags |= act::SET_TP_DST;
            a.tp_dst = p.to_be_bytes();
        }
        Action::DecTtl => {
            refuse(act::DEC_TTL)?;
            a.flags |= act::DEC_TTL;
        }
        _ => return None,
    }
    Some(())
}

/// Pops, then at most one push, in the order the program runs them.
fn vlan_push_pop(a: &mut FpActions, act: &Action, vlan_phase: &mut u8) -> Option<()> {
    if *vlan_phase != 0 {
        return None;
    }
    match *act {
        // A packet has at most two tags: further pops are no-ops.
        Action::PopVlan => {
            a.pop_vlans = (a.pop_vlans + 1).min(2);
            a.flags |= act::POP_VLANS;
        }
        Action::PushVlan { tpid } => {
            *vlan_phase = 1;
            a.flags |= act::PUSH_VLAN;
            a.push_tpid = tpid.to_be_bytes();
        }
        _ => return None,
    }
    Some(())
}

/// `mod_vlan_vid` / `mod_vlan_pcp`: composed into one TCI rewrite.
fn vlan_set(a: &mut FpActions, act: &Action) {
    a.flags |= act::SET_VLAN_TCI;
    match *act {
        Action::SetVlanVid(vid) => compose_tci(a, !0x0fff, vid & 0x0fff),
        Action::SetVlanPcp(pcp) => compose_tci(a, !0xe000, u16::from(pcp & 7) << 13),
        _ => {}
    }
}

/// Follow `tci = (tci & keep) | set` by another such step.
fn compose_tci(a: &mut FpActions, keep: u16, set: u16) {
    a.vlan_keep &= keep;
    a.vlan_set = (a.vlan_set & keep) | set;
}
