//! `flowpath flows` and `flowpath run`: programming flows in `ovs-ofctl` syntax over the
//! control socket, checking flows files offline, and running the switch that serves them.

use flowpath_flowsyntax::{parse_flows_file, FlowCommand};
use flowpath_gen::{GeneratedPort, InMemorySource};
use flowpath_pipeline::Backend;
use flowpath_switch::control::{default_socket, default_state};
use flowpath_switch::openflow::{
    parse_datapath_id, FailMode, NoPacketIo, NoPorts, OpenFlowChannel, OpenFlowConfig, TlsFiles,
    DEFAULT_MAX_CONNECTIONS,
};
use flowpath_switch::pmd::WorkerHandle;
use flowpath_switch::{
    call, spawn_worker, ControlSocket, Op, Request, Switch, SwitchConfig, WorkerConfig, WorkerPort,
};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FLOWS_ABOUT: &str = "Program the flows of a running switch, in ovs-ofctl flow syntax.

Each command takes one flow on the command line, or a file of flows (one per line, '#'
comments; '-' reads standard input): whichever the argument names. A file is sent as one
atomic change: packets see the flows before it or after it, never a mix, and a bad line
refuses the whole file with its line, column and reason. Every change is saved to the
switch's state file before it is acknowledged, and restored when the switch restarts.

  flowpath flows add 'table=0,priority=100,ip,nw_dst=10.0.0.0/8 actions=output:2'
  flowpath flows add flows.txt
  flowpath flows mod 'ip,nw_dst=10.0.0.0/8 actions=output:3'   (every flow it covers)
  flowpath flows del-strict 'priority=100,ip,nw_dst=10.0.0.0/8'
  flowpath flows del                                          (every flow)
  flowpath flows replace flows.txt                            (the set becomes exactly this)
  flowpath flows dump ['tcp']                                 (with live counters)
  flowpath flows check flows.txt                              (offline: no switch needed)

Matches: in_port, dl_src/dl_dst (masks), dl_type, dl_vlan, dl_vlan_pcp, vlan_tci, ip, ipv6,
tcp, udp, icmp, arp, tcp6, udp6, icmp6, nw_src/nw_dst (prefix or mask), ipv6_src/ipv6_dst,
nw_proto, nw_tos, ip_dscp, nw_ttl, ip_frag, tp_src/tp_dst (masks), tcp_flags,
icmp_type/icmp_code, tun_id, and eth_src/ipv4_src/tcp_dst-style names; table, priority,
cookie, idle_timeout, hard_timeout. Actions: output:N, in_port, drop, controller,
goto_table:N, resubmit(,N), mod_dl_src/dst, mod_nw_src/dst, mod_nw_tos, mod_tp_src/dst,
set_field:V->F, push_vlan, strip_vlan/pop_vlan, mod_vlan_vid, mod_vlan_pcp, dec_ttl,
set_tunnel.";

#[derive(clap::Args)]
#[command(long_about = FLOWS_ABOUT)]
pub struct FlowsArgs {
    /// add, mod, mod-strict, del, del-strict, replace, dump, or check (offline).
    #[arg(value_parser = ["add", "mod", "mod-strict", "del", "del-strict", "replace", "dump", "check"])]
    command: String,
    /// A flow, or a file of flows ('-' for standard input). Optional for del and dump.
    flows: Option<String>,
    /// The switch's control socket [default: $FLOWPATH_CONTROL, /run/flowpath/control.sock
    /// for root, else $XDG_RUNTIME_DIR/flowpath/control.sock].
    #[arg(long)]
    control: Option<PathBuf>,
    /// How long to wait for the switch's answer, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

pub fn run(args: FlowsArgs) -> ExitCode {
    let text = match &args.flows {
        None => String::new(),
        Some(a) => match read_flows_arg(a) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("flowpath flows {}: {e}", args.command);
                return ExitCode::from(2);
            }
        },
    };
    if args.command == "check" {
        return check(&text, args.flows.as_deref().unwrap_or("(nothing)"));
    }
    let op = match args.command.as_str() {
        "add" => Op::Add,
        "mod" => Op::Mod,
        "mod-strict" => Op::ModStrict,
        "del" => Op::Del,
        "del-strict" => Op::DelStrict,
        "replace" => Op::Replace,
        "dump" => Op::Dump,
        _ => unreachable!("clap checked the command"),
    };
    if matches!(op, Op::Add | Op::Mod | Op::ModStrict | Op::DelStrict) && args.flows.is_none() {
        eprintln!(
            "flowpath flows {}: give a flow or a file of flows",
            args.command
        );
        return ExitCode::from(2);
    }
    let single_flow = args
        .flows
        .as_deref()
        .is_some_and(|a| a != "-" && !std::path::Path::new(a).is_file());
    let socket = args.control.unwrap_or_else(default_socket);
    let req = Request { op, text };
    match call(&socket, &req, Duration::from_secs(args.timeout)) {
        Ok(resp) => {
            if let Some(e) = resp.error {
                // One flow on the command line has no lines to speak of.
                let e = match single_flow {
                    true => e.strip_prefix("line 1: ").unwrap_or(&e).to_string(),
                    false => e,
                };
                eprintln!("flowpath flows {}: {e}", args.command);
                return ExitCode::from(1);
            }
            for l in &resp.lines {
                println!("{l}");
            }
            if !resp.summary.is_empty() {
                eprintln!("{}", resp.summary);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("flowpath flows {}: {e}", args.command);
            ExitCode::from(1)
        }
    }
}

/// The argument is a file if such a file exists (or '-'), else a flow.
fn read_flows_arg(a: &str) -> Result<String, String> {
    if a == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("reading standard input: {e}"))?;
        return Ok(s);
    }
    let p = std::path::Path::new(a);
    if p.is_file() {
        return std::fs::read_to_string(p).map_err(|e| format!("{a}: {e}"));
    }
    if a.contains('/') && !a.contains('=') && !a.contains(',') {
        return Err(format!("{a}: no such file"));
    }
    Ok(a.to_string())
}

fn check(text: &str, what: &str) -> ExitCode {
    match parse_flows_file(text, FlowCommand::Add) {
        Ok(flows) => {
            println!("{what}: {} flows, all valid", flows.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::from(1)
        }
    }
}

const RUN_ABOUT: &str = "Run the switch: the datapath, its control socket and its flow state.

The flows saved in the state file are installed before the control socket opens; every
change made with `flowpath flows` is saved (atomically: a crash leaves the old or the new
set, never a mix) before it is acknowledged. Rules with idle_timeout or hard_timeout are
removed when they expire. Stop with Ctrl-C or SIGTERM.

For a switch with real ports (AF_XDP, AF_PACKET, TAP, pcap) use `flowpath switch --config`.
`flowpath run` is the same worker loop with, at most, one generated port; handy for trying
flows and counters without privileges:
  flowpath run --gen-flows 1000 --gen-pace-us 100    (1,000 UDP flows into port 1)
  flowpath run                                       (control only: no traffic)";

#[derive(clap::Args)]
#[command(long_about = RUN_ABOUT)]
pub struct RunArgs {
    /// The control socket to create (mode 0600) [default: see `flowpath flows --help`].
    #[arg(long)]
    control: Option<PathBuf>,
    /// The state file [default: $FLOWPATH_STATE, /var/lib/flowpath/flows.state for root,
    /// else $XDG_STATE_HOME/flowpath/flows.state].
    #[arg(long)]
    state: Option<PathBuf>,
    /// Keep flows in memory only (nothing survives a restart).
    #[arg(long, conflicts_with = "state")]
    no_state: bool,
    /// Slow-path classifier: tss (tuple-space search with prefix tries on addresses and
    /// ports), tss-whole-masks (the same without the tries: every probed mask goes into
    /// the megaflow), tree (decision tree, for ACLs with port ranges) or linear.
    #[arg(long, default_value = "tss")]
    classifier: Backend,
    /// Feed port 1 with generated 64-byte UDP/IPv4 traffic over this many flows (0 = none).
    #[arg(long, default_value_t = 0)]
    gen_flows: usize,
    /// Sleep this many microseconds after each batch of generated traffic (0 = poll flat out).
    #[arg(long, default_value_t = 0)]
    gen_pace_us: u64,
    /// Speak OpenFlow 1.3 (repeatable): `ptcp:[IP:]PORT` listens for clients such as
    /// `ovs-ofctl -O OpenFlow13 dump-flows tcp:127.0.0.1:PORT` (IP defaults to
    /// 127.0.0.1); `tcp:HOST:PORT` connects to a controller, reconnecting with backoff;
    /// `pssl:` and `ssl:` do the same over TLS (with --private-key, --certificate,
    /// --ca-cert). Flows added over OpenFlow and over the control socket are one rule set.
    #[arg(long, value_name = "TARGET")]
    openflow: Vec<String>,
    /// With a `tcp:` controller: `secure` keeps the flows while it is away (default),
    /// `standalone` acts as a learning switch (a priority-0 NORMAL flow) meanwhile.
    #[arg(long, default_value = "secure", value_parser = parse_fail_mode)]
    fail_mode: FailMode,
    /// The datapath id controllers see (hex) [default: 0000f10e9a700001].
    #[arg(long, value_name = "HEX")]
    datapath_id: Option<String>,
    /// TLS (`ssl:`, `pssl:` targets): the switch's private key (PEM).
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// TLS: the switch's certificate (PEM, intermediates after it).
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// TLS: the CA certificate peers' certificates must chain to (PEM).
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// Most OpenFlow connections open at once; listeners refuse more.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    openflow_max_connections: usize,
}

fn parse_fail_mode(s: &str) -> Result<FailMode, String> {
    match s {
        "secure" => Ok(FailMode::Secure),
        "standalone" => Ok(FailMode::Standalone),
        _ => Err(format!("'{s}': expected secure or standalone")),
    }
}

pub fn run_switch(args: RunArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flowpath run: {e}");
            ExitCode::from(1)
        }
    }
}

/// Open the switch, its control socket and its threads, serve until a stop signal, then
/// stop them all.
fn serve(args: RunArgs) -> Result<(), String> {
    let state = (!args.no_state).then(|| args.state.clone().unwrap_or_else(default_state));
    let sw = Switch::open(SwitchConfig {
        state: state.clone(),
        backend: args.classifier,
        ..SwitchConfig::default()
    })?;
    let socket = args.control.clone().unwrap_or_else(default_socket);
    let sock = Arc::new(
        ControlSocket::bind(&socket).map_err(|e| format!("--control {}: {e}", socket.display()))?,
    );
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        register_stop(sig, stop.clone()).map_err(|e| format!("cannot handle signals: {e}"))?;
    }
    let control = sw.spawn_control(sock.clone(), stop.clone());
    let expiry = sw.spawn_expiry(stop.clone());
    let openflow = match start_openflow(&args, &sw, &stop) {
        Ok(ch) => ch,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            sock.wake();
            let _ = control.join();
            let _ = expiry.join();
            return Err(format!("--openflow {e}"));
        }
    };
    let worker =
        start_generator(&args, &sw, &stop).map_err(|e| format!("cannot start the worker: {e}"))?;
    eprintln!(
        "flowpath run: {} flows restored from {}; control socket {}",
        sw.store().snapshot().rules().count(),
        state
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(no state file)".into()),
        socket.display()
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sock.wake();
    let _ = control.join();
    let _ = expiry.join();
    if let Some(ch) = openflow {
        ch.join();
    }
    if let Some(w) = worker {
        if let Ok(st) = w.thread.join() {
            eprintln!(
                "flowpath run: worker processed {} packets ({} exact-match hits, {} megaflow hits, {} misses)",
                st.packets, st.emc_hits, st.megaflow_hits, st.upcalls
            );
        }
    }
    Ok(())
}

/// The OpenFlow channel `--openflow` asks for (None without targets), its listeners named
/// on stderr.
fn start_openflow(
    args: &RunArgs,
    sw: &Arc<Switch>,
    stop: &Arc<AtomicBool>,
) -> Result<Option<OpenFlowChannel>, String> {
    if args.openflow.is_empty() {
        return Ok(None);
    }
    let mut cfg = OpenFlowConfig {
        fail_mode: args.fail_mode,
        ..OpenFlowConfig::default()
    }
    .with_targets(&args.openflow)?;
    if let Some(d) = &args.datapath_id {
        cfg.datapath_id = parse_datapath_id(d).map_err(|e| format!("--datapath-id: {e}"))?;
    }
    cfg.tls = TlsFiles::from_parts(
        args.private_key.as_deref(),
        args.certificate.as_deref(),
        args.ca_cert.as_deref(),
        ["--private-key", "--certificate", "--ca-cert"],
    )?;
    if args.openflow_max_connections == 0 {
        return Err("--openflow-max-connections: must be at least 1".into());
    }
    cfg.max_connections = args.openflow_max_connections;
    let ch = OpenFlowChannel::start(
        sw.clone(),
        Arc::new(NoPorts),
        Arc::new(NoPacketIo),
        cfg,
        stop.clone(),
    )?;
    for a in &ch.listening {
        eprintln!("flowpath run: OpenFlow 1.3 listening on {a}");
    }
    Ok(Some(ch))
}

/// The worker feeding port 1 with generated traffic (`--gen-flows`; None without).
fn start_generator(
    args: &RunArgs,
    sw: &Arc<Switch>,
    stop: &Arc<AtomicBool>,
) -> std::io::Result<Option<WorkerHandle>> {
    if args.gen_flows == 0 {
        return Ok(None);
    }
    let source = InMemorySource::udp4_flows(args.gen_flows, 64);
    let port = GeneratedPort::new("gen", source);
    let cfg = WorkerConfig {
        pace: (args.gen_pace_us > 0).then(|| Duration::from_micros(args.gen_pace_us)),
        ..WorkerConfig::default()
    };
    let ports = vec![WorkerPort::new(
        1,
        0,
        Box::new(port) as Box<dyn flowpath_ports::Port>,
    )];
    spawn_worker(sw, cfg, ports, stop.clone()).map(Some)
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

fn register_stop(sig: i32, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    signal_hook::flag::register(sig, stop).map(|_| ())
}
