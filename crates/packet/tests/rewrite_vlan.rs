//! VLAN rewrites: push and pop round trips, what a pushed tag carries, the two-tag limit,
//! room for a tag from headroom or tailroom, and random push/pop sequences that must
//! leave everything after the tags alone.

mod rewrite_support;

use flowpath_packet::action::Action;
use flowpath_packet::packet::{Packet, HEADROOM};
use flowpath_packet::rewrite::{apply, RewriteDrop};
use proptest::prelude::*;
use rewrite_support::frames::{
    arb_params, buffer, build, params, run, Kind, KINDS, MAC_DST, MAC_SRC,
};
use rewrite_support::oracles::{layout, tags, verify_checksums};

#[test]
fn push_then_pop_round_trips() {
    let p = params();
    for kind in KINDS {
        let (f, m) = build(kind, &p);
        if m.vlans == 2 {
            continue; // no room for a third tag (tested below)
        }
        let (res, out, m2, _) = run(
            &f,
            m,
            &[
                Action::PushVlan { tpid: 0x88a8 },
                Action::SetVlanVid(42),
                Action::PopVlan,
            ],
        );
        res.unwrap();
        assert_eq!(out, f, "{kind:?}");
        assert_eq!(m2, m);
    }
}

#[test]
fn push_copies_outer_tci_and_vid_pushes_8021q() {
    let p = params();
    let (f, m) = build(Kind::V4TcpVlan, &p);
    let (_, out, m2, _) = run(&f, m, &[Action::PushVlan { tpid: 0x88a8 }]);
    assert_eq!(tags(&out), vec![(0x88a8, p.tci), (0x8100, p.tci)]);
    assert_eq!(m2.vlans, 2);
    assert_eq!(layout(&out), m2);

    let (f, m) = build(Kind::V4Tcp, &p);
    let (_, out, m2, _) = run(&f, m, &[Action::SetVlanPcp(6)]);
    assert_eq!(tags(&out), vec![(0x8100, 6 << 13)]);
    assert_eq!(layout(&out), m2);
    let (_, out, _, _) = run(&f, m, &[Action::SetVlanVid(0xf123)]);
    assert_eq!(tags(&out), vec![(0x8100, 0x123)]);
    let (_, out, _, _) = run(&f, m, &[Action::PushVlan { tpid: 0x8100 }]);
    assert_eq!(tags(&out), vec![(0x8100, 0)]);
    assert_eq!(&out[0..6], &MAC_DST);
    assert_eq!(&out[6..12], &MAC_SRC);

    // Pop on an untagged frame: nothing.
    let (_, out, m2, modified) = run(&f, m, &[Action::PopVlan]);
    assert_eq!((out, m2, modified), (f.clone(), m, false));

    // A third tag is refused (the parser reads at most two), before looking for room,
    // and the packet is left as it was.
    let (f, m) = build(Kind::V6UdpQinQ, &p);
    for a in [
        Action::PushVlan { tpid: 0x8100 },
        Action::PushVlan { tpid: 0x88a8 },
    ] {
        let (res, out, m2, modified) = run(&f, m, &[a]);
        assert_eq!(res, Err(RewriteDrop::TooManyVlans));
        assert_eq!((out, m2, modified), (f.clone(), m, false));
        let mut buf = f.clone();
        let mut pkt = Packet::whole(&mut buf);
        let mut meta = m;
        assert_eq!(
            apply(&a, &mut pkt, &mut meta),
            Err(RewriteDrop::TooManyVlans)
        );
    }
    // Setting VID/PCP on a double-tagged packet modifies the outer tag, no push.
    let (res, out, m2, _) = run(&f, m, &[Action::SetVlanVid(9), Action::SetVlanPcp(1)]);
    res.unwrap();
    assert_eq!(m2, m);
    assert_eq!(
        tags(&out)[0],
        (tags(&f)[0].0, (1 << 13) | (p.tci & 0x1000) | 9)
    );
    assert_eq!(tags(&out)[1], tags(&f)[1]);
}

#[test]
fn push_without_headroom_uses_tailroom_else_drops() {
    let p = params();
    let (f, m) = build(Kind::V4Udp, &p);

    // No headroom, 4 bytes of tailroom.
    let mut buf = f.clone();
    buf.extend_from_slice(&[0; 4]);
    let mut pkt = Packet::new(&mut buf, 0, f.len());
    let mut meta = m;
    assert_eq!(
        apply(&Action::PushVlan { tpid: 0x8100 }, &mut pkt, &mut meta),
        Ok(())
    );
    let out = pkt.data().to_vec();
    assert_eq!(out.len(), f.len() + 4);
    assert_eq!(tags(&out), vec![(0x8100, 0)]);
    assert_eq!(&out[16..], &f[12..]);
    assert_eq!(layout(&out), meta);
    verify_checksums(&out, false).unwrap();

    // Neither.
    let mut buf = f.clone();
    let mut pkt = Packet::whole(&mut buf);
    let mut meta = m;
    for a in [
        Action::PushVlan { tpid: 0x8100 },
        Action::SetVlanVid(1),
        Action::SetVlanPcp(1),
    ] {
        assert_eq!(apply(&a, &mut pkt, &mut meta), Err(RewriteDrop::NoRoom));
        assert_eq!(pkt.data(), &f[..]);
        assert_eq!(meta, m);
        assert!(!pkt.modified);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// VLAN push/pop sequences never disturb anything after the tags, and `meta` follows.
    #[test]
    fn vlan_sequences_keep_payload(
        kind in prop::sample::select(KINDS.to_vec()),
        p in arb_params(),
        ops in prop::collection::vec(
            prop_oneof![
                prop_oneof![Just(0x8100u16), Just(0x88a8)].prop_map(|tpid| Action::PushVlan { tpid }),
                Just(Action::PopVlan),
                any::<u16>().prop_map(Action::SetVlanVid),
                any::<u8>().prop_map(Action::SetVlanPcp),
            ],
            1..=12,
        ),
    ) {
        let (frame, meta0) = build(kind, &p);
        let inner = frame[usize::from(meta0.l3) - 2..].to_vec();
        let mut buf = buffer(&frame, 0);
        let mut pkt = Packet::new(&mut buf, HEADROOM, frame.len());
        let mut meta = meta0;
        for a in &ops {
            let before = pkt.data().to_vec();
            let full = meta.vlans == 2;
            let res = apply(a, &mut pkt, &mut meta);
            if matches!(a, Action::PushVlan { .. }) && full {
                prop_assert_eq!(res, Err(RewriteDrop::TooManyVlans));
                prop_assert_eq!(pkt.data(), &before[..]);
                continue;
            }
            prop_assert_eq!(res, Ok(()));
            let out = pkt.data();
            prop_assert_eq!(&out[..6], &MAC_DST[..]);
            prop_assert_eq!(&out[6..12], &MAC_SRC[..]);
            prop_assert_eq!(usize::from(meta.vlans), tags(out).len());
            prop_assert_eq!(usize::from(meta.l3), 14 + 4 * usize::from(meta.vlans));
            prop_assert_eq!(&out[usize::from(meta.l3) - 2..], &inner[..]);
            prop_assert_eq!(layout(out), meta);
            prop_assert_eq!(
                usize::from(meta.l4 - meta.l3),
                usize::from(meta0.l4 - meta0.l3)
            );
        }
    }
}
