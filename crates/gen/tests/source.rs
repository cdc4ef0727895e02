//! `InMemorySource`: wrap-around, restoring modified packets, and new-flow stamping.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use flowpath_base::BATCH;
use flowpath_gen::build::{build, FrameSpec, Vxlan, L3, L4, VXLAN_PORT};
use flowpath_gen::source::{InMemorySource, Lifetime};
use flowpath_packet::packet::HEADROOM;

mod common;
use common::{l4_ok, ones_sum};

/// Parse `frame` (descending into VXLAN), assert every checksum verifies, and return the
/// innermost IP source address (None for non-IP frames).
fn verify(frame: &[u8]) -> Option<IpAddr> {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse reads the frame");
    let net = p.net.as_ref()?;
    let (src, seg) = match net {
        NetSlice::Ipv4(ip) => {
            let h = ip.header();
            assert_eq!(
                h.header_checksum(),
                h.to_header().calc_header_checksum(),
                "IPv4 header checksum"
            );
            (IpAddr::V4(h.source_addr()), ip.payload().payload)
        }
        NetSlice::Ipv6(ip) => (IpAddr::V6(ip.header().source_addr()), ip.payload().payload),
    };
    match p.transport.as_ref().expect("transport") {
        TransportSlice::Udp(u) => {
            let v6 = matches!(net, NetSlice::Ipv6(_));
            if u.checksum() != 0 || v6 {
                assert!(l4_ok(net, 17, seg), "UDP checksum");
            }
            if u.destination_port() == VXLAN_PORT {
                return verify(&u.payload()[8..]);
            }
        }
        TransportSlice::Tcp(_) => assert!(l4_ok(net, 6, seg), "TCP checksum"),
        TransportSlice::Icmpv4(_) => assert_eq!(ones_sum(&[seg]), 0xffff, "ICMPv4 checksum"),
        TransportSlice::Icmpv6(_) => assert!(l4_ok(net, 58, seg), "ICMPv6 checksum"),
    }
    Some(src)
}

fn udp4(i: u8, size: usize) -> Vec<u8> {
    build(&FrameSpec::udp4(
        Ipv4Addr::new(10, 0, 0, i),
        Ipv4Addr::new(10, 0, 1, 1),
        1000 + i as u16,
        2000,
        size,
    ))
}

fn v6(a: &str) -> Ipv6Addr {
    a.parse().unwrap()
}

/// One template of every kind the source stamps, plus one it must leave alone (ARP).
fn mixed_templates() -> Vec<Vec<u8>> {
    let l3v6 = L3::V6 {
        src: v6("2001:db8::1"),
        dst: v6("2001:db8::2"),
        hop_limit: 64,
        tclass: 0,
    };
    let l3v4 = L3::V4 {
        src: Ipv4Addr::new(10, 9, 8, 7),
        dst: Ipv4Addr::new(10, 1, 1, 1),
        ttl: 64,
        tos: 0,
    };
    let tcp = L4::Tcp {
        sport: 40000,
        dport: 443,
        flags: 0x18,
    };
    let mut zero_udp_csum = udp4(77, 200);
    zero_udp_csum[14 + 20 + 6..14 + 20 + 8].copy_from_slice(&[0, 0]);
    let mut arp = vec![0u8; 60];
    arp[0..6].fill(0xff);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    vec![
        udp4(1, 64),
        zero_udp_csum,
        build(&FrameSpec::new(l3v4, tcp, 128).with_vlan(0x8100, 5)),
        build(&FrameSpec::new(l3v4, L4::Icmp { ty: 8, code: 0 }, 100)),
        build(&FrameSpec::udp6(
            v6("2001:db8::1"),
            v6("2001:db8::2"),
            1,
            2,
            1518,
        )),
        build(
            &FrameSpec::new(l3v6, tcp, 9000)
                .with_vlan(0x88a8, 1)
                .with_vlan(0x8100, 2),
        ),
        build(&FrameSpec::new(l3v6, L4::Icmp { ty: 128, code: 0 }, 90)),
        build(
            &FrameSpec::udp4(
                Ipv4Addr::new(10, 2, 2, 2),
                Ipv4Addr::new(10, 3, 3, 3),
                7,
                8,
                300,
            )
            .with_vxlan(Vxlan::v4(
                42,
                Ipv4Addr::new(172, 16, 0, 1),
                Ipv4Addr::new(172, 16, 0, 2),
            )),
        ),
        build(&FrameSpec::new(l3v6, tcp, 400).with_vxlan(Vxlan::v6(
            43,
            v6("fd00::1"),
            v6("fd00::2"),
        ))),
        build(
            &FrameSpec::new(l3v4, L4::Icmp { ty: 0, code: 0 }, 256).with_vxlan(Vxlan::v6(
                44,
                v6("fd00::1"),
                v6("fd00::2"),
            )),
        ),
        // IPv4 inside IPv6: the only mix where the inner changes do not cancel out in the
        // outer UDP checksum.
        build(
            &FrameSpec::new(l3v4, tcp, 500)
                .with_vlan(0x8100, 9)
                .with_vxlan(Vxlan::v6(45, v6("fd00::1"), v6("fd00::2"))),
        ),
        build(
            &FrameSpec::udp4(
                Ipv4Addr::new(10, 4, 4, 4),
                Ipv4Addr::new(10, 5, 5, 5),
                9,
                10,
                80,
            )
            .with_vxlan(Vxlan::v6(46, v6("fd00::3"), v6("fd00::4"))),
        ),
        arp,
    ]
}

#[test]
fn batches_are_consecutive_slots_and_wrap_around() {
    let templates: Vec<Vec<u8>> = (0..3).map(|i| udp4(i, 64 + 100 * i as usize)).collect();
    let mut src = InMemorySource::new(templates.clone()).with_slots(5);
    assert_eq!(src.slot_count(), 5);
    assert_eq!(src.slot_size() % 64, 0);
    assert!(src.slot_size() >= HEADROOM + templates[2].len() + 64);
    let mut expect_slot = 0usize;
    for (round, want) in [4usize, 4, 1, 5, 3, 0, 2].into_iter().enumerate() {
        let b = src.lend(want);
        assert_eq!(b.len(), want, "round {round}");
        for (k, p) in b.iter().enumerate() {
            let slot = b.slots()[k] as usize;
            assert_eq!(slot, expect_slot, "round {round} packet {k}");
            assert_eq!(p.data(), &templates[slot % 3][..]);
            assert_eq!(p.headroom(), HEADROOM);
            assert!(p.tailroom() >= 64);
            assert!(!p.modified);
            expect_slot = (expect_slot + 1) % 5;
        }
    }
    assert_eq!(src.packets(), 19);
    // A batch never exceeds the slot count (a slot cannot be lent twice) nor BATCH.
    assert_eq!(src.lend(100).len(), 5);
    let mut big = InMemorySource::new(templates.clone());
    assert_eq!(big.slot_count(), 1024);
    assert_eq!(big.lend(100).len(), BATCH);
    // At least one slot per template.
    let many: Vec<Vec<u8>> = (0..1500).map(|i| udp4(i as u8, 64)).collect();
    let s = InMemorySource::new(many).with_slots(10);
    assert_eq!(s.slot_count(), 1500);
    assert_eq!(s.template_of_slot(1499), 1499);
}

#[test]
fn slot_data_is_aligned() {
    let mut src = InMemorySource::new(vec![udp4(1, 64)]).with_slots(40);
    for _ in 0..3 {
        for p in src.lend(32).iter() {
            assert_eq!(p.data().as_ptr() as usize % 64, 0);
        }
    }
}

#[test]
fn modified_packets_are_restored_before_their_slot_is_handed_out_again() {
    let templates = vec![udp4(1, 64), udp4(2, 1518)];
    let mut src = InMemorySource::new(templates.clone()).with_slots(4);
    {
        let mut b = src.lend(4);
        // Scribble over slot 0; push a tag onto slot 1 (moves start into the headroom).
        b[0].data_mut().fill(0xee);
        assert!(b[1].push_front(4));
        b[1].data_mut()[..4].copy_from_slice(&[0x81, 0, 0, 1]);
        // Slot 2: grow into the tailroom by exhausting the headroom first.
        assert!(b[2].pull_front(10));
        assert!(b[2].push_front(HEADROOM + 10 + 8));
        b[2].data_mut()[0] = 1;
        // Reorder the batch: restoring must follow the packet, not its position.
        b.swap(0, 3);
        assert!(b[3].modified && !b[0].modified);
    }
    for round in 0..3 {
        let b = src.lend(4);
        for (k, p) in b.iter().enumerate() {
            assert_eq!(p.data(), &templates[k % 2][..], "round {round} slot {k}");
            assert_eq!(p.headroom(), HEADROOM);
            assert!(!p.modified);
        }
    }
    // One slot, handed out again and again: each batch sees the template.
    let mut one = InMemorySource::new(vec![udp4(3, 100)]).with_slots(1);
    for _ in 0..5 {
        let mut b = one.lend(32);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].data(), &udp4(3, 100)[..]);
        b[0].data_mut()[20] ^= 0xff;
        assert!(b[0].pull_front(14));
    }
}

#[test]
fn unmodified_packets_are_not_restored() {
    // Not observable through the API except as "still equal to the template"; check that
    // a packet whose `modified` flag is cleared keeps its bytes (so nothing copies it).
    let mut src = InMemorySource::new(vec![udp4(1, 64)]).with_slots(1);
    {
        let mut b = src.lend(1);
        b[0].data_mut()[0] = 0x42;
        b[0].modified = false;
    }
    assert_eq!(src.lend(1)[0].data()[0], 0x42);
}

fn run(src: &mut InMemorySource, packets: usize) -> u64 {
    let mut left = packets;
    while left > 0 {
        let n = src.lend(left.min(32)).len();
        left -= n;
    }
    src.new_flows()
}

#[test]
fn new_flow_share_is_respected() {
    for seed in [0u64, 1, 0xdead_beef] {
        let mut src = InMemorySource::udp4_flows(1000, 64).with_seed(seed);
        src.set_new_flow_share(0.25);
        let n = run(&mut src, 200_000);
        assert_eq!(src.packets(), 200_000);
        let share = n as f64 / 200_000.0;
        assert!((share - 0.25).abs() < 0.01, "seed {seed}: share {share}");
    }
    let mut none = InMemorySource::udp4_flows(100, 64);
    none.set_new_flow_share(0.0);
    assert_eq!(run(&mut none, 50_000), 0);
    let mut all = InMemorySource::udp4_flows(100, 64);
    all.set_new_flow_share(1.0);
    assert_eq!(run(&mut all, 50_000), 50_000);
    // The seed decides: equal seeds agree, different seeds (almost surely) do not.
    let count = |seed| {
        let mut s = InMemorySource::udp4_flows(10, 64).with_seed(seed);
        s.set_new_flow_share(0.5);
        run(&mut s, 10_000)
    };
    assert_eq!(count(7), count(7));
    assert_ne!(
        (count(7), count(8), count(9)),
        (count(7), count(7), count(7))
    );
}

#[test]
#[should_panic]
fn share_outside_unit_interval_panics() {
    InMemorySource::udp4_flows(1, 64).set_new_flow_share(1.5);
}

#[test]
fn stamped_packets_have_valid_checksums_and_fresh_sources() {
    let templates = mixed_templates();
    let t = templates.len();
    // Template sources must not look like stamped ones.
    let mut template_srcs = HashSet::new();
    for tpl in &templates {
        template_srcs.insert(verify(tpl));
    }
    let mut src = InMemorySource::new(templates.clone())
        .with_slots(t * 3)
        .with_seed(99);
    src.set_new_flow_share(1.0);
    let mut n = 0u64;
    let mut seen = HashSet::new();
    let mut slot = 0usize;
    for batch in 0..200 {
        let b = src.lend(1 + batch % 32);
        for p in b.iter() {
            let tpl = slot % t;
            slot = (slot + 1) % (t * 3);
            let got = verify(p.data());
            let Some(addr) = got else {
                // ARP: never stamped, not counted.
                assert!(!p.modified);
                assert_eq!(p.data(), &templates[tpl][..]);
                continue;
            };
            assert!(p.modified);
            assert_eq!(p.len(), templates[tpl].len());
            match addr {
                IpAddr::V4(a) => assert_eq!(u32::from(a), 0x6440_0000 + n as u32, "n = {n}"),
                IpAddr::V6(a) => {
                    assert_eq!(u128::from(a) as u32, n as u32, "n = {n}");
                    assert_eq!(u128::from(a) >> 32, u128::from(v6("2001:db8::1")) >> 32);
                }
            }
            assert!(seen.insert(addr), "source {addr} stamped twice");
            assert!(!template_srcs.contains(&Some(addr)));
            // Only the source address and checksums changed.
            let diff = p
                .data()
                .iter()
                .zip(&templates[tpl])
                .filter(|(a, b)| a != b)
                .count();
            assert!(diff <= 4 + 2 + 2 + 2, "{diff} bytes changed");
            n += 1;
        }
    }
    assert_eq!(src.new_flows(), n);
    // The UDP checksum that was 0 stayed 0 (template 1 over and over).
    let mut z = InMemorySource::new(vec![templates[1].clone()]).with_slots(1);
    z.set_new_flow_share(1.0);
    for _ in 0..3 {
        let b = z.lend(1);
        assert_eq!(&b[0].data()[40..42], &[0, 0]);
        assert!(verify(b[0].data()).is_some());
    }
    // Once churn stops, every slot comes back as its template.
    src.set_new_flow_share(0.0);
    for _ in 0..t * 3 {
        let b = src.lend(1);
        let s = b.slots()[0] as usize;
        assert_eq!(b[0].data(), &templates[s % t][..]);
    }
}

#[test]
fn new_flow_numbers_keep_increasing_across_batches_at_partial_share() {
    let mut src = InMemorySource::udp4_flows(50, 128).with_seed(5);
    src.set_new_flow_share(0.3);
    let mut n = 0u32;
    for _ in 0..2000 {
        let b = src.lend(32);
        for p in b.iter() {
            let a = u32::from_be_bytes(p.data()[26..30].try_into().unwrap());
            if p.modified {
                assert_eq!(a, 0x6440_0000 + n);
                n += 1;
                verify(p.data());
            } else {
                assert_eq!(a >> 24, 10, "unstamped packet keeps its 10/8 source");
            }
        }
    }
    assert_eq!(src.new_flows(), n as u64);
    assert!(n > 15_000);
}

#[test]
fn udp4_flows_are_distinct() {
    let src = InMemorySource::udp4_flows(3000, 64);
    assert_eq!(src.template_count(), 3000);
    assert_eq!(src.slot_count(), 3000);
    let mut seen = HashSet::new();
    for i in 0..3000 {
        let f = src.template(i);
        assert_eq!(f.len(), 60);
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &p.net else {
            panic!()
        };
        let Some(TransportSlice::Udp(u)) = &p.transport else {
            panic!()
        };
        assert_eq!(ip.header().source()[0], 10);
        assert_eq!(
            ip.header().destination_addr(),
            Ipv4Addr::new(192, 168, 0, 1)
        );
        assert_eq!(u.destination_port(), 5001);
        verify(f);
        assert!(seen.insert((ip.header().source_addr(), u.source_port())));
    }
}

#[test]
fn stamping_equals_building_with_the_new_source() {
    let dst = Ipv4Addr::new(192, 168, 0, 1);
    let spec = |src: Ipv4Addr, dport| FrameSpec::udp4(src, dst, 1234, dport, 64);
    // A destination port for which the stamped frame's UDP checksum computes to 0, so it
    // must be sent as 0xffff.
    let dport = (0..=u16::MAX)
        .find(|&d| build(&spec(Ipv4Addr::new(100, 64, 0, 0), d))[40..42] == [0xff, 0xff])
        .expect("some port gives checksum 0");
    for d in [dport, 5001, 0, 65535] {
        let mut src = InMemorySource::new(vec![build(&spec(Ipv4Addr::new(10, 0, 0, 1), d))]);
        src.set_new_flow_share(1.0);
        let b = src.lend(3);
        for (n, p) in b.iter().enumerate() {
            let want = build(&spec(Ipv4Addr::new(100, 64, 0, n as u8), d));
            assert_eq!(p.data(), &want[..], "dport {d}, n {n}");
        }
    }
    let tcp6 = |s: Ipv6Addr| {
        build(&FrameSpec::new(
            L3::V6 {
                src: s,
                dst: v6("2001:db8::2"),
                hop_limit: 1,
                tclass: 0,
            },
            L4::Tcp {
                sport: 1,
                dport: 2,
                flags: 2,
            },
            1000,
        ))
    };
    let mut src = InMemorySource::new(vec![tcp6(v6("2001:db8::1:2:3:4"))]);
    src.set_new_flow_share(1.0);
    let b = src.lend(2);
    assert_eq!(b[1].data(), &tcp6(v6("2001:db8::1:2:0:1"))[..]);
}

#[test]
fn lifetimes_replace_every_kind_of_template_with_valid_new_flows() {
    let templates = mixed_templates();
    let t = templates.len();
    const LIFE: u64 = 3;
    let mut src = InMemorySource::new(templates.clone())
        .with_slots(t * 4)
        .with_seed(1);
    src.set_lifetime(Some(Lifetime::Packets(LIFE)));
    assert_eq!(src.lifetime(), Some(Lifetime::Packets(LIFE)));
    // Per template: packets of its current identity, and the identity.
    let mut life: Vec<(u64, Option<IpAddr>)> = vec![(0, None); t];
    let mut all = HashSet::new();
    let mut fresh = HashSet::new();
    let mut slot = 0usize;
    for batch in 0..300 {
        let mut b = src.lend(1 + batch % 32);
        for p in b.iter_mut() {
            let tpl = slot % t;
            slot = (slot + 1) % (t * 4);
            let Some(addr) = verify(p.data()) else {
                // ARP never changes.
                assert_eq!(p.data(), &templates[tpl][..]);
                continue;
            };
            assert!(
                !p.modified,
                "a lifetime restamp leaves the packet unmodified"
            );
            assert_eq!(p.len(), templates[tpl].len());
            let (n, cur) = &mut life[tpl];
            if *cur != Some(addr) {
                // A new identity: the previous one lived exactly LIFE packets, and this
                // one was never seen.
                if cur.is_some() {
                    assert_eq!(*n, LIFE, "template {tpl}");
                }
                assert!(all.insert((tpl, addr)), "identity {addr} came back");
                if Some(addr) != verify(&templates[tpl]) {
                    assert!(fresh.insert(addr), "new flow {addr} stamped twice");
                }
                *cur = Some(addr);
                *n = 0;
            }
            *n += 1;
            // Actions scribbling over packets must not disturb the identities.
            if batch % 5 == 0 {
                p.data_mut().fill(0x5a);
            }
        }
    }
    let stampable = t - 1;
    // Every template but ARP went through many lives, each a new flow.
    assert_eq!(all.len() as u64, stampable as u64 + src.new_flows());
    assert!(src.new_flows() > 200);
    // Turning lifetimes off keeps the current identities, and every slot agrees.
    src.set_lifetime(None);
    assert_eq!(src.lifetime(), None);
    let before = src.new_flows();
    for _ in 0..t * 8 {
        let (tpl, data) = {
            let b = src.lend(1);
            (b.slots()[0] as usize % t, b[0].data().to_vec())
        };
        assert_eq!(&data[..], src.template(tpl));
        assert_eq!(verify(&data), life[tpl].1, "template {tpl}");
    }
    assert_eq!(src.new_flows(), before);
}

#[test]
fn fill_copies_exactly_what_lend_would_hand_out() {
    // The port path (fill) and the lending path must give the same frames, stamps and
    // lifetimes for the same seed: the bench and the pcap writer see the same traffic.
    let cases = [(0.0, None), (0.3, None), (0.2, Some(Lifetime::Packets(5)))];
    for (share, life) in cases {
        // Frames longer than a batch slot are dropped by fill (and counted): left out here.
        let fit: Vec<Vec<u8>> = mixed_templates()
            .into_iter()
            .filter(|t| t.len() <= flowpath_base::MAX_FRAME)
            .collect();
        let make = || {
            let mut s = InMemorySource::new(fit.clone()).with_seed(7);
            s.set_new_flow_share(share);
            s.set_lifetime(life);
            s
        };
        let (mut filled, mut lent) = (make(), make());
        let mut batch = flowpath_base::PacketBatch::new();
        for round in 0..100 {
            batch.clear();
            let f = filled.fill(&mut batch);
            let l = lent.lend(BATCH);
            assert_eq!((f.frames, f.dropped), (l.len(), 0), "round {round}");
            for (i, p) in l.iter().enumerate() {
                assert_eq!(
                    batch.frame(i),
                    p.data(),
                    "share {share} life {life:?} round {round} frame {i}"
                );
            }
        }
        assert_eq!(filled.new_flows(), lent.new_flows());
    }
}

#[test]
fn fill_drops_and_counts_frames_longer_than_a_batch_slot() {
    let mut src = InMemorySource::new(vec![udp4(1, 64), vec![0u8; 9000]]).with_slots(4);
    let mut batch = flowpath_base::PacketBatch::new();
    let f = src.fill(&mut batch);
    assert_eq!((f.frames, f.dropped), (2, 2));
    assert!((0..batch.len()).all(|i| batch.frame(i).len() == 60));
}
