//! Frames from `build` read back with etherparse, with exact sizes and valid checksums.

use std::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{LinkSlice, NetSlice, PacketBuilder, SlicedPacket, TransportSlice, VlanSlice};
use flowpath_gen::build::{build, FrameSpec, Vxlan, L3, L4, VXLAN_PORT};
use proptest::prelude::*;

mod common;
use common::{ones_sum, pseudo_header};

/// The transport segment (header + payload) as bytes: the IP payload.
fn ip_payload<'a>(net: &NetSlice<'a>) -> &'a [u8] {
    match net {
        NetSlice::Ipv4(ip) => ip.payload().payload,
        NetSlice::Ipv6(ip) => ip.payload().payload,
    }
}

fn check_l3(net: &NetSlice, l3: &L3, l4_len: usize) {
    match (net, l3) {
        (NetSlice::Ipv4(ip), L3::V4 { src, dst, ttl, tos }) => {
            let h = ip.header();
            assert_eq!(h.source_addr(), *src);
            assert_eq!(h.destination_addr(), *dst);
            assert_eq!(h.ttl(), *ttl);
            assert_eq!(h.slice()[1], *tos);
            assert_eq!(h.total_len() as usize, 20 + l4_len);
            assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
            assert_eq!(ones_sum(&[h.slice()]), 0xffff);
            assert!(!h.is_fragmenting_payload());
        }
        (
            NetSlice::Ipv6(ip),
            L3::V6 {
                src,
                dst,
                hop_limit,
                tclass,
            },
        ) => {
            let h = ip.header();
            assert_eq!(h.source_addr(), *src);
            assert_eq!(h.destination_addr(), *dst);
            assert_eq!(h.hop_limit(), *hop_limit);
            assert_eq!(h.traffic_class(), *tclass);
            assert_eq!(h.payload_length() as usize, l4_len);
        }
        (n, l) => panic!("network layer {n:?} does not match {l:?}"),
    }
}

/// Check one Ethernet frame (the whole frame, or the inner frame of a VXLAN packet)
/// against the spec's fields.
fn check_frame(frame: &[u8], src: [u8; 6], dst: [u8; 6], vlans: &[(u16, u16)], l3: &L3, l4: &L4) {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse reads the frame");
    let Some(LinkSlice::Ethernet2(eth)) = &p.link else {
        panic!("no Ethernet II header")
    };
    assert_eq!(eth.source(), src);
    assert_eq!(eth.destination(), dst);
    match (&p.vlan, vlans) {
        (None, []) => {}
        (Some(VlanSlice::SingleVlan(v)), [(tpid, tci)]) => {
            assert_eq!(u16::from(eth.ether_type()), *tpid);
            assert_eq!(u16::from_be_bytes([v.slice()[0], v.slice()[1]]), *tci);
        }
        (Some(VlanSlice::DoubleVlan(v)), [(t0, c0), (t1, c1)]) => {
            assert_eq!(u16::from(eth.ether_type()), *t0);
            let (o, i) = (v.outer().slice(), v.inner().slice());
            assert_eq!(u16::from_be_bytes([o[0], o[1]]), *c0);
            assert_eq!(u16::from_be_bytes([o[2], o[3]]), *t1);
            assert_eq!(u16::from_be_bytes([i[0], i[1]]), *c1);
        }
        (v, want) => panic!("vlan {v:?} does not match {want:?}"),
    }
    let net = p.net.as_ref().expect("network layer");
    let seg = ip_payload(net);
    check_l3(net, l3, seg.len());
    let v6 = matches!(l3, L3::V6 { .. });
    let hl = match l4 {
        L4::Udp { .. } | L4::Icmp { .. } => 8,
        L4::Tcp { .. } => 20,
    };
    // The padding is the pattern 0, 1, 2, …
    for (i, b) in seg[hl..].iter().enumerate() {
        assert_eq!(*b, i as u8, "payload byte {i}");
    }
    match (p.transport.as_ref().expect("transport layer"), l4) {
        (TransportSlice::Udp(u), L4::Udp { sport, dport }) => {
            assert_eq!(u.source_port(), *sport);
            assert_eq!(u.destination_port(), *dport);
            assert_eq!(u.length() as usize, seg.len());
            assert_ne!(u.checksum(), 0);
            let ps = pseudo_header(net, 17, seg.len());
            assert_eq!(ones_sum(&[&ps, seg]), 0xffff, "UDP checksum");
        }
        (
            TransportSlice::Tcp(t),
            L4::Tcp {
                sport,
                dport,
                flags,
            },
        ) => {
            assert_eq!(t.source_port(), *sport);
            assert_eq!(t.destination_port(), *dport);
            assert_eq!(t.slice()[13], *flags);
            assert_eq!(t.header_len(), 20);
            let ps = pseudo_header(net, 6, seg.len());
            assert_eq!(ones_sum(&[&ps, seg]), 0xffff, "TCP checksum");
            let want = match net {
                NetSlice::Ipv4(ip) => {
                    t.calc_checksum_ipv4(ip.header().source(), ip.header().destination())
                }
                NetSlice::Ipv6(ip) => {
                    t.calc_checksum_ipv6(ip.header().source(), ip.header().destination())
                }
            };
            assert_eq!(t.checksum(), want.unwrap());
        }
        (TransportSlice::Icmpv4(i), L4::Icmp { ty, code }) if !v6 => {
            assert_eq!((i.type_u8(), i.code_u8()), (*ty, *code));
            assert_eq!(ones_sum(&[seg]), 0xffff, "ICMPv4 checksum");
        }
        (TransportSlice::Icmpv6(i), L4::Icmp { ty, code }) if v6 => {
            assert_eq!((i.type_u8(), i.code_u8()), (*ty, *code));
            let ps = pseudo_header(net, 58, seg.len());
            assert_eq!(ones_sum(&[&ps, seg]), 0xffff, "ICMPv6 checksum");
        }
        (t, want) => panic!("transport {t:?} does not match {want:?}"),
    }
}

fn header_len(vlans: usize, l3: &L3, l4: &L4) -> usize {
    14 + 4 * vlans
        + match l3 {
            L3::V4 { .. } => 20,
            L3::V6 { .. } => 40,
        }
        + match l4 {
            L4::Tcp { .. } => 20,
            _ => 8,
        }
}

fn check(spec: &FrameSpec) {
    let f = build(spec);
    let mut min = header_len(spec.vlans.len(), &spec.l3, &spec.l4);
    if let Some(v) = &spec.vxlan {
        min += header_len(
            v.outer_vlans.len(),
            &v.outer,
            &L4::Udp { sport: 0, dport: 0 },
        ) + 8;
    }
    assert_eq!(spec.min_len(), min);
    assert_eq!(f.len(), (spec.frame_size - 4).max(min), "frame length");
    assert_eq!(spec.frame_len(), f.len());

    let Some(v) = &spec.vxlan else {
        check_frame(
            &f,
            spec.eth_src,
            spec.eth_dst,
            &spec.vlans,
            &spec.l3,
            &spec.l4,
        );
        return;
    };
    let p = SlicedPacket::from_ethernet(&f).expect("etherparse reads the outer frame");
    let Some(LinkSlice::Ethernet2(eth)) = &p.link else {
        panic!("no outer Ethernet II header")
    };
    assert_eq!(eth.source(), v.outer_eth_src);
    assert_eq!(eth.destination(), v.outer_eth_dst);
    assert_eq!(p.vlan.is_some(), !v.outer_vlans.is_empty());
    let net = p.net.as_ref().expect("outer network layer");
    let seg = ip_payload(net);
    check_l3(net, &v.outer, seg.len());
    let Some(TransportSlice::Udp(u)) = &p.transport else {
        panic!("outer transport is not UDP")
    };
    assert_eq!(u.source_port(), v.sport);
    assert_eq!(u.destination_port(), VXLAN_PORT);
    assert_eq!(u.length() as usize, seg.len());
    match v.outer {
        L3::V4 { .. } => assert_eq!(u.checksum(), 0, "outer UDP checksum over IPv4 is 0"),
        L3::V6 { .. } => {
            assert_ne!(u.checksum(), 0, "outer UDP checksum over IPv6 is required");
            let ps = pseudo_header(net, 17, seg.len());
            assert_eq!(ones_sum(&[&ps, seg]), 0xffff, "outer UDP checksum");
        }
    }
    let vx = u.payload();
    assert_eq!(vx[0], 0x08, "VXLAN flags");
    assert_eq!(&vx[1..4], &[0, 0, 0]);
    assert_eq!(
        u32::from_be_bytes([0, vx[4], vx[5], vx[6]]),
        v.vni & 0xff_ffff
    );
    assert_eq!(vx[7], 0);
    check_frame(
        &vx[8..],
        spec.eth_src,
        spec.eth_dst,
        &spec.vlans,
        &spec.l3,
        &spec.l4,
    );
}

fn arb_l3() -> impl Strategy<Value = L3> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<u8>(), any::<u8>()).prop_map(|(s, d, ttl, tos)| {
            L3::V4 {
                src: Ipv4Addr::from(s),
                dst: Ipv4Addr::from(d),
                ttl,
                tos,
            }
        }),
        (any::<u128>(), any::<u128>(), any::<u8>(), any::<u8>()).prop_map(
            |(s, d, hop_limit, tclass)| L3::V6 {
                src: Ipv6Addr::from(s),
                dst: Ipv6Addr::from(d),
                hop_limit,
                tclass,
            }
        ),
    ]
}

/// L4 strategy; ICMP types are echo request/reply (mapped to the L3 version in `fix_icmp`).
fn arb_l4() -> impl Strategy<Value = L4> {
    prop_oneof![
        (any::<u16>(), any::<u16>())
            // Keep the inner destination port off 4789, which would read as VXLAN.
            .prop_filter("not VXLAN", |(_, d)| *d != VXLAN_PORT)
            .prop_map(|(sport, dport)| L4::Udp { sport, dport }),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(sport, dport, flags)| L4::Tcp {
            sport,
            dport,
            flags
        }),
        any::<bool>().prop_map(|reply| L4::Icmp {
            ty: reply as u8,
            code: 0
        }),
    ]
}

fn fix_icmp(l3: &L3, l4: L4) -> L4 {
    match (l3, l4) {
        (L3::V4 { .. }, L4::Icmp { ty, code }) => L4::Icmp {
            ty: if ty == 1 { 0 } else { 8 },
            code,
        },
        (L3::V6 { .. }, L4::Icmp { ty, code }) => L4::Icmp { ty: 128 + ty, code },
        (_, l4) => l4,
    }
}

fn arb_vlans() -> impl Strategy<Value = Vec<(u16, u16)>> {
    prop_oneof![
        Just(vec![]),
        (prop_oneof![Just(0x8100u16), Just(0x88a8)], any::<u16>()).prop_map(|t| vec![t]),
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| vec![(0x88a8, a), (0x8100, b)]),
    ]
}

fn arb_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 64usize..=1518,
        1 => Just(9000usize),
        1 => prop::sample::select(vec![64usize, 128, 256, 512, 1024, 1280, 1518]),
    ]
}

fn arb_spec() -> impl Strategy<Value = FrameSpec> {
    let vxlan = prop::option::of(
        (any::<u32>(), arb_l3(), any::<u16>(), arb_vlans()).prop_map(|(vni, outer, sport, v)| {
            Vxlan {
                vni,
                outer_eth_src: [0x02, 1, 2, 3, 4, 5],
                outer_eth_dst: [0x02, 6, 7, 8, 9, 10],
                outer_vlans: v,
                outer,
                sport,
            }
        }),
    );
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        arb_vlans(),
        arb_l3(),
        arb_l4(),
        arb_size(),
        vxlan,
    )
        .prop_map(
            |(eth_src, eth_dst, vlans, l3, l4, frame_size, vxlan)| FrameSpec {
                eth_src,
                eth_dst,
                vlans,
                l4: fix_icmp(&l3, l4),
                l3,
                frame_size,
                vxlan,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frames_read_back_with_right_lengths_and_checksums(spec in arb_spec()) {
        check(&spec);
    }
}

#[test]
fn every_combination_at_every_rfc2544_size() {
    let v4 = L3::V4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        ttl: 64,
        tos: 0xb8,
    };
    let v6 = L3::V6 {
        src: "2001:db8::1".parse().unwrap(),
        dst: "2001:db8::2".parse().unwrap(),
        hop_limit: 255,
        tclass: 0x2e,
    };
    let vlan_sets = [
        vec![],
        vec![(0x8100, 0x0064)],
        vec![(0x88a8, 10), (0x8100, 20)],
    ];
    for size in [64, 128, 256, 512, 1024, 1280, 1518, 9000] {
        for l3 in [v4, v6] {
            let l4s = [
                L4::Udp {
                    sport: 1234,
                    dport: 5001,
                },
                L4::Tcp {
                    sport: 40000,
                    dport: 80,
                    flags: 0x12,
                },
                fix_icmp(&l3, L4::Icmp { ty: 0, code: 0 }),
            ];
            for l4 in l4s {
                for vlans in &vlan_sets {
                    for outer in [None, Some(v4), Some(v6)] {
                        let spec = FrameSpec {
                            vlans: vlans.clone(),
                            vxlan: outer.map(|o| Vxlan {
                                outer: o,
                                ..Vxlan::v4(0xabcdef, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST)
                            }),
                            ..FrameSpec::new(l3, l4, size)
                        };
                        check(&spec);
                    }
                }
            }
        }
    }
}

#[test]
fn too_small_frames_are_the_minimum_that_fits() {
    let spec = FrameSpec::udp6(
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
        1,
        2,
        64,
    )
    .with_vlan(0x88a8, 1)
    .with_vlan(0x8100, 2)
    .with_vxlan(Vxlan::v6(
        7,
        "2001:db8::a".parse().unwrap(),
        "2001:db8::b".parse().unwrap(),
    ));
    // outer 14 + 40 + 8 + 8, inner 14 + 8 + 40 + 8
    assert_eq!(build(&spec).len(), 140);
    check(&spec);
    let tiny = FrameSpec::udp4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 1, 2, 0);
    assert_eq!(build(&tiny).len(), 42);
    check(&FrameSpec {
        frame_size: 46,
        ..tiny
    });
}

#[test]
fn udp4_64_byte_frame_matches_etherparse_builder_byte_for_byte() {
    let spec = FrameSpec::udp4(
        Ipv4Addr::new(10, 1, 2, 3),
        Ipv4Addr::new(192, 168, 0, 1),
        1024,
        5001,
        64,
    );
    let f = build(&spec);
    assert_eq!(f.len(), 60);
    let payload: Vec<u8> = (0..18u8).collect();
    let mut want = Vec::new();
    PacketBuilder::ethernet2(spec.eth_src, spec.eth_dst)
        .ipv4([10, 1, 2, 3], [192, 168, 0, 1], 64)
        .udp(1024, 5001)
        .write(&mut want, &payload)
        .unwrap();
    assert_eq!(f, want);
}

#[test]
fn udp6_frame_matches_etherparse_builder_byte_for_byte() {
    let (s, d): (Ipv6Addr, Ipv6Addr) = ("fe80::1".parse().unwrap(), "ff02::1".parse().unwrap());
    let spec = FrameSpec::udp6(s, d, 53, 5353, 128);
    let f = build(&spec);
    assert_eq!(f.len(), 124);
    let payload: Vec<u8> = (0..(124 - 62) as u8).collect();
    let mut want = Vec::new();
    PacketBuilder::ethernet2(spec.eth_src, spec.eth_dst)
        .ipv6(s.octets(), d.octets(), 64)
        .udp(53, 5353)
        .write(&mut want, &payload)
        .unwrap();
    assert_eq!(f, want);
}
