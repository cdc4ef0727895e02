//! A minimal OpenFlow client built on the codec, and a channel on a switch for it to talk
//! to: what the OpenFlow test files share.

use flowpath_openflow::consts::*;
use flowpath_openflow::{
    decode, message_len, FlowMod, FlowStatsRequest, Instruction, Message, MultipartReply,
    MultipartRequest, OfAction, Oxm,
};
use flowpath_switch::openflow::{NoPacketIo, NoPorts, OpenFlowChannel, OpenFlowConfig, Target};
use flowpath_switch::{Switch, SwitchConfig};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub struct Client {
    pub s: TcpStream,
    buf: Vec<u8>,
    xid: u32,
}

impl Client {
    pub fn connect(addr: std::net::SocketAddr) -> Client {
        Client::hello(TcpStream::connect(addr).unwrap(), 100)
    }

    /// Do the HELLO exchange on `s`; the client's xids count up from `xid`.
    pub fn hello(s: TcpStream, xid: u32) -> Client {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut c = Client {
            s,
            buf: Vec::new(),
            xid,
        };
        c.send(&Message::hello());
        match c.recv() {
            (_, Message::Hello(_)) => {}
            other => panic!("expected HELLO, got {other:?}"),
        }
        c
    }

    pub fn send(&mut self, m: &Message) -> u32 {
        self.xid += 1;
        self.s.write_all(&m.encode(self.xid)).unwrap();
        self.xid
    }

    pub fn recv(&mut self) -> (u32, Message) {
        loop {
            if let Ok(Some(n)) = message_len(&self.buf) {
                if self.buf.len() >= n {
                    let raw: Vec<u8> = self.buf.drain(..n).collect();
                    let (h, m) = decode(&raw).expect("the switch sends valid messages");
                    return (h.xid, m);
                }
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read from the switch");
            assert!(n > 0, "the switch closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Send a barrier and collect everything up to its reply.
    pub fn barrier(&mut self) -> Vec<(u32, Message)> {
        let x = self.send(&Message::BarrierRequest);
        let mut got = Vec::new();
        loop {
            let (xid, m) = self.recv();
            if xid == x && matches!(m, Message::BarrierReply) {
                return got;
            }
            got.push((xid, m));
        }
    }

    pub fn flow_stats(&mut self) -> Vec<flowpath_openflow::FlowStats> {
        let x = self.send(&Message::MultipartRequest {
            flags: 0,
            body: MultipartRequest::Flow(FlowStatsRequest::default()),
        });
        let mut all = Vec::new();
        loop {
            let (xid, m) = self.recv();
            assert_eq!(xid, x);
            match m {
                Message::MultipartReply {
                    flags,
                    body: MultipartReply::Flow(f),
                } => {
                    all.extend(f);
                    if flags & OFPMPF_REPLY_MORE == 0 {
                        return all;
                    }
                }
                other => panic!("expected a flow stats reply, got {other:?}"),
            }
        }
    }
}

/// A channel on `sw` with no ports, run as `cfg` says.
pub fn start_with(sw: &Arc<Switch>, cfg: OpenFlowConfig) -> (OpenFlowChannel, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let ch = OpenFlowChannel::start(
        sw.clone(),
        Arc::new(NoPorts),
        Arc::new(NoPacketIo),
        cfg,
        stop.clone(),
    )
    .unwrap();
    (ch, stop)
}

/// A channel listening on a free port of 127.0.0.1.
pub fn start(sw: &Arc<Switch>) -> (OpenFlowChannel, Arc<AtomicBool>, std::net::SocketAddr) {
    let cfg = OpenFlowConfig {
        targets: vec![Target::Listen("127.0.0.1:0".parse().unwrap())],
        ..OpenFlowConfig::default()
    };
    let (ch, stop) = start_with(sw, cfg);
    let addr = ch.listening[0];
    (ch, stop, addr)
}

/// Run `f` with a switch of the default config and a channel on it listening at `addr`;
/// the channel stops after.
pub fn with_channel(f: impl FnOnce(&Arc<Switch>, std::net::SocketAddr)) {
    let sw = Switch::open(SwitchConfig::default()).unwrap();
    let (ch, st, addr) = start(&sw);
    f(&sw, addr);
    stop(ch, st);
}

pub fn stop(ch: OpenFlowChannel, stop: Arc<AtomicBool>) {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    ch.join();
}

pub fn add(table: u8, priority: u16, m: Vec<Oxm>, actions: Vec<OfAction>) -> Message {
    Message::FlowMod(FlowMod {
        table_id: table,
        command: OFPFC_ADD,
        priority,
        match_: m,
        instructions: vec![Instruction::ApplyActions(actions)],
        ..FlowMod::default()
    })
}
