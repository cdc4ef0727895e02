//! The `openflow_decode` fuzz target's checked-in inputs (fuzz/corpus-seed/, fuzz/regressions/)
//! through the same check on stable: no panic, and every outcome as their expected.txt says.

use std::path::Path;

#[path = "../../../fuzz/src/openflow_decode.rs"]
mod openflow_decode;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;
mod samples;

#[test]
fn openflow_decode_corpus_replays() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let out = replay::replay(&fuzz, "openflow_decode", openflow_decode::check);
    assert!(
        out.iter().any(|(_, o)| o == "rule"),
        "no seed is a rule: {out:?}"
    );
    assert!(
        out.iter().any(|(_, o)| o.starts_with("error")),
        "no seed is refused: {out:?}"
    );
}

/// Writes the seed corpus (run once with `--ignored`, then bless the expected outcomes).
#[test]
#[ignore]
fn write_seeds() {
    use flowpath_openflow::consts::*;
    use flowpath_openflow::translate::{flow_mod_to_spec, flow_stats, table_features};
    use flowpath_openflow::*;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus-seed/openflow_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let fm = samples::web_flow_mod(
        vec![
            Oxm::in_port(1),
            Oxm::exact(OxmField::EthType, 0x0800),
            Oxm::exact(OxmField::VlanVid, 0x1000 | 10),
            Oxm::exact(OxmField::VlanPcp, 3),
        ],
        vec![
            Instruction::WriteActions(vec![OfAction::Group(1)]),
            Instruction::GotoTable(3),
        ],
    );
    let v6 = FlowMod {
        command: OFPFC_DELETE,
        table_id: OFPTT_ALL,
        match_: vec![
            Oxm::exact(OxmField::EthType, 0x86dd),
            Oxm::exact(OxmField::IpProto, 58),
            Oxm::masked(OxmField::Ipv6Src, 0x2001_0db8 << 96, !0u128 << 64),
            Oxm::exact(OxmField::Icmpv6Type, 135),
        ],
        ..FlowMod::default()
    };
    let spec = flow_mod_to_spec(&fm).unwrap();
    let msgs: Vec<(&str, Vec<u8>)> = vec![
        ("hello", Message::hello().encode(1)),
        ("features_request", Message::FeaturesRequest.encode(2)),
        ("flow_mod_add", Message::FlowMod(fm.clone()).encode(3)),
        ("flow_mod_delete_v6", Message::FlowMod(v6).encode(4)),
        (
            "packet_out",
            Message::PacketOut(PacketOut {
                buffer_id: OFP_NO_BUFFER,
                in_port: OFPP_CONTROLLER,
                actions: vec![OfAction::output(OFPP_TABLE)],
                data: vec![0xff; 60],
            })
            .encode(5),
        ),
        (
            "group_mod",
            Message::GroupMod(GroupMod {
                command: OFPGC_ADD,
                group_type: OFPGT_ALL,
                group_id: 1,
                buckets: vec![Bucket {
                    weight: 0,
                    watch_port: OFPP_ANY,
                    watch_group: OFPG_ANY,
                    actions: vec![OfAction::output(1)],
                }],
            })
            .encode(6),
        ),
        (
            "mp_flow_request",
            Message::MultipartRequest {
                flags: 0,
                body: MultipartRequest::Flow(FlowStatsRequest::default()),
            }
            .encode(7),
        ),
        (
            "mp_flow_reply",
            encode_multipart_reply(8, &MultipartReply::Flow(vec![flow_stats(&spec, 1, 2, 3)]))
                .unwrap()
                .remove(0),
        ),
        (
            "mp_table_features_reply",
            encode_multipart_reply(9, &MultipartReply::TableFeatures(table_features(2, 100)))
                .unwrap()
                .remove(0),
        ),
        (
            "meter_mod",
            Message::MeterMod(MeterMod {
                command: OFPMC_ADD,
                flags: 1,
                meter_id: 1,
                bands: vec![MeterBand {
                    type_: 1,
                    rate: 1000,
                    burst_size: 0,
                    data: vec![0; 4],
                }],
            })
            .encode(10),
        ),
        (
            "set_async",
            Message::SetAsync(AsyncConfig::default()).encode(11),
        ),
        ("bad_type", vec![4, 99, 0, 8, 0, 0, 0, 1]),
        ("truncated_oxm", {
            let mut b = Message::FlowMod(fm).encode(12);
            b[8 + 40 + 4 + 3] = 200;
            b
        }),
    ];
    for (name, b) in msgs {
        std::fs::write(dir.join(name), b).unwrap();
    }
}
