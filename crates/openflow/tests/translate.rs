//! OXM ↔ Match round trips over matches the key can express, the error codes of what it
//! cannot, and flow_mod → rule → flow stats.

use flowpath_openflow::consts::*;
use flowpath_openflow::translate::*;
use flowpath_openflow::*;
use flowpath_packet::{Action, Field};
use flowpath_pipeline::Match;
use proptest::prelude::*;

/// A valid OXM match with prerequisites met, fields in wire order.
fn arb_valid_oxms() -> impl Strategy<Value = Vec<Oxm>> {
    use OxmField as F;
    let opt = |s: BoxedStrategy<Oxm>| proptest::option::of(s);
    let mac = |f: F| {
        prop_oneof![
            any::<u64>().prop_map(move |v| Oxm::exact(f, v as u128)),
            (any::<u64>(), any::<u64>()).prop_map(move |(v, m)| Oxm::masked(
                f,
                (v & m) as u128,
                m as u128
            )),
        ]
        .boxed()
    };
    let ip4 = |f: F| {
        prop_oneof![
            any::<u32>().prop_map(move |v| Oxm::exact(f, v as u128)),
            (any::<u32>(), 1u32..32).prop_map(move |(v, l)| {
                let m = !0u32 << (32 - l);
                Oxm::masked(f, (v & m) as u128, m as u128)
            }),
        ]
        .boxed()
    };
    let ip6 = |f: F| {
        prop_oneof![
            any::<u128>().prop_map(move |v| Oxm::exact(f, v)),
            (any::<u128>(), 1u32..128).prop_map(move |(v, l)| {
                let m = !0u128 << (128 - l);
                Oxm::masked(f, v & m, m)
            }),
        ]
        .boxed()
    };
    let in_port = opt(any::<u32>().prop_map(Oxm::in_port).boxed());
    let vlan = prop_oneof![
        Just(vec![]),
        Just(vec![Oxm::exact(F::VlanVid, 0)]),
        Just(vec![Oxm::masked(F::VlanVid, 0x1000, 0x1000)]),
        (0u128..4096, proptest::option::of(0u128..8)).prop_map(|(vid, pcp)| {
            let mut v = vec![Oxm::exact(F::VlanVid, 0x1000 | vid)];
            v.extend(pcp.map(|p| Oxm::exact(F::VlanPcp, p)));
            v
        }),
    ];
    let tun = opt(prop_oneof![
        (0u128..0x100_0000).prop_map(|v| Oxm::exact(F::TunnelId, v)),
        (0u128..0x100_0000, 1u128..0xff_ffff).prop_map(|(v, m)| Oxm::masked(F::TunnelId, v & m, m)),
    ]
    .boxed());
    // The L3 part: (eth_type, fields).
    let l3 = prop_oneof![
        Just(vec![]),
        any::<u16>()
            .prop_filter("not IP/ARP", |e| ![0x800, 0x86dd, 0x806].contains(e))
            .prop_map(|e| vec![Oxm::exact(F::EthType, e as u128)]),
        (
            opt(ip4(F::Ipv4Src)),
            opt(ip4(F::Ipv4Dst)),
            proptest::option::of(0u128..64),
            proptest::option::of(0u128..4),
            prop_oneof![
                Just(None),
                (any::<u8>()).prop_map(|p| Some((p as u128, None))),
                (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Some((6, Some((a, b))))),
                (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Some((17, Some((a, b))))),
                (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Some((1, Some((a as u16, b as u16))))),
            ]
        )
            .prop_map(|(s, d, dscp, ecn, l4)| {
                let mut v = vec![Oxm::exact(F::EthType, 0x800)];
                v.extend(dscp.map(|x| Oxm::exact(F::IpDscp, x)));
                v.extend(ecn.map(|x| Oxm::exact(F::IpEcn, x)));
                if let Some((p, ports)) = l4 {
                    v.push(Oxm::exact(F::IpProto, p));
                    v.extend(s);
                    v.extend(d);
                    if let Some((a, b)) = ports {
                        let (fa, fb) = match p {
                            6 => (F::TcpSrc, F::TcpDst),
                            17 => (F::UdpSrc, F::UdpDst),
                            _ => (F::Icmpv4Type, F::Icmpv4Code),
                        };
                        v.push(Oxm::exact(fa, a as u128));
                        v.push(Oxm::exact(fb, b as u128));
                    }
                } else {
                    v.extend(s);
                    v.extend(d);
                }
                v
            }),
        (
            opt(ip6(F::Ipv6Src)),
            opt(ip6(F::Ipv6Dst)),
            proptest::option::of((any::<u8>(), any::<u8>()))
        )
            .prop_map(|(s, d, icmp)| {
                let mut v = vec![Oxm::exact(F::EthType, 0x86dd)];
                if icmp.is_some() {
                    v.push(Oxm::exact(F::IpProto, 58));
                }
                v.extend(s);
                v.extend(d);
                if let Some((t, c)) = icmp {
                    v.push(Oxm::exact(F::Icmpv6Type, t as u128));
                    v.push(Oxm::exact(F::Icmpv6Code, c as u128));
                }
                v
            }),
        (
            proptest::option::of(0u128..256),
            opt(ip4(F::ArpSpa)),
            opt(ip4(F::ArpTpa))
        )
            .prop_map(|(op, s, d)| {
                let mut v = vec![Oxm::exact(F::EthType, 0x806)];
                v.extend(op.map(|o| Oxm::exact(F::ArpOp, o)));
                v.extend(s);
                v.extend(d);
                v
            }),
    ];
    (
        in_port,
        opt(mac(F::EthDst)),
        opt(mac(F::EthSrc)),
        vlan,
        l3,
        tun,
    )
        .prop_map(|(p, d, s, vlan, l3, tun)| {
            let mut v: Vec<Oxm> = p.into_iter().chain(d).chain(s).collect();
            v.extend(l3);
            v.extend(vlan);
            v.extend(tun);
            v.sort_by_key(|o| o.field());
            // A mask of all ones is the exact form.
            v.into_iter()
                .map(|o| match o {
                    Oxm::Basic {
                        field,
                        value,
                        mask: Some(m),
                    } if m == field.width_mask() => Oxm::exact(field, value),
                    o => o,
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn oxm_match_round_trip(oxms in arb_valid_oxms()) {
        let m = oxm_to_match(&oxms).unwrap_or_else(|e| panic!("{oxms:?}: {e:?}"));
        let back = match_to_oxm(&m);
        // tunnel_id's 24 bits: an exact id comes back exact; a full 24-bit mask too.
        let canon: Vec<Oxm> = oxms.iter().map(|o| match o {
            Oxm::Basic { field: OxmField::TunnelId, value, mask: Some(0xff_ffff) } => Oxm::exact(OxmField::TunnelId, *value),
            o => o.clone(),
        }).collect();
        prop_assert_eq!(&back, &canon);
        prop_assert_eq!(oxm_to_match(&back).unwrap(), m);
    }

    #[test]
    fn random_oxms_never_panic(oxms in proptest::collection::vec(any::<(u8, u128, Option<u128>)>(), 0..8)) {
        let oxms: Vec<Oxm> = oxms.into_iter().map(|(f, v, m)| {
            let f = OxmField::ALL[(f % 40) as usize];
            match m { Some(m) => Oxm::masked(f, v, m), None => Oxm::exact(f, v) }
        }).collect();
        if let Ok(m) = oxm_to_match(&oxms) {
            prop_assert_eq!(oxm_to_match(&match_to_oxm(&m)).unwrap(), m);
        }
    }
}

fn err(t: u16, c: u16) -> OfError {
    OfError::new(t, c)
}

#[test]
fn match_errors() {
    use OxmField as F;
    let ip = Oxm::exact(F::EthType, 0x800);
    let bad = |o: Vec<Oxm>| oxm_to_match(&o).unwrap_err();
    assert_eq!(
        bad(vec![Oxm::exact(F::IpProto, 6)]),
        err(et::BAD_MATCH, bmc::BAD_PREREQ)
    );
    assert_eq!(
        bad(vec![ip.clone(), Oxm::exact(F::TcpDst, 80)]),
        err(et::BAD_MATCH, bmc::BAD_PREREQ)
    );
    assert_eq!(
        bad(vec![
            ip.clone(),
            Oxm::exact(F::IpProto, 17),
            Oxm::exact(F::TcpDst, 80)
        ]),
        err(et::BAD_MATCH, bmc::BAD_PREREQ)
    );
    assert_eq!(
        bad(vec![Oxm::exact(F::VlanPcp, 3)]),
        err(et::BAD_MATCH, bmc::BAD_PREREQ)
    );
    assert_eq!(
        bad(vec![ip.clone(), ip.clone()]),
        err(et::BAD_MATCH, bmc::DUP_FIELD)
    );
    // Metadata: 24 bits kept; a value needing a bit above them could never match.
    assert_eq!(
        bad(vec![Oxm::exact(F::Metadata, 1 << 40)]),
        err(et::BAD_MATCH, bmc::BAD_VALUE)
    );
    assert_eq!(
        bad(vec![Oxm::exact(F::PbbIsid, 1)]),
        err(et::BAD_MATCH, bmc::BAD_FIELD)
    );
    assert_eq!(
        bad(vec![
            ip.clone(),
            Oxm::exact(F::IpProto, 132),
            Oxm::exact(F::SctpDst, 1)
        ]),
        err(et::BAD_MATCH, bmc::BAD_FIELD)
    );
    assert_eq!(
        bad(vec![Oxm::Unknown {
            class: 1,
            field: 29,
            has_mask: false,
            payload: vec![1]
        }]),
        err(et::BAD_MATCH, bmc::BAD_FIELD)
    );
    assert_eq!(
        bad(vec![
            ip.clone(),
            Oxm::masked(F::Ipv4Src, 0x0a00_0001, 0xff00_0000)
        ]),
        err(et::BAD_MATCH, bmc::BAD_WILDCARDS)
    );
    assert_eq!(
        bad(vec![Oxm::masked(F::EthType, 0x800, 0xff00)]),
        err(et::BAD_MATCH, bmc::BAD_MASK)
    );
    assert_eq!(
        bad(vec![Oxm::exact(F::VlanVid, 5)]),
        err(et::BAD_MATCH, bmc::BAD_VALUE)
    );
    assert_eq!(
        bad(vec![ip.clone(), Oxm::exact(F::IpDscp, 64)]),
        err(et::BAD_MATCH, bmc::BAD_VALUE)
    );
    assert_eq!(
        bad(vec![Oxm::exact(F::TunnelId, 1 << 30)]),
        err(et::BAD_MATCH, bmc::BAD_VALUE)
    );
}

#[test]
fn vlan_semantics() {
    use OxmField as F;
    let m = oxm_to_match(&[Oxm::exact(F::VlanVid, OFPVID_NONE as u128)]).unwrap();
    assert_eq!(
        (m.value.get(Field::VlanTci), m.mask.get(Field::VlanTci)),
        (0, 0x1fff)
    );
    let m = oxm_to_match(&[Oxm::masked(F::VlanVid, 0x1000, 0x1000)]).unwrap();
    assert_eq!(
        (m.value.get(Field::VlanTci), m.mask.get(Field::VlanTci)),
        (0x1000, 0x1000)
    );
    let m = oxm_to_match(&[
        Oxm::exact(F::VlanVid, 0x1000 | 10),
        Oxm::exact(F::VlanPcp, 5),
    ])
    .unwrap();
    assert_eq!(
        (m.value.get(Field::VlanTci), m.mask.get(Field::VlanTci)),
        (0xa000 | 0x1000 | 10, 0xffff)
    );
}

fn flow_mod(match_: Vec<Oxm>, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod {
        table_id: 1,
        priority: 7,
        cookie: 0xabc,
        idle_timeout: 10,
        flags: OFPFF_SEND_FLOW_REM,
        match_,
        instructions,
        ..FlowMod::default()
    }
}

#[test]
fn flow_mod_to_rule_and_back() {
    use OxmField as F;
    let match_ = vec![
        Oxm::in_port(1),
        Oxm::exact(F::EthType, 0x800),
        Oxm::exact(F::IpProto, 17),
        Oxm::exact(F::UdpDst, 53),
    ];
    let instructions = vec![
        Instruction::ApplyActions(vec![
            OfAction::PushVlan(0x8100),
            OfAction::SetField(Oxm::exact(F::VlanVid, 0x1000 | 5)),
            OfAction::SetField(Oxm::exact(F::UdpDst, 5353)),
            OfAction::DecNwTtl,
            OfAction::output(OFPP_IN_PORT),
            OfAction::Output {
                port: OFPP_CONTROLLER,
                max_len: 128,
            },
            OfAction::output(OFPP_NORMAL),
            OfAction::output(3),
        ]),
        Instruction::GotoTable(4),
    ];
    let spec = flow_mod_to_spec(&flow_mod(match_.clone(), instructions.clone())).unwrap();
    assert_eq!(spec.table, 1);
    assert_eq!(spec.goto, Some(4));
    assert_eq!(
        spec.actions,
        vec![
            Action::PushVlan { tpid: 0x8100 },
            Action::SetVlanVid(5),
            Action::SetTpDst(5353),
            Action::DecTtl,
            Action::InPort,
            Action::controller(128),
            Action::Normal,
            Action::Output(3),
        ]
    );
    assert!(spec.flags.send_flow_rem);
    let fs = flow_stats(&spec, 5, 500, 1_500_000_000);
    assert_eq!(fs.match_, match_);
    assert_eq!(fs.instructions, instructions);
    assert_eq!((fs.duration_sec, fs.duration_nsec), (1, 500_000_000));
    assert_eq!(fs.flags, OFPFF_SEND_FLOW_REM);
}

#[test]
fn instruction_and_action_errors() {
    use OxmField as F;
    let fm = |i: Vec<Instruction>| flow_mod_to_spec(&flow_mod(vec![], i)).unwrap_err();
    let apply = |a: OfAction| fm(vec![Instruction::ApplyActions(vec![a])]);
    assert_eq!(
        fm(vec![Instruction::GotoTable(1)]),
        err(et::BAD_INSTRUCTION, bic::BAD_TABLE_ID)
    );
    // flowpath keeps 24 bits of metadata: writing a bit above them is refused.
    assert_eq!(
        fm(vec![Instruction::WriteMetadata {
            metadata: 1 << 40,
            mask: u64::MAX
        }]),
        err(et::BAD_INSTRUCTION, bic::UNSUP_METADATA)
    );
    assert_eq!(
        fm(vec![Instruction::Meter(1)]),
        err(et::BAD_INSTRUCTION, bic::UNSUP_INST)
    );
    assert_eq!(
        apply(OfAction::output(OFPP_LOCAL)),
        err(et::BAD_ACTION, bac::BAD_OUT_PORT)
    );
    assert_eq!(
        apply(OfAction::output(OFPP_TABLE)),
        err(et::BAD_ACTION, bac::BAD_OUT_PORT)
    );
    assert_eq!(
        apply(OfAction::output(0)),
        err(et::BAD_ACTION, bac::BAD_OUT_PORT)
    );
    assert_eq!(
        apply(OfAction::PushVlan(0x0800)),
        err(et::BAD_ACTION, bac::BAD_ARGUMENT)
    );
    assert_eq!(
        apply(OfAction::PopVlan),
        err(et::BAD_ACTION, bac::MATCH_INCONSISTENT)
    );
    assert_eq!(
        apply(OfAction::PushMpls(0x8847)),
        err(et::BAD_ACTION, bac::BAD_TYPE)
    );
    assert_eq!(
        apply(OfAction::SetQueue(1)),
        err(et::BAD_ACTION, bac::BAD_TYPE)
    );
    assert_eq!(
        apply(OfAction::SetField(Oxm::exact(F::Ipv4Src, 1))),
        err(et::BAD_ACTION, bac::MATCH_INCONSISTENT)
    );
    assert_eq!(
        apply(OfAction::SetField(Oxm::exact(F::VlanVid, 0x1005))),
        err(et::BAD_ACTION, bac::MATCH_INCONSISTENT)
    );
    assert_eq!(
        apply(OfAction::SetField(Oxm::exact(F::IpProto, 1))),
        err(et::BAD_ACTION, bac::BAD_SET_TYPE)
    );
    assert_eq!(
        flow_mod_to_spec(&FlowMod {
            table_id: OFPTT_ALL,
            ..FlowMod::default()
        })
        .unwrap_err(),
        err(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID)
    );
    // Set-field with its prerequisites in the match is fine; a packet_out may use TABLE.
    let m = oxm_to_match(&[Oxm::exact(F::EthType, 0x800)]).unwrap();
    let a = of_actions_to_actions(
        &[
            OfAction::SetField(Oxm::exact(F::Ipv4Src, 0x0a000001)),
            OfAction::output(OFPP_TABLE),
        ],
        &m,
        ActionContext::PacketOut,
    )
    .unwrap();
    assert_eq!(a, vec![Action::SetIpv4Src([10, 0, 0, 1]), Action::Table]);
    assert!(
        of_actions_to_actions(&[], &Match::any(), ActionContext::Rule)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn selectors() {
    let mut fm = flow_mod(vec![], vec![]);
    fm.command = OFPFC_DELETE_STRICT;
    fm.table_id = OFPTT_ALL;
    fm.out_port = 3;
    let s = flow_mod_selector(&fm).unwrap();
    assert_eq!(
        (s.table, s.priority, s.out_port, s.out_group),
        (None, Some(7), Some(3), None)
    );
    fm.command = OFPFC_MODIFY;
    let s = flow_mod_selector(&fm).unwrap();
    assert_eq!((s.priority, s.out_port), (None, None));
    fm.command = 9;
    assert_eq!(
        flow_mod_selector(&fm).unwrap_err(),
        err(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND)
    );
}

#[test]
fn table_features_split_and_decode() {
    let tf = table_features(255, 1_000_000);
    assert_eq!(tf.len(), 255);
    let msgs = encode_multipart_reply(1, &MultipartReply::TableFeatures(tf.clone())).unwrap();
    assert!(msgs.len() > 1);
    let mut all = Vec::new();
    for m in &msgs {
        assert!(m.len() <= OFP_MAX_MSG_LEN);
        let (
            _,
            Message::MultipartReply {
                body: MultipartReply::TableFeatures(l),
                ..
            },
        ) = decode(m).unwrap()
        else {
            panic!()
        };
        all.extend(l);
    }
    assert_eq!(all, tf);
}
