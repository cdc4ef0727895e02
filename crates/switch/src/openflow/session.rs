//! One OpenFlow connection (a session): version negotiation, the request/reply messages,
//! roles and asynchronous-message configuration, echo keepalive; and what all sessions
//! share: packet-ins from the workers (rate limited per port), FLOW_REMOVED and
//! PORT_STATUS fanned out to every connection that wants them.

use super::flows::{self, PendingAdds};
use super::ports::{PortDesc, SwitchPorts};
use super::{FailMode, OpenFlowConfig, Target, FAIL_OPEN_COOKIE};
use crate::pmd::WorkerHandle;
use crate::switch::Switch;
use flowpath_datapath::{ControllerQueue, PacketOut, PacketOutQueue};
use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, negotiate_version, AsyncConfig, Features, Header, Message, OfError, Oxm,
    OxmField, PacketIn, Port, Role, SwitchConfig,
};
use flowpath_packet::Action;
use flowpath_pipeline::{RemovalReason, Removed};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A packet a worker handed to the controller (a `controller` action or a table-miss
/// flow that sends there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketInItem {
    pub in_port: u32,
    /// OFPR_NO_MATCH, OFPR_ACTION or OFPR_INVALID_TTL.
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    /// The frame's length before truncation to the action's max_len.
    pub total_len: u16,
    pub data: Vec<u8>,
}

/// Where packet-ins come from and packet-outs go: the daemon's workers.
pub trait PacketIo: Send + Sync {
    /// Move up to `max` waiting packet-ins into `out`.
    fn poll_packet_ins(&self, out: &mut Vec<PacketInItem>, max: usize);
    /// Run `actions` on `data` as if it came in on `in_port` (OFPP_CONTROLLER: no port).
    fn packet_out(&self, in_port: u32, actions: Vec<Action>, data: Vec<u8>) -> Result<(), OfError>;
    /// The port numbers packets can be sent out of (packet-out checks its outputs).
    fn has_port(&self, port: u32) -> bool;
}

/// A switch without datapath workers (`flowpath run`): no packet-ins; packet-out refused.
pub struct NoPacketIo;

impl PacketIo for NoPacketIo {
    fn poll_packet_ins(&self, _: &mut Vec<PacketInItem>, _: usize) {}
    fn packet_out(&self, _: u32, _: Vec<Action>, _: Vec<u8>) -> Result<(), OfError> {
        Err(OfError {
            type_: et::BAD_REQUEST,
            code: brc::BAD_PORT,
        })
    }
    fn has_port(&self, _: u32) -> bool {
        false
    }
}

/// Datapath workers as the OpenFlow channel's packet source and sink: packet-ins
/// from every worker's controller queue (taken in turn), packet-outs to worker 0, which
/// like every worker can transmit on every port.
pub struct WorkerPacketIo {
    controllers: Vec<Arc<ControllerQueue>>,
    packet_out: Arc<PacketOutQueue>,
    /// Worker 0's thread: unparked after a push, so a napping worker runs the packet-out
    /// now rather than after its nap.
    wake: std::thread::Thread,
    ports: Vec<u32>,
    next: std::sync::atomic::AtomicUsize,
}

impl WorkerPacketIo {
    /// `workers`' queues; `ports`: the port numbers packet-outs may name.
    pub fn new(workers: &[WorkerHandle], ports: Vec<u32>) -> WorkerPacketIo {
        WorkerPacketIo {
            controllers: workers.iter().map(|w| w.controller.clone()).collect(),
            packet_out: workers[0].packet_out.clone(),
            wake: workers[0].thread.thread().clone(),
            ports,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl PacketIo for WorkerPacketIo {
    fn poll_packet_ins(&self, out: &mut Vec<PacketInItem>, max: usize) {
        let n = self.controllers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let q = &self.controllers[(start + i) % n];
            while out.len() < max {
                let Some(p) = q.pop() else { break };
                out.push(PacketInItem {
                    in_port: p.in_port,
                    reason: p.reason,
                    table_id: p.table_id,
                    cookie: p.cookie,
                    total_len: p.total_len.min(u16::MAX as u32) as u16,
                    data: p.data.clone(),
                });
                q.recycle(p);
            }
        }
    }

    fn packet_out(&self, in_port: u32, actions: Vec<Action>, data: Vec<u8>) -> Result<(), OfError> {
        let p = PacketOut {
            in_port: (in_port != OFPP_CONTROLLER).then_some(in_port),
            actions,
            data,
        };
        let r = self.packet_out.push(p);
        self.wake.unpark();
        r.map_err(|_| {
            // The worker is behind by a whole queue of packet-outs: refuse, not block.
            OfError {
                type_: et::BAD_REQUEST,
                code: brc::EPERM,
            }
        })
    }

    fn has_port(&self, port: u32) -> bool {
        self.ports.contains(&port)
    }
}

/// What the channel counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelCounters {
    pub connections: u64,
    pub accepted: u64,
    pub connect_failures: u64,
    pub messages_in: u64,
    pub flow_mods: u64,
    pub errors_sent: u64,
    pub packet_ins_sent: u64,
    /// Packet-ins dropped over their port's rate (the miss-storm protection).
    pub packet_ins_rate_dropped: u64,
    pub packet_outs: u64,
    pub flow_removed_sent: u64,
    pub port_status_sent: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    connect_failures: AtomicU64,
    messages_in: AtomicU64,
    flow_mods: AtomicU64,
    errors_sent: AtomicU64,
    packet_ins_sent: AtomicU64,
    packet_ins_rate_dropped: AtomicU64,
    packet_outs: AtomicU64,
    flow_removed_sent: AtomicU64,
    port_status_sent: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The sending side of a connection, shared with the threads that send asynchronous
/// messages.
pub(crate) struct ConnOut {
    id: u64,
    pub(crate) peer: String,
    /// An active (`tcp:`) connection to a controller, as opposed to a client that
    /// connected to a listener.
    active: bool,
    writer: Mutex<TcpStream>,
    role: AtomicU32,
    pub(crate) async_cfg: Mutex<AsyncConfig>,
    pub(crate) config: Mutex<SwitchConfig>,
    /// HELLO exchanged: asynchronous messages may flow.
    ready: AtomicBool,
    alive: AtomicBool,
}

impl ConnOut {
    /// Send encoded messages; a failed write closes the connection (the reader notices).
    pub(crate) fn send_raw(&self, bytes: &[u8]) -> bool {
        if !self.alive.load(Ordering::Relaxed) {
            return false;
        }
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.write_all(bytes).is_err() {
            self.alive.store(false, Ordering::Relaxed);
            let _ = w.shutdown(std::net::Shutdown::Both);
            return false;
        }
        true
    }

    pub(crate) fn send(&self, m: &Message, xid: u32) -> bool {
        self.send_raw(&m.encode(xid))
    }

    fn role(&self) -> u32 {
        self.role.load(Ordering::Relaxed)
    }

    /// Does this connection want asynchronous message `kind` (0 packet-in, 1 port status,
    /// 2 flow removed) with `reason`? By its role and its SET_ASYNC masks.
    fn wants(&self, kind: usize, reason: u8) -> bool {
        if !self.ready.load(Ordering::Relaxed) || !self.alive.load(Ordering::Relaxed) {
            return false;
        }
        let slave = self.role() == OFPCR_ROLE_SLAVE;
        let a = self.async_cfg.lock().unwrap_or_else(|e| e.into_inner());
        let masks = match kind {
            0 => a.packet_in_mask,
            1 => a.port_status_mask,
            _ => a.flow_removed_mask,
        };
        let m = masks[usize::from(slave)];
        reason < 32 && m & (1 << reason) != 0
    }
}

/// The OpenFlow 1.3 default asynchronous configuration (§7.3.10): master/equal get every
/// packet-in, port status and flow-removed reason; slaves get port status only.
fn default_async() -> AsyncConfig {
    AsyncConfig {
        packet_in_mask: [0b111, 0],
        port_status_mask: [0b111, 0b111],
        flow_removed_mask: [0b1111, 0],
    }
}

/// Everything the sessions share.
pub(crate) struct Shared {
    pub(crate) switch: Arc<Switch>,
    pub(crate) ports: Arc<dyn SwitchPorts>,
    pub(crate) io: Arc<dyn PacketIo>,
    pub(crate) cfg: OpenFlowConfig,
    stop: Arc<AtomicBool>,
    conns: Mutex<Vec<Arc<ConnOut>>>,
    next_id: AtomicU64,
    counters: Counters,
    /// The largest generation_id a master/slave role request carried (§6.3.6).
    generation: Mutex<Option<u64>>,
    fail_open: Mutex<bool>,
    /// Connection threads of the listeners (joined when the channel stops).
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Shared {
    pub(crate) fn new(
        switch: Arc<Switch>,
        ports: Arc<dyn SwitchPorts>,
        io: Arc<dyn PacketIo>,
        cfg: OpenFlowConfig,
        stop: Arc<AtomicBool>,
    ) -> Arc<Shared> {
        let sh = Arc::new(Shared {
            switch,
            ports,
            io,
            cfg,
            stop,
            conns: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            counters: Counters::default(),
            generation: Mutex::new(None),
            fail_open: Mutex::new(false),
            threads: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&sh);
        sh.switch.on_removed(Arc::new(move |gone: &[Removed]| {
            if let Some(sh) = weak.upgrade() {
                sh.flow_removed(gone);
            }
        }));
        sh
    }

    pub(crate) fn stopped(&self) -> bool {
        super::stopped(&self.stop)
    }

    pub(crate) fn connections(&self) -> usize {
        self.live_conns().len()
    }

    fn live_conns(&self) -> Vec<Arc<ConnOut>> {
        let mut c = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|o| o.alive.load(Ordering::Relaxed));
        c.clone()
    }

    pub(crate) fn counters(&self) -> ChannelCounters {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ChannelCounters {
            connections: self.connections() as u64,
            accepted: l(&c.accepted),
            connect_failures: l(&c.connect_failures),
            messages_in: l(&c.messages_in),
            flow_mods: l(&c.flow_mods),
            errors_sent: l(&c.errors_sent),
            packet_ins_sent: l(&c.packet_ins_sent),
            packet_ins_rate_dropped: l(&c.packet_ins_rate_dropped),
            packet_outs: l(&c.packet_outs),
            flow_removed_sent: l(&c.flow_removed_sent),
            port_status_sent: l(&c.port_status_sent),
        }
    }

    /// Keep a connection thread's handle (finished ones are let go).
    pub(crate) fn keep_thread(&self, h: std::thread::JoinHandle<()>) {
        let mut t = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|h| !h.is_finished());
        t.push(h);
    }

    pub(crate) fn take_threads(&self) -> Vec<std::thread::JoinHandle<()>> {
        std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn close_all(&self) {
        for c in self.live_conns() {
            c.alive.store(false, Ordering::Relaxed);
            let w = c.writer.lock().unwrap_or_else(|e| e.into_inner());
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
    }

    pub(crate) fn note_connect_failure(&self, t: &Target, e: &std::io::Error) {
        let n = self
            .counters
            .connect_failures
            .fetch_add(1, Ordering::Relaxed);
        // Say it the first time and then now and again, not at every retry.
        if n.is_power_of_two() || n == 0 {
            eprintln!("flowpath: openflow {t}: cannot connect: {e} (retrying with backoff)");
        }
    }

    /// Standalone fail mode: install (or remove) the table-0 NORMAL flow that makes the
    /// switch a learning switch while no controller is connected.
    pub(crate) fn set_fail_open(&self, on: bool) {
        if self.cfg.fail_mode != FailMode::Standalone {
            return;
        }
        let mut cur = self.fail_open.lock().unwrap_or_else(|e| e.into_inner());
        if *cur == on {
            return;
        }
        let r = if on {
            let mut spec = flowpath_pipeline::RuleSpec::new(0, 0, flowpath_pipeline::Match::any());
            spec.actions = vec![Action::Normal];
            spec.cookie = FAIL_OPEN_COOKIE;
            self.switch
                .apply_batch(vec![flowpath_pipeline::Change::Add(spec)])
        } else {
            let mut sel = flowpath_pipeline::Selector::all();
            sel.cookie = FAIL_OPEN_COOKIE;
            sel.cookie_mask = u64::MAX;
            self.switch
                .apply_batch(vec![flowpath_pipeline::Change::DeleteWhere(sel)])
        };
        match r {
            Ok(_) => *cur = on,
            Err(e) => eprintln!("flowpath: openflow fail mode standalone: {e}"),
        }
    }

    pub(crate) fn remove_leftover_fail_open(&self) {
        let snap = self.switch.store().snapshot();
        if snap.rules().any(|r| r.spec.cookie == FAIL_OPEN_COOKIE) {
            let mut sel = flowpath_pipeline::Selector::all();
            sel.cookie = FAIL_OPEN_COOKIE;
            sel.cookie_mask = u64::MAX;
            if let Err(e) = self
                .switch
                .apply_batch(vec![flowpath_pipeline::Change::DeleteWhere(sel)])
            {
                eprintln!("flowpath: openflow: removing the last run's fail-open flow: {e}");
            }
        }
    }

    /// After a `tcp:` controller connection opens or closes.
    fn controllers_changed(&self) {
        let any = self.live_conns().iter().any(|c| c.active);
        self.set_fail_open(!any);
    }

    fn register(&self, out: Arc<ConnOut>) {
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(out);
    }

    /// Send `m` to every ready connection that wants it.
    fn fan_out(&self, kind: usize, reason: u8, m: &Message, counter: &AtomicU64) {
        let bytes = m.encode(0);
        for c in self.live_conns() {
            if c.wants(kind, reason) && c.send_raw(&bytes) {
                bump(counter);
            }
        }
    }

    /// FLOW_REMOVED for removed rules that asked for it (OFPFF_SEND_FLOW_REM).
    fn flow_removed(&self, gone: &[Removed]) {
        let now = flowpath_pipeline::now_ns();
        for Removed { rule: r, reason } in gone {
            if !flows::sends_flow_removed(&r.spec) {
                continue;
            }
            let why = match reason {
                RemovalReason::IdleTimeout => OFPRR_IDLE_TIMEOUT,
                RemovalReason::HardTimeout => OFPRR_HARD_TIMEOUT,
                RemovalReason::Delete => OFPRR_DELETE,
                RemovalReason::GroupDelete => OFPRR_GROUP_DELETE,
            };
            let (packets, bytes) = r.counters.get();
            let age = now.saturating_sub(r.counters.added_ns);
            let m = Message::FlowRemoved(flowpath_openflow::translate::flow_removed(
                &r.spec, why, packets, bytes, age,
            ));
            self.fan_out(2, why, &m, &self.counters.flow_removed_sent);
        }
    }

    /// Carry packet-ins from the workers to the controllers until stop, at most
    /// `packet_in_rate` per second per ingress port (a token bucket with
    /// `packet_in_burst` tokens); the rest are dropped and counted.
    pub(crate) fn packet_in_loop(self: Arc<Self>) {
        let mut items = Vec::with_capacity(256);
        let mut buckets: HashMap<u32, (f64, Instant)> = HashMap::new();
        let rate = self.cfg.packet_in_rate.max(1) as f64;
        let burst = self.cfg.packet_in_burst.max(1) as f64;
        // Nap when the queues are empty, from 10 µs doubling to 500 µs: a controller
        // answering packet-ins one at a time is not held up by a full 500 µs nap after
        // each, and an idle switch still polls only every 500 µs.
        let mut nap = Duration::ZERO;
        while !self.stopped() {
            items.clear();
            self.io.poll_packet_ins(&mut items, 256);
            if items.is_empty() {
                nap = (nap * 2).clamp(Duration::from_micros(10), Duration::from_micros(500));
                std::thread::sleep(nap);
                continue;
            }
            nap = Duration::ZERO;
            let now = Instant::now();
            for p in items.drain(..) {
                let (tokens, last) = buckets.entry(p.in_port).or_insert((burst, now));
                *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(burst);
                *last = now;
                if *tokens < 1.0 {
                    bump(&self.counters.packet_ins_rate_dropped);
                    continue;
                }
                *tokens -= 1.0;
                let reason = p.reason;
                let m = Message::PacketIn(PacketIn {
                    buffer_id: OFP_NO_BUFFER,
                    total_len: p.total_len,
                    reason,
                    table_id: p.table_id,
                    cookie: p.cookie,
                    match_: vec![Oxm::exact(OxmField::InPort, p.in_port as u128)],
                    data: p.data,
                });
                self.fan_out(0, reason, &m, &self.counters.packet_ins_sent);
            }
        }
    }

    /// Watch the ports' descriptions (link state, ports coming and going) and send
    /// PORT_STATUS on every change.
    pub(crate) fn port_watch_loop(self: Arc<Self>) {
        let mut last: Vec<PortDesc> = self.ports.describe();
        while !self.stopped() {
            std::thread::sleep(Duration::from_millis(250));
            let now = self.ports.describe();
            if now == last {
                continue;
            }
            for p in &now {
                match last.iter().find(|o| o.number == p.number) {
                    None => self.port_status(OFPPR_ADD, p),
                    Some(o) if o != p => self.port_status(OFPPR_MODIFY, p),
                    Some(_) => {}
                }
            }
            for o in &last {
                if !now.iter().any(|p| p.number == o.number) {
                    self.port_status(OFPPR_DELETE, o);
                }
            }
            last = now;
        }
    }

    fn port_status(&self, reason: u8, p: &PortDesc) {
        let m = Message::PortStatus {
            reason,
            port: of_port(p),
        };
        self.fan_out(1, reason, &m, &self.counters.port_status_sent);
    }
}

/// A port description as OpenFlow's `ofp_port`.
pub(crate) fn of_port(p: &PortDesc) -> Port {
    let mut name = p.name.clone();
    name.truncate(OFP_MAX_PORT_NAME_LEN - 1);
    let feature = match p.speed_kbps {
        0 => OFPPF_OTHER,
        s if s >= 100_000_000 => OFPPF_100GB_FD,
        s if s >= 40_000_000 => OFPPF_40GB_FD,
        s if s >= 10_000_000 => OFPPF_10GB_FD,
        s if s >= 1_000_000 => OFPPF_1GB_FD,
        s if s >= 100_000 => OFPPF_100MB_FD,
        _ => OFPPF_10MB_FD,
    } | OFPPF_COPPER;
    let mut state = 0;
    if !p.link_up {
        state |= OFPPS_LINK_DOWN;
    } else {
        state |= OFPPS_LIVE;
    }
    Port {
        port_no: p.number,
        hw_addr: p.hw_addr,
        name,
        config: if p.down { OFPPC_PORT_DOWN } else { 0 },
        state,
        curr: feature,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: p.speed_kbps,
        max_speed: p.speed_kbps,
    }
}

/// A connection being served: its socket's reading side and what it is in the middle of.
pub(crate) struct Conn {
    sh: Arc<Shared>,
    pub(crate) out: Arc<ConnOut>,
    stream: TcpStream,
    buf: Vec<u8>,
    pub(crate) pending: PendingAdds,
    last_rx: Instant,
    echo_sent: bool,
    hello_seen: bool,
}

/// While flow_mods stream in, the state file is rewritten at most this often.
const SAVE_GAP: Duration = Duration::from_millis(200);

/// How long a read waits before the loop checks stop, keepalive and pending adds.
const READ_TICK: Duration = Duration::from_millis(100);

impl Conn {
    /// Set up the socket, send HELLO and register for asynchronous messages. `None` if
    /// the socket is already unusable.
    pub(crate) fn open(
        sh: Arc<Shared>,
        stream: TcpStream,
        peer: String,
        active: bool,
    ) -> Option<Conn> {
        stream.set_nodelay(true).ok()?;
        stream.set_read_timeout(Some(READ_TICK)).ok()?;
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .ok()?;
        let writer = stream.try_clone().ok()?;
        let out = Arc::new(ConnOut {
            id: sh.next_id.fetch_add(1, Ordering::Relaxed),
            peer,
            active,
            writer: Mutex::new(writer),
            role: AtomicU32::new(OFPCR_ROLE_EQUAL),
            async_cfg: Mutex::new(default_async()),
            config: Mutex::new(SwitchConfig {
                flags: OFPC_FRAG_NORMAL,
                miss_send_len: 128,
            }),
            ready: AtomicBool::new(false),
            alive: AtomicBool::new(true),
        });
        if !out.send(&Message::hello(), 0) {
            return None;
        }
        sh.register(out.clone());
        Some(Conn {
            sh,
            out,
            stream,
            buf: Vec::with_capacity(1 << 16),
            pending: PendingAdds::default(),
            last_rx: Instant::now(),
            echo_sent: false,
            hello_seen: false,
        })
    }

    /// Serve the connection until the peer goes away, keepalive fails, or stop.
    pub(crate) fn run(mut self) {
        let mut chunk = vec![0u8; 1 << 16];
        'conn: while !self.sh.stopped() && self.out.alive.load(Ordering::Relaxed) {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    self.last_rx = Instant::now();
                    self.echo_sent = false;
                    // Every whole message in the buffer, then what is left moves to the
                    // front once (not once per message).
                    let mut buf = std::mem::take(&mut self.buf);
                    let mut off = 0;
                    loop {
                        let rest = &buf[off..];
                        match message_len(rest) {
                            Ok(Some(len)) if rest.len() >= len => {
                                if !self.dispatch(&rest[..len]) {
                                    break 'conn;
                                }
                                off += len;
                            }
                            Ok(_) => break,
                            Err(e) => {
                                // The framing itself is broken: nothing after this can be
                                // trusted. Say why and close (OVS does the same).
                                self.error(e.to_of_error(), rest, 0);
                                break 'conn;
                            }
                        }
                    }
                    buf.drain(..off);
                    self.buf = buf;
                    // More bytes already waiting: keep reading before applying, so a
                    // stream of adds becomes few large batches.
                    if !self.pending.is_empty() && !self.more_waiting() {
                        flows::flush_adds(&mut self);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if !self.pending.is_empty() {
                        flows::flush_adds(&mut self);
                    }
                    let _ = self.sh.switch.save_pending();
                    if !self.keepalive() {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if !self.pending.is_empty() {
            flows::flush_adds(&mut self);
        }
        let _ = self.sh.switch.save_pending();
        self.out.alive.store(false, Ordering::Relaxed);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if self.out.active {
            self.sh.controllers_changed();
        }
    }

    /// Are bytes waiting on the socket right now?
    fn more_waiting(&self) -> bool {
        let mut b = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let r = matches!(self.stream.peek(&mut b), Ok(n) if n > 0);
        let _ = self.stream.set_nonblocking(false);
        r
    }

    /// Echo keepalive: probe after `probe_interval` of silence, give up after twice that.
    fn keepalive(&mut self) -> bool {
        let quiet = self.last_rx.elapsed();
        if quiet >= self.sh.cfg.probe_interval * 2 {
            eprintln!(
                "flowpath: openflow {}: no answer to echo for {:.0?}, closing",
                self.out.peer, quiet
            );
            return false;
        }
        if quiet >= self.sh.cfg.probe_interval && !self.echo_sent {
            self.echo_sent = true;
            return self.out.send(&Message::EchoRequest(Vec::new()), 0);
        }
        true
    }

    /// Send an OpenFlow error answering `request` (its first 64 bytes go back with it).
    pub(crate) fn error(&self, (type_, code): (u16, u16), request: &[u8], xid: u32) {
        bump(&self.sh.counters.errors_sent);
        self.out.send(&Message::error((type_, code), request), xid);
    }

    pub(crate) fn of_error(&self, e: OfError, request: &[u8], xid: u32) {
        self.error((e.type_, e.code), request, xid);
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.sh
    }

    /// Handle one message; false closes the connection.
    fn dispatch(&mut self, raw: &[u8]) -> bool {
        bump(&self.sh.counters.messages_in);
        let Some(h) = Header::peek(raw) else {
            return false;
        };
        if !self.hello_seen {
            return self.hello(raw, h);
        }
        let m = match decode(raw) {
            Ok((_, m)) => m,
            Err(e) => {
                self.flush_before(None);
                self.error(e.to_of_error(), raw, h.xid);
                return true;
            }
        };
        if let Message::FlowMod(fm) = &m {
            bump(&self.sh.counters.flow_mods);
            if self.is_slave() {
                self.flush_before(None);
                self.error((et::BAD_REQUEST, brc::IS_SLAVE), raw, h.xid);
                return true;
            }
            flows::flow_mod(self, fm, raw, h.xid);
            return true;
        }
        self.flush_before(Some(&m));
        let xid = h.xid;
        match m {
            Message::Hello(_) => {}
            Message::EchoRequest(d) => {
                self.out.send(&Message::EchoReply(d), xid);
            }
            Message::EchoReply(_) => {}
            Message::FeaturesRequest => {
                self.out.send(
                    &Message::FeaturesReply(Features {
                        datapath_id: self.sh.cfg.datapath_id,
                        n_buffers: 0,
                        n_tables: flows::N_TABLES,
                        auxiliary_id: 0,
                        capabilities: OFPC_FLOW_STATS
                            | OFPC_TABLE_STATS
                            | OFPC_PORT_STATS
                            | OFPC_GROUP_STATS,
                    }),
                    xid,
                );
            }
            Message::GetConfigRequest => {
                let c = *self.out.config.lock().unwrap_or_else(|e| e.into_inner());
                self.out.send(&Message::GetConfigReply(c), xid);
            }
            Message::SetConfig(c) => {
                if c.flags & OFPC_FRAG_MASK == OFPC_FRAG_REASM {
                    // flowpath does not reassemble fragments.
                    self.error((et::SWITCH_CONFIG_FAILED, 0), raw, xid);
                } else {
                    *self.out.config.lock().unwrap_or_else(|e| e.into_inner()) = c;
                }
            }
            Message::BarrierRequest => {
                // A barrier means "applied", which it is; the state file follows within
                // SAVE_GAP, or at once when the input goes quiet or the connection closes.
                if let Err(e) = self.sh.switch.save_pending_within(SAVE_GAP) {
                    eprintln!("flowpath: openflow: saving the state file: {e}");
                }
                self.out.send(&Message::BarrierReply, xid);
            }
            Message::RoleRequest(r) => self.role_request(r, raw, xid),
            Message::GetAsyncRequest => {
                let a = *self.out.async_cfg.lock().unwrap_or_else(|e| e.into_inner());
                self.out.send(&Message::GetAsyncReply(a), xid);
            }
            Message::SetAsync(a) => {
                *self.out.async_cfg.lock().unwrap_or_else(|e| e.into_inner()) = a;
            }
            Message::MultipartRequest { flags, body } => {
                flows::multipart(self, flags, body, raw, xid)
            }
            Message::PacketOut(po) => {
                if self.is_slave() {
                    self.error((et::BAD_REQUEST, brc::IS_SLAVE), raw, xid);
                } else {
                    bump(&self.sh.counters.packet_outs);
                    flows::packet_out(self, po, raw, xid);
                }
            }
            Message::GroupMod(gm) => {
                if self.is_slave() {
                    self.error((et::BAD_REQUEST, brc::IS_SLAVE), raw, xid);
                } else {
                    flows::group_mod(self, gm, raw, xid);
                }
            }
            Message::PortMod(pm) => {
                let known = self
                    .sh
                    .ports
                    .describe()
                    .iter()
                    .any(|p| p.number == pm.port_no);
                if self.is_slave() {
                    self.error((et::BAD_REQUEST, brc::IS_SLAVE), raw, xid);
                } else if !known {
                    self.error((et::PORT_MOD_FAILED, 0), raw, xid); // OFPPMFC_BAD_PORT
                } else if pm.mask != 0 {
                    // Administrative port config (down, no-recv, no-fwd) is not supported.
                    self.error((et::PORT_MOD_FAILED, 2), raw, xid); // OFPPMFC_BAD_CONFIG
                }
            }
            Message::TableMod { table_id, .. } => {
                // OpenFlow 1.3 table config bits are all deprecated: accept and keep none.
                if table_id != OFPTT_ALL && table_id >= flows::N_TABLES {
                    self.error((et::TABLE_MOD_FAILED, 0), raw, xid); // OFPTMFC_BAD_TABLE
                }
            }
            Message::MeterMod(_) => {
                // No meters (features say 0): OFPMMFC_OUT_OF_METERS would mislead;
                // BAD_REQUEST/BAD_TYPE says "not supported" as OVS does without meters.
                self.error((et::METER_MOD_FAILED, 0), raw, xid); // OFPMMFC_UNKNOWN
            }
            Message::Experimenter { .. } => {
                self.error((et::BAD_REQUEST, brc::BAD_EXPERIMENTER), raw, xid);
            }
            Message::Error { type_, code, .. } => {
                eprintln!(
                    "flowpath: openflow {}: peer sent error type {type_} code {code}",
                    self.out.peer
                );
            }
            // Replies and switch-to-controller messages make no sense coming in.
            _ => self.error((et::BAD_REQUEST, brc::BAD_TYPE), raw, xid),
        }
        true
    }

    /// Apply pending adds before anything whose meaning may depend on them (everything
    /// but another add and messages that cannot see rules).
    fn flush_before(&mut self, m: Option<&Message>) {
        if self.pending.is_empty() {
            return;
        }
        if matches!(
            m,
            Some(Message::EchoRequest(_)) | Some(Message::EchoReply(_))
        ) {
            return;
        }
        flows::flush_adds(self);
    }

    /// The first message must be HELLO; agree on OpenFlow 1.3 or say why not and close.
    fn hello(&mut self, raw: &[u8], h: Header) -> bool {
        let elements = match decode(raw) {
            Ok((_, Message::Hello(e))) => e,
            // Some clients skip the hello; a 1.3 message is as good as one (OVS accepts).
            Ok(_) | Err(_) if h.version == OFP_VERSION && h.type_ != msg::HELLO => {
                self.hello_seen = true;
                self.out.ready.store(true, Ordering::Relaxed);
                return self.dispatch(raw);
            }
            Ok(_) => Vec::new(),
            Err(_) if h.type_ == msg::HELLO => Vec::new(),
            Err(e) => {
                self.error(e.to_of_error(), raw, h.xid);
                return false;
            }
        };
        match negotiate_version(h.version, &elements, 1 << OFP_VERSION) {
            Some(OFP_VERSION) => {
                self.hello_seen = true;
                self.out.ready.store(true, Ordering::Relaxed);
                if self.out.active {
                    self.sh.controllers_changed();
                }
                true
            }
            _ => {
                let why = format!(
                    "flowpath speaks OpenFlow 1.3 (0x04) only; peer offered version {:#04x}",
                    h.version
                );
                let mut m = Message::error((et::HELLO_FAILED, hfc::INCOMPATIBLE), &[]);
                if let Message::Error { data, .. } = &mut m {
                    *data = why.into_bytes();
                }
                self.out.send(&m, h.xid);
                false
            }
        }
    }

    fn is_slave(&self) -> bool {
        self.out.role() == OFPCR_ROLE_SLAVE
    }

    /// ROLE_REQUEST (§6.3.6): equal, master (others' master becomes slave) or slave, with
    /// the generation id guarding against a stale master.
    fn role_request(&mut self, r: Role, raw: &[u8], xid: u32) {
        let role = r.role;
        if role > OFPCR_ROLE_SLAVE {
            self.error((et::ROLE_REQUEST_FAILED, 2), raw, xid); // OFPRRFC_BAD_ROLE
            return;
        }
        if role == OFPCR_ROLE_MASTER || role == OFPCR_ROLE_SLAVE {
            let mut g = self.sh.generation.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cur) = *g {
                if (r.generation_id.wrapping_sub(cur) as i64) < 0 {
                    self.error((et::ROLE_REQUEST_FAILED, 1), raw, xid); // OFPRRFC_STALE
                    return;
                }
            }
            *g = Some(r.generation_id);
        }
        if role != OFPCR_ROLE_NOCHANGE {
            if role == OFPCR_ROLE_MASTER {
                for c in self.sh.live_conns() {
                    if c.id != self.out.id && c.role() == OFPCR_ROLE_MASTER {
                        c.role.store(OFPCR_ROLE_SLAVE, Ordering::Relaxed);
                    }
                }
            }
            self.out.role.store(role, Ordering::Relaxed);
        }
        let generation_id = self
            .sh
            .generation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(u64::MAX);
        self.out.send(
            &Message::RoleReply(Role {
                role: self.out.role(),
                generation_id,
            }),
            xid,
        );
    }
}
