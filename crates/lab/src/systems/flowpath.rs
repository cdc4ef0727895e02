//! flowpath's own rows: the switch daemon on AF_XDP or AF_PACKET ports (optionally with
//! the XDP tier), and `flowpath xdp-forward` (redirect only, no lookup; with `--parse`,
//! the tier's parser before the redirect).

use super::*;

/// A `flowpath` subcommand running in the `sw` namespace that prints "ready" when set up.
pub(super) struct FlowpathProcess {
    child: Child,
    err_log: PathBuf,
    what: &'static str,
}

impl FlowpathProcess {
    /// Start `flowpath <args>` (pinned to `cpu`, a taskset list, when given) and wait for
    /// its "ready".
    fn start(
        ctx: &Ctx,
        cpu: Option<String>,
        args: &[&str],
        err_log: PathBuf,
        what: &'static str,
        timeout: Duration,
    ) -> Result<FlowpathProcess, String> {
        let exe = ctx.exe.to_string_lossy();
        let mut argv: Vec<&str> = Vec::new();
        if let Some(c) = &cpu {
            argv.extend(["-c", c, &exe]);
        }
        argv.extend(args);
        let prog = if cpu.is_some() { "taskset" } else { &exe };
        let c = sh::cmd_in(Some(&ctx.topo.sw), prog, &argv);
        let err = std::fs::File::create(&err_log).map_err(|e| e.to_string())?;
        let mut child = sh::spawn(c, Stdio::piped(), Stdio::from(err))?;
        let lines = Lines::collect(&mut child);
        let mut p = FlowpathProcess {
            child,
            err_log,
            what,
        };
        let ready = sh::wait_for(timeout, || {
            if let Err(e) = p.check() {
                return Some(Err(e));
            }
            lines
                .any(|l| l.trim_start().starts_with("ready"))
                .then_some(Ok(()))
        });
        let r = ready.unwrap_or_else(|| {
            Err(format!(
                "{what} printed no \"ready\" in {} s: {}",
                timeout.as_secs(),
                crate::generator::tail(&p.err_log, 3)
            ))
        });
        match r {
            Ok(()) => Ok(p),
            Err(e) => {
                p.stop();
                Err(e)
            }
        }
    }

    /// Err once it has exited, with the end of its stderr.
    fn check(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Err(format!(
                "{} exited ({st}): {}",
                self.what,
                crate::generator::tail(&self.err_log, 3)
            )),
            _ => Ok(()),
        }
    }

    /// SIGTERM (it removes what it attached), SIGKILL after 5 s.
    fn stop(mut self) {
        sh::stop(&mut self.child, libc::SIGTERM, Duration::from_secs(5));
    }
}

/// `flowpath switch --config <toml>` with two ports of one type, one worker on the switch
/// CPU (or two, see [`Ctx::worker_cpus`], each port with a queue per worker).
pub struct Flowpath {
    port_type: &'static str,
    workers: usize,
    /// `[datapath] xdp_tier = true`: cached flows are forwarded by the XDP program.
    xdp_tier: bool,
    process: Option<FlowpathProcess>,
    control: PathBuf,
    exe: PathBuf,
    before: Option<(FlowpathCounters, Vec<u64>)>,
    /// The class of the current run.
    class: Class,
}

/// The counters of `flowpath stats --json`, summed over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowpathCounters {
    pub busy_cycles: u64,
    pub packets: u64,
    pub upcalls: u64,
    pub misses: u64,
    /// Packets the XDP tier forwarded in the kernel (credited by the workers' sweeps).
    pub xdp_hits: u64,
}

/// Each worker's packets in `flowpath stats --json`, in worker order.
pub fn parse_worker_packets(json: &str) -> Option<Vec<u64>> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .iter()
        .map(|w| w.get("packets").and_then(|x| x.as_u64()))
        .collect()
}

/// Sum the workers of `flowpath stats --json`.
pub fn parse_flowpath_stats(json: &str) -> Option<FlowpathCounters> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let mut c = FlowpathCounters::default();
    for w in v.as_array()? {
        let f = |k: &str| w.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        c.busy_cycles += f("busy_cycles");
        c.packets += f("packets");
        c.upcalls += f("upcalls");
        c.misses += f("misses");
        c.xdp_hits += f("xdp_hits");
    }
    Some(c)
}

impl Flowpath {
    /// The summed counters and each worker's packets.
    fn counters(&self) -> Option<(FlowpathCounters, Vec<u64>)> {
        let out = sh::run(
            None,
            &self.exe.to_string_lossy(),
            &[
                "stats",
                "--json",
                "--control",
                &self.control.to_string_lossy(),
            ],
        )
        .ok()?;
        Some((parse_flowpath_stats(&out)?, parse_worker_packets(&out)?))
    }
}

impl Flowpath {
    pub fn new(port_type: &'static str) -> Flowpath {
        Flowpath {
            port_type,
            workers: 1,
            xdp_tier: false,
            process: None,
            control: PathBuf::new(),
            exe: PathBuf::new(),
            before: None,
            class: Class::Ipv4,
        }
    }

    /// AF_XDP ports, `n` workers, each port with `n` queues.
    pub fn with_workers(n: usize) -> Flowpath {
        Flowpath {
            workers: n.max(1),
            ..Flowpath::new("afxdp")
        }
    }

    /// AF_XDP ports with the XDP tier on.
    pub fn with_xdp_tier() -> Flowpath {
        Flowpath {
            xdp_tier: true,
            ..Flowpath::new("afxdp")
        }
    }
}

/// The daemon's TOML config for two ports of `port_type` and a worker on each of `cores`
/// (with more than one, each port has a queue per worker: queue q goes to worker q), with
/// the XDP tier when `xdp_tier`, and for the VXLAN classes a tunnel port
/// ([`TUNNEL_PORT`]): for decap one that takes VXLAN from any remote VTEP to
/// [`VXLAN_DECAP_LOCAL`] with the lab's VNI, for encap one to the sink's address over
/// swout with a static next hop (the sink's MAC), so no neighbour resolution is involved.
pub fn flowpath_config(
    dir: &Path,
    port_type: &str,
    cores: &[usize],
    xdp_tier: bool,
    class: Class,
) -> String {
    let p = |f: &str| dir.join(f).to_string_lossy().replace('\\', "\\\\");
    // With the tier, cached packets never reach the worker: it naps up to 20 ms when idle
    // (the default 500 us wakes it 2,000 times a second on the core the kernel's receive
    // shares: 1.47 instead of 2.19 Mpps here), at the cost of a new flow's first packet
    // waiting up to that long.
    let datapath = if xdp_tier {
        "[datapath]\nxdp_tier = true\nidle_sleep_max_us = 20000\n\n"
    } else {
        ""
    };
    let tunnel = match class {
        Class::Ipv4 | Class::Ipv6 | Class::Ipv4Ct => String::new(),
        Class::VxlanDecap => format!(
            "\n[[port]]\nname = \"vx0\"\nnumber = {TUNNEL_PORT}\ntype = \"vxlan\"\n\
             remote_ip = \"flow\"\nlocal_ip = \"{VXLAN_DECAP_LOCAL}\"\nkey = {VXLAN_VNI}\n\
             dst_port = 4789\n"
        ),
        Class::VxlanEncap => format!(
            "\n[[port]]\nname = \"vx0\"\nnumber = {TUNNEL_PORT}\ntype = \"vxlan\"\n\
             remote_ip = \"{SINK_IP}\"\nlocal_ip = \"{SWOUT_IP}\"\nkey = {VXLAN_VNI}\n\
             dst_port = 4789\nunderlay_port = 2\nnext_hop_mac = \"{SINK_MAC}\"\n\
             local_mac = \"{SWOUT_MAC}\"\n"
        ),
    };
    let workers: String = cores
        .iter()
        .map(|c| format!("[[worker]]\ncore = {c}\n\n"))
        .collect();
    let queues = if cores.len() > 1 {
        format!("queues = {}\n", cores.len())
    } else {
        String::new()
    };
    // Whole masks into megaflows, as OVS's rows run with prefixes=none: see FLOWS.
    format!(
        "[switch]\nstate = \"{}\"\ncontrol = \"{}\"\nflows = \"{}\"\n\
         classifier = \"tss-whole-masks\"\n\n{datapath}{workers}\
         [[port]]\nname = \"swin\"\nnumber = 1\ntype = \"{port_type}\"\ninterface = \"swin\"\n{queues}\n\
         [[port]]\nname = \"swout\"\nnumber = 2\ntype = \"{port_type}\"\ninterface = \"swout\"\n{queues}{tunnel}",
        p("state"),
        p("control.sock"),
        p("flows.txt"),
    )
}

impl Switch for Flowpath {
    fn cannot(&self, class: Class) -> Option<String> {
        (self.workers > 1 && class != Class::Ipv4).then(|| {
            "the multi-worker row runs ipv4 only (its generators share the IPv4 sources)".into()
        })
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn start(&mut self, ctx: &Ctx, case: Case) -> Result<(), String> {
        let dir = ctx.topo.dir.join(format!(
            "flowpath-{}-{}-{}",
            self.name(),
            ctx.class.name(),
            case.name()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("flows.txt"), flows(ctx.class)).map_err(|e| e.to_string())?;
        let cfg = dir.join("switch.toml");
        let cores = ctx.worker_cpus(self.workers);
        std::fs::write(
            &cfg,
            flowpath_config(&dir, self.port_type, &cores, self.xdp_tier, ctx.class),
        )
        .map_err(|e| e.to_string())?;
        if self.workers > 1 {
            ctx.topo.switch_queues(self.workers as u32)?;
        }
        let cpus: Vec<String> = cores.iter().map(|c| c.to_string()).collect();
        self.class = ctx.class;
        self.control = dir.join("control.sock");
        self.exe = ctx.exe.to_path_buf();
        let cfg = cfg.to_string_lossy();
        self.process = Some(FlowpathProcess::start(
            ctx,
            Some(cpus.join(",")),
            &["switch", "--config", &cfg],
            dir.join("switch.err"),
            "flowpath switch",
            Duration::from_secs(30),
        )?);
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        self.process.as_mut().map_or(Ok(()), |p| p.check())
    }

    fn before_window(&mut self, _ctx: &Ctx) {
        self.before = self.counters();
    }

    fn after_window(&mut self, _ctx: &Ctx) -> Option<Own> {
        let (a, wa) = self.before.take()?;
        let (b, wb) = self.counters()?;
        let worker_packets = if self.workers > 1 {
            wb.iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(wa.get(i).copied().unwrap_or(0)))
                .collect()
        } else {
            Vec::new()
        };
        let packets = b.packets.saturating_sub(a.packets);
        let cycles = b.busy_cycles.saturating_sub(a.busy_cycles);
        let kernel = b.xdp_hits.saturating_sub(a.xdp_hits);
        Some(Own {
            // With the XDP tier the worker's busy cycles are only the user-space share
            // (misses); the kernel's work on the hits is in the lab's CPU figure only.
            // Tunnel traffic never stays in the kernel, so there the worker has it all.
            cycles_per_packet: (packets > 0 && (!self.xdp_tier || self.class.is_vxlan()))
                .then(|| cycles as f64 / packets as f64),
            packets: packets + kernel,
            upcalls: b.upcalls.saturating_sub(a.upcalls),
            // Every flowpath miss is classified (misses - upcalls were answered by a
            // megaflow an earlier packet of the same batch installed): none are lost.
            lost_upcalls: 0,
            worker_packets,
        })
    }

    fn stop(&mut self, ctx: &Ctx) {
        if let Some(p) = self.process.take() {
            p.stop();
        }
        reset_switch_ports(ctx.topo);
        if self.workers > 1 {
            if let Err(e) = ctx.topo.switch_queues(1) {
                crate::progress(&format!("  switch veths back to one queue: {e}"));
            }
        }
    }

    fn notes(&self) -> Vec<String> {
        let mut v = if self.workers > 1 {
            vec![format!(
                "afxdp ports with {n} queues each (veth channels), {n} workers (queue q -> \
                 worker q), a generator on each worker's CPU with 1/{n} of the sources (a veth \
                 puts XDP frames on the rx queue of the sending CPU); cycles/pkt: all {n} \
                 CPUs' busy time, the generators' and swin's receive included",
                n = self.workers
            )]
        } else if self.xdp_tier && self.class.is_vxlan() {
            vec![
                "afxdp ports, XDP tier on, but it leaves tunnel traffic to user space (no \
                 tunnel megaflows in the kernel): every packet goes to the worker"
                    .into(),
            ]
        } else if self.xdp_tier {
            vec![
                "afxdp ports, XDP tier on: cached flows forwarded by the flow_tier program, \
                  misses to the worker"
                    .into(),
            ]
        } else {
            vec![format!("{} ports", self.port_type)]
        };
        match self.class {
            Class::VxlanDecap => v.push(format!(
                "VXLAN over IPv4 (VNI {VXLAN_VNI}) in, decapsulated by tunnel port \
                 {TUNNEL_PORT} (remote_ip = \"flow\"), inner frame out"
            )),
            Class::VxlanEncap => v.push(format!(
                "output to tunnel port {TUNNEL_PORT}: VXLAN over IPv4 to {SINK_IP} on swout \
                 (static next hop)"
            )),
            Class::Ipv4Ct => v.push(
                "security-group flows: ct(table=1,zone=1), new connections committed \
                 (never offered to the XDP tier)"
                    .into(),
            ),
            _ => {}
        }
        v
    }
}

impl Flowpath {
    fn name(&self) -> String {
        if self.xdp_tier {
            "xdp".into()
        } else if self.workers > 1 {
            format!("{}-{}w", self.port_type, self.workers)
        } else {
            self.port_type.into()
        }
    }
}

// ---------------------------------------------------------------------------------------
// XDP forward-all (the floor for in-kernel forwarding)

/// `flowpath xdp-forward --from swin --to swout`: every frame redirected through a devmap
/// with no parsing and no lookup; what the XDP tier adds to the same redirect is its
/// parse, lookup, actions and counters. With `parse` (`xdp-forward --parse`, the
/// `xdp-parse-forward` row) the tier's own parser runs before the redirect, which splits
/// that difference into reading the headers and the tier's own work.
#[derive(Default)]
pub struct XdpForward {
    parse: bool,
    process: Option<FlowpathProcess>,
}

impl XdpForward {
    /// The `xdp-parse-forward` row: parse as the tier does, then redirect.
    pub fn parsing() -> XdpForward {
        XdpForward {
            parse: true,
            process: None,
        }
    }

    fn name(&self) -> &'static str {
        if self.parse {
            PARSE_FORWARD
        } else {
            "xdp-forward"
        }
    }
}

impl Switch for XdpForward {
    fn cannot(&self, class: Class) -> Option<String> {
        if class.is_stateful() {
            return Some("redirects every frame unchanged: it tracks no connections".into());
        }
        class
            .is_vxlan()
            .then(|| "redirects every frame unchanged: it cannot decapsulate or encapsulate".into())
    }

    fn start(&mut self, ctx: &Ctx, _case: Case) -> Result<(), String> {
        let dir = ctx.topo.dir.join(self.name());
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut args = vec!["xdp-forward", "--from", SWIN_IF, "--to", SWOUT_IF];
        if self.parse {
            args.push("--parse");
        }
        self.process = Some(FlowpathProcess::start(
            ctx,
            None,
            &args,
            dir.join("xdp-forward.err"),
            if self.parse {
                "flowpath xdp-forward --parse"
            } else {
                "flowpath xdp-forward"
            },
            Duration::from_secs(10),
        )?);
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        self.process.as_mut().map_or(Ok(()), |p| p.check())
    }

    fn stop(&mut self, ctx: &Ctx) {
        if let Some(p) = self.process.take() {
            p.stop();
        }
        reset_switch_ports(ctx.topo);
    }

    fn notes(&self) -> Vec<String> {
        vec![if self.parse {
            "the XDP tier's parser, then the redirect: no lookup, actions or counters".into()
        } else {
            "XDP redirect of every frame, no parse or lookup (the floor)".into()
        }]
    }
}
