//! The connection-tracking cases: their generated traffic is what it claims (checksums,
//! sequence numbers, one packet per connection per batch, replies after what they
//! answer), checked by parsing every frame with etherparse against a small TCP model;
//! and each case runs at small sizes and reports consistent figures.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use flowpath_base::{PacketBatch, Port};
use flowpath_bench::ct::conns::{udp_conns, TcpConns, UdpPort, STEPS};
use flowpath_bench::ct::{run_sized, CtCase, CtSizes};
use flowpath_bench::BenchConfig;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One parsed TCP segment.
#[derive(Debug)]
struct Seen {
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
}

/// Parse a TCP/IPv4 frame, checking both checksums.
fn parse_tcp(frame: &[u8]) -> Seen {
    let p = SlicedPacket::from_ethernet(frame).expect("a well-formed frame");
    let Some(NetSlice::Ipv4(ip)) = &p.net else {
        panic!("not IPv4")
    };
    let h = ip.header();
    assert_eq!(
        h.header_checksum(),
        h.to_header().calc_header_checksum(),
        "IPv4 header checksum"
    );
    let Some(TransportSlice::Tcp(t)) = &p.transport else {
        panic!("not TCP")
    };
    let (s, d) = (h.source(), h.destination());
    assert_eq!(
        t.checksum(),
        t.calc_checksum_ipv4(s, d).unwrap(),
        "TCP checksum"
    );
    let flags =
        (t.fin() as u8) | (t.syn() as u8) << 1 | (t.psh() as u8) << 3 | (t.ack() as u8) << 4;
    Seen {
        src: (s, t.source_port()),
        dst: (d, t.destination_port()),
        flags,
        seq: t.sequence_number(),
        ack: t.acknowledgment_number(),
        len: t.payload().len() as u32,
    }
}

/// A connection as the model follows it: each side's next sequence number, packets seen,
/// and the batch of its last packet.
#[derive(Default)]
struct Model {
    next: [Option<u32>; 2],
    packets: usize,
    last_batch: Option<usize>,
}

#[test]
fn tcp_connections_are_whole_in_order_and_checksummed() {
    let mut g = TcpConns::new(64, 64, 0, 7);
    let mut conns: HashMap<([u8; 4], u16), Model> = HashMap::new();
    let mut b = PacketBatch::new();
    // The two sides in an uneven pattern, as a worker's fair polling might take them.
    for batch in 0..3000usize {
        let server = batch % 3 == 1 || batch % 7 == 0;
        b.clear();
        let n = g.fill(server, &mut b);
        let mut in_batch = HashSet::new();
        for i in 0..n {
            let s = parse_tcp(b.frame(i));
            let (client, side) = if server { (s.dst, 1) } else { (s.src, 0) };
            assert!(
                in_batch.insert(client),
                "two packets of {client:?} in one batch"
            );
            let c = conns.entry(client).or_default();
            assert!(
                c.packets < STEPS.len(),
                "{client:?} sent more than a connection"
            );
            let (from_server, flags) = STEPS[c.packets];
            assert_eq!(
                (from_server, s.flags),
                (server, flags),
                "{client:?} step {}",
                c.packets
            );
            if let Some(last) = c.last_batch {
                assert!(last < batch, "a packet before the one it follows");
            }
            // Each side sends at its next sequence number and acknowledges the other's.
            if let Some(next) = c.next[side] {
                assert_eq!(s.seq, next, "{client:?} step {} seq", c.packets);
            }
            if s.flags & 0x10 != 0 {
                assert_eq!(
                    Some(s.ack),
                    c.next[1 - side],
                    "{client:?} step {} ack",
                    c.packets
                );
            } else {
                assert_eq!(s.ack, 0);
            }
            let used = s.len + (s.flags & 0x02 != 0) as u32 + (s.flags & 0x01 != 0) as u32;
            c.next[side] = Some(s.seq.wrapping_add(used));
            c.packets += 1;
            c.last_batch = Some(batch);
        }
    }
    let whole = conns.values().filter(|c| c.packets == STEPS.len()).count();
    assert!(whole > 1000, "{whole} connections finished");
    assert_eq!(whole as u64, g.finished);
    assert_eq!(
        conns.len() as u64,
        g.started(),
        "every connection started was seen"
    );
    let data = conns.len(); // (each carried one data segment, checked by the flags above)
    assert!(data > 0);
}

#[test]
fn the_server_side_waits_for_the_client() {
    let mut g = TcpConns::new(64, 64, 0, 1);
    let mut b = PacketBatch::new();
    assert_eq!(g.fill(true, &mut b), 0, "no SYN has been sent yet");
    assert_eq!(g.fill(false, &mut b), flowpath_base::BATCH);
    b.clear();
    assert_eq!(
        g.fill(true, &mut b),
        flowpath_base::BATCH,
        "a SYN-ACK per SYN"
    );
}

#[test]
fn udp_connections_mirror_each_other_and_are_checksummed() {
    let (orig, reply) = udp_conns(0, 100);
    let mut seen = HashSet::new();
    for (dirs, is_reply) in [(orig, false), (reply, true)] {
        let mut port = UdpPort::new(Arc::new(dirs), 64);
        let mut b = PacketBatch::new();
        for _ in 0..4 {
            b.clear();
            let n = port.recv(&mut b).unwrap();
            for i in 0..n {
                let f = b.frame(i);
                assert_eq!(f.len(), 60, "64 bytes with the FCS");
                let p = SlicedPacket::from_ethernet(f).unwrap();
                let Some(NetSlice::Ipv4(ip)) = &p.net else {
                    panic!("not IPv4")
                };
                let h = ip.header();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                let Some(TransportSlice::Udp(u)) = &p.transport else {
                    panic!("not UDP")
                };
                let want = u
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), u.payload())
                    .unwrap();
                assert_eq!(u.checksum(), want, "UDP checksum");
                let (c, cp) = if is_reply {
                    (h.destination(), u.destination_port())
                } else {
                    (h.source(), u.source_port())
                };
                seen.insert((is_reply, c, cp));
            }
        }
    }
    // Both directions of the same 100 connections.
    let clients = |r: bool| -> HashSet<_> {
        seen.iter()
            .filter(|s| s.0 == r)
            .map(|s| (s.1, s.2))
            .collect()
    };
    assert_eq!(clients(false).len(), 100);
    assert_eq!(clients(false), clients(true));
}

fn small() -> (BenchConfig, CtSizes) {
    let cfg = BenchConfig {
        runs: 2,
        packets: 20_000,
        flows: 64,
        ..BenchConfig::default()
    };
    let sizes = CtSizes {
        in_flight: 64,
        million: 3_000,
        conns: 64,
        window_ms: 20,
    };
    (cfg, sizes)
}

#[test]
fn every_ct_case_runs_small_and_reports_its_figures() {
    let (cfg, sizes) = small();
    for case in CtCase::ALL {
        let mut ticks = 0;
        let r = run_sized(case, &cfg, &sizes, |_, _| ticks += 1);
        assert_eq!(r.case, case.name());
        assert_eq!(ticks, cfg.runs, "{}: one tick a run", r.case);
        assert!(r.cycles_per_packet > 0.0, "{}", r.case);
        assert!(r.cycles_min <= r.cycles_per_packet && r.cycles_per_packet <= r.cycles_max);
        let ct = r.ct.as_ref().expect("ct figures");
        assert!((0.0..=1.0).contains(&ct.delivered_share), "{}", r.case);
        // Where the datapath tracks connections, the pipeline forwards every packet of
        // this traffic: no packet of a well-formed connection is invalid or refused.
        let tracking = ct.tracked > 0;
        if tracking {
            assert!(
                ct.delivered_share > 0.999,
                "{}: {}",
                r.case,
                ct.delivered_share
            );
        }
        match case {
            CtCase::New => {
                // Eight packets a connection: cycles per connection are eight packets'.
                let per = ct.cycles_per_connection.unwrap() / r.cycles_per_packet;
                assert!(
                    (6.0..10.0).contains(&per),
                    "{per} packets' cycles a connection"
                );
                assert!(ct.connections_per_sec.unwrap() > 0.0);
                assert!(ct.generator_cycles > 0.0);
            }
            CtCase::Million => {
                assert!(ct.memory_source.is_some());
                if tracking {
                    assert_eq!(ct.tracked, sizes.million as u64);
                    assert!(ct.bytes_per_connection.is_some());
                }
            }
            CtCase::Nat => {
                assert!(ct.peer_cycles_per_packet.unwrap() > 0.0);
                if tracking {
                    assert_eq!(
                        ct.nat_replies,
                        Some(sizes.conns as u64),
                        "every reply NATed"
                    );
                }
            }
            CtCase::SynFlood => {
                let (k, lo, hi) = (
                    ct.retained.unwrap(),
                    ct.retained_min.unwrap(),
                    ct.retained_max.unwrap(),
                );
                assert!(lo <= k && k <= hi);
                assert!(ct.flood_pps.unwrap() > 0.0, "the flood was taken");
            }
            CtCase::Established2w => {
                if tracking {
                    assert_eq!(
                        ct.tracked,
                        2 * sizes.conns as u64,
                        "both workers' in one tracker"
                    );
                }
                assert!(ct.mpps_two_workers.unwrap() > 0.0);
                assert!(ct.mpps_one_worker.unwrap() > 0.0);
            }
        }
    }
}

#[test]
fn the_ct_cases_parse_by_name_and_render_a_markdown_row() {
    for case in CtCase::ALL {
        let c = flowpath_bench::Case::parse(case.name()).expect("a case name");
        assert_eq!(c.name(), case.name());
    }
    let (cfg, sizes) = small();
    let r = run_sized(
        CtCase::Nat,
        &BenchConfig { runs: 1, ..cfg },
        &sizes,
        |_, _| {},
    );
    // A child process's JSON row reads back with its ct figures.
    let machine = flowpath_bench::Machine::probe();
    let json = flowpath_bench::report::json(std::slice::from_ref(&r), &[], &machine);
    let rows: Vec<flowpath_bench::CaseResult> = serde_json::from_str(&json).unwrap();
    let back = rows[0].ct.as_ref().expect("ct figures in the JSON");
    assert_eq!(back.nat_replies, r.ct.as_ref().unwrap().nat_replies);
    let md = flowpath_bench::report::markdown(&[r], &[], &machine);
    assert!(md.contains("| `ct_nat` |"), "{md}");
    assert!(md.contains("without NAT"), "{md}");
}
