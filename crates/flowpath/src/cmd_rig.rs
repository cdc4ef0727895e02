//! `flowpath rig`: OVS-DPDK on in-memory DPDK devices beside flowpath's datapath, the same
//! UDP connections and security-group flows through both, one table (arguments only; the
//! rig is `flowpath_lab::dpdkrig`).

use flowpath_lab::dpdkrig::{self, FlowSet, RigConfig};
use flowpath_lab::topo;
use std::process::ExitCode;

const ABOUT: &str = "Measure connection tracking's cost in OVS-DPDK and in flowpath, same run.

The traffic: --conns UDP connections seen both ways (each connection's packet from a
client in 10.0.0.0/16 to 192.168.0.1:5001, then its reply), 64-byte frames, written once
to a pcap with flowpath's generator.

OVS-DPDK (/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk, run by path with its own
ovsdb-server, database, sockets and run directory; the system's OVS is never touched):
dpdk-init=true, dpdk-extra=--no-pci with a private hugetlbfs and file prefix,
dpdk-socket-mem=512, the PMD on --cpu. Port 1 is `net_pcap0,rx_pcap=<the pcap>,
infinite_rx=1` (the capture replayed from memory forever), port 2 `net_null0,no-rx=1` (a
sink). After --warmup seconds its PMD counters are cleared and read back
(`dpif-netdev/pmd-perf-show`) over --runs windows of --duration seconds.

flowpath: the same frames replayed from memory into its datapath (the worker loop the
switch runs), the same flows parsed from the same text, a tracker of its own; timed with
the TSC on --cpu.

Flow sets (--flows; both sides load the same ovs-ofctl text, keyed by address direction
since the rig has one receiving port):
  plain  table=0 ip,nw_src=10.0.0.0/16 -> output:2; ip,nw_dst=10.0.0.0/16 -> output:2
  ct     table=0 ip,ct_state=-trk -> ct(table=1,zone=1)
         table=1 +trk+inv -> drop; +trk+new,nw_src=10.0.0.0/16 -> ct(commit,zone=1),output:2;
                 +trk+est,nw_src=10.0.0.0/16 -> output:2; +trk+est,nw_dst=10.0.0.0/16 -> output:2

The table: cycles a packet median (min-max) and Mpps for each side, the share of packets
forwarded, and OVS/flowpath. Where OVS-DPDK, huge pages or root are missing, its side
says why and flowpath's still runs. Everything started or changed (daemons, huge pages,
the hugetlbfs mount, temp files) is undone on exit, on an error and on Ctrl-C.";

#[derive(clap::Args)]
#[command(long_about = ABOUT)]
pub struct RigArgs {
    /// Flow sets, comma-separated: plain, ct [default: plain,ct].
    #[arg(long = "flows", value_delimiter = ',', value_name = "SETS")]
    sets: Vec<String>,
    /// UDP connections (each seen both ways).
    #[arg(long, default_value_t = 1024)]
    conns: u32,
    /// Measurement windows per side and flow set.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seconds per OVS-DPDK window.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Seconds of traffic through OVS-DPDK before the first window.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Packets per flowpath timed run.
    #[arg(long, default_value_t = 2_000_000)]
    packets: u64,
    /// CPU for OVS's PMD and flowpath's measuring thread.
    #[arg(long, default_value_t = 1)]
    cpu: usize,
    /// Print the table as Markdown with a caption (command, CPU, TSC, kernel, date).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: RigArgs) -> ExitCode {
    let sets: Result<Vec<FlowSet>, String> = if args.sets.is_empty() {
        Ok(FlowSet::ALL.to_vec())
    } else {
        args.sets.iter().map(|s| FlowSet::parse(s.trim())).collect()
    };
    let sets = match sets {
        Ok(s) => s,
        Err(e) => {
            eprintln!("flowpath rig: --flows: {e}");
            return ExitCode::from(2);
        }
    };
    if !(1..=65_000).contains(&args.conns) {
        eprintln!("flowpath rig: --conns: 1 to 65,000 (clients are inside 10.0.0.0/16)");
        return ExitCode::from(2);
    }
    let cfg = RigConfig {
        sets,
        conns: args.conns,
        runs: args.runs.max(1),
        duration: args.duration,
        warmup: args.warmup,
        pmd_cpu: args.cpu,
        fp_packets: args.packets.max(1),
    };
    let skip = dpdkrig::preflight();
    if let Some(why) = &skip {
        eprintln!("flowpath rig: OVS-DPDK skipped: {why}");
    }
    if let Err(e) = topo::install_signal_handler() {
        eprintln!("flowpath rig: {e}");
        return ExitCode::FAILURE;
    }
    let rows = dpdkrig::run(&cfg, skip.as_deref());
    topo::cleanup_all();
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flowpath rig: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("flowpath rig: {e}"),
        }
    } else if args.markdown {
        print!("{}", dpdkrig::markdown(&rows));
    } else {
        print!("{}", dpdkrig::table(&rows));
    }
    if topo::interrupted() {
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}
