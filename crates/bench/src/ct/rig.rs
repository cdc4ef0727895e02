//! The ct cases' harness: one worker over the ct ports with a tracker of the case's own,
//! pumped and timed as [`crate::Harness`] does for one generated port.

use super::conns::{CtPort, UdpPort};
use crate::runner::BenchConfig;
use flowpath_base::clock::rdtsc;
use flowpath_base::{PacketBatch, Port, BATCH};
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_datapath::{
    CountingSink, Datapath, DatapathConfig, DatapathStats, MissLimits, Worker, WorkerPort,
};
use flowpath_pipeline::{RuleSpec, RuleStore};
use std::sync::Arc;

/// Polls in a row that may find every port silent before a pump gives up (a case that
/// switched every port off).
const IDLE_POLLS: u32 = 1_000;

/// The datapath configuration of the ct cost cases: the bench's sizes, the miss budget
/// off (they measure what tracking costs, not what the budget lets through).
pub(super) fn cost_config(cfg: &BenchConfig) -> DatapathConfig {
    DatapathConfig {
        emc_insert_inv_prob: cfg.emc_insert_inv_prob,
        smc_entries: cfg.smc_entries,
        megaflow_max: cfg.megaflow_max,
        miss: MissLimits::unbudgeted(),
        ..DatapathConfig::default()
    }
}

/// A tracker that holds `conns` connections and an eighth more (the default size if
/// that is more).
pub(super) fn tracker_for(conns: u64) -> Arc<Tracker> {
    let def = CtConfig::default();
    let max = (conns + conns / 8)
        .max(def.max_connections as u64)
        .min(u32::MAX as u64) as u32;
    Arc::new(Tracker::new(CtConfig {
        max_connections: max,
        ..def
    }))
}

/// A tracker of 1,024 connections: a placeholder until a case's own is made.
pub(super) fn small_tracker() -> Arc<Tracker> {
    Arc::new(Tracker::new(CtConfig {
        max_connections: 1024,
        ..CtConfig::default()
    }))
}

/// A store holding `rules`.
pub(super) fn store_of(rules: Vec<RuleSpec>, cfg: &BenchConfig) -> Arc<RuleStore> {
    let store = Arc::new(RuleStore::new(cfg.backend));
    store.add(rules).expect("the ct rules are valid");
    store
}

/// One worker, its ports and the tracker its datapath uses.
pub(super) struct Rig {
    w: Worker<CtPort, CountingSink>,
    pub tracker: Arc<Tracker>,
}

impl Rig {
    pub fn new(
        store: Arc<RuleStore>,
        dp_cfg: DatapathConfig,
        ports: Vec<(u32, CtPort)>,
        tracker: Arc<Tracker>,
    ) -> Rig {
        let mut dp = Datapath::new(store, dp_cfg);
        dp.set_tracker(tracker.clone());
        let ports = ports
            .into_iter()
            .map(|(n, p)| WorkerPort::new(n, 0, p))
            .collect();
        Rig {
            w: Worker::new(dp, ports, CountingSink::default(), "ct bench"),
            tracker,
        }
    }

    /// Track with `t` from now on (before any packet: connections stay where they were).
    pub fn set_tracker(&mut self, t: Arc<Tracker>) {
        self.w.datapath_mut().set_tracker(t.clone());
        self.tracker = t;
    }

    pub fn datapath(&self) -> &Datapath {
        self.w.datapath()
    }

    /// Port `i`'s UDP side (the ports are in the order given to [`Rig::new`]).
    ///
    /// # Panics
    /// If port `i` is a TCP port (a bug in the case).
    pub fn udp(&mut self, i: usize) -> &mut UdpPort {
        self.w.ports_mut()[i]
            .port
            .udp_mut()
            .expect("a UDP port of the case")
    }

    /// Packets delivered to output ports so far.
    pub fn delivered(&self) -> u64 {
        self.w.outputs().packets
    }

    /// Push `packets` packets through (fewer if every port falls silent).
    #[inline(never)]
    pub fn pump(&mut self, packets: u64) -> u64 {
        let mut left = packets;
        let mut idle = 0;
        while left > 0 && idle < IDLE_POLLS {
            let n = self.w.poll_up_to((left as usize).min(BATCH));
            idle = if n == 0 { idle + 1 } else { 0 };
            left -= n as u64;
        }
        packets - left
    }

    /// One timed run: TSC cycles, packets pushed, the datapath's counters for the run and
    /// the packets it delivered.
    pub fn timed(&mut self, packets: u64) -> Timed {
        self.w.datapath_mut().reset_stats();
        let d0 = self.delivered();
        let t0 = rdtsc();
        let n = self.pump(packets);
        let cycles = (rdtsc() - t0).max(1);
        Timed {
            cycles,
            packets: n.max(1),
            stats: self.datapath().stats().clone(),
            delivered: self.delivered() - d0,
        }
    }
}

/// What one timed run saw.
#[derive(Clone, Debug)]
pub(super) struct Timed {
    pub cycles: u64,
    pub packets: u64,
    pub stats: DatapathStats,
    pub delivered: u64,
}

impl Timed {
    pub fn per_packet(&self) -> f64 {
        self.cycles as f64 / self.packets as f64
    }
}

/// TSC cycles per packet `ports` take to write `packets` frames into a batch by
/// themselves, a batch from each in turn: the traffic's own share of a case's cycles.
pub(super) fn generator_cycles(ports: &mut [&mut dyn Port], packets: u64) -> f64 {
    let mut b = PacketBatch::new();
    let mut left = packets;
    let t0 = rdtsc();
    while left > 0 {
        let mut round = 0;
        for p in ports.iter_mut() {
            b.clear();
            b.limit((left as usize).min(BATCH));
            let n = p.recv(&mut b).unwrap_or(0) as u64;
            left -= n;
            round += n;
            if left == 0 {
                break;
            }
        }
        if round == 0 {
            break;
        }
    }
    (rdtsc() - t0) as f64 / (packets - left).max(1) as f64
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`), or None
/// where it cannot be read.
pub(super) fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
