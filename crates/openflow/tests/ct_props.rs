//! Round trips of the connection-tracking extensions: every `ct` spec OVS can express and
//! every ct match, encoded as a flow_mod's bytes and decoded back, is itself; every NX
//! action body decodes as what encoded it.

mod common;

use flowpath_openflow::consts::*;
use flowpath_openflow::nx::*;
use flowpath_openflow::translate::*;
use flowpath_openflow::*;
use flowpath_packet::ct::{CtZoneSrc, NatFlags, NatKind, NatSpec};
use flowpath_packet::{Action, CtId, CtSpec, Field};
use flowpath_pipeline::Match;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An inclusive range `lo..=hi` with `lo >= 1` (OVS refuses a zero minimum).
fn range<T: Copy + Ord + std::fmt::Debug + 'static>(s: BoxedStrategy<T>) -> BoxedStrategy<(T, T)> {
    (s.clone(), s)
        .prop_map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
        .boxed()
}

/// A NAT OVS can express: ports only with addresses, no zero minimum, not hash and
/// random together. Without commit only the bare `nat`.
fn arb_nat(commit: bool) -> BoxedStrategy<Option<NatSpec>> {
    let bare = NatSpec {
        kind: None,
        addrs: None,
        ports: None,
        flags: NatFlags::default(),
    };
    if !commit {
        return proptest::option::of(Just(bare)).boxed();
    }
    let v4 = range((1u32..).prop_map(|a| a).boxed())
        .prop_map(|(a, b)| (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(b))));
    let v6 = range((1u128..).boxed())
        .prop_map(|(a, b)| (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b))));
    let addrs_ports = prop_oneof![
        Just((None, None)),
        (v4, proptest::option::of(range((1u16..).boxed()))).prop_map(|(a, p)| (Some(a), p)),
        (v6, proptest::option::of(range((1u16..).boxed()))).prop_map(|(a, p)| (Some(a), p)),
    ];
    let kind = prop_oneof![
        Just(None),
        Just(Some(NatKind::Src)),
        Just(Some(NatKind::Dst))
    ];
    let flags = (0u8..3, any::<bool>()).prop_map(|(port, persistent)| NatFlags {
        random: port == 1,
        hash: port == 2,
        persistent,
    });
    proptest::option::of(
        (kind, addrs_ports, flags).prop_map(|(kind, (addrs, ports), flags)| NatSpec {
            kind,
            addrs,
            ports,
            flags,
        }),
    )
    .boxed()
}

/// Fields a zone may come from, with OVS's width of each.
const ZONE_FIELDS: [(Field, u8); 6] = [
    (Field::Metadata, 64),
    (Field::InPort, 16),
    (Field::TunId, 64),
    (Field::CtMark, 32),
    (Field::CtLabel, 128),
    (Field::EthSrc, 48),
];

/// A `ct` spec OVS can express.
fn arb_spec() -> impl Strategy<Value = CtSpec> {
    let zone = prop_oneof![
        any::<u16>().prop_map(CtZoneSrc::Value),
        (0..ZONE_FIELDS.len(), any::<u8>()).prop_map(|(i, o)| {
            let (field, width) = ZONE_FIELDS[i];
            CtZoneSrc::Field {
                field,
                ofs: o % (width - 15),
                bits: 16,
            }
        }),
    ];
    let table = proptest::option::of(0u8..255);
    (any::<bool>(), any::<bool>(), zone, table).prop_flat_map(|(commit, force, zone, table)| {
        let masked32 = (any::<u32>(), 1u32..).prop_map(|(v, m)| (v & m, m));
        let masked128 = prop_oneof![
            (any::<u128>(), 1u128..).prop_map(|(v, m)| (v & m, m)),
            any::<u128>().prop_map(|v| (v, u128::MAX)),
        ];
        let writes = if commit {
            (
                proptest::option::of(masked32),
                proptest::option::of(masked128),
            )
                .boxed()
        } else {
            Just((None, None)).boxed()
        };
        (arb_nat(commit), writes).prop_map(move |(nat, (set_mark, set_label))| CtSpec {
            commit,
            force: force && commit,
            zone,
            table,
            nat,
            set_mark,
            set_label,
        })
    })
}

/// A flow_mod adding `m` with apply-actions `acts`, through its bytes and back into a rule.
fn through_the_wire(m: &Match, acts: &[Action]) -> Result<flowpath_pipeline::RuleSpec, OfError> {
    let fm = Message::FlowMod(FlowMod {
        table_id: 3,
        match_: match_to_oxm(m),
        instructions: vec![Instruction::ApplyActions(actions_to_of_actions(acts, m))],
        ..FlowMod::default()
    });
    let (_, back) = decode(&fm.encode(9)).expect("decodes");
    let Message::FlowMod(fm) = back else {
        panic!("{back:?}")
    };
    flow_mod_to_spec(&fm)
}

fn ipv4() -> Match {
    Match::any().exact(Field::EthType, 0x800)
}

/// ct fields for a match: ct_state (with a valid connection when the tuple is matched),
/// ct_zone, ct_mark, ct_label and the original-direction tuple.
fn arb_ct_match() -> impl Strategy<Value = Match> {
    let masked = |bits: u32| {
        let all = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        prop_oneof![
            (any::<u128>(), any::<u128>()).prop_map(move |(v, m)| (v & m & all, m & all)),
            any::<u128>().prop_map(move |v| (v & all, all)),
        ]
    };
    let tuple = proptest::option::of((
        any::<bool>(),
        masked(128),
        masked(128),
        proptest::option::of(any::<u8>()),
        masked(16),
        masked(16),
    ));
    (
        any::<bool>(),
        masked(8),
        proptest::option::of(any::<u16>()),
        masked(32),
        masked(128),
        tuple,
    )
        .prop_map(|(v6, (sv, sm), zone, mark, label, tuple)| {
            let eth = if v6 { 0x86dd } else { 0x800 };
            let mut m = Match::any().exact(Field::EthType, eth);
            let (mut sv, mut sm) = (sv, sm);
            if tuple.is_some() {
                // +est makes the tuple's prerequisite hold.
                sv |= 0x02;
                sm |= 0x02;
            }
            m = m.with(Field::CtState, sv, sm);
            if let Some(z) = zone {
                m = m.exact(Field::CtZone, z as u128);
            }
            m = m.with(Field::CtMark, mark.0, mark.1);
            m = m.with(Field::CtLabel, label.0, label.1);
            if let Some((t6, src, dst, proto, tps, tpd)) = tuple {
                let (s, d) = if t6 {
                    (Field::CtIpv6Src, Field::CtIpv6Dst)
                } else {
                    (Field::CtNwSrc, Field::CtNwDst)
                };
                let cut = |(v, mk): (u128, u128)| if t6 { (v, mk) } else { (v >> 96, mk >> 96) };
                let (src, dst) = (cut(src), cut(dst));
                m = m.with(s, src.0, src.1).with(d, dst.0, dst.1);
                if let Some(p) = proto {
                    m = m.exact(Field::CtNwProto, p as u128);
                }
                m = m.with(Field::CtTpSrc, tps.0, tps.1);
                m = m.with(Field::CtTpDst, tpd.0, tpd.1);
            }
            m
        })
}

/// Any NX action of the family, as the codec would carry it.
fn arb_nx_action() -> impl Strategy<Value = NxAction> {
    let nat = (
        any::<u16>(),
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<Option<u128>>(),
        any::<Option<u128>>(),
        any::<Option<u16>>(),
        any::<Option<u16>>(),
    )
        .prop_map(|(flags, a, b, c, d, e, f)| {
            NxAction::Nat(NxNat {
                flags,
                ipv4_min: a,
                ipv4_max: b,
                ipv6_min: c,
                ipv6_max: d,
                proto_min: e,
                proto_max: f,
            })
        });
    let ct = (
        any::<u16>(),
        any::<u32>(),
        any::<u16>(),
        any::<u8>(),
        any::<u16>(),
        common::arb_actions(),
    )
        .prop_map(|(flags, zone_src, zone, recirc_table, alg, actions)| {
            NxAction::Ct(NxConntrack {
                flags,
                zone_src,
                zone,
                recirc_table,
                alg,
                actions,
            })
        });
    prop_oneof![
        ct,
        nat,
        Just(NxAction::CtClear),
        (any::<u16>(), any::<u32>(), any::<u64>()).prop_map(|(ofs_nbits, dst, value)| {
            NxAction::RegLoad {
                ofs_nbits,
                dst,
                value,
            }
        }),
        common::arb_oxm().prop_map(NxAction::RegLoad2),
    ]
}

proptest! {
    /// A `ct` action OVS can express, encoded for a flow's stats and decoded as a
    /// flow_mod, is the same interned action.
    #[test]
    fn ct_specs_round_trip(spec in arb_spec(), clear in any::<bool>()) {
        let id = CtId::intern(spec).unwrap();
        let mut acts = vec![Action::Ct(id), Action::Output(2)];
        if clear {
            acts.insert(0, Action::CtClear);
        }
        let rule = through_the_wire(&ipv4(), &acts).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(&rule.actions, &acts);
        prop_assert_eq!(*ct_spec_of(&rule.actions), spec);
    }

    /// A match on the ct fields, as OXM and back, is itself.
    #[test]
    fn ct_matches_round_trip(m in arb_ct_match()) {
        let oxms = match_to_oxm(&m);
        let back = oxm_to_match(&oxms).map_err(|e| TestCaseError::fail(format!("{e} {oxms:?}")))?;
        prop_assert_eq!(back, m);
        let rule = through_the_wire(&m, &[]).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(rule.matches, m);
    }

    /// Every NX action body decodes as what encoded it, alone and inside a flow_mod.
    #[test]
    fn nx_bodies_round_trip(a in arb_nx_action()) {
        let of = a.to_of_action();
        let OfAction::Experimenter { data, .. } = &of else { panic!() };
        prop_assert_eq!(NxAction::decode(data).unwrap(), a.clone());
        let fm = Message::FlowMod(FlowMod {
            instructions: vec![Instruction::ApplyActions(vec![of])],
            ..FlowMod::default()
        });
        let (_, Message::FlowMod(back)) = decode(&fm.encode(1)).unwrap() else { panic!() };
        let Instruction::ApplyActions(acts) = &back.instructions[0] else { panic!() };
        prop_assert_eq!(NxAction::of(&acts[0]).unwrap().unwrap(), a);
    }
}

fn ct_spec_of(acts: &[Action]) -> &'static CtSpec {
    acts.iter()
        .find_map(|a| match a {
            Action::Ct(id) => Some(id.spec()),
            _ => None,
        })
        .expect("a ct action")
}

#[test]
fn the_ct_fields_are_named_and_numbered_as_ovs_has_them() {
    let got: Vec<(u8, &str, u32)> = CT_FIELDS
        .iter()
        .map(|f| (f.number, f.name, f.header()))
        .collect();
    assert_eq!(
        got,
        vec![
            (105, "ct_state", 0x0001_d204),
            (106, "ct_zone", 0x0001_d402),
            (107, "ct_mark", 0x0001_d604),
            (108, "ct_label", 0x0001_d810),
            (120, "ct_nw_src", 0x0001_f004),
            (122, "ct_ipv6_src", 0x0001_f410),
            (121, "ct_nw_dst", 0x0001_f204),
            (123, "ct_ipv6_dst", 0x0001_f610),
            (119, "ct_nw_proto", 0x0001_ee01),
            (124, "ct_tp_src", 0x0001_f802),
            (125, "ct_tp_dst", 0x0001_fa02),
        ]
    );
    assert_eq!(OFPXMC_NXM_1, 1);
}
