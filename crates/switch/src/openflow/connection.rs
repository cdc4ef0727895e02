//! One OpenFlow connection: its socket read in chunks and cut into messages, version
//! negotiation (HELLO), echo keepalive, and each message handed to what answers it: the
//! switch-level requests here (features, config, barrier, role, async config, port and
//! table mods), rule changes to [`super::flows`], statistics to [`super::multipart`].

use super::flows::{self, PendingAdds};
use super::hub::{bump, Shared, Slot, N_TABLES};
use super::multipart;
use super::peer::Peer;
use super::stream::{Got, Stream};
use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, negotiate_version, Features, Header, Message, PortMod, Role, SwitchConfig,
};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection being served: its socket and what it is in the middle of.
pub(crate) struct Conn {
    peer: Peer,
    _slot: Slot,
    /// Input not yet cut into messages: less than one message (at most 64 KiB, the
    /// largest length OpenFlow's 16-bit field can say) plus one read.
    buf: Vec<u8>,
    pending: PendingAdds,
    last_rx: Instant,
    echo_sent: bool,
    hello_seen: bool,
}

/// How long a read waits before the loop checks stop, keepalive and pending adds.
const READ_TICK: Duration = Duration::from_millis(100);

/// Reads (of up to 64 KiB) before the loop writes what is queued again.
const READS_PER_TURN: usize = 16;

impl Conn {
    /// Take over the socket (speaking TLS through `tls` when given), queue HELLO and
    /// register for asynchronous messages. `None` if the socket is already unusable.
    pub(crate) fn open(
        sh: Arc<Shared>,
        slot: Slot,
        stream: TcpStream,
        tls: Option<rustls::Connection>,
        peer: String,
        active: bool,
    ) -> Option<Conn> {
        let io = Stream::new(stream, tls).ok()?;
        let out = sh.connect(peer, active)?;
        Some(Conn {
            peer: Peer::new(sh, out, io),
            _slot: slot,
            buf: Vec::with_capacity(1 << 16),
            pending: PendingAdds::default(),
            last_rx: Instant::now(),
            echo_sent: false,
            hello_seen: false,
        })
    }

    /// Serve the connection until the peer goes away, keepalive fails, it stops reading,
    /// or stop.
    pub(crate) fn run(mut self) {
        let tls_refused = self.serve();
        // What is queued (an error that explains the close, say) goes out if the socket
        // takes it now.
        let _ = self.peer.pump();
        self.pending.flush(&self.peer);
        let _ = self.peer.sh.switch.save_pending();
        self.peer.out.set_closed();
        self.peer.io().close();
        self.peer
            .sh
            .note_end(&self.peer.out, tls_refused.as_deref());
        if self.peer.out.active {
            self.peer.sh.controllers_changed();
        }
    }

    /// The connection's loop: write what is queued, wait, read what came. Returns why a
    /// TLS handshake failed, if it did.
    fn serve(&mut self) -> Option<String> {
        let mut chunk = vec![0u8; 1 << 16];
        let mut tick = Instant::now();
        let mut more = false;
        while !self.peer.sh.stopped() && self.peer.out.is_alive() {
            self.peer.pump()?;
            let nap = if more { Duration::ZERO } else { READ_TICK };
            if self.peer.io().wait(self.peer.out.wake_fd(), nap) {
                self.peer.out.clear_wake();
            }
            // Read what is there, but not forever: what is queued goes out in between.
            more = true;
            for _ in 0..READS_PER_TURN {
                let got = self.peer.io().read(&mut chunk);
                match got {
                    Got::Data(n) => {
                        if !self.received(&chunk[..n]) {
                            return None;
                        }
                    }
                    Got::Empty => {
                        more = false;
                        break;
                    }
                    Got::Closed => return None,
                    Got::TlsError(why, true) => return Some(why),
                    Got::TlsError(why, false) => {
                        eprintln!("flowpath: openflow {}: TLS: {why}", self.peer.out.peer);
                        return None;
                    }
                }
            }
            if tick.elapsed() >= READ_TICK {
                tick = Instant::now();
                self.pending.flush(&self.peer);
                let _ = self.peer.sh.switch.save_pending();
                if !self.keepalive() {
                    return None;
                }
            }
        }
        None
    }

    /// Handle every whole message that `bytes` completes; false closes the connection.
    fn received(&mut self, bytes: &[u8]) -> bool {
        self.buf.extend_from_slice(bytes);
        self.last_rx = Instant::now();
        self.echo_sent = false;
        // Every whole message in the buffer, then what is left moves to the front once
        // (not once per message).
        let mut buf = std::mem::take(&mut self.buf);
        let mut off = 0;
        loop {
            let rest = &buf[off..];
            match message_len(rest) {
                Ok(Some(len)) if rest.len() >= len => {
                    if !self.dispatch(&rest[..len]) {
                        return false;
                    }
                    off += len;
                }
                Ok(_) => break,
                Err(e) => {
                    // The framing itself is broken: nothing after this can be trusted.
                    // Say why and close (OVS does the same).
                    self.peer.error(e.to_of_error(), rest, 0);
                    return false;
                }
            }
        }
        buf.drain(..off);
        self.buf = buf;
        // More bytes already waiting: keep reading before applying, so a stream of adds
        // becomes few large batches.
        if !self.pending.is_empty() && !self.more_waiting() {
            self.pending.flush(&self.peer);
        }
        true
    }

    /// Are bytes waiting on the socket right now?
    fn more_waiting(&self) -> bool {
        self.peer.io().more_waiting()
    }

    /// Echo keepalive: probe after `probe_interval` of silence, give up after twice that.
    fn keepalive(&mut self) -> bool {
        let quiet = self.last_rx.elapsed();
        if quiet >= self.peer.sh.cfg.probe_interval * 2 {
            eprintln!(
                "flowpath: openflow {}: no answer to echo for {:.0?}, closing",
                self.peer.out.peer, quiet
            );
            return false;
        }
        if quiet >= self.peer.sh.cfg.probe_interval && !self.echo_sent {
            self.echo_sent = true;
            return self.peer.send(&Message::EchoRequest(Vec::new()), 0);
        }
        true
    }

    /// Handle one message; false closes the connection.
    fn dispatch(&mut self, raw: &[u8]) -> bool {
        bump(&self.peer.sh.counters.messages_in);
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
                self.peer.error(e.to_of_error(), raw, h.xid);
                return true;
            }
        };
        if let Message::FlowMod(fm) = &m {
            bump(&self.peer.sh.counters.flow_mods);
            if self.peer.out.is_slave() {
                self.flush_before(None);
                self.peer
                    .error((et::BAD_REQUEST, brc::IS_SLAVE), raw, h.xid);
            } else {
                self.pending.flow_mod(&self.peer, fm, raw, h.xid);
            }
            return true;
        }
        self.flush_before(Some(&m));
        self.answer(m, raw, h.xid);
        true
    }

    /// Answer a message other than FLOW_MOD (the pending adds are applied).
    fn answer(&self, m: Message, raw: &[u8], xid: u32) {
        let p = &self.peer;
        match m {
            Message::Hello(_) | Message::EchoReply(_) => {}
            Message::EchoRequest(d) => {
                p.send(&Message::EchoReply(d), xid);
            }
            Message::FeaturesRequest => self.features(xid),
            Message::GetConfigRequest => {
                let c = *p.out.config.lock().unwrap_or_else(|e| e.into_inner());
                p.send(&Message::GetConfigReply(c), xid);
            }
            Message::SetConfig(c) => self.set_config(c, raw, xid),
            Message::BarrierRequest => self.barrier(raw, xid),
            Message::RoleRequest(r) => self.role_request(r, raw, xid),
            Message::GetAsyncRequest => {
                let a = *p.out.async_cfg.lock().unwrap_or_else(|e| e.into_inner());
                p.send(&Message::GetAsyncReply(a), xid);
            }
            Message::SetAsync(a) => {
                *p.out.async_cfg.lock().unwrap_or_else(|e| e.into_inner()) = a;
            }
            Message::MultipartRequest { flags, body } => {
                multipart::answer(p, flags, body, raw, xid)
            }
            Message::PacketOut(po) => {
                if self.master_or_equal(raw, xid) {
                    bump(&p.sh.counters.packet_outs);
                    flows::packet_out(p, po, raw, xid);
                }
            }
            Message::GroupMod(gm) => {
                if self.master_or_equal(raw, xid) {
                    flows::group_mod(p, gm, raw, xid);
                }
            }
            Message::PortMod(pm) => self.port_mod(pm, raw, xid),
            Message::TableMod { table_id, .. } => {
                // OpenFlow 1.3 table config bits are all deprecated: accept and keep none.
                if table_id != OFPTT_ALL && table_id >= N_TABLES {
                    p.error((et::TABLE_MOD_FAILED, 0), raw, xid); // OFPTMFC_BAD_TABLE
                }
            }
            Message::MeterMod(_) => {
                // No meters (features say 0): OFPMMFC_OUT_OF_METERS would mislead;
                // BAD_REQUEST/BAD_TYPE says "not supported" as OVS does without meters.
                p.error((et::METER_MOD_FAILED, 0), raw, xid); // OFPMMFC_UNKNOWN
            }
            Message::Experimenter { .. } => {
                p.error((et::BAD_REQUEST, brc::BAD_EXPERIMENTER), raw, xid);
            }
            Message::Error { type_, code, .. } => {
                eprintln!(
                    "flowpath: openflow {}: peer sent error type {type_} code {code}",
                    p.out.peer
                );
            }
            // Replies and switch-to-controller messages make no sense coming in.
            _ => p.error((et::BAD_REQUEST, brc::BAD_TYPE), raw, xid),
        }
    }

    /// Apply pending adds before anything whose meaning may depend on them (everything
    /// but another add and messages that cannot see rules).
    fn flush_before(&mut self, m: Option<&Message>) {
        if matches!(
            m,
            Some(Message::EchoRequest(_)) | Some(Message::EchoReply(_))
        ) {
            return;
        }
        self.pending.flush(&self.peer);
    }

    /// The first message must be HELLO; agree on OpenFlow 1.3 or say why not and close.
    fn hello(&mut self, raw: &[u8], h: Header) -> bool {
        let elements = match decode(raw) {
            Ok((_, Message::Hello(e))) => e,
            // Some clients skip the hello; a 1.3 message is as good as one (OVS accepts).
            Ok(_) | Err(_) if h.version == OFP_VERSION && h.type_ != msg::HELLO => {
                self.hello_seen = true;
                self.peer.out.set_ready();
                return self.dispatch(raw);
            }
            Ok(_) => Vec::new(),
            Err(_) if h.type_ == msg::HELLO => Vec::new(),
            Err(e) => {
                self.peer.error(e.to_of_error(), raw, h.xid);
                return false;
            }
        };
        match negotiate_version(h.version, &elements, 1 << OFP_VERSION) {
            Some(OFP_VERSION) => {
                self.hello_seen = true;
                self.peer.out.set_ready();
                if self.peer.out.active {
                    self.peer.sh.controllers_changed();
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
                self.peer.send(&m, h.xid);
                false
            }
        }
    }

    /// Is this connection allowed to change the switch? A slave is told it is not.
    fn master_or_equal(&self, raw: &[u8], xid: u32) -> bool {
        if self.peer.out.is_slave() {
            self.peer.error((et::BAD_REQUEST, brc::IS_SLAVE), raw, xid);
            return false;
        }
        true
    }

    fn features(&self, xid: u32) {
        self.peer.send(
            &Message::FeaturesReply(Features {
                datapath_id: self.peer.sh.cfg.datapath_id,
                n_buffers: 0,
                n_tables: N_TABLES,
                auxiliary_id: 0,
                capabilities: OFPC_FLOW_STATS
                    | OFPC_TABLE_STATS
                    | OFPC_PORT_STATS
                    | OFPC_GROUP_STATS,
            }),
            xid,
        );
    }

    fn set_config(&self, c: SwitchConfig, raw: &[u8], xid: u32) {
        if c.flags & OFPC_FRAG_MASK == OFPC_FRAG_REASM {
            // flowpath does not reassemble fragments.
            self.peer.error((et::SWITCH_CONFIG_FAILED, 0), raw, xid);
        } else {
            *self
                .peer
                .out
                .config
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = c;
        }
    }

    /// A barrier reply means applied and saved: the flow_mods before it are in the state
    /// file or its journal, on disk. Where they cannot be saved, the controller gets an
    /// error for the barrier instead of its reply.
    fn barrier(&self, raw: &[u8], xid: u32) {
        if let Err(e) = self.peer.sh.switch.make_durable() {
            eprintln!("flowpath: openflow: saving the state file: {e}");
            self.peer.error((et::BAD_REQUEST, brc::EPERM), raw, xid);
            return;
        }
        self.peer.send(&Message::BarrierReply, xid);
    }

    /// PORT_MOD: the port must exist; administrative port config (down, no-recv, no-fwd)
    /// is not supported, so only a mod that changes nothing is accepted.
    fn port_mod(&self, pm: PortMod, raw: &[u8], xid: u32) {
        if !self.master_or_equal(raw, xid) {
            return;
        }
        let known = self
            .peer
            .sh
            .ports
            .describe()
            .iter()
            .any(|p| p.number == pm.port_no);
        if !known {
            self.peer.error((et::PORT_MOD_FAILED, 0), raw, xid); // OFPPMFC_BAD_PORT
        } else if pm.mask != 0 {
            self.peer.error((et::PORT_MOD_FAILED, 2), raw, xid); // OFPPMFC_BAD_CONFIG
        }
    }

    /// ROLE_REQUEST: the hub arbitrates between the connections; the reply says the role
    /// this one has now.
    fn role_request(&self, r: Role, raw: &[u8], xid: u32) {
        match self.peer.sh.request_role(&self.peer.out, r) {
            Ok(now) => {
                self.peer.send(&Message::RoleReply(now), xid);
            }
            Err(e) => self.peer.of_error(e, raw, xid),
        }
    }
}
