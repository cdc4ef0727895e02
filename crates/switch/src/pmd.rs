//! Poll-mode workers: one thread per chosen core, pinned, owning its port queues and its
//! datapath (exact-match and megaflow caches); batches of 32, transmit flushed per loop.
//!
//! Nothing on the per-packet path locks: the worker keeps its counters in plain integers
//! and publishes a snapshot every few milliseconds with a `try_lock` that never waits, so
//! `flowpath stats` and the metrics endpoint read without disturbing it. When no packet
//! arrives for a while the worker sleeps, doubling the nap up to `idle_sleep_max`, so an
//! idle switch does not burn its core; the first packet brings it back to busy polling.

use crate::switch::{StatsTicket, Switch};
use crate::tier::{TierAgent, XdpTier};
use flowpath_datapath::tsc::{rdtsc, tsc_hz};
use flowpath_datapath::{Datapath, DatapathConfig, DatapathStats, OutputSink};
use flowpath_ports::{Port, PortInfo, PortStats, RxBatch};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One port queue handed to a worker: the OpenFlow port number flows use, and the queue.
pub struct WorkerPort {
    pub number: u32,
    pub queue: u32,
    pub port: Box<dyn Port>,
}

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub id: usize,
    /// CPU to pin to; `None` leaves the thread where the scheduler puts it.
    pub core: Option<usize>,
    pub datapath: DatapathConfig,
    /// Longest nap when idle; zero means pure busy polling.
    pub idle_sleep_max: Duration,
}

/// A port queue's counters as the worker last published them.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PortQueueSnapshot {
    pub name: String,
    pub number: u32,
    pub queue: u32,
    pub info: PortInfo,
    pub stats: PortStats,
    /// The last error, if the port failed and is no longer polled.
    pub down: Option<String>,
}

/// Everything `flowpath stats` shows about one worker.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct WorkerSnapshot {
    pub id: usize,
    pub core: Option<usize>,
    pub iterations: u64,
    /// Iterations that received at least one packet.
    pub busy_iterations: u64,
    pub busy_cycles: u64,
    pub idle_cycles: u64,
    pub sleeps: u64,
    pub packets: u64,
    pub batches: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    pub misses: u64,
    pub upcalls: u64,
    pub drops: u64,
    /// Outputs to a port number this worker has no queue of.
    pub no_such_port: u64,
    pub tx_packets: u64,
    /// Packets the XDP tier answered in the kernel for this worker's entries (read from
    /// the kernel counters in slices every 100 ms, all of them before `flows dump`).
    pub xdp_hits: u64,
    /// Kernel entries this worker installed and holds.
    pub xdp_entries: u64,
    /// Megaflows not offered to the XDP tier: tier full, no mask slot left, or actions it
    /// cannot run.
    pub xdp_not_offered: u64,
    pub tsc_hz: f64,
    pub ports: Vec<PortQueueSnapshot>,
}

impl WorkerSnapshot {
    /// Busy cycles per received packet (what the packet cost, polling overhead included).
    pub fn cycles_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.busy_cycles as f64 / self.packets as f64
        }
    }

    pub fn avg_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.packets as f64 / self.batches as f64
        }
    }

    fn absorb(&mut self, st: &DatapathStats) {
        self.packets = st.packets;
        self.batches = st.batches;
        self.emc_hits = st.emc_hits;
        self.megaflow_hits = st.megaflow_hits;
        self.misses = st.upcalls + st.upcalls_avoided;
        self.upcalls = st.upcalls;
        self.drops = st.drops().iter().map(|(_, n)| n).sum();
    }
}

/// The handle the control side keeps: the latest snapshot and the thread.
pub struct WorkerHandle {
    pub snapshot: Arc<Mutex<WorkerSnapshot>>,
    pub thread: JoinHandle<WorkerSnapshot>,
}

/// Output actions land here: port number → this worker's queue of that port.
struct PortSink<'a> {
    ports: &'a mut [WorkerPort],
    /// `by_number[n]` = index into `ports` + 1 (0 = none) for the worker's tx queue of port n.
    by_number: &'a [u16],
    dirty: &'a mut [bool],
    no_such_port: &'a mut u64,
    tx: &'a mut u64,
}

impl OutputSink for PortSink<'_> {
    #[inline]
    fn output(&mut self, port: u32, data: &[u8]) {
        let ix = self.by_number.get(port as usize).copied().unwrap_or(0);
        if ix == 0 {
            *self.no_such_port += 1;
            return;
        }
        let ix = ix as usize - 1;
        // A full ring is counted by the port as a tx drop.
        if self.ports[ix].port.send(data) {
            *self.tx += 1;
        }
        self.dirty[ix] = true;
    }
}

/// Start a worker over `ports`. It runs until `stop` is set, then flushes, drops its ports
/// (detaching any XDP program they own) and returns its final snapshot.
pub fn spawn_worker(
    sw: &Arc<Switch>,
    cfg: WorkerConfig,
    ports: Vec<WorkerPort>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<WorkerHandle> {
    spawn_worker_with_tier(sw, cfg, ports, stop, None)
}

/// [`spawn_worker`], with the megaflows the worker installs offered to the XDP tier.
pub fn spawn_worker_with_tier(
    sw: &Arc<Switch>,
    cfg: WorkerConfig,
    ports: Vec<WorkerPort>,
    stop: Arc<AtomicBool>,
    tier: Option<Arc<XdpTier>>,
) -> std::io::Result<WorkerHandle> {
    let ticket = sw.stats_sync().register();
    let store = sw.store().clone();
    let snapshot = Arc::new(Mutex::new(WorkerSnapshot {
        id: cfg.id,
        core: cfg.core,
        ..WorkerSnapshot::default()
    }));
    let shared = snapshot.clone();
    let thread = std::thread::Builder::new()
        .name(format!("flowpath-pmd{}", cfg.id))
        .spawn(move || {
            if let Some(core) = cfg.core {
                if let Err(e) = pin_to_core(core) {
                    eprintln!("flowpath: worker {}: cannot pin to CPU {core}: {e}", cfg.id);
                }
            }
            let mut dp = Datapath::new(store, cfg.datapath.clone());
            let agent = tier.map(|t| TierAgent::new(t, &mut dp));
            run_loop(cfg, dp, agent, ports, ticket, shared, stop)
        })?;
    Ok(WorkerHandle { snapshot, thread })
}

fn run_loop(
    cfg: WorkerConfig,
    mut dp: Datapath,
    mut agent: Option<TierAgent>,
    mut ports: Vec<WorkerPort>,
    mut ticket: StatsTicket,
    shared: Arc<Mutex<WorkerSnapshot>>,
    stop: Arc<AtomicBool>,
) -> WorkerSnapshot {
    let hz = tsc_hz();
    // The transmit queue for each port number: the worker's first queue of that port.
    let max_no = ports.iter().map(|p| p.number).max().unwrap_or(0) as usize;
    let mut by_number = vec![0u16; max_no + 1];
    for (i, p) in ports.iter().enumerate().rev() {
        by_number[p.number as usize] = i as u16 + 1;
    }
    let mut dirty = vec![false; ports.len()];
    let mut down: Vec<Option<String>> = vec![None; ports.len()];
    let mut batch = RxBatch::new();
    let mut snap = WorkerSnapshot {
        id: cfg.id,
        core: cfg.core,
        tsc_hz: hz,
        ports: ports
            .iter()
            .map(|p| PortQueueSnapshot {
                name: p.port.name().to_string(),
                number: p.number,
                queue: p.queue,
                info: p.port.info(),
                ..PortQueueSnapshot::default()
            })
            .collect(),
        ..WorkerSnapshot::default()
    };
    let publish_every = (hz / 200.0) as u64; // 5 ms
    let push_every = (hz / 10.0) as u64; // rule counters every 100 ms
    let collect_every = (hz / 10.0) as u64; // a slice of the kernel (XDP tier) counters
    let mut last_publish = rdtsc();
    let mut last_push = last_publish;
    let mut last_collect = last_publish;
    let mut idle_polls = 0u32;
    let mut nap = Duration::ZERO;
    let mut t0 = rdtsc();
    while !stop.load(Ordering::Relaxed) {
        let mut got = 0usize;
        for i in 0..ports.len() {
            if down[i].is_some() {
                continue;
            }
            batch.clear();
            match ports[i].port.recv(&mut batch) {
                Ok(0) => continue,
                Ok(n) => got += n,
                Err(e) => {
                    port_failed(&cfg, &ports[i], &e, &mut down[i]);
                    continue;
                }
            }
            let in_port = ports[i].number;
            let mut sink = PortSink {
                ports: &mut ports,
                by_number: &by_number,
                dirty: &mut dirty,
                no_such_port: &mut snap.no_such_port,
                tx: &mut snap.tx_packets,
            };
            batch.with_packets(|pkts| dp.process(in_port, pkts, &mut sink));
            if let Some(a) = &mut agent {
                a.after_batch(&mut dp);
            }
        }
        if let Some(a) = &mut agent {
            // Catch up with a rule change at once (not at the next upcall), so the kernel
            // entries that survive it are re-stamped soon: one atomic load.
            if dp.store().version() != dp.rule_version() {
                dp.sync_rules();
                a.after_batch(&mut dp);
            }
            if ticket.pending() {
                a.collect(&mut dp);
            }
        }
        for i in 0..ports.len() {
            if dirty[i] && down[i].is_none() {
                dirty[i] = false;
                if let Err(e) = ports[i].port.flush() {
                    port_failed(&cfg, &ports[i], &e, &mut down[i]);
                }
            }
        }
        ticket.poll(&mut dp);
        let t1 = rdtsc();
        snap.iterations += 1;
        if got > 0 {
            snap.busy_iterations += 1;
            snap.busy_cycles += t1 - t0;
            idle_polls = 0;
            nap = Duration::ZERO;
        } else {
            snap.idle_cycles += t1 - t0;
            idle_polls += 1;
            // Flush transmit queues that an earlier busy iteration left half-sent.
            if idle_polls == 1 {
                for (i, p) in ports.iter_mut().enumerate() {
                    if down[i].is_none() {
                        let _ = p.port.flush();
                    }
                }
            }
            if idle_polls > 1024 && !cfg.idle_sleep_max.is_zero() {
                nap = (nap * 2)
                    .max(Duration::from_micros(10))
                    .min(cfg.idle_sleep_max);
                std::thread::sleep(nap);
                snap.sleeps += 1;
            }
        }
        let t2 = rdtsc();
        // Sleeping and bookkeeping count as idle.
        snap.idle_cycles += t2 - t1;
        t0 = t2;
        if let Some(a) = &mut agent {
            if t2 - last_collect > collect_every {
                a.collect_some(&mut dp, 512);
                last_collect = t2;
            }
        }
        if t2 - last_push > push_every {
            dp.push_rule_stats();
            last_push = t2;
        }
        if t2 - last_publish > publish_every {
            last_publish = t2;
            tier_counters(&mut snap, agent.as_ref());
            publish(&mut snap, &dp, &ports, &down, &shared, false);
        }
    }
    // Drain: push out what is queued, credit counters to the rules, publish a last time.
    for (i, p) in ports.iter_mut().enumerate() {
        if down[i].is_none() {
            let _ = p.port.flush();
        }
    }
    if let Some(a) = &mut agent {
        a.collect(&mut dp);
    }
    dp.push_rule_stats();
    tier_counters(&mut snap, agent.as_ref());
    if let Some(a) = &mut agent {
        a.clear();
    }
    publish(&mut snap, &dp, &ports, &down, &shared, true);
    snap
}

fn tier_counters(snap: &mut WorkerSnapshot, agent: Option<&TierAgent>) {
    if let Some(a) = agent {
        snap.xdp_hits = a.hits;
        snap.xdp_entries = a.entries() as u64;
        snap.xdp_not_offered = a.refused + a.unsupported;
    }
}

fn port_failed(cfg: &WorkerConfig, p: &WorkerPort, e: &std::io::Error, down: &mut Option<String>) {
    eprintln!(
        "flowpath: worker {}: port '{}' (number {}, queue {}) failed: {e}; no longer polling it",
        cfg.id,
        p.port.name(),
        p.number,
        p.queue
    );
    *down = Some(e.to_string());
}

fn publish(
    snap: &mut WorkerSnapshot,
    dp: &Datapath,
    ports: &[WorkerPort],
    down: &[Option<String>],
    shared: &Mutex<WorkerSnapshot>,
    wait: bool,
) {
    snap.absorb(dp.stats());
    for ((s, p), d) in snap.ports.iter_mut().zip(ports).zip(down) {
        s.stats = p.port.stats();
        if s.down.is_none() && d.is_some() {
            s.down = d.clone();
        }
    }
    let guard = if wait {
        shared.lock().ok()
    } else {
        shared.try_lock().ok()
    };
    if let Some(mut g) = guard {
        g.clone_from(snap);
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_to_core(core: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays inside it for
    // core < CPU_SETSIZE, which is checked first.
    unsafe {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
