//! One explicit case per match field (and alias) and per protocol shorthand: the exact
//! key bits each produces, the canonical printed form, and the round trip; port ranges;
//! and the keywords around a match (table, priority, cookie, timeouts) with what each
//! command accepts of them.

use flowpath_flowsyntax::{format_flow, format_match, parse_flow, FlowCommand, DEFAULT_PRIORITY};
use flowpath_packet::Field;
use flowpath_pipeline::{Match, RuleSpec};

const M32: u128 = 0xffff_ffff;
const IP4: u128 = 0xffff_ffff << 96;
const ALL: u128 = u128::MAX;

fn conds(c: &[(Field, u128, u128)]) -> Match {
    c.iter().fold(Match::any(), |m, &(f, v, k)| m.with(f, v, k))
}

fn eth(t: u128) -> (Field, u128, u128) {
    (Field::EthType, t, 0xffff)
}

fn proto(p: u128) -> (Field, u128, u128) {
    (Field::NwProto, p, 0xff)
}

const IP: (Field, u128, u128) = (Field::EthType, 0x0800, 0xffff);
const IPV6: (Field, u128, u128) = (Field::EthType, 0x86dd, 0xffff);
const ARP: (Field, u128, u128) = (Field::EthType, 0x0806, 0xffff);
const TCP: (Field, u128, u128) = (Field::NwProto, 6, 0xff);
const UDP: (Field, u128, u128) = (Field::NwProto, 17, 0xff);

fn v4(a: [u8; 4]) -> u128 {
    (u32::from_be_bytes(a) as u128) << 96
}

/// A condition: field, value, mask.
type Cond = (Field, u128, u128);

/// (match text, expected conditions, expected `format_match` after `priority=32768,`).
fn field_cases() -> Vec<(&'static str, Vec<Cond>, &'static str)> {
    use Field as K;
    vec![
        ("in_port=7", vec![(K::InPort, 7, M32)], "in_port=7"),
        (
            "in_port=0xfffffffe",
            vec![(K::InPort, 0xffff_fffe, M32)],
            "in_port=4294967294",
        ),
        (
            "dl_src=00:11:22:33:44:55",
            vec![(K::EthSrc, 0x0011_2233_4455, 0xffff_ffff_ffff)],
            "dl_src=00:11:22:33:44:55",
        ),
        (
            "eth_src=00:11:22:33:44:55/ff:ff:ff:00:00:00",
            vec![(K::EthSrc, 0x0011_2200_0000, 0xffff_ff00_0000)],
            "dl_src=00:11:22:00:00:00/ff:ff:ff:00:00:00",
        ),
        (
            "dl_dst=01:00:5e:00:00:00/01:00:00:00:00:00",
            vec![(K::EthDst, 0x0100_0000_0000, 0x0100_0000_0000)],
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
        ),
        (
            "eth_dst=AA:bb:c:d:e:F",
            vec![(K::EthDst, 0xaabb_0c0d_0e0f, 0xffff_ffff_ffff)],
            "dl_dst=aa:bb:0c:0d:0e:0f",
        ),
        ("dl_type=0x88cc", vec![eth(0x88cc)], "dl_type=0x88cc"),
        ("eth_type=2048", vec![IP], "ip"),
        (
            "dl_vlan=10",
            vec![(K::VlanTci, 0x100a, 0x1fff)],
            "dl_vlan=10",
        ),
        (
            "dl_vlan=0xffff",
            vec![(K::VlanTci, 0, 0xffff)],
            "vlan_tci=0x0000",
        ),
        (
            "dl_vlan_pcp=5",
            vec![(K::VlanTci, 0xb000, 0xf000)],
            "dl_vlan_pcp=5",
        ),
        (
            "dl_vlan=4095,dl_vlan_pcp=7",
            vec![(K::VlanTci, 0xffff, 0xffff)],
            "dl_vlan=4095,dl_vlan_pcp=7",
        ),
        (
            "vlan_tci=0x1000/0x1000",
            vec![(K::VlanTci, 0x1000, 0x1000)],
            "vlan_tci=0x1000/0x1000",
        ),
        (
            "vlan_tci=0x6005",
            vec![(K::VlanTci, 0x6005, 0xffff)],
            "vlan_tci=0x6005",
        ),
        (
            "vlan_tci=0x7005",
            vec![(K::VlanTci, 0x7005, 0xffff)],
            "dl_vlan=5,dl_vlan_pcp=3",
        ),
        (
            "vlan_tci=0",
            vec![(K::VlanTci, 0, 0xffff)],
            "vlan_tci=0x0000",
        ),
        (
            "vlan_vid=0x1064",
            vec![(K::VlanTci, 0x1064, 0x1fff)],
            "dl_vlan=100",
        ),
        (
            "vlan_vid=0",
            vec![(K::VlanTci, 0, 0x1fff)],
            "vlan_tci=0x0000/0x1fff",
        ),
        (
            "vlan_vid=0x1000/0x1000",
            vec![(K::VlanTci, 0x1000, 0x1000)],
            "vlan_tci=0x1000/0x1000",
        ),
        (
            "vlan_pcp=7",
            vec![(K::VlanTci, 0xf000, 0xf000)],
            "dl_vlan_pcp=7",
        ),
        (
            "dl_vlan1=20",
            vec![(K::VlanInnerTci, 0x1014, 0x1fff)],
            "dl_vlan1=20",
        ),
        (
            "dl_vlan_pcp1=1",
            vec![(K::VlanInnerTci, 0x3000, 0xf000)],
            "dl_vlan_pcp1=1",
        ),
        (
            "vlan_tci1=0x0000",
            vec![(K::VlanInnerTci, 0, 0xffff)],
            "vlan_tci1=0x0000",
        ),
        (
            "ip,nw_src=10.1.2.3/16",
            vec![IP, (K::Ipv4Src, 0x0a01_0000, 0xffff_0000)],
            "ip,nw_src=10.1.0.0/16",
        ),
        (
            "ip,nw_dst=10.0.0.1/255.0.0.255",
            vec![IP, (K::Ipv4Dst, 0x0a00_0001, 0xff00_00ff)],
            "ip,nw_dst=10.0.0.1/255.0.0.255",
        ),
        (
            "ip,nw_dst=10.0.0.1/255.255.255.0",
            vec![IP, (K::Ipv4Dst, 0x0a00_0000, 0xffff_ff00)],
            "ip,nw_dst=10.0.0.0/24",
        ),
        ("ip,nw_src=1.2.3.4/0", vec![IP], "ip"),
        (
            "ip,ip_src=1.2.3.4",
            vec![IP, (K::Ipv4Src, 0x0102_0304, M32)],
            "ip,nw_src=1.2.3.4",
        ),
        (
            "ip,ipv4_src=1.2.3.4/32",
            vec![IP, (K::Ipv4Src, 0x0102_0304, M32)],
            "ip,nw_src=1.2.3.4",
        ),
        (
            "ip,ip_dst=5.6.7.8",
            vec![IP, (K::Ipv4Dst, 0x0506_0708, M32)],
            "ip,nw_dst=5.6.7.8",
        ),
        (
            "ip,ipv4_dst=5.6.7.0/24",
            vec![IP, (K::Ipv4Dst, 0x0506_0700, 0xffff_ff00)],
            "ip,nw_dst=5.6.7.0/24",
        ),
        (
            "arp,nw_src=10.0.0.1",
            vec![ARP, (K::Ipv4Src, 0x0a00_0001, M32)],
            "arp,arp_spa=10.0.0.1",
        ),
        (
            "arp,nw_dst=10.0.0.2",
            vec![ARP, (K::Ipv4Dst, 0x0a00_0002, M32)],
            "arp,arp_tpa=10.0.0.2",
        ),
        (
            "arp,arp_spa=10.0.0.0/8",
            vec![ARP, (K::Ipv4Src, 0x0a00_0000, 0xff00_0000)],
            "arp,arp_spa=10.0.0.0/8",
        ),
        (
            "arp,arp_tpa=10.0.0.9",
            vec![ARP, (K::Ipv4Dst, 0x0a00_0009, M32)],
            "arp,arp_tpa=10.0.0.9",
        ),
        ("arp,arp_op=2", vec![ARP, proto(2)], "arp,arp_op=2"),
        ("arp,nw_proto=1", vec![ARP, proto(1)], "arp,arp_op=1"),
        (
            "ipv6,ipv6_src=2001:db8::/32",
            vec![IPV6, (K::Ipv6Src, 0x2001_0db8 << 96, 0xffff_ffff << 96)],
            "ipv6,ipv6_src=2001:db8::/32",
        ),
        (
            "ipv6,ipv6_dst=fe80::1",
            vec![IPV6, (K::Ipv6Dst, (0xfe80 << 112) | 1, ALL)],
            "ipv6,ipv6_dst=fe80::1",
        ),
        (
            "ipv6,ipv6_dst=fe80::1/ffff::ffff",
            vec![
                IPV6,
                (K::Ipv6Dst, (0xfe80 << 112) | 1, (0xffff << 112) | 0xffff),
            ],
            "ipv6,ipv6_dst=fe80::1/ffff::ffff",
        ),
        ("ip,nw_proto=47", vec![IP, proto(47)], "ip,nw_proto=47"),
        ("ip,nw_proto=6", vec![IP, TCP], "tcp"),
        ("ipv6,ip_proto=58", vec![IPV6, proto(58)], "icmp6"),
        (
            "ip,nw_tos=184",
            vec![IP, (K::NwTos, 184, 0xfc)],
            "ip,nw_tos=184",
        ),
        (
            "ipv6,ip_dscp=46",
            vec![IPV6, (K::NwTos, 184, 0xfc)],
            "ipv6,nw_tos=184",
        ),
        ("ip,nw_ecn=3", vec![IP, (K::NwTos, 3, 3)], "ip,nw_ecn=3"),
        (
            "ip,ip_ecn=1,ip_dscp=63",
            vec![IP, (K::NwTos, 0xfd, 0xff)],
            "ip,nw_tos=252,nw_ecn=1",
        ),
        (
            "ip,nw_ttl=64",
            vec![IP, (K::NwTtl, 64, 0xff)],
            "ip,nw_ttl=64",
        ),
        (
            "ip,ip_frag=no",
            vec![IP, (K::NwFrag, 0, 3)],
            "ip,nw_frag=no",
        ),
        (
            "ip,ip_frag=yes",
            vec![IP, (K::NwFrag, 1, 1)],
            "ip,nw_frag=yes",
        ),
        (
            "ip,ip_frag=first",
            vec![IP, (K::NwFrag, 1, 3)],
            "ip,nw_frag=first",
        ),
        (
            "ip,ip_frag=later",
            vec![IP, (K::NwFrag, 3, 3)],
            "ip,nw_frag=later",
        ),
        (
            "ipv6,nw_frag=not_later",
            vec![IPV6, (K::NwFrag, 0, 2)],
            "ipv6,nw_frag=not_later",
        ),
        (
            "ip,ip_frag=0x2/0x2",
            vec![IP, (K::NwFrag, 2, 2)],
            "ip,nw_frag=0x2/0x2",
        ),
        (
            "ip,ip_frag=0/1",
            vec![IP, (K::NwFrag, 0, 1)],
            "ip,nw_frag=0x0/0x1",
        ),
        (
            "tcp,tp_src=80",
            vec![IP, TCP, (K::TpSrc, 80, 0xffff)],
            "tcp,tp_src=80",
        ),
        (
            "udp,tp_dst=53",
            vec![IP, UDP, (K::TpDst, 53, 0xffff)],
            "udp,tp_dst=53",
        ),
        (
            "tcp,tcp_src=0x400/0xfc00",
            vec![IP, TCP, (K::TpSrc, 0x400, 0xfc00)],
            "tcp,tp_src=0x400/0xfc00",
        ),
        (
            "tcp6,tcp_dst=443",
            vec![IPV6, TCP, (K::TpDst, 443, 0xffff)],
            "tcp6,tp_dst=443",
        ),
        (
            "udp,udp_src=68",
            vec![IP, UDP, (K::TpSrc, 68, 0xffff)],
            "udp,tp_src=68",
        ),
        (
            "udp6,udp_dst=547",
            vec![IPV6, UDP, (K::TpDst, 547, 0xffff)],
            "udp6,tp_dst=547",
        ),
        (
            "tcp,tcp_flags=+syn-ack",
            vec![IP, TCP, (K::TcpFlags, 2, 0x12)],
            "tcp,tcp_flags=+syn-ack",
        ),
        (
            "tcp,tcp_flags=syn|ack",
            vec![IP, TCP, (K::TcpFlags, 0x12, 0xfff)],
            "tcp,tcp_flags=syn|ack",
        ),
        (
            "tcp,tcp_flags=0x12/0x12",
            vec![IP, TCP, (K::TcpFlags, 0x12, 0x12)],
            "tcp,tcp_flags=+syn+ack",
        ),
        (
            "tcp6,tcp_flags=0x002",
            vec![IPV6, TCP, (K::TcpFlags, 2, 0xfff)],
            "tcp6,tcp_flags=syn",
        ),
        (
            "tcp,tcp_flags=0",
            vec![IP, TCP, (K::TcpFlags, 0, 0xfff)],
            "tcp,tcp_flags=0",
        ),
        (
            "tcp,tcp_flags=+[800]-ns",
            vec![IP, TCP, (K::TcpFlags, 0x800, 0x900)],
            "tcp,tcp_flags=-ns+[800]",
        ),
        (
            "icmp,icmp_type=8,icmp_code=0",
            vec![IP, proto(1), (K::TpSrc, 8, 0xffff), (K::TpDst, 0, 0xffff)],
            "icmp,icmp_type=8,icmp_code=0",
        ),
        (
            "icmp6,icmpv6_type=135,icmpv6_code=0",
            vec![
                IPV6,
                proto(58),
                (K::TpSrc, 135, 0xffff),
                (K::TpDst, 0, 0xffff),
            ],
            "icmp6,icmp_type=135,icmp_code=0",
        ),
        (
            "icmp6,icmp_type=128",
            vec![IPV6, proto(58), (K::TpSrc, 128, 0xffff)],
            "icmp6,icmp_type=128",
        ),
        (
            "icmp,icmp_type=3/0xff",
            vec![IP, proto(1), (K::TpSrc, 3, 0xff)],
            "icmp,icmp_type=0x3/0xff",
        ),
        ("tun_id=0x5", vec![(K::TunId, 5, 0xff_ffff)], "tun_id=0x5"),
        ("tun_id=0", vec![(K::TunId, 0, 0xff_ffff)], "tun_id=0"),
        (
            "tunnel_id=0x100/0xf00",
            vec![(K::TunId, 0x100, 0xf00)],
            "tun_id=0x100/0xf00",
        ),
        (
            "tun_id=16777215",
            vec![(K::TunId, 0xff_ffff, 0xff_ffff)],
            "tun_id=0xffffff",
        ),
        (
            "tun_src=192.168.1.0/24",
            vec![(K::TunSrc, v4([192, 168, 1, 0]), 0xffff_ff00 << 96)],
            "tun_src=192.168.1.0/24",
        ),
        (
            "tun_dst=10.0.0.1",
            vec![(K::TunDst, v4([10, 0, 0, 1]), IP4)],
            "tun_dst=10.0.0.1",
        ),
        (
            "tun_ipv6_src=2001:db8::1",
            vec![(K::TunSrc, (0x2001_0db8 << 96) | 1, ALL)],
            "tun_ipv6_src=2001:db8::1",
        ),
        (
            "tun_ipv6_dst=fe80::/64",
            vec![(K::TunDst, 0xfe80 << 112, ((1u128 << 64) - 1) << 64)],
            "tun_ipv6_dst=fe80::/64",
        ),
        // Documented: an IPv6 tunnel match that only looks at the first 4 bytes is the
        // same key bits as an IPv4 one, and prints in the IPv4 form.
        (
            "tun_ipv6_dst=fe80::/10",
            vec![(K::TunDst, 0xfe80 << 112, 0xffc0 << 112)],
            "tun_dst=254.128.0.0/10",
        ),
        (
            "tun_flags=1/1",
            vec![(K::TunFlags, 1, 1)],
            "tun_flags=0x1/0x1",
        ),
        ("tun_flags=3", vec![(K::TunFlags, 3, 0xff)], "tun_flags=0x3"),
        // Protocol shorthands.
        ("ip", vec![IP], "ip"),
        ("ipv4", vec![IP], "ip"),
        ("ip4", vec![IP], "ip"),
        ("tcp", vec![IP, TCP], "tcp"),
        ("udp", vec![IP, UDP], "udp"),
        ("icmp", vec![IP, proto(1)], "icmp"),
        ("sctp", vec![IP, proto(132)], "sctp"),
        ("arp", vec![ARP], "arp"),
        ("ipv6", vec![IPV6], "ipv6"),
        ("ip6", vec![IPV6], "ipv6"),
        ("tcp6", vec![IPV6, TCP], "tcp6"),
        ("udp6", vec![IPV6, UDP], "udp6"),
        ("icmp6", vec![IPV6, proto(58)], "icmp6"),
        ("sctp6", vec![IPV6, proto(132)], "sctp6"),
        ("rarp", vec![eth(0x8035)], "rarp"),
        ("mpls", vec![eth(0x8847)], "mpls"),
        ("mplsm", vec![eth(0x8848)], "mplsm"),
        ("dl_type=0x0800,nw_proto=17", vec![IP, UDP], "udp"),
        ("", vec![], ""),
    ]
}

#[test]
fn every_field_alias_and_shorthand() {
    for (text, c, printed) in field_cases() {
        let line = format!("{text} actions=drop");
        let f = parse_flow(&line, FlowCommand::Add).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(f.spec.matches, conds(&c), "{line}");
        let want = if printed.is_empty() {
            "priority=32768".to_string()
        } else {
            format!("priority=32768,{printed}")
        };
        assert_eq!(format_match(&f.spec), want, "{line}");
        let back = parse_flow(&format_flow(&f.spec), FlowCommand::Add).unwrap();
        assert_eq!(back.spec, f.spec, "{line}");
    }
}

#[test]
fn keywords() {
    let f = parse_flow(
        "table=3, priority=7 cookie=0x1f idle_timeout=10 hard_timeout=0x20 ip actions=drop",
        FlowCommand::Add,
    )
    .unwrap();
    let mut want = RuleSpec::new(3, 7, conds(&[IP]));
    want.cookie = 0x1f;
    want.idle_timeout = 10;
    want.hard_timeout = 32;
    assert_eq!(f.spec, want);
    assert_eq!(
        (f.cookie_mask, f.table_given, f.priority_given),
        (u64::MAX, true, true)
    );
    assert_eq!(
        format_flow(&f.spec),
        "cookie=0x1f, table=3, idle_timeout=10, hard_timeout=32, priority=7,ip actions=drop"
    );
    let f = parse_flow("actions=drop", FlowCommand::Add).unwrap();
    assert_eq!(f.spec, RuleSpec::new(0, DEFAULT_PRIORITY, Match::any()));
    assert_eq!(
        (f.cookie_mask, f.table_given, f.priority_given),
        (0, false, false)
    );
    assert_eq!(format_flow(&f.spec), "priority=32768 actions=drop");
    // `action=` and `:` as OVS accept them.
    let f = parse_flow("priority:5,in_port:2 action=output:3", FlowCommand::Add).unwrap();
    assert_eq!(
        format_flow(&f.spec),
        "priority=5,in_port=2 actions=output:3"
    );
}

#[test]
fn commands() {
    use FlowCommand::*;
    // Modify: cookie=V sets the new cookie, cookie=V/M selects.
    let f = parse_flow("cookie=5 ip actions=output:1", Modify).unwrap();
    assert_eq!((f.spec.cookie, f.cookie_mask), (5, 0));
    let f = parse_flow("cookie=0x15/0xf0 ip actions=output:1", ModifyStrict).unwrap();
    assert_eq!((f.spec.cookie, f.cookie_mask), (0x10, 0xf0));
    // Delete: no actions; a cookie needs a mask; -1 is all ones.
    let f = parse_flow("cookie=7/-1,table=2,ip", Delete).unwrap();
    assert_eq!(
        (f.spec.cookie, f.cookie_mask, f.table_given),
        (7, u64::MAX, true)
    );
    assert!(f.spec.actions.is_empty() && f.spec.goto.is_none());
    let f = parse_flow("priority=9,tcp,tp_dst=80", DeleteStrict).unwrap();
    assert!(f.priority_given && !f.table_given);
    assert_eq!(f.spec.priority, 9);
    let f = parse_flow("", Delete).unwrap();
    assert_eq!(f.spec, RuleSpec::new(0, DEFAULT_PRIORITY, Match::any()));
    assert_eq!(f.cookie_mask, 0);
    for (text, cmd) in [
        ("ip actions=drop", Delete),
        ("ip actions=drop", DeleteStrict),
        ("ip", Add),
        ("ip", Modify),
        ("ip", ModifyStrict),
        ("cookie=1 ip", Delete),
        ("idle_timeout=5 ip", DeleteStrict),
        ("cookie=1/1 ip actions=drop", Add),
    ] {
        assert!(parse_flow(text, cmd).is_err(), "{text} {cmd:?}");
    }
}

/// flowpath's port-range extension: a range stays a range, a range that is one prefix block
/// becomes a mask, both print back in a form that parses to the same match.
#[test]
fn port_ranges() {
    use flowpath_pipeline::PortRange;
    let m = |t: &str| parse_flow(t, FlowCommand::Add).map(|p| p.spec);
    let s = m("tcp,tp_dst=1024-65535,tp_src=7-9 actions=drop").unwrap();
    assert_eq!(
        s.matches.ports[1],
        PortRange {
            lo: 1024,
            hi: 65535
        }
    );
    assert_eq!(s.matches.ports[0], PortRange { lo: 7, hi: 9 });
    assert_eq!(s.matches.mask.get(Field::TpDst), 0);
    let text = format_flow(&s);
    assert!(
        text.contains("tp_src=7-9") && text.contains("tp_dst=1024-65535"),
        "{text}"
    );
    assert_eq!(m(&text).unwrap().matches, s.matches);

    let s = m("udp,tp_dst=1024-2047 actions=drop").unwrap();
    assert!(!s.matches.has_ranges());
    assert_eq!(s.matches.mask.get(Field::TpDst), 0xfc00);
    assert_eq!(s.matches.value.get(Field::TpDst), 1024);
    assert_eq!(
        m("udp,tp_dst=80-80 actions=drop")
            .unwrap()
            .matches
            .mask
            .get(Field::TpDst),
        0xffff
    );

    for bad in [
        "tcp,tp_dst=9-5",
        "tcp,tp_dst=1-70000",
        "tcp,tp_dst=-5",
        "tcp,tp_dst=a-b",
    ] {
        let e = m(&format!("{bad} actions=drop")).unwrap_err();
        assert_eq!(e.column, 5, "{bad}: {e}");
        assert!(e.message.contains("LOW-HIGH"), "{bad}: {e}");
    }
    // A range needs the protocol, like any port match.
    assert!(m("ip,tp_dst=1-5 actions=drop").is_err());
}
