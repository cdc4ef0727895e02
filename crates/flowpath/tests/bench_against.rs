//! `flowpath bench --against`: the build compared with a binary (here itself) round by
//! round; both sides report every round, and a binary that cannot run says which.

use std::process::Command;

mod common;
use common::harness::run_ok;
use common::BIN;

/// `flowpath bench --against` itself on `cases` with `extra` options, two short rounds, as
/// JSON rows (the run must succeed).
fn against_itself(cases: &[&str], extra: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "--against", BIN]).args(extra);
    for c in cases {
        cmd.args(["--case", c]);
    }
    cmd.args([
        "--runs",
        "2",
        "--packets",
        "20000",
        "--flows",
        "64",
        "--json",
    ]);
    serde_json::from_slice(&run_ok(&mut cmd).stdout).unwrap()
}

#[test]
fn both_builds_report_every_round_side_by_side() {
    let rows = against_itself(&["emc_hit", "miss"], &[]);
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["emc_hit", "miss"]);
    for r in &rows {
        for side in ["this", "other"] {
            let samples = r[side]["samples"].as_array().unwrap();
            assert_eq!(samples.len(), 2, "{side} of {}", r["case"]);
            assert!(samples.iter().all(|c| c.as_f64().unwrap() > 0.0));
        }
        let ratio = r["ratio"].as_f64().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0);
        assert!(
            r["noise_round_ratio"].is_null(),
            "no --noise, no noise column"
        );
    }
}

/// `--noise`: a second run of this build every round, reported as its own ratio; the
/// children never get the flag (this binary refuses `--noise` without `--against`, so a
/// forwarded one would fail the run).
#[test]
fn noise_runs_this_build_again_every_round() {
    let rows = against_itself(&["emc_hit"], &["--noise"]);
    assert_eq!(rows.len(), 1);
    let noise = &rows[0]["noise_round_ratio"];
    let samples = noise["samples"].as_array().expect("the second runs");
    assert_eq!(samples.len(), 2);
    assert!(samples.iter().all(|c| c.as_f64().unwrap() > 0.0));
    let m = noise["median"].as_f64().unwrap();
    assert!(m.is_finite() && m > 0.0);
}

#[test]
fn a_binary_that_cannot_run_is_named() {
    let out = Command::new(BIN)
        .args([
            "bench",
            "--against",
            "/nonexistent/flowpath",
            "--case",
            "emc_hit",
        ])
        .args(["--runs", "1", "--packets", "1000"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/flowpath"), "{err}");
}

#[test]
fn attack_cases_are_refused_with_against() {
    let out = Command::new(BIN)
        .args(["bench", "--against", BIN, "--case", "flood"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("flood and tse"));
}
