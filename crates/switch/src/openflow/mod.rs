//! The OpenFlow 1.3 channel: listeners (`ptcp:`, `pssl:`) for tools such as `ovs-ofctl`,
//! active connections (`tcp:`, `ssl:`) to controllers with reconnect and echo keepalive,
//! on the same rule store as the control socket (a rule added either way shows in both
//! dumps). TLS authenticates both ends against one CA ([`tls`]).
//!
//! Threads: one per listener and per connection (at most `max_connections`; the channel
//! is not on the packet path), one that carries packet-ins from the workers' controller
//! queues to the connections under a per-port rate limit, and one that watches port link
//! state for PORT_STATUS. Each connection's thread alone owns its socket; everything sent
//! on it goes through a bounded queue ([`out`]), so no thread ever waits on a slow peer.
//! The codec is `flowpath-openflow`.

mod connection;
mod flows;
mod hub;
mod multipart;
mod out;
mod packet_io;
mod peer;
pub mod ports;
mod stream;
pub mod target;
pub mod tls;

pub use hub::ChannelCounters;
pub use packet_io::{NoPacketIo, PacketInItem, PacketIo, WorkerPacketIo};
pub use ports::{DaemonPorts, NoPorts, PortCounters, PortDesc, SwitchPorts};
pub use target::Target;
pub use tls::{TlsContext, TlsFiles};

use crate::switch::Switch;
use connection::Conn;
use hub::Shared;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the switch does while no controller is connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Keep the flows as they are (OpenFlow's fail-secure; the default, as in OVS).
    #[default]
    Secure,
    /// Act as a learning switch: a table-0 `priority=0,actions=NORMAL` flow (with cookie
    /// [`FAIL_OPEN_COOKIE`]) is installed while no `tcp:` controller is connected and
    /// removed when one connects.
    Standalone,
}

/// The cookie of the flow standalone fail mode installs.
pub const FAIL_OPEN_COOKIE: u64 = 0xfa11_0be4_fa11_0be4;

/// How the channel runs.
#[derive(Clone, Debug)]
pub struct OpenFlowConfig {
    pub targets: Vec<Target>,
    pub fail_mode: FailMode,
    /// FEATURES_REPLY's datapath id.
    pub datapath_id: u64,
    /// Packet-ins per second per ingress port (the rest are dropped and counted), so a
    /// miss storm cannot flood the controller. OVS's controller_rate_limit idea.
    pub packet_in_rate: u32,
    /// Packet-ins a port may send at once above the rate.
    pub packet_in_burst: u32,
    /// Send ECHO_REQUEST after this long without hearing from the peer; close the
    /// connection after twice as long (OVS's inactivity probe: 5 s).
    pub probe_interval: Duration,
    /// The first and longest reconnect wait for `tcp:` targets (doubling in between).
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// The key, certificate and CA certificate `ssl:` and `pssl:` targets use.
    pub tls: Option<TlsFiles>,
    /// Most connections open at once: listeners refuse more (the configured `tcp:` and
    /// `ssl:` controllers count, but are never refused).
    pub max_connections: usize,
    /// Most bytes queued for one connection; a peer that lets more pile up is not
    /// reading, and its connection is closed.
    pub max_output_bytes: usize,
}

/// Default [`OpenFlowConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default [`OpenFlowConfig::max_output_bytes`]: 4 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 4 << 20;

impl Default for OpenFlowConfig {
    fn default() -> Self {
        OpenFlowConfig {
            targets: Vec::new(),
            fail_mode: FailMode::Secure,
            datapath_id: 0x0000_f10e_9a70_0001,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            probe_interval: Duration::from_secs(5),
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(8),
            tls: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

impl OpenFlowConfig {
    /// Parse target strings; the error names the target at fault.
    pub fn with_targets(mut self, targets: &[String]) -> Result<OpenFlowConfig, String> {
        for t in targets {
            self.targets.push(Target::parse(t)?);
        }
        Ok(self)
    }

    /// Load the TLS files when a target needs them; the error names what is missing or
    /// wrong. `None` when no target speaks TLS.
    pub fn tls_context(&self) -> Result<Option<TlsContext>, String> {
        let Some(t) = self.targets.iter().find(|t| t.is_tls()) else {
            return Ok(None);
        };
        let Some(files) = &self.tls else {
            return Err(format!(
                "{t}: TLS needs a private key, a certificate and a CA certificate \
                 (--private-key, --certificate, --ca-cert; or the switch config's \
                 openflow_private_key, openflow_certificate, openflow_ca_cert)"
            ));
        };
        files.load().map(Some)
    }
}

/// Parse a datapath id given as hex (`0x1`, `00000000000000a1`, with or without `0x`).
pub fn parse_datapath_id(s: &str) -> Result<u64, String> {
    let h = s.trim().trim_start_matches("0x").replace(':', "");
    u64::from_str_radix(&h, 16)
        .map_err(|_| format!("'{s}' is not a 64-bit hexadecimal datapath id"))
}

/// A running OpenFlow channel. Dropping it does not stop it: set `stop` and call
/// [`OpenFlowChannel::join`].
pub struct OpenFlowChannel {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Where each `ptcp:` target ended up listening (port 0 asks for a free one).
    pub listening: Vec<std::net::SocketAddr>,
}

impl OpenFlowChannel {
    /// Bind every listener (a busy port is an error naming the target), then start the
    /// threads.
    pub fn start(
        switch: Arc<Switch>,
        ports: Arc<dyn SwitchPorts>,
        packet_io: Arc<dyn PacketIo>,
        cfg: OpenFlowConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<OpenFlowChannel, String> {
        let tls = cfg.tls_context().map_err(|e| format!("openflow {e}"))?;
        let mut listeners = Vec::new();
        for t in &cfg.targets {
            if let Some(a) = t.listen_addr() {
                let l = TcpListener::bind(a).map_err(|e| format!("openflow {t}: {e}"))?;
                l.set_nonblocking(true)
                    .map_err(|e| format!("openflow {t}: {e}"))?;
                let ctx = if t.is_tls() { tls.clone() } else { None };
                listeners.push((l, ctx));
            }
        }
        let listening = listeners
            .iter()
            .filter_map(|(l, _)| l.local_addr().ok())
            .collect();
        let shared = Shared::new(switch, ports, packet_io, cfg.clone(), stop.clone());
        let mut threads = Vec::new();
        for (l, ctx) in listeners {
            let sh = shared.clone();
            threads.push(spawn("flowpath-of-listen", move || listen(sh, l, ctx)));
        }
        let active: Vec<Target> = cfg
            .targets
            .iter()
            .filter(|t| t.listen_addr().is_none())
            .cloned()
            .collect();
        // A fail-open flow saved by an earlier run (standalone, no controller then) is
        // not configuration: start without it, and add it again below if still wanted.
        shared.remove_leftover_fail_open();
        if cfg.fail_mode == FailMode::Standalone && !active.is_empty() {
            shared.set_fail_open(true);
        }
        for t in active {
            let sh = shared.clone();
            let ctx = if t.is_tls() { tls.clone() } else { None };
            threads.push(spawn("flowpath-of-connect", move || {
                connect_loop(sh, t, ctx)
            }));
        }
        {
            let sh = shared.clone();
            threads.push(spawn("flowpath-of-packet-in", move || sh.packet_in_loop()));
        }
        {
            let sh = shared.clone();
            threads.push(spawn("flowpath-of-ports", move || sh.port_watch_loop()));
        }
        Ok(OpenFlowChannel {
            shared,
            threads,
            listening,
        })
    }

    /// Connections up now.
    pub fn connections(&self) -> usize {
        self.shared.connections()
    }

    /// Counters for `flowpath stats` and tests.
    pub fn counters(&self) -> ChannelCounters {
        self.shared.counters()
    }

    /// A handle that reads the counters later (for the control socket's `stats`).
    pub fn stats(&self) -> ChannelStats {
        ChannelStats(self.shared.clone())
    }

    /// Wait for every thread (after `stop` was set).
    pub fn join(self) {
        self.shared.close_all();
        for t in self.threads {
            let _ = t.join();
        }
        // The listeners are gone: no new connection threads. Wait for the ones there are
        // (each saves what it applied before it ends).
        for t in self.shared.take_threads() {
            let _ = t.join();
        }
    }
}

/// Reads a running channel's counters.
#[derive(Clone)]
pub struct ChannelStats(Arc<Shared>);

impl ChannelStats {
    pub fn counters(&self) -> ChannelCounters {
        self.0.counters()
    }

    /// One line for `flowpath stats`.
    pub fn line(&self) -> String {
        let c = self.counters();
        format!(
            "openflow: {} connections ({} accepted, {} connect failures); {} messages in, \
             {} flow_mods, {} errors sent; packet-in {} sent, {} over the per-port rate; \
             {} packet-outs; {} flow-removed; {} port-status; {} TLS handshakes refused, \
             {} connections refused over the limit, {} closed for not reading",
            c.connections,
            c.accepted,
            c.connect_failures,
            c.messages_in,
            c.flow_mods,
            c.errors_sent,
            c.packet_ins_sent,
            c.packet_ins_rate_dropped,
            c.packet_outs,
            c.flow_removed_sent,
            c.port_status_sent,
            c.tls_refused,
            c.connections_refused,
            c.output_overflows
        )
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn an OpenFlow thread")
}

/// Accept clients until stop; each gets its own thread (a TLS session first when the
/// listener is `pssl:`), up to `max_connections`.
fn listen(sh: Arc<Shared>, l: TcpListener, tls: Option<TlsContext>) {
    while !sh.stopped() {
        match l.accept() {
            Ok((s, peer)) => {
                let Some(slot) = sh.take_slot(&peer.to_string()) else {
                    drop(s);
                    continue;
                };
                let session = match tls.as_ref().map(|t| t.accept()).transpose() {
                    Ok(x) => x,
                    Err(e) => {
                        eprintln!("flowpath: openflow {peer}: TLS: {e}");
                        continue;
                    }
                };
                let sh2 = sh.clone();
                let h = spawn("flowpath-of-conn", move || {
                    if let Some(c) = Conn::open(sh2, slot, s, session, peer.to_string(), false) {
                        c.run();
                    }
                });
                sh.keep_thread(h);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                eprintln!("flowpath: openflow listener: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// Keep a connection to controller `t` up: connect, serve it, and on failure wait
/// (doubling from `backoff_min` to `backoff_max`) and try again.
fn connect_loop(sh: Arc<Shared>, t: Target, tls: Option<TlsContext>) {
    let mut wait = sh.cfg.backoff_min;
    while !sh.stopped() {
        let started = Instant::now();
        let stream = t
            .resolve()
            .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)));
        let session = match &tls {
            Some(ctx) => ctx
                .connect(t.host().unwrap_or_default())
                .map(Some)
                .map_err(std::io::Error::other),
            None => Ok(None),
        };
        match stream.and_then(|s| session.map(|x| (s, x))) {
            Ok((s, session)) => {
                let slot = sh.active_slot();
                if let Some(c) = Conn::open(sh.clone(), slot, s, session, t.to_string(), true) {
                    c.run();
                }
                // A connection that lasted resets the backoff.
                if started.elapsed() > sh.cfg.backoff_max {
                    wait = sh.cfg.backoff_min;
                }
            }
            Err(e) => sh.note_connect_failure(&t, &e),
        }
        let until = Instant::now() + wait;
        while Instant::now() < until && !sh.stopped() {
            std::thread::sleep(Duration::from_millis(50));
        }
        wait = (wait * 2).min(sh.cfg.backoff_max);
    }
}

/// Is `stop` set?
pub(crate) fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
}
