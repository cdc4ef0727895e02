//! Measuring one operating point on one core, and N workers at once.
//!
//! Every point starts from a fresh datapath, fills its megaflow cache with new flows
//! (`megaflow_max` of them, plus four per established flow), so that from then on every
//! install evicts — the steady state of a sustained miss rate, and the state in which the
//! 100 % point (the miss cost) is measured — then warms up at the point's own miss rate
//! (which brings the established flows back into the exact-match cache), then times
//! `runs` runs with the TSC. The same procedure at every miss rate keeps the curve's
//! points and its model's end points comparable, and the points of one experiment are
//! timed interleaved (see [`points`]).

use super::{Point, ScalingPoint, Spread, SuiteConfig};
use crate::harness::Harness;
use crate::runner::{packets_at, StageShare};
use crate::workload::{class_pipeline, class_tunnels};
use flowpath_base::clock::tsc_hz;
use flowpath_datapath::{DatapathConfig, DatapathStats};
use flowpath_gen::{FrameMix, InMemorySource, TrafficClass};
use flowpath_pipeline::{Backend, RuleSpec, RuleStore};
use std::sync::{Arc, Barrier};

/// Rough cycles per packet at miss rate `m`, only for the progress estimate.
fn guess_cycles(m: f64) -> f64 {
    130.0 + 1000.0 * m
}

fn prefill_packets(cfg: &SuiteConfig) -> u64 {
    cfg.megaflow_max as u64 + 4 * cfg.flows as u64
}

fn warm_packets(cfg: &SuiteConfig, m: f64) -> u64 {
    packets_at(cfg.warm_packets, m, cfg.min_packets)
}

/// Estimated cost of one point in millions of TSC cycles (`cores` workers run in
/// parallel, so they cost about one worker's time while there are enough CPUs).
pub(crate) fn estimate(cfg: &SuiteConfig, m: f64, cores: usize) -> u64 {
    let par = cores.div_ceil(super::available_cores()).max(1) as f64;
    let c = prefill_packets(cfg) as f64 * guess_cycles(1.0)
        + warm_packets(cfg, m) as f64 * guess_cycles(m)
        + (cfg.runs as u64 * packets_at(cfg.packets, m, cfg.min_packets)) as f64 * guess_cycles(m);
    ((c * par / 1e6) as u64).max(1)
}

fn store_with(rules: Vec<RuleSpec>) -> Arc<RuleStore> {
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules).expect("suite rules are valid");
    store
}

/// One worker's harness (own caches, source and sink, and the class's tunnel ports),
/// set up as the module says.
fn worker(
    class: TrafficClass,
    store: Arc<RuleStore>,
    source: InMemorySource,
    cfg: &SuiteConfig,
    seed: u64,
) -> Harness {
    let dp_cfg = DatapathConfig {
        emc_insert_inv_prob: cfg.emc_insert_inv_prob,
        megaflow_max: cfg.megaflow_max,
        // A cost measurement: every miss classified (no miss budget).
        miss: flowpath_datapath::MissLimits::unbudgeted(),
        tunnels: class_tunnels(class),
        ..DatapathConfig::default()
    };
    Harness::new(store, dp_cfg, source.with_seed(seed))
}

/// Fill the megaflow cache with new flows, then warm up at miss rate `m`.
fn settle(h: &mut Harness, cfg: &SuiteConfig, m: f64) {
    h.settle(prefill_packets(cfg), m, warm_packets(cfg, m));
}

/// One operating point to measure on one core.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spec {
    pub class: TrafficClass,
    pub mix: FrameMix,
    /// Share of new flows.
    pub m: f64,
}

/// Estimated cost of `specs` in millions of TSC cycles.
pub(crate) fn estimate_points(cfg: &SuiteConfig, specs: &[Spec]) -> u64 {
    specs.iter().map(|s| estimate(cfg, s.m, 1)).sum()
}

/// Measure every spec on one core, interleaved: each gets its own datapath (settled as
/// the module documentation says), then run r of every spec is timed before run r + 1 of
/// any, so that a slow phase of a shared machine spreads over all points alike instead
/// of bending one part of a curve against its model's end points.
pub(crate) fn points(cfg: &SuiteConfig, specs: &[Spec], tick: &mut dyn FnMut(f64)) -> Vec<Point> {
    let settle_cost = |s: &Spec| {
        prefill_packets(cfg) as f64 * guess_cycles(1.0)
            + warm_packets(cfg, s.m) as f64 * guess_cycles(s.m)
    };
    let run_cost =
        |s: &Spec| packets_at(cfg.packets, s.m, cfg.min_packets) as f64 * guess_cycles(s.m);
    let total: f64 = specs
        .iter()
        .map(|s| settle_cost(s) + cfg.runs as f64 * run_cost(s))
        .sum::<f64>()
        .max(1.0);
    let mut done = 0.0;
    let mut workers: Vec<Harness> = specs
        .iter()
        .map(|s| {
            let (rules, source) = class_pipeline(s.class, cfg.flows, s.mix);
            let mut w = worker(s.class, store_with(rules), source, cfg, cfg.seed);
            settle(&mut w, cfg, s.m);
            done += settle_cost(s);
            tick(done / total);
            w
        })
        .collect();
    let mut samples: Vec<Vec<(u64, DatapathStats)>> =
        vec![Vec::with_capacity(cfg.runs); specs.len()];
    for _ in 0..cfg.runs {
        for (i, (w, s)) in workers.iter_mut().zip(specs).enumerate() {
            samples[i].push(w.timed(packets_at(cfg.packets, s.m, cfg.min_packets)));
            done += run_cost(s);
            tick(done / total);
        }
    }
    workers
        .iter()
        .zip(specs)
        .zip(&samples)
        .map(|((w, s), smp)| {
            point_from(
                s.m,
                smp,
                packets_at(cfg.packets, s.m, cfg.min_packets),
                // The VXLAN classes: the VXLAN frame on the wire (encap: what leaves).
                w.frame_bytes() + s.class.wire_extra_bytes(),
                w.datapath().megaflows().len(),
            )
        })
        .collect()
}

fn point_from(
    m: f64,
    samples: &[(u64, DatapathStats)],
    packets: u64,
    frame_bytes: f64,
    megaflows: usize,
) -> Point {
    let per_pkt: Vec<f64> = samples
        .iter()
        .map(|s| s.0 as f64 / packets as f64)
        .collect();
    let cycles = Spread::of(&per_pkt);
    let st = &samples[per_pkt
        .iter()
        .position(|&c| c == cycles.median)
        .expect("the median is a sample")]
    .1;
    let pk = st.packets.max(1) as f64;
    Point {
        miss_rate: m,
        mpps: tsc_hz() / cycles.median / 1e6,
        cycles,
        packets_per_run: packets,
        frame_bytes,
        emc_hit_share: st.emc_hits as f64 / pk,
        megaflow_hit_share: st.megaflow_hits as f64 / pk,
        upcall_share: st.upcalls as f64 / pk,
        stage_cycles: StageShare::per_packet(st),
        megaflows,
    }
}

/// The scaling experiment at miss rate `m`: `max(cores)` workers, each with its own
/// datapath, source (seed + k) and sink, sharing one rule store, each pinned to its own
/// CPU when asked and possible. Run r times every worker count in turn — workers 0..n
/// start together (a barrier), the others wait — so that one-core and n-core runs see
/// the same machine. A run's aggregate rate is all packets over the slowest worker's
/// time. Efficiencies are filled in by the caller, which knows the one-core rate.
pub(crate) fn scaling(
    cfg: &SuiteConfig,
    class: TrafficClass,
    m: f64,
    cores: &[usize],
    tick: &mut dyn FnMut(f64),
) -> Vec<ScalingPoint> {
    let mix = FrameMix::Fixed(64);
    let max = cores.iter().copied().max().unwrap_or(1);
    let (rules, _) = class_pipeline(class, cfg.flows, mix);
    let store = store_with(rules);
    let packets = packets_at(cfg.packets, m, cfg.min_packets);
    let cpus = affinity::allowed_cpus();
    let pin = cfg.pin_threads && max <= cpus.len();
    let runs = cfg.runs;
    let settled = Barrier::new(max + 1);
    // One barrier per worker count: its workers and this thread.
    let gates: Vec<Barrier> = cores.iter().map(|&n| Barrier::new(n + 1)).collect();
    // dts[k][ci][r]: worker k's TSC cycles in run r with cores[ci] workers.
    let per_worker: Vec<(Vec<Vec<u64>>, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..max)
            .map(|k| {
                let store = store.clone();
                let (settled, gates) = (&settled, &gates);
                let cpu = cpus.get(k).copied();
                s.spawn(move || {
                    let pinned = pin
                        && cpu.is_some_and(|c| flowpath_base::cpu::pin_current_thread(c).is_ok());
                    let (_, source) = class_pipeline(class, cfg.flows, mix);
                    let mut w = worker(class, store, source, cfg, cfg.seed + k as u64);
                    settle(&mut w, cfg, m);
                    settled.wait();
                    let mut dts = vec![Vec::with_capacity(runs); cores.len()];
                    for _ in 0..runs {
                        for (ci, &n) in cores.iter().enumerate() {
                            if k < n {
                                gates[ci].wait(); // start together
                                dts[ci].push(w.timed(packets).0);
                                gates[ci].wait(); // all done
                            }
                        }
                    }
                    (dts, pinned)
                })
            })
            .collect();
        settled.wait();
        let settle = 0.3;
        tick(settle);
        for r in 0..runs {
            for (ci, gate) in gates.iter().enumerate() {
                gate.wait();
                gate.wait();
                let step = (r * cores.len() + ci + 1) as f64 / (runs * cores.len()) as f64;
                tick(settle + (1.0 - settle) * step);
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("scaling worker panicked"))
            .collect()
    });
    let pinned = |n: usize| pin && per_worker[..n].iter().all(|w| w.1);
    let dts: Vec<&Vec<Vec<u64>>> = per_worker.iter().map(|w| &w.0).collect();
    cores
        .iter()
        .enumerate()
        .map(|(ci, &n)| scaling_point(&dts, ci, n, runs, packets, pinned(n)))
        .collect()
}

/// The point for `n` workers (`cores[ci]`) from every worker's TSC cycles per run
/// (`dts[k][ci][r]`).
fn scaling_point(
    dts: &[&Vec<Vec<u64>>],
    ci: usize,
    n: usize,
    runs: usize,
    packets: u64,
    pinned: bool,
) -> ScalingPoint {
    let hz = tsc_hz();
    let dt = |k: usize, r: usize| dts[k][ci][r].max(1);
    let agg: Vec<f64> = (0..runs)
        .map(|r| {
            let slowest = (0..n).map(|k| dt(k, r)).max().unwrap_or(1);
            (packets * n as u64) as f64 * hz / slowest as f64 / 1e6
        })
        .collect();
    let cyc: Vec<f64> = (0..runs)
        .map(|r| {
            (0..n)
                .map(|k| dt(k, r) as f64 / packets as f64)
                .sum::<f64>()
                / n as f64
        })
        .collect();
    let aggregate_mpps = Spread::of(&agg);
    let median_run = agg
        .iter()
        .position(|&a| a == aggregate_mpps.median)
        .unwrap_or(0);
    ScalingPoint {
        cores: n,
        mpps_per_core: aggregate_mpps.median / n as f64,
        worker_mpps: (0..n)
            .map(|k| packets as f64 * hz / dt(k, median_run) as f64 / 1e6)
            .collect(),
        aggregate_mpps,
        cycles_per_packet: Spread::of(&cyc),
        efficiency: 0.0,
        pinned,
        packets_per_run_per_core: packets,
    }
}

/// The CPUs this process may use (Linux `sched_getaffinity`); pinning is the foundation's.
pub(super) mod affinity {
    /// CPUs this process may run on, in order.
    #[cfg(target_os = "linux")]
    pub fn allowed_cpus() -> Vec<usize> {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn allowed_cpus() -> Vec<usize> {
        (0..super::super::available_cores()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_length_scales_down_above_ten_percent() {
        assert_eq!(packets_at(1_000_000, 0.0, 10), 1_000_000);
        assert_eq!(packets_at(1_000_000, 0.1, 10), 1_000_000);
        assert_eq!(packets_at(1_000_000, 0.5, 10), 200_000);
        assert_eq!(packets_at(1_000_000, 1.0, 10), 100_000);
        assert_eq!(packets_at(1_000, 1.0, 500), 500);
    }
}
