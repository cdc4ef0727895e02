//! The program's parser against flowpath's: for every frame, the key the program recorded
//! (fp_debug, with no cached flows so every parsed packet is a miss) must equal
//! `flowpath_packet::parse`'s, field by field; the only frames it may hand over unparsed are
//! the defined set: those flowpath rejects (UpParse), VXLAN and IPv6 with extension headers
//! (UpUnsupported).

mod common;

use common::*;
use flowpath_gen::{build, FrameSpec, Vxlan, L3, L4};
use flowpath_packet::{parse, Field, FlowKey, ParseOptions};
use flowpath_xdptier::{flowkey_from_key, xdp_action, FlowTier, Reason};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// IPv6 frame whose first next-header is an extension header the program does not walk.
fn ipv6_ext(frame: &[u8]) -> bool {
    let ip = l3_off(frame);
    u16::from_be_bytes([frame[ip - 2], frame[ip - 1]]) == 0x86dd
        && frame.len() > ip + 6
        && matches!(frame[ip + 6], 0 | 43 | 44 | 60)
}

/// UDP to the VXLAN port, not a fragment: VXLAN to flowpath, whether or not the inner
/// frame parses.
fn vxlan_frame(frame: &[u8]) -> bool {
    let mut k = FlowKey::ZERO;
    let outer = ParseOptions { vxlan_port: None };
    parse(frame, IN_PORT, &outer, &mut k).is_ok()
        && k.get(Field::NwProto) == 17
        && k.get(Field::TpDst) == 4789
        && k.get(Field::NwFrag) == 0
}

/// Run one frame; panic with a field-by-field report on any difference. Returns the verdict.
fn check(t: &FlowTier, frame: &[u8]) -> Reason {
    let before = t.last_debug().unwrap().seq;
    let r = t.test_run(frame, LO).unwrap();
    let d = t.last_debug().unwrap();
    assert_eq!(d.seq, before.wrapping_add(1), "no record for {frame:02x?}");
    let reason = Reason::from_u32(d.reason).expect("known reason");
    // No socket is registered: every upcall is XDP_PASS, and the frame is untouched.
    assert!(reason.is_upcall(), "{reason:?} with no flows cached");
    assert_eq!(r.action, xdp_action::PASS, "{reason:?}");
    assert_eq!(r.data, frame, "an upcall changed the frame");
    let mut key = FlowKey::ZERO;
    let parsed = parse(frame, IN_PORT, &ParseOptions::default(), &mut key);
    match reason {
        Reason::Miss => {
            assert!(
                parsed.is_ok(),
                "program parsed what flowpath rejects ({parsed:?}): {frame:02x?}"
            );
            let got = flowkey_from_key(&d.key);
            if got != key {
                let diffs: Vec<String> = Field::ALL
                    .iter()
                    .filter(|f| got.get(**f) != key.get(**f))
                    .map(|f| format!("{f}: xdp {:#x} flowpath {:#x}", got.get(*f), key.get(*f)))
                    .collect();
                panic!("keys differ for {frame:02x?}:\n  {}", diffs.join("\n  "));
            }
        }
        Reason::UpParse => assert!(
            parsed.is_err(),
            "program rejected a frame flowpath parses to {key:?}: {frame:02x?}"
        ),
        Reason::UpUnsupported => {
            let vxlan = vxlan_frame(frame);
            assert!(
                vxlan || ipv6_ext(frame),
                "unsupported but neither VXLAN nor IPv6 ext: {frame:02x?}"
            );
        }
        other => panic!("unexpected verdict {other:?}"),
    }
    reason
}

#[test]
fn xdp_key_equals_flowpath_key_on_chosen_frames() {
    let Some(t) = tier() else { return };
    let mut seen = std::collections::HashMap::new();
    for f in frames() {
        *seen.entry(check(&t, &f)).or_insert(0) += 1;
    }
    eprintln!("verdicts: {seen:?}");
    // The set must exercise all three outcomes.
    assert!(seen[&Reason::Miss] >= 50, "{seen:?}");
    assert!(seen[&Reason::UpParse] >= 10, "{seen:?}");
    assert_eq!(seen[&Reason::UpUnsupported], 3, "{seen:?}"); // 2 VXLAN + hop-by-hop
}

#[test]
fn unknown_ingress_is_an_upcall() {
    let Some(mut t) = tier() else { return };
    let f = build(&FrameSpec::udp4(v4(1, 1), v4(2, 2), 1, 2, 64));
    // A fresh tier without lo in fp_inport.
    drop(t);
    t = FlowTier::load().unwrap();
    t.set_debug(true).unwrap();
    let r = t.test_run(&f, LO).unwrap();
    assert_eq!(r.action, xdp_action::PASS);
    assert_eq!(t.last_debug().unwrap().reason, Reason::UpNoInPort as u32);
}

fn l3_strategy() -> impl Strategy<Value = L3> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<[u8; 4]>(), any::<u8>(), any::<u8>()).prop_map(
            |(s, d, ttl, tos)| L3::V4 {
                src: s.into(),
                dst: d.into(),
                ttl,
                tos
            }
        ),
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            any::<u8>()
        )
            .prop_map(|(s, d, hop_limit, tclass)| L3::V6 {
                src: s.into(),
                dst: d.into(),
                hop_limit,
                tclass
            }),
    ]
}

fn l4_strategy() -> impl Strategy<Value = L4> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(sport, dport)| L4::Udp { sport, dport }),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(sport, dport, flags)| L4::Tcp {
            sport,
            dport,
            flags
        }),
        (any::<u8>(), any::<u8>()).prop_map(|(ty, code)| L4::Icmp { ty, code }),
    ]
}

fn spec_strategy() -> impl Strategy<Value = FrameSpec> {
    (
        l3_strategy(),
        l4_strategy(),
        proptest::collection::vec(
            (prop_oneof![Just(0x8100u16), Just(0x88a8)], any::<u16>()),
            0..=2,
        ),
        60usize..400,
        any::<[u8; 6]>(),
        prop::option::weighted(0.1, (any::<u32>(), any::<[u8; 4]>(), any::<[u8; 4]>())),
    )
        .prop_map(|(l3, l4, tags, size, mac, vx)| {
            let mut s = FrameSpec::new(l3, l4, size);
            s.eth_src = mac;
            for (tpid, tci) in tags {
                s = s.with_vlan(tpid, tci);
            }
            if let Some((vni, a, b)) = vx {
                s = s.with_vxlan(Vxlan::v4(vni, a.into(), b.into()));
            }
            s
        })
}

/// Random valid frames, then the same frames truncated and with one byte changed: the
/// program must agree with flowpath on all of them (mostly on the malformed ones).
#[test]
fn xdp_key_equals_flowpath_key_on_generated_frames() {
    let Some(t) = tier() else { return };
    let strat = (
        spec_strategy(),
        prop::option::of(any::<prop::sample::Index>()),
        prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
    );
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strat, |(spec, cut, poke)| {
            let mut f = build(&spec);
            check(&t, &f);
            if let Some((i, v)) = poke {
                // Poke into the headers, where it matters.
                let i = i.index(f.len().min(80));
                f[i] = v;
            }
            if let Some(c) = cut {
                let n = 14 + c.index(f.len() - 13);
                f.truncate(n);
            }
            check(&t, &f);
            Ok(())
        })
        .unwrap();
}

/// The debug key is not something the lookup ignores: a cached exact entry built from
/// flowpath's key is found for every parsed frame (so the key used for lookup is the one
/// compared above).
#[test]
fn lookup_uses_the_same_key() {
    let Some(mut t) = tier() else { return };
    t.set_masks(&[(0, FlowKey::ONES)]).unwrap();
    let drop_all = flowpath_xdptier::actions_from(&[], |_| None).unwrap();
    let mut n = 0;
    for f in frames() {
        let mut key = FlowKey::ZERO;
        if parse(&f, IN_PORT, &ParseOptions::default(), &mut key).is_err()
            || key.get(Field::TunFlags) != 0
            || ipv6_ext(&f)
        {
            continue;
        }
        t.insert(0, &FlowKey::ONES, &key, drop_all, 1).unwrap();
        let r = t.test_run(&f, LO).unwrap();
        assert_eq!(r.action, xdp_action::DROP, "{key:?}");
        t.remove(0, &FlowKey::ONES, &key).unwrap();
        n += 1;
    }
    assert!(n >= 50);
}
