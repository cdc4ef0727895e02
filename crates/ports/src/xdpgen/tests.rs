//! The transmitters' per-packet variation keeps checksums right, and the packet socket's
//! copy of it does what the program does.

use super::template::{be16, config_for, with_meta, GenCfg, META};
use super::{FlowOrder, Vary};
use aya::maps::{Array, MapData};
use aya::programs::{TestRun, TestRunOptions, Xdp};

fn sum16(b: &[u8]) -> u32 {
    let mut s = 0u32;
    for ch in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([ch[0], *ch.get(1).unwrap_or(&0)]));
    }
    s
}

fn ok(s: u32) -> bool {
    let mut s = s;
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

#[test]
fn one_flow_without_new_ones_is_sent_as_is() {
    assert_eq!(Vary::for_flows(1, 0.0), Vary::AsIs);
    assert_eq!(Vary::for_flows(0, 0.0), Vary::AsIs);
    assert_eq!(
        Vary::for_flows(1, 0.5),
        Vary::Flows {
            flows: 1,
            new_share: 0.5,
            order: FlowOrder::RoundRobin,
        }
    );
    assert_eq!(
        Vary::for_flows(7, 0.0),
        Vary::Flows {
            flows: 7,
            new_share: 0.0,
            order: FlowOrder::RoundRobin,
        }
    );
}

#[test]
fn the_flow_order_reaches_the_program() {
    let t = {
        let s = flowpath_gen::TrafficSpec::default();
        s.source().unwrap().template(0).to_vec()
    };
    for (order, byte) in [(FlowOrder::RoundRobin, 0), (FlowOrder::Random, 1)] {
        let c = config_for(&t, &Vary::for_flows_in(10, 0.0, order)).unwrap();
        assert_eq!((c.order, c.flows), (byte, 10), "{order:?}");
    }
    assert_eq!(FlowOrder::parse("random"), Some(FlowOrder::Random));
    assert_eq!(FlowOrder::parse("round-robin"), Some(FlowOrder::RoundRobin));
    assert_eq!(FlowOrder::parse("shuffled"), None);
}

#[test]
fn rewritten_checksums_verify() {
    for spec in ["ipv4", "ipv6"] {
        for proto in ["udp", "tcp"] {
            let s: flowpath_gen::TrafficSpec = flowpath_gen::TrafficSpec {
                encap: spec.parse().unwrap(),
                flows: flowpath_gen::spec::Flows {
                    proto: proto.parse().unwrap(),
                    ..Default::default()
                },
                ..Default::default()
            };
            let src = s.source().unwrap();
            let t = src.template(0).to_vec();
            let c = config_for(
                &t,
                &Vary::Flows {
                    flows: 10,
                    new_share: 0.5,
                    order: FlowOrder::Random,
                },
            )
            .unwrap();
            for f in [0u32, 1, 77, 65535, 1 << 20, u32::MAX] {
                let mut fr = t.clone();
                assert!(c.rewrite(f, &mut fr), "{spec}/{proto} f={f}");
                let ip = c.ip_off as usize;
                let (l4, l4len) = if c.ip_ver == 4 {
                    assert!(ok(sum16(&fr[ip..ip + 20])), "{spec} ip csum f={f}");
                    (ip + 20, be16(&fr, ip + 2) as usize - 20)
                } else {
                    (ip + 40, be16(&fr, ip + 4) as usize)
                };
                let pseudo = if c.ip_ver == 4 {
                    sum16(&fr[ip + 12..ip + 20]) + u32::from(fr[ip + 9])
                } else {
                    sum16(&fr[ip + 8..ip + 40]) + u32::from(fr[ip + 6])
                } + l4len as u32;
                if c.l4_csum_off != 0 {
                    assert!(
                        ok(pseudo + sum16(&fr[l4..l4 + l4len])),
                        "{spec}/{proto} l4 csum f={f}"
                    );
                }
                if f == 0 {
                    continue;
                }
                assert_ne!(fr, t, "{spec}/{proto}: f={f} changed nothing");
            }
        }
    }
}

/// The packet socket's variation ([`GenCfg::vary`]) against the program itself: `gen_tx`
/// run once per counter value under plain `BPF_PROG_RUN` (no live frames: the frame comes
/// back), for IPv4 and IPv6, UDP and TCP, VXLAN, both flow orders, new flows and counters
/// from 0 to past 2^32. Needs root and the compiled program; says why it skips otherwise.
#[test]
fn vary_matches_the_program() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (BPF_PROG_RUN)");
        return;
    }
    let mut ebpf = match crate::xdp::load_object(crate::xdp::GEN_OBJ) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let p: &mut Xdp = ebpf.program_mut("gen_tx").unwrap().try_into().unwrap();
    p.load().unwrap();
    let mut cfg_map: Array<MapData, GenCfg> =
        Array::try_from(ebpf.take_map("gen_cfg").unwrap()).unwrap();
    let mut ctr: Array<MapData, u64> = Array::try_from(ebpf.take_map("gen_ctr").unwrap()).unwrap();
    let prog: &Xdp = ebpf.program("gen_tx").unwrap().try_into().unwrap();

    let mut specs: Vec<flowpath_gen::TrafficSpec> = Vec::new();
    for encap in ["ipv4", "ipv6", "vxlan"] {
        for proto in ["udp", "tcp"] {
            specs.push(flowpath_gen::TrafficSpec {
                encap: encap.parse().unwrap(),
                flows: flowpath_gen::spec::Flows {
                    proto: proto.parse().unwrap(),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
    }
    let varies = [
        Vary::for_flows(1000, 0.0),
        Vary::for_flows_in(70_000, 0.0, FlowOrder::Random),
        Vary::for_flows_in(10, 0.3, FlowOrder::Random),
        Vary::churn(),
    ];
    let counters: Vec<u64> = (0..40)
        .chain([
            65_535,
            65_536,
            999_999,
            (1 << 32) - 1,
            1 << 32,
            (1 << 40) + 7,
        ])
        .collect();
    let mut checked = 0;
    for spec in &specs {
        let t = spec.source().unwrap().template(0).to_vec();
        for vary in &varies {
            let c = config_for(&t, vary).unwrap();
            cfg_map.set(0, c, 0).unwrap();
            for &n in &counters {
                ctr.set(0, n, 0).unwrap();
                let data = with_meta(&t, 0);
                let md: [u32; 6] = [META as u32, data.len() as u32, 0, 0, 0, 0];
                // SAFETY: reinterpreting [u32; 6] as its 24 bytes.
                let ctx: &[u8] = unsafe { std::slice::from_raw_parts(md.as_ptr().cast(), 24) };
                let mut out = vec![0u8; data.len() + 256];
                let r = prog.test_run(TestRunOptions {
                    data_in: Some(&data),
                    data_out: Some(&mut out),
                    ctx_in: Some(ctx),
                    ..TestRunOptions::new()
                });
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("skipped: plain BPF_PROG_RUN refused here: {e}");
                        return;
                    }
                };
                assert_eq!(r.return_value, 3, "XDP_TX");
                // The frame comes back after its metadata.
                let kernel = &out[META..r.data_size_out as usize];
                let mut ours = t.clone();
                assert!(c.vary(n, &mut ours));
                assert_eq!(kernel, &ours[..], "{spec:?} {vary:?} counter {n}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, specs.len() * varies.len() * counters.len());
}
