//! Calibration: a profile from synthetic measurements (exact numbers), and a tiny run on
//! the real datapath (shape only: nothing here asserts on time or speed).

use flowpath_bench::runner::StageShare;
use flowpath_bench::suite::{
    self, Meta, Point, ScalingPoint, ScalingSeries, SizePoint, Spread, SuiteConfig, SuiteResults,
};
use flowpath_bench::Machine;
use flowpath_gen::{FrameMix, TrafficClass};
use flowpath_planner::calibrate::{calibration_pass, profile_from, suite_config, MISS_RATES};
use flowpath_planner::check::{self, CheckWorkload, Measured};
use flowpath_planner::profile::{parse_toml, to_toml};

const HZ: f64 = 2.5e9;

fn point(m: f64, cycles: &[f64]) -> Point {
    let cycles = Spread::of(cycles);
    Point {
        miss_rate: m,
        mpps: HZ / cycles.median / 1e6,
        cycles,
        packets_per_run: 1000,
        frame_bytes: 64.0,
        emc_hit_share: 1.0 - m,
        megaflow_hit_share: 0.0,
        upcall_share: m,
        stage_cycles: StageShare::default(),
        megaflows: 0,
    }
}

/// Suite results with a size sweep whose costs are `hit(b)`, `miss(b)` (three runs each,
/// ±1 cycle) and a scaling series.
fn suite_results(
    hit: impl Fn(f64) -> f64,
    miss: impl Fn(f64) -> f64,
    scaling: &[(usize, f64)],
) -> SuiteResults {
    let sizes = [
        ("64", 64.0),
        ("imix", 353.8),
        ("512", 512.0),
        ("1518", 1518.0),
    ]
    .iter()
    .map(|&(mix, b)| {
        let (h, m) = (hit(b), miss(b));
        SizePoint {
            mix: mix.into(),
            mean_frame_bytes: b,
            hit: point(0.0, &[h - 1.0, h, h + 1.0]),
            miss: point(1.0, &[m - 1.0, m, m + 1.0]),
            hit_line_gbps: 0.0,
        }
    })
    .collect();
    let points = scaling
        .iter()
        .map(|&(cores, agg)| ScalingPoint {
            cores,
            aggregate_mpps: Spread::of(&[agg]),
            mpps_per_core: agg / cores as f64,
            cycles_per_packet: Spread::of(&[100.0]),
            efficiency: 0.0,
            worker_mpps: vec![agg / cores as f64; cores],
            pinned: true,
            packets_per_run_per_core: 1000,
        })
        .collect();
    SuiteResults {
        schema: SuiteResults::SCHEMA,
        meta: Meta {
            machine: Machine {
                cpu: "Test CPU".into(),
                cores: 2,
                tsc_ghz: HZ / 1e9,
                kernel: "6.0".into(),
                git_rev: "abc1234".into(),
                command: "flowpath calibrate".into(),
            },
            tsc_hz: HZ,
            seed: 1,
            quick: true,
            started_unix: 0,
            started_utc: "1970-01-01 00:00:00 UTC".into(),
            wall_seconds: 1.0,
            load_before: 0.1,
            load_after: 0.2,
            config: suite_config(true),
        },
        scaling: vec![ScalingSeries {
            class: TrafficClass::Ipv4,
            miss_rate: 0.0,
            points,
        }],
        sizes,
        classes: Vec::new(),
        attacks: Vec::new(),
        conntrack: None,
        findings: Vec::new(),
    }
}

/// A pass measurement of `cycles` per packet (per core) on `w.cores` cores.
fn measured(w: CheckWorkload, frame_bytes: f64, cycles: f64) -> Measured {
    let mpps = HZ / cycles / 1e6 * w.cores as f64;
    Measured {
        workload: w,
        frame_bytes,
        mpps: Spread::of(&[mpps * 0.99, mpps, mpps * 1.01]),
        observed_miss_rate: w.miss_rate,
        packets_per_run: 1000,
    }
}

/// The pass with IPv4 64 B costs `c(m)`, IPv6 = IPv4 + 10, VXLAN decap = IPv4 + 50,
/// VXLAN encap = IPv4 + 40; larger
/// IPv4 frames cost `extra(m)` more (not at the ends); 2 cores reach `eff2` of linear.
fn pass(c: impl Fn(f64) -> f64, extra: impl Fn(f64) -> f64, eff2: f64) -> Vec<Measured> {
    calibration_pass()
        .into_iter()
        .map(|w| {
            let bytes = match (w.class, w.mix) {
                (TrafficClass::Ipv6, _) => 66.0,
                (TrafficClass::Vxlan | TrafficClass::VxlanEncap, _) => 96.0,
                (_, FrameMix::Imix) => 353.83,
                (_, FrameMix::Fixed(n)) => n as f64,
            };
            let m = w.miss_rate;
            let mut cycles = c(m)
                + match w.class {
                    TrafficClass::Ipv4 => 0.0,
                    TrafficClass::Ipv6 => 10.0,
                    TrafficClass::Vxlan => 50.0,
                    TrafficClass::VxlanEncap => 40.0,
                };
            if w.mix != FrameMix::Fixed(64) {
                cycles += extra(m);
            }
            if w.cores == 2 {
                cycles /= eff2;
            }
            measured(w, bytes, cycles)
        })
        .collect()
}

/// A curve that bends above the two-cost line 100 + 1400·m.
fn bent(m: f64) -> f64 {
    100.0 + 1400.0 * m + 600.0 * m * (1.0 - m)
}

#[test]
fn the_pass_covers_every_class_rate_and_size() {
    let p = calibration_pass();
    assert_eq!(p.len(), 4 * MISS_RATES.len() + 2 * (MISS_RATES.len() - 2));
    // Scaling is the suite's experiment's: the pass is all one-core points.
    assert!(p.iter().all(|w| w.cores == 1));
    // Every default check workload is off the calibration's points.
    for w in check::default_workloads(2).iter().skip(1) {
        assert!(!p.contains(w), "{w:?}");
    }
}

#[test]
fn profile_from_flat_sizes_and_a_bent_curve() {
    let r = suite_results(|_| 100.0, |_| 1500.0, &[(1, 20.0), (2, 38.0)]);
    let prof = profile_from(&r, &pass(bent, |m| 200.0 * m, 0.9), "t");
    assert_eq!(prof.tsc_hz, HZ);
    // Flat size sweep: no per-byte cost.
    let v4 = &prof.classes.ipv4;
    assert_eq!(v4.hit.per_byte_cycles, 0.0);
    assert_eq!(v4.miss.per_byte_cycles, 0.0);
    assert!((v4.hit.fixed_cycles - 100.0).abs() < 0.05);
    assert!((v4.miss.fixed_cycles - 1500.0).abs() < 0.05);
    // The curve is the pass's points between 0 and 1, at 64 B, IMIX and 1518 B.
    assert_eq!(
        v4.curves.iter().map(|c| c.frame_bytes).collect::<Vec<_>>(),
        [64.0, 353.83, 1518.0]
    );
    let at10 = |i: usize| {
        v4.curves[i]
            .points
            .iter()
            .find(|p| p.miss_rate == 0.1)
            .unwrap()
            .cycles
    };
    assert!((at10(0) - bent(0.1)).abs() < 0.06);
    assert!((at10(2) - bent(0.1) - 20.0).abs() < 0.06);
    // The planner then reproduces the bent curve, not the two-cost line.
    assert!((v4.cycles(0.1, 64.0).total() - bent(0.1)).abs() < 0.06);
    assert!((v4.cycles_with(0.1, 64.0, false).total() - 240.0).abs() < 0.06);
    // IPv6: own curve at 66 B, IPv4's size difference added for the larger frames.
    let v6 = &prof.classes.ipv6;
    assert!((v6.hit.fixed_cycles - 110.0).abs() < 0.05);
    assert_eq!(v6.curves[0].frame_bytes, 66.0);
    let v6_1518 = v6.curves[2]
        .points
        .iter()
        .find(|p| p.miss_rate == 0.5)
        .unwrap();
    assert!((v6_1518.cycles - (bent(0.5) + 10.0 + 100.0)).abs() < 0.06);
    assert_eq!(prof.classes.vxlan.curves[0].frame_bytes, 96.0);
    // VXLAN encap: its own costs at the VXLAN frame it sends (96 B), not decap's.
    let enc = &prof.classes.vxlan_encap;
    assert!((enc.hit.fixed_cycles - 140.0).abs() < 0.05);
    assert!((prof.classes.vxlan.hit.fixed_cycles - 150.0).abs() < 0.05);
    assert_eq!(enc.curves[0].frame_bytes, 96.0);
    assert!(!prof
        .notes
        .iter()
        .any(|n| n.contains("vxlan_encap: not measured")));
    // Scaling is the suite's (95 %), whatever the pass's own 2-core points say (90 %).
    assert_eq!(prof.scaling, vec![1.0, 0.95]);
    let note = prof.notes.iter().find(|n| n.contains("scaling")).unwrap();
    assert!(note.contains("95 %") && note.contains("worker 0"), "{note}");
    // Bands: every one-core pass point (±1 % around its median), and the suite's 2 cores.
    let bands = prof.bands.as_ref().unwrap();
    assert_eq!(
        bands.iter().filter(|b| b.cores == 1).count(),
        calibration_pass().len()
    );
    assert!(bands
        .iter()
        .filter(|b| b.cores == 1)
        .all(|b| (b.low - 0.99).abs() < 1e-3 && (b.high - 1.01).abs() < 1e-3));
    assert_eq!(bands.iter().filter(|b| b.cores == 2).count(), 1);
    assert_eq!(prof.machine.as_ref().unwrap().cpu, "Test CPU");
    // What calibrate writes reads back the same.
    assert_eq!(parse_toml(&to_toml(&prof), "t").unwrap(), prof);
}

#[test]
fn a_real_slope_is_kept_and_superlinear_scaling_capped() {
    // 0.2 cycles per byte on misses, none on hits; no pass multi-core points, and the
    // suite's 2 cores at 104 % of linear.
    let r = suite_results(|_| 100.0, |b| 1500.0 + 0.2 * b, &[(1, 20.0), (2, 41.6)]);
    let mut p = pass(bent, |_| 0.0, 1.0);
    p.retain(|m| m.workload.cores == 1);
    let prof = profile_from(&r, &p, "t");
    let v4 = &prof.classes.ipv4;
    assert_eq!(v4.hit.per_byte_cycles, 0.0);
    assert!((v4.miss.per_byte_cycles - 0.2).abs() < 1e-9);
    // fixed = the 64 B point less the slope: bent(1) − 0.2 · 64.
    assert!((v4.miss.fixed_cycles - (bent(1.0) - 12.8)).abs() < 0.05);
    assert_eq!(prof.scaling, vec![1.0, 1.0]);
    assert!(prof
        .notes
        .iter()
        .any(|n| n.contains("stored at most 100 %")));
}

#[test]
fn tiny_real_calibration_and_check() {
    // The real datapath with a handful of packets: the numbers mean nothing, the shape
    // must be right.
    let cfg = SuiteConfig {
        classes: Vec::new(),
        scaling_miss_rates: vec![0.0],
        ..SuiteConfig::tiny()
    };
    let r = suite::run(&cfg, |_| {});
    let workloads = check::default_workloads(2);
    let all: Vec<CheckWorkload> = calibration_pass()
        .into_iter()
        .chain(workloads.iter().copied())
        .collect();
    let mut m = check::measure(&cfg, &all, |_| {});
    assert_eq!(m.len(), all.len());
    let checked = m.split_off(all.len() - workloads.len());
    let prof = profile_from(&r, &m, "tiny");
    assert_eq!(parse_toml(&to_toml(&prof), "tiny").unwrap(), prof);
    for class in TrafficClass::ALL {
        let c = prof.classes.get(class);
        assert!(c.hit.at(64.0) > 0.0 && c.miss.at(64.0) > 0.0);
        assert_eq!(c.curves.len(), 3, "{class:?}");
    }
    assert_eq!(prof.scaling.len(), 2);
    for x in &checked {
        assert!(x.mpps.median > 0.0);
        assert!(
            (x.observed_miss_rate - x.workload.miss_rate).abs() < 0.2,
            "{x:?}"
        );
    }
    let rows = check::compare(&prof, &checked).unwrap();
    assert_eq!(rows.len(), workloads.len());
    let vx = rows
        .iter()
        .find(|r| r.class == TrafficClass::Vxlan)
        .unwrap();
    // The size is the frame on the wire (for VXLAN the outer one), as in the planner.
    assert_eq!(vx.frame_bytes, 512.0);
    // Encap too: the VXLAN frames it sends, IMIX of 96 (the smallest), 570, 1518 B.
    let enc = rows
        .iter()
        .find(|r| r.class == TrafficClass::VxlanEncap)
        .unwrap();
    assert!((enc.frame_bytes - (7.0 * 96.0 + 4.0 * 570.0 + 1518.0) / 12.0).abs() < 1e-9);
    assert!(enc.predicted_mpps_per_core > 0.0);
    assert!(check::table(&rows).lines().count() == rows.len() + 2);
}

#[test]
fn conntrack_costs_come_from_the_suite_and_their_absence_is_a_note() {
    let mut r = suite_results(|_| 100.0, |_| 1500.0, &[(1, 20.0), (2, 38.0)]);
    let prof = profile_from(&r, &pass(bent, |_| 0.0, 1.0), "t");
    assert!(prof.conntrack.is_none());
    assert!(prof
        .notes
        .iter()
        .any(|n| n.starts_with("conntrack: not calibrated")));
    r.conntrack = Some(flowpath_bench::suite::ct_model::CtModel {
        tsc_hz: HZ,
        new_connection_cycles: 4321.04,
        established_packet_cycles: 210.0,
        syn_cycles: Some(950.0),
        notes: vec!["ct_new: cycles per whole connection".into()],
    });
    let prof = profile_from(&r, &pass(bent, |_| 0.0, 1.0), "t");
    let ct = prof.conntrack.unwrap();
    assert_eq!(ct.new_connection_cycles, 4321.0);
    assert_eq!(ct.established_packet_cycles, 210.0);
    assert_eq!(ct.syn_cycles, Some(950.0));
    assert_eq!(parse_toml(&to_toml(&prof), "t").unwrap(), prof);
}
