//! `flowpath switch`: the daemon from a TOML config: ports, pinned poll-mode workers, the
//! flows (restored from the state file), the control socket and a Prometheus endpoint.
//!
//! Queues are shared out so that every worker can transmit without locks: worker `w`
//! receives on queue `q` of a port when `q % workers == w`, and transmits to a port on the
//! first queue of it that it owns. So every port needs at least as many queues as there
//! are workers (the config check says so, naming the field).

use crate::config::DaemonConfig;
use crate::control::{ControlSocket, Op, Request};
use crate::journal::Journal;
use crate::metrics::{collect, spawn_metrics, stats_response};
use crate::openflow::{ChannelStats, DaemonPorts, OpenFlowChannel, PortDesc, WorkerPacketIo};
use crate::pmd::{spawn_worker_with_tier, WorkerConfig, WorkerHandle, WorkerPort, WorkerSnapshot};
use crate::switch::{spawn_control_with, Switch, SwitchConfig};
use crate::tier::{TierPort, XdpTier};
use flowpath_ports::{PortConfig, PortKind};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where [`Daemon::start`] keeps the flows between runs.
#[derive(Clone, Debug)]
pub enum StateChoice {
    /// At `switch.state`, else at this path.
    Default(PathBuf),
    /// Nowhere (`--no-state`): flows live in memory only, whatever `switch.state` says.
    Off,
}

impl From<PathBuf> for StateChoice {
    fn from(p: PathBuf) -> StateChoice {
        StateChoice::Default(p)
    }
}

/// A running switch daemon.
pub struct Daemon {
    pub switch: Arc<Switch>,
    workers: Vec<WorkerHandle>,
    snapshots: Vec<Arc<Mutex<WorkerSnapshot>>>,
    stop: Arc<AtomicBool>,
    /// The XDP tier, dropped (programs detached, maps freed) after the workers and ports.
    tier: Option<Arc<XdpTier>>,
    control: Option<(Arc<ControlSocket>, JoinHandle<()>)>,
    expiry: Option<JoinHandle<()>>,
    /// Forgets the MACs learned on a port whose link goes down (see [`mac_port_watch`]).
    mac_watch: Option<JoinHandle<()>>,
    metrics: Option<(SocketAddr, JoinHandle<()>)>,
    /// The OpenFlow channel, when `switch.openflow` names targets.
    pub openflow: Option<OpenFlowChannel>,
    /// Where the control socket and metrics endpoint listen, for the start-up message.
    pub control_path: PathBuf,
    pub metrics_addr: Option<SocketAddr>,
    pub restored_flows: usize,
}

impl Daemon {
    /// Restore the flows, open every port queue, start workers, control, expiry, metrics.
    /// `stop` ends everything (set it from a signal handler), then call [`Daemon::join`].
    pub fn start(
        cfg: &DaemonConfig,
        state: impl Into<StateChoice>,
        default_control: PathBuf,
        stop: Arc<AtomicBool>,
    ) -> Result<Daemon, String> {
        let (sw, restored_flows) = restore_flows(cfg, state.into())?;
        // Open every queue of every port before starting anything, so a bad port stops
        // the start with its name and nothing half-running.
        let tier = if cfg.datapath.xdp_tier {
            let t = Arc::new(start_tier(cfg, &sw)?);
            sw.set_rule_change_hook(t.clone());
            Some(t)
        } else {
            None
        };
        let per_worker = open_ports(cfg, tier.as_ref())?;

        let (control_path, sock, metrics_listener) = bind_endpoints(cfg, default_control)?;

        // One MAC learning table (NORMAL) for the whole switch.
        let mac = Arc::new(flowpath_datapath::MacLearningTable::new(
            cfg.datapath_config().mac_learning,
        ));
        let workers = spawn_workers(cfg, &sw, per_worker, &stop, tier.as_ref(), &mac)?;
        let snapshots: Vec<_> = workers.iter().map(|w| w.snapshot.clone()).collect();
        let mac_watch = cfg.ports.iter().any(|p| p.interface.is_some()).then(|| {
            let ports = DaemonPorts::new(cfg.ports.clone(), snapshots.clone());
            let stop = stop.clone();
            std::thread::spawn(move || mac_port_watch(&ports, &mac, &stop))
        });

        let expiry = sw.spawn_expiry(stop.clone());
        let openflow = start_openflow(cfg, &sw, &workers, &snapshots, &stop)?;
        let control = spawn_control_with(
            sock.clone(),
            stop.clone(),
            control_handler(
                &sw,
                &snapshots,
                tier.clone(),
                openflow.as_ref().map(|o| o.stats()),
            ),
        );
        let metrics = match metrics_listener {
            Some(l) => {
                let addr = l.local_addr().map_err(|e| format!("switch.metrics: {e}"))?;
                let ct = ct_metrics(&sw);
                Some((
                    addr,
                    spawn_metrics(l, snapshots.clone(), Some(ct), stop.clone()),
                ))
            }
            None => None,
        };
        let metrics_addr = metrics.as_ref().map(|(addr, _)| *addr);
        Ok(Daemon {
            switch: sw,
            workers,
            snapshots,
            stop,
            tier,
            control: Some((sock, control)),
            expiry: Some(expiry),
            mac_watch,
            metrics,
            openflow,
            control_path,
            metrics_addr,
            restored_flows,
        })
    }

    /// The workers' latest counters.
    pub fn stats(&self) -> Vec<WorkerSnapshot> {
        collect(&self.snapshots)
    }

    /// Stop (if not already asked), drain the workers and close everything; returns the
    /// workers' final counters. Ports are dropped here, which detaches their XDP programs.
    pub fn join(mut self) -> Vec<WorkerSnapshot> {
        self.stop.store(true, Ordering::Relaxed);
        let finals = self
            .workers
            .drain(..)
            .filter_map(|w| w.thread.join().ok())
            .collect();
        if let Some(ch) = self.openflow.take() {
            ch.join();
        }
        if let Some((sock, h)) = self.control.take() {
            sock.wake();
            let _ = h.join();
        }
        if let Some(h) = self.expiry.take() {
            let _ = h.join();
        }
        if let Some(h) = self.mac_watch.take() {
            let _ = h.join();
        }
        if let Some((addr, h)) = self.metrics.take() {
            // Wake the accept loop.
            let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200));
            let _ = h.join();
        }
        // The workers (and with them the AF_XDP sockets) are gone; the switch's hook holds
        // the last other reference, so the tier itself goes with the process.
        self.tier = None;
        finals
    }

    /// The XDP tier's `flowpath stats` line, when it runs.
    pub fn tier_stats(&self) -> Option<String> {
        self.tier.as_ref().map(|t| t.stats_line())
    }
}

/// The control socket (at `switch.control`, else `default_control`) and the metrics
/// endpoint's listener (when `switch.metrics` asks for one), bound before anything starts.
fn bind_endpoints(
    cfg: &DaemonConfig,
    default_control: PathBuf,
) -> Result<(PathBuf, Arc<ControlSocket>, Option<TcpListener>), String> {
    let control_path = cfg.switch.control.clone().unwrap_or(default_control);
    let sock = Arc::new(
        ControlSocket::bind(&control_path)
            .map_err(|e| format!("switch.control: {}: {e}", control_path.display()))?,
    );
    let metrics_listener = match &cfg.switch.metrics {
        Some(m) => Some(
            TcpListener::bind(m)
                .map_err(|e| format!("switch.metrics: cannot listen on {m}: {e}"))?,
        ),
        None => None,
    };
    Ok((control_path, sock, metrics_listener))
}

/// The OpenFlow channel, when `switch.openflow` names targets: packet-ins from and
/// packet-outs to `workers`. A channel that cannot start stops the workers.
fn start_openflow(
    cfg: &DaemonConfig,
    sw: &Arc<Switch>,
    workers: &[WorkerHandle],
    snapshots: &[Arc<Mutex<WorkerSnapshot>>],
    stop: &Arc<AtomicBool>,
) -> Result<Option<OpenFlowChannel>, String> {
    if cfg.switch.openflow.is_empty() {
        return Ok(None);
    }
    let ofcfg = cfg.openflow_config()?;
    let ports = Arc::new(DaemonPorts::new(cfg.ports.clone(), snapshots.to_vec()));
    let io = Arc::new(WorkerPacketIo::new(
        workers,
        cfg.ports.iter().map(|p| p.number).collect(),
    ));
    match OpenFlowChannel::start(sw.clone(), ports, io, ofcfg, stop.clone()) {
        Ok(ch) => Ok(Some(ch)),
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            Err(format!("switch.openflow: {e}"))
        }
    }
}

/// Open the switch with its state file; on the very first start (no state file or journal
/// yet, or no state kept at all), install `switch.flows`. Returns the switch and how many
/// flows it holds.
fn restore_flows(cfg: &DaemonConfig, state: StateChoice) -> Result<(Arc<Switch>, usize), String> {
    let state = match state {
        StateChoice::Default(p) => Some(cfg.switch.state.clone().unwrap_or(p)),
        StateChoice::Off => None,
    };
    let first_start = state
        .as_ref()
        .is_none_or(|s| !s.exists() && !Journal::path_for(s).exists());
    let backend = match &cfg.switch.classifier {
        Some(name) => name
            .parse()
            .map_err(|e| format!("switch.classifier: {e}"))?,
        None => SwitchConfig::default().backend,
    };
    let sw = Switch::open(SwitchConfig {
        state,
        backend,
        conntrack: cfg.conntrack.ct_config()?,
        ..SwitchConfig::default()
    })?;
    if let (true, Some(flows)) = (first_start, &cfg.switch.flows) {
        let text = std::fs::read_to_string(flows)
            .map_err(|e| format!("switch.flows: {}: {e}", flows.display()))?;
        let r = sw.handle(&Request {
            op: Op::Replace,
            text,
        });
        if let Some(e) = r.error {
            return Err(format!("switch.flows: {}: {e}", flows.display()));
        }
    }
    let restored = sw.store().snapshot().rules().count();
    Ok((sw, restored))
}

/// Every queue of every port, shared out to the workers: queue `q` to worker `q % n`.
fn open_ports(
    cfg: &DaemonConfig,
    tier: Option<&Arc<XdpTier>>,
) -> Result<Vec<Vec<WorkerPort>>, String> {
    let n_workers = cfg.workers.len().max(1);
    let mut per_worker: Vec<Vec<WorkerPort>> = (0..n_workers).map(|_| Vec::new()).collect();
    // A vxlan port has no device: the datapath serves it (see `tunnels`).
    for p in cfg.ports.iter().filter(|p| p.kind != PortKind::Vxlan) {
        for q in 0..p.queues {
            let port = match tier {
                Some(t) if p.kind == PortKind::Afxdp => open_tier_port(p, q, t)?,
                _ => p.open(q)?,
            };
            per_worker[q as usize % n_workers].push(WorkerPort::new(p.number, q, port));
        }
    }
    Ok(per_worker)
}

/// One pinned poll-mode thread per `[[worker]]` over its share of the queues.
fn spawn_workers(
    cfg: &DaemonConfig,
    sw: &Arc<Switch>,
    per_worker: Vec<Vec<WorkerPort>>,
    stop: &Arc<AtomicBool>,
    tier: Option<&Arc<XdpTier>>,
    mac: &Arc<flowpath_datapath::MacLearningTable>,
) -> Result<Vec<WorkerHandle>, String> {
    let mut workers = Vec::new();
    let tunnels = tunnels(cfg)?;
    for (id, ports) in per_worker.into_iter().enumerate() {
        let wcfg = WorkerConfig {
            id,
            core: cfg.workers.get(id).and_then(|w| w.core),
            datapath: flowpath_datapath::DatapathConfig {
                tunnels: tunnels.clone(),
                ..cfg.datapath_config()
            },
            idle_sleep_max: Duration::from_micros(cfg.datapath.idle_sleep_max_us),
            pace: None,
            mac_table: Some(mac.clone()),
            flood_ports: None,
        };
        let h = spawn_worker_with_tier(sw, wcfg, ports, stop.clone(), tier.cloned())
            .map_err(|e| format!("worker[{id}]: cannot start its thread: {e}"))?;
        workers.push(h);
    }
    Ok(workers)
}

/// Every 250 ms until `stop`: a port whose link went down (or that its worker gave up on)
/// has its learned MACs forgotten, so NORMAL floods to find where those hosts are now
/// instead of sending into a dead link until the entries age out (OVS flushes a port's
/// MACs when the port goes away or is reconfigured; flowpath also does on link loss).
fn mac_port_watch(
    ports: &DaemonPorts,
    mac: &flowpath_datapath::MacLearningTable,
    stop: &AtomicBool,
) {
    use crate::openflow::SwitchPorts;
    let mut last = ports.describe();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        let now = ports.describe();
        for number in ports_gone_down(&last, &now) {
            mac.flush_port(number);
        }
        last = now;
    }
}

/// The ports usable in `before` (link up, not given up on) that are not usable in `after`
/// (link down, given up on, or gone).
fn ports_gone_down(before: &[PortDesc], after: &[PortDesc]) -> Vec<u32> {
    let usable = |p: &PortDesc| p.link_up && !p.down;
    before
        .iter()
        .filter(|b| usable(b))
        .filter(|b| !after.iter().any(|a| a.number == b.number && usable(a)))
        .map(|b| b.number)
        .collect()
}

/// The vxlan ports and their underlay, shared by every worker. Ports that give their hop
/// (`underlay_port`, `next_hop_mac`) use it as is; the others get theirs from the kernel's
/// routes and neighbours (`flowpath_underlay::NetlinkUnderlay`, over the afxdp / afpacket /
/// tap ports' interfaces), static hops first where both are in use.
fn tunnels(cfg: &DaemonConfig) -> Result<Option<Arc<flowpath_datapath::Tunnels>>, String> {
    use flowpath_datapath::{StaticUnderlay, TunnelRemote, Tunnels, UnderlayResolver};
    use flowpath_underlay::{Layered, NetlinkUnderlay, UnderlayPort};
    let ports = cfg.tunnel_ports();
    if ports.is_empty() {
        return Ok(None);
    }
    let fixed = StaticUnderlay::new();
    let (mut any_static, mut any_kernel) = (false, false);
    let mut kernel_remotes = Vec::new();
    for (p, hop) in &ports {
        match (hop, p.remote) {
            (Some(h), TunnelRemote::Fixed(r)) => fixed.insert(r, *h),
            (Some(h), TunnelRemote::Flow) => fixed.set_default(Some(*h)),
            (None, TunnelRemote::Fixed(r)) => kernel_remotes.push(r),
            (None, TunnelRemote::Flow) => {}
        }
        any_static |= hop.is_some();
        any_kernel |= hop.is_none();
    }
    let fixed: Arc<dyn UnderlayResolver> = Arc::new(fixed);
    let underlay = if any_kernel {
        let underlay_ports = cfg
            .ports
            .iter()
            .filter(|p| matches!(p.kind, PortKind::Afxdp | PortKind::Afpacket | PortKind::Tap))
            .filter_map(|p| {
                Some(UnderlayPort {
                    port: p.number,
                    ifname: p.interface.clone()?,
                })
            })
            .collect();
        let kernel: Arc<dyn UnderlayResolver> = Arc::new(
            NetlinkUnderlay::new(underlay_ports, &kernel_remotes)
                .map_err(|e| format!("vxlan underlay from the kernel's tables (netlink): {e}"))?,
        );
        if any_static {
            Arc::new(Layered {
                first: fixed,
                then: kernel,
            })
        } else {
            kernel
        }
    } else {
        fixed
    };
    let ports = ports.into_iter().map(|(p, _)| p).collect();
    Ok(Some(Arc::new(Tunnels::new(ports, underlay))))
}

/// What the control socket answers: `stats` from the workers' snapshots (and the tier's
/// line), everything else by the switch.
fn control_handler(
    sw: &Arc<Switch>,
    snapshots: &[Arc<Mutex<WorkerSnapshot>>],
    tier: Option<Arc<XdpTier>>,
    openflow: Option<ChannelStats>,
) -> impl Fn(&Request) -> crate::control::Response + Send + 'static {
    let (sw, snaps) = (sw.clone(), snapshots.to_vec());
    move |req| match req.op {
        Op::Stats => {
            let mut r = stats_response(&collect(&snaps));
            if let Some(t) = &tier {
                r.lines.push(t.stats_line());
            }
            if let Some(o) = &openflow {
                r.lines.push(o.line());
            }
            r
        }
        _ => sw.handle(req),
    }
}

/// The tracker's families for the metrics endpoint: its counters read at each scrape,
/// the per-zone and per-state census as the expiry thread last took it.
fn ct_metrics(sw: &Arc<Switch>) -> crate::metrics::ExtraMetrics {
    let sw = sw.clone();
    Arc::new(move |registry| {
        crate::conntrack::CtMetrics::read(sw.tracker(), sw.ct_census()).register(registry)
    })
}

/// Load the XDP tier, attach it to every afxdp port's interface and hook it to rule
/// changes (before any port opens, so the AF_XDP sockets can register in its xsks_map).
fn start_tier(cfg: &DaemonConfig, sw: &Arc<Switch>) -> Result<XdpTier, String> {
    let ports: Vec<TierPort<'_>> = cfg
        .ports
        .iter()
        .filter(|p| p.kind == PortKind::Afxdp)
        .map(|p| TierPort {
            name: &p.name,
            number: p.number,
            interface: p.interface.as_deref().unwrap_or_default(),
            queues: p.queues,
            mode: p.xdp_mode,
        })
        .collect();
    // The configuration lock is not needed yet: nothing else changes rules before start
    // returns; the version is read here and the hook set right after.
    let tier = XdpTier::setup(&ports, cfg.datapath.xdp_tier_max, sw.store().version())
        .map_err(|e| format!("datapath.xdp_tier: {e}"))?;
    Ok(tier)
}

/// Open queue `q` of an afxdp port against the XDP tier's program and xsks_map, wrapped
/// like [`PortConfig::open`] does (fault injector, pcap tracer: they see only the frames
/// that reach user space).
fn open_tier_port(
    p: &PortConfig,
    q: u32,
    tier: &Arc<XdpTier>,
) -> Result<Box<dyn flowpath_ports::Port>, String> {
    p.validate()?;
    let ctx = |e: std::io::Error| format!("port '{}' queue {q}: {e}", p.name);
    let reg: Arc<dyn flowpath_ports::xdp::XskRegistrar> = tier.clone();
    let mut port: Box<dyn flowpath_ports::Port> = Box::new(
        flowpath_ports::afxdp::AfXdpPort::open_with(
            &p.name,
            p.interface.as_deref().unwrap_or_default(),
            q,
            &flowpath_ports::afxdp::AfXdpOptions {
                mode: p.xdp_mode,
                zero_copy: p.zero_copy,
                hugepages: p.hugepages,
            },
            reg,
        )
        .map_err(ctx)?,
    );
    if let Some(f) = &p.fault {
        port = Box::new(flowpath_ports::FaultInjector::new(port, f.clone()));
    }
    if let Some(path) = &p.trace {
        let path = if p.queues > 1 {
            path.with_extension(format!("q{q}.pcap"))
        } else {
            path.clone()
        };
        port = Box::new(flowpath_ports::PcapTracer::new(port, &path).map_err(ctx)?);
    }
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(number: u32, link_up: bool, down: bool) -> PortDesc {
        PortDesc {
            number,
            name: format!("p{number}"),
            hw_addr: [2, 0, 0, 0, 0, number as u8],
            link_up,
            down,
            speed_kbps: 0,
        }
    }

    #[test]
    fn a_port_losing_its_link_or_its_worker_or_going_away_is_reported_once() {
        let before = [
            port(1, true, false),
            port(2, true, false),
            port(3, true, false),
        ];
        let after = [
            port(1, false, false),
            port(2, true, true),
            port(4, true, false),
        ];
        assert_eq!(ports_gone_down(&before, &after), vec![1, 2, 3]);
        // Already down: not reported again; coming up is not going down (port 4, new in
        // `after`, is gone in `before`).
        assert!(ports_gone_down(&after, &after).is_empty());
        assert_eq!(ports_gone_down(&after, &before), vec![4]);
        // A speed or MAC change alone is not a loss.
        let mut changed = before.clone();
        changed[0].speed_kbps = 10_000_000;
        changed[1].hw_addr = [2, 9, 9, 9, 9, 9];
        assert!(ports_gone_down(&before, &changed).is_empty());
    }
}
