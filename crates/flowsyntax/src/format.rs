//! Printing rules the way `ovs-ofctl` prints flows.
//!
//! Field order and names follow OVS's `match_format`: `priority`, the connection-tracking
//! fields (`format_ct.rs`), the protocol shorthand
//! (`ip`, `tcp6`, `arp`, ...), tunnel fields, `in_port`, VLAN, `dl_src`, `dl_dst`,
//! `dl_type` (when no shorthand fits), addresses (`nw_src`/`nw_dst`, `arp_spa`/`arp_tpa`
//! or `ipv6_src`/`ipv6_dst`), `nw_proto`/`arp_op`, `nw_tos`, `nw_ecn`, `nw_ttl`,
//! `nw_frag`, `tp_src`/`tp_dst` (or `icmp_type`/`icmp_code`), `tcp_flags`. Exact values
//! print without a mask, CIDR masks as `/len`, other masks as `/mask`.
//!
//! Every match the parser produces prints back to the same match. A match built in code
//! can hold things the syntax cannot say; those print as follows (and do not round-trip):
//! - a partial mask on a field the syntax only matches exactly (`in_port`, `dl_type`,
//!   `nw_proto`/`arp_op`, `nw_ttl`) prints the masked value as if exact; an `nw_tos` mask
//!   other than the DSCP (0xfc) and/or ECN (0x03) bits prints as `nw_tos`/`nw_ecn` of
//!   the masked value;
//! - fields without their prerequisites (e.g. `tp_dst` with no `tcp`) print under their
//!   usual names, which the parser then refuses;
//! - an IPv4 or ARP match whose address mask covers more than the first 4 bytes of the
//!   16-byte address prints as `ipv6_src`/`ipv6_dst`;
//! - `Action::SetNwTos` with ECN bits set prints the DSCP bits only (the rewrite ignores
//!   the others), and out-of-range action arguments print as they are.

use crate::names::{FRAG_NAMES, TCP_FLAG_NAMES};
use crate::value::{write_c_hex, write_ipv4_masked, write_ipv6_masked, write_mac_masked};
use flowpath_packet::key::{ethertype, ipproto};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec};
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// The match in `ovs-ofctl` syntax, priority first: `priority=100,ip,nw_dst=10.0.0.0/8`.
pub fn format_match(spec: &RuleSpec) -> String {
    let mut s = String::with_capacity(96);
    write_match(&mut s, spec);
    s
}

/// The actions: `output:2`, `drop` (no actions and no `goto_table`),
/// `mod_dl_dst:02:00:00:00:00:01,output:3,goto_table:4` (`goto_table` last).
pub fn format_actions(spec: &RuleSpec) -> String {
    let mut s = String::with_capacity(32);
    write_actions(&mut s, spec);
    s
}

/// The rule as an `add-flow` line, the form flows files and state files hold:
/// `[cookie=0x5, ][table=1, ][idle_timeout=10, ][hard_timeout=60, ]priority=100,ip,... actions=...`
/// (as `ovs-ofctl dump-flows --no-stats` prints; zero cookie, table and timeouts are
/// left out). `parse_flow(&format_flow(s), FlowCommand::Add)` gives back `s` for every
/// rule the parser can produce.
pub fn format_flow(spec: &RuleSpec) -> String {
    let mut s = String::with_capacity(128);
    if spec.cookie != 0 {
        let _ = write!(s, "cookie={:#x}, ", spec.cookie);
    }
    if spec.table != 0 {
        let _ = write!(s, "table={}, ", spec.table);
    }
    write_timeouts(&mut s, spec);
    write_match(&mut s, spec);
    s.push_str(" actions=");
    write_actions(&mut s, spec);
    s
}

/// A rule's counters, for [`format_dump_line`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpStats {
    pub packets: u64,
    pub bytes: u64,
    /// Time since the rule was added.
    pub duration: std::time::Duration,
    /// Time since the rule last matched a packet (`None`: not known, not printed).
    pub idle_age: Option<std::time::Duration>,
}

/// One line of `ovs-ofctl dump-flows` output:
/// ` cookie=0x0, duration=3.204s, table=0, n_packets=12, n_bytes=720, idle_timeout=10, idle_age=2, priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2`.
///
/// The duration always has 3 decimals (truncated to milliseconds), `idle_age` is whole
/// seconds. The line parses back (OVS ignores the statistics on input, and so does
/// [`crate::parse_flow`]).
pub fn format_dump_line(spec: &RuleSpec, stats: &DumpStats) -> String {
    let mut s = String::with_capacity(160);
    let _ = write!(
        s,
        " cookie={:#x}, duration={}, table={}, n_packets={}, n_bytes={}, ",
        spec.cookie,
        Secs(stats.duration),
        spec.table,
        stats.packets,
        stats.bytes
    );
    write_timeouts(&mut s, spec);
    if let Some(age) = stats.idle_age {
        let _ = write!(s, "idle_age={}, ", age.as_secs());
    }
    write_match(&mut s, spec);
    s.push_str(" actions=");
    write_actions(&mut s, spec);
    s
}

/// `3.204s`.
struct Secs(Duration);

impl std::fmt::Display for Secs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}s", self.0.as_secs(), self.0.subsec_millis())
    }
}

fn write_timeouts(s: &mut String, spec: &RuleSpec) {
    if spec.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={}, ", spec.idle_timeout);
    }
    if spec.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={}, ", spec.hard_timeout);
    }
}

/// The low 96 bits of a 16-byte address: zero when it holds an IPv4 address.
const LOW96: u128 = (1u128 << 96) - 1;

fn get(m: &Match, f: Field) -> (u128, u128) {
    (m.value.get(f), m.mask.get(f))
}

/// The shorthand for an ethertype (and IP protocol), and whether it covers the protocol.
fn shorthand(eth: u16, proto: Option<u8>) -> Option<(&'static str, bool)> {
    Some(match (eth, proto) {
        (ethertype::IPV4, Some(ipproto::ICMP)) => ("icmp", true),
        (ethertype::IPV4, Some(ipproto::TCP)) => ("tcp", true),
        (ethertype::IPV4, Some(ipproto::UDP)) => ("udp", true),
        (ethertype::IPV4, Some(132)) => ("sctp", true),
        (ethertype::IPV4, _) => ("ip", false),
        (ethertype::IPV6, Some(ipproto::ICMPV6)) => ("icmp6", true),
        (ethertype::IPV6, Some(ipproto::TCP)) => ("tcp6", true),
        (ethertype::IPV6, Some(ipproto::UDP)) => ("udp6", true),
        (ethertype::IPV6, Some(132)) => ("sctp6", true),
        (ethertype::IPV6, _) => ("ipv6", false),
        (ethertype::ARP, _) => ("arp", false),
        (0x8035, _) => ("rarp", false),
        (0x8847, _) => ("mpls", false),
        (0x8848, _) => ("mplsm", false),
        _ => return None,
    })
}

/// OVS's VLAN printing: `dl_vlan`/`dl_vlan_pcp` when the TCI match is a clean "tagged
/// with this VID and/or PCP", else `vlan_tci=0x....[/0x....]`.
fn write_vlan(s: &mut String, suffix: &str, v: u128, m: u128) {
    if m == 0 {
        return;
    }
    let vid_m = m & 0x0fff;
    let pcp_m = m & 0xe000;
    if m & 0x1000 != 0
        && v & 0x1000 != 0
        && (vid_m == 0 || vid_m == 0x0fff)
        && (pcp_m == 0 || pcp_m == 0xe000)
        && (vid_m | pcp_m) != 0
    {
        if vid_m != 0 {
            let _ = write!(s, ",dl_vlan{suffix}={}", v & 0x0fff);
        }
        if pcp_m != 0 {
            let _ = write!(s, ",dl_vlan_pcp{suffix}={}", v >> 13);
        }
    } else if m == 0xffff {
        let _ = write!(s, ",vlan_tci{suffix}=0x{v:04x}");
    } else {
        let _ = write!(s, ",vlan_tci{suffix}=0x{v:04x}/0x{m:04x}");
    }
}

/// `name=N` exact, `name=0xV/0xM` masked (OVS's `format_be16_masked`).
fn write_u16_masked(s: &mut String, name: &str, v: u128, m: u128) {
    if m == 0 {
        return;
    }
    if m == 0xffff {
        let _ = write!(s, ",{name}={v}");
    } else {
        let _ = write!(s, ",{name}=0x{v:x}/0x{m:x}");
    }
}

/// A 16-byte address field: IPv6 form when `v6` or when the mask reaches past the first 4
/// bytes, else IPv4 under `v4_name`.
fn write_addr(s: &mut String, v4_name: &str, v6_name: &str, v6: bool, v: u128, m: u128) {
    if m == 0 {
        return;
    }
    if v6 || m & LOW96 != 0 {
        let _ = write!(s, ",{v6_name}=");
        write_ipv6_masked(s, v, m);
    } else {
        let _ = write!(s, ",{v4_name}=");
        write_ipv4_masked(s, (v >> 96) as u32, (m >> 96) as u32);
    }
}

/// OVS's `format_flags_masked`: `syn|ack` (or `0`) for an exact match of all 12 bits,
/// else `+syn-ack` over the mask's bits, lowest first.
fn write_tcp_flags(s: &mut String, v: u128, m: u128) {
    s.push_str(",tcp_flags=");
    if m == 0xfff {
        if v == 0 {
            s.push('0');
            return;
        }
        let mut first = true;
        for (i, name) in TCP_FLAG_NAMES.iter().enumerate() {
            if v & (1 << i) != 0 {
                if !first {
                    s.push('|');
                }
                first = false;
                s.push_str(name);
            }
        }
    } else {
        for (i, name) in TCP_FLAG_NAMES.iter().enumerate() {
            if m & (1 << i) != 0 {
                s.push(if v & (1 << i) != 0 { '+' } else { '-' });
                s.push_str(name);
            }
        }
    }
}

fn write_match(s: &mut String, spec: &RuleSpec) {
    let m = &spec.matches;
    let _ = write!(s, "priority={}", spec.priority);
    crate::format_ct::write_ct_match(s, m);

    let (ev, em) = get(m, Field::EthType);
    let (pv, pm) = get(m, Field::NwProto);
    let eth = (em != 0).then_some(ev as u16);
    let proto = (pm != 0).then_some(pv as u8);
    let (mut skip_type, mut skip_proto) = (false, false);
    if let Some((name, covers_proto)) = eth.and_then(|e| shorthand(e, proto)) {
        s.push(',');
        s.push_str(name);
        skip_type = true;
        skip_proto = covers_proto;
    }
    write_tunnel(s, m);
    write_l2(s, m, eth, skip_type);
    write_l3(s, m, eth, proto, skip_proto);
    write_l4(s, m, eth, proto);
}

/// Tunnel metadata: `tun_id`, addresses, flags.
fn write_tunnel(s: &mut String, m: &Match) {
    let (v, mk) = get(m, Field::TunId);
    if mk != 0 {
        s.push_str(",tun_id=");
        write_c_hex(s, v);
        if mk != Field::TunId.full_mask() {
            s.push('/');
            write_c_hex(s, mk);
        }
    }
    let (v, mk) = get(m, Field::TunSrc);
    write_addr(s, "tun_src", "tun_ipv6_src", false, v, mk);
    let (v, mk) = get(m, Field::TunDst);
    write_addr(s, "tun_dst", "tun_ipv6_dst", false, v, mk);
    let (v, mk) = get(m, Field::TunFlags);
    if mk != 0 {
        let _ = write!(s, ",tun_flags={v:#x}");
        if mk != 0xff {
            let _ = write!(s, "/{mk:#x}");
        }
    }
    let (v, mk) = get(m, Field::Metadata);
    if mk != 0 {
        let _ = write!(s, ",metadata={v:#x}");
        if mk != Field::Metadata.full_mask() {
            let _ = write!(s, "/{mk:#x}");
        }
    }
}

/// Ingress port, VLAN tags, Ethernet addresses and type.
fn write_l2(s: &mut String, m: &Match, eth: Option<u16>, skip_type: bool) {
    let (v, mk) = get(m, Field::InPort);
    if mk != 0 {
        let _ = write!(s, ",in_port={v}");
    }
    let (v, mk) = get(m, Field::VlanTci);
    write_vlan(s, "", v, mk);
    let (v, mk) = get(m, Field::VlanInnerTci);
    write_vlan(s, "1", v, mk);

    for (name, f) in [("dl_src", Field::EthSrc), ("dl_dst", Field::EthDst)] {
        let (v, mk) = get(m, f);
        if mk != 0 {
            let _ = write!(s, ",{name}=");
            write_mac_masked(s, v, mk);
        }
    }
    if !skip_type {
        if let Some(e) = eth {
            let _ = write!(s, ",dl_type=0x{e:04x}");
        }
    }
}

/// Addresses (IPv4, IPv6 or ARP, by the type), protocol, TOS/ECN, TTL, fragments.
fn write_l3(s: &mut String, m: &Match, eth: Option<u16>, proto: Option<u8>, skip_proto: bool) {
    let v6 = eth == Some(ethertype::IPV6);
    let arp = eth == Some(ethertype::ARP);
    let (src4, dst4) = if arp {
        ("arp_spa", "arp_tpa")
    } else {
        ("nw_src", "nw_dst")
    };
    let (v, mk) = get(m, Field::Ipv6Src);
    write_addr(s, src4, "ipv6_src", v6, v, mk);
    let (v, mk) = get(m, Field::Ipv6Dst);
    write_addr(s, dst4, "ipv6_dst", v6, v, mk);

    if !skip_proto {
        if let Some(p) = proto {
            let name = if arp { "arp_op" } else { "nw_proto" };
            let _ = write!(s, ",{name}={p}");
        }
    }
    let (v, mk) = get(m, Field::NwTos);
    if mk & 0xfc != 0 {
        let _ = write!(s, ",nw_tos={}", v & 0xfc);
    }
    if mk & 0x03 != 0 {
        let _ = write!(s, ",nw_ecn={}", v & 0x03);
    }
    let (v, mk) = get(m, Field::NwTtl);
    if mk != 0 {
        let _ = write!(s, ",nw_ttl={v}");
    }
    let (v, mk) = get(m, Field::NwFrag);
    if mk != 0 {
        match FRAG_NAMES
            .iter()
            .find(|&&(_, fv, fm)| fv as u128 == v && fm as u128 == mk)
        {
            Some((name, _, _)) => {
                let _ = write!(s, ",nw_frag={name}");
            }
            None => {
                let _ = write!(s, ",nw_frag=0x{v:x}/0x{mk:x}");
            }
        }
    }
}

/// Ports (or ICMP type and code) and TCP flags.
fn write_l4(s: &mut String, m: &Match, eth: Option<u16>, proto: Option<u8>) {
    let v6 = eth == Some(ethertype::IPV6);
    let icmp = (eth == Some(ethertype::IPV4) && proto == Some(ipproto::ICMP))
        || (v6 && proto == Some(ipproto::ICMPV6));
    let (sn, dn) = if icmp {
        ("icmp_type", "icmp_code")
    } else {
        ("tp_src", "tp_dst")
    };
    for (i, (name, f)) in [(sn, Field::TpSrc), (dn, Field::TpDst)]
        .into_iter()
        .enumerate()
    {
        let (v, mk) = get(m, f);
        write_u16_masked(s, name, v, mk);
        // flowpath extension: a range no single mask expresses.
        let r = m.ports[i];
        if !r.is_any() {
            let _ = write!(s, ",{name}={}-{}", r.lo, r.hi);
        }
    }

    let (v, mk) = get(m, Field::TcpFlags);
    if mk != 0 {
        write_tcp_flags(s, v, mk);
    }
}

fn write_mac(s: &mut String, mac: &[u8; 6]) {
    let _ = write!(
        s,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
    );
}

fn write_action(s: &mut String, a: &Action) {
    let _ = match a {
        Action::Output(p) => write!(s, "output:{p}"),
        Action::InPort => write!(s, "IN_PORT"),
        Action::Controller { max_len, .. } => write!(s, "CONTROLLER:{max_len}"),
        Action::Normal => write!(s, "NORMAL"),
        Action::Flood => write!(s, "FLOOD"),
        Action::All => write!(s, "ALL"),
        Action::Table => write!(s, "TABLE"),
        Action::Group(g) => write!(s, "group:{g}"),
        Action::WriteMetadata { value, mask } if *mask == 0xff_ffff => {
            write!(s, "write_metadata:{value:#x}")
        }
        Action::WriteMetadata { value, mask } => write!(s, "write_metadata:{value:#x}/{mask:#x}"),
        Action::SetEthSrc(mac) => {
            s.push_str("mod_dl_src:");
            write_mac(s, mac);
            Ok(())
        }
        Action::SetEthDst(mac) => {
            s.push_str("mod_dl_dst:");
            write_mac(s, mac);
            Ok(())
        }
        Action::SetIpv4Src(a) => write!(s, "mod_nw_src:{}", Ipv4Addr::from(*a)),
        Action::SetIpv4Dst(a) => write!(s, "mod_nw_dst:{}", Ipv4Addr::from(*a)),
        Action::SetIpv6Src(a) => write!(s, "set_field:{}->ipv6_src", Ipv6Addr::from(*a)),
        Action::SetIpv6Dst(a) => write!(s, "set_field:{}->ipv6_dst", Ipv6Addr::from(*a)),
        Action::SetNwTos(t) => write!(s, "mod_nw_tos:{}", t & 0xfc),
        Action::SetTpSrc(p) => write!(s, "mod_tp_src:{p}"),
        Action::SetTpDst(p) => write!(s, "mod_tp_dst:{p}"),
        Action::PushVlan { tpid } => write!(s, "push_vlan:{tpid:#x}"),
        Action::PopVlan => write!(s, "strip_vlan"),
        Action::SetVlanVid(v) => write!(s, "mod_vlan_vid:{v}"),
        Action::SetVlanPcp(p) => write!(s, "mod_vlan_pcp:{p}"),
        Action::DecTtl => write!(s, "dec_ttl"),
        Action::CtClear => write!(s, "ct_clear"),
        Action::Ct(id) => {
            crate::format_ct::write_ct(s, id.spec());
            Ok(())
        }
        Action::SetTunnelDst(b) => match Action::tunnel_dst(*b) {
            std::net::IpAddr::V4(a) => write!(s, "set_field:{a}->tun_dst"),
            std::net::IpAddr::V6(a) => write!(s, "set_field:{a}->tun_ipv6_dst"),
        },
        Action::SetTunnel(id) => {
            s.push_str("set_tunnel:");
            write_c_hex(s, *id as u128);
            Ok(())
        }
    };
}

fn write_actions(s: &mut String, spec: &RuleSpec) {
    if spec.actions.is_empty()
        && spec.goto.is_none()
        && spec.write_actions.is_empty()
        && !spec.clear_actions
    {
        s.push_str("drop");
        return;
    }
    // Apply-actions, then the instructions in OVS's order.
    let mut first = true;
    let mut sep = |s: &mut String| {
        if !std::mem::take(&mut first) {
            s.push(',');
        }
    };
    for a in &spec.actions {
        sep(s);
        write_action(s, a);
    }
    if spec.clear_actions {
        sep(s);
        s.push_str("clear_actions");
    }
    if !spec.write_actions.is_empty() {
        sep(s);
        s.push_str("write_actions(");
        for (i, a) in spec.write_actions.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            write_action(s, a);
        }
        s.push(')');
    }
    if let Some(t) = spec.goto {
        sep(s);
        let _ = write!(s, "goto_table:{t}");
    }
}
