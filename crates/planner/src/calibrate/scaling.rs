//! Multi-core scaling for a profile: the efficiencies from the suite's scaling
//! experiment, the run-to-run bands of the calibration's points, and connection
//! tracking's costs from the suite's run of the bench's ct cases.
//!
//! One method measures scaling, in the suite and here: N workers, each on a thread pinned
//! to its own CPU with its own datapath, run together; the aggregate of a run is all
//! packets over the slowest worker's time; the one-core rate it is divided by is worker
//! 0's own runs alone, in the same experiment. The efficiency is then what adding cores
//! costs, and not also the difference between two datapath instances (on the machines
//! this runs on an instance runs at one of two speeds throughout, and the slowest of N
//! workers draws the slow one more often than a single instance does) nor the scheduler
//! placing unpinned threads on one CPU for a while.

use crate::interval::band_of;
use crate::plan::interpolate;
use crate::profile::{Band, CtCosts};
use crate::units::pct;
use flowpath_bench::suite::SuiteResults;
use flowpath_gen::TrafficClass;

use super::round;
use crate::check::Measured;

/// Efficiencies for 1 … the most cores in `agg` ((cores, aggregate Mpps), one core
/// included): `agg(n) / (n · agg(1))`, capped at 1.0 (above is noise, and an optimistic
/// plan is the wrong way to be off), gaps between measured counts interpolated. Also a
/// description of the measurement and of what was capped.
fn efficiencies(agg: &[(usize, f64)]) -> Option<(Vec<f64>, String)> {
    let mut agg = agg.to_vec();
    agg.sort_by_key(|p| p.0);
    let one = agg.iter().find(|p| p.0 == 1)?.1;
    if one <= 0.0 || agg.len() < 2 {
        return None;
    }
    let mut pts: Vec<(f64, f64)> = agg
        .iter()
        .map(|&(n, a)| (n as f64, a / (n as f64 * one)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let max = pts.last().map_or(1.0, |p| p.0) as usize;
    let mut effs = vec![1.0];
    let mut capped = Vec::new();
    for n in 2..=max {
        let e = interpolate(&pts, n as f64);
        if e > 1.0 {
            capped.push(format!("{n} cores {}", pct(e)));
        }
        effs.push(e.min(1.0));
    }
    let mut desc: Vec<String> = pts
        .iter()
        .zip(&agg)
        .map(|(p, a)| {
            format!(
                "{} core{} {:.2} Mpps ({})",
                a.0,
                if a.0 == 1 { "" } else { "s" },
                a.1,
                pct(p.1)
            )
        })
        .collect();
    if !capped.is_empty() {
        desc.push(format!(
            "stored at most 100 % (measured {}: more than linear is noise)",
            capped.join(", ")
        ));
    }
    Some((effs, desc.join(", ")))
}

/// The scaling efficiencies from the suite's scaling experiment (the one at the lowest
/// miss rate), and a note on how they were measured.
pub(super) fn scaling(r: &SuiteResults) -> (Vec<f64>, String) {
    let suite = r
        .scaling
        .iter()
        .filter(|s| !s.points.is_empty())
        .min_by(|a, b| a.miss_rate.total_cmp(&b.miss_rate));
    let from_suite: Vec<(usize, f64)> = suite
        .map(|s| {
            s.points
                .iter()
                .map(|p| (p.cores, p.aggregate_mpps.median))
                .collect()
        })
        .unwrap_or_default();
    let pinned = suite.is_some_and(|s| s.points.iter().all(|p| p.pinned));
    match efficiencies(&from_suite) {
        Some((e, d)) => (
            e,
            format!(
                "scaling: the suite's experiment, IPv4 64 B at {} new flows, N workers each with its own datapath{}, run together; each count against worker 0's own one-core runs in the same experiment: {d}.",
                pct(suite.map_or(0.0, |s| s.miss_rate)),
                if pinned { ", pinned to CPUs" } else { " (not pinned)" }
            ),
        ),
        None => (
            vec![1.0],
            "scaling: not measured; stored [1.0], so the planner extrapolates linear scaling and says so.".into(),
        ),
    }
}

/// Every calibration point's band: the pass's one-core points (class, frame, miss rate)
/// and the suite's scaling points on several cores (their aggregate), each as its runs'
/// min and max over the median.
pub(super) fn bands(r: &SuiteResults, pass: &[Measured]) -> Vec<Band> {
    let mut out: Vec<Band> = pass
        .iter()
        .filter(|m| m.workload.cores == 1)
        .filter_map(|m| {
            let (low, high) = band_of(m.mpps.median, m.mpps.min, m.mpps.max)?;
            Some(Band {
                class: m.workload.class,
                frame_bytes: round(m.frame_bytes, 0.01),
                miss_rate: m.workload.miss_rate,
                cores: 1,
                low: round(low, 0.0001),
                high: round(high, 0.0001),
            })
        })
        .collect();
    if let Some(s) = r
        .scaling
        .iter()
        .filter(|s| !s.points.is_empty())
        .min_by(|a, b| a.miss_rate.total_cmp(&b.miss_rate))
    {
        for p in s.points.iter().filter(|p| p.cores > 1) {
            let a = &p.aggregate_mpps;
            if let Some((low, high)) = band_of(a.median, a.min, a.max) {
                out.push(Band {
                    class: TrafficClass::Ipv4,
                    frame_bytes: 64.0,
                    miss_rate: s.miss_rate,
                    cores: p.cores as u64,
                    low: round(low, 0.0001),
                    high: round(high, 0.0001),
                });
            }
        }
    }
    out
}

/// Connection tracking's costs from the suite's run of the ct cases, and a note on where
/// they come from or why there are none.
pub(super) fn conntrack(r: &SuiteResults, notes: &mut Vec<String>) -> Option<CtCosts> {
    match &r.conntrack {
        Some(m) => {
            notes.push(format!(
                "conntrack: {:.0} cycles per new connection, {:.0} per established packet{}, on one core ({}).",
                m.new_connection_cycles,
                m.established_packet_cycles,
                m.syn_cycles
                    .map_or(String::new(), |c| format!(", {c:.0} per SYN of a flood")),
                m.notes.join("; ")
            ));
            Some(CtCosts {
                new_connection_cycles: round(m.new_connection_cycles, 0.1),
                established_packet_cycles: round(m.established_packet_cycles, 0.1),
                syn_cycles: m.syn_cycles.map(|c| round(c, 0.1)),
            })
        }
        None => {
            notes.push("conntrack: not calibrated (this build's bench has no ct_new and ct_established cases to run): `flowpath plan --new-conns-per-sec/--established-pps` refuses with this profile.".into());
            None
        }
    }
}
