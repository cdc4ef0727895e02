//! The bench's workloads: a rule set and the traffic that exercises one cache tier.
//!
//! Every case runs generated 64-byte UDP/IPv4 frames (unless told otherwise) through the
//! real datapath; the rule sets are built so that the tier under test is the one that
//! answers, and the bench reports the tier counts it observed so that can be checked.

use flowpath_gen::{build, FrameSpec, InMemorySource};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Match, RuleSpec};
use std::net::Ipv4Addr;

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

/// (c)/(d) The miss pipeline: three tables, 1,000 rules.
///
/// - table 0 (100 rules): IPv4 destination /16 prefixes 10.k.0.0 → goto 1, and a
///   lowest-priority drop;
/// - table 1 (800 rules): source /32, /24, /16 and /12 prefixes (longer = higher priority)
///   together with a destination port, → goto 2; the /32 rules are for addresses the
///   traffic never uses, but their subtable is always probed first, so every megaflow
///   carries the exact source address — each new source is a miss;
/// - table 2 (100 rules): source-port ranges (masked) → output to one of four ports.
///
/// Traffic: `flows` established UDP flows to 10.k.0.1:5001; the source stamps a fresh
/// source address (100.64.0.0/10) on the share of packets that should be new flows.
pub fn miss_pipeline(flows: usize, frame_size: usize) -> (Vec<RuleSpec>, InMemorySource) {
    let mut rules = Vec::with_capacity(1000);
    for k in 0..99u32 {
        rules.push(
            RuleSpec::new(
                0,
                100,
                Match::any().exact(Field::EthType, 0x0800).prefix(
                    Field::Ipv4Dst,
                    (0x0a00_0000 | (k << 16)) as u128,
                    16,
                ),
            )
            .goto(1),
        );
    }
    rules.push(RuleSpec::new(0, 0, Match::any()));
    let mut add1 = |prio: u16, src: u32, len: u32, dport: u16| {
        rules.push(
            RuleSpec::new(
                1,
                prio,
                Match::any()
                    .prefix(Field::Ipv4Src, src as u128, len)
                    .exact(Field::TpDst, dport as u128),
            )
            .goto(2),
        );
    };
    for i in 0..200u32 {
        add1(40, 0x64c8_0000 | i, 32, 5001); // 100.200.0.i/32: never sent
        add1(30, 0x6440_0000 | (i << 8), 24, 5000 + (i % 4) as u16);
        add1(20, 0x0b00_0000 | (i << 16), 16, 5001);
        add1(
            10,
            0x6440_0000 | ((i % 16) << 20),
            12,
            5001 + (i % 2) as u16,
        );
    }
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
    // The table-2 fall-through: everything else to port 2.
    rules.last_mut().unwrap().matches = Match::any();
    rules.last_mut().unwrap().priority = 0;
    let src = udp4_source(flows, frame_size, |i| {
        (
            Ipv4Addr::from(0x0b00_0000 | ((i as u32 % 200) << 16) | (i as u32 / 200 + 1)),
            Ipv4Addr::from(0x0a00_0001 | ((i as u32 % 99) << 16)),
            1024 + (i % 6400) as u16,
            5001,
        )
    });
    (rules, src)
}
