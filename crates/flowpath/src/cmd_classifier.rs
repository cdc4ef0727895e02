//! `flowpath bench classifier`: the slow path's classifier backends side by side on a rule
//! set users have (ClassBench filters or a flows file) and one lookup trace, with DPDK's
//! rte_acl on the same rules and trace when `dpdk-test-acl` is installed.

use flowpath_bench::classifier::command::{run_command, ClassifierOptions};
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
    /// Rules: a ClassBench filter file (lines start with '@') or a flows file; repeat it to
    /// measure several sets in one run (one table).
    #[arg(long, value_name = "FILE", required = true)]
    rules: Vec<PathBuf>,
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
    /// Print one Markdown table for all the sets, with a caption naming the command, machine
    /// and date (what `scripts/results.py` pastes into README.md and docs/classifiers.md).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
}

pub fn run(args: ClassifierArgs) -> ExitCode {
    let opts = ClassifierOptions {
        rules: args.rules,
        backend: args.backend,
        trace: args.trace,
        lookups: args.lookups,
        seed: args.seed,
        runs: args.runs,
        lookups_only: args.lookups_only,
        no_dpdk: args.no_dpdk,
        json: args.json,
        markdown: args.markdown,
    };
    match run_command(&opts) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("flowpath bench classifier: {e}");
            ExitCode::FAILURE
        }
    }
}
