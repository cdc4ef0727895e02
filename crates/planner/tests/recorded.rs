//! Prediction against measurement, recorded: `tests/data/check-2026-11-21.json` is the
//! output of
//!
//! ```sh
//! cargo run --release -p flowpath -- calibrate --check --out /tmp/flowpath-profile.toml \
//!     --check-json crates/planner/tests/data/check-2026-11-21.json
//! ```
//!
//! on the project's machine (2 vCPU AMD EPYC under KVM): the profile calibrated in that
//! run, the check workloads' measurements, and the comparison rows. The measurement stays
//! in the command; this test recomputes the planner's predictions from the recorded
//! profile and measurements, so a change to the planner's arithmetic that moves them shows
//! here, and checks that they still agree with what the datapath did.

use flowpath_planner::check::{compare, CheckRow, Measured};
use flowpath_planner::plan::{plan, Options, Workload};
use flowpath_planner::profile::parse_json;
use flowpath_planner::units::mean_frame_bytes;

const RECORDED: &str = include_str!("data/check-2026-11-21.json");

fn recorded() -> (flowpath_planner::Profile, Vec<Measured>, Vec<CheckRow>) {
    let v: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
    let profile = parse_json(&v["profile"].to_string(), "recorded").unwrap();
    let measured = serde_json::from_value(v["measured"].clone()).unwrap();
    let rows = serde_json::from_value(v["check"].clone()).unwrap();
    (profile, measured, rows)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn predictions_recompute_exactly() {
    let (profile, measured, rows) = recorded();
    let again = compare(&profile, &measured).unwrap();
    assert_eq!(again.len(), rows.len());
    for (a, r) in again.iter().zip(&rows) {
        assert_eq!(a.workload, r.workload);
        assert!(
            close(a.predicted_mpps_per_core, r.predicted_mpps_per_core),
            "{}: {} vs recorded {}",
            r.workload,
            a.predicted_mpps_per_core,
            r.predicted_mpps_per_core
        );
        assert!(close(a.two_cost_mpps_per_core, r.two_cost_mpps_per_core));
        assert!(close(a.error, r.error));
        assert!(close(a.planner_cores_exact, r.planner_cores_exact));
        assert_eq!(a.planner_cores, r.planner_cores);
    }
}

/// The planner's bar: at least three workloads (different rate, size and miss rate) where
/// the planner and the datapath agree within 10 %; and none of the one-core workloads off
/// by more than 15 % (runs on the shared 2-vCPU machine have put single workloads at up
/// to 12 %; the run recorded here has all within 5 %).
#[test]
fn one_core_predictions_agree_with_the_datapath_within_10_percent() {
    let (_, _, rows) = recorded();
    let one: Vec<&CheckRow> = rows.iter().filter(|r| r.cores == 1).collect();
    for r in &one {
        assert!(
            r.error.abs() <= 0.15,
            "{}: {:+.1} %",
            r.workload,
            r.error * 100.0
        );
    }
    let within: Vec<&CheckRow> = one
        .iter()
        .copied()
        .filter(|r| r.error.abs() <= 0.10)
        .collect();
    for r in &within {
        // The fewest cores for what one core did is one core, within 10 %.
        assert!(
            (r.planner_cores_exact - 1.0).abs() <= 0.111,
            "{}",
            r.workload
        );
    }
    // Different rates, sizes, miss rates and classes.
    let distinct = |f: &dyn Fn(&CheckRow) -> String| {
        let mut v: Vec<String> = within.iter().map(|r| f(r)).collect();
        v.sort();
        v.dedup();
        v.len()
    };
    assert!(distinct(&|r| r.size.clone()) >= 3);
    assert!(distinct(&|r| format!("{}", r.miss_rate)) >= 3);
    assert!(distinct(&|r| format!("{:.1}", r.measured_mpps_per_core)) >= 3);
    // The two-cost line alone is off by more than 10 % wherever misses are involved.
    assert!(one
        .iter()
        .filter(|r| r.miss_rate > 0.0)
        .all(|r| r.two_cost_error > 0.10));
}

/// One row by hand from the profile's numbers, and through `flowpath plan`'s path.
#[test]
fn imix_at_3_percent_by_hand_and_through_plan() {
    let (profile, measured, rows) = recorded();
    let row = rows
        .iter()
        .find(|r| r.workload == "ipv4 IMIX 3 % new")
        .unwrap();
    let m = measured
        .iter()
        .find(|m| m.workload.miss_rate == 0.03)
        .unwrap();
    // The IMIX curve (353.83 B; the frames average 353.833 B: the next curve, 1518 B, is
    // 1,164 B away, so it moves the result by under 0.01 %), 3 % between its 2 and 5 %.
    let c = profile
        .classes
        .ipv4
        .curves
        .iter()
        .find(|c| (c.frame_bytes - 353.83).abs() < 0.01)
        .unwrap();
    let at = |r: f64| c.points.iter().find(|p| p.miss_rate == r).unwrap().cycles;
    let cycles = at(0.02) + (at(0.05) - at(0.02)) * (0.03 - 0.02) / (0.05 - 0.02);
    let mpps = profile.tsc_hz / cycles / 1e6;
    assert!((mpps / row.predicted_mpps_per_core - 1.0).abs() < 1e-4);
    // `flowpath plan --rate <measured> --size imix --miss-rate 3% --profile <it>`.
    let w = Workload {
        class: m.workload.class,
        pps: m.mpps.median * 1e6,
        frame_bytes: mean_frame_bytes(m.workload.mix),
        miss_rate: 0.03,
    };
    let p = plan(&profile, &w, &Options::default()).unwrap();
    assert!((p.pps_per_core / 1e6 / row.predicted_mpps_per_core - 1.0).abs() < 1e-12);
    assert_eq!(p.cores, row.planner_cores);
}

/// The recorded profile predates the VXLAN encap class: it loads, with the decap costs
/// standing in for encap (and a note saying so), and plans for encap traffic.
#[test]
fn the_recorded_profile_predates_encap_and_still_plans_it() {
    let v: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
    assert!(v["profile"]["classes"].get("vxlan_encap").is_none());
    let (profile, _, _) = recorded();
    assert_eq!(profile.classes.vxlan_encap, profile.classes.vxlan);
    assert!(profile
        .notes
        .iter()
        .any(|n| n == flowpath_planner::profile::ENCAP_DEFAULT_NOTE));
    let w = Workload {
        class: flowpath_gen::TrafficClass::VxlanEncap,
        pps: 5e6,
        frame_bytes: 96.0,
        miss_rate: 0.01,
    };
    let enc = plan(&profile, &w, &Options::default()).unwrap();
    let dec = plan(
        &profile,
        &Workload {
            class: flowpath_gen::TrafficClass::Vxlan,
            ..w
        },
        &Options::default(),
    )
    .unwrap();
    assert_eq!(enc.cores, dec.cores);
    assert!(enc.cores > 0);
    assert!(enc
        .notes
        .iter()
        .any(|n| n.contains("predates the vxlan_encap class")));
    assert!(!dec.notes.iter().any(|n| n.contains("vxlan_encap")));
}
