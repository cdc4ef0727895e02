//! The one-worker ct cost cases: `ct_new` (whole TCP connections), `ct_1m` (a million
//! established UDP connections) and `ct_nat` (source NAT, beside the same traffic
//! without it).

use super::conns::{udp_conns, CtPort, TcpConns, TcpPort, UdpPort};
use super::frames::Udp4;
use super::rig::{
    cost_config, generator_cycles, rss_bytes, small_tracker, store_of, tracker_for, Rig, Timed,
};
use super::rules::{ct_rules, CtPipeline, PORT_A, PORT_B, ZONE};
use super::{cache, result, CtCase, CtFigures, CtSizes};
use crate::runner::{BenchConfig, CaseResult};
use flowpath_base::clock::tsc_hz;
use flowpath_base::median;
use flowpath_packet::ct::{NatKind, NatSpec};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// Packets per timed run of the cases whose packets are mostly slow (a tenth of the
/// bench's, at least 50,000), as the miss case's.
fn slow_packets(cfg: &BenchConfig) -> u64 {
    (cfg.packets / 10).max(50_000)
}

/// `ct_new`: `in_flight` TCP connections at a time over ports A (client) and B (server),
/// each a never-seen 5-tuple, eight packets each; cycles per packet and per connection.
pub(super) fn ct_new(
    cfg: &BenchConfig,
    sizes: &CtSizes,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    let per_run = slow_packets(cfg);
    let in_flight = sizes.in_flight.max(64);
    let warm = (per_run / 2).max(32 * in_flight as u64);
    // Every connection stays in the tracker (closed ones wait out TIME_WAIT for longer
    // than the case runs): room for all of them.
    let conns = (warm + per_run * cfg.runs as u64) / 8 + in_flight as u64;
    let store = store_of(ct_rules(&CtPipeline::new(PORT_A, PORT_B)), cfg);
    let (a, b, gen) = TcpPort::pair(TcpConns::new(in_flight, cfg.frame_size, 0, cfg.seed));
    let ports = vec![(PORT_A, CtPort::Tcp(a)), (PORT_B, CtPort::Tcp(b))];
    let mut rig = Rig::new(store, cost_config(cfg), ports, tracker_for(conns));
    rig.pump(warm);
    let finished = || gen.lock().unwrap_or_else(|e| e.into_inner()).finished;
    let mut runs = Vec::with_capacity(cfg.runs);
    let mut per_conn = Vec::with_capacity(cfg.runs);
    for r in 0..cfg.runs {
        let f0 = finished();
        let t = rig.timed(per_run);
        per_conn.push(t.cycles as f64 / (finished() - f0).max(1) as f64);
        runs.push(t);
        progress(r + 1, cfg.runs);
    }
    // The traffic alone: a generator of its own, both sides in turn.
    let (mut ga, mut gb, _) =
        TcpPort::pair(TcpConns::new(in_flight, cfg.frame_size, 1 << 40, cfg.seed));
    let gen_cycles = generator_cycles(&mut [&mut ga, &mut gb], per_run);
    let cyc_conn = median(&per_conn).unwrap_or(f64::NAN);
    let figures = CtFigures {
        tracked: rig.tracker.len() as u64,
        generator_cycles: gen_cycles,
        cycles_per_connection: Some(cyc_conn),
        connections_per_sec: Some(tsc_hz() / cyc_conn),
        ..CtFigures::default()
    };
    result(CtCase::New, cfg, &runs, cache(rig.datapath()), figures)
}

/// A rig for `n` UDP connections (numbers from `first`), port A sending their original
/// direction, port B (switched off) their replies, `nat` on the commit of new ones.
pub(super) fn udp_rig(
    cfg: &BenchConfig,
    first: u64,
    n: usize,
    nat: Option<NatSpec>,
    tracker: Option<Arc<flowpath_conntrack::Tracker>>,
) -> Rig {
    let (orig, reply) = udp_conns(first, n);
    let mut p = CtPipeline::new(PORT_A, PORT_B);
    p.nat = nat;
    let store = store_of(ct_rules(&p), cfg);
    let a = UdpPort::new(Arc::new(orig), cfg.frame_size);
    let mut b = UdpPort::new(Arc::new(reply), cfg.frame_size);
    b.on = false;
    let ports = vec![(PORT_A, CtPort::Udp(a)), (PORT_B, CtPort::Udp(b))];
    let tracker = tracker.unwrap_or_else(|| tracker_for(n as u64));
    Rig::new(store, cost_config(cfg), ports, tracker)
}

/// Establish the `n` connections of a [`udp_rig`]: A sends each connection's first
/// datagram, then B each reply (so every connection has been seen both ways); then both
/// ports send. With `nat`, B's replies go to the tuple the tracker chose for each
/// connection; returns how many were so addressed (None without NAT).
pub(super) fn establish(rig: &mut Rig, n: usize, nat: bool) -> Option<u64> {
    rig.pump(n as u64);
    let natted = nat.then(|| {
        let natted = natted_replies(&rig.tracker, n);
        let k = natted.len() as u64;
        if k > 0 {
            rig.udp(1).set_dirs(Arc::new(natted));
        }
        k
    });
    rig.udp(0).on = false;
    rig.udp(1).on = true;
    let replies = rig.udp(1).dirs().len() as u64;
    rig.pump(replies);
    rig.udp(0).on = true;
    natted
}

/// [`udp_rig`] with its connections established ([`establish`]).
pub(super) fn udp_established(
    cfg: &BenchConfig,
    first: u64,
    n: usize,
    nat: Option<NatSpec>,
    tracker: Option<Arc<flowpath_conntrack::Tracker>>,
) -> (Rig, Option<u64>) {
    let mut rig = udp_rig(cfg, first, n, nat, tracker);
    let natted = establish(&mut rig, n, nat.is_some());
    (rig, natted)
}

/// The reply direction of every UDP connection in the case's zone as the tracker has it
/// (to the NATed address and port), or fewer than `n` if it tracks fewer.
fn natted_replies(t: &flowpath_conntrack::Tracker, n: usize) -> Vec<Udp4> {
    let v4 = |a: u128| ((a >> 96) as u32).to_be_bytes();
    t.dump(Some(ZONE))
        .into_iter()
        .filter(|c| c.reply.proto == 17 && !c.reply.ipv6)
        .take(n)
        .map(|c| Udp4 {
            src: v4(c.reply.src),
            dst: v4(c.reply.dst),
            sport: c.reply.src_port,
            dport: c.reply.dst_port,
            reply: true,
        })
        .collect()
}

/// Warm up with `warm` packets, then `cfg.runs` timed runs of `packets`.
fn timed_runs(
    rig: &mut Rig,
    cfg: &BenchConfig,
    warm: u64,
    packets: u64,
    progress: &mut impl FnMut(usize, usize),
) -> Vec<Timed> {
    rig.pump(warm);
    (0..cfg.runs)
        .map(|r| {
            let t = rig.timed(packets);
            progress(r + 1, cfg.runs);
            t
        })
        .collect()
}

/// The UDP traffic's own cycles per packet (`n` connections, original direction).
pub(super) fn udp_generator_cycles(cfg: &BenchConfig, n: usize, packets: u64) -> f64 {
    let (orig, _) = udp_conns(0, n);
    generator_cycles(
        &mut [&mut UdpPort::new(Arc::new(orig), cfg.frame_size)],
        packets,
    )
}

/// `ct_1m`: `sizes.million` UDP connections established, then traffic over all of them
/// in both directions; memory per connection from the process's resident memory before
/// and after establishing them.
pub(super) fn ct_1m(
    cfg: &BenchConfig,
    sizes: &CtSizes,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    let n = sizes.million.max(1);
    let mut rig = udp_rig(cfg, 0, n, None, Some(small_tracker()));
    // What the tracker and the connections add: the rig, its traffic's lists and the
    // datapath's tables are made (and faulted in) before.
    let before = rss_bytes();
    rig.set_tracker(tracker_for(n as u64));
    establish(&mut rig, n, false);
    let after = rss_bytes();
    let tracked = rig.tracker.len() as u64;
    let (bytes, source) = match (before, after) {
        (Some(b), Some(a)) if tracked > 0 => (
            Some(a.saturating_sub(b) as f64 / tracked as f64),
            "resident memory growth from making the tracker to the last connection established ÷ connections tracked",
        ),
        (Some(_), Some(_)) => (None, "no connection was tracked"),
        _ => (None, "resident memory unreadable"),
    };
    let runs = timed_runs(
        &mut rig,
        cfg,
        (2 * n as u64).min(4 * cfg.packets),
        cfg.packets,
        &mut progress,
    );
    let figures = CtFigures {
        tracked: rig.tracker.len() as u64,
        generator_cycles: udp_generator_cycles(cfg, n.min(1 << 20), cfg.packets / 4),
        bytes_per_connection: bytes,
        memory_source: Some(source.into()),
        ..CtFigures::default()
    };
    result(CtCase::Million, cfg, &runs, cache(rig.datapath()), figures)
}

/// The NAT of `ct_nat`: source 203.0.113.1, ports 10000–20000.
pub fn snat() -> NatSpec {
    let a = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1));
    NatSpec {
        kind: Some(NatKind::Src),
        addrs: Some((a, a)),
        ports: Some((10_000, 20_000)),
        flags: Default::default(),
    }
}

/// `ct_nat`: `sizes.conns` UDP connections source-NATed to one address and a port range,
/// traffic both ways; the same traffic without NAT, in the same process, is its peer.
pub(super) fn ct_nat(
    cfg: &BenchConfig,
    sizes: &CtSizes,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    let n = sizes.conns.max(1);
    let warm = (cfg.packets / 4).max(8 * n as u64);
    let (mut plain, _) = udp_established(cfg, 0, n, None, None);
    let mut quiet = |_: usize, _: usize| {};
    let peer = timed_runs(&mut plain, cfg, warm, cfg.packets, &mut quiet);
    let peer_cycles = median(&peer.iter().map(Timed::per_packet).collect::<Vec<_>>());
    drop(plain);
    let (mut rig, natted) = udp_established(cfg, 0, n, Some(snat()), None);
    let runs = timed_runs(&mut rig, cfg, warm, cfg.packets, &mut progress);
    let figures = CtFigures {
        tracked: rig.tracker.len() as u64,
        generator_cycles: udp_generator_cycles(cfg, n, cfg.packets / 4),
        peer: Some("the same traffic without NAT".into()),
        peer_cycles_per_packet: peer_cycles,
        nat_replies: natted,
        ..CtFigures::default()
    };
    result(CtCase::Nat, cfg, &runs, cache(rig.datapath()), figures)
}
