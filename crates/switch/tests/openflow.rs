//! The OpenFlow channel over a real TCP connection, with a minimal client built on the
//! codec: version negotiation, features, echo, desc, and errors with the right type and
//! code that leave nothing half-applied; a broken framing closes the connection alone.
//! (`openflow_flows.rs` has flow_mods, roles and reconnects;
//! `crates/flowpath/tests/openflow_clients.rs` and `openflow_controllers.rs` drive the
//! channel with ovs-ofctl, os-ken and Faucet.) Needs nothing but loopback TCP.

mod common;

use common::dump;
use common::openflow::{add, with_channel, Client};
use flowpath_openflow::consts::*;
use flowpath_openflow::{
    message_len, FlowMod, Instruction, Message, MultipartReply, MultipartRequest, OfAction, Oxm,
    OxmField,
};
use flowpath_switch::openflow::OpenFlowConfig;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn handshake_features_echo_and_desc() {
    with_channel(|_, addr| {
        let mut c = Client::connect(addr);
        let x = c.send(&Message::FeaturesRequest);
        match c.recv() {
            (xid, Message::FeaturesReply(f)) => {
                assert_eq!(xid, x);
                assert_eq!(f.datapath_id, OpenFlowConfig::default().datapath_id);
                assert_eq!(f.n_buffers, 0);
                assert!(f.n_tables >= 64);
            }
            other => panic!("{other:?}"),
        }
        let x = c.send(&Message::EchoRequest(b"ping".to_vec()));
        assert_eq!(c.recv(), (x, Message::EchoReply(b"ping".to_vec())));
        let x = c.send(&Message::MultipartRequest {
            flags: 0,
            body: MultipartRequest::Desc,
        });
        match c.recv() {
            (
                xid,
                Message::MultipartReply {
                    body: MultipartReply::Desc(d),
                    ..
                },
            ) => {
                assert_eq!(xid, x);
                assert!(d.sw_desc.starts_with("flowpath"));
            }
            other => panic!("{other:?}"),
        }
        // A message type that only switches send is refused with BAD_TYPE, and the
        // connection stays up.
        let x = c.send(&Message::BarrierReply);
        match c.recv() {
            (xid, Message::Error { type_, code, .. }) => {
                assert_eq!((xid, type_, code), (x, et::BAD_REQUEST, brc::BAD_TYPE));
            }
            other => panic!("{other:?}"),
        }
        assert!(c.barrier().is_empty());
    });
}

#[test]
fn a_client_offering_only_openflow_1_0_is_refused_with_hello_failed() {
    with_channel(|_, addr| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // An OpenFlow 1.0 HELLO: version 1, no elements.
        s.write_all(&[1, 0, 0, 8, 0, 0, 0, 7]).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        // Our HELLO, then an error HELLO_FAILED/INCOMPATIBLE, then the close.
        let n = message_len(&got).unwrap().unwrap();
        let rest = &got[n..];
        assert_eq!(rest[1], msg::ERROR, "{got:?}");
        assert_eq!(u16::from_be_bytes([rest[8], rest[9]]), et::HELLO_FAILED);
        assert_eq!(u16::from_be_bytes([rest[10], rest[11]]), hfc::INCOMPATIBLE);
    });
}

#[test]
fn refused_flow_mods_answer_with_the_error_and_change_nothing() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        // A good add, then one whose tcp_dst lacks its ip_proto prerequisite, then a good
        // one: the bad one is refused alone, with BAD_MATCH/BAD_PREREQ and its xid.
        c.send(&add(0, 10, vec![], vec![OfAction::output(1)]));
        let bad = c.send(&add(
            0,
            20,
            vec![
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::TcpDst, 80),
            ],
            vec![OfAction::output(1)],
        ));
        c.send(&add(0, 30, vec![], vec![OfAction::output(3)]));
        // goto_table backwards: BAD_INSTRUCTION/BAD_TABLE_ID.
        let back = c.send(&Message::FlowMod(FlowMod {
            table_id: 5,
            command: OFPFC_ADD,
            instructions: vec![Instruction::GotoTable(2)],
            ..FlowMod::default()
        }));
        // write_metadata of a bit above the 24 flowpath keeps.
        let meta = c.send(&Message::FlowMod(FlowMod {
            command: OFPFC_ADD,
            instructions: vec![Instruction::WriteMetadata {
                metadata: 1 << 30,
                mask: 1 << 30,
            }],
            ..FlowMod::default()
        }));
        let errs = c.barrier();
        let codes: Vec<(u32, u16, u16)> = errs
            .iter()
            .map(|(x, m)| match m {
                Message::Error { type_, code, .. } => (*x, *type_, *code),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            codes,
            vec![
                (bad, et::BAD_MATCH, bmc::BAD_PREREQ),
                (back, et::BAD_INSTRUCTION, bic::BAD_TABLE_ID),
                (meta, et::BAD_INSTRUCTION, bic::UNSUP_METADATA),
            ]
        );
        let lines = dump(sw);
        assert_eq!(lines.len(), 2, "{lines:?}");
        // CHECK_OVERLAP: an overlapping add at the same priority is refused.
        let ov = c.send(&Message::FlowMod(FlowMod {
            command: OFPFC_ADD,
            priority: 10,
            flags: OFPFF_CHECK_OVERLAP,
            match_: vec![Oxm::exact(OxmField::InPort, 4)],
            ..FlowMod::default()
        }));
        let errs = c.barrier();
        assert!(
            matches!(errs.as_slice(), [(x, Message::Error { type_, code, .. })] if *x == ov && *type_ == et::FLOW_MOD_FAILED && *code == fmfc::OVERLAP),
            "{errs:?}"
        );
        assert_eq!(dump(sw).len(), 2);
    });
}

#[test]
fn garbage_gets_an_error_and_a_broken_length_closes_cleanly() {
    with_channel(|sw, addr| {
        let mut c = Client::connect(addr);
        // A flow_mod cut short inside its match: BAD_LEN-class error, connection kept.
        let full = add(
            0,
            1,
            vec![Oxm::exact(OxmField::EthType, 0x0800)],
            vec![OfAction::output(1)],
        )
        .encode(77);
        let mut cut = full[..60].to_vec();
        cut[2..4].copy_from_slice(&60u16.to_be_bytes());
        c.s.write_all(&cut).unwrap();
        let errs = c.barrier();
        assert!(
            matches!(errs.as_slice(), [(77, Message::Error { .. })]),
            "{errs:?}"
        );
        assert!(dump(sw).is_empty(), "nothing half-applied");
        // A header whose length is below 8: the framing is lost, the switch says so and
        // closes; it keeps serving others.
        c.s.write_all(&[4, 14, 0, 3, 0, 0, 0, 1]).unwrap();
        let mut rest = Vec::new();
        let _ = c.s.read_to_end(&mut rest);
        let mut d = Client::connect(addr);
        assert!(d.barrier().is_empty());
    });
}
