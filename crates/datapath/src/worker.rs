//! The worker loop: the one place where ports, a datapath and its tiers meet. Every
//! datapath runs through it — the switch's poll-mode threads (AF_XDP, AF_PACKET, TAP,
//! pcap, generated ports), `flowpath run`, and every measurement (bench, suite, planner).
//!
//! One [`Worker::poll`] receives a batch from each live port in turn, runs it through the
//! datapath, lets the tiers follow the caches, hands each port the outputs meant for it as
//! one `send_batch` (so a boxed port costs one dynamic call per batch, not per packet), and
//! flushes the ports that were given something. A port whose `recv` or `flush` fails is
//! logged by name and no longer polled; the others carry on. What runs around the loop
//! (pinning, idle naps, publishing counters) belongs to the caller.
//!
//! **Cycle-fair polling** (with more than one port and `poll_quantum_cycles` > 0, the
//! default): deficit round robin over the TSC time of the batches that were not all cache
//! hits. Every round a port gains one quantum of credit (banked up to
//! [`MAX_BANKED_QUANTA`] while it is backlogged, reset to one quantum when it comes up
//! empty); it is received from while its credit is positive, up to
//! [`MAX_BATCHES_PER_TURN`] full batches in one turn. A batch whose every packet hit a
//! cache costs no credit: established traffic is never throttled for being busy (forwarding
//! it is the switch's job), and a port with a backlog of hits drains up to eight batches a
//! turn. A batch with misses (each 10–40x a hit), packets that did not parse, or packets
//! that start a tracked connection (`+new`: the stateful miss) costs its whole TSC time, so a port flooding new flows or garbage is received from only about one
//! quantum's worth of cycles per round, not 32 packets' worth; what it cannot be given
//! waits in its receive ring and overflows there, counted by the port, as on a NIC. A
//! round in which no port had anything forgives every debt (work conserving: fairness
//! only matters while another port is waiting). The miss budget (`guard.rs`) then shares
//! the slow path among the ports that reach it.

use crate::controller::{PacketOutQueue, PACKET_OUTS_PER_POLL};
use crate::datapath::{Datapath, OutputSink};
use crate::sink::CountingSink;
use crate::tier::Tier;
use flowpath_base::{PacketBatch, Port};
use smallvec::SmallVec;
use std::sync::Arc;

/// One port queue served by a worker: the OpenFlow port number flows use, and the queue.
pub struct WorkerPort<P> {
    pub number: u32,
    pub queue: u32,
    pub port: P,
    /// The error that took the port down; it is no longer polled.
    pub down: Option<String>,
}

impl<P: Port> WorkerPort<P> {
    pub fn new(number: u32, queue: u32, port: P) -> WorkerPort<P> {
        WorkerPort {
            number,
            queue,
            port,
            down: None,
        }
    }
}

/// Where a worker's outputs go: a per-packet [`OutputSink`] during the batch, then
/// [`Outputs::deliver`] once per batch with the worker's ports.
pub trait Outputs: OutputSink {
    /// Hand what this batch output to the ports; returns a bit per port index given frames
    /// (to flush). Sinks that do not transmit keep the default.
    fn deliver<P: Port>(&mut self, _ports: &mut [WorkerPort<P>]) -> u64 {
        0
    }
}

/// Counting only (benchmarks): outputs are counted, never transmitted.
impl Outputs for CountingSink {}

/// Outputs to the worker's own port queues by port number, staged per port during the
/// batch (one copy into the staging batch) and sent with one `send_batch` per port.
pub struct PortOutputs {
    /// `by_number[n]` = index of the worker's queue of port n, + 1 (0: none).
    by_number: Vec<u16>,
    /// Staged frames per port index; a port given more than a batch's worth in one batch
    /// gets a further staging batch (allocated once, then reused).
    staged: Vec<Vec<PacketBatch>>,
    used: Vec<u8>,
    /// Outputs to a port number this worker has no queue of.
    pub no_such_port: u64,
    /// Frames the ports accepted.
    pub tx_packets: u64,
    /// Frames longer than a batch slot (never sent).
    pub too_long: u64,
}

impl PortOutputs {
    /// Outputs for `ports`: the first queue of each port number is the one used.
    pub fn new<P>(ports: &[WorkerPort<P>]) -> PortOutputs {
        let max_no = ports.iter().map(|p| p.number).max().unwrap_or(0) as usize;
        let mut by_number = vec![0u16; max_no + 1];
        for (i, p) in ports.iter().enumerate().rev() {
            by_number[p.number as usize] = i as u16 + 1;
        }
        PortOutputs {
            by_number,
            staged: (0..ports.len()).map(|_| vec![PacketBatch::new()]).collect(),
            used: vec![0; ports.len()],
            no_such_port: 0,
            tx_packets: 0,
            too_long: 0,
        }
    }
}

impl OutputSink for PortOutputs {
    #[inline]
    fn output(&mut self, port: u32, data: &[u8]) {
        let ix = self.by_number.get(port as usize).copied().unwrap_or(0);
        if ix == 0 {
            self.no_such_port += 1;
            return;
        }
        let ix = ix as usize - 1;
        let stage = &mut self.staged[ix];
        let mut cur = self.used[ix] as usize;
        if stage[cur].room() == 0 {
            cur += 1;
            if cur == stage.len() {
                stage.push(PacketBatch::new());
            }
            self.used[ix] = cur as u8;
        }
        if !stage[cur].push(data) {
            self.too_long += 1;
        }
    }
}

impl Outputs for PortOutputs {
    fn deliver<P: Port>(&mut self, ports: &mut [WorkerPort<P>]) -> u64 {
        let mut sent_to = 0u64;
        for (ix, stage) in self.staged.iter_mut().enumerate() {
            if stage[0].is_empty() {
                continue;
            }
            for b in stage.iter_mut().take(self.used[ix] as usize + 1) {
                let frames: SmallVec<[&[u8]; flowpath_base::BATCH]> =
                    (0..b.len()).map(|i| b.frame(i)).collect();
                if ports[ix].down.is_none() {
                    self.tx_packets += ports[ix].port.send_batch(&frames) as u64;
                    sent_to |= 1 << (ix % 64);
                }
                drop(frames);
                b.clear();
            }
            self.used[ix] = 0;
        }
        sent_to
    }
}

/// Credit a backlogged port may bank, in quanta.
pub const MAX_BANKED_QUANTA: i64 = 4;
/// Batches one port may be given in one turn.
pub const MAX_BATCHES_PER_TURN: usize = 8;

/// A datapath, the port queues it serves, where its outputs go, and the tiers that follow
/// its caches.
pub struct Worker<P: Port, O: Outputs> {
    dp: Datapath,
    ports: Vec<WorkerPort<P>>,
    out: O,
    tiers: Vec<Box<dyn Tier>>,
    rx: PacketBatch,
    /// Who this is in log lines ("worker 2").
    label: String,
    /// Cycle-fair polling: the quantum (0 = off) and each port's credit in cycles.
    quantum: i64,
    credit: Vec<i64>,
    /// Packet-outs from the control side, run between batches.
    packet_outs: Arc<PacketOutQueue>,
}

impl<P: Port, O: Outputs> Worker<P, O> {
    /// The datapath floods (FLOOD, ALL, NORMAL) to `ports`' numbers unless told otherwise
    /// ([`Datapath::set_ports`]).
    pub fn new(mut dp: Datapath, ports: Vec<WorkerPort<P>>, out: O, label: &str) -> Worker<P, O> {
        if dp.ports().is_empty() {
            dp.set_ports(ports.iter().map(|p| p.number));
        }
        let packet_outs = Arc::new(PacketOutQueue::new(dp.config().packet_out_queue));
        let quantum = dp
            .config()
            .miss
            .poll_quantum_cycles
            .min(i64::MAX as u64 / 16) as i64;
        Worker {
            credit: vec![quantum; ports.len()],
            quantum,
            dp,
            ports,
            out,
            tiers: Vec::new(),
            rx: PacketBatch::new(),
            label: label.into(),
            packet_outs,
        }
    }

    /// The queue the control side hands this worker packet-outs through.
    pub fn packet_out_queue(&self) -> Arc<PacketOutQueue> {
        self.packet_outs.clone()
    }

    /// Use `q` for packet-outs (a switch makes the queues before its workers start).
    pub fn set_packet_out_queue(&mut self, q: Arc<PacketOutQueue>) {
        self.packet_outs = q;
    }

    /// Run up to [`PACKET_OUTS_PER_POLL`] queued packet-outs, deliver and flush their
    /// outputs. Returns how many ran. [`Worker::poll`] calls it when the queue is not empty.
    pub fn run_packet_outs(&mut self) -> usize {
        let mut n = 0;
        while n < PACKET_OUTS_PER_POLL {
            let Some(po) = self.packet_outs.pop() else {
                break;
            };
            self.dp.packet_out(&po, &mut self.out);
            n += 1;
        }
        if n > 0 {
            self.after_batch();
            let f = self.out.deliver(&mut self.ports);
            if f != 0 {
                self.flush_ports(f);
            }
        }
        n
    }

    /// Send the packets held for an underlay neighbour that is now resolved (see
    /// [`crate::NeighbourHoldQueue`]); [`Worker::poll`] calls it while any are held.
    pub fn release_held(&mut self) -> usize {
        let n = self.dp.release_held(&mut self.out);
        if n > 0 {
            let f = self.out.deliver(&mut self.ports);
            if f != 0 {
                self.flush_ports(f);
            }
        }
        n
    }

    /// Add a tier that follows the caches (the datapath starts recording events for it).
    pub fn add_tier(&mut self, tier: Box<dyn Tier>) {
        self.dp.watch_megaflows(true);
        self.tiers.push(tier);
    }

    pub fn datapath(&self) -> &Datapath {
        &self.dp
    }

    pub fn datapath_mut(&mut self) -> &mut Datapath {
        &mut self.dp
    }

    pub fn ports(&self) -> &[WorkerPort<P>] {
        &self.ports
    }

    pub fn ports_mut(&mut self) -> &mut [WorkerPort<P>] {
        &mut self.ports
    }

    pub fn outputs(&self) -> &O {
        &self.out
    }

    pub fn tiers(&self) -> &[Box<dyn Tier>] {
        &self.tiers
    }

    pub fn into_parts(self) -> (Datapath, Vec<WorkerPort<P>>, O) {
        (self.dp, self.ports, self.out)
    }

    /// One pass over every live port: receive a batch from each, process it, deliver the
    /// outputs; then flush the ports that were given frames. Returns packets received.
    #[inline]
    pub fn poll(&mut self) -> usize {
        self.poll_up_to(usize::MAX)
    }

    /// [`Worker::poll`], receiving at most `max` packets in all (measurements that must
    /// push an exact number through).
    #[inline]
    pub fn poll_up_to(&mut self, max: usize) -> usize {
        if !self.packet_outs.is_empty() {
            self.run_packet_outs();
        }
        if self.dp.has_held() {
            self.release_held();
        }
        let mut got = 0usize;
        let mut to_flush = 0u64;
        let fair = self.quantum > 0 && self.ports.len() > 1;
        let mut in_debt = false;
        for i in 0..self.ports.len() {
            if got >= max {
                break;
            }
            if self.ports[i].down.is_some() {
                continue;
            }
            if !fair {
                match self.turn(i, max - got) {
                    Some((n, f)) => {
                        got += n;
                        to_flush |= f;
                    }
                    None => continue,
                }
                continue;
            }
            // Deficit round robin over cycles (see the module documentation).
            let q = self.quantum;
            self.credit[i] = (self.credit[i] + q).min(MAX_BANKED_QUANTA * q);
            if self.credit[i] <= 0 {
                in_debt = true;
                continue;
            }
            let mut batches = 0;
            while self.credit[i] > 0 && batches < MAX_BATCHES_PER_TURN && got < max {
                let t0 = flowpath_base::clock::rdtsc();
                let s0 = self.dp.stats();
                let (hits0, rec0, new0) =
                    (s0.emc_hits + s0.megaflow_hits, s0.recirculations, s0.ct_new);
                let Some((n, f)) = self.turn(i, max - got) else {
                    // Empty: an idle port banks nothing.
                    self.credit[i] = self.credit[i].min(q);
                    break;
                };
                got += n;
                to_flush |= f;
                batches += 1;
                let s1 = self.dp.stats();
                let hits = s1.emc_hits + s1.megaflow_hits - hits0;
                // Each recirculated packet is one more lookup that should have hit; a new
                // connection is the stateful miss.
                let lookups = n as u64 + (s1.recirculations - rec0);
                if hits < lookups || s1.ct_new != new0 {
                    self.credit[i] -= (flowpath_base::clock::rdtsc() - t0) as i64;
                }
                if n < flowpath_base::BATCH {
                    break;
                }
            }
        }
        if in_debt && got == 0 {
            // Work conserving: nobody else had anything this round, so the ports paying
            // off an expensive batch are served again at once rather than after rounds of
            // empty polls (or idle naps).
            for c in &mut self.credit {
                *c = (*c).max(self.quantum);
            }
        }
        if to_flush != 0 {
            self.flush_ports(to_flush);
        }
        got
    }

    /// Receive one batch (at most `max` packets) from port `i`, process and deliver it.
    /// `None` when the port had nothing (or failed); else packets and ports to flush.
    #[inline(always)]
    fn turn(&mut self, i: usize, max: usize) -> Option<(usize, u64)> {
        self.rx.clear();
        self.rx.limit(max);
        let n = match self.ports[i].port.recv(&mut self.rx) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(e) => {
                self.port_failed(i, &e);
                return None;
            }
        };
        let in_port = self.ports[i].number;
        let (dp, out) = (&mut self.dp, &mut self.out);
        self.rx.with_packets(|pkts| dp.process(in_port, pkts, out));
        self.after_batch();
        Some((n, self.out.deliver(&mut self.ports)))
    }

    /// Let the tiers follow what the caches did (after a batch or a rule catch-up).
    #[inline]
    pub fn after_batch(&mut self) {
        for t in &mut self.tiers {
            t.after_batch(&mut self.dp);
        }
    }

    /// Catch up with a rule change now (not at the next batch) and let the tiers follow.
    pub fn sync_rules(&mut self) {
        if self.dp.rules_changed() {
            self.dp.sync_rules();
            self.after_batch();
        }
    }

    /// Let the tiers credit what they forwarded, at most `budget` entries each.
    pub fn collect_tiers(&mut self, budget: usize) {
        for t in &mut self.tiers {
            t.collect(&mut self.dp, budget);
        }
    }

    /// The worker stops: tiers remove what they hold, counters go to the rules.
    pub fn finish(&mut self) {
        self.flush_ports(u64::MAX);
        self.collect_tiers(usize::MAX);
        self.dp.push_rule_stats();
        for t in &mut self.tiers {
            t.clear(&mut self.dp);
        }
    }

    /// Flush the live ports whose bit (index mod 64) is set in `which`.
    pub fn flush_ports(&mut self, which: u64) {
        for i in 0..self.ports.len() {
            if which & (1 << (i % 64)) == 0 || self.ports[i].down.is_some() {
                continue;
            }
            if let Err(e) = self.ports[i].port.flush() {
                self.port_failed(i, &e);
            }
        }
    }

    fn port_failed(&mut self, i: usize, e: &std::io::Error) {
        let p = &mut self.ports[i];
        eprintln!(
            "flowpath: {}: port '{}' (number {}, queue {}) failed: {e}; no longer polling it",
            self.label,
            p.port.name(),
            p.number,
            p.queue
        );
        p.down = Some(e.to_string());
    }
}
