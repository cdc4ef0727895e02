//! `flowpath bench --against OTHER`: this build and another `flowpath` binary, one run of
//! every case each per round, alternating which goes first, so a slow spell of a shared
//! machine falls on both builds alike (a hot-path A/B on a VM whose speed swings). Both
//! run as child processes with the same arguments, so neither has a warmer process. With
//! `--noise` every round ends with a second run of this build, and the table shows the
//! ratio of this build's two runs beside the comparison: what the machine's noise alone
//! reads, the bound a ratio between the builds has to clear.

use crate::runner::Case;
use flowpath_base::progress;
use flowpath_base::{median, Summary};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// One case's cycles per packet, one figure per round, for each build.
pub struct Paired {
    pub case: String,
    pub this: Vec<f64>,
    pub other: Vec<f64>,
    /// This build's second run of each round (`--noise`; else empty).
    pub again: Vec<f64>,
}

/// The arguments the other binary gets: the user's `bench` arguments without `--against`,
/// `--runs`, `--json`, `--markdown`, `--noise` and `--case` (each with its value), then one `--case` per
/// case and `--runs 1 --json`. `args` are this process's arguments after the program name.
pub fn forwarded_args(args: &[OsString], cases: &[String]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut it = args.iter();
    for a in it.by_ref() {
        out.push(a.clone());
        if a == "bench" {
            break;
        }
    }
    let with_value = ["--against", "--runs", "--case"];
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if with_value.contains(&s.as_ref()) {
            it.next();
            continue;
        }
        if s == "--json"
            || s == "--markdown"
            || s == "--noise"
            || with_value.iter().any(|f| s.starts_with(&format!("{f}=")))
        {
            continue;
        }
        out.push(a.clone());
    }
    for c in cases {
        out.push("--case".into());
        out.push(c.into());
    }
    out.extend(["--runs", "1", "--json"].map(OsString::from));
    out
}

/// Run `bin` (a flowpath binary) once with `args` (ending in `--json`): its rows.
pub fn child_rows(bin: &Path, args: &[OsString]) -> Result<Vec<serde_json::Value>, String> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} exited with {}: {}",
            bin.display(),
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{}: its --json output is not a JSON array ({e})",
            bin.display()
        )
    })
}

/// Run `bin` once with `args`; its cycles per packet by case name.
fn run_binary(bin: &Path, args: &[OsString]) -> Result<Vec<(String, f64)>, String> {
    Ok(child_rows(bin, args)?
        .iter()
        .filter_map(|r| {
            Some((
                r.get("case")?.as_str()?.to_string(),
                r.get("cycles_per_packet")?.as_f64()?,
            ))
        })
        .collect())
}

/// `rounds` rounds: every case once in this binary and once in `other`, each a child
/// process, the order swapped every round; with `noise`, then once more in this binary.
pub fn run(
    cases: &[Case],
    other: &Path,
    rounds: usize,
    noise: bool,
) -> Result<Vec<Paired>, String> {
    let names: Vec<String> = cases.iter().map(|c| c.name()).collect();
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let fwd = forwarded_args(&args, &names);
    let this = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut paired: Vec<Paired> = names
        .iter()
        .map(|n| Paired {
            case: n.clone(),
            this: Vec::new(),
            other: Vec::new(),
            again: Vec::new(),
        })
        .collect();
    for round in 0..rounds {
        for turn in 0..2 + usize::from(noise) {
            let this_turn = turn == 2 || (round + turn) % 2 == 0;
            let bin = if this_turn { &this } else { other };
            progress::line(&format!("round {}/{rounds}: {}", round + 1, bin.display()));
            let got = run_binary(bin, &fwd)?;
            for p in paired.iter_mut() {
                let c = got
                    .iter()
                    .find(|(n, _)| *n == p.case)
                    .ok_or_else(|| format!("{} did not report case {}", bin.display(), p.case))?;
                if turn == 2 {
                    p.again.push(c.1);
                } else if this_turn {
                    p.this.push(c.1);
                } else {
                    p.other.push(c.1);
                }
            }
        }
    }
    progress::clear();
    Ok(paired)
}

/// (median, min, max) of a side's rounds (every side has at least one: `--runs` ≥ 1).
fn summary(v: &[f64]) -> (f64, f64, f64) {
    let s = Summary::of(v).expect("at least one round");
    (s.median, s.min, s.max)
}

/// Each round's this/other (the two builds' runs of a round are adjacent in time, so a
/// round's ratio is free of the spell it fell in): (median, lower quartile, upper
/// quartile). Steadier than the ratio of the two medians when the machine drifts.
pub fn round_ratios(p: &Paired) -> (f64, f64, f64) {
    ratios(&p.this, &p.other)
}

/// Each round's this build's second run over its first (`--noise`), as [`round_ratios`]:
/// a build against itself, so what it reads is the machine's noise. None without rounds.
pub fn noise_ratios(p: &Paired) -> Option<(f64, f64, f64)> {
    (!p.again.is_empty()).then(|| ratios(&p.again, &p.this))
}

/// Per-round a/b: (median, lower quartile, upper quartile).
fn ratios(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    r.sort_by(f64::total_cmp);
    let m = median(&r).expect("at least one round");
    let n = r.len() - 1;
    (m, r[n / 4], r[(3 * n).div_ceil(4)])
}

/// The side-by-side table.
pub fn table(paired: &[Paired], other: &Path, header: &str) -> String {
    let mut s = String::from(header);
    let _ = writeln!(
        s,
        "against: {} (rounds alternate which build runs first)\n",
        other.display()
    );
    let noise = paired.iter().any(|p| !p.again.is_empty());
    let _ = write!(
        s,
        "{:<17} {:>24} {:>24} {:>10} {:>24}",
        "case",
        "this cyc/pkt (min–max)",
        "other cyc/pkt (min–max)",
        "this/other",
        "per round (middle half)"
    );
    if noise {
        let _ = write!(s, " {:>26}", "again/this (middle half)");
    }
    s.push('\n');
    for p in paired {
        let (a, amin, amax) = summary(&p.this);
        let (b, bmin, bmax) = summary(&p.other);
        let (r, q1, q3) = round_ratios(p);
        let _ = write!(
            s,
            "{:<17} {:>24} {:>24} {:>10.2} {:>24}",
            p.case,
            format!("{a:.0} ({amin:.0}–{amax:.0})"),
            format!("{b:.0} ({bmin:.0}–{bmax:.0})"),
            a / b,
            format!("{r:.3} ({q1:.3}–{q3:.3})")
        );
        if let Some((n, n1, n3)) = noise_ratios(p) {
            let _ = write!(s, " {:>26}", format!("{n:.3} ({n1:.3}–{n3:.3})"));
        }
        s.push('\n');
    }
    s.push_str(
        "\nthis/other: ratio of the two medians; per round: the median of each round's \
         this/other (the two runs of a round are adjacent in time) and its middle half\n",
    );
    if noise {
        s.push_str(
            "again/this: each round ends with a second run of this build; the median of the \
             rounds' second/first and its middle half. A build against itself: a per-round \
             ratio inside this band is the machine's noise, not the change\n",
        );
    }
    s
}

/// The same as JSON: one object per case.
pub fn json(paired: &[Paired], other: &Path) -> String {
    let rows: Vec<serde_json::Value> = paired
        .iter()
        .map(|p| {
            let side = |v: &[f64]| {
                let (m, lo, hi) = summary(v);
                serde_json::json!({"cycles_per_packet": m, "cycles_min": lo, "cycles_max": hi, "samples": v})
            };
            let (m, q1, q3) = round_ratios(p);
            serde_json::json!({
                "case": p.case,
                "this": side(&p.this),
                "other": side(&p.other),
                "other_binary": other.display().to_string(),
                "ratio": summary(&p.this).0 / summary(&p.other).0,
                "round_ratio": {"median": m, "q1": q1, "q3": q3},
                "noise_round_ratio": noise_ratios(p)
                    .map(|(m, q1, q3)| serde_json::json!({"median": m, "q1": q1, "q3": q3, "samples": p.again})),
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_other_build_gets_the_users_options_and_one_run_of_each_case() {
        let args = os(&[
            "bench",
            "--against",
            "/tmp/old",
            "--case",
            "emc_hit",
            "--runs=7",
            "--flows",
            "64",
            "--json",
            "--against=/x",
            "--noise",
        ]);
        let got = forwarded_args(&args, &["emc_hit".into(), "miss".into()]);
        assert_eq!(
            got,
            os(&[
                "bench", "--flows", "64", "--case", "emc_hit", "--case", "miss", "--runs", "1",
                "--json"
            ])
        );
    }

    /// A build 10 % faster on a machine whose speed moves 1.5x between rounds: every
    /// round says 0.9, while the two sides' medians can fall in different spells.
    #[test]
    fn round_ratios_see_through_a_drifting_machine() {
        let speed = [1.0, 1.5, 1.5, 1.0, 1.5];
        let p = Paired {
            case: "emc_hit".into(),
            this: speed.iter().map(|s| 90.0 * s).collect(),
            other: speed.iter().map(|s| 100.0 * s).collect(),
            again: Vec::new(),
        };
        let (m, q1, q3) = round_ratios(&p);
        for r in [m, q1, q3] {
            assert!((r - 0.9).abs() < 1e-9, "{r}");
        }
        let odd = Paired {
            case: "x".into(),
            this: vec![1.0, 2.0, 3.0, 4.0, 5.0],
            other: vec![1.0; 5],
            again: Vec::new(),
        };
        assert_eq!(round_ratios(&odd), (3.0, 2.0, 4.0));
        assert_eq!(noise_ratios(&odd), None);
    }

    /// `--noise`: this build's second run over its first, round by round, in a column of
    /// its own (and in the JSON); without it neither appears.
    #[test]
    fn the_noise_column_is_this_builds_second_run_over_its_first() {
        let p = Paired {
            case: "emc_hit".into(),
            this: vec![100.0, 150.0, 100.0, 150.0, 100.0],
            other: vec![110.0, 165.0, 110.0, 165.0, 110.0],
            // Second over first: 1.02, 0.98, 1.00, 0.99, 1.01.
            again: vec![102.0, 147.0, 100.0, 148.5, 101.0],
        };
        let (m, q1, q3) = noise_ratios(&p).expect("rounds with a second run");
        for (got, want) in [(m, 1.0), (q1, 0.99), (q3, 1.01)] {
            assert!((got - want).abs() < 1e-9, "{got} for {want}");
        }
        let t = table(std::slice::from_ref(&p), Path::new("/old"), "");
        assert!(t.contains("again/this"), "{t}");
        assert!(t.contains("1.000 (0.990–1.010)"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&json(&[p], Path::new("/old"))).unwrap();
        assert_eq!(j[0]["noise_round_ratio"]["median"], 1.0);
        let plain = Paired {
            case: "emc_hit".into(),
            this: vec![100.0],
            other: vec![110.0],
            again: Vec::new(),
        };
        let t = table(std::slice::from_ref(&plain), Path::new("/old"), "");
        assert!(!t.contains("again/this"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&json(&[plain], Path::new("/old"))).unwrap();
        assert!(j[0]["noise_round_ratio"].is_null());
    }
}
