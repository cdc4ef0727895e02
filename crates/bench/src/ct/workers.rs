//! `ct_established_2w`: established UDP connections through the ct pipeline on two
//! workers that share one tracker (as a switch's workers do), against one worker alone,
//! in the same process.

use super::cases::{udp_established, udp_generator_cycles};
use super::rig::{tracker_for, Timed};
use super::{result, CtCase, CtFigures, CtSizes};
use crate::runner::{BenchConfig, CaseResult};
use flowpath_base::clock::tsc_hz;
use flowpath_base::median;
use flowpath_conntrack::Tracker;
use std::sync::{Arc, Barrier};

/// What one worker thread measured: its cycles in each one-worker and two-worker run, its
/// last two-worker run, and its cache sizes.
struct WorkerRuns {
    alone: Vec<u64>,
    paired: Vec<Timed>,
    cache: (usize, usize),
}

/// Two workers, each with its own `sizes.conns` connections, datapath and ports, one
/// tracker between them. Each run times worker 0 alone, then both together (started by
/// a barrier); a pair's rate is both workers' packets over the slower one's time.
pub(super) fn ct_established_2w(
    cfg: &BenchConfig,
    sizes: &CtSizes,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    let n = sizes.conns.max(1);
    let tracker = tracker_for(2 * n as u64);
    let packets = cfg.packets;
    let (settled, gate) = (Barrier::new(3), Barrier::new(3));
    let runs = cfg.runs;
    let per_worker: Vec<WorkerRuns> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|k| {
                let (tracker, settled, gate) = (tracker.clone(), &settled, &gate);
                s.spawn(move || one_worker(cfg, k, n, tracker, settled, gate))
            })
            .collect();
        settled.wait();
        for r in 0..runs {
            gate.wait();
            gate.wait();
            gate.wait();
            progress(r + 1, runs);
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("a ct worker panicked"))
            .collect()
    });
    let hz = tsc_hz();
    // Each paired run as one: the slower worker's cycles over both workers' packets.
    let pairs: Vec<Timed> = (0..runs)
        .map(|r| {
            let (a, b) = (&per_worker[0].paired[r], &per_worker[1].paired[r]);
            let mut t = if a.cycles >= b.cycles {
                a.clone()
            } else {
                b.clone()
            };
            t.packets = a.packets + b.packets;
            t.delivered = a.delivered + b.delivered;
            t
        })
        .collect();
    let alone: Vec<f64> = per_worker[0]
        .alone
        .iter()
        .map(|&c| c as f64 / packets as f64)
        .collect();
    let alone_cpp = median(&alone);
    let pair_cpp = median(&pairs.iter().map(Timed::per_packet).collect::<Vec<_>>());
    let figures = CtFigures {
        tracked: tracker.len() as u64,
        generator_cycles: udp_generator_cycles(cfg, n, cfg.packets / 4),
        peer: Some("one worker alone".into()),
        peer_cycles_per_packet: alone_cpp,
        mpps_two_workers: pair_cpp.map(|c| hz / c / 1e6),
        mpps_one_worker: alone_cpp.map(|c| hz / c / 1e6),
        ..CtFigures::default()
    };
    result(
        CtCase::Established2w,
        cfg,
        &pairs,
        per_worker[0].cache,
        figures,
    )
}

/// Worker `k`'s thread: establish its connections (numbers from `k·n`) in the shared
/// tracker, warm up, then per run: worker 0 timed alone, both timed together.
fn one_worker(
    cfg: &BenchConfig,
    k: u64,
    n: usize,
    tracker: Arc<Tracker>,
    settled: &Barrier,
    gate: &Barrier,
) -> WorkerRuns {
    let warm = (cfg.packets / 4).max(8 * n as u64);
    let (mut rig, _) = udp_established(cfg, k * n as u64, n, None, Some(tracker));
    rig.pump(warm);
    settled.wait();
    let mut out = WorkerRuns {
        alone: Vec::new(),
        paired: Vec::new(),
        cache: (0, 0),
    };
    for _ in 0..cfg.runs {
        gate.wait();
        if k == 0 {
            out.alone.push(rig.timed(cfg.packets).cycles);
        }
        gate.wait();
        out.paired.push(rig.timed(cfg.packets));
        gate.wait();
    }
    out.cache = super::cache(rig.datapath());
    out
}
