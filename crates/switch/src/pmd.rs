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

use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::{Port, PortInfo, PortStats};
use flowpath_datapath::{Datapath, DatapathConfig, DatapathStats, PortOutputs, Worker};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One port queue handed to a worker: the OpenFlow port number flows use, and the queue.
pub type WorkerPort = flowpath_datapath::WorkerPort<Box<dyn Port>>;

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub id: usize,
    /// CPU to pin to; `None` leaves the thread where the scheduler puts it.
    pub core: Option<usize>,
    pub datapath: DatapathConfig,
    /// Longest nap when idle; zero means pure busy polling.
    pub idle_sleep_max: Duration,
    /// Sleep this long after every iteration that received packets (to pace generated
    /// traffic in demos and tests); `None`: never.
    pub pace: Option<Duration>,
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
                if let Err(e) = flowpath_base::cpu::pin_current_thread(core) {
                    eprintln!("flowpath: worker {}: cannot pin to CPU {core}: {e}", cfg.id);
                }
            }
            let dp = Datapath::new(store, cfg.datapath.clone());
            let out = PortOutputs::new(&ports);
            let mut w = Worker::new(dp, ports, out, &format!("worker {}", cfg.id));
            if let Some(t) = tier {
                w.add_tier(Box::new(TierAgent::new(t)));
            }
            run_loop(cfg, w, ticket, shared, stop)
        })?;
    Ok(WorkerHandle { snapshot, thread })
}

/// The switch's thread around the one worker loop: poll, keep up with rule changes,
/// nap when idle, publish counters, sweep the tiers' counters.
fn run_loop(
    cfg: WorkerConfig,
    mut w: Worker<Box<dyn Port>, PortOutputs>,
    mut ticket: StatsTicket,
    shared: Arc<Mutex<WorkerSnapshot>>,
    stop: Arc<AtomicBool>,
) -> WorkerSnapshot {
    let hz = tsc_hz();
    let mut snap = first_snapshot(&cfg, &w, hz);
    let publish_every = (hz / 200.0) as u64; // 5 ms
    let push_every = (hz / 10.0) as u64; // rule counters every 100 ms
    let collect_every = (hz / 10.0) as u64; // a slice of the tiers' counters
    let has_tier = !w.tiers().is_empty();
    let mut last_publish = rdtsc();
    let mut last_push = last_publish;
    let mut last_collect = last_publish;
    let mut idle = Idle::default();
    let mut t0 = rdtsc();
    while !stop.load(Ordering::Relaxed) {
        let got = w.poll();
        if has_tier {
            // Catch up with a rule change at once (not at the next upcall), so the kernel
            // entries that survive it are re-stamped soon: one atomic load.
            w.sync_rules();
            if ticket.pending() {
                w.collect_tiers(usize::MAX);
            }
        }
        ticket.poll(w.datapath_mut());
        let t1 = rdtsc();
        snap.iterations += 1;
        if got > 0 {
            snap.busy_iterations += 1;
            snap.busy_cycles += t1 - t0;
            idle = Idle::default();
            if let Some(p) = cfg.pace {
                std::thread::sleep(p);
            }
        } else {
            snap.idle_cycles += t1 - t0;
            idle.wait(&cfg, &mut w, &mut snap);
        }
        let t2 = rdtsc();
        // Sleeping and bookkeeping count as idle.
        snap.idle_cycles += t2 - t1;
        t0 = t2;
        if has_tier && t2 - last_collect > collect_every {
            w.collect_tiers(512);
            last_collect = t2;
        }
        if t2 - last_push > push_every {
            w.datapath_mut().push_rule_stats();
            last_push = t2;
        }
        if t2 - last_publish > publish_every {
            last_publish = t2;
            publish(&mut snap, &w, &shared, false);
        }
    }
    // Drain: push out what is queued, let tiers credit and clear, publish a last time.
    w.finish();
    publish(&mut snap, &w, &shared, true);
    snap
}

/// Idle handling: after the first empty poll, flush what an earlier busy iteration left
/// half-sent; after 1,024 empty polls, nap, doubling up to `idle_sleep_max`.
#[derive(Default)]
struct Idle {
    polls: u32,
    nap: Duration,
}

impl Idle {
    fn wait(
        &mut self,
        cfg: &WorkerConfig,
        w: &mut Worker<Box<dyn Port>, PortOutputs>,
        snap: &mut WorkerSnapshot,
    ) {
        self.polls += 1;
        if self.polls == 1 {
            w.flush_ports(u64::MAX);
        }
        if self.polls > 1024 && !cfg.idle_sleep_max.is_zero() {
            self.nap = (self.nap * 2)
                .max(Duration::from_micros(10))
                .min(cfg.idle_sleep_max);
            std::thread::sleep(self.nap);
            snap.sleeps += 1;
        }
    }
}

fn first_snapshot(
    cfg: &WorkerConfig,
    w: &Worker<Box<dyn Port>, PortOutputs>,
    hz: f64,
) -> WorkerSnapshot {
    WorkerSnapshot {
        id: cfg.id,
        core: cfg.core,
        tsc_hz: hz,
        ports: w
            .ports()
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
    }
}

fn publish(
    snap: &mut WorkerSnapshot,
    w: &Worker<Box<dyn Port>, PortOutputs>,
    shared: &Mutex<WorkerSnapshot>,
    wait: bool,
) {
    snap.absorb(w.datapath().stats());
    snap.no_such_port = w.outputs().no_such_port;
    snap.tx_packets = w.outputs().tx_packets;
    if let Some(t) = w.tiers().first() {
        let (hits, entries, not_offered) = t.counters();
        snap.xdp_hits = hits;
        snap.xdp_entries = entries;
        snap.xdp_not_offered = not_offered;
    }
    for (s, p) in snap.ports.iter_mut().zip(w.ports()) {
        s.stats = p.port.stats();
        if s.down.is_none() && p.down.is_some() {
            s.down = p.down.clone();
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
