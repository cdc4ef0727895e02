//! NORMAL, FLOOD and ALL, packet-in metadata and packet-out, through the real datapath.
//!
//! The property test drives random L2 traffic (hosts that move between ports, VLANs,
//! broadcasts, a bounded MAC table that evicts) through the datapath with its caches in
//! every configuration, one packet per batch, and compares every output with a simple
//! sequential model of a MAC-learning switch.

use flowpath_datapath::{
    CaptureSink, Datapath, DatapathConfig, MacLearningConfig, MacLearningTable, MissLimits,
    PacketOut, CONTROLLER_PORT,
};
use flowpath_gen::{build, FrameSpec};
use flowpath_packet::{packet_in_reason, Action, Field, Packet};
use flowpath_pipeline::{Backend, Match, RuleSpec, RuleStore};
use proptest::prelude::*;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

const PORTS: [u32; 4] = [1, 2, 3, 4];
const BROADCAST: [u8; 6] = [0xff; 6];

fn host(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i + 1]
}

fn frame(src: [u8; 6], dst: [u8; 6], vlan: u16) -> Vec<u8> {
    let mut s = FrameSpec::udp4(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        1000,
        2000,
        64,
    );
    s.eth_src = src;
    s.eth_dst = dst;
    if vlan != 0 {
        s = s.with_vlan(0x8100, vlan);
    }
    build(&s)
}

/// One packet through `dp` (its own batch); what it sent.
fn send(dp: &mut Datapath, in_port: u32, f: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut buf = vec![0u8; 64 + f.len() + 64];
    buf[64..64 + f.len()].copy_from_slice(f);
    let mut pkts = [Packet::new(&mut buf, 64, f.len())];
    let mut sink = CaptureSink::default();
    dp.process(in_port, &mut pkts, &mut sink);
    sink.packets
}

fn ports_of(out: &[(u32, Vec<u8>)]) -> Vec<u32> {
    let mut v: Vec<u32> = out.iter().map(|(p, _)| *p).collect();
    v.sort_unstable();
    v
}

fn all_but(p: u32) -> Vec<u32> {
    PORTS.iter().copied().filter(|&q| q != p).collect()
}

/// The sequential model: a MAC table with FIFO eviction of the least recently learned
/// or moved entry (the table's clock does not move here, so refreshes do not reorder).
struct RefSwitch {
    max: usize,
    table: HashMap<(u16, [u8; 6]), u32>,
    order: Vec<(u16, [u8; 6])>,
}

impl RefSwitch {
    fn normal(&mut self, in_port: u32, vlan: u16, src: [u8; 6], dst: [u8; 6]) -> Vec<u32> {
        if src[0] & 1 == 0 {
            let k = (vlan, src);
            match self.table.get(&k) {
                Some(&p) if p == in_port => {}
                Some(_) => {
                    self.table.insert(k, in_port);
                    self.order.retain(|o| *o != k);
                    self.order.push(k);
                }
                None => {
                    if self.table.len() >= self.max {
                        let old = self.order.remove(0);
                        self.table.remove(&old);
                    }
                    self.table.insert(k, in_port);
                    self.order.push(k);
                }
            }
        }
        if dst[0] & 1 != 0 {
            return all_but(in_port);
        }
        match self.table.get(&(vlan, dst)) {
            Some(&p) if p == in_port => vec![],
            Some(&p) => vec![p],
            None => all_but(in_port),
        }
    }
}

fn l2_store(flood_port: Option<u32>) -> Arc<RuleStore> {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    let mut rules = vec![RuleSpec::new(0, 0, Match::any()).actions([Action::Normal])];
    if let Some(p) = flood_port {
        rules.push(
            RuleSpec::new(0, 10, Match::any().exact(Field::InPort, p as u128))
                .actions([Action::Flood]),
        );
    }
    store.add(rules).unwrap();
    store
}

fn l2_datapath(store: Arc<RuleStore>, cfg: DatapathConfig, mac: MacLearningConfig) -> Datapath {
    let mut dp = Datapath::new(store, cfg);
    dp.set_mac_table(Arc::new(MacLearningTable::with_manual_clock(mac)));
    dp.set_ports(PORTS);
    dp
}

fn configs() -> impl Strategy<Value = DatapathConfig> {
    (
        any::<bool>(),
        prop::sample::select(vec![0usize, 8, 1 << 16]),
        prop::sample::select(vec![4usize, 65536]),
    )
        .prop_map(|(emc, smc, max)| DatapathConfig {
            emc,
            emc_entries: 64,
            emc_insert_inv_prob: 1,
            smc_entries: smc,
            megaflow_max: max,
            miss: MissLimits::off(),
            revalidate_target_ms: 0.0,
            ..DatapathConfig::default()
        })
}

/// (in_port, VLAN, source host, destination host or broadcast)
fn packets() -> impl Strategy<Value = Vec<(u32, u16, u8, Option<u8>)>> {
    prop::collection::vec(
        (
            prop::sample::select(PORTS.to_vec()),
            prop::sample::select(vec![0u16, 10, 20]),
            0u8..5,
            prop::option::weighted(0.85, 0u8..6),
        ),
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// NORMAL (and a FLOOD rule on port 4) forward exactly as the sequential model of a
    /// learning switch does, through EMC, SMC and megaflow cache, with MAC moves on nearly
    /// every packet and a table small enough to evict.
    #[test]
    fn normal_matches_a_reference_learning_switch(
        cfg in configs(),
        pkts in packets(),
        max_macs in prop::sample::select(vec![3usize, 8192]),
        flood_rule in any::<bool>(),
        sticky in any::<bool>(),
    ) {
        let flood_port = flood_rule.then_some(4);
        let mut dp = l2_datapath(
            l2_store(flood_port),
            cfg,
            MacLearningConfig { max_entries: max_macs, aging: Duration::from_secs(300) },
        );
        let mut model = RefSwitch { max: max_macs, table: HashMap::new(), order: Vec::new() };
        // Sticky: each host stays on one port (many cache hits); else ports are random.
        let home = |h: u8| PORTS[h as usize % PORTS.len()];
        for (n, &(port, vlan, src, dst)) in pkts.iter().enumerate() {
            let in_port = if sticky { home(src) } else { port };
            let (s, d) = (host(src), dst.map(host).unwrap_or(BROADCAST));
            let got = ports_of(&send(&mut dp, in_port, &frame(s, d, vlan)));
            let want = if flood_port == Some(in_port) {
                all_but(in_port)
            } else {
                let mut w = model.normal(in_port, vlan, s, d);
                w.sort_unstable();
                w
            };
            prop_assert_eq!(got, want, "packet {}: port {} vlan {} {:?} -> {:?}", n, in_port, vlan, s, d);
        }
    }
}

/// A MAC that moves, and one that ages out, change the forwarding with the very next
/// packet: no megaflow keeps the old answer.
#[test]
fn mac_move_and_aging_are_reflected_at_once() {
    let mac = MacLearningConfig {
        max_entries: 16,
        aging: Duration::from_secs(10),
    };
    let cfg = DatapathConfig {
        emc_insert_inv_prob: 1,
        ..DatapathConfig::default()
    };
    let mut dp = l2_datapath(l2_store(None), cfg, mac);
    let (a, b) = (host(0), host(1));
    // Unknown B: flooded; A learned on 1.
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2, 3, 4]);
    // B answers from 2: A is known.
    assert_eq!(ports_of(&send(&mut dp, 2, &frame(b, a, 0))), vec![1]);
    // A -> B now goes to 2 (the flooding megaflow was revalidated), and stays so on hits.
    for _ in 0..3 {
        assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2]);
    }
    let hits = dp.stats().emc_hits + dp.stats().megaflow_hits;
    assert!(hits >= 2, "the established flow should hit the caches");
    // B moves to 3: its first packet there learns, and A -> B follows at once.
    assert_eq!(ports_of(&send(&mut dp, 3, &frame(b, a, 0))), vec![1]);
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![3]);
    // B moves back to 2: the megaflow from 2 for B was removed when B moved away, so
    // this packet learns again.
    assert_eq!(ports_of(&send(&mut dp, 2, &frame(b, a, 0))), vec![1]);
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2]);
    // Sweeps refresh the sources of megaflows that had packets since the last sweep. At
    // 6 s both talked since the sweep at 0 s; at 12 s only A did (at 6 s).
    dp.mac_table().advance(Duration::from_secs(6));
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2]);
    dp.mac_table().advance(Duration::from_secs(6));
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2]);
    // 17 s: B silent for 11 s (aging 10 s): aged out, so A -> B floods again at once.
    dp.mac_table().advance(Duration::from_secs(5));
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2, 3, 4]);
    assert_eq!(dp.mac_table().lookup(0, b), None);
    assert_eq!(dp.mac_table().lookup(0, a), Some(1));
    // VLANs are separate: A on VLAN 10 is unknown.
    assert_eq!(ports_of(&send(&mut dp, 2, &frame(b, a, 10))), vec![1, 3, 4]);
    // A destination learned on the ingress port is dropped, never sent back.
    let c = host(2);
    send(&mut dp, 1, &frame(c, a, 0));
    assert_eq!(
        ports_of(&send(&mut dp, 1, &frame(a, c, 0))),
        Vec::<u32>::new()
    );
}

#[test]
fn flushing_a_port_forgets_its_macs_and_cached_flows_follow_at_once() {
    let cfg = DatapathConfig {
        emc_insert_inv_prob: 1,
        ..DatapathConfig::default()
    };
    let mut dp = l2_datapath(l2_store(None), cfg, MacLearningConfig::default());
    let (a, b, c) = (host(0), host(1), host(2));
    send(&mut dp, 1, &frame(a, b, 0));
    send(&mut dp, 2, &frame(b, a, 0));
    send(&mut dp, 3, &frame(c, a, 0));
    for _ in 0..3 {
        assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2]);
    }
    // Port 2's link went down (the daemon's watcher calls this): B is forgotten, C is
    // not, and the cached A -> B flow floods from the next packet on.
    dp.mac_table().flush_port(2);
    assert_eq!(dp.mac_table().lookup(0, b), None);
    assert_eq!(dp.mac_table().lookup(0, c), Some(3));
    assert_eq!(dp.mac_table().lookup(0, a), Some(1));
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, b, 0))), vec![2, 3, 4]);
    assert_eq!(ports_of(&send(&mut dp, 1, &frame(a, c, 0))), vec![3]);
}

#[test]
fn mac_table_is_bounded_and_evicts_the_oldest() {
    let t = MacLearningTable::with_manual_clock(MacLearningConfig {
        max_entries: 2,
        aging: Duration::from_secs(300),
    });
    let g0 = t.generation();
    assert!(t.learn(0, host(0), 1));
    t.advance(Duration::from_secs(2));
    assert!(t.learn(0, host(1), 2));
    t.advance(Duration::from_secs(2));
    assert!(!t.learn(0, host(0), 1), "a refresh is no change");
    assert!(t.learn(0, host(2), 3));
    assert_eq!(t.len(), 2);
    assert_eq!(t.lookup(0, host(1)), None, "the least recently seen went");
    assert_eq!(t.lookup(0, host(0)), Some(1));
    assert!(t.generation() > g0);
    assert!(
        !t.learn(0, BROADCAST, 1),
        "multicast sources are not learned"
    );
}

/// Table-miss rules send NO_MATCH, other controller actions ACTION, with the rule's table
/// and cookie, the frame's whole length and the data cut to max_len.
#[test]
fn packet_in_carries_reason_table_cookie_and_truncation() {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store
        .add([
            RuleSpec::new(0, 0, Match::any()).actions([Action::controller(0xffff)]),
            RuleSpec::new(0, 5, Match::any().exact(Field::InPort, 2))
                .goto(3)
                .cookie(0x1122_3344_5566_7788),
            RuleSpec::new(3, 7, Match::any())
                .actions([Action::controller(20), Action::Output(1)])
                .cookie(0xabc),
        ])
        .unwrap();
    let mut dp = Datapath::new(store, DatapathConfig::default());
    dp.set_ports(PORTS);
    let q = dp.controller_queue();
    let f = frame(host(0), host(1), 0);
    for _ in 0..2 {
        // Twice: the second from the caches, with the same metadata.
        send(&mut dp, 1, &f);
        let p = q.pop().unwrap();
        assert_eq!(p.reason, packet_in_reason::NO_MATCH);
        assert_eq!((p.table_id, p.cookie, p.in_port), (0, 0, 1));
        assert_eq!((p.total_len as usize, &p.data), (f.len(), &f));
        q.recycle(p);
        let out = send(&mut dp, 2, &f);
        assert_eq!(ports_of(&out), vec![1]);
        let p = q.pop().unwrap();
        assert_eq!(p.reason, packet_in_reason::ACTION);
        assert_eq!((p.table_id, p.cookie, p.in_port), (3, 0xabc, 2));
        assert_eq!(p.total_len as usize, f.len());
        assert_eq!(&p.data[..], &f[..20]);
        assert!(q.pop().is_none());
    }
    // The queue is bounded: past it, counted drops.
    let store = l2_store(None);
    store
        .add([RuleSpec::new(0, 1, Match::any()).actions([Action::controller(64)])])
        .unwrap();
    let mut dp = Datapath::new(
        store,
        DatapathConfig {
            controller_queue: 2,
            ..DatapathConfig::default()
        },
    );
    for _ in 0..5 {
        send(&mut dp, 1, &f);
    }
    assert_eq!(dp.controller_queue().len(), 2);
    assert_eq!(
        dp.stats()
            .dropped(flowpath_datapath::DatapathDrop::ControllerQueueFull),
        3
    );
}

/// Packet-out: plain outputs, FLOOD from a port and from the controller, a rewrite before
/// an output, NORMAL with the learned table, and TABLE through the pipeline.
#[test]
fn packet_out_outputs_floods_and_runs_the_table() {
    let store = l2_store(None);
    let mut dp = l2_datapath(
        store,
        DatapathConfig::default(),
        MacLearningConfig::default(),
    );
    let f = frame(host(0), host(1), 0);
    let run = |dp: &mut Datapath, in_port: Option<u32>, actions: Vec<Action>| {
        let mut sink = CaptureSink::default();
        dp.packet_out(
            &PacketOut {
                in_port,
                actions,
                data: f.clone(),
            },
            &mut sink,
        );
        sink.packets
    };
    let out = run(&mut dp, None, vec![Action::Output(3)]);
    assert_eq!(out, vec![(3, f.clone())]);
    assert_eq!(
        ports_of(&run(&mut dp, Some(2), vec![Action::Flood])),
        vec![1, 3, 4]
    );
    assert_eq!(
        ports_of(&run(&mut dp, None, vec![Action::All])),
        vec![1, 2, 3, 4]
    );
    let out = run(
        &mut dp,
        None,
        vec![Action::SetEthDst(host(4)), Action::Output(1)],
    );
    assert_eq!(&out[0].1[..6], &host(4));
    // NORMAL: B unknown floods; a packet-out does not learn A.
    assert_eq!(
        ports_of(&run(&mut dp, Some(1), vec![Action::Normal])),
        vec![2, 3, 4]
    );
    assert_eq!(dp.mac_table().lookup(0, host(0)), None);
    // TABLE: the pipeline's NORMAL, as if received on 1 (it learns A on 1).
    assert_eq!(
        ports_of(&run(&mut dp, Some(1), vec![Action::Table])),
        vec![2, 3, 4]
    );
    assert_eq!(dp.mac_table().lookup(0, host(0)), Some(1));
    // Learned: B -> A goes to 1, by packet-out NORMAL and by TABLE.
    let back = frame(host(1), host(0), 0);
    let mut sink = CaptureSink::default();
    dp.packet_out(
        &PacketOut {
            in_port: Some(CONTROLLER_PORT),
            actions: vec![Action::Normal],
            data: back,
        },
        &mut sink,
    );
    assert_eq!(ports_of(&sink.packets), vec![1]);
    assert_eq!(dp.stats().packet_outs, 7);
}
