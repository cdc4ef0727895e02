//! `flowpath switch` on real interfaces (needs root and `ip netns`; skipped otherwise):
//! frames sent into a veth arrive at the other veths exactly as the flows say (output
//! port, rewritten fields, VLAN tags), with none lost at a paced rate, over AF_PACKET and
//! AF_XDP ports; the daemon survives a port's veth being deleted, and SIGTERM removes its
//! XDP programs.

use flowpath_ports::afpacket::AfPacketPort;
use flowpath_ports::{PacketBatch, Port};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

mod common;
use common::{is_our_udp, on_port, paced, reference, sh, test_frame, Lab};

const FLOWS: &str = "\
priority=10,in_port=1,udp,tp_dst=53 actions=drop
priority=5,in_port=1,ip,nw_dst=192.168.0.0/24 actions=mod_dl_dst:02:00:00:00:00:02,mod_nw_src:10.9.9.9,dec_ttl,output:2
priority=5,in_port=1,ip,nw_dst=192.168.1.0/24 actions=mod_vlan_vid:7,output:3
priority=4,in_port=1,dl_vlan=5 actions=strip_vlan,output:2
";

macro_rules! need_root_netns {
    () => {
        if let Some(why) = common::netns_skip_reason() {
            eprintln!("skipping: {why}");
            return;
        }
    };
}

fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let dst = match i % 5 {
                0 | 1 => Ipv4Addr::new(192, 168, 0, (i % 200) as u8 + 1),
                2 => Ipv4Addr::new(192, 168, 1, 9),
                3 => Ipv4Addr::new(172, 16, 0, 1), // no rule: dropped
                _ => Ipv4Addr::new(192, 168, 0, 1),
            };
            test_frame(i, dst, i % 5 == 4)
        })
        .collect()
}

/// Send `fr` from a0 at about `pps`, capture at b0 and c0 until `want` frames or a quiet
/// second; returns what b0 and c0 saw (only frames from our generator: UDP from 10/8 or
/// the rewritten 10.9.9.9).
fn send_and_capture(
    lab: &Lab,
    fr: Vec<Vec<u8>>,
    pps: u64,
    want: usize,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    lab.inside(move || {
        let mut tx = AfPacketPort::open("a0", "a0", false).unwrap();
        let mut rb = AfPacketPort::open("b0", "b0", false).unwrap();
        // c0 may have been deleted by the test.
        let mut rc = AfPacketPort::open("c0", "c0", false).ok();
        let (mut got_b, mut got_c) = (Vec::new(), Vec::new());
        let mut batch = PacketBatch::new();
        let mut drain = |rb: &mut AfPacketPort,
                         rc: &mut Option<AfPacketPort>,
                         b: &mut Vec<Vec<u8>>,
                         c: &mut Vec<Vec<u8>>| {
            let ports: [(Option<&mut AfPacketPort>, &mut Vec<Vec<u8>>); 2] =
                [(Some(rb), b), (rc.as_mut(), c)];
            for (p, out) in ports {
                let Some(p) = p else { continue };
                loop {
                    batch.clear();
                    let n = p.recv(&mut batch).unwrap();
                    for i in 0..n {
                        out.push(batch.frame(i).to_vec());
                    }
                    if n == 0 {
                        break;
                    }
                }
            }
        };
        paced(&fr, pps, |chunk| {
            for f in chunk {
                assert!(tx.send(f), "a0 tx ring full at a paced rate");
            }
            tx.flush().unwrap();
            drain(&mut rb, &mut rc, &mut got_b, &mut got_c);
        });
        let mut quiet = Instant::now();
        let mut last = 0;
        while quiet.elapsed() < Duration::from_secs(1) && got_b.len() + got_c.len() < want {
            drain(&mut rb, &mut rc, &mut got_b, &mut got_c);
            if got_b.len() + got_c.len() != last {
                last = got_b.len() + got_c.len();
                quiet = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // A little longer, to catch anything extra that should not be there.
        std::thread::sleep(Duration::from_millis(100));
        drain(&mut rb, &mut rc, &mut got_b, &mut got_c);
        let ours = |f: &Vec<u8>| is_our_udp(f);
        (
            got_b.into_iter().filter(ours).collect(),
            got_c.into_iter().filter(ours).collect(),
        )
    })
}

fn forwards_as_the_flows_say(kind: &str) {
    let lab = Lab::new(&format!("fpt-sw{}", &kind[..3]));
    let sw = lab.start_switch(FLOWS, kind, "");
    let fr = frames(3000);
    let (_, want) = reference(FLOWS, &fr);
    let (want_b, want_c) = (on_port(&want, 2), on_port(&want, 3));
    assert!(
        want_b.len() > 1000 && want_c.len() > 300,
        "the flows exercise both ports"
    );
    let (got_b, got_c) = send_and_capture(&lab, fr, 20_000, want.len());
    let (ok, err) = sw.stop();
    assert!(ok, "switch exit: {err}");
    assert_eq!(
        got_b.len(),
        want_b.len(),
        "frames at b0 (loss or extras); switch said:\n{err}"
    );
    assert_eq!(
        got_c.len(),
        want_c.len(),
        "frames at c0 (loss or extras); switch said:\n{err}"
    );
    for (i, (g, w)) in got_b.iter().zip(&want_b).enumerate() {
        assert_eq!(g, w, "b0 frame {i} differs from what the flows say");
    }
    for (i, (g, w)) in got_c.iter().zip(&want_c).enumerate() {
        assert_eq!(
            g, w,
            "c0 frame {i} differs from what the flows say (VLAN 7 pushed)"
        );
    }
}

#[test]
fn afpacket_ports_forward_as_the_flows_say() {
    need_root_netns!();
    forwards_as_the_flows_say("afpacket");
}

/// AF_XDP ports also need the XDP objects, compiled by clang at build time.
macro_rules! need_xdp {
    () => {
        if !flowpath_ports::xdp::bpf_available() {
            eprintln!("skipping: flowpath-ports was built without clang (no XDP programs)");
            return;
        }
    };
}

#[test]
fn afxdp_ports_forward_as_the_flows_say() {
    need_root_netns!();
    need_xdp!();
    forwards_as_the_flows_say("afxdp");
}

#[test]
fn survives_a_deleted_veth_and_removes_xdp_on_sigterm() {
    need_root_netns!();
    need_xdp!();
    let lab = Lab::new("fpt-swdel");
    let sw = lab.start_switch(FLOWS, "afxdp", "");
    let has_xdp = |dev: &str| !lab.xdp_of(dev).is_empty();
    assert!(has_xdp("a1"), "the AF_XDP port attached its XDP program");
    // Port 3's veth disappears under the running switch.
    sh(&["ip", "-n", &lab.ns, "link", "del", "c0"]);
    std::thread::sleep(Duration::from_millis(300));
    // The others still forward.
    let fr: Vec<Vec<u8>> = frames(500)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 5 == 0 || i % 5 == 1)
        .map(|(_, f)| f)
        .collect();
    let want = on_port(&reference(FLOWS, &fr).1, 2).len();
    let (got_b, _) = send_and_capture(&lab, fr, 10_000, want);
    assert_eq!(
        got_b.len(),
        want,
        "port 2 still forwards after port 3's veth is gone"
    );
    let (ok, err) = sw.stop();
    assert!(ok, "the switch exits cleanly after losing a port: {err}");
    assert!(err.contains("c1"), "the lost port is logged by name: {err}");
    assert!(
        !has_xdp("a1") && !has_xdp("b1"),
        "SIGTERM removed the XDP programs"
    );
}
