//! The planner's arithmetic: rates and sizes, the fewest cores (a property test), the
//! measured curves, and the scenarios.

use flowpath_gen::{FrameMix, TrafficClass};
use flowpath_planner::plan::{
    cores_vs_miss_rate, outcome, plan, scenarios, solve, Options, WhatIf, Workload,
};
use flowpath_planner::profile::{builtin, ClassCosts, Cost, Curve, CurvePoint, Profile};
use flowpath_planner::units::{
    imix_mean_bytes, mean_frame_bytes, parse_rate, parse_share, parse_size, Rate,
};
use proptest::prelude::*;

fn pps(s: &str, frame: f64) -> f64 {
    parse_rate(s).unwrap().pps(frame)
}

#[test]
fn bit_rates_count_preamble_and_gap() {
    // 10 Gbps of 64-byte frames: 10e9 / ((64 + 20) · 8) = 14.88 Mpps.
    assert!((pps("10Gbps", 64.0) - 14_880_952.38).abs() < 0.01);
    assert!((pps("10G", 64.0) - 14_880_952.38).abs() < 0.01);
    assert!((pps("10 Gbit/s", 64.0) - 14_880_952.38).abs() < 0.01);
    // 25 Gbps: 37.2 Mpps.
    assert!((pps("25Gbps", 64.0) / 1e6 - 37.2).abs() < 0.01);
    // 1518-byte frames: 812.7 kpps at 10 Gbps.
    assert!((pps("10Gbps", 1518.0) - 812_743.8).abs() < 0.1);
    // IMIX: the mean frame on the wire, 353.83 + 20 B.
    let imix = imix_mean_bytes();
    assert!((pps("25Gbps", imix) - 25e9 / ((imix + 20.0) * 8.0)).abs() < 1e-6);
    assert!((pps("25Gbps", imix) / 1e6 - 8.359).abs() < 0.001);
    assert!((pps("100Mbps", 64.0) - 148_809.5).abs() < 0.1);
}

#[test]
fn packet_rates_and_units() {
    assert_eq!(parse_rate("10Mpps").unwrap(), Rate::Pps(10e6));
    assert_eq!(parse_rate("10mpps").unwrap(), Rate::Pps(10e6));
    assert_eq!(parse_rate("560kpps").unwrap(), Rate::Pps(560e3));
    assert_eq!(parse_rate("1.5 Mpps").unwrap(), Rate::Pps(1.5e6));
    assert_eq!(parse_rate("14880952pps").unwrap(), Rate::Pps(14_880_952.0));
    assert_eq!(parse_rate("1e6pps").unwrap(), Rate::Pps(1e6));
    assert_eq!(parse_rate("2Gpps").unwrap(), Rate::Pps(2e9));
    assert_eq!(parse_rate("0pps").unwrap(), Rate::Pps(0.0));
    // A packet rate does not depend on the frame size.
    assert_eq!(pps("10Mpps", 1518.0), 10e6);
    assert!(parse_rate("10").is_err());
    assert!(parse_rate("10 parsecs").is_err());
    assert!(parse_rate("Mpps").is_err());
}

#[test]
fn sizes_and_shares() {
    assert_eq!(parse_size("64").unwrap(), FrameMix::Fixed(64));
    assert_eq!(parse_size("IMIX").unwrap(), FrameMix::Imix);
    assert_eq!(parse_size("1518B").unwrap(), FrameMix::Fixed(1518));
    assert!(parse_size("63").is_err() && parse_size("9019").is_err());
    assert!((mean_frame_bytes(FrameMix::Imix) - 353.833).abs() < 0.001);
    assert_eq!(parse_share("5%").unwrap(), 0.05);
    assert_eq!(parse_share("0.05").unwrap(), 0.05);
    assert_eq!(parse_share("100 %").unwrap(), 1.0);
    assert_eq!(parse_share("0").unwrap(), 0.0);
}

/// IPv4 traffic of 64 B frames at `pps`, `miss_rate` of them new flows.
fn ipv4_64b(pps: f64, miss_rate: f64) -> Workload {
    Workload {
        class: TrafficClass::Ipv4,
        pps,
        frame_bytes: 64.0,
        miss_rate,
    }
}

/// A profile with these costs and scaling, no curves.
fn flat_profile(tsc_hz: f64, hit: f64, miss: f64, scaling: Vec<f64>) -> Profile {
    let mut p = builtin("ovs-kernel").unwrap();
    p.tsc_hz = tsc_hz;
    p.scaling = scaling;
    for class in TrafficClass::ALL {
        *p.classes.get_mut(class) = ClassCosts {
            hit: Cost::flat(hit),
            miss: Cost::flat(miss),
            curves: Vec::new(),
        };
    }
    p
}

fn capacity(p: &Profile, n: u64, usable: f64) -> f64 {
    n as f64 * p.efficiency(n).0 * p.tsc_hz * usable
}

proptest! {
    /// The answer carries the load and one core fewer would not (minimality), whatever
    /// the scaling curve (even a non-monotone one) and headroom.
    #[test]
    fn cores_are_enough_and_the_fewest(
        demand in 0.0f64..2e12,
        tsc in 1e8f64..5e9,
        scaling_tail in proptest::collection::vec(0.2f64..1.3, 0..8),
        headroom in 0.0f64..0.9,
    ) {
        let mut scaling = vec![1.0];
        scaling.extend(scaling_tail);
        let p = flat_profile(tsc, 100.0, 1000.0, scaling);
        let usable = 1.0 - headroom;
        let s = solve(&p, demand, usable).unwrap();
        prop_assert!(capacity(&p, s.cores, usable) >= demand);
        if s.cores > 0 {
            prop_assert!(capacity(&p, s.cores - 1, usable) < demand);
            prop_assert!(s.utilisation <= usable + 1e-9);
            let expect = demand / (s.cores as f64 * p.efficiency(s.cores).0 * tsc);
            prop_assert!((s.utilisation - expect).abs() <= 1e-9 * expect.max(1.0));
        } else {
            prop_assert_eq!(demand, 0.0);
        }
    }

    /// Through the whole plan: cores · capacity ≥ rate · cycles > (cores − 1) · capacity,
    /// cycles per packet is the two-cost model, and the miss share is the misses' part.
    #[test]
    fn plans_are_minimal_and_consistent(
        rate in 0.0f64..1e8,
        m in 0.0f64..=1.0,
        hit in 50.0f64..10_000.0,
        ratio in 1.0f64..200.0,
        bytes in 64.0f64..9018.0,
        headroom in 0.0f64..0.5,
    ) {
        let p = flat_profile(2.6e9, hit, hit * ratio, vec![1.0, 0.95, 0.9]);
        let w = Workload { class: TrafficClass::Ipv6, pps: rate, frame_bytes: bytes, miss_rate: m };
        let opts = Options { headroom, ..Options::default() };
        let r = plan(&p, &w, &opts).unwrap();
        let cycles = (1.0 - m) * hit + m * hit * ratio;
        prop_assert!((r.cycles_per_packet - cycles).abs() <= 1e-9 * cycles);
        let demand = rate * cycles;
        let usable = 1.0 - headroom;
        prop_assert!(capacity(&p, r.cores, usable) >= demand * (1.0 - 1e-12));
        if r.cores > 0 {
            prop_assert!(capacity(&p, r.cores - 1, usable) < demand);
        }
        prop_assert!((r.miss_share_of_cycles - m * hit * ratio / cycles).abs() < 1e-9);
        // Every scenario needs at most the baseline's load on the miss-path scenario.
        prop_assert!(r.scenarios[0].cores <= r.cores);
    }
}

#[test]
fn no_load_needs_no_cores_and_efficiency_extrapolates() {
    let p = flat_profile(2e9, 100.0, 1000.0, vec![1.0, 0.5]);
    assert_eq!(solve(&p, 0.0, 1.0).unwrap().cores, 0);
    // One core: 2e9 cycles/s. Two: 2e9. Three: 3e9 (0.5 extrapolated).
    let s = solve(&p, 2.5e9, 1.0).unwrap();
    assert_eq!((s.cores, s.extrapolated), (3, true));
    assert!((s.utilisation - 2.5 / 3.0).abs() < 1e-12);
    let s = solve(&p, 2e9, 1.0).unwrap();
    assert_eq!((s.cores, s.extrapolated), (1, false));
    // Headroom: each core filled to 80 %.
    let s = solve(&flat_profile(1e9, 1.0, 1.0, vec![1.0]), 1e9, 0.8).unwrap();
    assert_eq!(s.cores, 2);
    assert!((s.utilisation - 0.5).abs() < 1e-12);
    let r = plan(&p, &ipv4_64b(25e6, 0.0), &Options::default()).unwrap();
    assert!(r.notes.iter().any(|n| n.contains("extrapolated")));
}

fn curve_costs() -> ClassCosts {
    ClassCosts {
        hit: Cost::flat(100.0),
        miss: Cost {
            fixed_cycles: 900.0,
            per_byte_cycles: 0.5,
        },
        curves: vec![
            Curve {
                frame_bytes: 100.0,
                points: vec![
                    CurvePoint {
                        miss_rate: 0.1,
                        cycles: 300.0,
                    },
                    CurvePoint {
                        miss_rate: 0.5,
                        cycles: 800.0,
                    },
                ],
            },
            Curve {
                frame_bytes: 1100.0,
                points: vec![CurvePoint {
                    miss_rate: 0.1,
                    cycles: 400.0,
                }],
            },
        ],
    }
}

#[test]
fn curves_interpolate_in_miss_rate_then_size() {
    let c = curve_costs();
    // Ends: the hit and miss costs at the curve's size (miss at 100 B: 950).
    assert_eq!(c.cycles(0.0, 100.0).total(), 100.0);
    assert_eq!(c.cycles(1.0, 100.0).total(), 950.0);
    // On the 100 B curve: points, and linear between.
    assert_eq!(c.cycles(0.1, 100.0).total(), 300.0);
    assert!((c.cycles(0.3, 100.0).total() - 550.0).abs() < 1e-9);
    assert!((c.cycles(0.05, 100.0).total() - 200.0).abs() < 1e-9);
    assert!((c.cycles(0.75, 100.0).total() - 875.0).abs() < 1e-9);
    // Between the curves' sizes: linear in bytes (0.1: 300 at 100 B, 400 at 1100 B).
    assert!((c.cycles(0.1, 600.0).total() - 350.0).abs() < 1e-9);
    // Beyond the largest curve: its value plus the per-byte terms
    // ((1 − m)·0 + m·0.5 per byte): 400 + 0.05 · 100.
    assert!((c.cycles(0.1, 1200.0).total() - 405.0).abs() < 1e-9);
    // Below the smallest: 300 − 0.05 · 36.
    assert!((c.cycles(0.1, 64.0).total() - 298.2).abs() < 1e-9);
    // The misses' part is what exceeds the hits' (1 − m)·hit.
    let x = c.cycles(0.1, 100.0);
    assert_eq!(x.hits, 90.0);
    assert!((x.misses - 210.0).abs() < 1e-9);
    assert!((x.miss_share() - 0.7).abs() < 1e-9);
    // Without the curves: the two-cost line.
    assert!((c.cycles_with(0.1, 100.0, false).total() - (90.0 + 95.0)).abs() < 1e-9);
}

#[test]
fn scenarios_follow_the_options() {
    let names = |o: &Options| -> Vec<String> { scenarios(o).into_iter().map(|s| s.0).collect() };
    assert_eq!(names(&Options::default()), vec!["miss path 10x faster"]);
    let o = Options {
        miss_speedup: 4.0,
        miss_cores: Some(2),
        offload_share: Some(0.5),
        offload_pps: 90e6,
        ..Options::default()
    };
    assert_eq!(
        names(&o),
        vec![
            "miss path 4x faster",
            "2 cores for misses",
            "50 % of hits offloaded (hw 90 Mpps)",
            "all of the above"
        ]
    );
}

#[test]
fn dedicated_miss_cores_and_offload_limits() {
    // 1 GHz; hit 100, miss 10,000 cycles; 10 Mpps at 10 % misses:
    // hits 0.9 · 10e6 · 100 = 0.9e9 → 1 core; misses 1e6 · 10,000 = 10e9 → 10 cores.
    let p = flat_profile(1e9, 100.0, 10_000.0, vec![1.0]);
    let w = ipv4_64b(10e6, 0.1);
    let opts = Options::default();
    let base = outcome(&p, &w, &opts, &WhatIf::NONE, "baseline", None).unwrap();
    assert_eq!(base.cores, 11); // 10.9e9 cycles/s
    let dedicated = |n| {
        outcome(
            &p,
            &w,
            &opts,
            &WhatIf {
                miss_cores: Some(n),
                ..WhatIf::NONE
            },
            "d",
            Some(&base),
        )
        .unwrap()
    };
    let four = dedicated(4);
    assert_eq!(four.hit_cores, Some(1));
    assert_eq!(four.miss_cores_needed, Some(10));
    assert_eq!(four.cores, 11);
    assert!(
        four.notes[0].contains("cannot carry the misses"),
        "{:?}",
        four.notes
    );
    let sixteen = dedicated(16);
    assert_eq!(sixteen.cores, 17);
    assert_eq!(sixteen.cores_freed, -6);
    assert_eq!(sixteen.usd_per_year_saved, -6000.0);
    assert_eq!(sixteen.speedup, 1.0);
    assert!((sixteen.utilisation - 10.9 / 17.0).abs() < 1e-12);

    // Offload: half the hits asked of a 2 Mpps device, which takes 2 of the 4.5 Mpps.
    let off = outcome(
        &p,
        &w,
        &opts,
        &WhatIf {
            offload_share: 0.5,
            offload_pps: 2e6,
            ..WhatIf::NONE
        },
        "o",
        Some(&base),
    )
    .unwrap();
    assert_eq!(off.offloaded_pps, Some(2e6));
    assert!((off.cycles_per_packet - (10.9e9 - 2e6 * 100.0) / 10e6).abs() < 1e-9);
    assert!(off.notes[0].contains("rate limit"));
}

#[test]
fn the_chart_has_a_line_per_scenario_over_the_miss_rates() {
    let p = builtin("ovs-kernel").unwrap();
    let w = ipv4_64b(10e6, 0.05);
    let opts = Options {
        miss_cores: Some(8),
        ..Options::default()
    };
    let rates: Vec<f64> = (0..=10).map(|i| i as f64 / 10.0).collect();
    let lines = cores_vs_miss_rate(&p, &w, &opts, &rates);
    assert_eq!(lines.len(), 1 + scenarios(&opts).len());
    assert_eq!(lines[0].0, "baseline");
    // Baseline: 10 Mpps × 4,600 cycles / 2.6 GHz = 17.7 → 18 cores at 0 %; 193 at 100 %.
    assert_eq!(lines[0].1[0], (0.0, 18));
    assert_eq!(lines[0].1[10], (1.0, 193));
    // More misses never need fewer cores (with cores set aside for misses they can:
    // those idle at low miss rates while the hit cores get fewer).
    for (_, pts) in &lines[..2] {
        assert!(pts.windows(2).all(|w| w[0].1 <= w[1].1), "{pts:?}");
    }
    let html = flowpath_planner::report::step_chart("t", &lines, 1.0, Some(0.05));
    // One drawn line (more than one segment) per scenario; axes, ticks and legend swatches
    // are single segments.
    let drawn = html
        .split("<polyline")
        .skip(1)
        .filter(|p| {
            let pts = p.split("points=\"").nth(1).unwrap_or("");
            pts.split('"')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .count()
                > 2
        })
        .count();
    assert_eq!(drawn, lines.len());
}

/// Scenario (e): a new-flow flood on top of the service. Undefended, every attack packet
/// costs a miss; with the budget, at most that share of each core goes to the attack's
/// slow path; with a 100 % budget the two agree; a bigger attack never needs fewer cores.
#[test]
fn an_attack_costs_cores_and_the_miss_budget_bounds_what_it_takes() {
    let p = builtin("ovs-kernel-2019").unwrap();
    let w = ipv4_64b(10e6, 0.01);
    let at = |attack: f64, budget: f64| {
        let opts = Options {
            attack_pps: Some(attack),
            attack_budget: budget,
            ..Options::default()
        };
        let pl = plan(&p, &w, &opts).unwrap();
        let n = pl.scenarios.len();
        (
            pl.baseline.cores,
            pl.scenarios[n - 2].clone(),
            pl.scenarios[n - 1].clone(),
        )
    };
    let (base, undef, def) = at(2e6, 0.5);
    assert!(undef.name.contains("undefended") && def.name.contains("budget"));
    // Undefended: the attack adds 2 Mpps x 50,000 cycles.
    let c = p.classes.get(TrafficClass::Ipv4);
    let service = w.pps * c.cycles(w.miss_rate, 64.0).total();
    let want = solve(&p, service + 2e6 * 50_000.0, 1.0).unwrap().cores;
    assert_eq!(undef.cores, want);
    assert!(undef.cores > base);
    assert!(
        def.cores >= base && def.cores <= undef.cores,
        "{def:?} {undef:?}"
    );
    // Within the budget's share: at most half of each core's cycles go to the attack's
    // slow path.
    let slow = (def.cycles_per_packet * w.pps) - service - 2e6 * 4_600.0;
    assert!(slow <= 0.5 * def.cores as f64 * p.tsc_hz + 1.0, "{slow}");
    let (_, u100, d100) = at(2e6, 1.0);
    assert_eq!(u100.cores, d100.cores, "a 100 % budget is no budget");
    let (_, u_big, d_big) = at(4e6, 0.5);
    assert!(u_big.cores >= undef.cores && d_big.cores >= def.cores);
}
