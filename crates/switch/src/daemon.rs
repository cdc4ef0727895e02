//! `flowpath switch`: the daemon from a TOML config: ports, pinned poll-mode workers, the
//! flows (restored from the state file), the control socket and a Prometheus endpoint.
//!
//! Queues are shared out so that every worker can transmit without locks: worker `w`
//! receives on queue `q` of a port when `q % workers == w`, and transmits to a port on the
//! first queue of it that it owns. So every port needs at least as many queues as there
//! are workers (the config check says so, naming the field).

use crate::control::{ControlSocket, Op, Request, Response};
use crate::pmd::{spawn_worker_with_tier, WorkerConfig, WorkerHandle, WorkerPort, WorkerSnapshot};
use crate::switch::{spawn_control_with, Switch, SwitchConfig};
use crate::tier::{TierPort, XdpTier};
use flowpath_datapath::DatapathConfig;
use flowpath_ports::{PortConfig, PortKind};
use serde::Deserialize;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The whole config file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    #[serde(default)]
    pub switch: SwitchSection,
    #[serde(default)]
    pub datapath: DatapathSection,
    #[serde(default, rename = "worker")]
    pub workers: Vec<WorkerSection>,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
}

/// `[switch]`
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    /// The state file (flows survive restarts); default `flowpath run`'s.
    pub state: Option<PathBuf>,
    /// The control socket; default `flowpath run`'s.
    pub control: Option<PathBuf>,
    /// A flows file (ovs-ofctl syntax) installed on the first start, when there is no
    /// state file yet. Afterwards the state file is what the switch restores.
    pub flows: Option<PathBuf>,
    /// `host:port` for the Prometheus text endpoint (keep it on localhost).
    pub metrics: Option<String>,
}

fn default_true() -> bool {
    true
}
fn default_emc_prob() -> u32 {
    100
}
fn default_megaflows() -> usize {
    65536
}
fn default_idle_sleep() -> u64 {
    500
}
fn default_xdp_tier_max() -> u32 {
    65536
}

/// `[datapath]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatapathSection {
    #[serde(default = "default_true")]
    pub emc: bool,
    /// Insert one flow in N into the exact-match cache.
    #[serde(default = "default_emc_prob")]
    pub emc_insert_inv_prob: u32,
    #[serde(default = "default_megaflows")]
    pub megaflow_max: usize,
    /// Longest idle nap of a worker in microseconds; 0 = never sleep (pure busy poll).
    #[serde(default = "default_idle_sleep")]
    pub idle_sleep_max_us: u64,
    /// Run the XDP tier: one `flow_tier` program on every afxdp port's interface answers
    /// cached flows in the kernel (docs/xdp-tier.md). Other port types do not take part.
    #[serde(default)]
    pub xdp_tier: bool,
    /// Entries the XDP tier holds (all workers together; new megaflows are not offered
    /// while it is full).
    #[serde(default = "default_xdp_tier_max")]
    pub xdp_tier_max: u32,
}

impl Default for DatapathSection {
    fn default() -> Self {
        DatapathSection {
            emc: true,
            emc_insert_inv_prob: default_emc_prob(),
            megaflow_max: default_megaflows(),
            idle_sleep_max_us: default_idle_sleep(),
            xdp_tier: false,
            xdp_tier_max: default_xdp_tier_max(),
        }
    }
}

/// `[[worker]]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// The CPU this worker is pinned to.
    pub core: Option<usize>,
}

impl DaemonConfig {
    /// Read and check a config file; errors name the file and the field.
    pub fn load(path: &Path) -> Result<DaemonConfig, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("config {}: {e}", path.display()))?;
        DaemonConfig::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
    }

    /// Parse and check config text.
    pub fn parse(text: &str) -> Result<DaemonConfig, String> {
        let cfg: DaemonConfig =
            toml::from_str(text).map_err(|e| e.to_string().trim().to_string())?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), String> {
        if self.ports.is_empty() {
            return Err("no [[port]]: a switch needs at least one port".into());
        }
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let online = online_cpus().unwrap_or(cpus);
        for (i, w) in self.workers.iter().enumerate() {
            if let Some(c) = w.core {
                if c >= online {
                    return Err(format!(
                        "worker[{i}].core: CPU {c} does not exist (this machine has CPUs 0..{})",
                        online - 1
                    ));
                }
                if self.workers[..i].iter().any(|o| o.core == Some(c)) {
                    return Err(format!("worker[{i}].core: CPU {c} already has a worker"));
                }
            }
        }
        let workers = self.workers.len().max(1) as u32;
        for (i, p) in self.ports.iter().enumerate() {
            p.validate().map_err(|e| format!("port[{i}]: {e}"))?;
            if p.number == 0 || p.number > 0xff00 {
                return Err(format!(
                    "port[{i}].number: {} is not a usable OpenFlow port number (1..=65280)",
                    p.number
                ));
            }
            if let Some(o) = self.ports[..i].iter().find(|o| o.name == p.name) {
                return Err(format!(
                    "port[{i}].name: '{}' is used twice (also number {})",
                    p.name, o.number
                ));
            }
            if let Some(o) = self.ports[..i].iter().find(|o| o.number == p.number) {
                return Err(format!(
                    "port[{i}].number: {} is already port '{}'",
                    p.number, o.name
                ));
            }
            if p.queues < workers {
                return Err(format!(
                    "port[{i}].queues: {} queue(s) but {workers} workers; every worker needs a queue \
                     of every port to transmit on without locks (set queues = {workers})",
                    p.queues
                ));
            }
        }
        if self.datapath.xdp_tier {
            let max = flowpath_xdptier::MAX_FLOWS;
            if self.datapath.xdp_tier_max == 0 || self.datapath.xdp_tier_max > max {
                return Err(format!("datapath.xdp_tier_max: must be 1..={max}"));
            }
            if !self.ports.iter().any(|p| p.kind == PortKind::Afxdp) {
                return Err(
                    "datapath.xdp_tier: no port of type afxdp (only those take part)".into(),
                );
            }
            let queues: u32 = self
                .ports
                .iter()
                .filter(|p| p.kind == PortKind::Afxdp)
                .map(|p| p.queues)
                .sum();
            if queues > flowpath_xdptier::MAX_XSKS {
                return Err(format!(
                    "datapath.xdp_tier: the afxdp ports have {queues} queues together; the XDP \
                     tier serves at most {}",
                    flowpath_xdptier::MAX_XSKS
                ));
            }
        }
        if self.datapath.emc_insert_inv_prob == 0 {
            return Err("datapath.emc_insert_inv_prob: must be at least 1".into());
        }
        if let Some(m) = &self.switch.metrics {
            m.parse::<SocketAddr>()
                .map_err(|e| format!("switch.metrics: '{m}' is not host:port ({e})"))?;
        }
        Ok(())
    }

    fn datapath_config(&self) -> DatapathConfig {
        DatapathConfig {
            emc: self.datapath.emc,
            emc_insert_inv_prob: self.datapath.emc_insert_inv_prob,
            megaflow_max: self.datapath.megaflow_max,
            ..DatapathConfig::default()
        }
    }
}

fn online_cpus() -> Option<usize> {
    // /sys/devices/system/cpu/online looks like "0-1" or "0,2-3".
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    let mut max = 0;
    for part in s.trim().split(',') {
        let hi = part.rsplit('-').next()?.parse::<usize>().ok()?;
        max = max.max(hi);
    }
    Some(max + 1)
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
    metrics: Option<(SocketAddr, JoinHandle<()>)>,
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
        default_state: PathBuf,
        default_control: PathBuf,
        stop: Arc<AtomicBool>,
    ) -> Result<Daemon, String> {
        let state = cfg.switch.state.clone().unwrap_or(default_state);
        let first_start = !state.exists();
        let sw = Switch::open(SwitchConfig {
            state: Some(state.clone()),
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
        let restored_flows = sw.store().snapshot().rules().count();

        // Open every queue of every port before starting anything, so a bad port stops
        // the start with its name and nothing half-running.
        let n_workers = cfg.workers.len().max(1);
        let tier = if cfg.datapath.xdp_tier {
            let t = Arc::new(start_tier(cfg, &sw)?);
            sw.set_rule_change_hook(t.clone());
            Some(t)
        } else {
            None
        };
        let mut per_worker: Vec<Vec<WorkerPort>> = (0..n_workers).map(|_| Vec::new()).collect();
        for p in &cfg.ports {
            for q in 0..p.queues {
                let port = match &tier {
                    Some(t) if p.kind == PortKind::Afxdp => open_tier_port(p, q, t)?,
                    _ => p.open(q)?,
                };
                per_worker[q as usize % n_workers].push(WorkerPort::new(p.number, q, port));
            }
        }

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

        let mut workers = Vec::new();
        for (id, ports) in per_worker.into_iter().enumerate() {
            let wcfg = WorkerConfig {
                id,
                core: cfg.workers.get(id).and_then(|w| w.core),
                datapath: cfg.datapath_config(),
                idle_sleep_max: Duration::from_micros(cfg.datapath.idle_sleep_max_us),
                pace: None,
            };
            let h = spawn_worker_with_tier(&sw, wcfg, ports, stop.clone(), tier.clone())
                .map_err(|e| format!("worker[{id}]: cannot start its thread: {e}"))?;
            workers.push(h);
        }
        let snapshots: Vec<_> = workers.iter().map(|w| w.snapshot.clone()).collect();

        let handler_sw = sw.clone();
        let handler_snaps = snapshots.clone();
        let handler_tier = tier.clone();
        let control = spawn_control_with(sock.clone(), stop.clone(), move |req| match req.op {
            Op::Stats => {
                let mut r = stats_response(&collect(&handler_snaps));
                if let Some(t) = &handler_tier {
                    r.lines.push(t.stats_line());
                }
                r
            }
            _ => handler_sw.handle(req),
        });
        let expiry = sw.spawn_expiry(stop.clone());
        let (metrics, metrics_addr) = match metrics_listener {
            Some(l) => {
                let addr = l.local_addr().map_err(|e| format!("switch.metrics: {e}"))?;
                let h = spawn_metrics(l, snapshots.clone(), stop.clone());
                (Some((addr, h)), Some(addr))
            }
            None => (None, None),
        };
        Ok(Daemon {
            switch: sw,
            workers,
            snapshots,
            stop,
            tier,
            control: Some((sock, control)),
            expiry: Some(expiry),
            metrics,
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
        if let Some((sock, h)) = self.control.take() {
            sock.wake();
            let _ = h.join();
        }
        if let Some(h) = self.expiry.take() {
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

fn collect(snaps: &[Arc<Mutex<WorkerSnapshot>>]) -> Vec<WorkerSnapshot> {
    snaps
        .iter()
        .map(|s| s.lock().map(|g| g.clone()).unwrap_or_default())
        .collect()
}

fn stats_response(snaps: &[WorkerSnapshot]) -> Response {
    Response {
        lines: format_stats(snaps).lines().map(String::from).collect(),
        data: serde_json::to_value(snaps).ok(),
        ..Response::default()
    }
}

/// `flowpath stats` text, in the spirit of `ovs-appctl dpif-netdev/pmd-perf-show`.
pub fn format_stats(snaps: &[WorkerSnapshot]) -> String {
    let mut o = String::new();
    for w in snaps {
        let total = (w.busy_cycles + w.idle_cycles).max(1);
        let pct = |n: u64, d: u64| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let core = w
            .core
            .map(|c| format!("core {c}"))
            .unwrap_or_else(|| "not pinned".into());
        let _ = writeln!(o, "worker {} ({core}):", w.id);
        let _ = writeln!(
            o,
            "  iterations:        {:>14}  ({:.1} % received packets, {} naps)",
            w.iterations,
            pct(w.busy_iterations, w.iterations),
            w.sleeps
        );
        let _ = writeln!(
            o,
            "  cycles:            {:>14}  ({:.1} % busy; {:.1} s at {:.3} GHz TSC)",
            total,
            pct(w.busy_cycles, total),
            total as f64 / w.tsc_hz.max(1.0),
            w.tsc_hz / 1e9
        );
        let _ = writeln!(o, "  rx packets:        {:>14}", w.packets);
        let _ = writeln!(o, "  avg batch:         {:>14.1}  packets", w.avg_batch());
        let _ = writeln!(
            o,
            "  cycles/packet:     {:>14.0}  (busy cycles / packets)",
            w.cycles_per_packet()
        );
        let _ = writeln!(
            o,
            "  exact-match hits:  {:>14}  ({:.1} %)",
            w.emc_hits,
            pct(w.emc_hits, w.packets)
        );
        let _ = writeln!(
            o,
            "  megaflow hits:     {:>14}  ({:.1} %)",
            w.megaflow_hits,
            pct(w.megaflow_hits, w.packets)
        );
        let _ = writeln!(
            o,
            "  misses:            {:>14}  ({:.1} %)",
            w.misses,
            pct(w.misses, w.packets)
        );
        let _ = writeln!(o, "  upcalls:           {:>14}", w.upcalls);
        let _ = writeln!(o, "  drops:             {:>14}", w.drops);
        if w.xdp_hits + w.xdp_entries + w.xdp_not_offered > 0 {
            let _ = writeln!(
                o,
                "  xdp tier hits:     {:>14}  (in the kernel, not in rx packets; {} entries, {} megaflows not offered)",
                w.xdp_hits, w.xdp_entries, w.xdp_not_offered
            );
        }
        let _ = writeln!(o, "  tx packets:        {:>14}", w.tx_packets);
        if w.no_such_port > 0 {
            let _ = writeln!(o, "  to unknown ports:  {:>14}", w.no_such_port);
        }
        for p in &w.ports {
            let s = &p.stats;
            let _ = writeln!(
                o,
                "  port {} '{}' queue {}: {} {}{}",
                p.number,
                p.name,
                p.queue,
                p.info.kind,
                p.info.detail,
                p.down
                    .as_ref()
                    .map(|e| format!(" — DOWN: {e}"))
                    .unwrap_or_default()
            );
            let _ = writeln!(
                o,
                "      rx {} pkts {} bytes, {} dropped; tx {} pkts {} bytes, {} dropped; {} errors",
                s.rx_packets,
                s.rx_bytes,
                s.rx_dropped,
                s.tx_packets,
                s.tx_bytes,
                s.tx_dropped,
                s.errors
            );
        }
    }
    o
}

/// The Prometheus text exposition of the workers' counters.
///
/// Written by hand: the format is a few lines of text per metric, and the switch has no
/// other use for a metrics library.
pub fn prometheus_text(snaps: &[WorkerSnapshot]) -> String {
    let mut o = String::new();
    type Get = fn(&WorkerSnapshot) -> f64;
    let worker_metrics: [(&str, &str, Get); 12] = [
        ("packets_total", "Packets received by the worker.", |w| {
            w.packets as f64
        }),
        ("batches_total", "Receive batches processed.", |w| {
            w.batches as f64
        }),
        (
            "emc_hits_total",
            "Packets answered by the exact-match cache.",
            |w| w.emc_hits as f64,
        ),
        (
            "megaflow_hits_total",
            "Packets answered by the megaflow cache.",
            |w| w.megaflow_hits as f64,
        ),
        ("misses_total", "Packets that missed both caches.", |w| {
            w.misses as f64
        }),
        (
            "upcalls_total",
            "Packets classified by the slow path.",
            |w| w.upcalls as f64,
        ),
        (
            "drops_total",
            "Packets dropped by the datapath, all reasons.",
            |w| w.drops as f64,
        ),
        (
            "tx_packets_total",
            "Packets queued for transmission.",
            |w| w.tx_packets as f64,
        ),
        (
            "busy_cycles_total",
            "TSC cycles in iterations that received packets.",
            |w| w.busy_cycles as f64,
        ),
        (
            "idle_cycles_total",
            "TSC cycles in empty iterations and naps.",
            |w| w.idle_cycles as f64,
        ),
        ("iterations_total", "Poll loop iterations.", |w| {
            w.iterations as f64
        }),
        ("sleeps_total", "Idle naps taken.", |w| w.sleeps as f64),
    ];
    for (name, help, get) in worker_metrics {
        let _ = writeln!(o, "# HELP flowpath_worker_{name} {help}");
        let _ = writeln!(o, "# TYPE flowpath_worker_{name} counter");
        for w in snaps {
            let core = w.core.map(|c| c.to_string()).unwrap_or_default();
            let _ = writeln!(
                o,
                "flowpath_worker_{name}{{worker=\"{}\",core=\"{core}\"}} {}",
                w.id,
                get(w)
            );
        }
    }
    type PGet = fn(&flowpath_ports::PortStats) -> u64;
    let port_metrics: [(&str, &str, PGet); 7] = [
        ("rx_packets_total", "Frames received.", |s| s.rx_packets),
        ("rx_bytes_total", "Bytes received.", |s| s.rx_bytes),
        (
            "rx_dropped_total",
            "Frames received but not delivered.",
            |s| s.rx_dropped,
        ),
        ("tx_packets_total", "Frames sent.", |s| s.tx_packets),
        ("tx_bytes_total", "Bytes sent.", |s| s.tx_bytes),
        ("tx_dropped_total", "Frames that could not be sent.", |s| {
            s.tx_dropped
        }),
        ("errors_total", "Failed system calls.", |s| s.errors),
    ];
    for (name, help, get) in port_metrics {
        let _ = writeln!(o, "# HELP flowpath_port_{name} {help}");
        let _ = writeln!(o, "# TYPE flowpath_port_{name} counter");
        for w in snaps {
            for p in &w.ports {
                let _ = writeln!(
                    o,
                    "flowpath_port_{name}{{port=\"{}\",number=\"{}\",queue=\"{}\",worker=\"{}\"}} {}",
                    escape_label(&p.name),
                    p.number,
                    p.queue,
                    w.id,
                    get(&p.stats)
                );
            }
        }
    }
    o
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn spawn_metrics(
    l: TcpListener,
    snaps: Vec<Arc<Mutex<WorkerSnapshot>>>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("flowpath-metrics".into())
        .spawn(move || {
            for conn in l.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let body = prometheus_text(&collect(&snaps));
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        })
        .expect("spawn the metrics thread")
}
