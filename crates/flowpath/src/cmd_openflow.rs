//! `flowpath bench openflow`: the OpenFlow 1.3 channel measured over TCP loopback, side by
//! side with a private ovs-vswitchd (see `flowpath_switchbench::openflow`).

use flowpath_base::progress;
use flowpath_switchbench::openflow::{self, OpenFlowBenchConfig};
use std::process::ExitCode;
use std::time::Duration;

const ABOUT: &str = "The OpenFlow 1.3 channel, measured over TCP loopback with the bench as the
client (a tool or a controller), in one run, side by side:

  1. flow_mod rate: --flow-mods distinct ADDs (table 0, priority 100, ip, nw_dst exact,
     output:1..4), pre-encoded and written as fast as the socket takes them on one
     connection, then one BARRIER_REQUEST; time from the first byte to BARRIER_REPLY; no
     error may come back and the switch must then hold exactly that many rules. Against
     flowpath in this process (a fresh switch per run, without and with a state file — the
     second is what a real switch does: the barrier saves the rule set) and a private
     ovs-vswitchd (own ovsdb and run directories in /tmp, netdev bridge without ports,
     set-controller ptcp:PORT:127.0.0.1) when OVS is installed and we are root; otherwise
     the table says why it was skipped. Then the way operators type it, `ovs-ofctl -O
     OpenFlow13 add-flows tcp:... FILE` (a barrier after every flow_mod), with
     --ofctl-flow-mods flows, against both (flowpath with a state file with
     --ofctl-state-flow-mods: each barrier saves the whole rule set there). Runs are interleaved between systems; median
     and min-max of --runs, and each rate over OVS's.
  2. packet_in -> packet_out round trip: an in-process worker on two memory ports (1 and
     2) with the channel on its queues; table-miss flow priority=0 actions=CONTROLLER:65535
     installed over OpenFlow; for each of --round-trips distinct frames injected on port 1,
     one at a time, the bench reads the PACKET_IN, answers PACKET_OUT(in_port=1, output:2)
     and waits until port 2 has sent the frame. Median, p99, min-max (µs), with the worker's
     default idle naps and busy polling. The packet-in rate limit is raised for this (the
     default is 1,000/s per port, burst 100); then a storm of --storm-misses distinct misses
     over --storm-seconds with the default limit: offered, delivered, rate-dropped.
  3. established flows while flow_mods arrive: 64 flows forwarded port 1 -> 2 (one frame
     per flow every millisecond) while --traffic-flow-mods unrelated flow_mods (table 0 at
     a higher priority on other addresses, and tables 1-3) and a barrier arrive; injected
     vs transmitted (must be equal), misses and upcalls during the storm.

Every figure is wall-clock time on this machine; on a shared VM compare the systems
within one run. Takes about a minute with the defaults (longer with OVS).";

#[derive(clap::Args)]
#[command(after_long_help = ABOUT)]
pub struct OpenFlowArgs {
    /// Timed runs of the one-connection flow_mod measurement per system.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// flow_mods per run over one connection (barrier at the end).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..=16_000_000))]
    flow_mods: u32,
    /// flows per `ovs-ofctl add-flows` run (a barrier after each; 0 skips it).
    #[arg(long, default_value_t = 10_000)]
    ofctl_flow_mods: u32,
    /// flows per `ovs-ofctl add-flows` run against flowpath with a state file (every
    /// barrier saves the whole rule set, so the time grows with the square of this).
    #[arg(long, default_value_t = 1_000)]
    ofctl_state_flow_mods: u32,
    /// Timed `ovs-ofctl add-flows` runs per system.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    ofctl_runs: u64,
    /// packet_in -> packet_out round trips (0 skips them).
    #[arg(long, default_value_t = 2_000)]
    round_trips: u32,
    /// Distinct misses in the packet-in storm (0 skips it).
    #[arg(long, default_value_t = 50_000)]
    storm_misses: u32,
    /// Seconds over which the storm's misses are offered.
    #[arg(long, default_value_t = 1.0)]
    storm_seconds: f64,
    /// Unrelated flow_mods sent while established traffic flows (0 skips it).
    #[arg(long, default_value_t = 10_000)]
    traffic_flow_mods: u32,
    /// Do not start ovs-vswitchd even when it is installed.
    #[arg(long)]
    no_ovs: bool,
    /// Print one JSON object (every run, the machine) instead of the tables.
    #[arg(long)]
    json: bool,
    /// Print one Markdown table with a caption naming the command, machine and date (what
    /// `scripts/results.py` pastes into README.md and docs/openflow.md).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
}

pub fn run(args: OpenFlowArgs) -> ExitCode {
    let cfg = OpenFlowBenchConfig {
        runs: args.runs as usize,
        flow_mods: args.flow_mods,
        ofctl_flow_mods: args.ofctl_flow_mods,
        ofctl_runs: args.ofctl_runs as usize,
        ofctl_state_flow_mods: args.ofctl_state_flow_mods,
        round_trips: args.round_trips,
        storm_misses: args.storm_misses,
        storm_seconds: args.storm_seconds.clamp(0.01, 60.0),
        traffic_flow_mods: args.traffic_flow_mods,
        traffic_gap: Duration::from_millis(1),
        ovs: !args.no_ovs,
        ..OpenFlowBenchConfig::default()
    };
    let r = openflow::run(&cfg, progress::line);
    progress::clear();
    if args.json {
        println!("{}", openflow::json(&r));
    } else if args.markdown {
        print!("{}", openflow::markdown(&r));
    } else {
        print!("{}", openflow::table(&r));
    }
    let lost = r.traffic.as_ref().is_some_and(|t| t.lost != 0);
    let wrong = r
        .flow_mod
        .iter()
        .any(|x| x.errors > 0 || x.rules_after.iter().any(|&n| n != u64::from(x.flow_mods)));
    if r.failures.is_empty() && !lost && !wrong {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
