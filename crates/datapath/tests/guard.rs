//! The miss-storm defence through the real worker loop: a port flooding new flows next to
//! a port of established flows, two generated ports polled by one worker.
//!
//! What is asserted is behaviour, not speed: the established port never loses a packet to
//! the miss budget, the flooding port's misses over its share are dropped and counted per
//! port (and some still get through: it is not starved), and no packet of either is
//! forwarded anywhere the rules do not say.

use flowpath_datapath::{
    Datapath, DatapathConfig, DatapathDrop, MissLimits, OutputSink, Worker, WorkerPort,
};
use flowpath_gen::{build, FrameSpec, GeneratedPort, InMemorySource, PacedPort};
use flowpath_packet::{Action, Field};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Outputs counted by port.
#[derive(Default)]
struct PerPort(std::collections::BTreeMap<u32, u64>);
impl OutputSink for PerPort {
    fn output(&mut self, port: u32, _data: &[u8]) {
        *self.0.entry(port).or_default() += 1;
    }
}
impl flowpath_datapath::worker::Outputs for PerPort {}

/// Port 1's flows (10.1.0.0/16 sources) → port 2; everything else → port 3, with the
/// source pinned by a rule's subtable, so every new source is a miss. Its mask leaves out
/// the top bit (not a prefix): a plain /32 would let the prefix tries give a whole block
/// of new sources one megaflow, and the flood would not miss.
fn rules() -> Vec<RuleSpec> {
    let ip = || Match::any().exact(Field::EthType, 0x0800);
    vec![
        RuleSpec::new(0, 30, ip().with(Field::Ipv4Src, 0xc000_0201, 0x7fff_ffff))
            .actions([Action::Output(9)]),
        RuleSpec::new(0, 20, ip().prefix(Field::Ipv4Src, 0x0a01_0000, 16))
            .actions([Action::Output(2)]),
        RuleSpec::new(0, 10, ip()).actions([Action::Output(3)]),
    ]
}

fn flows(base: u32, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            build(&FrameSpec::udp4(
                Ipv4Addr::from(base + i),
                Ipv4Addr::new(192, 168, 0, 1),
                1000,
                2000,
                64,
            ))
        })
        .collect()
}

#[test]
fn a_flood_on_one_port_is_budgeted_and_the_established_port_loses_nothing() {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules()).unwrap();
    let cfg = DatapathConfig {
        miss: MissLimits {
            slow_path_share: 0.05,
            quantum_cycles: 20_000,
            ..MissLimits::default()
        },
        ..DatapathConfig::default()
    };
    let a = GeneratedPort::new("established", InMemorySource::new(flows(0x0a01_0000, 64)));
    let mut flood = InMemorySource::new(flows(0x6400_0000, 64));
    flood.set_new_flow_share(1.0);
    let b = GeneratedPort::new("flood", flood);
    let mut w = Worker::new(
        Datapath::new(store, cfg),
        vec![
            WorkerPort::new(1, 0, PacedPort::new(a, f64::INFINITY, 4096)),
            WorkerPort::new(7, 0, PacedPort::new(b, 0.0, 4096)),
        ],
        PerPort::default(),
        "test",
    );
    // Port 1 alone: its 64 flows are learnt.
    for _ in 0..200 {
        w.poll();
    }
    w.datapath_mut().reset_stats();
    let before = w.outputs().0.clone();
    w.ports_mut()[1].port.set_rate(f64::INFINITY);
    for _ in 0..3000 {
        w.poll();
    }
    let per = w.datapath().port_miss_stats();
    let of = |n| per.iter().find(|(p, _)| *p == n).unwrap().1;
    let (pa, pb) = (of(1), of(7));
    assert_eq!(
        pa.budget_drops, 0,
        "the established port lost nothing: {pa:?}"
    );
    assert!(pa.packets > 0);
    assert!(
        pb.budget_drops > 0,
        "the flood went over its budget: {pb:?}"
    );
    assert!(pb.upcalls > 0, "the flood still got a share: {pb:?}");
    let st = w.datapath().stats();
    assert_eq!(st.dropped(DatapathDrop::MissBudget), pb.budget_drops);
    let out =
        |p: u32| w.outputs().0.get(&p).copied().unwrap_or(0) - before.get(&p).copied().unwrap_or(0);
    assert_eq!(out(9), 0, "nothing matched the /32 rule");
    assert_eq!(out(2), pa.packets, "every established packet forwarded");
    assert_eq!(
        out(3),
        pb.packets - pb.budget_drops,
        "every flood packet within budget forwarded, the rest dropped"
    );
}

/// Cycle-fair polling is work conserving: a port of misses paying off an expensive batch
/// is served again as soon as a round finds nothing else to do (the switch once starved a
/// lone miss port this way: rounds of empty polls, then idle naps, while its debt lasted).
#[test]
fn a_lone_miss_port_is_served_every_other_poll_when_the_others_are_idle() {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules()).unwrap();
    let idle = GeneratedPort::new("idle", InMemorySource::new(flows(0x0a01_0000, 4)));
    let mut news = InMemorySource::new(flows(0x6400_0000, 64));
    news.set_new_flow_share(1.0);
    let mut w = Worker::new(
        Datapath::new(store, DatapathConfig::default()),
        vec![
            WorkerPort::new(1, 0, PacedPort::new(idle, 0.0, 64)),
            WorkerPort::new(
                7,
                0,
                PacedPort::new(GeneratedPort::new("new", news), f64::INFINITY, 4096),
            ),
        ],
        PerPort::default(),
        "test",
    );
    let polls = 1000;
    let got: usize = (0..polls).map(|_| w.poll()).sum();
    assert!(
        got >= polls / 2 * flowpath_base::BATCH,
        "{got} packets in {polls} polls: the miss port waited on its debt"
    );
}
