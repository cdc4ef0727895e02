//! OVS's prerequisites: what a match field needs the rest of the match to say (e.g.
//! `tp_dst` needs `tcp` or `udp`), checked after all fields, naming the first offender.

use super::*;

/// What a field needs the rest of the match to say (OVS's prerequisites).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Pre {
    None,
    IpOrArp,
    Ip,
    Ipv6,
    Arp,
    IpAny,
    IpAnyOrArp,
    TcpUdp,
    Tcp,
    Udp,
    IcmpAny,
    Icmp6,
    /// The connection's tuple: a `ct_state` that says the tracker knows the connection.
    CtValid,
}

pub(super) fn prereq(f: F) -> Pre {
    match f {
        F::NwSrc | F::NwDst => Pre::IpOrArp,
        F::IpSrc | F::IpDst => Pre::Ip,
        F::ArpSpa | F::ArpTpa | F::ArpOp => Pre::Arp,
        F::Ipv6Src | F::Ipv6Dst => Pre::Ipv6,
        F::NwProto => Pre::IpAnyOrArp,
        F::NwTos | F::IpDscp | F::NwEcn | F::NwTtl | F::IpFrag => Pre::IpAny,
        F::TpSrc | F::TpDst => Pre::TcpUdp,
        F::TcpSrc | F::TcpDst | F::TcpFlags => Pre::Tcp,
        F::UdpSrc | F::UdpDst => Pre::Udp,
        F::IcmpType | F::IcmpCode => Pre::IcmpAny,
        F::Icmpv6Type | F::Icmpv6Code => Pre::Icmp6,
        F::CtNwSrc
        | F::CtNwDst
        | F::CtIpv6Src
        | F::CtIpv6Dst
        | F::CtNwProto
        | F::CtTpSrc
        | F::CtTpDst => Pre::CtValid,
        _ => Pre::None,
    }
}

impl Pre {
    /// Is the prerequisite met by a match on this type, protocol and `ct_state` (value,
    /// mask)?
    pub(super) fn ok(self, eth: Option<u16>, proto: Option<u8>, ct: (u8, u8)) -> bool {
        let ip4 = eth == Some(ethertype::IPV4);
        let ip6 = eth == Some(ethertype::IPV6);
        let arp = eth == Some(ethertype::ARP);
        let ip = ip4 || ip6;
        match self {
            Pre::None => true,
            Pre::IpOrArp => ip4 || arp,
            Pre::Ip => ip4,
            Pre::Ipv6 => ip6,
            Pre::Arp => arp,
            Pre::IpAny => ip,
            Pre::IpAnyOrArp => ip || arp,
            Pre::TcpUdp => ip && matches!(proto, Some(ipproto::TCP | ipproto::UDP)),
            Pre::Tcp => ip && proto == Some(ipproto::TCP),
            Pre::Udp => ip && proto == Some(ipproto::UDP),
            Pre::IcmpAny => {
                (ip4 && proto == Some(ipproto::ICMP)) || (ip6 && proto == Some(ipproto::ICMPV6))
            }
            Pre::Icmp6 => ip6 && proto == Some(ipproto::ICMPV6),
            Pre::CtValid => super::ct::ct_valid(ct.0, ct.1),
        }
    }

    /// What is required, and the shorthand to suggest adding.
    pub(super) fn describe(self) -> (&'static str, &'static str) {
        match self {
            Pre::None => ("nothing", ""),
            Pre::IpOrArp => ("ip or arp", "ip"),
            Pre::Ip => ("ip", "ip"),
            Pre::Ipv6 => ("ipv6", "ipv6"),
            Pre::Arp => ("arp", "arp"),
            Pre::IpAny => ("ip or ipv6", "ip"),
            Pre::IpAnyOrArp => ("ip, ipv6 or arp", "ip"),
            Pre::TcpUdp => ("tcp, udp, tcp6 or udp6", "tcp"),
            Pre::Tcp => ("tcp or tcp6", "tcp"),
            Pre::Udp => ("udp or udp6", "udp"),
            Pre::IcmpAny => ("icmp or icmp6", "icmp"),
            Pre::Icmp6 => ("icmp6", "icmp6"),
            Pre::CtValid => (
                "a ct_state that says the connection is tracked and valid (+new, +est, +rel, +rpl, +snat or +dnat, or +trk-inv)",
                "ct_state=+trk+est",
            ),
        }
    }
}

/// How a flow's ethertype and IP protocol read, for messages: `tcp6`, `ip,nw_proto=47`,
/// `dl_type=0x88cc`.
pub(super) fn describe_protocol(eth: u16, proto: Option<u8>) -> String {
    if let Some(&(n, _, _)) = names::PROTOCOLS
        .iter()
        .find(|&&(_, e, p)| e == eth && p == proto && p.is_some())
    {
        return n.to_string();
    }
    let base = match eth {
        ethertype::IPV4 => "ip".to_string(),
        ethertype::IPV6 => "ipv6".to_string(),
        ethertype::ARP => "arp".to_string(),
        _ => format!("dl_type=0x{eth:04x}"),
    };
    match proto {
        Some(p) if eth == ethertype::ARP => format!("{base},arp_op={p}"),
        Some(p) => format!("{base},nw_proto={p}"),
        None => base,
    }
}

impl<'a> Parser<'a> {
    /// The first field (by column) whose prerequisites the match does not meet.
    pub(super) fn check_prereqs(&self) -> Result<(), SyntaxError> {
        let full = |f: Field| self.m.mask.get(f) == f.full_mask();
        let eth = full(Field::EthType).then(|| self.m.value.get(Field::EthType) as u16);
        let proto = full(Field::NwProto).then(|| self.m.value.get(Field::NwProto) as u8);
        let mut worst: Option<(usize, Pre, Rec)> = None;
        for s in 0..slot::N {
            if self.used & (1 << s) == 0 {
                continue;
            }
            let r = self.recs[s];
            let Some(f) = f_from_u8(r.f) else { continue };
            let pre = prereq(f);
            if !pre.ok(eth, proto, self.ct_state()) && worst.is_none_or(|(at, _, _)| r.at < at) {
                worst = Some((r.at, pre, r));
            }
        }
        let Some((at, pre, r)) = worst else {
            return Ok(());
        };
        let name = &self.text[r.at..r.end];
        let (need, add) = pre.describe();
        Err(match eth {
            _ if pre == Pre::CtValid => self.err(at, |c| {
                format!("{name} at column {c} requires {need} (add '{add},' before it)")
            }),
            None => self.err(at, |c| {
                format!("{name} at column {c} requires {need} (add '{add},' before it)")
            }),
            Some(e) => {
                let has = describe_protocol(e, proto);
                self.err(at, |c| {
                    format!("{name} at column {c} requires {need}, but the flow matches {has}")
                })
            }
        })
    }
}
