//! Poll-mode workers: one thread per chosen core, pinned, owning its port queues and its
//! datapath (exact-match and megaflow caches); batches of 32, transmit flushed per loop.
//!
//! Nothing on the per-packet path locks: the worker keeps its counters in plain integers
//! and publishes a snapshot every few milliseconds with a `try_lock` that never waits, so
//! `flowpath stats` and the metrics endpoint read without disturbing it. When no packet
//! arrives for a while the worker sleeps, doubling the nap up to `idle_sleep_max`, so an
//! idle switch does not burn its core; the first packet brings it back to busy polling.

use crate::switch::{MegaflowDump, StatsTicket, Switch};
use crate::tier::{TierAgent, XdpTier};
use flowpath_inspect::megaflows::CompiledFilter;
use flowpath_inspect::{RawMegaflow, WorkerMegaflows};

use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::{Port, PortInfo, PortStats};
use flowpath_datapath::{
    ControllerQueue, Datapath, DatapathConfig, DatapathDrop, DatapathStats, MacLearningTable,
    PacketOutQueue, PortMissStats, PortOutputs, Worker,
};
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
    /// The switch's MAC learning table (NORMAL), shared by all its workers; `None`: the
    /// worker makes its own from `datapath.mac_learning`.
    pub mac_table: Option<Arc<MacLearningTable>>,
    /// The ports FLOOD/ALL/NORMAL send to; `None`: this worker's own ports.
    pub flood_ports: Option<Vec<u32>>,
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
    /// What the miss guard counted for packets received on this port (by port number:
    /// every queue of one port shows the worker's figure for the port).
    pub miss: PortMissStats,
}

/// The miss-storm defence of one worker: its limits and what they did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct GuardSnapshot {
    /// Megaflows held, the dynamic flow limit now, and the configured maximum.
    pub megaflows: u64,
    pub flow_limit: u64,
    pub megaflow_max: u64,
    /// Subtables (masks) in use and the most allowed.
    pub subtables: u64,
    pub max_masks: u64,
    /// Megaflows evicted by CLOCK (entries over the flow limit).
    pub evictions: u64,
    /// Subtables removed whole to make room for a new mask.
    pub subtables_evicted: u64,
    /// Megaflows not cached: every subtable busy at the mask limit.
    pub mask_limit_refusals: u64,
    /// Times revalidation was too slow and the flow limit shrank.
    pub flow_limit_shrinks: u64,
    /// Misses dropped over their port's miss budget (all ports).
    pub miss_budget_drops: u64,
    /// Packets forwarded without caching their megaflow (mask rate or mask limit).
    pub uncached: u64,
    /// The configured budget: share of the core for the slow path (1 = off) and new
    /// masks per port per second (0 = no limit).
    pub slow_path_share: f64,
    pub new_masks_per_sec: u32,
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
    /// Of the megaflow hits, those the signature-match cache found.
    pub smc_hits: u64,
    pub misses: u64,
    pub upcalls: u64,
    /// `ct` actions run, packets `ct(table=)` recirculated, and the recirculated passes
    /// (batches of them through the caches again).
    pub ct_executed: u64,
    pub recirculations: u64,
    pub recirc_passes: u64,
    /// Second passes the ct memo answered in the first (no lookup, no pass of their own).
    pub ct_memo_hits: u64,
    pub drops: u64,
    /// `drops` by reason (parser drop reasons and the datapath's own: `vxlan_no_tunnel`,
    /// `table_miss`, `tunnel_neigh_unresolved`, ...), only the reasons that counted.
    pub drop_reasons: std::collections::BTreeMap<String, u64>,
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
    /// Megaflows still proving themselves before the XDP tier is offered them, and those
    /// dropped from that list without a second packet (a flood's one-packet flows).
    pub xdp_candidates: u64,
    pub xdp_not_proven: u64,
    /// Of those, taken later after all (hit again after their reviews).
    pub xdp_offered_late: u64,
    pub guard: GuardSnapshot,
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
        self.smc_hits = st.smc_hits;
        self.megaflow_hits = st.megaflow_hits;
        self.misses = st.upcalls + st.upcalls_avoided;
        self.upcalls = st.upcalls;
        self.ct_executed = st.ct_executed;
        self.recirculations = st.recirculations;
        self.recirc_passes = st.recirc_passes;
        self.ct_memo_hits = st.ct_memo_hits;
        let drops = st.drops();
        self.drops = drops.iter().map(|(_, n)| n).sum();
        for (reason, n) in drops {
            if n > 0 {
                self.drop_reasons.insert(reason.to_string(), n);
            }
        }
    }

    fn absorb_guard(&mut self, dp: &Datapath) {
        let mf = dp.megaflows();
        let c = mf.counters;
        let lim = dp.miss_limits();
        self.guard = GuardSnapshot {
            megaflows: mf.len() as u64,
            flow_limit: mf.flow_limit() as u64,
            megaflow_max: mf.max_entries() as u64,
            subtables: mf.subtables() as u64,
            max_masks: mf.max_masks() as u64,
            evictions: c.evictions,
            subtables_evicted: c.subtables_evicted,
            mask_limit_refusals: c.mask_limit_refusals,
            flow_limit_shrinks: c.flow_limit_shrinks,
            miss_budget_drops: dp.stats().dropped(DatapathDrop::MissBudget),
            uncached: dp.stats().uncached,
            slow_path_share: lim.slow_path_share,
            new_masks_per_sec: lim.new_masks_per_sec,
        };
        let per = dp.port_miss_stats();
        for p in &mut self.ports {
            if let Some((_, m)) = per.iter().find(|(n, _)| *n == p.number) {
                p.miss = *m;
            }
        }
    }
}

impl Default for WorkerConfig {
    /// Worker 0, not pinned, the default datapath, naps up to 500 µs, no pacing.
    fn default() -> Self {
        WorkerConfig {
            id: 0,
            core: None,
            datapath: DatapathConfig::default(),
            idle_sleep_max: Duration::from_micros(500),
            pace: None,
            mac_table: None,
            flood_ports: None,
        }
    }
}

/// The handle the control side keeps: the latest snapshot, the thread, and the two
/// queues an OpenFlow channel uses.
pub struct WorkerHandle {
    pub snapshot: Arc<Mutex<WorkerSnapshot>>,
    pub thread: JoinHandle<WorkerSnapshot>,
    /// Packets the worker's `controller` actions send (PACKET_IN: reason, table, cookie,
    /// in_port, total length, truncated data). Pop them from any thread and give the
    /// buffers back with `recycle`; when full, further ones are dropped and counted
    /// (`controller_queue_full`).
    pub controller: Arc<ControllerQueue>,
    /// Frames plus actions for the worker to send (PACKET_OUT), run between its batches;
    /// `push` hands a packet-out back when the queue is full (nothing blocks).
    pub packet_out: Arc<PacketOutQueue>,
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
    let tracker = sw.tracker().clone();
    let snapshot = Arc::new(Mutex::new(WorkerSnapshot {
        id: cfg.id,
        core: cfg.core,
        ..WorkerSnapshot::default()
    }));
    let shared = snapshot.clone();
    let controller = Arc::new(ControllerQueue::new(cfg.datapath.controller_queue));
    let packet_out = Arc::new(PacketOutQueue::new(cfg.datapath.packet_out_queue));
    let (ctl, pout) = (controller.clone(), packet_out.clone());
    let thread = std::thread::Builder::new()
        .name(format!("flowpath-pmd{}", cfg.id))
        .spawn(move || {
            if let Some(core) = cfg.core {
                if let Err(e) = flowpath_base::cpu::pin_current_thread(core) {
                    eprintln!("flowpath: worker {}: cannot pin to CPU {core}: {e}", cfg.id);
                }
            }
            let mut dp = Datapath::new(store, cfg.datapath.clone());
            dp.set_tracker(tracker);
            dp.set_controller_queue(ctl);
            if let Some(t) = &cfg.mac_table {
                dp.set_mac_table(t.clone());
            }
            if let Some(p) = &cfg.flood_ports {
                dp.set_ports(p.iter().copied());
            }
            let out = PortOutputs::new(&ports);
            let mut w = Worker::new(dp, ports, out, &format!("worker {}", cfg.id));
            w.set_packet_out_queue(pout);
            if let Some(t) = tier {
                w.add_tier(Box::new(TierAgent::new(t)));
            }
            run_loop(cfg, w, ticket, shared, stop)
        })?;
    Ok(WorkerHandle {
        snapshot,
        thread,
        controller,
        packet_out,
    })
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
    let push_every = (hz / 80.0) as u64; // rule counters: a slice every 12.5 ms
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
        }
        if ticket.pending() {
            if has_tier {
                w.collect_tiers(usize::MAX);
            }
            if let Some(filter) = ticket.dump_wanted() {
                ticket.deliver(dump_megaflows(cfg.id, &w, &filter, hz));
            }
            ticket.poll(w.datapath_mut());
        }
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
            // A slice (the datapath also pushes slices while busy): a full sweep of a full
            // cache would stall the loop for ~0.5 ms, a slice ~0.1 ms. Dumps still push
            // everything.
            w.datapath_mut().push_rule_stats_slice();
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

/// Copy out the megaflows `filter` selects (formatting is the control thread's job: the
/// worker pauses only for the copy), with the counts of every tier.
fn dump_megaflows(
    id: usize,
    w: &Worker<Box<dyn Port>, PortOutputs>,
    filter: &CompiledFilter,
    hz: f64,
) -> MegaflowDump {
    let dp = w.datapath();
    let now = rdtsc();
    let mut summary = WorkerMegaflows {
        worker: id,
        emc_entries: dp.emc().occupancy() as u64,
        megaflows: dp.megaflows().len() as u64,
        ..WorkerMegaflows::default()
    };
    let mut raw = Vec::new();
    let wanted = filter.wants_worker(id);
    for (mid, v) in dp.megaflow_entries() {
        let in_xdp = w.tiers().iter().any(|t| t.holds(mid));
        summary.xdp_entries += in_xdp as u64;
        if !wanted {
            continue;
        }
        let (packets, bytes) = v.counts();
        let used = v.used_tsc();
        let m = RawMegaflow {
            key: *v.key(),
            mask: *v.mask(),
            actions: v.actions().to_vec(),
            ending: v.ending(),
            packets,
            bytes,
            used: (used != 0).then(|| now.saturating_sub(used) as f64 / hz),
            tier: if in_xdp { "xdp" } else { "megaflow" },
        };
        if filter.selects(&m) {
            raw.push(m);
        }
    }
    MegaflowDump { summary, raw }
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
            // A nap a packet-out can cut short (`WorkerPacketIo` unparks the worker).
            std::thread::park_timeout(self.nap);
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
    snap.absorb_guard(w.datapath());
    snap.no_such_port = w.outputs().no_such_port;
    snap.tx_packets = w.outputs().tx_packets;
    if let Some(t) = w.tiers().first() {
        let (hits, entries, not_offered) = t.counters();
        snap.xdp_hits = hits;
        snap.xdp_entries = entries;
        snap.xdp_not_offered = not_offered;
        (
            snap.xdp_candidates,
            snap.xdp_not_proven,
            snap.xdp_offered_late,
        ) = t.waiting();
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
