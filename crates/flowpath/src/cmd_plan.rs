//! `flowpath plan` and `flowpath calibrate`: how many cores a network service needs, from
//! a calibration profile of what a packet costs (see `flowpath_planner`).

use flowpath_bench::suite::{self, StderrProgress};
use flowpath_gen::TrafficClass;
use flowpath_planner::check::{self, CheckRow};
use flowpath_planner::input::PlanInput;
use flowpath_planner::plan;
use flowpath_planner::report;
use flowpath_planner::units;
use flowpath_planner::{calibrate as cal, profile, stateful, Profile};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where `flowpath calibrate` writes and `flowpath plan` looks first.
const DEFAULT_PROFILE: &str = "flowpath-profile.toml";

const PLAN_ABOUT: &str = "How many server cores a network service needs.

For a rate, a frame size, a miss rate (share of packets that are new flows) and a traffic
class, with a profile of what a hit and a miss cost in cycles:
  cycles/packet = (1 - m) * hit(size) + m * miss(size)      (the talk's two-cost model;
                  a calibrated profile's measured curve where it has one)
  cores         = the fewest n with n * eff(n) * tsc_hz * (1 - headroom) >= rate * cycles
  utilisation   = rate * cycles / (n * eff(n) * tsc_hz)
  miss share    = the misses' part of cycles/packet: m * miss(size), or with a measured
                  curve everything above (1 - m) * hit(size)
eff(n) is the profile's scaling efficiency; beyond its core counts the last one is used
(and the output says so). A rate in bits per second becomes packets per second with
(frame + 20 B of preamble, start delimiter and inter-frame gap) * 8 bits a frame: 10 Gbps
of 64 B frames is 14.88 Mpps. IMIX is 7:4:1 of 64/570/1518 B frames, 353.8 B on average
(the talk's \"358 B\" is the same mix defined on 40/576/1500 B IP packets).

Scenarios (the talk's what-ifs), each against the baseline:
  miss path Nx faster  --miss-speedup N (default 10): Amdahl, S = 1/((1-p)+p/s), with p
                       the miss share of the cycles from the profile and the miss rate
  N cores for misses   --miss-cores N: misses only there, hits on the other cores (says
                       if N cores cannot carry the misses, and counts what they need)
  hits offloaded       --offload-share 50% [--offload-rate 90Mpps]: that share of the
                       hits costs the server nothing, up to the hardware's rate
  all of the above     when --miss-cores or --offload-share is given
and for each the cores freed times --core-year-usd (default $1,000, the talk's figure).

Stateful (connection tracking): --new-conns-per-sec R and/or --established-pps P instead of
--rate/--size/--miss-rate, with the profile's calibrated costs (its [conntrack] table;
`flowpath calibrate` measures them with the bench's ct_new and ct_established cases):
  load  = R * c_new + P * c_est   (+ S * c_syn with --synflood-pps S, a what-if)
  cores = the fewest n with n * eff(n) * tsc_hz * (1 - headroom) >= load
with the new-connection path --miss-speedup times faster (Amdahl) and the money. A profile
without connection-tracking costs is refused: 'not calibrated for connection tracking'.

Profiles: --profile FILE (.toml, or .json) or a built-in name: ovs-kernel (the talk's OVS
kernel datapath: 4,600 cycles a hit, 50,000 a miss, 2.6 GHz) or ovs-dpdk (400 a hit,
miss assumed 50,000). Without --profile: ./flowpath-profile.toml (`flowpath calibrate`
writes it) if it exists, else ovs-kernel.

Examples:
  flowpath plan --rate 25Gbps --size imix --miss-rate 5% --profile ovs-kernel
  flowpath plan --rate 10Mpps --size 64 --miss-rate 1% --traffic vxlan --headroom 20% \\
      --miss-cores 2 --offload-share 50% --json
  flowpath plan --rate 5.4Mpps --size imix --miss-rate 0% --profile ovs-dpdk --html plan.html
  flowpath plan --new-conns-per-sec 50k --established-pps 2Mpps --synflood-pps 1Mpps";

#[derive(clap::Args)]
#[command(after_long_help = PLAN_ABOUT)]
pub struct PlanArgs {
    /// Offered rate: packets per second (10Mpps, 560kpps) or bits per second on the wire
    /// (25Gbps, 10G).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    rate: Option<String>,
    /// Frame size in bytes including FCS (64..=9018), or imix. For VXLAN, the outer frame.
    #[arg(long, value_name = "BYTES|imix", allow_hyphen_values = true)]
    size: Option<String>,
    /// Share of packets that are new flows (cache misses): 5% or 0.05.
    #[arg(long, value_name = "SHARE", allow_hyphen_values = true)]
    miss_rate: Option<String>,
    /// Stateful plan: new connections per second (50k, 1.2M), sized from the profile's
    /// calibrated cost per new connection (instead of --rate/--size/--miss-rate).
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    new_conns_per_sec: Option<String>,
    /// Stateful plan: packets per second of established connections.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    established_pps: Option<String>,
    /// Stateful plan's what-if: a SYN flood of this many packets per second on top.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    synflood_pps: Option<String>,
    /// Traffic class: ipv4, ipv6, vxlan (decapsulated at a tunnel port) or vxlan_encap (sent
    /// out of one); VXLAN frame sizes are the VXLAN frame on the wire.
    #[arg(long, value_name = "CLASS", default_value = "ipv4")]
    traffic: String,
    /// Profile file (.toml or .json) or built-in name (ovs-kernel, ovs-dpdk)
    /// [default: ./flowpath-profile.toml if present, else ovs-kernel].
    #[arg(long, value_name = "P")]
    profile: Option<String>,
    /// Share of every core to keep free, e.g. 20%.
    #[arg(
        long,
        value_name = "SHARE",
        default_value = "0%",
        allow_hyphen_values = true
    )]
    headroom: String,
    /// Scenario: the miss path this many times faster.
    #[arg(
        long,
        value_name = "S",
        default_value = "10",
        allow_hyphen_values = true
    )]
    miss_speedup: String,
    /// Scenario: this many cores handle only misses.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    miss_cores: Option<String>,
    /// Scenario: this share of the hits is forwarded by hardware, e.g. 50%.
    #[arg(long, value_name = "SHARE", allow_hyphen_values = true)]
    offload_share: Option<String>,
    /// The offload hardware's packet rate.
    #[arg(
        long,
        value_name = "RATE",
        default_value = "90Mpps",
        allow_hyphen_values = true
    )]
    offload_rate: String,
    /// Scenario: a new-flow flood of this rate (pps or bps, like --rate) arrives on top of
    /// the service: cores to keep the service's rate, undefended and with the miss budget.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    attack_rate: Option<String>,
    /// The miss budget the attack scenario assumes: the most of each core the slow path
    /// takes while hits are served (flowpath's `slow_path_share`, default 50%).
    #[arg(
        long,
        value_name = "SHARE",
        default_value = "50%",
        allow_hyphen_values = true
    )]
    attack_budget: String,
    /// Yearly revenue of one server core, USD (for the money each scenario frees).
    #[arg(
        long,
        value_name = "USD",
        default_value = "1000",
        allow_hyphen_values = true
    )]
    core_year_usd: String,
    /// Print JSON (cores, utilisation, miss_share_of_cycles, cycles_per_packet, pps,
    /// scenarios, ...) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report with the cores-vs-miss-rate chart.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

fn fail(cmd: &str, msg: &str) -> ExitCode {
    eprintln!("flowpath {cmd}: {msg}");
    ExitCode::from(2)
}

/// The profile named by `--profile`, or the default one (and a note on stderr).
fn choose_profile(spec: Option<&str>, quiet: bool) -> Result<Profile, String> {
    match spec {
        Some(s) => profile::load(s),
        None if Path::new(DEFAULT_PROFILE).exists() => profile::load(DEFAULT_PROFILE),
        None => {
            if !quiet {
                eprintln!(
                    "flowpath plan: no --profile and no ./{DEFAULT_PROFILE}: using the built-in ovs-kernel-2019 \
                     (the talk's figures; `flowpath calibrate` measures this machine)"
                );
            }
            Ok(profile::builtin("ovs-kernel-2019").expect("built in"))
        }
    }
}

fn plan_input(a: &PlanArgs) -> PlanInput {
    PlanInput {
        rate: a.rate.clone().unwrap_or_default(),
        size: a.size.clone().unwrap_or_default(),
        miss_rate: a.miss_rate.clone().unwrap_or_default(),
        traffic: a.traffic.clone(),
        headroom: a.headroom.clone(),
        miss_speedup: a.miss_speedup.clone(),
        miss_cores: a.miss_cores.clone(),
        offload_share: a.offload_share.clone(),
        offload_rate: a.offload_rate.clone(),
        core_year_usd: a.core_year_usd.clone(),
        attack_rate: a.attack_rate.clone(),
        attack_budget: a.attack_budget.clone(),
        new_conns_per_sec: a.new_conns_per_sec.clone(),
        established_pps: a.established_pps.clone(),
        synflood_pps: a.synflood_pps.clone(),
    }
}

/// `flowpath plan --new-conns-per-sec R --established-pps P [--synflood-pps S]`.
fn run_stateful(a: &PlanArgs, input: &PlanInput) -> ExitCode {
    let (w, opts) = match input.parse_stateful() {
        Ok(x) => x,
        Err(e) => return fail("plan", &e),
    };
    let profile = match choose_profile(a.profile.as_deref(), a.json) {
        Ok(p) => p,
        Err(e) => return fail("plan", &e),
    };
    let p = match stateful::plan(&profile, &w, &opts) {
        Ok(p) => p,
        Err(e) => return fail("plan", &e),
    };
    if a.json {
        println!("{}", stateful::json(&p));
    } else {
        print!("{}", stateful::table(&p, &profile));
    }
    if let Some(path) = &a.html {
        if let Err(e) = std::fs::write(path, stateful::html(&p, &profile)) {
            return fail(
                "plan",
                &format!("--html: cannot write {}: {e}", path.display()),
            );
        }
        if !a.json {
            println!("\nwrote {}", path.display());
        }
    }
    ExitCode::SUCCESS
}

pub fn run(a: PlanArgs) -> ExitCode {
    let input = plan_input(&a);
    if input.is_stateful() {
        return run_stateful(&a, &input);
    }
    let (w, opts, given) = match input.parse() {
        Ok(x) => x,
        Err(e) => return fail("plan", &e),
    };
    let profile = match choose_profile(a.profile.as_deref(), a.json) {
        Ok(p) => p,
        Err(e) => return fail("plan", &e),
    };
    let p = match plan::plan(&profile, &w, &opts) {
        Ok(p) => p,
        Err(e) => return fail("plan", &e),
    };
    if a.json {
        println!("{}", report::json(&p));
    } else {
        print!("{}", report::table(&p, &profile, &given));
    }
    if let Some(path) = &a.html {
        if let Err(e) = std::fs::write(path, report::html(&p, &profile, &opts, &given)) {
            return fail(
                "plan",
                &format!("--html: cannot write {}: {e}", path.display()),
            );
        }
        if !a.json {
            println!("\nwrote {}", path.display());
        }
    }
    ExitCode::SUCCESS
}

const CALIBRATE_ABOUT: &str = "Measure this machine and write a planner profile.

Everything runs the real datapath on generated frames from memory, timed with the TSC:
  1. from the characterisation suite (`flowpath bench suite`): IPv4 hits and misses at
     64, IMIX, 512, 1024 and 1518 B, for a per-byte cost (kept only if the slope is
     positive and beyond two standard errors, else 0: flat), and the scaling experiment;
  2. a calibration pass, measured as the suite measures a point (a fresh datapath whose
     megaflow cache is first filled, a warm-up, then timed runs; median reported), with
     the runs of all points interleaved: per traffic class (IPv4, IPv6, VXLAN) cycles per
     packet at 0, 1, 2, 5, 10, 20, 50 and 100 % new flows (the hit cost, the curve, the
     miss cost), IPv4 also at IMIX and 1518 B; each point's runs' min-max is kept
     (the profile's bands);
  3. connection tracking, where the bench has the cases: cycles per new connection
     (ct_new), per established packet (ct_established) and per SYN (ct_synflood).
The planner interpolates the measured curves: new flows also displace established flows
from the exact-match cache, so the two-cost line (1-m)*hit + m*miss alone is optimistic
by ~25 % at 10 % new flows here. Scaling is the suite's experiment's (pinned workers, each
count against worker 0's own one-core runs), at most 100 %. IPv6 and VXLAN use IPv4's per-byte and frame-size effects (only IPv4 is
swept over sizes).

The profile (TSC frequency, CPU model, date, git revision, command line, load average,
notes on how every number was made) goes to --out: TOML, or JSON if the name ends in
.json; by default ./flowpath-profile.toml, which `flowpath plan` uses without --profile.
About a minute on 2 cores; --quick about 15 seconds.

--check: prediction against measurement. The same pass also measures workloads the
calibration does not: IPv4 64 B 0 %, IPv4 IMIX 3 %, IPv4 1518 B 15 %, IPv6 64 B 7 %,
VXLAN 512 B 30 % new flows, and IPv4 64 B 1 % on 2 cores (where there are 2), and prints
per workload the planner's Mpps per core from the new profile as a point and as an interval
(the point times the calibration points' own min/median and max/median; on several cores
also times the scaling point's), the measured Mpps per core (min-max), the verdict (the
measured median inside or OUTSIDE the interval) with the interval's width, the point error,
the two-cost line's prediction and error, and the cores the planner computes for the
measured rate. Multi-core workloads pin worker k to the k-th CPU, as the suite does. Being in the same interleaved pass, a shared machine's
slow phases fall on the calibration and the check alike.";

#[derive(clap::Args)]
#[command(after_long_help = CALIBRATE_ABOUT)]
pub struct CalibrateArgs {
    /// Fewer runs and packets per point (5 runs of 200,000 packets).
    #[arg(long)]
    quick: bool,
    /// Where to write the profile (.toml, or .json).
    #[arg(long, value_name = "PROFILE.toml", default_value = DEFAULT_PROFILE)]
    out: PathBuf,
    /// The profile's name [default: calibrated-<UTC date>].
    #[arg(long)]
    name: Option<String>,
    /// Then check the planner's predictions against measured workloads.
    #[arg(long)]
    check: bool,
    /// Print JSON ({"profile": ..., "measured": [...], "check": [...]}) instead of text.
    #[arg(long)]
    json: bool,
    /// Also write that JSON to FILE (the profile, the check's measurements and rows).
    #[arg(long, value_name = "FILE")]
    check_json: Option<PathBuf>,
    /// Timed runs per point; the median is used [default: 15, --quick 5].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Packets per timed run at miss rates up to 10 % [default: 700,000, --quick 200,000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1000..))]
    packets: Option<u64>,
    /// Seed of the sources' new-flow stamping.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Do not pin the scaling workers to CPUs.
    #[arg(long)]
    no_pin: bool,
}

pub fn calibrate(a: CalibrateArgs) -> ExitCode {
    let mut cfg = cal::suite_config(a.quick);
    cfg.choose(a.runs, a.packets, a.seed, !a.no_pin);
    // Fail before a minute of measuring, not after.
    if let Err(e) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&a.out)
    {
        return fail(
            "calibrate",
            &format!("--out: cannot write {}: {e}", a.out.display()),
        );
    }
    let mut progress = StderrProgress::new();
    let results = suite::run(&cfg, |p| progress.update(p));
    progress.finish();
    // The curves' points, and with --check the check workloads, in one interleaved pass.
    let pass = cal::calibration_pass();
    let workloads = if a.check {
        check::default_workloads(suite::available_cores())
    } else {
        Vec::new()
    };
    let all: Vec<_> = pass.iter().chain(&workloads).copied().collect();
    let mut measured = check::measure(&cfg, &all, |s| eprintln!("calibrate: {s}"));
    let checked = measured.split_off(pass.len());
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("calibrated-{}", &results.meta.started_utc[..10]));
    let prof = cal::profile_from(&results, &measured, &name);
    if let Err(e) = profile::save(&prof, &a.out) {
        return fail("calibrate", &format!("--out: {e}"));
    }
    let rows: Option<Vec<CheckRow>> = if a.check {
        match check::compare(&prof, &checked) {
            Ok(r) => Some(r),
            Err(e) => return fail("calibrate", &format!("--check: {e}")),
        }
    } else {
        None
    };
    let v = serde_json::json!({ "profile": prof, "measured": checked, "check": rows });
    let json = serde_json::to_string_pretty(&v).expect("serialisable") + "\n";
    if let Some(path) = &a.check_json {
        if let Err(e) = std::fs::write(path, &json) {
            return fail(
                "calibrate",
                &format!("--check-json: cannot write {}: {e}", path.display()),
            );
        }
    }
    if a.json {
        print!("{json}");
    } else {
        print!("{}", summary(&prof));
        println!("wrote {}", a.out.display());
        if let Some(rows) = &rows {
            println!("\nprediction vs measurement (this machine, this run; Mpps per core):\n");
            print!("{}", check::table(rows));
            println!();
            print!("{}", check::verdict(rows, &prof));
        }
    }
    ExitCode::SUCCESS
}

/// A few lines on what the profile holds.
fn summary(p: &Profile) -> String {
    let mut s = format!(
        "profile {}: TSC {:.3} GHz, scaling {}\n",
        p.name,
        p.tsc_hz / 1e9,
        p.scaling
            .iter()
            .enumerate()
            .map(|(i, e)| format!(
                "{} core{} {}",
                i + 1,
                if i == 0 { "" } else { "s" },
                units::pct(*e)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for class in TrafficClass::ALL {
        let c = p.classes.get(class);
        s.push_str(&format!(
            "  {:<11}  hit {:>6} + {:.3}/byte   miss {:>7} + {:.3}/byte cycles\n",
            class.name(),
            report::thousands(c.hit.fixed_cycles),
            c.hit.per_byte_cycles,
            report::thousands(c.miss.fixed_cycles),
            c.miss.per_byte_cycles
        ));
    }
    match &p.conntrack {
        Some(c) => s.push_str(&format!(
            "  conntrack    new connection {} cycles, established packet {}{}\n",
            report::thousands(c.new_connection_cycles),
            report::thousands(c.established_packet_cycles),
            c.syn_cycles
                .map_or(String::new(), |x| format!(", SYN {}", report::thousands(x)))
        )),
        None => s.push_str("  conntrack    not calibrated (see the notes)\n"),
    }
    for n in &p.notes {
        s.push_str(&format!("  - {n}\n"));
    }
    s
}
