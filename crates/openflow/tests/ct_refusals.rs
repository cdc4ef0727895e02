//! The Nicira connection-tracking extensions refused as OVS refuses them (the error codes
//! it answers for bad ct and NAT actions and zone sources), and hostile input on the wire
//! that must not panic. The golden flow_mods are in `ct_wire.rs`.

use flowpath_openflow::consts::*;
use flowpath_openflow::nx::*;
use flowpath_openflow::translate::*;
use flowpath_openflow::*;
use flowpath_packet::ct::state;
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn ip() -> Vec<Oxm> {
    vec![Oxm::exact(OxmField::EthType, 0x800)]
}

fn ct(flags: u16, actions: Vec<OfAction>) -> NxConntrack {
    NxConntrack {
        flags,
        recirc_table: NX_CT_RECIRC_NONE,
        actions,
        ..NxConntrack::default()
    }
}

/// The error a flow_mod with match `m` and apply-actions `acts` gets: decoded from its
/// bytes, then translated.
fn refusal(m: Vec<Oxm>, acts: Vec<OfAction>) -> Option<(u16, u16)> {
    let fm = Message::FlowMod(FlowMod {
        match_: m,
        instructions: vec![Instruction::ApplyActions(acts)],
        ..FlowMod::default()
    });
    match decode(&fm.encode(1)) {
        Err(e) => Some(e.to_of_error()),
        Ok((_, Message::FlowMod(fm))) => flow_mod_to_spec(&fm).err().map(|e| e.pair()),
        Ok(other) => panic!("{other:?}"),
    }
}

fn nx(a: NxAction) -> OfAction {
    a.to_of_action()
}

fn act(code: u16) -> Option<(u16, u16)> {
    Some((et::BAD_ACTION, code))
}

#[test]
fn ct_actions_are_refused_as_ovs_refuses_them() {
    use flowpath_openflow::nx::ct_flags::*;
    let mark = |v: u32| OfAction::SetField(CT_FIELDS[2].oxm(v as u128, None));
    let ok = refusal(ip(), vec![nx(NxAction::Ct(ct(COMMIT, vec![mark(1)])))]);
    assert_eq!(ok, None);
    // check_CT: no IP match.
    let no_ip = refusal(vec![], vec![nx(NxAction::Ct(ct(0, vec![])))]);
    assert_eq!(no_ip, act(bac::MATCH_INCONSISTENT));
    // check_CT: committing what the match says is invalid.
    let inv = CT_FIELDS[0].oxm(state::INVALID as u128, Some(state::INVALID as u128));
    let m = [ip(), vec![inv]].concat();
    assert_eq!(
        refusal(m.clone(), vec![nx(NxAction::Ct(ct(COMMIT, vec![])))]),
        act(bac::MATCH_INCONSISTENT)
    );
    assert_eq!(refusal(m, vec![nx(NxAction::Ct(ct(0, vec![])))]), None);
    // decode_NXAST_RAW_CT: force without commit; flowpath: unknown flags, an ALG.
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ct(FORCE, vec![])))]),
        act(bac::BAD_ARGUMENT)
    );
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ct(0x4, vec![])))]),
        act(bac::BAD_ARGUMENT)
    );
    let ftp = NxConntrack {
        alg: 21,
        ..ct(COMMIT, vec![])
    };
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ftp))]),
        act(bac::BAD_ARGUMENT)
    );
    // exec() without commit; a bare nat without commit is fine.
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ct(0, vec![mark(1)])))]),
        act(bac::BAD_ARGUMENT)
    );
    let bare = nx(NxAction::Nat(NxNat::default()));
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ct(0, vec![bare.clone()])))]),
        None
    );
    let src = nx(NxAction::Nat(NxNat {
        flags: nat_flags::SRC,
        ..NxNat::default()
    }));
    assert_eq!(
        refusal(ip(), vec![nx(NxAction::Ct(ct(0, vec![src])))]),
        act(bac::BAD_ARGUMENT)
    );
    // Nesting: ct in ct, output in ct, set_field of another field in ct.
    let inner = nx(NxAction::Ct(ct(0, vec![])));
    for a in [
        inner,
        OfAction::output(1),
        OfAction::SetField(Oxm::exact(OxmField::EthDst, 1)),
    ] {
        assert_eq!(
            refusal(ip(), vec![nx(NxAction::Ct(ct(COMMIT, vec![a])))]),
            act(bac::BAD_ARGUMENT)
        );
    }
    // NAT, or a ct_mark write, outside ct.
    assert_eq!(refusal(ip(), vec![bare]), act(bac::BAD_SET_ARGUMENT));
    assert_eq!(refusal(ip(), vec![mark(1)]), act(bac::BAD_SET_ARGUMENT));
}

#[test]
fn zones_from_fields_and_registers() {
    let zone = |zone_src: u32, zone: u16| {
        let c = NxConntrack {
            zone_src,
            zone,
            ..ct(0, vec![])
        };
        refusal(ip(), vec![nx(NxAction::Ct(c))])
    };
    // OXM_OF_METADATA[16..31]; NXM_NX_CT_MARK[0..15].
    assert_eq!(zone(0x8000_0408, (16 << 6) | 15), None);
    assert_eq!(zone(0x0001_d604, 15), None);
    // NXM_NX_REG0[0..15]: flowpath has no registers.
    assert_eq!(zone(0x0001_0004, 15), act(bac::BAD_SET_TYPE));
    // 8 bits, or past the end of the field: decode_ct_zone's BAD_SET_LEN.
    assert_eq!(zone(0x8000_0408, 7), act(bac::BAD_SET_LEN));
    assert_eq!(zone(0x0000_0002, (8 << 6) | 15), act(bac::BAD_SET_LEN));
}

#[test]
fn nat_ranges_are_refused_as_ovs_refuses_them() {
    let with = |n: NxNat| {
        let n = NxNat {
            flags: n.flags | nat_flags::SRC,
            ..n
        };
        refusal(
            ip(),
            vec![nx(NxAction::Ct(ct(
                ct_flags::COMMIT,
                vec![nx(NxAction::Nat(n))],
            )))],
        )
    };
    let good = NxNat {
        ipv4_min: Some(1),
        ..NxNat::default()
    };
    assert_eq!(with(good), None);
    let bad = [
        NxNat {
            flags: nat_flags::DST,
            ..good
        },
        NxNat {
            flags: nat_flags::PROTO_HASH | nat_flags::PROTO_RANDOM,
            ..good
        },
        NxNat {
            flags: 0x20,
            ..good
        },
        NxNat {
            ipv4_min: Some(0),
            ..good
        },
        NxNat {
            ipv4_max: Some(0),
            ..NxNat::default()
        },
        NxNat {
            ipv4_max: Some(0),
            ..good
        },
        NxNat {
            ipv6_min: Some(1),
            ..good
        },
        NxNat {
            proto_min: Some(1),
            ..NxNat::default()
        },
        NxNat {
            proto_min: Some(0),
            ..good
        },
        NxNat {
            proto_min: Some(9),
            proto_max: Some(8),
            ..good
        },
        NxNat {
            proto_max: Some(9),
            ..good
        },
    ];
    for n in bad {
        assert_eq!(with(n), act(bac::BAD_ARGUMENT), "{n:?}");
    }
}

#[test]
fn bad_lengths_and_subtypes() {
    let raw = |data: &[u8]| OfAction::Experimenter {
        experimenter: NX_VENDOR_ID,
        data: data.to_vec(),
    };
    // An unknown NX subtype (NXAST_RESUBMIT, 1): OFPBAC_BAD_EXPERIMENTER_TYPE.
    assert_eq!(
        refusal(ip(), vec![raw(&hex("0001 0000 00000000"))]),
        act(bac::BAD_EXP_TYPE)
    );
    // Shorter than struct ext_action_header, or a ct shorter than its 24 bytes.
    assert_eq!(refusal(ip(), vec![raw(&[])]), act(bac::BAD_LEN));
    assert_eq!(
        refusal(ip(), vec![raw(&hex("0023 0000 00000000"))]),
        act(bac::BAD_LEN)
    );
    // ct_clear longer than 16 bytes.
    assert_eq!(
        refusal(ip(), vec![raw(&hex("002b 0000 00000000 0000000000000000"))]),
        act(bac::BAD_LEN)
    );
    // A nested action whose length runs past the ct's end.
    let lying = hex("0023 0001 00000000 0000 ff 000000 0000  0000 0018 00000002 0000 000000000000");
    assert_eq!(refusal(ip(), vec![raw(&lying)]), act(bac::BAD_LEN));
    // A NAT whose range_present promises an address its length does not hold.
    let short = hex("0024 0000 0001 0001");
    let c = nx(NxAction::Ct(ct(ct_flags::COMMIT, vec![raw(&short)])));
    assert_eq!(refusal(ip(), vec![c]), act(bac::BAD_ARGUMENT));
    // A register load into a field flowpath does not have (NXM_NX_REG0).
    let reg = nx(NxAction::RegLoad {
        ofs_nbits: 31,
        dst: 0x0001_0004,
        value: 1,
    });
    assert_eq!(refusal(ip(), vec![reg]), act(bac::BAD_SET_TYPE));
    // Another vendor's action.
    let other = OfAction::Experimenter {
        experimenter: 0x00d0_f0d0,
        data: vec![0; 8],
    };
    assert_eq!(refusal(ip(), vec![other]), act(bac::BAD_EXPERIMENTER));
}

#[test]
fn ct_match_fields_are_checked_as_ovs_checks_them() {
    let bad_match = |code| Some((et::BAD_MATCH, code));
    let st = |v: u128, m: u128| CT_FIELDS[0].oxm(v, Some(m));
    let nw_src = CT_FIELDS[4].oxm(0x0a00_0001, None);
    // The tuple needs a valid connection state: +est, or +trk-inv.
    assert_eq!(
        refusal([ip(), vec![nw_src.clone()]].concat(), vec![]),
        bad_match(bmc::BAD_PREREQ)
    );
    let trk = st(state::TRACKED as u128, state::TRACKED as u128);
    assert_eq!(
        refusal([ip(), vec![trk, nw_src.clone()]].concat(), vec![]),
        bad_match(bmc::BAD_PREREQ)
    );
    let trk_not_inv = st(0x20, 0x30);
    assert_eq!(
        refusal([ip(), vec![trk_not_inv, nw_src.clone()]].concat(), vec![]),
        None
    );
    // A mask on ct_zone; value bits outside the mask; ct_state bits OVS does not define;
    // a length that is not the field's; the same field twice.
    let zone_masked = CT_FIELDS[1].oxm(1, Some(0xff));
    assert_eq!(refusal(vec![zone_masked], vec![]), bad_match(bmc::BAD_MASK));
    assert_eq!(
        refusal(vec![st(3, 1)], vec![]),
        bad_match(bmc::BAD_WILDCARDS)
    );
    assert_eq!(
        refusal(vec![st(0x100, 0x100)], vec![]),
        bad_match(bmc::BAD_VALUE)
    );
    let short = Oxm::Unknown {
        class: OFPXMC_NXM_1,
        field: 107,
        has_mask: false,
        payload: vec![1, 2],
    };
    assert_eq!(refusal(vec![short], vec![]), bad_match(bmc::BAD_LEN));
    assert_eq!(
        refusal(vec![st(1, 1), st(2, 2)], vec![]),
        bad_match(bmc::DUP_FIELD)
    );
    // Other NXM_1 fields (a register) are still unknown to the key.
    let reg0 = Oxm::Unknown {
        class: OFPXMC_NXM_1,
        field: 0,
        has_mask: false,
        payload: vec![0; 4],
    };
    assert_eq!(refusal(vec![reg0], vec![]), bad_match(bmc::BAD_FIELD));
}

// ---- hostile input ----------------------------------------------------------------------

proptest! {
    /// Any bytes as an NX action's data, alone or nested in a ct: an answer, never a panic.
    #[test]
    fn random_nx_data_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80),
                                   subtype in prop_oneof![Just(7u16), Just(33), Just(35), Just(36), Just(43), any::<u16>()]) {
        let mut d = subtype.to_be_bytes().to_vec();
        d.extend(&data);
        d.resize(d.len().div_ceil(8) * 8, 0);
        let _ = NxAction::decode(&d);
        let raw = OfAction::Experimenter { experimenter: NX_VENDOR_ID, data: d };
        let _ = refusal(ip(), vec![raw.clone()]);
        let _ = refusal(ip(), vec![nx(NxAction::Ct(ct(ct_flags::COMMIT, vec![raw])))]);
    }

    /// Bytes flipped and lengths that lie anywhere in a ct flow_mod's actions: an error
    /// or a rule, never a panic.
    #[test]
    fn mutated_ct_flow_mods_never_panic(edits in proptest::collection::vec((0usize..200, any::<u8>()), 1..6),
                                        cut in 0usize..200) {
        let fm = Message::FlowMod(FlowMod {
            match_: [ip(), vec![CT_FIELDS[0].oxm(0x22, Some(0x22)), CT_FIELDS[4].oxm(1, None)]].concat(),
            instructions: vec![Instruction::ApplyActions(vec![nx(NxAction::Ct(ct(ct_flags::COMMIT, vec![
                nx(NxAction::Nat(NxNat { flags: 1, ipv4_min: Some(1), proto_min: Some(5), ..NxNat::default() })),
                nx(NxAction::RegLoad { ofs_nbits: 7, dst: 0x0001_d604, value: 3 }),
                OfAction::SetField(CT_FIELDS[3].oxm(1, None)),
            ]))), nx(NxAction::CtClear)])],
            ..FlowMod::default()
        });
        let mut b = fm.encode(1);
        let n = b.len();
        for (at, v) in edits {
            // Past the header, so most mutants still reach the actions.
            b[8 + at % (n - 8)] = v;
        }
        b.truncate(n - cut % (n - 8));
        let l = b.len() as u16;
        b[2..4].copy_from_slice(&l.to_be_bytes());
        if let Ok((_, Message::FlowMod(fm))) = decode(&b) {
            let _ = flow_mod_to_spec(&fm);
        }
    }
}
