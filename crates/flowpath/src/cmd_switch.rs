//! `flowpath switch` and `flowpath stats`: the daemon on real ports, and its counters.

use flowpath_switch::control::{call, default_socket, default_state, Op, Request};
use flowpath_switch::daemon::StateChoice;
use flowpath_switch::{format_stats, Daemon, DaemonConfig, WorkerSnapshot};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SWITCH_ABOUT: &str = "Run the switch daemon on real ports, from a TOML config.

Each [[worker]] is a thread pinned to its core that busy-polls its port queues in batches of
32 (napping, up to datapath.idle_sleep_max_us, when nothing arrives), runs the datapath
(exact-match cache, megaflow cache, slow path) and transmits in batches. Flows come from the
state file (so a restart restores them) or, on the very first start, from switch.flows; change
them while it runs with `flowpath flows ...`. SIGTERM or Ctrl-C drains the workers, removes
the XDP programs the ports attached, and exits. A port that disappears (say its veth is
deleted) is logged and no longer polled; the others carry on.

When every port is open the daemon prints `ready` on stdout.";

const SWITCH_EXAMPLE: &str = "Example config:
  [switch]
  state   = \"/var/lib/flowpath/flows.state\"   # flows persist here
  control = \"/run/flowpath/control.sock\"      # `flowpath flows` and `flowpath stats` talk here
  flows   = \"/etc/flowpath/flows.txt\"         # first start only (no state file yet)
  metrics = \"127.0.0.1:9464\"                  # Prometheus text format, GET /metrics
  # openflow = [\"pssl:6653\", \"ssl:10.0.0.9:6653\"]   # OpenFlow 1.3 (also ptcp:, tcp:)
  # openflow_private_key = \"/etc/flowpath/sc-privkey.pem\"  # TLS, both ends authenticated
  # openflow_certificate = \"/etc/flowpath/sc-cert.pem\"
  # openflow_ca_cert = \"/etc/flowpath/cacert.pem\"
  # openflow_max_connections = 64

  [datapath]            # optional
  emc = true
  emc_insert_inv_prob = 100
  smc_entries = 1048576     # signature-match cache per worker (0 = off; used while it pays)
  megaflow_max = 65536      # per worker; 256 B each, allocated at start (16 MB)
  idle_sleep_max_us = 500   # 0 = never nap
  # miss-storm defence (defaults shown; `flowpath stats` shows every limit and its drops)
  max_masks = 512              # megaflow subtables per worker
  revalidate_target_ms = 20    # slower revalidation shrinks the flow limit (0 = never)
  slow_path_share = 0.5        # most of a core misses take while hits are served (1 = off)
  new_masks_per_sec = 200      # per port; 0 = no limit
  poll_quantum_cycles = 1000   # cycle-fair polling between ports (0 = plain round robin)

  [[worker]]
  core = 1

  [[port]]
  name = \"vm1\"
  number = 1            # the port number flows use: in_port=1, output:1
  type = \"afxdp\"        # afxdp | afpacket | tap | pcap | generator
  interface = \"veth-vm1\"
  queues = 1            # >= number of workers
  xdp_mode = \"auto\"     # auto | native | generic
  # trace = \"/tmp/vm1.pcap\"                 # record everything this port sees
  # fault = { drop = 0.01, corrupt = 0.0, delay = 0.0, delay_polls = 0, seed = 1 }

  [[port]]
  name = \"uplink\"
  number = 2
  type = \"afpacket\"
  interface = \"eth1\"";

#[derive(clap::Args)]
#[command(long_about = SWITCH_ABOUT, after_help = SWITCH_EXAMPLE)]
pub struct SwitchArgs {
    /// The TOML config: ports, workers, flows, state file, control socket.
    #[arg(long)]
    config: PathBuf,
    /// Check the config and exit.
    #[arg(long)]
    check: bool,
    /// TLS for `ssl:`/`pssl:` OpenFlow targets: the switch's private key (PEM)
    /// [default: switch.openflow_private_key].
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// TLS: the switch's certificate (PEM) [default: switch.openflow_certificate].
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// TLS: the CA certificate peers' certificates must chain to (PEM)
    /// [default: switch.openflow_ca_cert].
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// Keep flows in memory only, whatever `switch.state` says (nothing survives a
    /// restart; the way to start beside a state file that does not load).
    #[arg(long)]
    no_state: bool,
}

#[derive(clap::Args)]
pub struct StatsArgs {
    /// The switch's control socket [default: as `flowpath flows`].
    #[arg(long)]
    control: Option<PathBuf>,
    /// Print the workers' counters as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: SwitchArgs) -> ExitCode {
    let mut cfg = match DaemonConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("flowpath switch: {e}");
            return ExitCode::from(2);
        }
    };
    let sw = &mut cfg.switch;
    for (flag, key) in [
        (args.private_key, &mut sw.openflow_private_key),
        (args.certificate, &mut sw.openflow_certificate),
        (args.ca_cert, &mut sw.openflow_ca_cert),
    ] {
        if flag.is_some() {
            *key = flag;
        }
    }
    // The TLS files are read now, so that --check finds a wrong one.
    if let Err(e) = cfg.openflow_config().and_then(|c| c.tls_context()) {
        eprintln!("flowpath switch: {e}");
        return ExitCode::from(2);
    }
    if args.check {
        println!(
            "config ok: {} ports, {} workers",
            cfg.ports.len(),
            cfg.workers.len().max(1)
        );
        return ExitCode::SUCCESS;
    }
    let state = match args.no_state {
        true => StateChoice::Off,
        false => StateChoice::Default(default_state()),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("flowpath switch: cannot handle signals: {e}");
            return ExitCode::from(1);
        }
    }
    let daemon = match Daemon::start(&cfg, state, default_socket(), stop.clone()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("flowpath switch: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "flowpath switch: {} ports, {} workers, {} flows; control socket {}{}",
        cfg.ports.len(),
        cfg.workers.len().max(1),
        daemon.restored_flows,
        daemon.control_path.display(),
        daemon
            .metrics_addr
            .map(|a| format!("; metrics http://{a}/metrics"))
            .unwrap_or_default()
    );
    if let Some(of) = &daemon.openflow {
        let targets: Vec<String> = cfg.switch.openflow.clone();
        eprintln!(
            "flowpath switch: OpenFlow 1.3 on {} (listening on {:?})",
            targets.join(", "),
            of.listening
        );
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("flowpath switch: stopping");
    let finals = daemon.join();
    eprint!("{}", format_stats(&finals));
    ExitCode::SUCCESS
}

pub fn stats(args: StatsArgs) -> ExitCode {
    let socket = args.control.unwrap_or_else(default_socket);
    let req = Request {
        op: Op::Stats,
        text: String::new(),
    };
    let resp = match call(&socket, &req, Duration::from_secs(5)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flowpath stats: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(e) = resp.error {
        eprintln!("flowpath stats: {e}");
        return ExitCode::from(1);
    }
    if args.json {
        let snaps: Vec<WorkerSnapshot> = Vec::new();
        let v = resp.data.unwrap_or_else(|| serde_json::json!(snaps));
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for l in resp.lines {
            println!("{l}");
        }
    }
    ExitCode::SUCCESS
}
