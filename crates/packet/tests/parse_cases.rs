//! Hand-built valid frames for every protocol combination the parser knows, VXLAN
//! tunnels included, checking the whole key (every field not listed must be zero) and
//! the header offsets.

mod parse_support;

use flowpath_packet::key::{
    Field, FlowKey, FRAG_ANY, FRAG_LATER, TUN_IPV6, TUN_PRESENT, VLAN_PRESENT,
};
use flowpath_packet::{parse, DropReason, ParseOptions};
use parse_support::{
    addr, arp, eth, ext, frag6, icmp, ipv4, ipv6, key, meta, ok, run, tcp, udp, v4_fields,
    v6_fields, vxlan, with, IN_PORT, V4, V4_DST, V4_SRC, V6_DST, V6_SRC,
};

// ---- valid packets ----

#[test]
fn ipv4_udp_untagged_with_ethernet_padding() {
    let mut f = eth(&[], 0x0800, &ipv4(17, &udp(1234, 53, b"q")));
    f.resize(60, 0xee); // minimum frame: padding after the IP packet is not payload
    let (k, m) = ok(&f);
    let want = with(v4_fields(17), &[(Field::TpSrc, 1234), (Field::TpDst, 53)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn ipv4_tcp_one_tag_keeps_pcp_and_vid_and_sets_present() {
    // DEI set in the frame: OVS's convention replaces it with "present".
    let f = eth(
        &[(0x8100, 0xb123)],
        0x0800,
        &ipv4(6, &tcp(80, 40000, 0x0812, &[], b"GET")),
    );
    let (k, m) = ok(&f);
    let want = with(
        v4_fields(6),
        &[
            (Field::VlanTci, 0xb123),
            (Field::TpSrc, 80),
            (Field::TpDst, 40000),
            (Field::TcpFlags, 0x812),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 38, 1));
    assert_eq!(k.get(Field::VlanTci) as u16 & VLAN_PRESENT, VLAN_PRESENT);
}

#[test]
fn ipv4_udp_two_tags_qinq() {
    for outer_tpid in [0x88a8, 0x8100] {
        let f = eth(
            &[(outer_tpid, 0x2005), (0x8100, 0x0064)],
            0x0800,
            &ipv4(17, &udp(9, 10, &[])),
        );
        let (k, m) = ok(&f);
        let want = with(
            v4_fields(17),
            &[
                (Field::VlanTci, 0x3005),
                (Field::VlanInnerTci, 0x1064),
                (Field::TpSrc, 9),
                (Field::TpDst, 10),
            ],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 22, 42, 2));
    }
}

#[test]
fn arp_request_and_reply() {
    for op in [1u16, 2] {
        let (k, m) = ok(&eth(&[], 0x0806, &arp(op)));
        let want = [
            (Field::EthType, 0x0806),
            (Field::NwProto, op.into()),
            (Field::Ipv4Src, addr(V4_SRC)),
            (Field::Ipv4Dst, addr(V4_DST)),
        ];
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 0, 0));
    }
}

#[test]
fn arp_in_a_vlan() {
    let (k, m) = ok(&eth(&[(0x8100, 7)], 0x0806, &arp(0x0102)));
    let want = [
        (Field::EthType, 0x0806),
        (Field::VlanTci, 0x1007),
        (Field::NwProto, 2), // low byte of the opcode
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 0, 1));
}

#[test]
fn ipv4_options_move_l4() {
    for words in [1usize, 10] {
        let mut v4 = V4::new(6);
        v4.options = vec![0x01; words * 4];
        // TCP with 12 bytes of options.
        let f = eth(
            &[],
            0x0800,
            &v4.build(&tcp(22, 2222, 0x018, &[1; 12], b"x")),
        );
        let (k, m) = ok(&f);
        let want = with(
            v4_fields(6),
            &[
                (Field::TpSrc, 22),
                (Field::TpDst, 2222),
                (Field::TcpFlags, 0x018),
            ],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 34 + 4 * words as u16, 0));
    }
}

#[test]
fn ipv4_first_fragment_keeps_ports() {
    let mut v4 = V4::new(17);
    v4.frag = 0x2000; // MF, offset 0
    let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&udp(5, 6, &[0; 16]))));
    let want = with(
        v4_fields(17),
        &[
            (Field::NwFrag, FRAG_ANY.into()),
            (Field::TpSrc, 5),
            (Field::TpDst, 6),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn a_first_fragments_udp_length_covers_the_whole_datagram() {
    // UDP says 1408 bytes; this fragment carries 24 of them (scapy's fragment() makes
    // these; an unfragmented packet with that length is still udp_bad_length).
    let mut u = udp(5, 6, &[0; 16]);
    u[4..6].copy_from_slice(&1408u16.to_be_bytes());
    let mut v4 = V4::new(17);
    v4.frag = 0x2000;
    let (k, _) = ok(&eth(&[], 0x0800, &v4.build(&u)));
    assert_eq!((k.get(Field::TpSrc), k.get(Field::TpDst)), (5, 6));
    assert_eq!(
        run(&eth(&[], 0x0800, &ipv4(17, &u)), &ParseOptions::default()).unwrap_err(),
        DropReason::UdpBadLength
    );
}

#[test]
fn arp_of_other_hardware_or_protocol_types_is_keyed_on_the_ethertype() {
    // Not Ethernet/IPv4 ARP: a valid frame (tshark dissects it), keyed as OVS keys it.
    for (at, v) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16)] {
        let mut a = arp(1);
        a[at] = v;
        let (k, m) = ok(&eth(&[], 0x0806, &a));
        assert_eq!(k, key(&[(Field::EthType, 0x0806)]), "byte {at} = {v}");
        assert_eq!(m, meta(0, 14, 0, 0));
    }
    // Such an ARP is as long as its sizes say, which may be shorter than Ethernet/IPv4's
    // 28 bytes (tshark dissects this one cleanly; it came from randpkt): still valid.
    let short = [0x25, 0x73, 0x00, 0x61, 0x00, 0x01, 0xdb, 0xa6, 0x43, 0x90];
    let (k, _) = ok(&eth(&[], 0x0806, &short));
    assert_eq!(k, key(&[(Field::EthType, 0x0806)]));
    // Shorter than the fixed 8 bytes is truncated whatever it is.
    assert_eq!(
        run(&eth(&[], 0x0806, &short[..7]), &ParseOptions::default()).map(|_| ()),
        Err(DropReason::ArpTruncated)
    );
}

#[test]
fn ipv4_later_fragments_have_no_l4() {
    // Middle fragment (MF + offset) and last fragment (offset only). The payload would
    // be a bad UDP header: it must not be looked at.
    for frag in [0x2000 | 185, 370] {
        let mut v4 = V4::new(17);
        v4.frag = frag;
        let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&[0xff; 3])));
        let want = with(
            v4_fields(17),
            &[(Field::NwFrag, (FRAG_ANY | FRAG_LATER).into())],
        );
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 14, 0, 0));
    }
}

#[test]
fn ipv4_icmp() {
    let (k, m) = ok(&eth(&[], 0x0800, &ipv4(1, &icmp(3, 13))));
    let want = with(v4_fields(1), &[(Field::TpSrc, 3), (Field::TpDst, 13)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn unknown_l4_and_wrong_family_icmp_are_not_parsed() {
    for (proto, payload) in [(47u8, vec![0u8; 4]), (58, icmp(128, 0)), (132, vec![])] {
        let (k, m) = ok(&eth(&[], 0x0800, &ipv4(proto, &payload)));
        assert_eq!(k, key(&v4_fields(proto)), "proto {proto}");
        assert_eq!(m, meta(0, 14, 0, 0));
    }
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(1, &icmp(8, 0))));
    assert_eq!(k, key(&v6_fields(1)));
    assert_eq!(m, meta(0, 14, 0, 0));
}

#[test]
fn non_ip_ethertypes_are_keyed_on_the_ethertype_only() {
    // An 802.3 length (below 0x0600) is keyed as 0x05ff, as OVS keys it.
    for (etype, keyed) in [
        (0x88cc_u16, 0x88cc_u16),
        (0x0050, 0x05ff),
        (0x05ff, 0x05ff),
        (0x8847, 0x8847),
    ] {
        let (k, m) = ok(&eth(&[(0x8100, 1)], etype, &[0xab; 40]));
        let want = [(Field::EthType, keyed.into()), (Field::VlanTci, 0x1001)];
        assert_eq!(k, key(&want));
        assert_eq!(m, meta(0, 0, 0, 1));
    }
}

#[test]
fn ipv6_tcp_and_udp() {
    let (k, m) = ok(&eth(
        &[],
        0x86dd,
        &ipv6(6, &tcp(443, 5555, 0xfff, &[], &[])),
    ));
    let want = with(
        v6_fields(6),
        &[
            (Field::TpSrc, 443),
            (Field::TpDst, 5555),
            (Field::TcpFlags, 0xfff),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54, 0));

    let (k, m) = ok(&eth(
        &[(0x8100, 0xe0ff)],
        0x86dd,
        &ipv6(17, &udp(1, 2, b"a")),
    ));
    let want = with(
        v6_fields(17),
        &[
            (Field::VlanTci, 0xf0ff),
            (Field::TpSrc, 1),
            (Field::TpDst, 2),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 18, 58, 1));
}

#[test]
fn ipv6_icmpv6() {
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(58, &icmp(135, 0))));
    let want = with(v6_fields(58), &[(Field::TpSrc, 135)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54, 0));
}

#[test]
fn ipv6_extension_chain_to_udp() {
    // hop-by-hop (8) -> routing (24) -> destination options (16) -> fragment (8, first) -> UDP
    let payload = ext(
        43,
        0,
        &ext(
            60,
            2,
            &ext(44, 1, &frag6(17, 0, true, &udp(4000, 4001, &[7; 9]))),
        ),
    );
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(0, &payload)));
    let want = with(
        v6_fields(17),
        &[
            (Field::NwFrag, FRAG_ANY.into()),
            (Field::TpSrc, 4000),
            (Field::TpDst, 4001),
        ],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54 + 8 + 24 + 16 + 8, 0));
}

#[test]
fn ipv6_unfragmented_fragment_header_and_dstopts_to_tcp() {
    // An "atomic" fragment (offset 0, no M) is not a fragment.
    let payload = frag6(60, 0, false, &ext(6, 0, &tcp(1, 2, 0x002, &[], &[])));
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(44, &payload)));
    let want = with(
        v6_fields(6),
        &[(Field::TpSrc, 1), (Field::TpDst, 2), (Field::TcpFlags, 2)],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 70, 0));
}

#[test]
fn ipv6_later_fragment_records_next_header_and_stops() {
    let payload = ext(44, 0, &frag6(58, 100, false, &[0xff; 5]));
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(0, &payload)));
    let want = with(
        v6_fields(58),
        &[(Field::NwFrag, (FRAG_ANY | FRAG_LATER).into())],
    );
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 0, 0));
}

#[test]
fn ipv6_no_next_header_and_eight_extension_headers() {
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(59, &[])));
    assert_eq!(k, key(&v6_fields(59)));
    assert_eq!(m, meta(0, 14, 0, 0));

    // Exactly the limit: 8 destination-options headers, then UDP.
    let mut p = udp(8, 9, &[]);
    for _ in 0..8 {
        p = ext(if p.len() == 8 { 17 } else { 60 }, 0, &p);
    }
    let (k, m) = ok(&eth(&[], 0x86dd, &ipv6(60, &p)));
    let want = with(v6_fields(17), &[(Field::TpSrc, 8), (Field::TpDst, 9)]);
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(0, 14, 54 + 64, 0));
}

// ---- VXLAN tunnels ----

fn tunnel_v4(vni: u32) -> Vec<(Field, u128)> {
    vec![
        (Field::TunId, vni.into()),
        (Field::TunFlags, TUN_PRESENT.into()),
        (Field::TunSrc, addr(V4_SRC) << 96),
        (Field::TunDst, addr(V4_DST) << 96),
    ]
}

#[test]
fn vxlan_over_ipv4_inner_ipv4_tcp() {
    let inner = eth(&[], 0x0800, &ipv4(6, &tcp(3000, 22, 0x011, &[0; 4], &[])));
    // The outer frame is tagged: the tag belongs to the outer packet and is dropped.
    let f = eth(
        &[(0x8100, 55)],
        0x0800,
        &ipv4(17, &udp(51000, 4789, &vxlan(0xabcdef, &inner))),
    );
    let (k, m) = ok(&f);
    let mut want = with(
        v4_fields(6),
        &[
            (Field::TpSrc, 3000),
            (Field::TpDst, 22),
            (Field::TcpFlags, 0x011),
        ],
    );
    want.extend(tunnel_v4(0xabcdef));
    assert_eq!(k, key(&want));
    let l2 = 18 + 20 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 14, l2 + 34, 0));
}

#[test]
fn vxlan_over_ipv6_inner_ipv6_udp() {
    let inner = eth(&[], 0x86dd, &ipv6(17, &udp(68, 67, b"dhcp")));
    let f = eth(&[], 0x86dd, &ipv6(17, &udp(1, 4789, &vxlan(1, &inner))));
    let (k, m) = ok(&f);
    let want = with(
        v6_fields(17),
        &[
            (Field::TpSrc, 68),
            (Field::TpDst, 67),
            (Field::TunId, 1),
            (Field::TunFlags, (TUN_PRESENT | TUN_IPV6).into()),
            (Field::TunSrc, addr(V6_SRC)),
            (Field::TunDst, addr(V6_DST)),
        ],
    );
    assert_eq!(k, key(&want));
    let l2 = 14 + 40 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 14, l2 + 54, 0));
}

#[test]
fn vxlan_inner_vlan_and_inner_vxlan_port_is_plain_udp() {
    let innermost = eth(&[], 0x0800, &ipv4(1, &icmp(8, 0)));
    let inner = eth(
        &[(0x8100, 0x0100)],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(9, &innermost))),
    );
    let mut f = eth(
        &[],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(0x00ff_ffff, &inner))),
    );
    f.resize(f.len() + 6, 0); // outer Ethernet trailer
    let (k, m) = ok(&f);
    let mut want = with(
        v4_fields(17),
        &[
            (Field::VlanTci, 0x1100),
            (Field::TpSrc, 7),
            (Field::TpDst, 4789),
        ],
    );
    want.extend(tunnel_v4(0x00ff_ffff));
    assert_eq!(k, key(&want));
    let l2 = 14 + 20 + 8 + 8;
    assert_eq!(m, meta(l2, l2 + 18, l2 + 38, 1));
}

#[test]
fn vxlan_inner_arp() {
    let inner = eth(&[], 0x0806, &arp(1));
    let (k, m) = ok(&eth(
        &[],
        0x0800,
        &ipv4(17, &udp(7, 4789, &vxlan(42, &inner))),
    ));
    let mut want = vec![
        (Field::EthType, 0x0806),
        (Field::NwProto, 1),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    want.extend(tunnel_v4(42));
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(50, 64, 0, 0));
}

#[test]
fn vxlan_not_decapsulated_when_disabled_other_port_or_fragment() {
    let inner = eth(&[], 0x0800, &ipv4(6, &tcp(1, 2, 0, &[], &[])));
    let payload = udp(7, 4789, &vxlan(42, &inner));
    let plain = with(v4_fields(17), &[(Field::TpSrc, 7), (Field::TpDst, 4789)]);

    let f = eth(&[], 0x0800, &ipv4(17, &payload));
    let off = ParseOptions { vxlan_port: None };
    let (k, m) = run(&f, &off).unwrap();
    assert_eq!(k, key(&plain));
    assert_eq!(m, meta(0, 14, 34, 0));

    let other = ParseOptions {
        vxlan_port: Some(8472),
    };
    let (k, _) = run(&f, &other).unwrap();
    assert_eq!(k, key(&plain));

    let mut v4 = V4::new(17);
    v4.frag = 0x2000;
    let (k, m) = ok(&eth(&[], 0x0800, &v4.build(&payload)));
    assert_eq!(k, key(&with(plain, &[(Field::NwFrag, FRAG_ANY.into())])));
    assert_eq!(m, meta(0, 14, 34, 0));
}

#[test]
fn vxlan_on_a_custom_port() {
    let inner = eth(&[], 0x0800, &ipv4(1, &icmp(0, 0)));
    let f = eth(&[], 0x0800, &ipv4(17, &udp(7, 8472, &vxlan(5, &inner))));
    let opts = ParseOptions {
        vxlan_port: Some(8472),
    };
    let (k, m) = run(&f, &opts).unwrap();
    let mut want = v4_fields(1);
    want.extend(tunnel_v4(5));
    assert_eq!(k, key(&want));
    assert_eq!(m, meta(50, 64, 84, 0));
}

#[test]
fn key_is_fully_overwritten_between_packets() {
    let mut k = FlowKey::ZERO;
    let opts = ParseOptions::default();
    let inner = eth(&[(0x8100, 3)], 0x86dd, &ipv6(6, &tcp(1, 2, 0x3f, &[], &[])));
    let big = eth(&[], 0x86dd, &ipv6(17, &udp(1, 4789, &vxlan(77, &inner))));
    parse(&big, 9, &opts, &mut k).unwrap();
    let small = eth(&[], 0x0806, &arp(1));
    parse(&small, IN_PORT, &opts, &mut k).unwrap();
    let want = [
        (Field::EthType, 0x0806),
        (Field::NwProto, 1),
        (Field::Ipv4Src, addr(V4_SRC)),
        (Field::Ipv4Dst, addr(V4_DST)),
    ];
    assert_eq!(k, key(&want));
}
