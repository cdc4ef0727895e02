//! `flowpath lab`: a netns topology, the same traffic through flowpath and its peers, one table.

use flowpath_lab::peers::{self, XdpBuild, SETUP_SCRIPT};
use flowpath_lab::{report, systems, topo, Case, Class, GenChoice, Lab, LabConfig};
use std::process::ExitCode;

const ABOUT: &str =
    "Build a netns topology and measure flowpath against Open vSwitch, DPDK and Linux.

Topology (namespaces named fpl<pid>-*, so parallel runs never collide; all torn down on
exit, on an error and on Ctrl-C/SIGTERM; `--cleanup` removes what a killed run left):

  fpl<pid>-gen  gen0 ==veth== swin  fpl<pid>-sw  swout ==veth== sink0  fpl<pid>-sink
                gdir0 =========================================== sdir0   (generator alone)

The generator (pinned to CPU 0; `flowpath gen --tx`: XDP live frames, or a packet socket
where the kernel refuses those; else trafgen) sends
64-byte UDP/IPv4 frames from gen0 to swin's MAC, destination 10.10.2.2; the switch under
test (pinned to CPU 1) forwards swin -> swout; sink0 drops every frame in a native XDP
program (a veth loses frames sent from XDP unless its peer has one) and its receive counter
is the delivered rate. When a switch puts no native XDP program on swin itself (Linux,
AF_PACKET, OVS generic mode), the lab attaches XDP_PASS there (or turns GRO on) so the
generator's frames are accepted.

Systems, one after the other, each started fresh per case and stopped after it:
  generator          the chosen generator straight into a sink (gdir0 -> sdir0): the most
                     the generator offers; rows within 10 % of it are marked GENERATOR-BOUND
  trafgen            the same with netsniff-ng's trafgen, for comparison
  linux              kernel IPv4 forwarding in the sw namespace (static neighbour, no ARP;
                     RPS moves swin's receive work to CPU 1, whose backlog queue is raised
                     to 30,000 packets for the run: at the default 1,000 it overflows)
  ovs-afxdp          Open vSwitch 3.1 user-space datapath (datapath_type=netdev), afxdp
                     ports, PMD on CPU 1 (the whole ovs-vswitchd pinned there), its own
                     ovsdb-server and run directory, no systemd
  testpmd-afxdp      dpdk-testpmd io forwarding between two net_af_xdp ports (forwarding
                     lcore on CPU 1; huge pages reserved and given back afterwards)
  flowpath-afxdp     `flowpath switch` with AF_XDP ports, one worker on CPU 1
  flowpath-afxdp-2w  the same with two workers, on CPUs 0 and 1: both veth pairs on the
                     switch's path get two queues (ethtool -L; queue q -> worker q) and a
                     generator runs on each of the two CPUs with half the sources (a veth
                     puts XDP frames on the rx queue of the sending CPU), so each worker
                     gets one queue's traffic; its cycles are both CPUs' busy time, the
                     generators' included. The row gives each worker's packets and its rate
                     over flowpath-afxdp's in the same run (target >= 1.8x); with 2 workers
                     and 2 generators on fewer than 4 CPUs it says GENERATOR-BOUND and the
                     ratio is not judged. IPv4 only
  flowpath-afpacket  the same with AF_PACKET ports
  flowpath-xdp       AF_XDP ports with the XDP tier (`[datapath] xdp_tier = true`): cached
                     flows are forwarded by the flow_tier XDP program on swin, misses go
                     to the worker on CPU 1
  xdp-forward        `flowpath xdp-forward`: an XDP program on swin that redirects every
                     frame to swout, no parse and no lookup: the floor for the XDP tier
  xdp-parse-forward  `flowpath xdp-forward --parse`: the XDP tier's parser, then the same
                     redirect (no lookup, actions or counters). Between the two rows above:
                     what it costs over xdp-forward is reading the headers, which any switch
                     pays; what the tier costs over it is the tier's own work

Cases:
  hit   --flows established flows (source addresses 10.1.0.1 up): every packet a cache hit
  miss  every packet a new source address (counting through 10.0.0.0/8): a new flow

Every switch runs the same rules (ovs-ofctl syntax, ports 1 and 2):
  priority=200,ip,in_port=1,nw_src=10.10.1.254,actions=drop   (never hit)
  priority=100,in_port=1,actions=output:2
  priority=0,actions=drop
The never-hit rule puts the source address into every megaflow (OVS runs with its prefix
tries off, prefixes=none, and flowpath likewise, classifier = \"tss-whole-masks\"), so in
the miss case every packet misses the caches, as a new 5-tuple would.

Classes (--class, default ipv4; each system runs every class and case):
  ipv4         UDP/IPv4 frames, the rules above
  ipv6         UDP/IPv6 frames (sources 2001:db8:1::1 up, destination 2001:db8:2::2), the
               never-hit rule on ipv6_src
  vxlan_decap  VXLAN over IPv4 (172.16.0.x -> 172.16.0.2, UDP 4789, VNI 42) carrying the
               UDP/IPv4 frame, into swin; flowpath takes it through a VXLAN tunnel port 10
               (remote_ip = \"flow\") and forwards the inner frame out of swout
               (in_port=10,actions=output:2; the never-hit rule on tun_src). The generator
               varies the outer header only (one outer source port, so each flow or new
               flow is a new outer source address: a remote VTEP); the inner flow is one.
  vxlan_encap  the ipv4 frames in; the rules output to tunnel port 10 (VXLAN over IPv4 to
               10.10.2.2, VNI 42, static next hop: the sink's MAC on swout), so every
               frame leaves 50 bytes longer
  Systems that cannot do a class give a row \"n/a: <why>\" (testpmd io-fwd, xdp-forward and
  the lab's OVS and Linux set-ups have no tunnel; Linux runs IPv4 only). flowpath's XDP
  tier leaves tunnel traffic to user space: its VXLAN rows are the worker's.

What is measured, per window of --duration seconds, --runs windows after --warmup:
  Mpps        packets counted at the sink / window (median [min-max] over the runs)
  cycles/pkt  CPU 1's busy time in the window from /proc/stat (user+nice+system+irq+
              softirq+steal) x the TSC rate / packets delivered. The same for every system:
              a poll-mode switch keeps its core 100 % busy, so its figure is the whole core
              divided by what it delivered; Linux's is its softirq time. A veth receives on
              the sender's CPU by default; the lab makes swin's receive (its XDP program,
              the copy into an AF_XDP socket, the kernel stack) a threaded NAPI pinned to
              CPU 1 (--napi switch-cpu), so every figure is one core's whole work, as on a
              NIC whose queue interrupts go to the switch's core; the transmit on swout and
              the sink's XDP drop also run there, for every system. With --napi sender the
              receive stays on CPU 0 and is in no system's figure (the AF_XDP systems then
              get part of their work done for free).
              For the generator rows the cycles are CPU 0's, i.e. the generator's own.
  own cyc/pkt the switch's own figure: OVS's `ovs-appctl dpif-netdev/pmd-perf-show`
              (stats cleared before each window; JSON field ovs_pmd_cycles_per_packet) and
              flowpath's `flowpath stats` (busy cycles / packets); their upcall counts (misses
              classified by the slow path) are in the notes
  offered     packets the generator's interface sent in the window; offered well above
              delivered means the switch, not the generator, is the limit (rows within 10 %
              of the generator alone are marked GENERATOR-BOUND)
Peers: scripts/setup-lab.sh (root, Debian/Ubuntu) installs everything the lab drives (Open
vSwitch, DPDK testpmd and its AF_XDP driver, netsniff-ng, clang/llvm/libbpf-dev, ...),
reserves huge pages and rebuilds flowpath so that its XDP programs are compiled in (a binary
built while clang was missing has none). Before setting anything up the lab checks what
every system asked for needs and names ALL that is missing, with that script; it then runs
the systems that can run, and the others give a row saying what they lack (the list is
repeated after the table). It refuses only when none can run. `--check` prints what each
system needs and exits 1 if anything is missing. A system that fails to start for another
reason gives a row with its reason, never a failed lab.";

const EXAMPLES: &str = "Examples:
  flowpath lab                                     # everything, ~6 minutes
  flowpath lab --systems generator,ovs-afxdp --cases hit --runs 1 --duration 2
  flowpath lab --systems flowpath-afxdp,flowpath-xdp --class ipv4,vxlan_decap,vxlan_encap
  flowpath lab --systems generator,flowpath-afxdp,flowpath-afxdp-2w   # 1 -> 2 workers
  flowpath lab --systems flowpath-xdp,xdp-forward --cases hit --interleave   # a fair ratio
  flowpath lab --systems flowpath-xdp,xdp-forward,xdp-parse-forward --cases hit --prog-time
                                                   # the XDP programs' own ns a run
  flowpath lab --json > lab.jsonl                  # one JSON object per line (JSON Lines)
  flowpath lab --out lab-results                   # also results.json and chart.svg there
  flowpath lab --cleanup                           # remove leftovers of killed runs
  flowpath lab --check                             # can every system run here? (exit 1: no)";

#[derive(clap::Args)]
#[command(long_about = ABOUT, after_help = EXAMPLES)]
pub struct LabArgs {
    /// Systems to run, comma-separated, in this order: generator, trafgen, linux,
    /// ovs-afxdp, testpmd-afxdp, flowpath-afxdp, flowpath-afxdp-2w, flowpath-afpacket,
    /// flowpath-xdp, xdp-forward, xdp-parse-forward [default: all].
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
    /// Cases, comma-separated: hit, miss [default: hit,miss].
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Traffic classes, comma-separated: ipv4, ipv6, vxlan_decap, vxlan_encap, ipv4_ct (the
    /// IPv4 frames through a stateful security group: connection tracking)
    /// [default: ipv4].
    #[arg(long = "class", value_delimiter = ',', value_name = "CLASSES")]
    classes: Vec<String>,
    /// Seconds per measurement window.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Windows per system and case (the median is reported, with min-max).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Take the windows in rounds: each system (class, case) runs one window per round,
    /// started and warmed up anew, so a slow spell of a shared machine falls on every row
    /// alike instead of on one system's block of windows. Use it for ratios between rows
    /// (the XDP tier against redirect-only); it costs a start and a warm-up per window.
    #[arg(long)]
    interleave: bool,
    /// Seconds of traffic before the first window (caches fill, flows establish).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Established flows in the hit case.
    #[arg(long, default_value_t = 1000)]
    flows: u32,
    /// Pace the generator to this many packets per second in all (e.g. 500k, 2.2M; with
    /// several generators each sends its share) instead of as fast as it goes. Near a
    /// switch's capacity this takes out what an overloading generator costs the switch CPU
    /// (frames it cannot deliver go back to the page pool the switch CPU returns to). A
    /// row offered less than 95 % of the rate says so. Below a row's capacity its CPU idles
    /// between frames and the wake-ups raise its cycles per packet, so compare paced rows
    /// near capacity. `flowpath gen` only.
    #[arg(long, value_name = "PPS", value_parser = flowpath_planner::units::parse_packet_rate)]
    gen_rate: Option<f64>,
    /// The order the hit case's packets visit its flows: round-robin (each flow every
    /// --flows packets) or random (uniform per packet, as traffic interleaved from many
    /// hosts). Round-robin lets a cache whose entries sit in the order the flows arrived be
    /// read as a stream the hardware prefetcher runs ahead of; random does not. `flowpath
    /// gen` only.
    #[arg(long, default_value = "round-robin", value_parser = ["round-robin", "random"])]
    flow_order: String,
    /// Time the XDP program on the switch's ingress in every window with the kernel's BPF
    /// run-time statistics (on for this run only): nanoseconds a run in each row, and for
    /// the XDP tier its program's time over redirect-only's and parse-then-redirect's,
    /// without the driver's and the stack's work that the cycles also hold. The
    /// statistics raise every XDP row's cycles (every program on the path reads the clock
    /// twice a run; here redirect-only took ~1,500 cycles a packet with them against ~900
    /// without), so compare the rows of such a run with each other only.
    #[arg(long)]
    prog_time: bool,
    /// The generator driving the switches: auto (flowpath gen --tx when this build has
    /// it, else trafgen), flowpath or trafgen.
    #[arg(long, default_value = "auto")]
    generator: String,
    /// OVS afxdp ports' xdp-mode: native, generic, native-with-zerocopy or best-effort.
    #[arg(long, default_value = "native")]
    ovs_xdp_mode: String,
    /// CPU for the switch under test.
    #[arg(long, default_value_t = 1)]
    switch_cpu: usize,
    /// CPU for the generator.
    #[arg(long, default_value_t = 0)]
    gen_cpu: usize,
    /// Where swin's receive runs (the XDP program, the copy into AF_XDP sockets, the
    /// kernel stack): switch-cpu (a threaded NAPI pinned to --switch-cpu, so each figure
    /// is one core's work) or sender (the veth default: the generator CPU's softirq,
    /// counted in no system's figure).
    #[arg(long, default_value = "switch-cpu", value_parser = ["switch-cpu", "sender"])]
    napi: String,
    /// Print one JSON object per row, one per line (JSON Lines), instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the table as Markdown with a caption naming the command, machine and date (what
    /// `scripts/results.py` pastes into README.md and docs/lab.md).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Also write results.json (a JSON array of the rows), table.txt and chart.svg here.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
    /// Remove namespaces and files left by lab runs that are no longer alive, then exit.
    #[arg(long)]
    cleanup: bool,
    /// Say what each system needs and whether it is here (programs, DPDK drivers, this
    /// binary's XDP programs), then exit: 0 when every system asked for can run, 1 if not.
    #[arg(long)]
    check: bool,
}

/// Which of this binary's XDP programs were compiled in.
fn xdp_build() -> XdpBuild {
    XdpBuild::new(
        flowpath_ports::xdp::bpf_available(),
        flowpath_switch::tier::tier_available(),
    )
}

pub fn run(args: LabArgs) -> ExitCode {
    if args.cleanup {
        for line in topo::cleanup_leftovers() {
            println!("{line}");
        }
        return ExitCode::SUCCESS;
    }
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    if args.check {
        return check(&cfg);
    }
    if let Err(e) = flowpath_lab::preflight(&cfg) {
        return usage(&e);
    }
    // Everything missing, named at once, before anything is set up.
    let missing = peers::check(&cfg);
    if !missing.is_empty() {
        eprint!("{}", peers::report(&missing));
        if peers::runnable(&cfg, &missing).is_empty() {
            eprintln!("flowpath lab: none of the systems asked for can run here; nothing done.");
            return ExitCode::from(2);
        }
        eprintln!(
            "flowpath lab: running the systems that can run; the others' rows say what they lack.\n"
        );
    }
    if let Err(e) = topo::install_signal_handler() {
        eprintln!("flowpath lab: {e}");
        return ExitCode::FAILURE;
    }
    let mut lab = match Lab::new(cfg) {
        Ok(l) => l,
        Err(e) => {
            topo::cleanup_all();
            eprintln!("flowpath lab: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(n) = &lab.generator_note {
        eprintln!("[lab] note: {n}");
    }
    let json = args.json;
    let rows = lab.run(|_| {});
    let summary = lab.summary();
    drop(lab);
    if json {
        print!("{}", report::json_lines(&rows));
    } else if args.markdown {
        print!("{}", report::markdown(&rows, &summary));
    } else {
        print!("{}", report::table(&rows));
        println!("\n{summary}");
    }
    if !missing.is_empty() {
        eprint!("\n{}", peers::report(&missing));
    }
    if let Some(dir) = &args.out {
        if let Err(e) = write_out(dir, &rows, &summary) {
            eprintln!("flowpath lab: --out {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        eprintln!(
            "[lab] wrote {}/results.json, table.txt, chart.svg",
            dir.display()
        );
    }
    if topo::interrupted() {
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}

/// The lab's configuration from the flags; errors name the flag.
fn config(args: &LabArgs) -> Result<LabConfig, String> {
    let cases: Result<Vec<Case>, String> = if args.cases.is_empty() {
        Ok(vec![Case::Hit, Case::Miss])
    } else {
        args.cases.iter().map(|c| Case::parse(c)).collect()
    };
    let cases = match cases {
        Ok(c) => c,
        Err(e) => return Err(format!("--cases: {e}")),
    };
    let classes: Result<Vec<Class>, String> = if args.classes.is_empty() {
        Ok(vec![Class::Ipv4])
    } else {
        args.classes.iter().map(|c| Class::parse(c)).collect()
    };
    let classes = classes.map_err(|e| format!("--class: {e}"))?;
    let generator = match args.generator.as_str() {
        "auto" => GenChoice::Auto,
        "flowpath" => GenChoice::Flowpath,
        "trafgen" => GenChoice::Trafgen,
        o => return Err(format!("--generator: '{o}' (auto, flowpath, trafgen)")),
    };
    let systems: Vec<String> = if args.systems.is_empty() {
        systems::SYSTEMS.iter().map(|s| s.to_string()).collect()
    } else {
        args.systems.iter().map(|s| s.trim().to_string()).collect()
    };
    if args.switch_cpu == args.gen_cpu {
        return Err("--switch-cpu and --gen-cpu must differ".into());
    }
    Ok(LabConfig {
        systems,
        cases,
        classes,
        duration: args.duration,
        runs: args.runs,
        interleave: args.interleave,
        warmup: args.warmup,
        flows: args.flows.max(1),
        gen_rate: args.gen_rate,
        random_order: args.flow_order == "random",
        prog_time: args.prog_time,
        switch_cpu: args.switch_cpu,
        gen_cpu: args.gen_cpu,
        ovs_xdp_mode: args.ovs_xdp_mode.clone(),
        generator,
        napi_on_switch_cpu: args.napi == "switch-cpu",
        xdp_build: xdp_build(),
        ..LabConfig::default()
    })
}

/// `--check`: each system asked for, ready or what it lacks; this binary's XDP programs;
/// root. Exit 0 when the lab can run every system, 1 otherwise.
fn check(cfg: &LabConfig) -> ExitCode {
    let missing = peers::check(cfg);
    let mut ok = missing.is_empty();
    for s in &cfg.systems {
        if !systems::SYSTEMS.contains(&s.as_str()) {
            println!(
                "  {s:<18} unknown system (known: {})",
                systems::SYSTEMS.join(", ")
            );
            ok = false;
            continue;
        }
        match peers::blocked(&missing, s) {
            None => println!("  {s:<18} ready"),
            Some(why) => println!("  {s:<18} CANNOT RUN: {why}"),
        }
    }
    let b = cfg.xdp_build;
    if b.complete() {
        println!("XDP programs: compiled in (AF_XDP ports, `flowpath gen --tx`, the XDP tier, the lab's sinks)");
    } else {
        let yes = |x: bool| if x { "yes" } else { "NO" };
        println!(
            "XDP programs: MISSING: this binary was built while clang/libbpf-dev were missing \
             (compiled: AF_XDP ports {}, XDP tier {}, lab sinks {}); {SETUP_SCRIPT} installs \
             them and rebuilds it",
            yes(b.ports),
            yes(b.tier),
            yes(b.lab)
        );
    }
    let root = flowpath_lab::is_root();
    println!(
        "root: {}",
        if root {
            "yes"
        } else {
            "NO (the lab needs root)"
        }
    );
    let ip = flowpath_lab::sh::which("ip").is_some();
    if !ip {
        println!("`ip` (iproute2): MISSING");
    }
    if !missing.is_empty() {
        print!("\n{}", peers::report(&missing));
    }
    if ok && root && ip {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("flowpath lab: {msg}");
    ExitCode::from(2)
}

fn write_out(dir: &std::path::Path, rows: &[report::Row], summary: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(rows).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("results.json"), json + "\n")?;
    std::fs::write(
        dir.join("table.txt"),
        format!("{}\n{summary}\n", report::table(rows)),
    )?;
    std::fs::write(
        dir.join("chart.svg"),
        report::svg(rows, "flowpath lab: Mpps delivered at the sink, one core"),
    )?;
    Ok(())
}
