//! The bench's workloads: a rule set and the traffic that exercises one cache tier.
//!
//! Every case runs generated 64-byte UDP/IPv4 frames (unless told otherwise) through the
//! real datapath; the rule sets are built so that the tier under test is the one that
//! answers, and the bench reports the tier counts it observed so that can be checked.

use flowpath_datapath::{StaticUnderlay, TunnelPort, Tunnels, UnderlayHop};
use flowpath_gen::{build, FrameSpec, InMemorySource, Vxlan};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

pub use flowpath_gen::class::{FrameMix, TrafficClass, IMIX_PATTERN, VXLAN4_OVERHEAD};

/// Ingress port of all generated traffic.
pub const IN_PORT: u32 = 1;

/// Frames of `n` UDP/IPv4 flows built by `flow(i)` = (src, dst, sport, dport).
fn udp4_source(
    n: usize,
    frame_size: usize,
    flow: impl Fn(usize) -> (Ipv4Addr, Ipv4Addr, u16, u16),
) -> InMemorySource {
    let templates = (0..n)
        .map(|i| {
            let (s, d, sp, dp) = flow(i);
            build(&FrameSpec::udp4(s, d, sp, dp, frame_size))
        })
        .collect();
    InMemorySource::new(templates)
}

/// (a) Exact-match hits: plain L3 forwarding, `flows` flows that all fit in the EMC.
pub fn emc_hit(flows: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    let rules = (0..16u32)
        .map(|k| {
            RuleSpec::new(
                0,
                100,
                Match::any().exact(Field::EthType, 0x0800).prefix(
                    Field::Ipv4Dst,
                    (0x0a00_0000 | (k << 16)) as u128,
                    16,
                ),
            )
            .actions([Action::Output(2 + k % 4)])
        })
        .collect();
    let src = udp4_source(flows, frame_size, |i| {
        (
            Ipv4Addr::from(0x0b00_0000 | i as u32),
            Ipv4Addr::from(0x0a00_0001 | ((i as u32 % 16) << 16)),
            1024 + (i % 50_000) as u16,
            5001,
        )
    });
    (rules, src)
}

/// (b) Megaflow hits spread over exactly `subtables` masks.
///
/// Group g's rules (priority 1000 − g) match an exact destination 10.0.g.j plus the source
/// prefix 10.g.0.0/(8+g). A packet of group g probes the subtables of groups 0..=g and stops
/// (nothing later can beat priority 1000 − g), so its megaflow's mask is the destination
/// plus the source /(8+g): one distinct mask per group, `dsts` megaflows in each, and many
/// more flows (sources, ports) than megaflows. Traffic is spread evenly over the groups.
pub fn megaflow_hit(subtables: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    assert!((1..=16).contains(&subtables));
    let dsts = 32u32;
    let mut rules = Vec::new();
    for g in 0..subtables as u32 {
        for j in 0..dsts {
            rules.push(
                RuleSpec::new(
                    0,
                    1000 - g as u16,
                    Match::any()
                        .exact(Field::EthType, 0x0800)
                        .exact(Field::Ipv4Dst, (0x0a00_0000 | (g << 8) | j) as u128)
                        .prefix(Field::Ipv4Src, (0x0a00_0000 | (g << 16)) as u128, 8 + g),
                )
                .actions([Action::Output(2 + j % 4)]),
            );
        }
    }
    let flows = 4096;
    let src = udp4_source(flows, frame_size, |i| {
        let g = (i % subtables) as u32;
        let j = (i / subtables) as u32 % dsts;
        (
            Ipv4Addr::from(0x0a00_0000 | (g << 16) | (i as u32 % 251)),
            Ipv4Addr::from(0x0a00_0000 | (g << 8) | j),
            1024 + (i % 4000) as u16,
            5001,
        )
    });
    (rules, src)
}

/// Many flows: `n` established UDP flows over [`megaflow_hit`]'s four-subtable rules
/// (128 megaflows in all), so the exact-match cache (8,192 entries) holds a sliver of
/// them and nearly every packet falls to the megaflow search. Flow i is in group i % 4 and
/// to destination (i / 4) % 32 of that group, from one of 65,536 sources inside the group's
/// source prefix, on one of 16 source ports. Uniform: every flow once per pass over the
/// slots, in shuffled order. Zipf: the same number of slots drawn with Zipf(1.1)
/// popularity (flow 0 the most popular), so a few flows carry most packets.
pub fn many_flows(
    n: usize,
    zipf: bool,
    frame_size: usize,
    seed: u64,
) -> (Vec<RuleSpec>, InMemorySource) {
    let (rules, _) = megaflow_hit(4, frame_size);
    let templates: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let g = (i % 4) as u32;
            let j = (i / 4) as u32 % 32;
            let k = (i / 128) as u32;
            build(&FrameSpec::udp4(
                Ipv4Addr::from(0x0a00_0000 | (g << 16) | (k & 0xffff)),
                Ipv4Addr::from(0x0a00_0000 | (g << 8) | j),
                1024 + (k >> 16) as u16,
                5001,
                frame_size,
            ))
        })
        .collect();
    let mut rng = flowpath_base::SplitMix64::new(seed ^ 0x6d61_6e79);
    let mut slots: Vec<u32> = if zipf {
        // Inverse CDF over the cumulative Zipf weights.
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 1..=n {
            total += (k as f64).powf(-1.1);
            cdf.push(total);
        }
        (0..n)
            .map(|_| {
                let u = rng.unit() * total;
                cdf.partition_point(|&c| c < u).min(n - 1) as u32
            })
            .collect()
    } else {
        (0..n as u32).collect()
    };
    // Fisher-Yates with the seeded generator (the same seed gives the same order).
    for i in (1..slots.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        slots.swap(i, j);
    }
    (rules, InMemorySource::from_slot_templates(templates, slots))
}

/// (c)/(d) The miss pipeline: three tables, 1,000 rules, IPv4 traffic of one frame size.
/// The same as [`class_pipeline`] with [`TrafficClass::Ipv4`] and [`FrameMix::Fixed`].
///
/// - table 0 (100 rules): IPv4 destination /16 prefixes 10.k.0.0 → goto 1, and a
///   lowest-priority drop;
/// - table 1 (800 rules): source /32, /24, /16 and /12 prefixes (longer = higher priority)
///   together with a destination port, → goto 2; the "/32" rules are for addresses the
///   traffic never uses, but their subtable is always probed first, and their source
///   mask leaves out the top bit (`/127.255.255.255`, not a prefix), so the prefix tries
///   cannot rule it out either: every megaflow carries 31 source bits — each new source
///   is a miss, which is what this pipeline is for (with a plain /32 the tries would let
///   256 new sources share a megaflow);
/// - table 2 (100 rules): source-port ranges (masked) → output to one of four ports.
///
/// Traffic: `flows` established UDP flows to 10.k.0.1:5001; the source stamps a fresh
/// source address (100.64.0.0/10) on the share of packets that should be new flows.
pub fn miss_pipeline(flows: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    class_pipeline(TrafficClass::Ipv4, flows, FrameMix::Fixed(frame_size))
}

/// An IPv6 address (as the key's big-endian number) from its high and low 64 bits.
/// Established IPv6 sources have low 32 bits `0x8000_0000 | …`, so that a stamped new
/// flow (low 32 bits = its sequence number, far below 2^31) never equals one of them.
fn v6(hi: u128, lo: u128) -> u128 {
    (hi << 64) | lo
}

const V6_DB8: u128 = 0x2001_0db8;

/// A 3-table, 1,000-rule pipeline for `class` and `flows` established UDP flows of the
/// frame sizes `mix`. Every megaflow carries the exact (inner) source address, so a packet
/// the source stamps as a new flow (`InMemorySource::set_new_flow_share`) is a miss that
/// classifies through all three tables and installs a megaflow.
///
/// - [`TrafficClass::Ipv4`]: see [`miss_pipeline`].
/// - [`TrafficClass::Ipv6`]: the same shape on IPv6: table 0 has 99 destination /64s
///   2001:db8:a:k::/64 → goto 1 (and a drop); table 1 has source /128s (never sent),
///   /64s, /56s and /32s, each with a destination port, → goto 2; table 2 source-port
///   ranges → output. Established flows come from 2001:db8:b:(i mod 200)00::/56 to
///   2001:db8:a:k::1 port 5001; a new flow differs in the low 32 source bits.
/// - [`TrafficClass::Vxlan`] (decap): the IPv4 rules, with table 0 also matching
///   `in_port=<tunnel>` ([`TUNNEL_PORT`]); frames are VXLAN over IPv4 from the remote VTEP
///   to the local one (192.0.2.2 → 192.0.2.1, UDP 4789, VNI 42) around the IPv4 class's
///   inner frames, `mix` sizing the outer frame. The datapath needs the class's tunnel
///   port ([`class_tunnels`]): it decapsulates and maps the packet to it.
/// - [`TrafficClass::VxlanEncap`]: the IPv4 rules and frames, table 2 outputting to the
///   tunnel port instead; `mix` sizes the encapsulated frame that leaves (the inner frame
///   is [`VXLAN4_OVERHEAD`] bytes smaller, at least as large as its headers), so both
///   VXLAN classes put the same frames on the underlay wire. Needs the tunnel port too.
pub fn class_pipeline(
    class: TrafficClass,
    flows: usize,
    mix: FrameMix,
) -> (Vec<RuleSpec>, InMemorySource) {
    let flows = mix.round_flows(flows);
    let rules = match class {
        TrafficClass::Ipv4 => ipv4_rules(Ipv4Variant::Plain),
        TrafficClass::Vxlan => ipv4_rules(Ipv4Variant::Decap),
        TrafficClass::VxlanEncap => ipv4_rules(Ipv4Variant::Encap),
        TrafficClass::Ipv6 => ipv6_rules(),
    };
    let templates = (0..flows)
        .map(|i| {
            let size = mix.size_of(i);
            let sport = 1024 + (i % 6400) as u16;
            let k = i as u32 % 99;
            match class {
                TrafficClass::Ipv4 | TrafficClass::Vxlan | TrafficClass::VxlanEncap => {
                    let src = Ipv4Addr::from(
                        0x0b00_0000 | ((i as u32 % 200) << 16) | (i as u32 / 200 + 1),
                    );
                    let dst = Ipv4Addr::from(0x0a00_0001 | (k << 16));
                    match class {
                        TrafficClass::Vxlan => {
                            let (local, remote) = vteps(false);
                            let (IpAddr::V4(l), IpAddr::V4(r)) = (local, remote) else {
                                unreachable!("IPv4 underlay")
                            };
                            let spec = FrameSpec::udp4(src, dst, sport, 5001, size);
                            build(&spec.with_vxlan(Vxlan::v4(TUNNEL_VNI, r, l)))
                        }
                        TrafficClass::VxlanEncap => build(&FrameSpec::udp4(
                            src,
                            dst,
                            sport,
                            5001,
                            size.saturating_sub(VXLAN4_OVERHEAD),
                        )),
                        _ => build(&FrameSpec::udp4(src, dst, sport, 5001, size)),
                    }
                }
                TrafficClass::Ipv6 => {
                    let src = v6(
                        (V6_DB8 << 32) | (0xb << 16) | ((i as u128 % 200) << 8),
                        0x8000_0000 | (i as u128 / 200 + 1),
                    );
                    let dst = v6((V6_DB8 << 32) | (0xa << 16) | k as u128, 1);
                    build(&FrameSpec::udp6(
                        Ipv6Addr::from(src),
                        Ipv6Addr::from(dst),
                        sport,
                        5001,
                        size,
                    ))
                }
            }
        })
        .collect();
    (rules, InMemorySource::new(templates))
}

/// Which of the IPv4 rule sets of [`class_pipeline`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ipv4Variant {
    Plain,
    /// Table 0 also matches `in_port=<tunnel>`.
    Decap,
    /// Table 2 outputs to the tunnel port.
    Encap,
}

/// The IPv4 (and VXLAN) rule sets of [`class_pipeline`].
fn ipv4_rules(variant: Ipv4Variant) -> Vec<RuleSpec> {
    let mut rules = Vec::with_capacity(1000);
    for k in 0..99u32 {
        let mut m = Match::any().exact(Field::EthType, 0x0800).prefix(
            Field::Ipv4Dst,
            (0x0a00_0000 | (k << 16)) as u128,
            16,
        );
        if variant == Ipv4Variant::Decap {
            m = m.exact(Field::InPort, TUNNEL_PORT as u128);
        }
        rules.push(RuleSpec::new(0, 100, m).goto(1));
    }
    rules.push(RuleSpec::new(0, 0, Match::any()));
    let mut add1 = |prio: u16, src: u32, len: u32, dport: u16| {
        // "32" is the never-sent rules' non-prefix mask (see class_pipeline).
        let m = if len == 32 {
            Match::any().with(Field::Ipv4Src, src as u128, 0x7fff_ffff)
        } else {
            Match::any().prefix(Field::Ipv4Src, src as u128, len)
        };
        rules.push(RuleSpec::new(1, prio, m.exact(Field::TpDst, dport as u128)).goto(2));
    };
    for i in 0..200u32 {
        add1(40, 0x64c8_0000 | i, 32, 5001); // 100.200.0.i/127.255.255.255: never sent
        add1(30, 0x6440_0000 | (i << 8), 24, 5000 + (i % 4) as u16);
        add1(20, 0x0b00_0000 | (i << 16), 16, 5001);
        add1(
            10,
            0x6440_0000 | ((i % 16) << 20),
            12,
            5001 + (i % 2) as u16,
        );
    }
    table2(&mut rules);
    if variant == Ipv4Variant::Encap {
        for r in rules.iter_mut().filter(|r| r.table == 2) {
            r.actions = vec![Action::Output(TUNNEL_PORT)];
        }
    }
    rules
}

/// The IPv6 rule set of [`class_pipeline`].
fn ipv6_rules() -> Vec<RuleSpec> {
    let mut rules = Vec::with_capacity(1000);
    for k in 0..99u128 {
        rules.push(
            RuleSpec::new(
                0,
                100,
                Match::any().exact(Field::EthType, 0x86dd).prefix(
                    Field::Ipv6Dst,
                    v6((V6_DB8 << 32) | (0xa << 16) | k, 0),
                    64,
                ),
            )
            .goto(1),
        );
    }
    rules.push(RuleSpec::new(0, 0, Match::any()));
    let mut add1 = |prio: u16, src: u128, len: u32, dport: u16| {
        // "128" is the never-sent rules' non-prefix mask: all but the top bit.
        let m = if len == 128 {
            Match::any().with(Field::Ipv6Src, src, u128::MAX >> 1)
        } else {
            Match::any().prefix(Field::Ipv6Src, src, len)
        };
        rules.push(RuleSpec::new(1, prio, m.exact(Field::TpDst, dport as u128)).goto(2));
    };
    for i in 0..200u128 {
        // 2001:db8:ffff::i with all but the top bit masked: never sent, but probed first
        // and not a prefix the tries can rule out, so every megaflow carries 127 source
        // bits.
        add1(40, v6((V6_DB8 << 32) | (0xffff << 16), i), 128, 5001);
        add1(
            30,
            v6((V6_DB8 << 32) | (0xc << 16) | i, 0),
            64,
            5000 + (i % 4) as u16,
        );
        add1(20, v6((V6_DB8 << 32) | (0xb << 16) | (i << 8), 0), 56, 5001);
        add1(
            10,
            v6((0x2001 << 48) | ((0x0db8 + i % 16) << 32), 0),
            32,
            5001 + (i % 2) as u16,
        );
    }
    table2(&mut rules);
    rules
}

/// Table 2 of the class pipelines: 100 source-port ranges → one of four ports; the last
/// rule is the fall-through (everything else to port 2).
fn table2(rules: &mut Vec<RuleSpec>) {
    for i in 0..100u32 {
        rules.push(
            RuleSpec::new(
                2,
                10 + (i % 3) as u16,
                Match::any().with(Field::TpSrc, (1024 + i * 64) as u128, 0xffc0),
            )
            .actions([Action::Output(2 + i % 4)]),
        );
    }
    debug_assert_eq!(rules.len(), 1000);
    rules.last_mut().unwrap().matches = Match::any();
    rules.last_mut().unwrap().priority = 0;
}

/// The VXLAN cases' tunnel port number (`in_port=` on decap, `output:` on encap).
pub const TUNNEL_PORT: u32 = 10;
/// The underlay port encapsulated packets leave by.
pub const UPLINK_PORT: u32 = 3;
/// The VXLAN cases' VNI.
pub const TUNNEL_VNI: u32 = 42;

/// (local, remote) VTEP addresses of the VXLAN cases.
fn vteps(v6: bool) -> (IpAddr, IpAddr) {
    if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        )
    }
}

/// The tunnel ports a class's datapath needs (`DatapathConfig::tunnels`): the VXLAN
/// classes use [`vxlan_tunnels`] (IPv4 underlay), the others none.
pub fn class_tunnels(class: TrafficClass) -> Option<Arc<Tunnels>> {
    match class {
        TrafficClass::Vxlan | TrafficClass::VxlanEncap => Some(Arc::new(vxlan_tunnels(false))),
        TrafficClass::Ipv4 | TrafficClass::Ipv6 => None,
    }
}

/// The VXLAN cases' one tunnel port (fixed remote and VNI, port 4789) with a static
/// underlay hop out of [`UPLINK_PORT`].
pub fn vxlan_tunnels(v6: bool) -> Tunnels {
    let (local, remote) = vteps(v6);
    let port = TunnelPort {
        local: Some(local),
        ..TunnelPort::vxlan(TUNNEL_PORT, "vx0", remote, TUNNEL_VNI)
    };
    let hop = UnderlayHop {
        port: UPLINK_PORT,
        src_mac: [0x02, 0, 0, 0, 0, 0x01],
        dst_mac: [0x02, 0, 0, 0, 0, 0x02],
        src_ip: local,
    };
    Tunnels::new(vec![port], Arc::new(StaticUnderlay::with(remote, hop)))
}

/// VXLAN decapsulation: emc_hit's `flows` inner frames (each `frame_size` bytes, so the
/// forwarded frame is the size the plain case forwards) arriving VXLAN-encapsulated from
/// the remote VTEP (IPv4 or IPv6 underlay) on [`IN_PORT`]; one rule
/// `in_port=<tunnel>,actions=output:2`.
pub fn vxlan_decap(flows: usize, frame_size: usize, v6: bool) -> (Vec<RuleSpec>, InMemorySource) {
    let rules = vec![RuleSpec::new(
        0,
        100,
        Match::any().exact(Field::InPort, TUNNEL_PORT as u128),
    )
    .actions([Action::Output(2)])];
    let (local, remote) = vteps(v6);
    let over = if v6 { 70 } else { 50 };
    let templates = (0..flows)
        .map(|i| {
            let spec = FrameSpec::udp4(
                Ipv4Addr::from(0x0b00_0000 | i as u32),
                Ipv4Addr::from(0x0a00_0001 | ((i as u32 % 16) << 16)),
                1024 + (i % 50_000) as u16,
                5001,
                frame_size + over,
            );
            let vx = match (remote, local) {
                (IpAddr::V4(r), IpAddr::V4(l)) => Vxlan::v4(TUNNEL_VNI, r, l),
                (IpAddr::V6(r), IpAddr::V6(l)) => Vxlan::v6(TUNNEL_VNI, r, l),
                _ => unreachable!("one family"),
            };
            build(&spec.with_vxlan(vx))
        })
        .collect();
    (rules, InMemorySource::new(templates))
}

/// VXLAN encapsulation: emc_hit's traffic on [`IN_PORT`], one rule
/// `in_port=1,actions=output:<tunnel>`; the packets leave encapsulated by [`UPLINK_PORT`].
pub fn vxlan_encap(flows: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    let rules = vec![
        RuleSpec::new(0, 100, Match::any().exact(Field::InPort, IN_PORT as u128))
            .actions([Action::Output(TUNNEL_PORT)]),
    ];
    let (_, src) = emc_hit(flows, frame_size);
    (rules, src)
}
