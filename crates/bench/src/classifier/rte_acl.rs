//! DPDK's rte_acl as a peer: runs `dpdk-test-acl` (Debian package `dpdk-dev`) on the same
//! ClassBench rule file and lookup trace as flowpath's classifier bench, parses its rate.
//!
//! It runs without hugepages or NICs (`--no-huge --no-pci`, one lcore). Its lookup figure
//! is its own TSC count per packet over `--iter` passes, bursts of 256. It prints neither
//! build time nor memory, so the build time here is the difference in wall time between a
//! run with the whole rule set and one with its first rule only (EAL start-up cancels out).

use super::trace::FiveTuple;
use flowpath_packet::FlowKey;
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const TOOL: &str = "dpdk-test-acl";
/// Algorithms from the widest SIMD down; the first that runs (and is fastest) is kept.
const ALGS: [&str; 4] = ["avx512x32", "avx512x16", "avx2", "sse"];

/// rte_acl's row.
#[derive(Clone, Debug, Serialize)]
pub struct RteAclRow {
    pub backend: String,
    pub mlookups_per_s: f64,
    pub cycles_per_lookup: f64,
    pub build_ms: Option<f64>,
}

/// Is `dpdk-test-acl` on the PATH?
pub fn available() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(TOOL).is_file()))
}

/// Write `keys` as a `dpdk-test-acl` trace: `SRC DST SPORT DPORT PROTO`, decimal, spaces.
pub fn write_trace(path: &Path, keys: &[FlowKey]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for k in keys {
        let t = FiveTuple::of(k);
        writeln!(f, "{} {} {} {} {}", t.src, t.dst, t.sport, t.dport, t.proto)?;
    }
    f.flush()
}

fn command(
    rules: &Path,
    trace: &Path,
    rulenum: usize,
    tracenum: usize,
    alg: &str,
    iter: u32,
) -> Command {
    let mut c = Command::new(TOOL);
    c.args([
        "--no-huge",
        "-m",
        "1024",
        "-l",
        "0",
        "--no-pci",
        "--log-level=lib.eal:error",
        "--",
    ])
    .arg(format!("--rulesf={}", rules.display()))
    .arg(format!("--tracef={}", trace.display()))
    .arg(format!("--rulenum={rulenum}"))
    .arg(format!("--tracenum={tracenum}"))
    .arg(format!("--iter={iter}"))
    .arg(format!("--alg={alg}"));
    c
}

/// (cycles per packet, packets per second) from the `search_ip5tuples  @lcore` line.
pub fn parse_rate(out: &str) -> Option<(f64, f64)> {
    let line = out
        .lines()
        .find(|l| l.starts_with("search_ip5tuples ") && l.contains("@lcore"))?;
    let before = |unit: &str| -> Option<f64> {
        let end = line.find(unit)?;
        line[..end]
            .trim_end()
            .rsplit([' ', ','])
            .next()?
            .parse()
            .ok()
    };
    Some((before("cycles/pkt")?, before("pkt/sec")?))
}

/// One run with `alg`: its rate, or why it did not run.
pub fn run(
    rules: &Path,
    trace: &Path,
    n_rules: usize,
    n_trace: usize,
    alg: &str,
) -> Result<RteAclRow, String> {
    let mut cmd = command(rules, trace, n_rules, n_trace, alg, 5);
    let out = cmd.output().map_err(|e| format!("{TOOL}: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let (cycles, pps) = parse_rate(&text).ok_or_else(|| {
        let tail: Vec<&str> = text.lines().rev().take(4).collect();
        format!(
            "{TOOL} --alg={alg} printed no rate (exit {}): {}",
            out.status,
            tail.join(" | ")
        )
    })?;
    Ok(RteAclRow {
        backend: format!("rte_acl ({alg})"),
        mlookups_per_s: pps / 1e6,
        cycles_per_lookup: cycles,
        build_ms: None,
    })
}

/// Wall milliseconds of a run that builds `n_rules` rules and looks up one key.
fn wall_ms(rules: &Path, trace: &Path, n_rules: usize, alg: &str) -> Option<f64> {
    let t0 = Instant::now();
    let ok = command(rules, trace, n_rules, 1, alg, 1)
        .output()
        .ok()?
        .status
        .success();
    ok.then(|| t0.elapsed().as_secs_f64() * 1e3)
}

/// The fastest algorithm this CPU runs, with its build time (median of 3 differences).
pub fn run_best(rules: &Path, keys: &[FlowKey], n_rules: usize) -> Result<RteAclRow, String> {
    let dir = std::env::temp_dir().join(format!("flowpath-rteacl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let trace = dir.join("trace");
    write_trace(&trace, keys).map_err(|e| format!("{}: {e}", trace.display()))?;
    let mut errors = Vec::new();
    let mut best: Option<RteAclRow> = None;
    for alg in ALGS {
        match run(rules, &trace, n_rules, keys.len(), alg) {
            Ok(r)
                if best
                    .as_ref()
                    .is_none_or(|b| r.mlookups_per_s > b.mlookups_per_s) =>
            {
                best = Some(r)
            }
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    let result = match best {
        Some(mut row) => {
            let alg = row
                .backend
                .trim_start_matches("rte_acl (")
                .trim_end_matches(')')
                .to_string();
            // The baseline: a file with the first rule only (`--rulenum` is a capacity,
            // and a file with more rules than it is refused).
            let one = dir.join("one-rule");
            let first = std::fs::read_to_string(rules).ok().and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with('@'))
                    .map(|l| format!("{l}\n"))
            });
            let base_ok = first.is_some_and(|l| std::fs::write(&one, l).is_ok());
            let mut d: Vec<f64> = (0..3)
                .filter(|_| base_ok)
                .filter_map(|_| {
                    Some(wall_ms(rules, &trace, n_rules, &alg)? - wall_ms(&one, &trace, 1, &alg)?)
                })
                .collect();
            d.sort_by(f64::total_cmp);
            row.build_ms = d.get(d.len() / 2).map(|x| x.max(0.0));
            Ok(row)
        }
        None => Err(errors.join("; ")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_rate_line() {
        let out = "search_ip5tuples_once(1, 256, avx2) returns 100000\n\
                   search_ip5tuples  @lcore 0: 3 iterations, 300000 pkts, 1 categories, 72772914 cycles (0.03 sec), 242.58 cycles/pkt, 10718273.56 pkt/sec\n";
        assert_eq!(parse_rate(out), Some((242.58, 10718273.56)));
        assert_eq!(parse_rate("EAL: Error - exiting with code: -22\n"), None);
    }
}
