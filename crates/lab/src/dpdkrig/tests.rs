//! The rig's traffic and flows: both directions of every connection, the capture as
//! written, the flow text as both switches read it, the table.

use super::fpside::{forwarded, pump, rules, worker};
use super::*;

/// (source, destination, source port, destination port) of a UDP/IPv4 frame.
fn tuple(f: &[u8]) -> ([u8; 4], [u8; 4], u16, u16) {
    let a = |o: usize| [f[o], f[o + 1], f[o + 2], f[o + 3]];
    let p = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    (a(26), a(30), p(34), p(36))
}

#[test]
fn every_connection_is_seen_both_ways_original_first() {
    let frames = connection_frames(1024);
    assert_eq!(frames.len(), 2048);
    let mut clients = std::collections::HashSet::new();
    for pair in frames.chunks(2) {
        assert_eq!(pair[0].len(), FRAME_SIZE - 4);
        assert_eq!(&pair[0][12..14], &[0x08, 0x00]);
        assert_eq!(pair[0][23], 17, "UDP");
        let (s, d, sp, dp) = tuple(&pair[0]);
        assert_eq!(d, SERVER.octets());
        assert_eq!(dp, SERVER_PORT);
        assert_eq!(&s[..2], &[10, 0], "client inside {CLIENT_NET}");
        assert_eq!(tuple(&pair[1]), (d, s, dp, sp), "the reply swaps both");
        assert!(clients.insert((s, sp)), "each connection once");
    }
}

#[test]
fn the_capture_holds_the_frames_in_order() {
    let dir = std::env::temp_dir().join(format!("dpdkrig-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.pcap");
    let frames = connection_frames(40);
    write_pcap(&path, &frames).unwrap();
    let cap = flowpath_gen::read_capture_file(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cap.frames, frames);
}

#[test]
fn flowpath_reads_both_flow_sets_and_only_ct_tracks() {
    for set in FlowSet::ALL {
        let text = set.flows();
        let r = rules(set).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), text.lines().count());
        for spec in &r {
            spec.validate().expect("valid rule");
        }
        assert_eq!(text.contains("ct("), set == FlowSet::Ct);
    }
    let ct = FlowSet::Ct.flows();
    assert!(ct.contains("ct_state=-trk,actions=ct(table=1,zone=1)"));
    assert!(ct.contains("ct_state=+trk+new,nw_src=10.0.0.0/16,actions=ct(commit,zone=1),output:2"));
    assert_eq!(FlowSet::parse("ct"), Ok(FlowSet::Ct));
    assert!(FlowSet::parse("nat").is_err());
}

#[test]
fn the_plain_flows_forward_every_frame_of_both_directions() {
    let frames = connection_frames(64);
    let (mut w, _) = worker(&frames, FlowSet::Plain, 64).unwrap();
    pump(&mut w, 3 * frames.len() as u64);
    assert_eq!(forwarded(&w), 3 * frames.len() as u64);
}

#[test]
fn the_table_gives_the_ratio_and_says_why_a_side_is_missing() {
    let f = |c: f64| Figures {
        cycles: vec![c, c + 10.0, c - 10.0],
        mpps: vec![1.0, 1.1, 0.9],
        forwarded_share: 1.0,
        note: String::new(),
    };
    let rows = vec![
        RigRow {
            set: "plain",
            ovs: Ok(f(400.0)),
            flowpath: Ok(f(200.0)),
        },
        RigRow {
            set: "ct",
            ovs: Err("skipped: not root".into()),
            flowpath: Ok(f(300.0)),
        },
    ];
    let t = table(&rows);
    assert!(t.contains("400 (390-410)"), "{t}");
    assert!(t.contains("2.00"), "{t}");
    assert!(t.contains("skipped: not root"), "{t}");
    let md = markdown(&rows);
    assert!(md.contains("| plain | 400 (390-410) |"), "{md}");
    assert!(md.contains("TSC"), "{md}");
}
