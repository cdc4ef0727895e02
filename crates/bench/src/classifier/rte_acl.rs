//! DPDK's rte_acl as a peer classifier: runs `dpdk-test-acl` (Debian package `dpdk-dev`)
//! on the same ClassBench rule file and lookup trace, and parses its lookups/s.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const TOOL: &str = "dpdk-test-acl";
/// Passes over the trace in `run_best`.
const BEST_ITERATIONS: u32 = 5;
/// Lines of stderr quoted in an error.
const TAIL_LINES: usize = 6;

/// One `dpdk-test-acl` result.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RteAclRow {
    /// The `--alg` that ran (`avx512x32`, `avx2`, …).
    pub alg: String,
    pub mlookups_per_s: f64,
    pub cycles_per_lookup: Option<f64>,
    /// Rule-file parse plus `rte_acl_build`, when `stdbuf` was there to time it.
    pub build_ms: Option<f64>,
    /// rte_acl's runtime structures (`total: N bytes` of its gen phase).
    pub memory_bytes: Option<u64>,
}

/// The `search_ip5tuples  @lcore` line, parsed.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rate {
    pkts: u64,
    cycles_per_pkt: f64,
    pkt_per_s: f64,
}

/// Lines of one stream, each with the time it arrived (from the start of the run).
type Stamped = Vec<(Duration, String)>;

struct Finished {
    status: ExitStatus,
    stdout: Stamped,
    stderr: Stamped,
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// Is `dpdk-test-acl` on the PATH?
pub fn available() -> bool {
    on_path(TOOL)
}

/// Write `keys` (src, dst, sport, dport, proto; addresses host-order) as a `dpdk-test-acl`
/// trace: one packet a line, five decimal numbers separated by spaces.
pub fn write_trace(path: &Path, keys: &[(u32, u32, u16, u16, u8)]) -> std::io::Result<()> {
    let mut f = BufWriter::new(std::fs::File::create(path)?);
    for &(src, dst, sport, dport, proto) in keys {
        writeln!(f, "{src} {dst} {sport} {dport} {proto}")?;
    }
    f.flush()
}

/// Trace records as `dpdk-test-acl` counts them (blank and `#` lines are skipped).
fn count_records(text: &[u8]) -> usize {
    text.split(|&b| b == b'\n')
        .filter(|l| {
            let first = l.iter().find(|b| !b.is_ascii_whitespace());
            first.is_some_and(|&b| b != b'#')
        })
        .count()
}

fn check_trace_fits(trace: &Path, n_trace: usize) -> Result<(), String> {
    let text = std::fs::read(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    let records = count_records(&text);
    if records > n_trace {
        return Err(format!(
            "{}: {records} trace records but n_trace is {n_trace}; {TOOL} would write past its \
             trace buffer (pass n_trace >= the record count)",
            trace.display()
        ));
    }
    Ok(())
}

fn unique_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("flowpath-acl-{}-{n}", std::process::id())
}

/// The empty runtime directory EAL leaves behind (root: /var/run, else XDG or /tmp).
fn remove_runtime_dir(prefix: &str) {
    let mut bases = vec![PathBuf::from("/var/run"), PathBuf::from("/tmp")];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        bases.push(PathBuf::from(x));
    }
    for b in bases {
        let _ = std::fs::remove_dir(b.join("dpdk").join(prefix));
    }
}

/// The command, and whether its stdout is line-buffered (so lines carry real times).
///
/// No hugepages, NICs or shared config (`--no-huge --no-pci --no-shconf`), one lcore, a file
/// prefix of its own so runs may overlap. `--force-max-simd-bitwidth=512`: EAL caps SIMD at
/// 256 bits by default, and `avx512x32` then exits with -95 (ENOTSUP). `lib.acl:debug` makes
/// rte_acl log its runtime memory; `stdbuf -oL` lets the build be timed from stdout lines.
fn command(
    rules: &Path,
    trace: &Path,
    n_rules: usize,
    n_trace: usize,
    alg: &str,
    iterations: u32,
    prefix: &str,
) -> (Command, bool) {
    let line_buffered = on_path("stdbuf");
    let mut c = if line_buffered {
        let mut c = Command::new("stdbuf");
        c.args(["-oL", TOOL]);
        c
    } else {
        Command::new(TOOL)
    };
    c.args([
        "--no-huge",
        "-m",
        "1024",
        "-l",
        "0",
        "--no-pci",
        "--no-shconf",
    ])
    .args(["--no-telemetry", "--force-max-simd-bitwidth=512"])
    .arg(format!("--file-prefix={prefix}"))
    .args([
        "--log-level=lib.eal:warning",
        "--log-level=lib.acl:debug",
        "--",
    ])
    .arg(format!("--rulesf={}", rules.display()))
    .arg(format!("--tracef={}", trace.display()))
    .arg(format!("--rulenum={}", n_rules.max(1)))
    .arg(format!("--tracenum={}", n_trace.max(1)))
    .arg(format!("--iter={}", iterations.max(1)))
    .arg(format!("--alg={alg}"))
    .arg("--verbose=0");
    (c, line_buffered)
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn read_lines<R: Read + Send + 'static>(r: R, t0: Instant) -> JoinHandle<Stamped> {
    thread::spawn(move || {
        let mut lines = Vec::new();
        for chunk in BufReader::new(r).split(b'\n') {
            let Ok(bytes) = chunk else { break };
            let text = String::from_utf8_lossy(&bytes);
            lines.push((t0.elapsed(), text.trim_end_matches('\r').to_string()));
        }
        lines
    })
}

fn execute(c: &mut Command) -> Result<Finished, String> {
    let t0 = Instant::now();
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let out = child.stdout.take().map(|s| read_lines(s, t0));
    let err = child.stderr.take().map(|s| read_lines(s, t0));
    let status = child.wait().map_err(|e| format!("wait failed: {e}"))?;
    let join = |h: Option<JoinHandle<Stamped>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Finished {
        status,
        stdout: join(out),
        stderr: join(err),
    })
}

fn joined(lines: &Stamped) -> String {
    let mut s = String::new();
    for (_, l) in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

fn tail(lines: &Stamped, n: usize) -> String {
    let from = lines.len().saturating_sub(n);
    let kept: Vec<&str> = lines[from..].iter().map(|(_, l)| l.trim()).collect();
    kept.join(" | ")
}

/// One run of `dpdk-test-acl` with `alg` over `iterations` passes of the trace (bursts of
/// 256; the rate is its own TSC count). `n_rules` and `n_trace` are capacities: at least the
/// records in each file. A trace longer than `n_trace` is refused here: DPDK 22.11 would write
/// one record past its buffer and may segfault. The build time is rule-file parse plus
/// `rte_acl_build`, `None` without `stdbuf`; the memory is rte_acl's runtime structures.
pub fn run(
    rules: &Path,
    trace: &Path,
    n_rules: usize,
    n_trace: usize,
    alg: &str,
    iterations: u32,
) -> Result<RteAclRow, String> {
    check_trace_fits(trace, n_trace)?;
    let prefix = unique_prefix();
    let (mut cmd, line_buffered) =
        command(rules, trace, n_rules, n_trace, alg, iterations, &prefix);
    let shown = describe(&cmd);
    let done = execute(&mut cmd);
    remove_runtime_dir(&prefix);
    let done = done.map_err(|e| format!("`{shown}`: {e}"))?;
    let fail = |why: &str| {
        let (status, last) = (done.status, tail(&done.stderr, TAIL_LINES));
        format!("`{shown}` {why} ({status}); stderr: {last}")
    };
    if !done.status.success() {
        return Err(fail("failed"));
    }
    let text = joined(&done.stdout) + &joined(&done.stderr);
    let rate =
        parse_rate(&text).ok_or_else(|| fail("printed no `search_ip5tuples  @lcore` line"))?;
    if rate.pkts == 0 || rate.pkt_per_s.is_nan() || rate.pkt_per_s <= 0.0 {
        return Err(fail("looked up no packets (empty trace?)"));
    }
    Ok(RteAclRow {
        alg: alg.to_string(),
        mlookups_per_s: rate.pkt_per_s / 1e6,
        cycles_per_lookup: Some(rate.cycles_per_pkt),
        build_ms: line_buffered.then(|| build_ms(&done.stdout)).flatten(),
        memory_bytes: parse_memory(&text),
    })
}

/// `--alg` values for this CPU architecture, widest SIMD first (scalar last).
fn candidates() -> &'static [&'static str] {
    if cfg!(target_arch = "x86_64") {
        &["avx512x32", "avx512x16", "avx2", "sse", "scalar"]
    } else if cfg!(target_arch = "aarch64") {
        &["neon", "scalar"]
    } else if cfg!(target_arch = "powerpc64") {
        &["altivec", "scalar"]
    } else {
        &["scalar"]
    }
}

/// The fastest algorithm that runs here: every SIMD one is tried, widest first (one this
/// CPU lacks fails in milliseconds); scalar only when none of them ran.
pub fn run_best(
    rules: &Path,
    trace: &Path,
    n_rules: usize,
    n_trace: usize,
) -> Result<RteAclRow, String> {
    let mut errors = Vec::new();
    let mut best: Option<RteAclRow> = None;
    for &alg in candidates() {
        if alg == "scalar" && best.is_some() {
            break;
        }
        match run(rules, trace, n_rules, n_trace, alg, BEST_ITERATIONS) {
            Ok(row) => {
                if best
                    .as_ref()
                    .is_none_or(|b| row.mlookups_per_s > b.mlookups_per_s)
                {
                    best = Some(row);
                }
            }
            Err(e) => errors.push(format!("{alg}: {e}")),
        }
    }
    best.ok_or_else(|| format!("no {TOOL} algorithm ran: {}", errors.join("; ")))
}

/// The number just before `unit` in a `, `-separated field (`41.13 cycles/pkt`).
fn field<T: std::str::FromStr>(line: &str, unit: &str) -> Option<T> {
    line.split([',', ':'])
        .map(str::trim)
        .find_map(|f| f.strip_suffix(unit))
        .and_then(|v| v.trim().parse().ok())
}

/// `search_ip5tuples  @lcore 0: 5 iterations, 5000000 pkts, 1 categories, 697280776 cycles
/// (0.27 sec), 139.46 cycles/pkt, 18643852.59 pkt/sec`
fn parse_rate(text: &str) -> Option<Rate> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("search_ip5tuples ") && l.contains("@lcore"))?;
    Some(Rate {
        pkts: field(line, " pkts")?,
        cycles_per_pkt: field(line, " cycles/pkt")?,
        pkt_per_s: field(line, " pkt/sec")?,
    })
}

/// The last `total: N bytes` (rte_acl's gen-phase debug log: its runtime structures).
fn parse_memory(text: &str) -> Option<u64> {
    text.lines()
        .rev()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("total:")?.strip_suffix("bytes"))
        .and_then(|v| v.trim().parse().ok())
}

/// From the last `dump_config` line (`ipv6:`) to `rte_acl_build(N) finished with 0`.
fn build_ms(stdout: &Stamped) -> Option<f64> {
    let at =
        |pred: &dyn Fn(&str) -> bool| stdout.iter().find(|(_, l)| pred(l.trim())).map(|(t, _)| *t);
    let start = at(&|l| l.starts_with("ipv6:"))?;
    let end = at(&|l| l.starts_with("rte_acl_build(") && l.ends_with("finished with 0"))?;
    let ms = end.checked_sub(start)?.as_secs_f64() * 1e3;
    Some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// stdout and stderr of a real run (acl2_10k, 1M-packet trace, avx512x32, DPDK 22.11.11).
    const STDOUT: &str = "dump_config:\n\
rulesf:/work/shared/data/classbench/acl2_10k\ntracef:t_acl2_10k\nrulenum:20000\n\
tracenum:1000000\ntracestep:256\nbldcat:3\nruncat:1\nmaxsize:0\niter:5\nverbose:0\n\
alg:7(avx512x32)\nipv6:0\nrte_acl_build(3) finished with 0\n\
acl context <TESTACL>@0x120437e80\n  socket_id=-1\n  alg=7\n  first_load_sz=4\n\
  max_rules=20000\n  rule_size=96\n  num_rules=9476\n  num_categories=3\n  num_tries=2\n\
search_ip5tuples  @lcore 0: 5 iterations, 5000000 pkts, 1 categories, 697280776 cycles \
(0.27 sec), 139.46 cycles/pkt, 18643852.59 pkt/sec\n";
    const STDERR: &str = "ACL: Gen phase for ACL \"TESTACL\":\n\
runtime memory footprint on socket -1:\nsingle nodes/bytes used: 77439/619512\n\
quad nodes/vectors/bytes used: 76653/251112/2008896\n\
DFA nodes/group64/bytes used: 28180/99196/50790408\nmatch nodes/bytes used: 9406/1203968\n\
total: 54627040 bytes\nmax limit: 18446744073709551615 bytes\n\
ACL: Build phase for ACL \"TESTACL\":\nnode limit for tree split: 2048\n\
nodes created: 191678\nmemory consumed: 268435680\n\
ACL: trie 0: number of rules: 1283, indexes: 4\nACL: trie 1: number of rules: 8193, indexes: 4\n";
    const FAILED: &str = "EAL: Error - exiting with code: -95\n  \
Cause: failed to setup avx512x32 method for ACL context";

    fn stamped(text: &str, ms: &[u64]) -> Stamped {
        let lines = text.lines().map(String::from);
        ms.iter()
            .map(|&m| Duration::from_millis(m))
            .zip(lines)
            .collect()
    }

    #[test]
    fn parses_the_rate_line() {
        let r = parse_rate(STDOUT).expect("rate");
        assert_eq!(r.pkts, 5_000_000);
        assert_eq!(r.cycles_per_pkt, 139.46);
        assert_eq!(r.pkt_per_s, 18643852.59);
        assert_eq!(parse_rate(FAILED), None);
        assert_eq!(parse_rate("search_ip5tuples  @lcore 0: garbage\n"), None);
    }

    #[test]
    fn parses_the_runtime_memory() {
        assert_eq!(parse_memory(STDERR), Some(54_627_040));
        assert_eq!(parse_memory(STDOUT), None);
    }

    #[test]
    fn times_the_build_between_two_lines() {
        let text = "alg:7(avx512x32)\nipv6:0\nrte_acl_build(3) finished with 0\nacl context\n";
        let lines = stamped(text, &[100, 101, 891, 892]);
        let ms = build_ms(&lines).expect("both lines");
        assert!((ms - 790.0).abs() < 1e-6, "{ms}");
        let failed = stamped("ipv6:0\nrte_acl_build(3) finished with -12\n", &[1, 2]);
        assert_eq!(build_ms(&failed), None);
    }

    #[test]
    fn writes_and_counts_trace_records() {
        let path = std::env::temp_dir().join(format!("rte-acl-test-{}", std::process::id()));
        let keys = [
            (0xC0A8_0001, 0x0A00_0001, 1234, 80, 6),
            (u32::MAX, 0, 0, u16::MAX, 17),
        ];
        write_trace(&path, &keys).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            text,
            "3232235521 167772161 1234 80 6\n4294967295 0 0 65535 17\n"
        );
        assert_eq!(count_records(text.as_bytes()), 2);
        assert_eq!(count_records(b"# c\n\n  \n1 2 3 4 5\n1 2 3 4 5"), 2);
    }

    #[test]
    fn command_line_and_error_tail() {
        let p = Path::new("/r");
        let (c, _) = command(p, Path::new("/t"), 10, 20, "avx2", 3, "pfx");
        let s = describe(&c);
        assert!(
            s.contains("--no-huge -m 1024 -l 0 --no-pci --no-shconf"),
            "{s}"
        );
        assert!(s.contains("--file-prefix=pfx"), "{s}");
        assert!(s.ends_with("-- --rulesf=/r --tracef=/t --rulenum=10 --tracenum=20 --iter=3 --alg=avx2 --verbose=0"), "{s}");
        let t = tail(&stamped(FAILED, &[1, 2]), 6);
        assert_eq!(t, "EAL: Error - exiting with code: -95 | Cause: failed to setup avx512x32 method for ACL context");
        assert_eq!(candidates().last(), Some(&"scalar"));
    }
}
