//! Cached actions against flowpath's own rewrites (crates/packet rewrite::apply on the same
//! frame): output bytes and verdict must be equal; misses, stale versions and what the
//! program refuses go to user space unchanged; per-CPU counters add up.

mod common;

use common::*;
use flowpath_gen::{build, FrameSpec, L3, L4};
use flowpath_packet::{Action, Field, FlowKey};
use flowpath_xdptier::{actions_from, xdp_action, FlowTier, FpStat, Reason, MAX_FLOWS};
use proptest::prelude::*;
use std::cell::{Cell, RefCell};

/// Output to flowpath port OUT goes through devmap index DEV, which points at `lo`.
const OUT: u32 = 5;
const DEV: u32 = 3;

fn dev_of(p: u32) -> Option<u32> {
    match p {
        OUT => Some(DEV),
        IN_PORT => Some(9), // a devmap slot left empty
        _ => None,
    }
}

fn setup() -> Option<FlowTier> {
    let mut t = tier()?;
    t.set_output_dev(DEV, LO).unwrap();
    t.set_masks(&[(0, FlowKey::ONES)]).unwrap();
    Some(t)
}

fn action_sets() -> Vec<Vec<Action>> {
    use Action::*;
    let mac1 = [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];
    let mac2 = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let ip6: [u8; 16] = [
        0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef,
    ];
    let ip6b: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe];
    vec![
        vec![Output(OUT)],
        vec![],
        vec![SetEthSrc(mac1), SetEthDst(mac2), Output(OUT)],
        vec![SetEthDst(mac2)], // rewrite then drop
        vec![SetIpv4Src([192, 0, 2, 1]), Output(OUT)],
        vec![
            SetIpv4Dst([198, 51, 100, 255]),
            SetIpv4Src([1, 2, 3, 4]),
            Output(OUT),
        ],
        vec![SetIpv6Src(ip6), Output(OUT)],
        vec![SetIpv6Dst(ip6b), SetIpv6Src(ip6), Output(OUT)],
        vec![SetTpSrc(9999), Output(OUT)],
        vec![SetTpDst(1), SetTpSrc(65535), Output(OUT)],
        vec![SetNwTos(0xb8), Output(OUT)],
        vec![DecTtl, Output(OUT)],
        vec![PushVlan { tpid: 0x8100 }, Output(OUT)],
        vec![PushVlan { tpid: 0x88a8 }, SetVlanVid(77), Output(OUT)],
        vec![PopVlan, Output(OUT)],
        vec![PopVlan, PopVlan, Output(OUT)],
        vec![SetVlanVid(9), SetVlanPcp(3), Output(OUT)],
        vec![
            PopVlan,
            PushVlan { tpid: 0x88a8 },
            SetVlanPcp(6),
            SetEthDst(mac1),
            SetIpv4Dst([10, 9, 8, 7]),
            SetTpDst(8080),
            SetNwTos(0x20),
            DecTtl,
            Output(OUT),
        ],
        vec![
            SetVlanVid(0x0fff),
            SetIpv6Dst(ip6),
            DecTtl,
            SetTpSrc(7),
            SetNwTos(0xfc),
            SetEthSrc(mac2),
            Output(OUT),
        ],
    ]
}

/// Frames for the action tests: every base spec, checksum-less UDP, fragments, TTL 1.
fn action_frames() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = base_specs().iter().map(build).collect();
    let mut nock = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 5000, 6000, 128));
    let ip = l3_off(&nock);
    nock[ip + 26..ip + 28].copy_from_slice(&[0, 0]); // UDP checksum 0: "none"
    out.push(nock.clone());
    out.push(with_frag(nock.clone(), 0x2000));
    out.push(with_frag(
        build(&FrameSpec::tcp4(v4(1, 1), v4(2, 2), 5000, 80, 0x10, 128)),
        0x2000,
    ));
    out.push(with_frag(nock, 0x00b0));
    out.push(with_ipv4_options(
        build(&FrameSpec::tcp4(v4(1, 1), v4(2, 2), 5000, 80, 0x10, 200)),
        8,
    ));
    for ttl in [0, 1, 2] {
        let l3 = L3::V4 {
            src: v4(1, 1),
            dst: v4(2, 2),
            ttl,
            tos: 3,
        };
        out.push(build(&FrameSpec::new(
            l3,
            L4::Udp { sport: 1, dport: 2 },
            64,
        )));
        let l3 = L3::V6 {
            src: v6(1),
            dst: v6(2),
            hop_limit: ttl,
            tclass: 0,
        };
        let s = FrameSpec::new(
            l3,
            L4::Tcp {
                sport: 1,
                dport: 2,
                flags: 2,
            },
            90,
        );
        out.push(build(&s.with_vlan(0x8100, 4)));
    }
    out.push(arp_frame(true));
    out
}

/// Install `actions` for `frame`'s exact key, run it, and compare with flowpath.
fn run_case(t: &mut FlowTier, frame: &[u8], actions: &[Action], slot: u32) {
    let key = key_of(frame);
    let a = actions_from(actions, dev_of).expect("executable");
    t.insert(0, &FlowKey::ONES, &key, a, slot).unwrap();
    let r = t.test_run(frame, LO).unwrap();
    let reason = Reason::from_u32(t.last_debug().unwrap().reason).unwrap();
    let ctx = format!("actions {actions:?} on {key:?}: {reason:?}");
    match flowpath_result(frame, actions) {
        Expect::Output(bytes) => {
            assert_eq!(reason, Reason::HitOutput, "{ctx}");
            assert_eq!(r.action, xdp_action::REDIRECT, "{ctx}");
            assert_eq!(r.data, bytes, "{ctx}");
        }
        Expect::Drop => {
            assert_eq!(reason, Reason::HitDrop, "{ctx}");
            assert_eq!(r.action, xdp_action::DROP, "{ctx}");
        }
        Expect::RewriteDrop => {
            assert!(matches!(reason, Reason::UpTtl | Reason::UpAction), "{ctx}");
            assert_eq!(r.action, xdp_action::PASS, "{ctx}");
            assert_eq!(r.data, frame, "{ctx}: changed before the upcall");
        }
    }
    t.remove(0, &FlowKey::ONES, &key).unwrap();
}

#[test]
fn cached_actions_equal_flowpath_rewrites() {
    let Some(mut t) = setup() else { return };
    let mut n = 0;
    for actions in action_sets() {
        for f in action_frames() {
            run_case(&mut t, &f, &actions, 1);
            n += 1;
        }
    }
    let counts = t.reason_counts().unwrap();
    eprintln!("{n} cases; verdicts {counts:?}");
    assert!(counts[Reason::HitOutput as usize] > 500);
    assert!(counts[Reason::HitDrop as usize] > 50);
    assert!(counts[Reason::UpTtl as usize] >= 4);
    assert!(counts[Reason::UpAction as usize] >= 4); // push onto two tags
}

#[test]
fn output_to_in_port_or_empty_devmap_slot_is_an_upcall() {
    let Some(t) = setup() else { return };
    let f = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 1, 2, 64));
    let key = key_of(&f);
    for actions in [
        vec![Action::Output(IN_PORT)],
        vec![Action::SetEthSrc([2; 6]), Action::Output(IN_PORT)],
    ] {
        let a = actions_from(&actions, dev_of).unwrap();
        t.insert(0, &FlowKey::ONES, &key, a, 1).unwrap();
        let r = t.test_run(&f, LO).unwrap();
        assert_eq!(r.action, xdp_action::PASS);
        assert_eq!(r.data, f);
        assert_eq!(t.last_debug().unwrap().reason, Reason::UpAction as u32);
    }
    // Same via an empty devmap slot with a port other than in_port (a plain output: the
    // program learns it from the redirect's fallback), and the hit is not counted.
    let mut a = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    a.out_dev = 200;
    t.insert(0, &FlowKey::ONES, &key, a, 1).unwrap();
    let before = t.stats(1).unwrap().packets;
    let r = t.test_run(&f, LO).unwrap();
    assert_eq!((r.action, r.data), (xdp_action::PASS, f.clone()));
    assert_eq!(t.last_debug().unwrap().reason, Reason::UpAction as u32);
    assert_eq!(
        t.stats(1).unwrap().packets,
        before,
        "an upcall counted as a hit"
    );
    // With the slot filled, the same entry forwards and counts.
    let a = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    t.insert(0, &FlowKey::ONES, &key, a, 1).unwrap();
    assert_eq!(t.test_run(&f, LO).unwrap().action, xdp_action::REDIRECT);
    assert_eq!(t.stats(1).unwrap().packets, before + 1);
}

#[test]
fn miss_and_stale_version_go_to_user_space() {
    let Some(mut t) = setup() else { return };
    let f = build(&FrameSpec::tcp4(v4(1, 1), v4(2, 2), 1000, 80, 0x02, 64));
    let key = key_of(&f);
    let pass = |t: &FlowTier| {
        let r = t.test_run(&f, LO).unwrap();
        (r.action, t.last_debug().unwrap().reason)
    };
    // No socket registered: an upcall is XDP_PASS (with one: XDP_REDIRECT to it).
    assert_eq!(pass(&t), (xdp_action::PASS, Reason::Miss as u32));
    let a = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    t.insert(0, &FlowKey::ONES, &key, a, 2).unwrap();
    assert_eq!(pass(&t), (xdp_action::REDIRECT, Reason::HitOutput as u32));
    let v = t.bump_version().unwrap();
    assert_eq!(v, 2);
    assert_eq!(pass(&t), (xdp_action::PASS, Reason::Stale as u32));
    t.insert(0, &FlowKey::ONES, &key, a, 2).unwrap(); // re-stamped with version 2
    assert_eq!(pass(&t), (xdp_action::REDIRECT, Reason::HitOutput as u32));
    // A different flow is still a miss.
    let g = build(&FrameSpec::tcp4(v4(1, 1), v4(2, 2), 1001, 80, 0x02, 64));
    let r = t.test_run(&g, LO).unwrap();
    assert_eq!(
        (r.action, t.last_debug().unwrap().reason),
        (xdp_action::PASS, Reason::Miss as u32)
    );
}

#[test]
fn megaflow_masks_are_tried_in_order() {
    let Some(mut t) = setup() else { return };
    let mut dst_only = FlowKey::ZERO;
    dst_only.set_all(Field::EthType);
    dst_only.set_all(Field::Ipv4Dst);
    let mut port_only = FlowKey::ZERO;
    port_only.set_all(Field::EthType);
    port_only.set_all(Field::NwProto);
    port_only.set_all(Field::TpDst);
    t.set_masks(&[(10, FlowKey::ONES), (11, dst_only), (12, port_only)])
        .unwrap();
    let f = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 1, 53, 64));
    let key = key_of(&f);
    let out = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    let drop = actions_from(&[], dev_of).unwrap();
    // Under mask 12 (third): drop; any source, destination 53 matches.
    t.insert(12, &port_only, &key, drop, 3).unwrap();
    let g = build(&FrameSpec::udp4(v4(7, 7), v4(8, 8), 999, 53, 64));
    assert_eq!(t.test_run(&g, LO).unwrap().action, xdp_action::DROP);
    // Mask 11 comes before 12: output wins for this destination.
    t.insert(11, &dst_only, &key, out, 4).unwrap();
    assert_eq!(t.test_run(&f, LO).unwrap().action, xdp_action::REDIRECT);
    assert_eq!(t.last_debug().unwrap().slot, 4);
    assert_eq!(t.test_run(&g, LO).unwrap().action, xdp_action::DROP);
    // Same id under a different mask does not match.
    let h = build(&FrameSpec::udp4(v4(1, 1), v4(2, 3), 1, 54, 64));
    assert_eq!(t.test_run(&h, LO).unwrap().action, xdp_action::PASS);
    // Fewer masks in use: the third is not tried.
    t.set_masks(&[(10, FlowKey::ONES), (11, dst_only)]).unwrap();
    assert_eq!(t.test_run(&g, LO).unwrap().action, xdp_action::PASS);
}

#[test]
fn per_cpu_counters_sum_per_slot() {
    let Some(t) = setup() else { return };
    let f = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 1, 2, 128));
    let g = build(&FrameSpec::udp6(v6(1), v6(2), 1, 2, 300));
    let out = actions_from(
        &[Action::PushVlan { tpid: 0x8100 }, Action::Output(OUT)],
        dev_of,
    )
    .unwrap();
    let drop = actions_from(&[], dev_of).unwrap();
    t.insert(0, &FlowKey::ONES, &key_of(&f), out, 42).unwrap();
    t.insert(0, &FlowKey::ONES, &key_of(&g), drop, 43).unwrap();
    for _ in 0..25 {
        t.test_run(&f, LO).unwrap();
    }
    for _ in 0..7 {
        t.test_run(&g, LO).unwrap();
    }
    // Misses and upcalls count nowhere.
    t.test_run(&build(&FrameSpec::udp4(v4(1, 1), v4(2, 9), 1, 2, 128)), LO)
        .unwrap();
    let s = t.stats(42).unwrap();
    assert_eq!((s.packets, s.bytes), (25, 25 * f.len() as u64)); // received length
    let s = t.stats(43).unwrap();
    assert_eq!((s.packets, s.bytes), (7, 7 * g.len() as u64));
    assert_eq!(t.stats(44).unwrap().packets, 0);
    // One batch read of a window says what the per-slot reads say, slot by slot.
    let junk = FpStat {
        packets: 9,
        bytes: 9,
    };
    for first in [0, 1, 40, 42, 43] {
        let mut w = vec![junk; 8];
        t.stats_window(first, &mut w).unwrap();
        for (slot, s) in (first..).zip(&w) {
            assert_eq!(*s, t.stats(slot).unwrap(), "slot {slot}");
        }
    }
    // A window running past the table's end fills what there is.
    let mut w = vec![junk; 4];
    t.stats_window(MAX_FLOWS - 2, &mut w).unwrap();
    assert_eq!(w, [FpStat::default(), FpStat::default(), junk, junk]);
    let c = t.reason_counts().unwrap();
    assert_eq!(c[Reason::HitOutput as usize], 25);
    assert_eq!(c[Reason::HitDrop as usize], 7);
    assert_eq!(c[Reason::Miss as usize], 1);
}

/// A random mask word: zero (the program leaves such a word out of the masking and the
/// hash), all ones, or random bits.
fn mask_word() -> impl Strategy<Value = u64> {
    prop_oneof![2 => Just(0u64), 1 => Just(u64::MAX), 1 => any::<u64>()]
}

/// A random IPv4 or IPv6, UDP or TCP frame, untagged or tagged (the parser's fast path and
/// its general one).
fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<(u16, u16, bool)>(),
        any::<([u8; 6], [u8; 6])>(),
        prop::option::of(any::<u16>()),
        any::<(u8, u8)>(),
    )
        .prop_map(|(v6, s, d, (sp, dp, tcp), (ms, md), tag, (ttl, tos))| {
            let l3 = if v6 {
                L3::V6 {
                    src: s.into(),
                    dst: d.into(),
                    hop_limit: ttl,
                    tclass: tos,
                }
            } else {
                L3::V4 {
                    src: [s[0], s[1], s[2], s[3]].into(),
                    dst: [d[0], d[1], d[2], d[3]].into(),
                    ttl,
                    tos,
                }
            };
            // Not to the VXLAN port: the program hands those to user space unparsed.
            let dp = if dp == 4789 { 4790 } else { dp };
            let l4 = if tcp {
                L4::Tcp {
                    sport: sp,
                    dport: dp,
                    flags: 0x10,
                }
            } else {
                L4::Udp {
                    sport: sp,
                    dport: dp,
                }
            };
            let mut f = FrameSpec::new(l3, l4, 128);
            f.eth_src = ms;
            f.eth_dst = md;
            if let Some(tci) = tag {
                f = f.with_vlan(0x8100, tci);
            }
            f
        })
}

/// Every cached packet is found exactly when its key ANDed with the mask equals the
/// cached flow's: for random masks (words zero, all ones or random bits) and random pairs
/// of frames, the second often equal to the first in all but one field. The program
/// skips the words a mask zeroes, so a skip in the wrong place shows here as a false hit
/// or a false miss.
#[test]
fn a_hit_is_exactly_a_match_under_the_mask() {
    use proptest::test_runner::{Config, TestRunner};
    let Some(t) = setup() else { return };
    let t = RefCell::new(t);
    let out = actions_from(&[Action::Output(OUT)], dev_of).unwrap();
    let strat = (
        prop::array::uniform8(mask_word()),
        frame_spec(),
        frame_spec(),
        0usize..6,
    );
    let mut runner = TestRunner::new(Config {
        cases: 1500,
        failure_persistence: None,
        ..Config::default()
    });
    let (hits, misses) = (Cell::new(0), Cell::new(0));
    runner
        .run(&strat, |(words, a, other, change)| {
            let mut mask = FlowKey::ZERO;
            mask.words[..8].copy_from_slice(&words);
            // The second frame: the first with one part taken from `other`.
            let mut b = a.clone();
            match change {
                0 => b.eth_src = other.eth_src,
                1 => b.eth_dst = other.eth_dst,
                2 => b.l4 = other.l4,
                3 => b.l3 = other.l3,
                4 => b.vlans = other.vlans.clone(),
                _ => {}
            }
            let (fa, fb) = (build(&a), build(&b));
            let (ka, kb) = (key_of(&fa), key_of(&fb));
            let mut t = t.borrow_mut();
            t.set_masks(&[(3, mask)]).unwrap();
            t.insert(3, &mask, &ka, out, 1).unwrap();
            let verdict = |f: &[u8]| {
                let r = t.test_run(f, LO).unwrap();
                (r.action, t.last_debug().unwrap().reason)
            };
            let hit = (xdp_action::REDIRECT, Reason::HitOutput as u32);
            let miss = (xdp_action::PASS, Reason::Miss as u32);
            prop_assert_eq!(verdict(&fa), hit, "the cached flow itself");
            let same = (0..8).all(|w| ka.words[w] & mask.words[w] == kb.words[w] & mask.words[w]);
            let want = if same { hit } else { miss };
            prop_assert_eq!(verdict(&fb), want, "mask {:x?}", &mask.words[..8]);
            let n = if same { &hits } else { &misses };
            n.set(n.get() + 1);
            t.remove(3, &mask, &ka).unwrap();
            Ok(())
        })
        .unwrap();
    // Both outcomes must have been tested, or the property says little.
    let (hits, misses) = (hits.get(), misses.get());
    assert!(hits > 100 && misses > 100, "{hits} hits, {misses} misses");
}
