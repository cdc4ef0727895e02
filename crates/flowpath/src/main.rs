//! The `flowpath` command: a software switch that knows what every packet costs.
//! One binary; each subcommand is one job (`flowpath --help`).

use clap::{Parser, Subcommand};
use flowpath_bench::command::{self, BenchOptions};
use flowpath_pipeline::Backend;
use std::process::ExitCode;

mod cmd_classifier;
mod cmd_conntrack;
mod cmd_flows;
mod cmd_gen;
mod cmd_inspect;
mod cmd_lab;
mod cmd_openflow;
mod cmd_plan;
mod cmd_rig;
mod cmd_suite;
mod cmd_switch;
mod cmd_xdp_forward;

#[derive(Parser)]
#[command(
    name = "flowpath",
    version,
    about = "A flow-caching software switch that knows what every packet costs.",
    long_about = "A flow-caching software switch that knows what every packet costs.\n\n\
Packets are parsed once into a flow key and looked up in three tiers: a per-core \
exact-match cache, a wildcarded megaflow cache (tuple-space search), and on a miss the \
slow path — a multi-table rule pipeline that installs a megaflow covering every packet \
that would take the same decisions. The hard part is the miss: `flowpath bench` shows \
what each tier costs in TSC cycles per packet on this machine.",
    after_help = "Start with:  flowpath bench            (no root needed; about a minute)\n\
             flowpath bench --json     (the same, for scripts)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure Mpps and cycles per packet for hits and misses on generated traffic.
    #[command(long_about = BENCH_ABOUT, args_conflicts_with_subcommands = true)]
    Bench(BenchCmd),
    /// Generate traffic: flows, sizes, churn, encapsulation; write pcap files.
    Gen(cmd_gen::GenArgs),
    /// Program flows in ovs-ofctl syntax: add, mod, del, replace, dump; check a flows file.
    Flows(cmd_flows::FlowsArgs),
    /// Run the switch: a datapath with its control socket and persistent flow state.
    Run(cmd_flows::RunArgs),
    /// Run the switch daemon on real ports (AF_XDP, AF_PACKET, TAP, pcap) from a TOML config.
    Switch(cmd_switch::SwitchArgs),
    /// Per-worker and per-port counters of a running switch (like pmd-perf-show).
    Stats(cmd_switch::StatsArgs),
    /// A running switch's connection tracker: dump, flush, stats, limits (like dpctl/*-conntrack).
    Conntrack(cmd_conntrack::ConntrackArgs),
    /// Trace a packet through the flow tables: rules met, actions, the megaflow it installs.
    Trace(cmd_inspect::TraceArgs),
    /// The cached megaflows of a running switch, per worker and tier (like dpctl/dump-flows).
    #[command(visible_alias = "megaflows")]
    DumpMegaflows(cmd_inspect::MegaflowsArgs),
    /// Every frame of a capture as the parser sees it: its key or its drop reason.
    Explain(cmd_inspect::ExplainArgs),
    /// Forward every frame from one interface to another in XDP, no lookup (a baseline).
    XdpForward(cmd_xdp_forward::XdpForwardArgs),
    /// Build a netns topology and measure flowpath against Open vSwitch, DPDK and Linux.
    Lab(cmd_lab::LabArgs),
    /// OVS-DPDK on in-memory DPDK devices beside flowpath: connection tracking's cost in both.
    Rig(cmd_rig::RigArgs),
    /// How many cores a service needs at a rate, frame size and miss rate; what-if scenarios.
    Plan(cmd_plan::PlanArgs),
    /// Measure this machine into a planner profile (cycles per hit and miss, scaling).
    Calibrate(cmd_plan::CalibrateArgs),
}

#[derive(clap::Args)]
struct BenchCmd {
    #[command(subcommand)]
    sub: Option<BenchSub>,
    #[command(flatten)]
    args: BenchArgs,
}

#[derive(Subcommand)]
enum BenchSub {
    /// The characterisation suite: the talk's experiments as tables and charts.
    Suite(cmd_suite::SuiteArgs),
    /// Classifier backends (and DPDK's rte_acl) on a ClassBench or flows rule set.
    Classifier(cmd_classifier::ClassifierArgs),
    /// OpenFlow 1.3: flow_mod rate vs ovs-vswitchd, packet_in/packet_out round trip,
    /// established traffic during a flow_mod storm.
    Openflow(cmd_openflow::OpenFlowArgs),
}

const BENCH_ABOUT: &str = "Measure Mpps and TSC cycles per packet, one core, for each cache tier.

Generated 64-byte UDP/IPv4 frames (in memory, no root, no copy per packet) go through the
real datapath: parse, exact-match cache, megaflow cache, slow path, actions, and out to a
counting sink. Cases:
  floor            no datapath: the generated port straight to the sink (what the loop and
                   the traffic cost by themselves; every other case runs on top of this)
  emc_hit          every packet hits the exact-match cache (1,024 flows, L3 forwarding)
  megaflow_hit_N   every packet hits the megaflow cache (EMC off), spread over N subtables
  miss             every packet is a new flow: the 3-table, 1,000-rule pipeline classifies
                   it and installs a megaflow (the cache is full, so each install evicts)
  mixed            established flows plus --miss-rate new flows
  floor_many_flows the floor with many_flows' traffic (a 1M-slot arena: frames come from
                   memory, not the cache, as from a NIC ring)
  many_flows       1,000,000 established flows over 4 megaflow subtables: the EMC holds a
                   sliver, the signature-match cache (--smc-entries, 0 = off) and the
                   megaflow search answer the rest; many_flows_zipf: Zipf(1.1) popularity
  flood            miss storm: port A offers 1,000 established flows at half the rate it
                   reaches alone, port B sends nothing but new flows as fast as the worker
                   takes them; reports A's throughput kept (established_retained) with no
                   defence and with the defaults (per-port miss budget, mask rate and limit)
  tse              tuple-space explosion: port A offers 10,000 established flows inside an
                   ACL (built-in 1,000-rule ClassBench acl2, or --rules), port B sends
                   packets crafted to create megaflows with new masks (--attack-rate,
                   default as fast as taken); no defence, ranking only, the defaults

The cost cases (emc_hit … mixed) run with the miss budget off: they measure what each
tier costs. flood and tse run the switch's defaults.

Each case warms up, then runs --runs times, each run in a fresh process (--in-process: all
in this one); it reports the median cycles per packet with min and max, Mpps at the TSC
rate, which tier answered, and cycles per stage from the datapath's own TSC stamps.
Absolute numbers are noisy on a shared VM: compare cases within one run.";

#[derive(clap::Args)]
struct BenchArgs {
    /// Cases to run (repeatable): emc_hit, megaflow_hit_N (N in 1..=16), miss, mixed,
    /// flood, tse. Default: emc_hit, megaflow_hit_1, megaflow_hit_4, megaflow_hit_16,
    /// miss, mixed, flood, tse.
    #[arg(long = "case", value_name = "CASE")]
    cases: Vec<String>,
    /// Timed runs per case (the median is reported), each a fresh process unless
    /// --in-process.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Packets per timed run for hit cases (miss-heavy cases run a tenth, at least 50,000).
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    /// Established flows in the emc_hit and mixed cases.
    #[arg(long, default_value_t = 1024)]
    flows: usize,
    /// Share of packets that start a new flow in the mixed case, e.g. 0.1 or 10%.
    #[arg(long, default_value = "10%", value_parser = flowpath_planner::units::parse_share)]
    miss_rate: f64,
    /// Frame size in bytes including FCS (RFC 2544 convention: 64 → 60 bytes in memory).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(64..=9018))]
    frame_size: u16,
    /// Slow-path classifier: tss (tuple-space search, prefix tries), tss-whole-masks (no
    /// tries), tree (decision tree) or linear
    /// [default: tss; tree for the tse case, whose ACL megaflows come from rule geometry].
    #[arg(long)]
    classifier: Option<Backend>,
    /// Insert one flow in N into the exact-match cache (1 = every flow).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    emc_insert_inv_prob: u32,
    /// Signature-match cache entries (0 = off; the megaflow_hit_N cases always run
    /// without it, to measure the subtable search).
    #[arg(long, default_value_t = flowpath_datapath::DatapathConfig::default().smc_entries)]
    smc_entries: usize,
    /// flood/tse: the attacker's packets per second (e.g. 10000, 10k, 1M, 1.5Mpps);
    /// default: as fast as the worker takes them.
    #[arg(long, value_name = "PPS", value_parser = flowpath_planner::units::parse_packet_rate)]
    attack_rate: Option<f64>,
    /// flood/tse: port A's offered rate as a share of what it reaches alone.
    #[arg(long, default_value = "50%", value_parser = flowpath_planner::units::parse_share)]
    established_load: f64,
    /// tse: the ACL (ClassBench filters or a flows file) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    rules: Option<std::path::PathBuf>,
    /// Print a JSON array (one object per case) instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the tables as Markdown with a caption naming the command, machine and date
    /// (what `scripts/results.py` pastes into README.md and docs/performance.md).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// The VXLAN cases' underlay (outer headers): ipv4 or ipv6. `--case vxlan_decap
    /// --underlay ipv6` is the same as `--case vxlan_decap_ipv6`.
    #[arg(long, default_value = "ipv4", value_parser = ["ipv4", "ipv6"])]
    underlay: String,
    /// Also measure what a rule change costs with a full megaflow cache: revalidating
    /// every megaflow versus flushing them (text output only).
    #[arg(long)]
    rule_change: bool,
    /// Also time a freshly made datapath's first new-flow flood batch by batch: N new flows
    /// (262,144 if not given: four times the megaflow cache) through the miss case's rules
    /// from its first packet. Reports cycles per packet, the batch percentiles and worst
    /// batch, what making the datapath cost, and the page faults. The cost cases warm up
    /// and never see this (text output only).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "262144")]
    first_flood: Option<u64>,
    /// Also time `flowpath flows replace` of N flows (/24 routes) over N others: parsing,
    /// the one atomic rule-set swap, and the state-file save (text output only).
    #[arg(long, value_name = "N")]
    replace: Option<usize>,
    /// Compare with another flowpath binary (an older build, say): each of `--runs`
    /// rounds runs every case once in this binary and once in that one (each a child
    /// process with the same options, `--runs 1 --json`), alternating which goes first,
    /// and the table shows both builds' cycles per packet side by side with their ratio.
    /// For A/B on a machine whose speed drifts. Cost cases only (not flood or tse).
    #[arg(long, value_name = "FLOWPATH")]
    against: Option<std::path::PathBuf>,
    /// Keep every run of a case in this one process (each case warmed up once). By
    /// default, with --runs above 1, each run is a fresh child process (`--runs 1
    /// --json`) running every cost case once, and the rows pool them: a process on a VM
    /// can run at one of two speeds throughout, or fall in a slow spell of seconds, so
    /// runs in one process are not independent. Use this under a profiler (perf,
    /// callgrind), which follows one process.
    #[arg(long)]
    in_process: bool,
    /// With --against: end every round with a second run of this build, and show the
    /// per-round ratio of its two runs beside the comparison: the build against itself,
    /// so what the machine's noise alone reads (a ratio between the builds inside that
    /// band says nothing). Costs half as much time again.
    #[arg(long, requires = "against")]
    noise: bool,
}

fn main() -> ExitCode {
    // `type = "generator"` switch ports: the traffic generator opens them.
    flowpath_ports::register_generator(|name, flows, size| {
        let src = flowpath_gen::InMemorySource::udp4_flows(flows as usize, size as usize);
        Box::new(flowpath_gen::GeneratedPort::new(name, src))
    });
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(BenchCmd {
            sub: Some(BenchSub::Suite(args)),
            ..
        }) => cmd_suite::run(args),
        Command::Bench(BenchCmd {
            sub: Some(BenchSub::Classifier(args)),
            ..
        }) => cmd_classifier::run(args),
        Command::Bench(BenchCmd {
            sub: Some(BenchSub::Openflow(args)),
            ..
        }) => cmd_openflow::run(args),
        Command::Bench(BenchCmd { sub: None, args }) => bench(args),
        Command::Gen(args) => cmd_gen::run(args),
        Command::Flows(args) => cmd_flows::run(args),
        Command::Run(args) => cmd_flows::run_switch(args),
        Command::Switch(args) => cmd_switch::run(args),
        Command::Stats(args) => cmd_switch::stats(args),
        Command::Conntrack(args) => cmd_conntrack::run(args),
        Command::Trace(args) => cmd_inspect::trace(args),
        Command::DumpMegaflows(args) => cmd_inspect::megaflows(args),
        Command::Explain(args) => cmd_inspect::explain(args),
        Command::Lab(args) => cmd_lab::run(args),
        Command::Rig(args) => cmd_rig::run(args),
        Command::XdpForward(args) => cmd_xdp_forward::run(args),
        Command::Plan(args) => cmd_plan::run(args),
        Command::Calibrate(args) => cmd_plan::calibrate(args),
    }
}

fn bench(args: BenchArgs) -> ExitCode {
    let opts = BenchOptions {
        cases: args.cases,
        runs: args.runs,
        packets: args.packets,
        flows: args.flows,
        miss_rate: args.miss_rate,
        frame_size: args.frame_size as usize,
        classifier: args.classifier,
        emc_insert_inv_prob: args.emc_insert_inv_prob,
        smc_entries: args.smc_entries,
        attack_rate: args.attack_rate,
        established_load: args.established_load,
        rules: args.rules,
        json: args.json,
        markdown: args.markdown,
        ipv6_underlay: args.underlay == "ipv6",
        rule_change: args.rule_change,
        first_flood: args.first_flood,
        replace: args.replace,
        against: args.against,
        in_process: args.in_process,
        noise: args.noise,
    };
    match command::run(&opts, flowpath_switchbench::replace::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", e.message);
            if e.usage {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
