//! The codec: encode∘decode is the identity for every message type, every truncation of a
//! valid message is refused without a panic, framing, MORE splitting, and golden bytes.

mod common;

use common::*;
use flowpath_openflow::consts::*;
use flowpath_openflow::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn encode_decode_is_identity(m in arb_message(), xid in any::<u32>()) {
        let bytes = m.encode(xid);
        prop_assume!(bytes.len() <= OFP_MAX_MSG_LEN);
        prop_assert_eq!(message_len(&bytes).unwrap(), Some(bytes.len()));
        let (h, back) = decode(&bytes).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        prop_assert_eq!(h.xid, xid);
        prop_assert_eq!(h.version, OFP_VERSION);
        prop_assert_eq!(h.type_, m.type_());
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(back.encode(xid), bytes);
    }

    #[test]
    fn truncations_are_errors_never_panics(m in arb_message()) {
        let bytes = m.encode(7);
        prop_assume!(bytes.len() <= OFP_MAX_MSG_LEN);
        for cut in 0..bytes.len() {
            // As framed: the header's length no longer matches.
            prop_assert!(decode(&bytes[..cut]).is_err());
            // With the header's length fixed up to the cut: whatever it makes, no panic,
            // and what decodes re-encodes stably.
            if cut >= 8 {
                let mut b = bytes[..cut].to_vec();
                b[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
                if let Ok((_, again)) = decode(&b) {
                    let re = again.encode(7);
                    prop_assert_eq!(decode(&re).map(|x| x.1), Ok(again));
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 8..300), ty in 0u8..32) {
        b[0] = OFP_VERSION;
        b[1] = ty;
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        if let Ok((_, m)) = decode(&b) {
            let re = m.encode(1);
            prop_assert_eq!(decode(&re).map(|x| x.1), Ok(m));
        }
    }

    #[test]
    fn long_replies_split_under_the_limit(n in 1usize..400, max in 200usize..3000) {
        let fs = FlowStats {
            match_: vec![Oxm::in_port(3), Oxm::exact(OxmField::EthType, 0x800)],
            instructions: vec![Instruction::ApplyActions(vec![OfAction::output(2)])],
            ..FlowStats::default()
        };
        let body = MultipartReply::Flow(vec![fs; n]);
        let msgs = encode_multipart_reply_max(9, &body, max).unwrap();
        let mut all = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            prop_assert!(m.len() <= max);
            let (h, d) = decode(m).unwrap();
            prop_assert_eq!(h.xid, 9);
            let Message::MultipartReply { flags, body: MultipartReply::Flow(l) } = d else {
                panic!("not a flow reply")
            };
            prop_assert_eq!(flags & OFPMPF_REPLY_MORE != 0, i + 1 < msgs.len());
            all.extend(l);
        }
        prop_assert_eq!(MultipartReply::Flow(all), body);
    }
}

#[test]
fn framing() {
    assert_eq!(message_len(&[4, 0, 0]), Ok(None));
    assert_eq!(message_len(&[4, 0, 0, 8]), Ok(Some(8)));
    assert_eq!(message_len(&[4, 0, 0, 7]), Err(DecodeError::BadLen));
    assert_eq!(message_len(&[4, 0, 0xff, 0xff, 0]), Ok(Some(65535)));
    // decode wants exactly one message.
    let mut b = Message::BarrierRequest.encode(1);
    b.push(0);
    assert_eq!(decode(&b), Err(DecodeError::BadLen));
}

#[test]
fn errors_map_to_openflow_codes() {
    // Unknown message type.
    let b = [4, 99, 0, 8, 0, 0, 0, 1];
    let e = decode(&b).unwrap_err();
    assert_eq!(e.to_of_error(), (et::BAD_REQUEST, brc::BAD_TYPE));
    // Wrong version on a non-hello; hello of any version decodes.
    assert_eq!(
        decode(&[1, 5, 0, 8, 0, 0, 0, 1]).unwrap_err().to_of_error(),
        (et::BAD_REQUEST, brc::BAD_VERSION)
    );
    assert!(decode(&[1, 0, 0, 8, 0, 0, 0, 1]).is_ok());
    // Unknown multipart type (QUEUE, not supported).
    let mut m = Message::MultipartRequest {
        flags: 0,
        body: MultipartRequest::Desc,
    }
    .encode(3);
    m[9] = mp::QUEUE as u8;
    assert_eq!(
        decode(&m).unwrap_err().to_of_error(),
        (et::BAD_REQUEST, brc::BAD_MULTIPART)
    );
    // A flow_mod whose OXM runs past its match.
    let fm = FlowMod {
        match_: vec![Oxm::in_port(1)],
        ..FlowMod::default()
    };
    let mut b = Message::FlowMod(fm.clone()).encode(4);
    b[8 + 40 + 4 + 3] = 9; // the OXM's length byte: 9 > the 4 there are
    assert_eq!(
        decode(&b).unwrap_err().to_of_error(),
        (et::BAD_MATCH, bmc::BAD_LEN)
    );
    // An unknown action type.
    let fm = FlowMod {
        instructions: vec![Instruction::ApplyActions(vec![OfAction::PopVlan])],
        ..FlowMod::default()
    };
    let mut b = Message::FlowMod(fm).encode(4);
    let at = b.len() - 8; // the pop_vlan action
    b[at + 1] = 99;
    assert_eq!(
        decode(&b).unwrap_err().to_of_error(),
        (et::BAD_ACTION, bac::BAD_TYPE)
    );
    // An action whose length is not a multiple of 8.
    b[at + 1] = act::POP_VLAN as u8;
    b[at + 3] = 12;
    assert_eq!(
        decode(&b).unwrap_err().to_of_error(),
        (et::BAD_ACTION, bac::BAD_LEN)
    );
    // An unknown instruction.
    let fm = FlowMod {
        instructions: vec![Instruction::ClearActions],
        ..FlowMod::default()
    };
    let mut b = Message::FlowMod(fm).encode(4);
    let at = b.len() - 8;
    b[at + 1] = 77;
    assert_eq!(
        decode(&b).unwrap_err().to_of_error(),
        (et::BAD_INSTRUCTION, bic::UNKNOWN_INST)
    );
    // A match of another type.
    let mut b = Message::FlowMod(FlowMod::default()).encode(4);
    b[8 + 40 + 1] = 0;
    assert_eq!(
        decode(&b).unwrap_err().to_of_error(),
        (et::BAD_MATCH, bmc::BAD_TYPE)
    );
}

#[test]
fn unknown_oxm_and_hello_elements_are_kept() {
    let nx = Oxm::Unknown {
        class: OFPXMC_NXM_1,
        field: 29,
        has_mask: false,
        payload: vec![64],
    };
    let pi = Message::PacketIn(PacketIn {
        buffer_id: OFP_NO_BUFFER,
        total_len: 0,
        reason: OFPR_NO_MATCH,
        table_id: 0,
        cookie: 0,
        match_: vec![Oxm::in_port(1), nx.clone()],
        data: vec![],
    });
    let (_, back) = decode(&pi.encode(1)).unwrap();
    assert_eq!(back, pi);
    let hello = Message::Hello(vec![
        HelloElement::Unknown {
            type_: 7,
            data: vec![1, 2, 3],
        },
        HelloElement::VersionBitmap(vec![(1 << 4) | (1 << 1)]),
    ]);
    let (h, back) = decode(&hello.encode(1)).unwrap();
    let Message::Hello(el) = back else { panic!() };
    assert_eq!(negotiate_version(h.version, &el, 1 << 4), Some(4));
    assert_eq!(negotiate_version(6, &[], 1 << 4), Some(4));
    assert_eq!(negotiate_version(1, &[], 1 << 4), None);
    assert_eq!(
        negotiate_version(6, &[HelloElement::VersionBitmap(vec![1 << 6])], 1 << 4),
        None
    );
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Byte layouts worked out from the OF 1.3.5 specification's structures (and checked with
/// tshark's dissector, see tests/tshark.rs).
#[test]
fn golden_bytes() {
    // HELLO with a version bitmap offering 1.3: element type 1, length 8, bitmap 0x10.
    assert_eq!(
        Message::hello().encode(1),
        hex("04 00 0010 00000001  0001 0008 00000010")
    );
    // FEATURES_REPLY.
    let f = Message::FeaturesReply(Features {
        datapath_id: 0x0000_0000_0000_0001,
        n_buffers: 0,
        n_tables: 254,
        auxiliary_id: 0,
        capabilities: OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS | OFPC_GROUP_STATS,
    });
    assert_eq!(
        f.encode(2),
        hex("04 06 0020 00000002 0000000000000001 00000000 fe 00 0000 0000000f 00000000")
    );
    // FLOW_MOD: in_port=1,eth_type=0x800,ipv4_dst=10.0.0.0/8 actions=output:2, table 0,
    // priority 100: the match is 4 + 8 + 6 + 12 = 30 bytes, padded to 32.
    let fm = Message::FlowMod(FlowMod {
        priority: 100,
        match_: vec![
            Oxm::in_port(1),
            Oxm::exact(OxmField::EthType, 0x0800),
            Oxm::masked(OxmField::Ipv4Dst, 0x0a00_0000, 0xff00_0000),
        ],
        instructions: vec![Instruction::ApplyActions(vec![OfAction::output(2)])],
        ..FlowMod::default()
    });
    assert_eq!(
        fm.encode(3),
        hex("04 0e 0068 00000003
             0000000000000000 0000000000000000 00 00 0000 0000 0064
             ffffffff ffffffff ffffffff 0000 0000
             0001 001e 80000004 00000001 80000a02 0800 80001908 0a000000 ff000000 0000
             0004 0018 00000000 0000 0010 00000002 0000 000000000000")
    );
}
