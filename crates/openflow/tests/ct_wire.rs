//! The Nicira connection-tracking extensions on the wire: flow_mods laid out by hand from
//! OVS's structures (each equal to what `ovs-ofctl -O OpenFlow13 add-flow` 3.1.0 sends for
//! the flow named beside it) decoded into rules and encoded back byte for byte. What OVS
//! refuses, and hostile input, are in `ct_refusals.rs`.

use flowpath_openflow::translate::*;
use flowpath_openflow::*;
use flowpath_packet::ct::{state, CtZoneSrc, NatFlags, NatKind, NatSpec};
use flowpath_packet::{Action, CtSpec, Field};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// `ofp_header` (xid 2) and the fixed part of `ofp_flow_mod` for an ADD into `table` at
/// priority 0x8000 (OVS's default), no buffer, no out_port/out_group, no flags.
fn flow_mod_head(len: u16, table: u8) -> String {
    format!(
        "04 0e {len:04x} 00000002
         0000000000000000 0000000000000000   # cookie, cookie_mask
         {table:02x} 00 0000 0000 8000        # table_id, ADD, idle, hard, priority
         ffffffff ffffffff ffffffff 0000 0000 # buffer_id, out_port, out_group, flags, pad"
    )
}

/// Decode `bytes` as a flow_mod, translate it into a rule, check the rule with `check`,
/// and encode the rule back (its flow stats' match and instructions in the flow_mod it
/// came from): the same bytes.
fn decode_translate_encode(bytes: &[u8], check: impl FnOnce(&flowpath_pipeline::RuleSpec)) {
    let (h, m) = decode(bytes).expect("decodes");
    let Message::FlowMod(fm) = m else {
        panic!("not a flow_mod: {m:?}")
    };
    let spec = flow_mod_to_spec(&fm).expect("translates");
    check(&spec);
    let stats = flow_stats(&spec, 0, 0, 0);
    let back = Message::FlowMod(FlowMod {
        match_: stats.match_,
        instructions: stats.instructions,
        ..fm
    });
    assert_eq!(back.encode(h.xid), bytes, "re-encoded flow_mod differs");
}

fn ct_of(a: &Action) -> CtSpec {
    let Action::Ct(id) = a else {
        panic!("not ct: {a:?}")
    };
    *id.spec()
}

/// table=1,ip,ct_state=+trk+new,actions=ct(commit,zone=1,exec(set_field:0x1->ct_mark)),output:2
#[test]
fn golden_commit_with_mark() {
    let b = hex(&format!(
        "{}
         0001 0016                # ofp_match: OFPMT_OXM, length 22
         80000a02 0800            # OXM_OF_ETH_TYPE = 0x0800
         0001d308 00000021 00000021  # NXM_NX_CT_STATE(105), masked (be32): +new+trk
         0000                     # match padding
         0004 0040 00000000       # OFPIT_APPLY_ACTIONS, length 64
         # struct nx_action_conntrack (24 bytes):
         ffff 0028 00002320 0023  # OFPAT_VENDOR, len 40, NX_VENDOR_ID, NXAST_CT (35)
         0001                     # flags: NX_CT_F_COMMIT
         00000000                 # zone_src: 0, so the next field is zone_imm
         0001                     # zone_imm: 1
         ff 000000                # recirc_table: NX_CT_RECIRC_NONE, pad[3]
         0000                     # alg: none
         # nested, struct ofp12_action_set_field: OFPAT_SET_FIELD, len 16,
         # NXM_NX_CT_MARK(107) header (class 0x0001, 4 bytes), value 1, padding:
         0019 0010 0001d604 00000001 00000000
         # struct ofp_action_output: port 2, max_len 0, pad[6]:
         0000 0010 00000002 0000 000000000000",
        flow_mod_head(0x88, 1)
    ));
    decode_translate_encode(&b, |spec| {
        assert_eq!(spec.matches.value.get(Field::CtState), 0x21);
        assert_eq!(spec.matches.mask.get(Field::CtState), 0x21);
        let want = CtSpec {
            commit: true,
            zone: CtZoneSrc::Value(1),
            set_mark: Some((1, u32::MAX)),
            ..CtSpec::new()
        };
        assert_eq!(ct_of(&spec.actions[0]), want);
        assert_eq!(spec.actions[1], Action::Output(2));
    });
}

/// The same flow as os-ken's `OFPFlowMod` with `OFPMatch(eth_type=0x800, ct_state=(0x21,
/// 0x21))` and `NXActionCT(..., actions=[OFPActionSetField(ct_mark=1)])` serializes it:
/// the actions byte for byte as OVS's, the match with ct_state first. It decodes into the
/// same rule, and encodes back in OVS's order.
#[test]
fn os_ken_puts_ct_state_first() {
    let os_ken = hex(&format!(
        "{}
         0001 0016 0001d308 00000021 00000021 80000a02 0800 0000
         0004 0040 00000000
         ffff 0028 00002320 0023 0001 00000000 0001 ff 000000 0000
         0019 0010 0001d604 00000001 00000000
         0000 0010 00000002 0000 000000000000",
        flow_mod_head(0x88, 1)
    ));
    let (_, Message::FlowMod(fm)) = decode(&os_ken).unwrap() else {
        panic!()
    };
    let spec = flow_mod_to_spec(&fm).unwrap();
    let want = CtSpec {
        commit: true,
        zone: CtZoneSrc::Value(1),
        set_mark: Some((1, u32::MAX)),
        ..CtSpec::new()
    };
    assert_eq!(ct_of(&spec.actions[0]), want);
    assert_eq!(
        match_to_oxm(&spec.matches),
        vec![
            Oxm::exact(OxmField::EthType, 0x800),
            CT_FIELDS[0].oxm(0x21, Some(0x21)),
        ]
    );
}

/// table=0,ip,ct_state=-trk,actions=ct(table=1,zone=1)
#[test]
fn golden_recirculate() {
    let b = hex(&format!(
        "{}
         0001 0016 80000a02 0800
         0001d308 00000000 00000020  # NXM_NX_CT_STATE(105) = 0/0x20: -trk
         0000
         0004 0020 00000000
         # struct nx_action_conntrack, no nested actions:
         ffff 0018 00002320 0023  # len 24, NXAST_CT
         0000 00000000 0001       # flags 0, zone_src 0, zone_imm 1
         01 000000 0000           # recirc_table 1, pad[3], alg 0",
        flow_mod_head(0x68, 0)
    ));
    decode_translate_encode(&b, |spec| {
        assert_eq!(
            spec.matches.mask.get(Field::CtState),
            state::TRACKED as u128
        );
        assert_eq!(spec.matches.value.get(Field::CtState), 0);
        let want = CtSpec {
            zone: CtZoneSrc::Value(1),
            table: Some(1),
            ..CtSpec::new()
        };
        assert_eq!(ct_of(&spec.actions[0]), want);
    });
}

/// ip,actions=ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,random))
#[test]
fn golden_source_nat() {
    let b = hex(&format!(
        "{}
         0001 000a 80000a02 0800 000000000000
         0004 0040 00000000
         ffff 0038 00002320 0023 0001 00000000 0000 ff 000000 0000  # ct, len 56
         # struct nx_action_nat (16 bytes):
         ffff 0020 00002320 0024  # OFPAT_VENDOR, len 32, NX_VENDOR_ID, NXAST_NAT (36)
         0000                     # pad[2]
         0011                     # flags: NX_NAT_F_SRC | NX_NAT_F_PROTO_RANDOM
         0033                     # range_present: IPV4_MIN|IPV4_MAX|PROTO_MIN|PROTO_MAX
         0a000001 0a000009        # ipv4 min, max
         03e8 07d0                # proto min 1000, max 2000
         00000000                 # padding to 32",
        flow_mod_head(0x80, 0)
    ));
    decode_translate_encode(&b, |spec| {
        let nat = NatSpec {
            kind: Some(NatKind::Src),
            addrs: Some((
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)),
            )),
            ports: Some((1000, 2000)),
            flags: NatFlags {
                random: true,
                ..NatFlags::default()
            },
        };
        let want = CtSpec {
            commit: true,
            nat: Some(nat),
            ..CtSpec::new()
        };
        assert_eq!(ct_of(&spec.actions[0]), want);
    });
}

/// ip,actions=ct(commit,exec(set_field:0x1/0x5->ct_mark)),ct_clear: OF 1.3 has no masked
/// set_field, so OVS sends one reg_load per run of mask bits.
#[test]
fn golden_masked_mark_and_ct_clear() {
    let b = hex(&format!(
        "{}
         0001 000a 80000a02 0800 000000000000
         0004 0060 00000000
         ffff 0048 00002320 0023 0001 00000000 0000 ff 000000 0000  # ct, len 72
         # struct nx_action_reg_load: len 24, NXAST_REG_LOAD (7), ofs_nbits, dst, value
         ffff 0018 00002320 0007 0000 0001d604 0000000000000001  # bit 0 of ct_mark := 1
         ffff 0018 00002320 0007 0080 0001d604 0000000000000000  # bit 2 of ct_mark := 0
         # struct ext_action_header: len 16, NXAST_CT_CLEAR (43), pad[6]
         ffff 0010 00002320 002b 000000000000",
        flow_mod_head(0xa0, 0)
    ));
    decode_translate_encode(&b, |spec| {
        let want = CtSpec {
            commit: true,
            set_mark: Some((1, 5)),
            ..CtSpec::new()
        };
        assert_eq!(ct_of(&spec.actions[0]), want);
        assert_eq!(spec.actions[1], Action::CtClear);
    });
}

/// ip,actions=ct(commit,zone=OXM_OF_METADATA[0..15],nat(dst=fe80::1),exec(set_field:0x1->ct_label))
#[test]
fn golden_zone_from_metadata_ipv6_nat_and_label() {
    let b = hex(&format!(
        "{}
         0001 000a 80000a02 0800 000000000000
         0004 0058 00000000
         ffff 0050 00002320 0023 0001  # ct, len 80, commit
         80000408                      # zone_src: OXM_OF_METADATA header
         000f                          # zone_ofs_nbits: ofs 0, n_bits 16 (stored as 15)
         ff 000000 0000
         ffff 0020 00002320 0024 0000  # nat, len 32
         0002 0004                     # flags NX_NAT_F_DST, range_present IPV6_MIN
         fe800000000000000000000000000001
         0019 0018 0001d810 00000000000000000000000000000001  # set_field NXM_NX_CT_LABEL(108)",
        flow_mod_head(0x98, 0)
    ));
    decode_translate_encode(&b, |spec| {
        let fe80 = IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1));
        let want = CtSpec {
            commit: true,
            zone: CtZoneSrc::Field {
                field: Field::Metadata,
                ofs: 0,
                bits: 16,
            },
            nat: Some(NatSpec {
                kind: Some(NatKind::Dst),
                addrs: Some((fe80, fe80)),
                ports: None,
                flags: NatFlags::default(),
            }),
            set_label: Some((1, u128::MAX)),
            ..CtSpec::new()
        };
        assert_eq!(ct_of(&spec.actions[0]), want);
    });
}

/// ip,ct_state=+trk+est,ct_nw_src=10.0.0.1,ct_tp_dst=80,ct_nw_proto=6,ct_zone=5,
/// ct_mark=0x1/0x3,actions=drop: the ct fields in the order OVS's `nx_put_raw` puts them.
#[test]
fn golden_ct_match_fields() {
    let b = hex(&format!(
        "{}
         0001 003b 80000a02 0800
         0001d308 00000022 00000022  # NXM_NX_CT_STATE(105)/mask: +est+trk
         0001d402 0005               # NXM_NX_CT_ZONE(106), be16, not maskable
         0001d708 00000001 00000003  # NXM_NX_CT_MARK(107)/mask
         0001f004 0a000001           # NXM_NX_CT_NW_SRC(120)
         0001ee01 06                 # NXM_NX_CT_NW_PROTO(119), u8
         0001fa02 0050               # NXM_NX_CT_TP_DST(125)
         0000000000                  # match padding (59 -> 64)",
        flow_mod_head(0x70, 0)
    ));
    decode_translate_encode(&b, |spec| {
        let m = &spec.matches;
        assert_eq!(m.value.get(Field::CtZone), 5);
        assert_eq!(m.value.get(Field::CtNwSrc), 0x0a00_0001);
        assert_eq!(m.value.get(Field::CtNwProto), 6);
        assert_eq!(m.value.get(Field::CtTpDst), 80);
        assert_eq!(
            (m.value.get(Field::CtMark), m.mask.get(Field::CtMark)),
            (1, 3)
        );
        assert!(spec.actions.is_empty());
    });
}
