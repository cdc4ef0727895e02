//! The connection hub: what every OpenFlow connection shares. The registry of live
//! connections with their roles and asynchronous-message masks, the channel's counters,
//! standalone fail mode, and the asynchronous messages fanned out to every connection
//! that wants them: packet-ins from the workers (rate limited per port), FLOW_REMOVED
//! and PORT_STATUS.

use super::out::ConnOut;
use super::packet_io::PacketIo;
use super::ports::{PortDesc, SwitchPorts};
use super::{FailMode, OpenFlowConfig, Target, FAIL_OPEN_COOKIE};
use crate::switch::Switch;
use flowpath_openflow::consts::*;
use flowpath_openflow::{Message, OfError, Oxm, OxmField, PacketIn, Port, Role};
use flowpath_packet::Action;
use flowpath_pipeline::{RemovalReason, Removed};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Tables flowpath has (0..=253, as OVS reports; 254 is OFPTT_MAX's neighbour).
pub(crate) const N_TABLES: u8 = 254;

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
    /// TLS peers refused during the handshake (no certificate, one the CA did not sign,
    /// an expired one, or not TLS at all).
    pub tls_refused: u64,
    /// Connections a listener refused because `max_connections` were open.
    pub connections_refused: u64,
    /// Connections closed because the peer stopped reading what the switch sent (its
    /// queued output passed the bound, or writing stalled).
    pub output_overflows: u64,
}

/// The counters behind [`ChannelCounters`], bumped by every connection.
#[derive(Default)]
pub(super) struct Counters {
    accepted: AtomicU64,
    connect_failures: AtomicU64,
    pub(super) messages_in: AtomicU64,
    pub(super) flow_mods: AtomicU64,
    pub(super) errors_sent: AtomicU64,
    packet_ins_sent: AtomicU64,
    packet_ins_rate_dropped: AtomicU64,
    pub(super) packet_outs: AtomicU64,
    flow_removed_sent: AtomicU64,
    port_status_sent: AtomicU64,
    pub(super) tls_refused: AtomicU64,
    pub(super) connections_refused: AtomicU64,
    pub(super) output_overflows: AtomicU64,
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Everything the connections share.
pub(crate) struct Shared {
    pub(crate) switch: Arc<Switch>,
    pub(crate) ports: Arc<dyn SwitchPorts>,
    pub(crate) io: Arc<dyn PacketIo>,
    pub(crate) cfg: OpenFlowConfig,
    stop: Arc<AtomicBool>,
    conns: Mutex<Vec<Arc<ConnOut>>>,
    next_id: AtomicU64,
    pub(super) counters: Counters,
    /// The largest generation_id a master/slave role request carried (§6.3.6).
    generation: Mutex<Option<u64>>,
    fail_open: Mutex<bool>,
    /// Connection threads of the listeners (joined when the channel stops).
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Connections open or opening (each has a thread), bounded by `max_connections`.
    open: AtomicUsize,
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
            open: AtomicUsize::new(0),
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
        c.retain(|o| o.is_alive());
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
            tls_refused: l(&c.tls_refused),
            connections_refused: l(&c.connections_refused),
            output_overflows: l(&c.output_overflows),
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
            c.set_closed();
        }
    }

    /// A connection ended: say (and count) why, when the peer was at fault.
    pub(super) fn note_end(&self, out: &ConnOut, tls_refused: Option<&str>) {
        if let Some(why) = tls_refused {
            // Each said, up to a point: a flood of bad handshakes must not flood the log.
            let n = self.counters.tls_refused.fetch_add(1, Ordering::Relaxed) + 1;
            if n <= 100 || n.is_power_of_two() {
                eprintln!(
                    "flowpath: openflow {}: TLS handshake refused: {why} ({n} so far)",
                    out.peer
                );
            }
        }
        if out.overflowed() {
            bump(&self.counters.output_overflows);
            eprintln!(
                "flowpath: openflow {}: the peer stopped reading (more than {} bytes \
                 waiting for it), closing",
                out.peer, self.cfg.max_output_bytes
            );
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
            self.switch
                .apply_batch(vec![flowpath_pipeline::Change::DeleteWhere(
                    fail_open_flow(),
                )])
        };
        match r {
            Ok(_) => *cur = on,
            Err(e) => eprintln!("flowpath: openflow fail mode standalone: {e}"),
        }
    }

    pub(crate) fn remove_leftover_fail_open(&self) {
        let snap = self.switch.store().snapshot();
        if snap.rules().any(|r| r.spec.cookie == FAIL_OPEN_COOKIE) {
            if let Err(e) = self
                .switch
                .apply_batch(vec![flowpath_pipeline::Change::DeleteWhere(
                    fail_open_flow(),
                )])
            {
                eprintln!("flowpath: openflow: removing the last run's fail-open flow: {e}");
            }
        }
    }

    /// After a `tcp:` controller connection opens or closes.
    pub(super) fn controllers_changed(&self) {
        let any = self.live_conns().iter().any(|c| c.active);
        self.set_fail_open(!any);
    }

    /// The sending side of a new connection, with HELLO queued on it, registered for
    /// asynchronous messages. `None` if it cannot be made (no file descriptors left).
    pub(super) fn connect(&self, peer: String, active: bool) -> Option<Arc<ConnOut>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let out = match ConnOut::new(id, peer, active, self.cfg.max_output_bytes) {
            Ok(o) => Arc::new(o),
            Err(e) => {
                eprintln!("flowpath: openflow: cannot serve a connection: {e}");
                return None;
            }
        };
        if !out.send(&Message::hello(), 0) {
            return None;
        }
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(out.clone());
        Some(out)
    }

    /// Take a connection slot for a new connection, unless `max_connections` are open:
    /// then the connection is refused (counted, and said now and again).
    pub(super) fn take_slot(self: &Arc<Self>, from: &str) -> Option<Slot> {
        let n = self.open.fetch_add(1, Ordering::Relaxed);
        if n >= self.cfg.max_connections {
            self.open.fetch_sub(1, Ordering::Relaxed);
            let r = self
                .counters
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            if r.is_power_of_two() || r == 0 {
                eprintln!(
                    "flowpath: openflow: refused a connection from {from}: {} connections \
                     open, the most allowed ({} refused so far)",
                    self.cfg.max_connections,
                    r + 1
                );
            }
            return None;
        }
        Some(Slot(self.clone()))
    }

    /// A slot for a connection to a configured controller: never refused, but counted.
    pub(super) fn active_slot(self: &Arc<Self>) -> Slot {
        self.open.fetch_add(1, Ordering::Relaxed);
        Slot(self.clone())
    }

    /// ROLE_REQUEST (§6.3.6) from `out`: equal, master (the other masters become slaves)
    /// or slave, with the generation id guarding against a stale master. The role `out`
    /// has now, with the generation id to answer with.
    pub(super) fn request_role(&self, out: &ConnOut, r: Role) -> Result<Role, OfError> {
        let role = r.role;
        if role > OFPCR_ROLE_SLAVE {
            return Err(OfError::new(et::ROLE_REQUEST_FAILED, 2)); // OFPRRFC_BAD_ROLE
        }
        if role == OFPCR_ROLE_MASTER || role == OFPCR_ROLE_SLAVE {
            let mut g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cur) = *g {
                if (r.generation_id.wrapping_sub(cur) as i64) < 0 {
                    return Err(OfError::new(et::ROLE_REQUEST_FAILED, 1)); // OFPRRFC_STALE
                }
            }
            *g = Some(r.generation_id);
        }
        if role != OFPCR_ROLE_NOCHANGE {
            if role == OFPCR_ROLE_MASTER {
                for c in self.live_conns() {
                    if c.id != out.id && c.role() == OFPCR_ROLE_MASTER {
                        c.role.store(OFPCR_ROLE_SLAVE, Ordering::Relaxed);
                    }
                }
            }
            out.role.store(role, Ordering::Relaxed);
        }
        let generation_id = self
            .generation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(u64::MAX);
        Ok(Role {
            role: out.role(),
            generation_id,
        })
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
            if !r.spec.flags.send_flow_rem {
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

/// A connection slot, given back when dropped (the connection's thread ends).
pub(crate) struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What selects the flow standalone fail mode installs: its cookie.
fn fail_open_flow() -> flowpath_pipeline::Selector {
    let mut sel = flowpath_pipeline::Selector::all();
    sel.cookie = FAIL_OPEN_COOKIE;
    sel.cookie_mask = u64::MAX;
    sel
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
