//! `flowpath lab` end to end, the real binary: every system and both cases, one short
//! window each (`--runs 1 --duration 1 --warmup 0.5 --json`), and every row must have
//! packets at the sink. The numbers do not matter here (the test shares the CPUs with
//! whatever else runs), only that each system really forwarded; the two-worker row
//! (flowpath-afxdp-2w) must also have packets on both workers, by their own counters
//! (each of its two generators feeds one of swin's two queues). Then the VXLAN classes
//! (hit case): flowpath's rows must have packets, every frame at the sink must be VXLAN
//! over IPv4 to UDP port 4789 for encap and none for decap (the generator sends only
//! VXLAN there), as the sink's XDP program counts them; a system without tunnels must give
//! an "n/a" row.
//!
//! Needs root and every peer the lab drives (`flowpath lab --check` says which are
//! missing; scripts/setup-lab.sh installs them): otherwise it prints "skipped: <why>" and
//! passes, unless FLOWPATH_LAB_REQUIRED=1 (CI sets it after running the setup script),
//! where a missing peer fails it. About a minute here (2 cores); the lab is bounded by a
//! 15-minute limit, after which it is stopped and the test fails.

use flowpath_lab::systems::{SYSTEMS, TWO_WORKERS};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::BIN;

const CASES: [&str; 2] = ["hit", "miss"];
const LIMIT: Duration = Duration::from_secs(15 * 60);

/// Why the lab cannot run here, or None.
fn skip_reason() -> Option<String> {
    if let Some(why) = common::netns_skip_reason() {
        return Some(why);
    }
    let out = Command::new(BIN)
        .args(["lab", "--check"])
        .output()
        .expect("run flowpath lab --check");
    if !out.status.success() {
        return Some(format!(
            "`flowpath lab --check` says not every system can run here (run scripts/setup-lab.sh):\n{}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    None
}

/// Straight to the test's stderr, past the harness's capture: the rows are worth seeing
/// in CI's log even when the test passes.
fn show(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// Run `flowpath lab` with `args` (and the short-window flags), bounded by [`LIMIT`]
/// from `started`; its JSON rows.
fn run_lab(args: &[&str], started: Instant) -> Vec<serde_json::Value> {
    // The lab's progress goes to stderr as it runs (seen in CI's log); its rows to stdout.
    let mut child = Command::new(BIN)
        .arg("lab")
        .args(args)
        .args([
            "--runs",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0.5",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start flowpath lab");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for flowpath lab") {
            break st;
        }
        if started.elapsed() > LIMIT {
            // SIGTERM: the lab tears its namespaces and processes down itself.
            // SAFETY: kill has no memory preconditions; the pid is our child's.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(10));
            let _ = child.kill();
            let _ = child.wait();
            let _ = Command::new(BIN).args(["lab", "--cleanup"]).output();
            panic!("flowpath lab ran over {} s", LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = reader.join().expect("stdout reader");
    assert!(status.success(), "flowpath lab failed ({status}):\n{out}");
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Packets at the sink over the row's windows.
fn delivered(r: &serde_json::Value) -> u64 {
    r["samples"]
        .as_array()
        .map(|s| s.iter().filter_map(|x| x["delivered"].as_u64()).sum())
        .unwrap_or(0)
}

/// The rows as a table for the log, and what is wrong with them: an error (other than
/// "n/a" when `na_ok`) or no packets.
fn check_rows(rows: &[serde_json::Value], secs: f64, na_ok: bool) -> (String, Vec<String>) {
    let mut table = format!("lab rows ({secs:.0} s):\n");
    let mut bad = Vec::new();
    for r in rows {
        let system = r["system"].as_str().unwrap_or("?");
        let class = r["class"].as_str().unwrap_or("?");
        let case = r["case"].as_str().unwrap_or("?");
        let mpps = r["mpps"].as_f64();
        let delivered = delivered(r);
        table += &format!(
            "  {system:<18} {class:<11} {case:<5} {:>8} Mpps  {delivered:>10} packets  {:>10} VXLAN\n",
            mpps.map_or("-".into(), |m| format!("{m:.3}")),
            r["vxlan_at_sink"].as_u64().map_or("-".into(), |v| v.to_string()),
        );
        match r["error"].as_str() {
            Some(e) if na_ok && e.starts_with("n/a") => {}
            Some(e) => bad.push(format!("{system} {class} {case}: {e}")),
            None if delivered == 0 || mpps.is_none_or(|m| m <= 0.0) => {
                bad.push(format!("{system} {class} {case}: no packets at the sink"))
            }
            None => {}
        }
    }
    (table, bad)
}

#[test]
fn every_lab_row_has_packets() {
    if let Some(why) = skip_reason() {
        if std::env::var("FLOWPATH_LAB_REQUIRED").is_ok_and(|v| v == "1") {
            panic!("FLOWPATH_LAB_REQUIRED=1 but the lab cannot run: {why}");
        }
        show(&format!("skipped: {why}\n"));
        return;
    }
    let started = Instant::now();
    let rows = run_lab(&[], started);
    let (table, bad) = check_rows(&rows, started.elapsed().as_secs_f64(), false);
    show(&table);

    let mut want: Vec<(String, String)> = SYSTEMS
        .iter()
        .flat_map(|s| CASES.iter().map(move |c| (s.to_string(), c.to_string())))
        .collect();
    let mut got: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["class"], "ipv4", "the default class");
            (
                r["system"].as_str().unwrap_or("").to_string(),
                r["case"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "one row per system and case");
    assert!(
        bad.is_empty(),
        "rows without packets:\n  {}",
        bad.join("\n  ")
    );
    for r in rows.iter().filter(|r| r["system"] == TWO_WORKERS) {
        let per: Vec<u64> = r["worker_packets"]
            .as_array()
            .map(|a| a.iter().filter_map(|n| n.as_u64()).collect())
            .unwrap_or_default();
        let queues: Vec<&serde_json::Value> = r["samples"]
            .as_array()
            .map(|a| a.iter().map(|s| &s["queue_packets"]).collect())
            .unwrap_or_default();
        assert!(
            per.len() == 2 && per.iter().all(|&n| n > 0),
            "{TWO_WORKERS} {}: packets per worker {per:?} (swin's rx queues took {queues:?}): \
             both workers must forward",
            r["case"]
        );
    }

    vxlan_rows(Instant::now());
}

/// The VXLAN classes: flowpath (AF_XDP ports, and with the XDP tier, which hands tunnel
/// traffic to the worker) decapsulates and encapsulates; testpmd io-fwd cannot.
fn vxlan_rows(started: Instant) {
    let rows = run_lab(
        &[
            "--systems",
            "flowpath-afxdp,flowpath-xdp,testpmd-afxdp",
            "--class",
            "vxlan_decap,vxlan_encap",
            "--cases",
            "hit",
        ],
        started,
    );
    let (table, mut bad) = check_rows(&rows, started.elapsed().as_secs_f64(), true);
    show(&table);
    assert_eq!(rows.len(), 3 * 2, "one row per system and class");
    for r in &rows {
        let system = r["system"].as_str().unwrap_or("?");
        let class = r["class"].as_str().unwrap_or("?");
        if system == "testpmd-afxdp" {
            let e = r["error"].as_str().unwrap_or("");
            assert!(e.starts_with("n/a: "), "testpmd {class}: {r}");
            continue;
        }
        if r["error"].is_string() {
            continue; // in `bad` already
        }
        // What the sink's XDP program saw: VXLAN over IPv4 to UDP 4789, or not.
        let n = delivered(r);
        let Some(vx) = r["vxlan_at_sink"].as_u64() else {
            bad.push(format!(
                "{system} {class}: the sink's VXLAN counter was not read"
            ));
            continue;
        };
        // The counter and the interface's are read one after the other, not at once: a
        // few hundred packets apart at most.
        let ok = match class {
            "vxlan_encap" => n > 0 && (vx as f64 - n as f64).abs() <= 0.05 * n as f64,
            "vxlan_decap" => vx == 0,
            o => panic!("class {o}"),
        };
        if !ok {
            bad.push(format!(
                "{system} {class}: {vx} of the {n} frames at the sink were VXLAN"
            ));
        }
    }
    assert!(bad.is_empty(), "VXLAN rows:\n  {}", bad.join("\n  "));
}
