//! `flowpath bench --runs N`: each run a fresh process by default, pooled into one row per
//! case; `--in-process` keeps every run in one process.

use std::process::Command;

mod common;
use common::harness::run_ok;
use common::BIN;

/// `flowpath bench` on `cases` with `extra` options, short runs, as JSON rows.
fn bench(cases: &[&str], extra: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = Command::new(BIN);
    cmd.arg("bench").args(extra);
    for c in cases {
        cmd.args(["--case", c]);
    }
    cmd.args(["--packets", "20000", "--flows", "64", "--json"]);
    serde_json::from_slice(&run_ok(&mut cmd).stdout).unwrap()
}

#[test]
fn runs_are_spread_over_processes_and_pooled() {
    let rows = bench(&["floor", "emc_hit", "miss"], &["--runs", "3"]);
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, ["floor", "emc_hit", "miss"]);
    for r in &rows {
        assert_eq!(r["runs"], 3, "{}", r["case"]);
        assert_eq!(r["processes"], 3, "{}", r["case"]);
        let (lo, mid, hi) = (
            r["cycles_min"].as_f64().unwrap(),
            r["cycles_per_packet"].as_f64().unwrap(),
            r["cycles_max"].as_f64().unwrap(),
        );
        assert!(0.0 < lo && lo <= mid && mid <= hi, "{}", r["case"]);
    }
    // The pooled row keeps what the median process saw: every emc_hit packet an EMC
    // hit, every miss packet an upcall.
    assert!(rows[1]["emc_hit_share"].as_f64().unwrap() > 0.99);
    assert!(rows[2]["upcall_share"].as_f64().unwrap() > 0.99);
}

#[test]
fn in_process_keeps_every_run_in_one_process() {
    let rows = bench(&["emc_hit"], &["--runs", "3", "--in-process"]);
    assert_eq!(rows[0]["runs"], 3);
    assert_eq!(rows[0]["processes"], 1);
    // One run needs no child either way.
    let rows = bench(&["emc_hit"], &["--runs", "1"]);
    assert_eq!(
        (rows[0]["runs"].clone(), rows[0]["processes"].clone()),
        (1.into(), 1.into())
    );
}

/// The pooled table says how its runs were taken.
#[test]
fn the_table_says_each_run_was_a_fresh_process() {
    let out = Command::new(BIN)
        .args([
            "bench",
            "--case",
            "emc_hit",
            "--runs",
            "2",
            "--packets",
            "20000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("each run a fresh process"), "{text}");
}
