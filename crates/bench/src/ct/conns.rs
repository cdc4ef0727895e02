//! The ct cases' ports: whole TCP connections played in order over two ports (one
//! generator behind both, so a reply never leaves before the packet it answers was
//! received and processed), and UDP connection traffic from a list of directions.

use super::frames::{payload_for, tcp, tcp4, Endpoints, Segment, Udp4};
use flowpath_base::rng::SplitMix64;
use flowpath_base::{PacketBatch, Port, PortInfo, PortStats, BATCH};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

/// The packets of one TCP connection: (sent by the server, flags). The client sends SYN,
/// the server SYN-ACK, the client ACK and a data segment; the server acknowledges it with
/// its FIN, the client ACKs that and sends its own FIN, the server ACKs it.
pub const STEPS: [(bool, u8); 8] = [
    (false, tcp::SYN),
    (true, tcp::SYN | tcp::ACK),
    (false, tcp::ACK),
    (false, tcp::PSH | tcp::ACK),
    (true, tcp::FIN | tcp::ACK),
    (false, tcp::ACK),
    (false, tcp::FIN | tcp::ACK),
    (true, tcp::ACK),
];

/// A connection in flight.
#[derive(Clone, Copy, Debug)]
struct Live {
    e: Endpoints,
    /// Client's and server's initial sequence numbers.
    isn_c: u32,
    isn_s: u32,
    step: u8,
}

/// Segment `step` of a connection with initial sequence numbers `c` (client) and `s`
/// (server) and `len` bytes of data: every sequence and acknowledgement number as the
/// peers would send them, wrapping modulo 2^32.
pub fn segment(step: usize, c: u32, s: u32, len: u16) -> Segment {
    let l = len as u32;
    let (flags, seq, ack, len) = match step {
        0 => (STEPS[0].1, c, 0, 0),
        1 => (STEPS[1].1, s, c.wrapping_add(1), 0),
        2 => (STEPS[2].1, c.wrapping_add(1), s.wrapping_add(1), 0),
        3 => (STEPS[3].1, c.wrapping_add(1), s.wrapping_add(1), len),
        4 => (STEPS[4].1, s.wrapping_add(1), c.wrapping_add(1 + l), 0),
        5 => (STEPS[5].1, c.wrapping_add(1 + l), s.wrapping_add(2), 0),
        6 => (STEPS[6].1, c.wrapping_add(1 + l), s.wrapping_add(2), 0),
        _ => (STEPS[7].1, s.wrapping_add(2), c.wrapping_add(2 + l), 0),
    };
    Segment {
        flags,
        seq,
        ack,
        len,
    }
}

/// Whole TCP connections, `in_flight` at a time, each new (never-seen 5-tuple) when it
/// starts. A connection waits in the queue of the side that sends its next packet; a
/// receive takes connections from the front of its side's queue, each at most once per
/// batch, and queues them again only after the batch is full. So a batch never holds two
/// packets of one connection, and a packet is handed out only after the one before it
/// (on either port) was received.
pub struct TcpConns {
    live: Vec<Live>,
    /// Per side (client, server): connections whose next packet that side sends.
    ready: [VecDeque<u32>; 2],
    next: u64,
    rng: SplitMix64,
    data_len: u16,
    /// Connections whose last packet was sent, and packets sent.
    pub finished: u64,
    pub packets: u64,
    requeue: Vec<(u32, bool)>,
}

impl TcpConns {
    /// `in_flight` connections (at least two batches' worth), data segments sized so that
    /// the frame is `frame_size` bytes; connection numbers from `first`.
    pub fn new(in_flight: usize, frame_size: usize, first: u64, seed: u64) -> TcpConns {
        let n = in_flight.max(2 * BATCH);
        let mut g = TcpConns {
            live: Vec::with_capacity(n),
            ready: [VecDeque::with_capacity(n), VecDeque::with_capacity(n)],
            next: first,
            rng: SplitMix64::new(seed),
            data_len: payload_for(frame_size, true).max(1) as u16,
            finished: 0,
            packets: 0,
            requeue: Vec::with_capacity(BATCH),
        };
        for i in 0..n {
            let l = g.fresh();
            g.live.push(l);
            g.ready[0].push_back(i as u32);
        }
        g
    }

    fn fresh(&mut self) -> Live {
        let e = Endpoints::nth(self.next, 80);
        self.next += 1;
        let r = self.rng.next();
        Live {
            e,
            isn_c: r as u32,
            isn_s: (r >> 32) as u32,
            step: 0,
        }
    }

    /// Connections started so far.
    pub fn started(&self) -> u64 {
        self.next
    }

    /// Append the next packets the client (`server` false) or server side sends to
    /// `batch`, as many as it has room for and connections are waiting. Returns how many.
    pub fn fill(&mut self, server: bool, batch: &mut PacketBatch) -> usize {
        let side = server as usize;
        let mut n = 0;
        while let Some(i) = self.ready[side].front().copied() {
            let Some(buf) = batch.next_slot() else { break };
            self.ready[side].pop_front();
            let l = &mut self.live[i as usize];
            let step = l.step as usize;
            let seg = segment(step, l.isn_c, l.isn_s, self.data_len);
            let len = tcp4(buf, &l.e, server, &seg);
            batch.commit(len);
            n += 1;
            l.step += 1;
            let step = l.step as usize;
            if step == STEPS.len() {
                self.finished += 1;
                self.live[i as usize] = self.fresh();
                self.requeue.push((i, false));
            } else {
                self.requeue.push((i, STEPS[step].0));
            }
        }
        for (i, s) in self.requeue.drain(..) {
            self.ready[s as usize].push_back(i);
        }
        self.packets += n as u64;
        n
    }
}

/// One side of a [`TcpConns`] as a port (the client side on A, the server side on B).
pub struct TcpPort {
    conns: Arc<Mutex<TcpConns>>,
    server: bool,
}

impl TcpPort {
    /// The client-side and server-side ports of `conns`.
    pub fn pair(conns: TcpConns) -> (TcpPort, TcpPort, Arc<Mutex<TcpConns>>) {
        let c = Arc::new(Mutex::new(conns));
        (
            TcpPort {
                conns: c.clone(),
                server: false,
            },
            TcpPort {
                conns: c.clone(),
                server: true,
            },
            c,
        )
    }
}

impl Port for TcpPort {
    fn name(&self) -> &str {
        if self.server {
            "tcp-server"
        } else {
            "tcp-client"
        }
    }

    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        // One uncontended lock per batch: the two sides share one generator.
        let mut g = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.fill(self.server, batch))
    }

    fn send(&mut self, _frame: &[u8]) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        PortStats::default()
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "generator",
            detail: "whole TCP connections, in order".into(),
        }
    }
}

/// UDP traffic over a list of connection directions, one datagram each in turn (wrapping);
/// silent while switched off.
pub struct UdpPort {
    dirs: Arc<Vec<Udp4>>,
    at: usize,
    payload: usize,
    pub on: bool,
    pub packets: u64,
}

impl UdpPort {
    /// Datagrams of `frame_size` bytes over `dirs`, starting with the first.
    pub fn new(dirs: Arc<Vec<Udp4>>, frame_size: usize) -> UdpPort {
        UdpPort {
            dirs,
            at: 0,
            payload: payload_for(frame_size, false),
            on: true,
            packets: 0,
        }
    }

    /// Send over `dirs` from now on, starting with the first.
    pub fn set_dirs(&mut self, dirs: Arc<Vec<Udp4>>) {
        self.dirs = dirs;
        self.at = 0;
    }

    pub fn dirs(&self) -> &[Udp4] {
        &self.dirs
    }
}

impl Port for UdpPort {
    fn name(&self) -> &str {
        "udp-conns"
    }

    #[inline]
    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        if !self.on || self.dirs.is_empty() {
            return Ok(0);
        }
        let mut n = 0;
        while let Some(buf) = batch.next_slot() {
            let len = self.dirs[self.at].write(buf, self.payload);
            batch.commit(len);
            self.at += 1;
            if self.at == self.dirs.len() {
                self.at = 0;
            }
            n += 1;
        }
        self.packets += n as u64;
        Ok(n)
    }

    fn send(&mut self, _frame: &[u8]) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        PortStats::default()
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "generator",
            detail: format!("UDP over {} connection directions", self.dirs.len()),
        }
    }
}

/// Either kind of ct port, so one worker type serves every case.
pub enum CtPort {
    Tcp(TcpPort),
    Udp(UdpPort),
}

impl CtPort {
    /// The UDP port (None for a TCP one).
    pub fn udp_mut(&mut self) -> Option<&mut UdpPort> {
        match self {
            CtPort::Udp(u) => Some(u),
            CtPort::Tcp(_) => None,
        }
    }
}

impl Port for CtPort {
    fn name(&self) -> &str {
        match self {
            CtPort::Tcp(p) => p.name(),
            CtPort::Udp(p) => p.name(),
        }
    }

    #[inline]
    fn recv(&mut self, batch: &mut PacketBatch) -> io::Result<usize> {
        match self {
            CtPort::Tcp(p) => p.recv(batch),
            CtPort::Udp(p) => p.recv(batch),
        }
    }

    fn send(&mut self, _frame: &[u8]) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        PortStats::default()
    }

    fn info(&self) -> PortInfo {
        match self {
            CtPort::Tcp(p) => p.info(),
            CtPort::Udp(p) => p.info(),
        }
    }
}

/// The original and reply directions of UDP connections `first..first + n`.
pub fn udp_conns(first: u64, n: usize) -> (Vec<Udp4>, Vec<Udp4>) {
    (0..n as u64)
        .map(|i| {
            let e = Endpoints::nth(first + i, 5001);
            (Udp4::of(&e, false), Udp4::of(&e, true))
        })
        .unzip()
}
