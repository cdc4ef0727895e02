//! Messages flowpath sends and receives, dissected by tshark's OpenFlow 1.3 dissector: each
//! must dissect as the message it is, with no malformed-packet or expert warnings. Skipped
//! (with a note) when tshark or text2pcap is not installed.

use flowpath_openflow::consts::*;
use flowpath_openflow::translate::{flow_mod_to_spec, flow_stats, table_features};
use flowpath_openflow::*;
use std::fmt::Write as _;
use std::process::Command;

mod samples;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Dissect `msg` as the payload of a TCP segment to port 6653; tshark's verbose text.
fn dissect(name: &str, msg: &[u8]) -> String {
    let dir =
        std::env::temp_dir().join(format!("flowpath-of-tshark-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut hex = String::new();
    for (i, chunk) in msg.chunks(16).enumerate() {
        let _ = write!(hex, "{:06x}", i * 16);
        for b in chunk {
            let _ = write!(hex, " {b:02x}");
        }
        hex.push('\n');
    }
    let txt = dir.join("m.txt");
    let pcap = dir.join("m.pcap");
    std::fs::write(&txt, hex).unwrap();
    let st = Command::new("text2pcap")
        .args(["-q", "-T", "40000,6653"])
        .arg(&txt)
        .arg(&pcap)
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(&pcap)
        .args(["-V", "-d", "tcp.port==6653,openflow"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn check(name: &str, msg: &[u8], want: &[&str]) {
    let v = dissect(name, msg);
    let Some(at) = v.find("OpenFlow 1.3") else {
        panic!("{name}: not dissected as OpenFlow 1.3:\n{v}");
    };
    // The OpenFlow part only (the TCP part has its own notes on a lone segment).
    let v = &v[at..];
    for bad in ["Malformed", "Expert Info", "[Error", "Unknown"] {
        assert!(!v.contains(bad), "{name}: tshark says {bad}:\n{v}");
    }
    for w in want {
        assert!(v.contains(w), "{name}: tshark output lacks {w:?}:\n{v}");
    }
}

/// A 60-byte ARP request (who has 10.0.0.2, tell 10.0.0.1), as a port would deliver it.
fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend([0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
    f.extend([0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    f.resize(60, 0);
    f
}

fn sample_flow_mod() -> FlowMod {
    FlowMod {
        cookie: 0x1234,
        idle_timeout: 30,
        flags: OFPFF_SEND_FLOW_REM,
        ..samples::web_flow_mod(
            vec![
                Oxm::in_port(1),
                Oxm::masked(OxmField::EthDst, 0x0200_0000_0000, 0xffff_ffff_ff00),
                Oxm::exact(OxmField::EthType, 0x0800),
                Oxm::exact(OxmField::VlanVid, 0x1000 | 10),
            ],
            vec![Instruction::GotoTable(3)],
        )
    }
}

#[test]
fn tshark_dissects_our_messages() {
    if !have("tshark") || !have("text2pcap") {
        eprintln!("skipped: tshark/text2pcap not installed (apt install tshark)");
        return;
    }
    let fm = sample_flow_mod();
    check(
        "flow_mod",
        &Message::FlowMod(fm.clone()).encode(1),
        &[
            "OFPT_FLOW_MOD",
            "OFPXMT_OFB_TCP_DST",
            "OFPIT_GOTO_TABLE",
            "OFPAT_SET_FIELD",
        ],
    );
    check(
        "packet_in",
        &Message::PacketIn(PacketIn {
            buffer_id: OFP_NO_BUFFER,
            total_len: 60,
            reason: OFPR_ACTION,
            table_id: 2,
            cookie: 0x1234,
            match_: vec![Oxm::in_port(7)],
            data: arp_request(),
        })
        .encode(0),
        &["OFPT_PACKET_IN", "OFPXMT_OFB_IN_PORT"],
    );
    check(
        "features_reply",
        &Message::FeaturesReply(Features {
            datapath_id: 0xabcdef,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS,
        })
        .encode(5),
        &["OFPT_FEATURES_REPLY"],
    );
    // The flow reply of the flow_mod above, as the switch would dump it.
    let spec = flow_mod_to_spec(&fm).unwrap();
    let fs = flow_stats(&spec, 10, 1000, 2_000_000_000);
    let msgs = encode_multipart_reply(9, &MultipartReply::Flow(vec![fs.clone(), fs])).unwrap();
    assert_eq!(msgs.len(), 1);
    check(
        "flow_stats_reply",
        &msgs[0],
        &["OFPT_MULTIPART_REPLY", "OFPMP_FLOW"],
    );
    check(
        "flow_stats_request",
        &Message::MultipartRequest {
            flags: 0,
            body: MultipartRequest::Flow(FlowStatsRequest::default()),
        }
        .encode(10),
        &["OFPT_MULTIPART_REQUEST"],
    );
    let tf = encode_multipart_reply(11, &MultipartReply::TableFeatures(table_features(2, 1000)))
        .unwrap();
    check("table_features_reply", &tf[0], &["OFPMP_TABLE_FEATURES"]);
    check("hello", &Message::hello().encode(1), &["OFPT_HELLO"]);
    check(
        "port_status",
        &Message::PortStatus {
            reason: OFPPR_ADD,
            port: Port {
                port_no: 3,
                hw_addr: [2, 0, 0, 0, 0, 3],
                name: "veth3".into(),
                curr_speed: 10_000_000,
                max_speed: 10_000_000,
                ..Port::default()
            },
        }
        .encode(0),
        &["OFPT_PORT_STATUS", "veth3"],
    );
}
