//! Calibration: a profile for this machine from the real datapath — per traffic class the
//! hit and miss cost and the miss-rate curve, IPv4 curves at larger frames, the per-byte
//! slope from the bench suite's size sweep, and the suite's multi-core scaling efficiency.
//!
//! Two measurements: [`suite_config`] runs the part of the characterisation suite
//! (`flowpath_bench::suite`) that needs its machinery (the size sweep, and scaling over
//! cores with pinned workers: the profile's efficiencies are the suite's, one method);
//! [`calibration_pass`] lists the single-core points the
//! curves need, measured with [`crate::check::measure`] — the suite's procedure, with all
//! points' runs interleaved — so that `flowpath calibrate --check` can measure its check
//! workloads in the same interleaved pass and a shared machine's slow phases fall on the
//! calibration and the check alike.

use crate::check::{CheckWorkload, Measured};
use crate::profile::{ClassCosts, Classes, Cost, Curve, CurvePoint, MachineInfo, Profile};
use crate::report::thousands;
use crate::units::pct;
use flowpath_bench::suite::{SuiteConfig, SuiteResults, SIZE_SWEEP};
use flowpath_gen::{FrameMix, TrafficClass};

/// Miss rates the calibration measures (the curves the planner interpolates).
pub const MISS_RATES: [f64; 8] = [0.0, 0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.0];

/// Frame sizes of the IPv4 curves: 64 B (every class) and larger frames (IPv4).
pub const CURVE_MIXES: [FrameMix; 3] = [FrameMix::Fixed(64), FrameMix::Imix, FrameMix::Fixed(1518)];

/// The part of the suite a profile takes from it: the IPv4 size sweep (hits and misses
/// at 64, IMIX, 512, 1024, 1518 B) and scaling over 1 … all cores at 0 % new flows. The
/// class curves are measured by [`calibration_pass`] instead (the suite measures them at
/// 64 B only). Runs: 15 of 700,000 packets per point (`quick`: 5 of 200,000) — the
/// suite's time per point, in more and shorter runs, so that the median shrugs off more
/// of a shared machine's bursts.
pub fn suite_config(quick: bool) -> SuiteConfig {
    let base = if quick {
        SuiteConfig {
            runs: 5,
            packets: 200_000,
            min_packets: 20_000,
            ..SuiteConfig::quick()
        }
    } else {
        SuiteConfig {
            runs: 15,
            packets: 700_000,
            min_packets: 50_000,
            ..SuiteConfig::full()
        }
    };
    SuiteConfig {
        miss_rates: MISS_RATES.to_vec(),
        classes: Vec::new(),
        mixes: SIZE_SWEEP.to_vec(),
        scaling_miss_rates: vec![0.0],
        ..base
    }
}

/// The points of the curves, on one core: every class at its smallest frames (the "64"
/// setting: 64 B for IPv4, 66 B for IPv6, 96 B on the wire for VXLAN decap and encap) at
/// every one of [`MISS_RATES`]
/// (0 % is the hit cost, 100 % the miss cost), and IPv4 at the larger [`CURVE_MIXES`] at
/// the miss rates strictly between (on this datapath the cost between the ends depends on
/// the frames' memory footprint, while hits alone and misses alone are flat). Scaling is
/// the suite's experiment's (see `scaling`), not measured here.
pub fn calibration_pass() -> Vec<CheckWorkload> {
    let w = |class, mix, miss_rate| CheckWorkload {
        class,
        mix,
        miss_rate,
        cores: 1,
    };
    let mut v = Vec::new();
    for class in TrafficClass::ALL {
        for &m in &MISS_RATES {
            v.push(w(class, FrameMix::Fixed(64), m));
        }
    }
    for &mix in &CURVE_MIXES[1..] {
        for &m in MISS_RATES.iter().filter(|&&m| m > 0.0 && m < 1.0) {
            v.push(w(TrafficClass::Ipv4, mix, m));
        }
    }
    v
}

/// A least-squares line `y = intercept + slope · x` with the slope's standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    pub intercept: f64,
    pub slope: f64,
    pub slope_se: f64,
    pub n: usize,
}

impl Fit {
    /// The slope is positive and at least two standard errors from 0 (about 95 %).
    pub fn significant(&self) -> bool {
        self.slope > 0.0 && self.slope > 2.0 * self.slope_se
    }
}

/// Fit `pts`; None with fewer than three points or a single x.
pub fn fit_line(pts: &[(f64, f64)]) -> Option<Fit> {
    let n = pts.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ssr: f64 = pts
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let slope_se = (ssr / (nf - 2.0) / sxx).sqrt();
    Some(Fit {
        intercept,
        slope,
        slope_se,
        n,
    })
}

/// Per-byte slope (cycles per byte) of hits or misses from the size sweep, and a note
/// on what was kept and why.
fn per_byte(r: &SuiteResults, miss: bool) -> (f64, String) {
    let what = if miss { "miss" } else { "hit" };
    let pts: Vec<(f64, f64)> = r
        .sizes
        .iter()
        .flat_map(|s| {
            let p = if miss { &s.miss } else { &s.hit };
            p.cycles
                .samples
                .iter()
                .map(move |&c| (s.mean_frame_bytes, c))
        })
        .collect();
    match fit_line(&pts) {
        Some(f) if f.significant() => (
            f.slope,
            format!(
                "{what}: {:.3} ± {:.3} cycles/byte from {} samples over {} sizes; kept",
                f.slope,
                f.slope_se,
                f.n,
                r.sizes.len()
            ),
        ),
        Some(f) => (
            0.0,
            format!(
                "{what}: {:.3} ± {:.3} cycles/byte from {} samples over {} sizes, not distinguishable from flat (or negative): stored 0",
                f.slope,
                f.slope_se,
                f.n,
                r.sizes.len()
            ),
        ),
        None => (
            0.0,
            format!("{what}: the size sweep did not run or has too few points: stored 0"),
        ),
    }
}

/// `x` to a multiple of `step` (profiles keep what the measurements can tell).
pub(crate) fn round(x: f64, step: f64) -> f64 {
    let k = (1.0 / step).round();
    (x * k).round() / k
}

/// (miss rate, cycles per packet), sorted by miss rate.
type Points = Vec<(f64, f64)>;

/// Cycles per packet on one core of a measurement.
fn cycles_of(m: &Measured, tsc_hz: f64) -> f64 {
    tsc_hz * m.workload.cores.max(1) as f64 / (m.mpps.median * 1e6)
}

/// A class's single-core curve at one frame mix from the pass: (frame bytes,
/// [(miss rate, cycles)]) sorted by miss rate.
fn pass_curve(
    pass: &[Measured],
    class: TrafficClass,
    mix: FrameMix,
    tsc_hz: f64,
) -> Option<(f64, Vec<(f64, f64)>)> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    let mut bytes = 0.0;
    for x in pass {
        let w = x.workload;
        if w.class == class && w.mix == mix && w.cores == 1 && x.mpps.median > 0.0 {
            bytes = x.frame_bytes;
            pts.push((w.miss_rate, cycles_of(x, tsc_hz)));
        }
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts.dedup_by(|a, b| a.0 == b.0);
    (!pts.is_empty()).then_some((bytes, pts))
}

fn at_rate(pts: &[(f64, f64)], m: f64) -> Option<f64> {
    pts.iter().find(|p| (p.0 - m).abs() < 1e-12).map(|p| p.1)
}

/// A profile from the suite's size sweep and scaling (`r`) and the [`calibration_pass`]
/// (`pass`). A class's hit and miss costs are its 0 % and 100 % points less the IPv4
/// per-byte slope times its frame size; its first curve is its points in between. IPv4's
/// larger-frame curves are measured; IPv6's and VXLAN's are their own first curve plus
/// IPv4's measured difference to 64 B at the same miss rate. A class missing from the
/// pass falls back to the suite's class results in `r`, if any, else to IPv4's.
pub fn profile_from(r: &SuiteResults, pass: &[Measured], name: &str) -> Profile {
    let hz = r.meta.tsc_hz;
    let mut notes = Vec::new();
    let (hit_pb, hit_note) = per_byte(r, false);
    let (miss_pb, miss_note) = per_byte(r, true);
    let sizes: Vec<&str> = r.sizes.iter().map(|s| s.mix.as_str()).collect();
    notes.push(format!(
        "Per-byte costs from the suite's IPv4 size sweep at 0 % and 100 % new flows ({} B; least squares over every run): {hit_note}; {miss_note}.",
        sizes.join(", ")
    ));
    let base = base_curves(r, pass, hz, &mut notes);
    let ipv4_64 = base
        .iter()
        .find(|x| x.0 == TrafficClass::Ipv4)
        .map(|x| x.2.clone())
        .unwrap_or_default();
    let larger = larger_frames(pass, hz, &ipv4_64, &mut notes);
    let empty = || ClassCosts {
        hit: Cost::flat(1.0),
        miss: Cost::flat(1.0),
        curves: Vec::new(),
    };
    let mut classes = Classes {
        ipv4: empty(),
        ipv6: empty(),
        vxlan: empty(),
        vxlan_encap: empty(),
    };
    for (class, fb, pts) in &base {
        let pb = (hit_pb, miss_pb);
        *classes.get_mut(*class) = class_costs(*class, *fb, pts, &larger, pb, &mut notes);
    }
    notes.push("hit and miss: the median cycles per packet (whole loop: rx from memory, parse, caches, slow path, actions, tx) with 0 % and 100 % new flows at each class's smallest frame (IPv4 64 B, IPv6 66 B, VXLAN 96 B on the wire: the least their headers allow), minus per_byte_cycles times that size. vxlan is decapsulation (VXLAN over IPv4 in on the underlay port, through a tunnel port, in_port=<tunnel> rules); vxlan_encap is encapsulation (plain IPv4 in, output to a tunnel port with a static underlay hop): its frame size is the VXLAN frame it sends, 50 B more than the frame it receives.".into());
    let (effs, scaling_note) = scaling::scaling(r);
    notes.push(scaling_note);
    let conntrack = scaling::conntrack(r, &mut notes);
    let m = &r.meta;
    notes.push(format!(
        "{} runs per point (median), {} packets per run (fewer above 10 % new flows), seed {}; load average {:.2} before the suite, {:.2} after{}.",
        m.config.runs,
        thousands(m.config.packets as f64),
        m.seed,
        m.load_before,
        m.load_after,
        if m.load_before > m.machine.cores as f64 * 0.5 {
            " (a busy machine: expect noisier numbers)"
        } else {
            ""
        }
    ));
    Profile {
        name: name.to_string(),
        source: format!(
            "Calibrated on this machine by `flowpath calibrate`: the real datapath on generated frames from memory, timed with the TSC (the curves and scaling measured as the bench suite measures its points, all points interleaved; the size sweep by the suite itself), {} ({} CPUs), {}, revision {}.",
            m.machine.cpu, m.machine.cores, m.started_utc, m.machine.git_rev
        ),
        notes,
        tsc_hz: m.tsc_hz.round(),
        scaling: effs.iter().map(|&e| round(e, 0.001)).collect(),
        machine: Some(MachineInfo {
            cpu: m.machine.cpu.clone(),
            cores: m.machine.cores as u64,
            kernel: m.machine.kernel.clone(),
            date: m.started_utc.clone(),
            git_rev: m.machine.git_rev.clone(),
            command: m.machine.command.clone(),
            load_before: m.load_before,
            load_after: m.load_after,
        }),
        classes,
        bands: Some(scaling::bands(r, pass)),
        conntrack,
    }
}

/// Per class, its frame size and its curve (including the 0 % and 100 % ends): from the
/// calibration pass, else the suite's class results, else VXLAN decap's (for encap, if
/// there), else IPv4's.
fn base_curves(
    r: &SuiteResults,
    pass: &[Measured],
    hz: f64,
    notes: &mut Vec<String>,
) -> Vec<(TrafficClass, f64, Points)> {
    let mut base: Vec<(TrafficClass, f64, Points)> = Vec::new();
    for class in TrafficClass::ALL {
        let from_pass = pass_curve(pass, class, FrameMix::Fixed(64), hz)
            .filter(|(_, p)| at_rate(p, 0.0).is_some() && at_rate(p, 1.0).is_some());
        let from_suite = || {
            r.class(class).map(|c| {
                let pts = c
                    .curve
                    .iter()
                    .map(|p| (p.miss_rate, p.measured.cycles.median))
                    .collect();
                (c.frame_bytes, pts)
            })
        };
        match from_pass.or_else(from_suite) {
            Some((b, p)) => base.push((class, b, p)),
            None => {
                let decap = (class == TrafficClass::VxlanEncap)
                    .then(|| base.iter().find(|x| x.0 == TrafficClass::Vxlan).cloned())
                    .flatten();
                let ipv4 = || base.iter().find(|x| x.0 == TrafficClass::Ipv4).cloned();
                if let Some(stand_in) = decap.or_else(ipv4) {
                    notes.push(format!(
                        "{}: not measured; the {} costs are used.",
                        class.name(),
                        if stand_in.0 == TrafficClass::Vxlan {
                            "vxlan (decap)"
                        } else {
                            "IPv4"
                        }
                    ));
                    base.push((class, stand_in.1, stand_in.2));
                }
            }
        }
    }
    base
}

/// IPv4's larger-frame curves as differences to its 64 B curve at the same miss rates,
/// with notes on how much frames matter.
fn larger_frames(
    pass: &[Measured],
    hz: f64,
    ipv4_64: &Points,
    notes: &mut Vec<String>,
) -> Vec<(f64, Points)> {
    let mut larger: Vec<(f64, Points)> = Vec::new();
    let mut effects = Vec::new();
    for &mix in &CURVE_MIXES[1..] {
        let Some((bytes, pts)) = pass_curve(pass, TrafficClass::Ipv4, mix, hz) else {
            continue;
        };
        let deltas: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.0 > 0.0 && p.0 < 1.0)
            .filter_map(|&(m, c)| Some((m, c - at_rate(ipv4_64, m)?)))
            .collect();
        if deltas.is_empty() {
            continue;
        }
        let rel: Vec<String> = deltas
            .iter()
            .map(|&(m, d)| {
                let b = at_rate(ipv4_64, m).unwrap_or(f64::NAN);
                format!("{} {:+.0} ({:+.0} %)", pct(m), d, d / b * 100.0)
            })
            .collect();
        effects.push(format!(
            "IPv4 {} ({bytes:.1} B mean): {}",
            mix.label(),
            rel.join(", ")
        ));
        larger.push((bytes, deltas));
    }
    if !effects.is_empty() {
        notes.push(format!(
        "Between the ends the cost depends on the frames (cycles per packet against 64 B, by miss rate; hits alone and misses alone are nearly flat): {}. Likely their memory footprint (the generator's buffer slots are as large as the largest frame: 256 B for 64-byte frames, 1,728 B for IMIX and 1518 B) competing with the slow path for the caches; so the profile keeps a curve per frame size.",
        effects.join("; ")
    ));
    }
    if !larger.is_empty() {
        notes.push("Frame sizes are swept for IPv4 only: IPv6 and the VXLAN classes use IPv4's per-byte slopes, and their larger-frame curves are their own smallest-frame curve plus IPv4's measured difference at the same miss rate.".into());
    } else {
        notes.push(
            "Frame sizes are swept for IPv4 only: IPv6 and the VXLAN classes use IPv4's per-byte slopes."
                .into(),
        );
    }
    larger
}

/// One class's costs: hit and miss less the per-byte share of its frame size, its
/// measured curve between the ends, and the larger-frame curves derived from IPv4's.
fn class_costs(
    class: TrafficClass,
    fb: f64,
    pts: &Points,
    larger: &[(f64, Points)],
    (hit_pb, miss_pb): (f64, f64),
    notes: &mut Vec<String>,
) -> ClassCosts {
    let hit = at_rate(pts, 0.0).unwrap_or(1.0);
    let miss = at_rate(pts, 1.0).unwrap_or(hit);
    let at = |cycles: f64, pb: f64| {
        let pb = round(pb, 0.001);
        Cost {
            fixed_cycles: round((cycles - pb * fb).max(0.0), 0.1),
            per_byte_cycles: pb,
        }
    };
    let inner: Vec<CurvePoint> = pts
        .iter()
        .filter(|p| p.0 > 0.0 && p.0 < 1.0)
        .map(|&(miss_rate, cycles)| CurvePoint {
            miss_rate,
            cycles: round(cycles, 0.1),
        })
        .collect();
    if let Some(c10) = at_rate(pts, 0.1) {
        let line = 0.9 * hit + 0.1 * miss;
        notes.push(format!(
            "{}: hit {} and miss {} cycles ({:.1}x) at {fb:.0} B; at 10 % new flows {} cycles per packet where the two-cost line (1-m)*hit + m*miss gives {} ({:+.0} %): new flows also displace established flows from the exact-match cache, so the planner interpolates the measured curves.",
            class.name(),
            thousands(hit),
            thousands(miss),
            miss / hit,
            thousands(c10),
            thousands(line),
            (c10 / line - 1.0) * 100.0
        ));
    }
    let mut curves = Vec::new();
    if !inner.is_empty() {
        curves.push(Curve {
            frame_bytes: round(fb, 0.01),
            points: inner.clone(),
        });
        for (bytes, deltas) in larger {
            if *bytes <= fb {
                continue;
            }
            let shifted: Vec<CurvePoint> = inner
                .iter()
                .filter_map(|p| {
                    Some(CurvePoint {
                        miss_rate: p.miss_rate,
                        cycles: round((p.cycles + at_rate(deltas, p.miss_rate)?).max(1.0), 0.1),
                    })
                })
                .collect();
            if !shifted.is_empty() {
                curves.push(Curve {
                    frame_bytes: round(*bytes, 0.01),
                    points: shifted,
                });
            }
        }
    }
    ClassCosts {
        hit: at(hit, hit_pb),
        miss: at(miss, miss_pb),
        curves,
    }
}

mod scaling;

#[cfg(test)]
mod tests;
