//! Prediction against measurement: for a few workloads (traffic class, frame size, miss
//! rate, cores) measure what the real datapath forwards on this machine and compare it
//! with what the planner predicts from a profile calibrated in the same run.
//!
//! Each workload is measured exactly as the suite measures a point (see
//! `flowpath_bench::suite`): the class's 3-table, 1,000-rule pipeline and generated
//! frames from memory, a fresh datapath per worker whose megaflow cache is first filled
//! with new flows (so every install evicts, the steady state of a sustained miss rate),
//! a warm-up at the workload's miss rate, then `runs` timed runs with the TSC, the runs
//! of all workloads interleaved so that a slow phase of a shared machine spreads over all
//! of them. A run's rate with N workers is all packets over the slowest worker's time;
//! as in the suite's scaling experiment, worker k runs on a thread pinned to the k-th CPU
//! the process may use (when the configuration pins and there are enough CPUs), so the
//! check's multi-core points and the profile's scaling efficiency are one method.
//!
//! The prediction is an interval ([`crate::interval`]): the point prediction widened by
//! the calibration's own run-to-run spread; a workload passes when its measured median
//! lies inside.

use crate::interval::{band_at, judge, Judged};
use crate::plan::solve;
use crate::profile::Profile;
use crate::units::mean_frame_bytes;
use flowpath_base::clock::tsc_hz;
use flowpath_base::median_by_key;
use flowpath_bench::runner::packets_at;
use flowpath_bench::suite::{Spread, SuiteConfig};
use flowpath_bench::workload::{class_pipeline, class_tunnels};
use flowpath_bench::Harness;
use flowpath_datapath::DatapathConfig;
use flowpath_gen::{FrameMix, TrafficClass};
use flowpath_pipeline::{Backend, RuleStore};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Barrier};

/// One workload to measure and predict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckWorkload {
    pub class: TrafficClass,
    pub mix: FrameMix,
    pub miss_rate: f64,
    /// Worker cores (each its own datapath and traffic, one shared rule store).
    pub cores: usize,
}

impl CheckWorkload {
    pub fn label(&self) -> String {
        format!(
            "{} {} {} new{}",
            self.class.name(),
            match self.mix {
                FrameMix::Imix => "IMIX".to_string(),
                FrameMix::Fixed(n) => format!("{n} B"),
            },
            crate::units::pct(self.miss_rate),
            if self.cores > 1 {
                format!(", {} cores", self.cores)
            } else {
                String::new()
            }
        )
    }
}

/// The default workloads: different classes, sizes and miss rates, the miss rates off
/// the calibration's grid (1, 2, 5, 10, 20, 50 %) and two sizes it does not measure
/// (512 B; IPv6 only at its smallest frames), so that the planner interpolates rather
/// than reads back; plus one on two cores where the machine has them.
pub fn default_workloads(available_cores: usize) -> Vec<CheckWorkload> {
    let w = |class, mix, miss_rate, cores| CheckWorkload {
        class,
        mix,
        miss_rate,
        cores,
    };
    let mut v = vec![
        w(TrafficClass::Ipv4, FrameMix::Fixed(64), 0.0, 1),
        w(TrafficClass::Ipv4, FrameMix::Imix, 0.03, 1),
        w(TrafficClass::Ipv4, FrameMix::Fixed(1518), 0.15, 1),
        w(TrafficClass::Ipv6, FrameMix::Fixed(64), 0.07, 1),
        w(TrafficClass::Vxlan, FrameMix::Fixed(512), 0.30, 1),
        w(TrafficClass::VxlanEncap, FrameMix::Imix, 0.05, 1),
    ];
    if available_cores >= 2 {
        v.push(w(TrafficClass::Ipv4, FrameMix::Fixed(64), 0.01, 2));
    }
    v
}

/// What the datapath forwarded.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measured {
    pub workload: CheckWorkload,
    /// Mean frame size of the generated frames, FCS included (the VXLAN classes: the
    /// outer frame, received for decap and sent for encap).
    pub frame_bytes: f64,
    /// Aggregate Mpps per run (all workers).
    pub mpps: Spread,
    /// Share of packets the slow path classified (the observed miss rate), median run.
    pub observed_miss_rate: f64,
    pub packets_per_run: u64,
}

struct Bench {
    w: CheckWorkload,
    workers: Vec<Harness>,
    frame_bytes: f64,
    packets: u64,
    runs: Vec<(f64, f64)>,
}

fn set_up(cfg: &SuiteConfig, w: CheckWorkload) -> Bench {
    let (rules, _) = class_pipeline(w.class, cfg.flows, w.mix);
    let store = Arc::new(RuleStore::new(Backend::TupleSpace));
    store.add(rules).expect("the suite's rules are valid");
    let prefill = cfg.megaflow_max as u64 + 4 * cfg.flows as u64;
    let warm = packets_at(cfg.warm_packets, w.miss_rate, cfg.min_packets);
    let mut frame_bytes = mean_frame_bytes(w.mix);
    let workers = (0..w.cores.max(1))
        .map(|k| {
            let (_, source) = class_pipeline(w.class, cfg.flows, w.mix);
            let dp_cfg = DatapathConfig {
                emc_insert_inv_prob: cfg.emc_insert_inv_prob,
                megaflow_max: cfg.megaflow_max,
                // A cost measurement: every miss classified (no miss budget).
                miss: flowpath_datapath::MissLimits::unbudgeted(),
                tunnels: class_tunnels(w.class),
                ..DatapathConfig::default()
            };
            let mut h = Harness::new(store.clone(), dp_cfg, source.with_seed(cfg.seed + k as u64));
            // The VXLAN classes: the VXLAN frame on the wire (encap: what leaves).
            frame_bytes = h.frame_bytes() + w.class.wire_extra_bytes();
            h.settle(prefill, w.miss_rate, warm);
            h
        })
        .collect();
    Bench {
        w,
        workers,
        frame_bytes,
        packets: packets_at(cfg.packets, w.miss_rate, cfg.min_packets),
        runs: Vec::new(),
    }
}

/// A timed run's cycles and slow-path classifications.
fn upcalls_of((dt, st): (u64, flowpath_datapath::DatapathStats)) -> (u64, u64) {
    (dt, st.upcalls)
}

/// One timed run of every worker of `b` at once: (aggregate Mpps, observed miss rate).
/// With several workers, worker k's thread is pinned to `cpus[k]` when `cpus` is given.
fn run_once(b: &mut Bench, hz: f64, cpus: Option<&[usize]>) -> (f64, f64) {
    let packets = b.packets;
    let n = b.workers.len();
    let results: Vec<(u64, u64)> = if n == 1 {
        vec![upcalls_of(b.workers[0].timed(packets))]
    } else {
        let start = Barrier::new(n);
        std::thread::scope(|s| {
            let handles: Vec<_> = b
                .workers
                .iter_mut()
                .enumerate()
                .map(|(k, wk)| {
                    let start = &start;
                    let cpu = cpus.and_then(|c| c.get(k).copied());
                    s.spawn(move || {
                        if let Some(c) = cpu {
                            // Unpinned is still a measurement: the run goes on.
                            let _ = flowpath_base::cpu::pin_current_thread(c);
                        }
                        start.wait();
                        upcalls_of(wk.timed(packets))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("check worker panicked"))
                .collect()
        })
    };
    let slowest = results.iter().map(|r| r.0).max().unwrap_or(1);
    let upcalls: u64 = results.iter().map(|r| r.1).sum();
    (
        (packets * n as u64) as f64 * hz / slowest as f64 / 1e6,
        upcalls as f64 / (packets * n as u64) as f64,
    )
}

/// Measure every workload with `cfg`'s flows, cache sizes, packets and runs; `progress`
/// is told what runs.
pub fn measure(
    cfg: &SuiteConfig,
    workloads: &[CheckWorkload],
    mut progress: impl FnMut(&str),
) -> Vec<Measured> {
    let hz = tsc_hz();
    progress(&format!(
        "setting up {} points (a datapath each, its megaflow cache filled)",
        workloads.len()
    ));
    let mut benches: Vec<Bench> = workloads.iter().map(|&w| set_up(cfg, w)).collect();
    let cpus = flowpath_bench::suite::allowed_cpus();
    let most = workloads.iter().map(|w| w.cores).max().unwrap_or(1);
    let pin = (cfg.pin_threads && most <= cpus.len()).then_some(cpus.as_slice());
    for r in 0..cfg.runs.max(1) {
        progress(&format!(
            "timed run {}/{} of every point",
            r + 1,
            cfg.runs.max(1)
        ));
        for b in &mut benches {
            let x = run_once(b, hz, pin);
            b.runs.push(x);
        }
    }
    benches
        .into_iter()
        .map(|b| {
            let mpps: Vec<f64> = b.runs.iter().map(|r| r.0).collect();
            let spread = Spread::of(&mpps);
            let observed = median_by_key(&b.runs, |r| r.0).map_or(0.0, |r| r.1);
            Measured {
                workload: b.w,
                frame_bytes: b.frame_bytes,
                mpps: spread,
                observed_miss_rate: observed,
                packets_per_run: b.packets,
            }
        })
        .collect()
}

/// One line of the comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckRow {
    pub workload: String,
    pub class: TrafficClass,
    pub size: String,
    pub frame_bytes: f64,
    pub miss_rate: f64,
    pub cores: usize,
    /// The planner: `eff(cores) · tsc_hz / cycles per packet`, in Mpps per core.
    pub predicted_mpps_per_core: f64,
    /// The same with the two-cost line `(1 − m)·hit + m·miss` instead of the curve.
    pub two_cost_mpps_per_core: f64,
    /// The datapath: median aggregate Mpps over the cores, and the runs' min and max.
    pub measured_mpps_per_core: f64,
    pub measured_min: f64,
    pub measured_max: f64,
    /// `predicted / measured − 1`.
    pub error: f64,
    pub two_cost_error: f64,
    /// Cores the planner computes for the measured aggregate rate: exactly (a fraction)
    /// and as it would answer (whole cores).
    pub planner_cores_exact: f64,
    pub planner_cores: u64,
    /// The predicted interval (Mpps per core) from the profile's bands and whether the
    /// measured median lies inside; absent when the profile has no bands.
    #[serde(default)]
    pub interval: Option<Judged>,
}

/// Compare measurements with the planner's predictions from `profile`.
pub fn compare(profile: &Profile, measured: &[Measured]) -> Result<Vec<CheckRow>, String> {
    measured
        .iter()
        .map(|m| {
            let w = m.workload;
            let costs = profile.classes.get(w.class);
            let cycles = costs.cycles(w.miss_rate, m.frame_bytes).total();
            let line = costs.cycles_with(w.miss_rate, m.frame_bytes, false).total();
            let (eff, _) = profile.efficiency(w.cores as u64);
            let per_core = |c: f64| eff * profile.tsc_hz / c / 1e6;
            let cores = w.cores.max(1) as f64;
            let measured_per_core = m.mpps.median / cores;
            let demand = m.mpps.median * 1e6 * cycles;
            let interval = profile
                .bands
                .as_deref()
                .and_then(|b| band_at(b, w.class, m.frame_bytes, w.miss_rate, w.cores as u64))
                .map(|band| judge(per_core(cycles), band, measured_per_core));
            Ok(CheckRow {
                workload: w.label(),
                class: w.class,
                size: w.mix.label(),
                frame_bytes: m.frame_bytes,
                miss_rate: w.miss_rate,
                cores: w.cores,
                predicted_mpps_per_core: per_core(cycles),
                two_cost_mpps_per_core: per_core(line),
                measured_mpps_per_core: measured_per_core,
                measured_min: m.mpps.min / cores,
                measured_max: m.mpps.max / cores,
                error: per_core(cycles) / measured_per_core - 1.0,
                two_cost_error: per_core(line) / measured_per_core - 1.0,
                planner_cores_exact: demand / (profile.tsc_hz * eff),
                planner_cores: solve(profile, demand, 1.0)?.cores,
                interval,
            })
        })
        .collect()
}

/// The interval column, `low–high (width W %)`, and the verdict.
fn interval_cells(r: &CheckRow) -> (String, String) {
    match r.interval {
        Some(j) => (
            format!(
                "{:.2}–{:.2} (width {:.0} %)",
                j.low,
                j.high,
                j.width * 100.0
            ),
            if j.inside { "inside" } else { "OUTSIDE" }.to_string(),
        ),
        None => ("-".into(), "no bands in profile".into()),
    }
}

/// The comparison as a Markdown table (for the terminal and docs/planner.md).
pub fn table(rows: &[CheckRow]) -> String {
    let mut s = String::from(
        "| workload | frame bytes | predicted Mpps/core: point, interval (width) | measured Mpps/core (min–max) | verdict | point error | two-cost line: Mpps/core, error | planner's cores for the measured rate: exact → whole |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (iv, verdict) = interval_cells(r);
        s.push_str(&format!(
            "| {} | {:.1} | {:.2}, {iv} | {:.2} ({:.2}–{:.2}) | {verdict} | {:+.1} % | {:.2}, {:+.1} % | {:.2} → {} (ran on {}) |\n",
            r.workload,
            r.frame_bytes,
            r.predicted_mpps_per_core,
            r.measured_mpps_per_core,
            r.measured_min,
            r.measured_max,
            r.error * 100.0,
            r.two_cost_mpps_per_core,
            r.two_cost_error * 100.0,
            r.planner_cores_exact,
            r.planner_cores,
            r.cores
        ));
    }
    s
}

/// One verdict line for a group of rows: how many medians fell inside their interval,
/// the widest and median interval width, and the largest point error beside them.
fn group_line(what: &str, rows: &[&CheckRow]) -> Option<String> {
    let worst = rows
        .iter()
        .map(|r| r.error.abs())
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))?;
    let worst_line = rows
        .iter()
        .map(|r| r.two_cost_error.abs())
        .fold(0.0f64, f64::max);
    let judged: Vec<Judged> = rows.iter().filter_map(|r| r.interval).collect();
    let head = if judged.is_empty() {
        format!("{what}: no interval (the profile keeps no run spread: calibrate again)")
    } else {
        let mut widths: Vec<f64> = judged.iter().map(|j| j.width).collect();
        widths.sort_by(f64::total_cmp);
        format!(
            "{what}: {} of {} measured medians inside the predicted interval (interval width: median {:.0} %, widest {:.0} %)",
            judged.iter().filter(|j| j.inside).count(),
            judged.len(),
            widths[widths.len() / 2] * 100.0,
            widths[widths.len() - 1] * 100.0
        )
    };
    Some(format!(
        "{head}; largest point error {:.1} % (the two-cost line alone: {:.1} %)",
        worst * 100.0,
        worst_line * 100.0
    ))
}

/// A few lines under the table: the interval verdicts, single-core and multi-core apart
/// (the latter also carry the profile's scaling efficiency).
pub fn verdict(rows: &[CheckRow], profile: &Profile) -> String {
    let one: Vec<&CheckRow> = rows.iter().filter(|r| r.cores <= 1).collect();
    let many: Vec<&CheckRow> = rows.iter().filter(|r| r.cores > 1).collect();
    let mut s = String::new();
    if let Some(l) = group_line(&format!("one core, {} workloads", one.len()), &one) {
        s.push_str(&l);
        s.push('\n');
    }
    let effs: Vec<String> = profile
        .scaling
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, e)| format!("{} cores {}", i + 1, crate::units::pct(*e)))
        .collect();
    if let Some(l) = group_line(
        &format!(
            "several cores (calibrated scaling efficiency: {})",
            effs.join(", ")
        ),
        &many,
    ) {
        s.push_str(&l);
        s.push('\n');
    }
    s
}
