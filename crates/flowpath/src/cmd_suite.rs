//! `flowpath bench suite`: the characterisation suite command — the "Core Cost" talk's
//! experiments as tables on the terminal and a directory with `results.json`,
//! `report.html` and one SVG per chart (see `flowpath_bench::suite`).

use flowpath_bench::suite::{self, StderrProgress, SuiteConfig};
use std::path::PathBuf;
use std::process::ExitCode;

const SUITE_ABOUT: &str =
    "The characterisation suite: the \"Core Cost of Doing Business\" experiments on the
real datapath with generated frames, each as a table here and a chart in the report.

  1. throughput vs worker cores: 1 ... all CPUs, each worker its own datapath (own caches)
     and traffic, one shared rule store; aggregate Mpps, Mpps per core, efficiency
  2. cycles per packet vs frame size: 64, IMIX (7:4:1 of 64/570/1518), 512, 1024, 1518 B,
     for cached packets and for new flows
  3. cycles per hit vs per miss, and their ratio, for IPv4, IPv6 and VXLAN traffic
  4. throughput vs miss rate (0, 1, 2, 5, 10, 20, 50, 100 % new flows) per class, measured,
     with the model (1-m)*c_hit + m*c_miss from the same run beside it; every point where
     the two differ by more than 10 % is reported as such

Every point is the median of --runs timed runs with min-max (TSC cycles). Output: the
tables on stdout, a progress bar on stderr, and in --out: results.json (every number,
every run, the model curve, the machine, the command, seed and git revision),
report.html (self-contained: inline SVG charts, no scripts, readable offline) and the
charts as scaling.svg, frame_sizes.svg, hit_miss.svg and miss_rate_<class>.svg.
The full suite takes about a minute or two on 2 cores; --quick well under two minutes.";

#[derive(clap::Args)]
#[command(after_long_help = SUITE_ABOUT)]
pub struct SuiteArgs {
    /// Every experiment, smaller: 3 runs of 300,000 packets per point and five miss rates
    /// (0, 1, 10, 50, 100 %).
    #[arg(long)]
    quick: bool,
    /// Directory for results.json, report.html and the charts (created if missing)
    /// [default: ./flowpath-suite-<UTC date-time>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Timed runs per point; the median is reported with min-max [default: 5, --quick 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Seed of the sources' new-flow stamping (recorded in results.json).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Packets per timed run at miss rates up to 10 % (fewer above, at least a tenth)
    /// [default: 2,000,000, --quick 300,000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1000..))]
    packets: Option<u64>,
    /// Do not pin the scaling experiment's workers to CPUs.
    #[arg(long)]
    no_pin: bool,
}

pub fn run(args: SuiteArgs) -> ExitCode {
    let mut cfg = if args.quick {
        SuiteConfig::quick()
    } else {
        SuiteConfig::full()
    };
    cfg.choose(args.runs, args.packets, args.seed, !args.no_pin);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = args.out.unwrap_or_else(|| suite::default_out_dir(now));
    // Fail before a minute of measuring, not after.
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("flowpath bench suite: cannot create {}: {e}", out.display());
        return ExitCode::from(1);
    }

    let mut progress = StderrProgress::new();
    let results = suite::run(&cfg, |p| progress.update(p));
    progress.finish();

    print!("{}", suite::tables(&results));
    match suite::write_outputs(&results, &out) {
        Ok(files) => {
            println!();
            println!("wrote {} files to {}:", files.len(), out.display());
            for f in files {
                println!("  {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("flowpath bench suite: writing to {}: {e}", out.display());
            ExitCode::from(1)
        }
    }
}
