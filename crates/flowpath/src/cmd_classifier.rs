//! `flowpath bench classifier`: the slow path's classifier backends side by side on a rule
//! set users have (ClassBench filters or a flows file) and one lookup trace, with DPDK's
//! rte_acl on the same rules and trace when `dpdk-test-acl` is installed.

use flowpath_bench::classifier::rte_acl::{self, RteAclRow};
use flowpath_bench::classifier::{self, trace, ClassifierConfig, ClassifierRow};
use flowpath_pipeline::Backend;
use flowpath_report::{columns, grouped};
use std::path::PathBuf;
use std::process::ExitCode;

const ABOUT: &str = "Each classifier backend on one rule set and one lookup trace:

  build      time to build the table from the rules (ms)
  memory     bytes of the index beyond the rules themselves
  Mlookups/s classification alone over the whole trace, key by key, one core
             (median of --runs passes, min-max); cycles per lookup from the TSC
  check      every backend's answer against the linear reference on a sampled subset
  megaflows  the trace run through the real megaflow cache: every miss classified by the
             pipeline and installed; entries and masks it needed, cycles of a full miss
  update     one rule added to the full set, then deleted (median microseconds)

Backends: tss (tuple-space search; port ranges expanded to prefix blocks), tree (a
decision tree of prefix cuts, built for range-heavy ACLs), linear (the reference).
The trace is generated like ClassBench's (90% of keys inside a random rule, 10% uniform;
--seed) unless --trace gives a ClassBench trace file (SRC DST SPORT DPORT PROTO a line).
With dpdk-test-acl installed (Debian: dpdk), its best SIMD algorithm runs on the same
rules and trace and its row joins the table.

Example:  flowpath bench classifier --rules ../shared/data/classbench/acl2_10k";

#[derive(clap::Args)]
#[command(after_long_help = ABOUT)]
pub struct ClassifierArgs {
    /// Rules: a ClassBench filter file (lines start with '@') or a flows file.
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// Backend: tss, tss-whole-masks, tree, linear or all (tss, tree and linear:
    /// tss-whole-masks classifies exactly as tss does, only its megaflows differ).
    #[arg(long, default_value = "all")]
    backend: String,
    /// A ClassBench trace file instead of a generated trace.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Keys in the generated trace.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    lookups: u64,
    /// Seed of the generated trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timed passes over the trace per backend.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Skip the megaflow and update measurements (lookups only).
    #[arg(long)]
    lookups_only: bool,
    /// Do not run dpdk-test-acl even when it is installed.
    #[arg(long)]
    no_dpdk: bool,
    /// Print JSON (one object per backend) instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ClassifierArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowpath bench classifier: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: ClassifierArgs) -> Result<(), String> {
    let backends = if args.backend == "all" {
        Backend::CLASSIFIERS.to_vec()
    } else {
        vec![args
            .backend
            .parse::<Backend>()
            .map_err(|e| format!("--backend: {e} or 'all'"))?]
    };
    let rules = classifier::load_rules(&args.rules)?;
    if rules.is_empty() {
        return Err(format!("{}: no rules", args.rules.display()));
    }
    let keys = match &args.trace {
        Some(p) => trace::parse_trace(
            &std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )
        .map_err(|e| format!("{}: {e}", p.display()))?,
        None => trace::generate(&rules, args.lookups as usize, 0.9, args.seed),
    };
    let cfg = ClassifierConfig {
        backends,
        runs: args.runs as usize,
        megaflows: !args.lookups_only,
        updates: !args.lookups_only,
        ..ClassifierConfig::default()
    };
    let rows = classifier::run(&rules, &keys, &cfg, |m| eprintln!("  {m}"))?;
    let dpdk = if args.no_dpdk {
        None
    } else {
        run_dpdk(&args, &keys, rules.len())
    };
    if args.json {
        let mut all: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::to_value(r).expect("rows serialise"))
            .collect();
        if let Some(d) = &dpdk {
            let mut v = serde_json::to_value(d).expect("rows serialise");
            v["backend"] = format!("rte_acl ({})", d.alg).into();
            all.push(v);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&all).expect("rows serialise")
        );
    } else {
        print_table(&args, &rows, dpdk.as_ref(), keys.len());
    }
    Ok(())
}

/// rte_acl on the same rules and trace, or `None` (with the reason on stderr).
fn run_dpdk(
    args: &ClassifierArgs,
    keys: &[flowpath_packet::FlowKey],
    n_rules: usize,
) -> Option<RteAclRow> {
    if !rte_acl::available() {
        eprintln!(
            "  rte_acl: dpdk-test-acl is not installed (apt-get install dpdk-dev); no DPDK row"
        );
        return None;
    }
    let text = std::fs::read_to_string(&args.rules).ok()?;
    if !flowpath_flowsyntax::is_classbench(&text) {
        eprintln!(
            "  rte_acl: dpdk-test-acl reads ClassBench files only; no DPDK row for a flows file"
        );
        return None;
    }
    eprintln!("  rte_acl: dpdk-test-acl on the same rules and trace");
    let dir = std::env::temp_dir().join(format!("flowpath-rteacl-{}", std::process::id()));
    let trace = dir.join("trace");
    let tuples: Vec<_> = keys
        .iter()
        .map(|k| {
            let t = trace::FiveTuple::of(k);
            (t.src, t.dst, t.sport, t.dport, t.proto)
        })
        .collect();
    let result = std::fs::create_dir_all(&dir)
        .and_then(|_| rte_acl::write_trace(&trace, &tuples))
        .map_err(|e| format!("{}: {e}", trace.display()))
        .and_then(|_| rte_acl::run_best(&args.rules, &trace, n_rules, keys.len()));
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("  rte_acl: {e}");
            None
        }
    }
}

fn opt(v: Option<impl std::fmt::Display>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn print_table(args: &ClassifierArgs, rows: &[ClassifierRow], dpdk: Option<&RteAclRow>, n: usize) {
    println!(
        "{}: {} rules, {} lookups ({}), TSC {:.3} GHz\n",
        args.rules.display(),
        rows.first().map_or(0, |r| r.rules),
        grouped(n as u64),
        if args.trace.is_some() {
            "trace file"
        } else {
            "generated, 90% inside rules"
        },
        flowpath_base::clock::tsc_hz() / 1e9
    );
    let head = [
        "backend",
        "build ms",
        "index KiB",
        "subtables",
        "entries",
        "Mlookups/s",
        "(min-max)",
        "cyc/lookup",
        "miss cyc",
        "megaflows",
        "masks",
        "insert us",
        "delete us",
        "mismatch",
    ]
    .map(String::from);
    let mut out: Vec<[String; 14]> = rows
        .iter()
        .map(|r| {
            [
                r.backend.clone(),
                format!("{:.1}", r.build_ms),
                grouped(r.memory_bytes as u64 / 1024),
                grouped(r.subtables as u64),
                grouped(r.entries as u64),
                format!("{:.2}", r.mlookups_per_s),
                format!("({:.2}-{:.2})", r.mlookups_per_s_min, r.mlookups_per_s_max),
                format!("{:.0}", r.cycles_per_lookup),
                opt(r.miss_cycles.map(|c| format!("{c:.0}"))),
                opt(r.megaflows.map(|m| grouped(m as u64))),
                opt(r.megaflow_masks),
                opt(r.insert_us.map(|u| format!("{u:.0}"))),
                opt(r.delete_us.map(|u| format!("{u:.0}"))),
                format!("{}/{}", r.mismatches, grouped(r.checked as u64)),
            ]
        })
        .collect();
    if let Some(d) = dpdk {
        out.push([
            format!("rte_acl ({})", d.alg),
            opt(d.build_ms.map(|b| format!("{b:.1}"))),
            opt(d.memory_bytes.map(|m| grouped(m / 1024))),
            "-".into(),
            "-".into(),
            format!("{:.2}", d.mlookups_per_s),
            String::new(),
            opt(d.cycles_per_lookup.map(|c| format!("{c:.0}"))),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    print!("{}", columns(&head, &out));
}
