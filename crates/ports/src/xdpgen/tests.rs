//! The live-frame transmitter's per-packet variation keeps checksums right.

use super::*;

/// A model of the program's rewrite, to check the checksums it produces.
fn rewrite(frame: &mut [u8], c: &GenCfg, f: u32) {
    let fold = |mut s: u32| {
        s = (s & 0xffff) + (s >> 16);
        (s & 0xffff) + (s >> 16)
    };
    let add32 = |s: u32, o: u32, n: u32| s + (!o & 0xffff) + (!o >> 16) + (n & 0xffff) + (n >> 16);
    let span = c.port_span.max(1);
    let src_raw = u32::from_ne_bytes((c.base_src + f / span).to_be_bytes());
    let port_raw = u16::from_ne_bytes((c.base_port.wrapping_add((f % span) as u16)).to_be_bytes());
    let so = c.src_off as usize;
    frame[so..so + 4].copy_from_slice(&src_raw.to_ne_bytes());
    if c.ip_ver == 4 {
        let s = add32(
            !u32::from(c.base_ip_csum_raw) & 0xffff,
            c.base_src_raw,
            src_raw,
        );
        let o = c.ip_off as usize + 10;
        frame[o..o + 2].copy_from_slice(&(!fold(s) as u16).to_ne_bytes());
    }
    if c.port_off != 0 {
        let o = c.port_off as usize;
        frame[o..o + 2].copy_from_slice(&port_raw.to_ne_bytes());
    }
    if c.l4_csum_off != 0 {
        let mut s = !u32::from(c.base_l4_csum_raw) & 0xffff;
        if c.l4_pseudo != 0 {
            s = add32(s, c.base_src_raw, src_raw);
        }
        if c.port_off != 0 {
            s += (!u32::from(c.base_port_raw) & 0xffff) + u32::from(port_raw);
        }
        let r = !fold(s) as u16;
        let o = c.l4_csum_off as usize;
        frame[o..o + 2].copy_from_slice(&(if r == 0 { 0xffff } else { r }).to_ne_bytes());
    }
}

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
                rewrite(&mut fr, &c, f);
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
