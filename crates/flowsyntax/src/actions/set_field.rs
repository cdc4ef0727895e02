//! `set_field:VALUE->FIELD`: which fields flowpath can write, and the action each
//! value becomes.

use super::ctx::Ctx;
use super::rewrite::{TOS_WHAT, TUN_WHAT};
use crate::error::{did_you_mean, shown, SyntaxError};
use crate::lex::Key;
use crate::names;
use crate::value::{parse_ipv4, parse_ipv6, parse_mac, parse_max};
use flowpath_packet::Action;

const SETTABLE: &str = "eth_src, eth_dst, ipv4_src, ipv4_dst, ipv6_src, ipv6_dst, nw_tos, \
ip_dscp, tp_src, tp_dst, tcp_src, tcp_dst, udp_src, udp_dst, vlan_vid, vlan_pcp, tun_id, tun_dst, \
tun_ipv6_dst";

/// What `set_field` can write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    EthSrc,
    EthDst,
    Ipv4Src,
    Ipv4Dst,
    Ipv6Src,
    Ipv6Dst,
    NwTos,
    IpDscp,
    TpSrc,
    TpDst,
    VlanVid,
    VlanPcp,
    TunId,
    TunDst,
    TunIpv6Dst,
}

const TARGETS: &[(&str, Target)] = &[
    ("eth_src", Target::EthSrc),
    ("dl_src", Target::EthSrc),
    ("eth_dst", Target::EthDst),
    ("dl_dst", Target::EthDst),
    ("ipv4_src", Target::Ipv4Src),
    ("ip_src", Target::Ipv4Src),
    ("nw_src", Target::Ipv4Src),
    ("ipv4_dst", Target::Ipv4Dst),
    ("ip_dst", Target::Ipv4Dst),
    ("nw_dst", Target::Ipv4Dst),
    ("ipv6_src", Target::Ipv6Src),
    ("ipv6_dst", Target::Ipv6Dst),
    ("nw_tos", Target::NwTos),
    ("ip_dscp", Target::IpDscp),
    ("tp_src", Target::TpSrc),
    ("tcp_src", Target::TpSrc),
    ("udp_src", Target::TpSrc),
    ("tp_dst", Target::TpDst),
    ("tcp_dst", Target::TpDst),
    ("udp_dst", Target::TpDst),
    ("vlan_vid", Target::VlanVid),
    ("vlan_pcp", Target::VlanPcp),
    ("tun_id", Target::TunId),
    ("tunnel_id", Target::TunId),
    ("tun_dst", Target::TunDst),
    ("tun_ipv6_dst", Target::TunIpv6Dst),
];

impl Ctx<'_> {
    pub(super) fn set_field(&self, k: &Key, v: &str) -> Result<Action, SyntaxError> {
        let Some((val, target)) = v.split_once("->") else {
            return Err(self.bad(k, v, "VALUE->FIELD, e.g. set_field:10.0.0.1->ipv4_dst"));
        };
        let t = self.target(k, target)?;
        if val.contains('/') {
            return Err(self.err(k.at, |c| {
                format!("set_field with a mask at column {c} is not supported by flowpath")
            }));
        }
        let bad = |what: &str| {
            let (val, target) = (shown(val), shown(target));
            self.err(k.at, |c| {
                format!(
                    "bad value '{val}' for set_field to {target} at column {c}: expected {what}"
                )
            })
        };
        set_value(t, val, bad)
    }

    /// The field `set_field` writes, or why it cannot.
    fn target(&self, k: &Key, target: &str) -> Result<Target, SyntaxError> {
        if let Some(&(_, t)) = TARGETS.iter().find(|(n, _)| *n == target) {
            return Ok(t);
        }
        if names::field(target).is_some()
            || names::UNSUPPORTED_FIELDS.contains(&target)
            || names::is_register(target)
        {
            return Err(self.err(k.at, |c| {
                format!("set_field to '{target}' at column {c} is not supported by flowpath (settable: {SETTABLE})")
            }));
        }
        let cands: Vec<&str> = TARGETS.iter().map(|&(n, _)| n).collect();
        let hint = did_you_mean(target, &cands);
        let target = shown(target);
        Err(self.err(k.at, |c| {
            format!("unknown field '{target}' in set_field at column {c}{hint}")
        }))
    }
}

/// The action `set_field:VAL->t` stands for; `bad(expected)` makes the error.
fn set_value(
    t: Target,
    val: &str,
    bad: impl Fn(&str) -> SyntaxError,
) -> Result<Action, SyntaxError> {
    const MAC: &str = "a MAC address xx:xx:xx:xx:xx:xx";
    Ok(match t {
        Target::EthSrc => Action::SetEthSrc(parse_mac(val).ok_or_else(|| bad(MAC))?),
        Target::EthDst => Action::SetEthDst(parse_mac(val).ok_or_else(|| bad(MAC))?),
        Target::Ipv4Src | Target::Ipv4Dst => {
            let a = parse_ipv4(val)
                .ok_or_else(|| bad("an IPv4 address a.b.c.d"))?
                .to_be_bytes();
            if t == Target::Ipv4Src {
                Action::SetIpv4Src(a)
            } else {
                Action::SetIpv4Dst(a)
            }
        }
        Target::Ipv6Src | Target::Ipv6Dst => {
            let a = parse_ipv6(val)
                .ok_or_else(|| bad("an IPv6 address"))?
                .to_be_bytes();
            if t == Target::Ipv6Src {
                Action::SetIpv6Src(a)
            } else {
                Action::SetIpv6Dst(a)
            }
        }
        Target::NwTos => {
            let n = parse_max(val, 255)
                .filter(|n| n & 3 == 0)
                .ok_or_else(|| bad(TOS_WHAT))?;
            Action::SetNwTos(n as u8)
        }
        Target::IpDscp => {
            let n = parse_max(val, 63).ok_or_else(|| bad("a DSCP value 0..63"))?;
            Action::SetNwTos((n << 2) as u8)
        }
        Target::TpSrc | Target::TpDst => {
            let n = parse_max(val, 65535).ok_or_else(|| bad("a number 0..65535"))? as u16;
            if t == Target::TpSrc {
                Action::SetTpSrc(n)
            } else {
                Action::SetTpDst(n)
            }
        }
        Target::VlanVid => {
            // OpenFlow 1.2+ writes VLAN_VID with the 0x1000 "present" bit; accept both.
            let n = parse_max(val, 0x1fff)
                .ok_or_else(|| bad("a VLAN id 0..4095 (0x1000 | id also accepted)"))?;
            Action::SetVlanVid((n & 0xfff) as u16)
        }
        Target::VlanPcp => {
            Action::SetVlanPcp(parse_max(val, 7).ok_or_else(|| bad("a VLAN priority 0..7"))? as u8)
        }
        Target::TunId => {
            Action::SetTunnel(parse_max(val, 0xff_ffff).ok_or_else(|| bad(TUN_WHAT))? as u32)
        }
        Target::TunDst => Action::set_tunnel_dst(std::net::IpAddr::V4(
            parse_ipv4(val)
                .ok_or_else(|| bad("an IPv4 address a.b.c.d"))?
                .into(),
        )),
        Target::TunIpv6Dst => Action::set_tunnel_dst(std::net::IpAddr::V6(
            parse_ipv6(val)
                .ok_or_else(|| bad("an IPv6 address"))?
                .into(),
        )),
    })
}
