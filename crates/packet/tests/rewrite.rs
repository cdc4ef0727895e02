//! Every header rewrite against an independent model (see `rewrite_support`): each
//! action on each kind of frame and on a non-IP frame, random action sequences, and
//! garbage or perturbed offsets, which must never panic.

mod rewrite_support;

use flowpath_packet::action::Action;
use flowpath_packet::packet::{Packet, HEADROOM};
use flowpath_packet::parse::PacketMeta;
use flowpath_packet::rewrite::{apply, RewriteDrop};
use proptest::prelude::*;
use rewrite_support::frames::{arb_params, arp_frame, buffer, build, params, run, Kind, KINDS};
use rewrite_support::oracles::{etherparse_checksums_match, layout, model, snap, verify_checksums};

// ---------------------------------------------------------------------------------------
// Every rewrite on every kind of frame.

fn sample_actions() -> Vec<Action> {
    vec![
        Action::Output(3),
        Action::InPort,
        Action::controller(128),
        Action::Normal,
        Action::Flood,
        Action::All,
        Action::Table,
        Action::SetEthSrc([0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff]),
        Action::SetEthDst([0xff, 0xee, 0xdd, 0xcc, 0xbb, 0x0a]),
        Action::SetIpv4Src([172, 16, 254, 3]),
        Action::SetIpv4Dst([8, 8, 4, 4]),
        Action::SetIpv4Src([255, 255, 255, 255]),
        Action::SetIpv4Dst([0, 0, 0, 0]),
        Action::SetIpv6Src([0xff; 16]),
        Action::SetIpv6Dst([
            0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88,
        ]),
        Action::SetIpv6Dst([0; 16]),
        Action::SetNwTos(0xb9),
        Action::SetNwTos(0x00),
        Action::SetNwTos(0xff),
        Action::SetTpSrc(1),
        Action::SetTpDst(65535),
        Action::SetTpSrc(0),
        Action::PushVlan { tpid: 0x8100 },
        Action::PushVlan { tpid: 0x88a8 },
        Action::PopVlan,
        Action::SetVlanVid(0x0123),
        Action::SetVlanVid(0xffff),
        Action::SetVlanPcp(5),
        Action::SetVlanPcp(0xff),
        Action::DecTtl,
    ]
}

#[test]
fn each_rewrite_on_each_kind_of_frame() {
    let p = params();
    for kind in KINDS {
        let (frame, meta) = build(kind, &p);
        assert_eq!(layout(&frame), meta, "{kind:?}: test frame layout");
        verify_checksums(&frame, kind == Kind::V4UdpNoCsum).unwrap();
        etherparse_checksums_match(&frame).unwrap();
        let before = snap(&frame);
        for a in sample_actions() {
            let ctx = format!("{kind:?} {a:?}");
            let (res, out, meta2, modified) = run(&frame, meta, &[a]);
            let mut want = before.clone();
            let want_res = model(&mut want, &a);
            assert_eq!(res, want_res, "{ctx}: result");
            if res.is_err() {
                // Only a third tag is refused here; the packet is then untouched.
                assert_eq!(res, Err(RewriteDrop::TooManyVlans), "{ctx}");
                assert_eq!((&out, meta2, modified), (&frame, meta, false), "{ctx}");
                continue;
            }
            assert_eq!(snap(&out), want, "{ctx}: headers");
            assert_eq!(layout(&out), meta2, "{ctx}: meta");
            verify_checksums(&out, kind == Kind::V4UdpNoCsum)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            etherparse_checksums_match(&out).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            if want == before {
                // Not applicable to this frame: not a byte may change, and the packet must
                // not be marked modified.
                assert_eq!(out, frame, "{ctx}: no-op changed bytes");
                assert!(!modified, "{ctx}: no-op marked the packet modified");
            } else {
                assert!(modified, "{ctx}: rewrite did not mark the packet modified");
            }
        }
    }
}

#[test]
fn non_ip_frames_are_left_alone() {
    let (f, m) = arp_frame();
    for a in sample_actions() {
        let (res, out, m2, modified) = run(&f, m, &[a]);
        res.unwrap();
        match a {
            Action::SetEthSrc(mac) => assert_eq!(&out[6..12], &mac),
            Action::SetEthDst(mac) => assert_eq!(&out[0..6], &mac),
            Action::PushVlan { .. } | Action::SetVlanVid(_) | Action::SetVlanPcp(_) => {
                assert_eq!(m2.vlans, 1);
                assert_eq!(m2.l3, 18);
                assert_eq!(&out[18..], &f[14..]);
            }
            _ => {
                assert_eq!(out, f, "{a:?}");
                assert_eq!(m2, m);
                assert!(!modified, "{a:?}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        any::<[u8; 6]>().prop_map(Action::SetEthSrc),
        any::<[u8; 6]>().prop_map(Action::SetEthDst),
        any::<[u8; 4]>().prop_map(Action::SetIpv4Src),
        any::<[u8; 4]>().prop_map(Action::SetIpv4Dst),
        any::<[u8; 16]>().prop_map(Action::SetIpv6Src),
        any::<[u8; 16]>().prop_map(Action::SetIpv6Dst),
        any::<u8>().prop_map(Action::SetNwTos),
        any::<u16>().prop_map(Action::SetTpSrc),
        any::<u16>().prop_map(Action::SetTpDst),
        prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(|tpid| Action::PushVlan { tpid }),
        Just(Action::PopVlan),
        any::<u16>().prop_map(Action::SetVlanVid),
        any::<u8>().prop_map(Action::SetVlanPcp),
        Just(Action::DecTtl),
        Just(Action::Output(1)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random frames and random action sequences: after every step the headers are what
    /// the model says, every checksum verifies, and `meta` still describes the frame.
    #[test]
    fn random_rewrite_sequences(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let (frame, meta0) = build(kind, &p);
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = meta0;
        let mut want = snap(&frame);
        for a in &actions {
            let before = pkt.data().to_vec();
            let before_meta = meta;
            let res = apply(a, &mut pkt, &mut meta);
            let want_res = model(&mut want, a);
            prop_assert_eq!(res, want_res, "{:?}", a);
            if res.is_err() {
                prop_assert_eq!(pkt.data(), &before[..]);
                prop_assert_eq!(meta, before_meta);
                break;
            }
            let out = pkt.data();
            prop_assert_eq!(&snap(out), &want, "{:?}", a);
            prop_assert_eq!(layout(out), meta, "{:?}", a);
            if let Err(e) = verify_checksums(out, kind == Kind::V4UdpNoCsum) {
                prop_assert!(false, "{:?}: {}", a, e);
            }
            if let Err(e) = etherparse_checksums_match(out) {
                prop_assert!(false, "{:?}: {}", a, e);
            }
        }
    }

    /// Arbitrary bytes with arbitrary (even inconsistent) offsets: never a panic.
    #[test]
    fn garbage_never_panics(
        data in prop::collection::vec(any::<u8>(), 0..120),
        l3 in 0u16..140,
        l4 in 0u16..160,
        vlans in 0u8..4,
        et in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x8100), any::<u16>()],
        version in 0u8..16,
        headroom in 0usize..8,
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let mut data = data;
        // Steer the frame towards the IP paths often enough to matter.
        let et_off = 12 + 4 * usize::from(vlans);
        if data.len() >= et_off + 2 {
            data[et_off..et_off + 2].copy_from_slice(&et.to_be_bytes());
        }
        if let Some(b) = data.get_mut(usize::from(l3)) {
            *b = (version << 4) | (*b & 0x0f);
        }
        let mut buf = vec![0u8; headroom];
        buf.extend_from_slice(&data);
        let mut pkt = Packet::new(&mut buf, headroom, data.len());
        let mut meta = PacketMeta { l2: 0, l3, l4, vlans };
        for a in &actions {
            let _ = apply(a, &mut pkt, &mut meta);
        }
    }

    /// Valid frames whose IPv6 extension chain is garbage or whose offsets are off by a
    /// few bytes: no panic, and the fixed part of the frame stays an Ethernet frame.
    #[test]
    fn perturbed_offsets_never_panic(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        dl3 in -8i32..8,
        dl4 in -40i32..40,
        truncate in 0usize..60,
        actions in prop::collection::vec(arb_action(), 1..=6),
    ) {
        let (mut frame, meta0) = build(kind, &p);
        let keep = frame.len().saturating_sub(truncate).max(14);
        frame.truncate(keep);
        let l3 = (i32::from(meta0.l3) + dl3).max(0) as u16;
        let l4 = (i32::from(meta0.l4) + dl4).max(0) as u16;
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = PacketMeta { l2: 0, l3, l4, vlans: meta0.vlans };
        for a in &actions {
            let _ = apply(a, &mut pkt, &mut meta);
        }
    }
}
