//! `Datapath`: one worker's fast path. Batches of up to [`BATCH`] packets go through
//! parse → exact-match cache → megaflow cache → slow path (upcall), stage by stage, then
//! execute; each stage is one named function over the whole batch.
//!
//! Nothing on the hit path allocates, locks or makes a system call: the only shared state
//! read per batch is the rule store's version (one atomic load). When it has moved, the
//! worker revalidates (or flushes) its caches before the batch, so every packet of that
//! batch is handled as the new rules say.

use crate::controller::{ControllerQueue, PacketOut, CONTROLLER_PORT};
use crate::emc::ExactMatchCache;
use crate::guard::{MissGuard, MissLimits, PortMissStats};
use crate::hold::{NeighbourHoldQueue, HOLD_HEADROOM, HOLD_MAX_AGE_SECS};
use crate::l2::{resolve_normal, MacLearningConfig, MacLearningTable, NormalDep};
use crate::megaflow::MegaflowCache;
use crate::smc::SignatureMatchCache;
use crate::stats::{DatapathDrop, DatapathStats};
use crate::tier::{MegaflowEvent, MegaflowId, MegaflowView};
use crate::tunnel::{HopMiss, TunnelKey, TunnelPort, TunnelRemote, Tunnels, UnderlayHop};
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::BATCH;
use flowpath_packet::encap::{EncapError, VxlanEncap, VxlanTemplate};
use flowpath_packet::key::{TUN_IPV6, TUN_PRESENT};
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{
    parse_into, parse_into_hashed, Action, FlowKey, Packet, PacketMeta, ParseOptions,
};
use flowpath_pipeline::{Ending, Pipeline, RuleStore, Translation};
use smallvec::SmallVec;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Where `Output` actions send packets. Implemented by port sets, counting sinks and test
/// captures; generic (not `dyn`) so the call is inlined on the hot path.
pub trait OutputSink {
    fn output(&mut self, port: u32, data: &[u8]);
}

/// What to do with cached megaflows when the rules change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnRuleChange {
    /// Re-classify every megaflow's key; keep those whose decision is unchanged.
    #[default]
    Revalidate,
    /// Drop every megaflow; traffic re-learns them through the slow path.
    Flush,
}

#[derive(Clone, Debug)]
pub struct DatapathConfig {
    /// Use the exact-match cache at all.
    pub emc: bool,
    /// Exact-match cache entries, for each of its two tables (narrow IPv4 keys, 64 bytes an
    /// entry; all others, 128).
    pub emc_entries: usize,
    /// Insert one flow in N into the exact-match cache (1 = every flow; OVS defaults to 100).
    pub emc_insert_inv_prob: u32,
    /// The signature-match cache between the EMC and the megaflow search: entries (0 =
    /// off). It pays once the active flows outnumber the EMC (see `smc.rs`).
    pub smc_entries: usize,
    /// Most megaflows held before CLOCK eviction (the dynamic flow limit starts here).
    /// Their arena, 256 bytes each, is allocated and faulted in when the datapath is made.
    pub megaflow_max: usize,
    /// Most megaflow subtables (distinct masks).
    pub max_masks: usize,
    /// A revalidation should take at most this long (ms); slower ones shrink the flow
    /// limit (0 = never shrink).
    pub revalidate_target_ms: f64,
    /// The miss budget, port fairness and new-mask rate (see `guard.rs`).
    pub miss: MissLimits,
    /// Re-rank megaflow subtables by hits, and review the tiers (whether the SMC pays,
    /// whether the EMC's lookups pause, the dynamic flow limit), every this many batches.
    pub rerank_every: u32,
    /// Rank subtables by hits at those reviews (busy masks searched first). Off, they stay
    /// in the order they were made while the tier reviews go on: the attack bench's
    /// "no defence".
    pub rank_subtables: bool,
    /// Credit megaflow counters to rule counters every this many batches (and at least
    /// [`STATS_PUSH_INTERVAL_MS`] apart), [`STATS_PUSH_SLICE`] entries at a time.
    pub stats_push_every: u32,
    pub on_rule_change: OnRuleChange,
    pub parse: ParseOptions,
    /// Packets held for the controller before further ones are dropped (and counted).
    pub controller_queue: usize,
    /// Packet-outs a worker holds before further ones are refused to the caller.
    pub packet_out_queue: usize,
    /// The MAC learning table `NORMAL` uses, when the datapath makes its own (a switch
    /// shares one among its workers: [`Datapath::set_mac_table`]).
    pub mac_learning: MacLearningConfig,
    /// VXLAN tunnel ports and their underlay (see `tunnel.rs`); `None`: no tunnel ports,
    /// and a VXLAN packet is decapsulated with `in_port` its underlay port.
    pub tunnels: Option<Arc<Tunnels>>,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig {
            emc: true,
            emc_entries: 8192,
            emc_insert_inv_prob: 100,
            smc_entries: 1 << 20,
            megaflow_max: 65536,
            max_masks: 512,
            revalidate_target_ms: 20.0,
            miss: MissLimits::default(),
            rerank_every: 1024,
            rank_subtables: true,
            stats_push_every: 512,
            on_rule_change: OnRuleChange::Revalidate,
            parse: ParseOptions::default(),
            controller_queue: 1024,
            packet_out_queue: 1024,
            mac_learning: MacLearningConfig::default(),
            tunnels: None,
        }
    }
}

/// Most exact-match cache entries in each of its two tables (192 MB in all).
pub const EMC_ENTRIES_LIMIT: usize = 1 << 20;
/// Most signature-match cache entries (512 MB).
pub const SMC_ENTRIES_LIMIT: usize = 1 << 26;
/// Most megaflows: their arena, allocated whole when the datapath is made, then takes 1 GB.
pub const MEGAFLOW_MAX_LIMIT: usize = 1 << 22;

impl DatapathConfig {
    /// Bytes of tables a datapath of this configuration allocates and writes when it is
    /// made, before its first packet: the megaflow arena, the EMC's tables and the SMC.
    /// (Subtable indexes, the free list and the scratch arrays come on top, as traffic
    /// needs them.)
    pub fn memory_at_start(&self) -> u64 {
        let smc = if self.smc_entries > 0 {
            crate::smc::SignatureMatchCache::bytes_for(self.smc_entries)
        } else {
            0
        };
        crate::megaflow::MegaflowCache::bytes_for(self.megaflow_max)
            + crate::emc::ExactMatchCache::bytes_for(self.emc_entries)
            + smc
    }

    /// The sizes a datapath can be made with. The tables are allocated whole when it is
    /// made, so a size past these (or past the memory there is) would abort the process
    /// there; the error names the field as this struct does.
    pub fn check(&self) -> Result<(), String> {
        if self.megaflow_max == 0 || self.megaflow_max > MEGAFLOW_MAX_LIMIT {
            return Err(format!(
                "megaflow_max: {} is not in 1..={MEGAFLOW_MAX_LIMIT} (256 bytes a megaflow, \
                 allocated at start: 1 GB per worker at most)",
                self.megaflow_max
            ));
        }
        if self.smc_entries > SMC_ENTRIES_LIMIT {
            return Err(format!(
                "smc_entries: {} is more than {SMC_ENTRIES_LIMIT} (512 MB per worker); 0 turns it off",
                self.smc_entries
            ));
        }
        if self.emc_entries > EMC_ENTRIES_LIMIT {
            return Err(format!(
                "emc_entries: {} is more than {EMC_ENTRIES_LIMIT} (192 MB per worker)",
                self.emc_entries
            ));
        }
        if self.max_masks == 0 || self.max_masks > u16::MAX as usize {
            return Err(format!("max_masks: {} is not in 1..=65535", self.max_masks));
        }
        Ok(())
    }
}

/// Least time between two periodic pushes of megaflow counters to rule counters.
pub const STATS_PUSH_INTERVAL_MS: f64 = 1.25;
/// Megaflow entries one periodic push visits (a full cache of 65,536 is swept in 64
/// pushes, at most 8,192 entries per 10 ms as before). Before this, every push swept the
/// whole cache: with the cache full, as under a new-flow flood, that took 5–15 % of the
/// core and stalled a batch for ~0.5 ms. Then slices of 8,192 every 4,096 batches still
/// stalled their batch for 0.6–2.2 M cycles (~0.3–0.9 ms) once every 131,072 packets of
/// a flood; slices an eighth the size, eight times as often, cost the same in all and
/// stall a batch an eighth as long.
pub const STATS_PUSH_SLICE: usize = 1024;

/// Per-batch scratch, allocated once.
struct Scratch {
    keys: [FlowKey; BATCH],
    metas: [PacketMeta; BATCH],
    hashes: [u32; BATCH],
    /// Bit i: `keys[i]` is narrow, as the IPv4 fast path's keys are (the EMC keeps those in
    /// one-line entries); other keys are looked up whole even when narrow.
    narrow: u32,
    slots: [u32; BATCH],
    /// Whether the parse stage prefetched the signature-match cache's buckets (it does
    /// when the EMC is not looked up in this batch), so the megaflow stage need not.
    smc_prefetched: bool,
    /// Decisions of this batch's misses that were not cached (slot [`UNCACHED`]), by packet.
    uncached: Vec<(u8, Translation)>,
}

/// `slots[i]` of a packet whose decision was not cached (see `Scratch::uncached`).
const UNCACHED: u32 = u32::MAX;

/// One worker's datapath.
pub struct Datapath {
    cfg: DatapathConfig,
    store: Arc<RuleStore>,
    pipeline: Arc<Pipeline>,
    emc: ExactMatchCache,
    smc: Option<SignatureMatchCache>,
    /// Whether the signature-match cache is used now: only while it pays (see
    /// [`Datapath::reconsider_smc`]).
    smc_active: bool,
    /// Packets and megaflow hits at the last reconsideration.
    smc_window: (u64, u64),
    /// Whether EMC lookups are skipped (but for a sample) because they hardly ever hit,
    /// and (packets looked up, hits) since the last reconsideration.
    emc_idle: bool,
    emc_window: (u64, u64),
    megaflows: MegaflowCache,
    stats: DatapathStats,
    controller: Arc<ControllerQueue>,
    scratch: Box<Scratch>,
    emc_seed: u64,
    /// xorshift state choosing which batches get stage time stamps.
    stamp_rng: u32,
    batches_since_rerank: u32,
    batches_since_push: u32,
    guard: MissGuard,
    /// Cycles one megaflow's revalidation took, last measured (for the flow limit).
    reval_cycles_per_entry: f64,
    /// The MAC learning table NORMAL consults, the ports FLOOD/ALL (and a flooding NORMAL)
    /// send to, and this worker's megaflows that ran NORMAL (see `l2.rs`).
    mac: Arc<MacLearningTable>,
    ports: Vec<u32>,
    l2_flows: Vec<L2Flow>,
    /// The table generation this worker's NORMAL megaflows are valid for.
    mac_gen: u64,
    /// The table's clock (ms) at which the next refresh sweep is due.
    l2_sweep_at: u64,
    /// TSC of the last time the flow limit was reconsidered between revalidations.
    limit_checked_at: u64,
    /// Where the next periodic counter push starts, and when the last one ran.
    push_cursor: usize,
    pushed_at: u64,
    /// The last underlay hop an encapsulation used, and packets waiting for a neighbour.
    encap: EncapState,
}

impl Datapath {
    /// A datapath over `store`'s rules, its tables allocated and written now.
    ///
    /// Panics, naming the field, on sizes [`DatapathConfig::check`] refuses (callers that
    /// take sizes from users check first, to report them as their own errors).
    pub fn new(store: Arc<RuleStore>, cfg: DatapathConfig) -> Datapath {
        if let Err(e) = cfg.check() {
            panic!("Datapath::new: {e}");
        }
        let mut cfg = cfg;
        if let Some(t) = &cfg.tunnels {
            // The parser decapsulates the tunnel ports' UDP port.
            cfg.parse.vxlan_port = t.dst_port().or(cfg.parse.vxlan_port);
        }
        let seed = random_seed();
        let pipeline = store.snapshot();
        Datapath {
            emc: ExactMatchCache::new(cfg.emc_entries, cfg.emc_insert_inv_prob),
            smc: (cfg.smc_entries > 0).then(|| SignatureMatchCache::new(cfg.smc_entries)),
            smc_active: false,
            smc_window: (0, 0),
            emc_idle: false,
            emc_window: (0, 0),
            megaflows: MegaflowCache::with_limits(
                cfg.megaflow_max,
                cfg.max_masks,
                seed.rotate_left(17),
            ),
            guard: MissGuard::new(cfg.miss.clone()),
            reval_cycles_per_entry: 0.0,
            limit_checked_at: 0,
            push_cursor: 0,
            pushed_at: 0,
            encap: EncapState::default(),
            controller: Arc::new(ControllerQueue::new(cfg.controller_queue)),
            mac: Arc::new(MacLearningTable::new(cfg.mac_learning.clone())),
            ports: Vec::new(),
            l2_flows: Vec::new(),
            mac_gen: 0,
            l2_sweep_at: 0,
            scratch: Box::new(Scratch {
                keys: [FlowKey::ZERO; BATCH],
                metas: [PacketMeta::default(); BATCH],
                hashes: [0; BATCH],
                narrow: 0,
                slots: [0; BATCH],
                smc_prefetched: false,
                uncached: Vec::with_capacity(BATCH),
            }),
            emc_seed: seed,
            stamp_rng: (seed as u32) | 1,
            batches_since_rerank: 0,
            batches_since_push: 0,
            stats: DatapathStats::default(),
            cfg,
            store,
            pipeline,
        }
    }

    pub fn config(&self) -> &DatapathConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &DatapathStats {
        &self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = DatapathStats::default();
        self.smc_window = (0, 0);
        self.emc_window = (0, 0);
        self.guard.reset_stats();
    }

    /// What the miss guard counted per ingress port (by port number).
    pub fn port_miss_stats(&self) -> Vec<(u32, PortMissStats)> {
        self.guard.port_stats()
    }

    /// The miss guard's limits.
    pub fn miss_limits(&self) -> &MissLimits {
        self.guard.limits()
    }

    pub fn store(&self) -> &Arc<RuleStore> {
        &self.store
    }

    /// The queue `Controller` actions fill; the application drains it from any thread
    /// (and recycles the buffers).
    pub fn controller_queue(&self) -> Arc<ControllerQueue> {
        self.controller.clone()
    }

    /// Use `q` as the controller queue (a switch makes the queues before its workers, so
    /// the control side holds them from the start).
    pub fn set_controller_queue(&mut self, q: Arc<ControllerQueue>) {
        self.controller = q;
    }

    /// Share `t` as the MAC learning table (every worker of a switch uses the same one).
    /// Megaflows decided with the previous table are flushed.
    pub fn set_mac_table(&mut self, t: Arc<MacLearningTable>) {
        if !self.l2_flows.is_empty() {
            self.flush_caches();
        }
        self.mac_gen = t.generation();
        self.mac = t;
    }

    pub fn mac_table(&self) -> &Arc<MacLearningTable> {
        &self.mac
    }

    /// The ports FLOOD and ALL (and a NORMAL that floods) send to, but for the ingress
    /// port. Expanded when a packet's actions run, so a change applies to the next packet
    /// and no megaflow holds a stale list.
    pub fn set_ports(&mut self, ports: impl IntoIterator<Item = u32>) {
        let mut v: Vec<u32> = ports.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        self.ports = v;
    }

    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    /// How many megaflows that ran NORMAL this worker tracks (live or not yet swept).
    pub fn normal_megaflows(&self) -> usize {
        self.l2_flows.len()
    }

    /// The megaflow cache, read-only (sizes, counters, entries for dumps).
    pub fn megaflows(&self) -> &MegaflowCache {
        &self.megaflows
    }

    pub fn emc(&self) -> &ExactMatchCache {
        &self.emc
    }

    /// Live megaflows, as another tier names and sees them.
    pub fn megaflow_entries(&self) -> impl Iterator<Item = (MegaflowId, MegaflowView<'_>)> {
        let mf = &self.megaflows;
        mf.iter().filter_map(move |(s, _)| {
            let id = mf.id(s);
            mf.get(id).map(|v| (id, v))
        })
    }

    // ---- the tier interface (see tier.rs) ----

    /// Record megaflow events for another tier ([`Datapath::take_megaflow_events`]).
    pub fn watch_megaflows(&mut self, on: bool) {
        self.megaflows.watch(on);
    }

    /// Whether megaflow events are waiting (one load and a branch: per batch).
    #[inline(always)]
    pub fn has_megaflow_events(&self) -> bool {
        self.megaflows.has_events()
    }

    /// Move the events since the last call into `out`.
    pub fn take_megaflow_events(&mut self, out: &mut Vec<MegaflowEvent>) {
        self.megaflows.take_events(out);
    }

    /// The megaflow `id` names, if it is still that one.
    pub fn megaflow(&self, id: MegaflowId) -> Option<MegaflowView<'_>> {
        self.megaflows.get(id)
    }

    /// Credit packets another tier forwarded for `id`; false when `id` is gone.
    pub fn credit_megaflow(&mut self, id: MegaflowId, packets: u64, bytes: u64) -> bool {
        self.megaflows.credit(id, packets, bytes)
    }

    /// The version of the rules this worker classifies with (its snapshot's).
    pub fn rule_version(&self) -> u64 {
        self.pipeline.version()
    }

    /// Whether the rule store has moved past this worker's snapshot (one atomic load).
    #[inline(always)]
    pub fn rules_changed(&self) -> bool {
        self.store.version() != self.pipeline.version()
    }

    /// Catch up with the rule store now (also happens at the start of every batch).
    pub fn sync_rules(&mut self) {
        if !self.rules_changed() {
            return;
        }
        let new = self.store.snapshot();
        match self.cfg.on_rule_change {
            OnRuleChange::Flush => {
                self.megaflows.flush(&self.pipeline);
                self.l2_flows.clear();
            }
            OnRuleChange::Revalidate => {
                let n = self.megaflows.len();
                let t0 = rdtsc();
                // NORMAL is resolved as on the slow path (without learning); the megaflows
                // that ran it are tracked afresh.
                self.mac_gen = self.mac.generation();
                let mac = &self.mac;
                let mut l2: Vec<(u32, SmallVec<[NormalDep; 1]>)> = Vec::new();
                self.megaflows
                    .revalidate_with(&self.pipeline, &new, |slot, key, tr| {
                        let deps = resolve_normal(&mut tr.actions, key, mac, false);
                        if !deps.is_empty() {
                            l2.push((slot, deps));
                        }
                    });
                let mf = &self.megaflows;
                self.l2_flows = l2
                    .into_iter()
                    .filter(|(s, _)| mf.entry(*s).is_live())
                    .map(|(s, deps)| L2Flow {
                        id: mf.id(s),
                        deps,
                        packets: mf.entry(s).packets(),
                    })
                    .collect();
                let dt = rdtsc() - t0;
                if n > 0 {
                    self.reval_cycles_per_entry = dt as f64 / n as f64;
                }
                if let Some(target) = self.revalidate_target() {
                    self.megaflows.adjust_limit(dt, target);
                }
            }
        }
        // Exact-match entries of removed megaflows die by generation check.
        self.pipeline = new;
        self.stats.rule_syncs += 1;
        if self.megaflows.over_limit() {
            self.megaflows.trim(&self.pipeline);
        }
    }

    /// Keep this worker's NORMAL megaflows exact (before every batch while it has any):
    /// age the MAC table out when due, refresh the entries of megaflows that had packets,
    /// and revalidate the megaflows a MAC change concerns.
    fn sync_l2(&mut self) {
        let now = self.mac.now_ms();
        if self.mac.expiry_due_at(now) {
            self.mac.expire();
        }
        if now >= self.l2_sweep_at {
            let aging = self.mac.config().aging.as_millis() as u64;
            self.l2_sweep_at = now + L2_SWEEP_MS.min(aging / 4).max(1);
            self.refresh_l2();
        }
        let gen = self.mac.generation();
        if gen != self.mac_gen {
            self.revalidate_l2(gen);
        }
    }

    /// Fast-path hits do not learn: refresh the sources of the NORMAL megaflows that had
    /// packets since the last sweep, so a talking host does not age out. (A refresh never
    /// moves an entry: a megaflow whose source the table places elsewhere is removed by
    /// [`Datapath::revalidate_l2`], so its next packet learns on the slow path.) Drops dead
    /// entries.
    fn refresh_l2(&mut self) {
        let (mf, mac) = (&self.megaflows, &self.mac);
        self.l2_flows.retain_mut(|f| {
            let Some(v) = mf.get(f.id) else {
                return false;
            };
            let (packets, _) = v.counts();
            if packets != f.packets {
                f.packets = packets;
                for d in &f.deps {
                    mac.refresh(d.vlan, d.src, d.in_port);
                }
            }
            true
        });
    }

    /// The MAC table moved to `gen`: re-translate the NORMAL megaflows whose destination
    /// changed (all of them if the change log does not reach back) and remove those that
    /// now decide differently.
    fn revalidate_l2(&mut self, gen: u64) {
        let changed = self.mac.changes_since(self.mac_gen);
        self.mac_gen = gen;
        self.stats.l2_revalidations += 1;
        let mut i = 0;
        while i < self.l2_flows.len() {
            let f = &self.l2_flows[i];
            let Some(v) = self.megaflows.get(f.id) else {
                self.l2_flows.swap_remove(i);
                continue;
            };
            let concerned = match &changed {
                None => true,
                Some(c) => f
                    .deps
                    .iter()
                    .any(|d| c.contains(&(d.vlan, d.dst)) || c.contains(&(d.vlan, d.src))),
            };
            if !concerned {
                i += 1;
                continue;
            }
            // A megaflow whose source the table no longer places on its in_port (moved,
            // aged out, evicted) must go: its packets would not learn.
            let learned_here = f
                .deps
                .iter()
                .all(|d| d.src[0] & 1 != 0 || self.mac.lookup(d.vlan, d.src) == Some(d.in_port));
            let key = *v.key();
            let mut tr = self.pipeline.translate(&key);
            let deps = resolve_normal(&mut tr.actions, &key, &self.mac, false);
            let slot = f.id.slot();
            if !learned_here {
                self.megaflows.remove(slot, &self.pipeline);
                self.stats.l2_removed += 1;
                self.l2_flows.swap_remove(i);
            } else if self.megaflows.revalidate_one(slot, tr, &self.pipeline) {
                self.l2_flows[i].deps = deps;
                i += 1;
            } else {
                self.stats.l2_removed += 1;
                self.l2_flows.swap_remove(i);
            }
        }
    }

    /// Run a packet-out (OpenFlow PACKET_OUT) now: its actions on its frame, outputs to
    /// `sink`; a `Table` action sends the frame as it is then through the pipeline (and
    /// the caches) as if it had come in on `in_port`. NORMAL is resolved with the MAC table
    /// (a packet-out does not learn). A frame that does not parse gets its outputs only
    /// (rewrites, NORMAL's lookup and TABLE need the parsed headers; NORMAL then floods).
    pub fn packet_out<S: OutputSink>(&mut self, po: &PacketOut, sink: &mut S) {
        if self.rules_changed() {
            self.sync_rules();
        }
        self.stats.packet_outs += 1;
        let in_port = po.in_port.unwrap_or(CONTROLLER_PORT);
        let len = po.data.len();
        let mut buf = vec![0u8; PACKET_OUT_ROOM + len + PACKET_OUT_ROOM];
        buf[PACKET_OUT_ROOM..PACKET_OUT_ROOM + len].copy_from_slice(&po.data);
        let mut pkt = Packet::new(&mut buf, PACKET_OUT_ROOM, len);
        let mut key = FlowKey::ZERO;
        let mut meta = PacketMeta::default();
        let parsed = parse_into(pkt.data(), in_port, &self.cfg.parse, &mut key, &mut meta).is_ok();
        let table = po.actions.iter().position(|a| *a == Action::Table);
        let mut actions: SmallVec<[Action; 4]> = po.actions[..table.unwrap_or(po.actions.len())]
            .iter()
            .copied()
            .filter(|a| parsed || a.is_output())
            .collect();
        if parsed {
            resolve_normal(&mut actions, &key, &self.mac, false);
        }
        let ctx = Ctx {
            in_port,
            controller: &self.controller,
            ports: &self.ports,
            tunnels: self.cfg.tunnels.as_deref(),
            encap: &self.encap,
        };
        // Without TABLE, a packet-out that sends nothing counts as a rule drop.
        if !actions.is_empty() || table.is_none() {
            execute(
                &actions,
                Ending::Done,
                &mut pkt,
                &mut meta,
                &key,
                &ctx,
                sink,
                &mut self.stats,
            );
        }
        if table.is_some() && parsed {
            let mut pkts = [pkt];
            self.process(in_port, &mut pkts, sink);
        }
    }

    /// The revalidation target in TSC cycles, if the flow limit is dynamic.
    fn revalidate_target(&self) -> Option<u64> {
        (self.cfg.revalidate_target_ms > 0.0)
            .then(|| (self.cfg.revalidate_target_ms * 1e-3 * tsc_hz()) as u64)
    }

    /// Credit megaflow counters to rule counters now (also done periodically).
    pub fn push_rule_stats(&mut self) {
        self.megaflows.push_stats(&self.pipeline);
    }

    /// Credit the next slice of megaflow counters to rule counters (the periodic push).
    pub fn push_rule_stats_slice(&mut self) {
        self.megaflows
            .push_stats_slice(&self.pipeline, &mut self.push_cursor, STATS_PUSH_SLICE);
    }

    /// Are packets waiting for an underlay neighbour ([`NeighbourHoldQueue`])?
    #[inline(always)]
    pub fn has_held(&self) -> bool {
        !self.encap.held.borrow().is_empty()
    }

    /// Send the held packets whose neighbour is now known, drop those that waited past
    /// [`HOLD_MAX_AGE_SECS`] (`tunnel_neigh_unresolved`), keep the rest. Does nothing
    /// until the underlay changes or the oldest expires. Returns the packets sent.
    pub fn release_held<S: OutputSink>(&mut self, sink: &mut S) -> usize {
        let Some(t) = self.cfg.tunnels.as_deref() else {
            return 0;
        };
        let mut q = self.encap.held.borrow_mut();
        if q.is_empty() {
            return 0;
        }
        let gen = t.underlay.generation();
        let now = rdtsc();
        let max_age = (HOLD_MAX_AGE_SECS * flowpath_base::clock::tsc_hz()) as u64;
        if gen == q.tried_at_gen && !q.any_expired(now, max_age) {
            return 0;
        }
        q.tried_at_gen = gen;
        let st = &mut self.stats;
        let mut sent = 0;
        for h in std::mem::take(&mut q.packets) {
            let (tp, hop) = match (t.port(h.port), t.underlay.hop(h.remote)) {
                (Some(tp), Some(hop)) => (tp, hop),
                (Some(_), None) if now.saturating_sub(h.since) <= max_age => {
                    q.packets.push(h);
                    continue;
                }
                _ => {
                    // Waited too long, or its tunnel port is gone.
                    st.drop(DatapathDrop::TunnelNeighUnresolved);
                    continue;
                }
            };
            let Some(headers) = outer_headers(tp, &hop, h.remote, h.vni, h.flow_hash) else {
                st.drop(DatapathDrop::TunnelNoRoute);
                continue;
            };
            let mut buf = h.buf;
            let mut pkt = Packet::new(&mut buf, HOLD_HEADROOM, h.len);
            send_encapsulated(&headers, hop.port, h.vni, h.flow_hash, &mut pkt, sink, st);
            st.tunnel_released += 1;
            sent += 1;
        }
        sent
    }

    /// Drop every cached flow (counters are credited to rules first).
    pub fn flush_caches(&mut self) {
        self.megaflows.flush(&self.pipeline);
        self.l2_flows.clear();
        self.emc.clear();
        if let Some(smc) = &mut self.smc {
            smc.clear();
        }
    }

    /// Process packets received on `in_port`: classify, count, run actions, and send
    /// outputs to `sink`. Any number of packets: they are taken [`BATCH`] at a time.
    pub fn process<S: OutputSink>(&mut self, in_port: u32, pkts: &mut [Packet<'_>], sink: &mut S) {
        for batch in pkts.chunks_mut(BATCH) {
            self.process_batch(in_port, batch, sink);
        }
    }

    /// One batch of at most [`BATCH`] packets through the five stages.
    #[inline(always)]
    fn process_batch<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        sink: &mut S,
    ) {
        debug_assert!(pkts.len() <= BATCH);
        if self.rules_changed() {
            self.sync_rules();
        }
        if !self.l2_flows.is_empty() {
            self.sync_l2();
        }
        if pkts.is_empty() {
            return;
        }
        // Stage time stamps on one batch in STAGE_SAMPLE, picked at random (a fixed stride
        // could alias with traffic that alternates ports or shapes); the others read the
        // TSC once. A stage with nothing to do is not timed either: a TSC read costs ~25
        // cycles here, as much as a whole empty stage.
        let t0 = rdtsc();
        let r = &mut self.stamp_rng;
        *r ^= *r << 13;
        *r ^= *r >> 17;
        *r ^= *r << 5;
        let timed = *r % STAGE_SAMPLE == 0;
        let stamp = |t: u64| if timed { rdtsc() } else { t };
        self.megaflows.begin_batch_at(t0);
        self.stats.batches += 1;
        self.stats.packets += pkts.len() as u64;
        self.guard.received(in_port, pkts.len());

        let valid = self.stage_parse(in_port, pkts);
        let t1 = stamp(t0);
        let (pending, t2) = if self.cfg.emc && valid != 0 {
            (self.stage_emc(valid), stamp(t1))
        } else {
            (valid, t1)
        };
        let (pending, t3) = if pending != 0 {
            (self.stage_megaflow(pkts.len(), pending), stamp(t2))
        } else {
            (0, t2)
        };
        if pending != valid {
            // Something of this batch was a cache hit: the miss budget binds.
            self.guard.hit_seen(t3);
        }
        let (valid, uncached, installed, t4) = if pending != 0 {
            // The miss budget needs the time even in an untimed batch.
            let now = if timed { t3 } else { rdtsc() };
            let (dropped, uncached, installed) = self.stage_upcall(in_port, pending, now);
            (valid & !dropped, uncached, installed, stamp(t3))
        } else {
            (valid, 0, 0, t3)
        };
        self.stage_execute(in_port, pkts, valid, uncached, sink);
        if installed != 0 {
            self.unmark_installed(installed);
        }
        if timed {
            let t5 = rdtsc();
            let c = &mut self.stats.cycles;
            c.parse += t1 - t0;
            c.emc += t2 - t1;
            c.megaflow += t3 - t2;
            c.upcall += t4 - t3;
            c.actions += t5 - t4;
            c.packets += pkts.len() as u64;
        }
        self.housekeeping();
    }

    /// Stage 1: parse every packet once into its key; returns the bits of those that parsed.
    /// While the key is fresh, its hash (the exact-match and signature caches' index) is
    /// taken and the EMC entries it names are prefetched, so the lookup stage finds them
    /// loaded.
    #[inline(always)]
    fn stage_parse(&mut self, in_port: u32, pkts: &[Packet<'_>]) -> u32 {
        // The hash is needed by the EMC (also when idle: the SMC and EMC inserts use it)
        // and by an active SMC; the EMC is prefetched only when it will be looked up.
        let want_hash = self.cfg.emc || (self.smc_active && self.smc.is_some());
        // An EMC that is not looked up in this batch leaves the prefetch to the next tier
        // that is: an active SMC's bucket (a random line of a table of megabytes) then has
        // the rest of the parse to arrive in, not just the megaflow stage's own prefetch
        // pass.
        // The common configuration (hashes, no tunnel ports) gets a loop of its own,
        // without the per-packet tests of the two; with the SMC prefetch, another (a test
        // for it in the common loop cost `emc_hit` 1.4 instructions a packet).
        let plain = want_hash && self.cfg.tunnels.is_none();
        let smc_prefetch = plain && !self.emc_lookup_now() && self.smc_active && self.smc.is_some();
        self.scratch.smc_prefetched = smc_prefetch;
        match (plain, smc_prefetch) {
            (true, true) => self.parse_loop::<true, true>(in_port, pkts, true),
            (true, false) => self.parse_loop::<true, false>(in_port, pkts, true),
            (false, _) => self.parse_loop::<false, false>(in_port, pkts, want_hash),
        }
    }

    /// Whether this batch looks the EMC up (it is on, and not idle but for a sample).
    #[inline(always)]
    fn emc_lookup_now(&self) -> bool {
        self.cfg.emc && !(self.emc_idle && self.stats.batches % EMC_SAMPLE_EVERY != 0)
    }

    /// [`Datapath::stage_parse`]'s loop; `PLAIN`: `want_hash` and no tunnel ports;
    /// `SMC_PREFETCH`: prefetch the SMC's buckets instead of the EMC's (not looked up).
    #[inline(always)]
    fn parse_loop<const PLAIN: bool, const SMC_PREFETCH: bool>(
        &mut self,
        in_port: u32,
        pkts: &[Packet<'_>],
        want_hash: bool,
    ) -> u32 {
        let want_hash = PLAIN || want_hash;
        // At most BATCH: the index then needs no bounds checks on the batch arrays.
        let pkts = &pkts[..pkts.len().min(BATCH)];
        let emc_lookup = self.emc_lookup_now();
        let sc = &mut *self.scratch;
        let st = &mut self.stats;
        let tunnels = self.cfg.tunnels.as_deref();
        let seed = self.emc_seed;
        let emc = &self.emc;
        let smc = self.smc.as_ref();
        let (mut valid, mut narrow) = (0u32, 0u32);
        // The first packets' headers are fetched together; later ones a few ahead of the
        // parse (frames fresh from a NIC ring or a big arena are not in the cache).
        for p in pkts.iter().take(PARSE_PREFETCH) {
            prefetch(p.data());
        }
        for (i, pkt) in pkts.iter().enumerate() {
            if let Some(next) = pkts.get(i + PARSE_PREFETCH) {
                prefetch(next.data());
            }
            st.bytes += pkt.len() as u64;
            let (key, meta) = (&mut sc.keys[i], &mut sc.metas[i]);
            let parsed = if want_hash {
                parse_into_hashed(pkt.data(), in_port, &self.cfg.parse, key, meta, seed)
            } else {
                parse_into(pkt.data(), in_port, &self.cfg.parse, key, meta).map(|()| None)
            };
            match parsed {
                Ok(h) => {
                    // With tunnel ports, a decapsulated packet enters as its tunnel port
                    // (before any cache: megaflows are per tunnel port) or is dropped.
                    if let Some(t) = tunnels.filter(|_| !PLAIN) {
                        if key.bytes()[TUN_FLAGS_BYTE] & TUN_PRESENT != 0 {
                            if map_tunnel(t, key) {
                                st.decapsulated += 1;
                            } else {
                                st.drop(DatapathDrop::VxlanNoTunnel);
                                continue;
                            }
                        }
                    }
                    valid |= 1 << i;
                    if want_hash {
                        // The general parser's keys are hashed here, after the tunnel
                        // mapping, once.
                        let (h, n) = h.unwrap_or_else(|| (key.hash(seed), false));
                        sc.hashes[i] = h;
                        narrow |= u32::from(n) << i;
                        if SMC_PREFETCH {
                            if let Some(smc) = smc {
                                smc.prefetch(h);
                            }
                        } else if emc_lookup {
                            emc.prefetch(h, n);
                        }
                    }
                }
                Err(r) => st.parse_drops[r as usize] += 1,
            }
        }
        sc.narrow = narrow;
        valid
    }

    /// Stage 2: the exact-match cache; returns the bits still unresolved.
    #[inline(always)]
    fn stage_emc(&mut self, valid: u32) -> u32 {
        if !self.cfg.emc {
            return valid;
        }
        if !self.emc_lookup_now() {
            // Hardly any hits lately: the parse stage took the hashes (later tiers use
            // them); one batch in EMC_SAMPLE_EVERY still looks up, to notice when hits
            // come back.
            return valid;
        }
        let sc = &mut *self.scratch;
        let pending = self.emc.lookup_batch(
            &sc.keys,
            valid,
            sc.narrow,
            &sc.hashes,
            &mut sc.slots,
            &mut self.megaflows,
        );
        self.stats.emc_hits += (valid & !pending).count_ones() as u64;
        self.emc_window.0 += valid.count_ones() as u64;
        pending
    }

    /// Stage 3: the megaflow cache, the whole batch per subtable; returns what is left.
    #[inline(always)]
    fn stage_megaflow(&mut self, n: usize, pending: u32) -> u32 {
        if pending == 0 {
            return 0;
        }
        let sc = &mut *self.scratch;
        let mut pending = pending;
        let mut found = 0u32;
        if let Some(smc) = self.smc.as_ref().filter(|_| self.smc_active) {
            // Three passes over the batch, so each one's memory loads overlap: the buckets,
            // then the candidate megaflows, then the checks.
            let mut m = if sc.smc_prefetched { 0 } else { pending };
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                smc.prefetch(sc.hashes[i]);
            }
            let mut cand = 0u32;
            let mut m = pending;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                if let Some(slot) = smc.lookup(sc.hashes[i]) {
                    self.megaflows.prefetch_entry(slot);
                    sc.slots[i] = slot;
                    cand |= 1 << i;
                }
            }
            while cand != 0 {
                let i = cand.trailing_zeros() as usize;
                cand &= cand - 1;
                let slot = sc.slots[i];
                if let Some(gen) = self.megaflows.verify(slot, &sc.keys[i]) {
                    if self.megaflows.claim(slot, gen) {
                        found |= 1 << i;
                    }
                }
            }
            pending &= !found;
            self.stats.smc_hits += found.count_ones() as u64;
        }
        let left = if pending != 0 {
            self.megaflows
                .lookup_batch(&sc.keys[..n], pending, &mut sc.slots)
        } else {
            0
        };
        let searched = pending & !left;
        if let Some(smc) = self.smc.as_mut().filter(|_| self.smc_active) {
            let mut m = searched;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                smc.insert(sc.hashes[i], sc.slots[i]);
            }
        }
        found |= searched;
        self.stats.megaflow_hits += found.count_ones() as u64;
        if self.cfg.emc {
            self.emc.insert_batch(
                &sc.keys,
                sc.narrow,
                &sc.hashes,
                &sc.slots,
                found,
                &self.megaflows,
            );
        }
        left
    }

    /// Stage 4: the slow path for what is left: classify through the pipeline and install
    /// a megaflow (unless an earlier miss of this batch already installed a covering one),
    /// within the port's miss budget; a megaflow with a new mask past the port's mask rate
    /// or the mask limit is used for its packet but not cached. Returns the bits of the
    /// packets dropped for the budget and of those whose decision was not cached.
    ///
    /// Out of line: a batch with misses pays one call against thousands of instructions a
    /// miss, and the hit stages around it keep their registers (inlined, it cost the
    /// exact-match hit ~4 instructions a packet, callgrind).
    #[inline(never)]
    fn stage_upcall(&mut self, in_port: u32, pending: u32, now: u64) -> (u32, u32, u32) {
        if pending == 0 {
            return (0, 0, 0);
        }
        let sc = &mut *self.scratch;
        sc.uncached.clear();
        let binds = self.guard.begin(in_port, now);
        let (mut dropped, mut cached, mut uncached, mut upcalls) = (0u32, 0u32, 0u32, 0u64);
        let mut installed = 0u32;
        let mut t = now;
        // The subtables this stage has installed into. A megaflow an earlier miss of this
        // batch installed may cover a later one, and only those subtables can hold one:
        // the megaflow stage searched every subtable for every pending packet, and since
        // then entries have only been removed elsewhere. So the first miss of a batch
        // looks nothing up, and a later one probes only these (searching them all cost
        // every miss a probe of each subtable: ~100 subtables under a tuple-space
        // explosion).
        let mut fresh: SmallVec<[u16; 8]> = SmallVec::new();
        let mut m = pending;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if !fresh.is_empty() {
                if let Some(s) = self.megaflows.lookup_in(&sc.keys[i], &fresh) {
                    self.stats.upcalls_avoided += 1;
                    sc.slots[i] = s;
                    cached |= 1 << i;
                    continue;
                }
            }
            if !self.guard.may_upcall(in_port, binds) {
                self.stats.drop(DatapathDrop::MissBudget);
                dropped |= 1 << i;
                continue;
            }
            let mut tr = self.pipeline.translate(&sc.keys[i]);
            let deps = if tr.actions.contains(&Action::Normal) {
                if self.l2_flows.is_empty() {
                    // Changes from now on concern the megaflow about to be made.
                    self.mac_gen = self.mac.generation();
                }
                resolve_normal(&mut tr.actions, &sc.keys[i], &self.mac, true)
            } else {
                SmallVec::new()
            };
            self.stats.upcalls += 1;
            let subtable = self.megaflows.find_subtable(&tr.mask);
            if subtable.is_none()
                && !(self.guard.may_create_mask(in_port, t)
                    && self.megaflows.make_room_for_mask(&self.pipeline))
            {
                self.stats.uncached += 1;
                self.guard.uncached(in_port);
                sc.slots[i] = UNCACHED;
                uncached |= 1 << i;
                sc.uncached.push((i as u8, tr));
            } else {
                sc.slots[i] = self
                    .megaflows
                    .install_in(&sc.keys[i], tr, &self.pipeline, subtable);
                installed |= 1 << i;
                let si = self.megaflows.subtable_of(sc.slots[i]);
                if !fresh.contains(&si) {
                    fresh.push(si);
                }
                cached |= 1 << i;
                if !deps.is_empty() {
                    self.l2_flows.push(L2Flow {
                        id: self.megaflows.id(sc.slots[i]),
                        deps,
                        packets: 0,
                    });
                }
            }
            upcalls += 1;
            if binds {
                // Under pressure each upcall's cost is taken from the port's credit as it
                // goes; otherwise the batch's upcalls are counted at the end (one TSC read).
                let now = rdtsc();
                self.guard.charge(in_port, 1, now - t, true);
                t = now;
            }
        }
        if !binds && upcalls > 0 {
            self.guard.charge(in_port, upcalls, rdtsc() - t, false);
        }
        if self.cfg.emc && cached != 0 {
            self.emc.insert_batch(
                &sc.keys,
                sc.narrow,
                &sc.hashes,
                &sc.slots,
                cached,
                &self.megaflows,
            );
        }
        (dropped, uncached, installed)
    }

    /// After stage 5 of a batch that installed megaflows (`installed`: the packets that
    /// did): the batch's own packets on them do not count as a use for CLOCK, so a
    /// megaflow is marked only by a hit in a later batch. When its first packet marked
    /// it, under a stream of new flows the hand found the whole full cache marked once a
    /// lap and cleared it all in one eviction: 65,536 entries, 16 MB, walked in one batch
    /// (3–4 M cycles here, a stall of ~1.5 ms every 65,536 misses, ~4 % of the misses'
    /// cycles), and a flow that came back was evicted as soon as one that never did.
    /// Unmarked, a new megaflow still has a full lap of the hand to be hit before it can
    /// go.
    #[cold]
    #[inline(never)]
    fn unmark_installed(&mut self, installed: u32) {
        let mut m = installed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.megaflows.unmark(self.scratch.slots[i]);
        }
    }

    /// Stage 5: count every parsed packet against its megaflow and run its actions, in
    /// packet order. `uncached` has the bits of the packets whose decision was not cached
    /// (slot [`UNCACHED`]).
    #[inline(always)]
    fn stage_execute<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        valid: u32,
        uncached: u32,
        sink: &mut S,
    ) {
        let mut m = valid;
        if self.cfg.tunnels.is_some() {
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                self.execute_packet(in_port, &mut pkts[i], i, false, sink);
            }
            return;
        }
        // Without tunnel ports most packets hit a megaflow whose actions are one output
        // to another plain port: this loop sends those straight to the sink and leaves
        // everything else to `execute_packet` (out of line, so that this loop keeps its
        // state in registers: with the action interpreter inlined here it kept it on the
        // stack). Packet order is kept: the others run in their turn.
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let pkt = &mut pkts[i];
            let counted = uncached & (1 << i) == 0 && self.scratch.metas[i].l2 == 0;
            if counted {
                let e = self.megaflows.hit(self.scratch.slots[i], pkt.len() as u64);
                if let Some(p) = e.direct_out().filter(|&p| p != in_port) {
                    sink.output(p, pkt.data());
                    continue;
                }
            }
            self.execute_packet_cold(in_port, pkt, i, counted, sink);
        }
    }

    /// [`Datapath::execute_packet`] out of line, for the fast loop's exceptions. The
    /// tunnel loop inlines it instead: one out-of-line function for both cost
    /// `vxlan_decap` 35 instructions a packet more and `emc_hit` 7 (callgrind).
    #[inline(never)]
    fn execute_packet_cold<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        counted: bool,
        sink: &mut S,
    ) {
        self.execute_packet(in_port, pkt, i, counted, sink);
    }

    /// Stage 5 for packet `i` of the batch: count it against its megaflow (unless
    /// `counted`: the caller did) and run its actions, or run its uncached decision.
    #[inline(always)]
    fn execute_packet<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkt: &mut Packet<'_>,
        i: usize,
        counted: bool,
        sink: &mut S,
    ) {
        let sc = &mut *self.scratch;
        let tunnels = self.cfg.tunnels.as_deref();
        let mut ctx = Ctx {
            in_port,
            controller: &self.controller,
            ports: &self.ports,
            tunnels,
            encap: &self.encap,
        };
        let meta = &mut sc.metas[i];
        let key = &sc.keys[i];
        // VXLAN: from here on the packet is its inner frame.
        meta.strip_outer(pkt);
        if tunnels.is_some() {
            // A decapsulated packet came in on its tunnel port.
            let k = key.bytes();
            ctx.in_port = u32::from_be_bytes([k[0], k[1], k[2], k[3]]);
        }
        if sc.slots[i] == UNCACHED {
            let Some((_, tr)) = sc.uncached.iter().find(|(p, _)| *p as usize == i) else {
                return;
            };
            let now = flowpath_pipeline::rule::now_ns();
            for r in &tr.path {
                self.pipeline
                    .rule(*r)
                    .counters
                    .add_at(1, pkt.len() as u64, now);
            }
            execute(
                &tr.actions,
                tr.ending,
                pkt,
                meta,
                key,
                &ctx,
                sink,
                &mut self.stats,
            );
            return;
        }
        let e = if counted {
            self.megaflows.entry(sc.slots[i])
        } else {
            self.megaflows.hit(sc.slots[i], pkt.len() as u64)
        };
        // The common megaflow, one output to a plain port: straight to the sink.
        if let (Some(p), None) = (e.direct_out(), tunnels) {
            if p != in_port {
                sink.output(p, pkt.data());
                return;
            }
        }
        execute(
            e.actions(),
            e.ending(),
            pkt,
            meta,
            key,
            &ctx,
            sink,
            &mut self.stats,
        );
    }

    /// After a batch: trim an overfull cache, re-rank subtables and push rule counters
    /// every so many batches.
    #[inline(always)]
    fn housekeeping(&mut self) {
        if self.megaflows.over_limit() {
            self.megaflows.trim(&self.pipeline);
        }
        self.batches_since_rerank += 1;
        if self.batches_since_rerank >= self.cfg.rerank_every {
            self.batches_since_rerank = 0;
            if self.cfg.rank_subtables {
                self.megaflows.rerank();
            }
            self.reconsider_flow_limit();
            self.reconsider_smc();
            self.reconsider_emc();
        }
        self.batches_since_push += 1;
        if self.batches_since_push >= self.cfg.stats_push_every {
            self.batches_since_push = 0;
            let now = rdtsc();
            if now.saturating_sub(self.pushed_at) as f64 >= STATS_PUSH_INTERVAL_MS * 1e-3 * tsc_hz()
            {
                self.pushed_at = now;
                self.megaflows.push_stats_slice(
                    &self.pipeline,
                    &mut self.push_cursor,
                    STATS_PUSH_SLICE,
                );
            }
        }
    }

    /// Use the signature-match cache only while it pays: while the megaflow search answers
    /// at least a quarter of the packets (many flows past the EMC). With few flows the
    /// EMC answers nearly everything, and with many misses (new flows, floods) a lookup
    /// and its 8 MB table only cost: there it measurably slowed the miss and mixed cases
    /// (+8-10 %), so it stays off (and cold) until the traffic changes.
    fn reconsider_smc(&mut self) {
        if self.smc.is_none() {
            return;
        }
        let (p0, h0) = self.smc_window;
        let (p, h) = (self.stats.packets, self.stats.megaflow_hits);
        self.smc_window = (p, h);
        let (dp, dh) = (p.wrapping_sub(p0), h.wrapping_sub(h0));
        if dp == 0 {
            return;
        }
        let pays = dh * 4 >= dp;
        if pays != self.smc_active {
            self.smc_active = pays;
            self.stats.smc_switches += 1;
        }
    }

    /// Skip EMC lookups while they hit under 2 % of the packets looked up (a million
    /// flows: the hash and two probes then cost ~20 cycles for nothing); a sample of
    /// batches keeps looking, so lookups resume as soon as hits come back. Insertions go on
    /// either way, so the cache holds what it would.
    fn reconsider_emc(&mut self) {
        if !self.cfg.emc {
            return;
        }
        let (looked, hits0) = self.emc_window;
        let hits = self.stats.emc_hits.wrapping_sub(hits0);
        self.emc_window = (0, self.stats.emc_hits);
        if looked < 64 {
            return; // too few samples to judge (an idle or sampled-only window)
        }
        let idle = hits * 50 < looked;
        if idle != self.emc_idle {
            self.emc_idle = idle;
            self.stats.emc_switches += 1;
        }
    }

    /// Between rule changes, at most once a second: let a shrunken flow limit grow back
    /// while a revalidation of today's cache would stay quick (estimated from the last
    /// one's cost per entry).
    fn reconsider_flow_limit(&mut self) {
        let Some(target) = self.revalidate_target() else {
            return;
        };
        if self.megaflows.flow_limit() >= self.megaflows.max_entries() {
            return;
        }
        let now = rdtsc();
        if now.saturating_sub(self.limit_checked_at) < tsc_hz() as u64 {
            return;
        }
        self.limit_checked_at = now;
        let estimate = (self.reval_cycles_per_entry * self.megaflows.len() as f64) as u64;
        self.megaflows.adjust_limit(estimate, target);
    }
}

/// What one packet's actions need besides the packet.
struct Ctx<'a> {
    in_port: u32,
    controller: &'a ControllerQueue,
    /// Where FLOOD/ALL send (but the ingress port).
    ports: &'a [u32],
    /// The tunnel ports (an output to one encapsulates), if any.
    tunnels: Option<&'a Tunnels>,
    /// The last encapsulation's hop and outer headers, and the hold queue.
    encap: &'a EncapState,
}

/// What encapsulation keeps between packets: the last hop ([`HopCache`]) and the packets
/// held while a next hop's MAC is being resolved ([`NeighbourHoldQueue`]).
#[derive(Default)]
struct EncapState {
    hop: HopCache,
    held: std::cell::RefCell<NeighbourHoldQueue>,
}

/// The last underlay hop used and the outer headers built for it, valid while the
/// resolver's generation is unchanged: a burst to one remote reads the resolver and builds
/// the headers once, then one atomic load per packet.
type HopCache = std::cell::RefCell<Option<HopEntry>>;

struct HopEntry {
    /// The resolver's generation, tunnel port and remote this was built for.
    gen: u64,
    port: u32,
    remote: IpAddr,
    /// The underlay port the packets leave by.
    out: u32,
    headers: VxlanTemplate,
}

/// A megaflow that ran NORMAL, and what its decision depended on (see `l2.rs`).
struct L2Flow {
    id: MegaflowId,
    deps: SmallVec<[NormalDep; 1]>,
    /// Its packet count at the last refresh sweep.
    packets: u64,
}

/// Refresh sweeps of NORMAL megaflows run at most this often (ms of the MAC table's
/// clock), and at least four times per aging period.
const L2_SWEEP_MS: u64 = 1000;

/// Run one packet's actions.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn execute<S: OutputSink>(
    actions: &[Action],
    ending: Ending,
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
    key: &FlowKey,
    ctx: &Ctx<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let mut sent = false;
    // Tunnel metadata set by this packet's actions (else the key's, as received).
    let mut tun = TunSet::default();
    for a in actions {
        match *a {
            Action::Output(p) => {
                if p != ctx.in_port {
                    output(p, pkt, key, &tun, ctx, sink, st);
                    sent = true;
                }
            }
            Action::InPort => {
                output(ctx.in_port, pkt, key, &tun, ctx, sink, st);
                sent = true;
            }
            Action::Flood | Action::All | Action::Normal => {
                // (A megaflow's NORMAL was resolved on the slow path; one left here floods.)
                for &p in ctx.ports {
                    if p != ctx.in_port {
                        sink.output(p, pkt.data());
                        sent = true;
                    }
                }
                if let Some(t) = ctx.tunnels {
                    for tp in t.ports() {
                        if tp.number != ctx.in_port {
                            output(tp.number, pkt, key, &tun, ctx, sink, st);
                            sent = true;
                        }
                    }
                }
            }
            Action::SetTunnel(id) => tun.id = Some(id),
            Action::SetTunnelDst(b) => tun.dst = Some(Action::tunnel_dst(b)),
            Action::Table => {} // a packet-out's only, run by Datapath::packet_out
            Action::Controller { .. } => {
                if ctx.controller.push(ctx.in_port, a, pkt.data()) {
                    st.controller_sent += 1;
                } else {
                    st.drop(DatapathDrop::ControllerQueueFull);
                }
                sent = true;
            }
            _ => {
                if let Err(e) = rewrite::apply(a, pkt, meta) {
                    st.drop(match e {
                        RewriteDrop::TtlExpired => DatapathDrop::TtlExpired,
                        RewriteDrop::NoRoom => DatapathDrop::NoRoom,
                        RewriteDrop::TooManyVlans => DatapathDrop::TooManyVlansPushed,
                    });
                    return;
                }
            }
        }
    }
    if !sent {
        st.drop(match ending {
            Ending::TableMiss(_) => DatapathDrop::TableMiss,
            _ => DatapathDrop::RuleDrop,
        });
    }
}

/// Tunnel metadata a packet's actions set (`set_tunnel`, `set_field:…->tun_dst`).
#[derive(Default)]
struct TunSet {
    id: Option<u32>,
    dst: Option<IpAddr>,
}

/// Key byte of `tun_flags`.
const TUN_FLAGS_BYTE: usize = 68;

/// Send the packet as it is now to port `p`: a tunnel port encapsulates.
#[inline(always)]
fn output<S: OutputSink>(
    p: u32,
    pkt: &mut Packet<'_>,
    key: &FlowKey,
    tun: &TunSet,
    ctx: &Ctx<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    if let Some(t) = ctx.tunnels {
        if let Some(tp) = t.port(p) {
            encap_output(t, tp, ctx.encap, pkt, key, tun, sink, st);
            return;
        }
    }
    sink.output(p, pkt.data());
}

/// Map a decapsulated packet's outer fields to its tunnel port: rewrite `in_port`, or
/// false when no tunnel port takes it.
#[inline(always)]
fn map_tunnel(t: &Tunnels, key: &mut FlowKey) -> bool {
    match t.lookup_key(key) {
        Some(port) => {
            key.bytes_mut()[0..4].copy_from_slice(&port.to_be_bytes());
            true
        }
        None => false,
    }
}

/// A tunnel address as the key holds it (IPv4 in the first 4 bytes).
#[inline(always)]
fn tun_addr(b: &[u8], v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

/// A hash of the inner flow (addresses, protocol, ports): the outer UDP source port and
/// IPv6 flow label, so the underlay's RSS and ECMP spread tunnelled flows.
#[inline(always)]
pub(crate) fn inner_flow_hash(k: &FlowKey) -> u32 {
    let w = &k.words;
    let a = w[3] ^ w[4].rotate_left(23) ^ w[5].rotate_left(41);
    let b = w[6] ^ w[7].rotate_left(17) ^ w[1].rotate_left(7) ^ w[2];
    let p = (a ^ 0x243f_6a88_85a3_08d3) as u128 * (b ^ 0x9e37_79b9_7f4a_7c15) as u128;
    let x = (p as u64) ^ ((p >> 64) as u64);
    (x ^ (x >> 32)) as u32
}

/// Output to tunnel port `tp`: the remote and VNI (fixed, or from the packet), the hop from
/// the underlay (read now, so nothing cached depends on it), the outer headers pushed into
/// the headroom, out on the hop's port, and the inner frame restored for later actions.
/// Kept small for the common case, the hop cache's hit; the rest is [`encap_miss`].
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn encap_output<S: OutputSink>(
    t: &Tunnels,
    tp: &TunnelPort,
    encap: &EncapState,
    pkt: &mut Packet<'_>,
    key: &FlowKey,
    tun: &TunSet,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let b = key.bytes();
    let received = b[TUN_FLAGS_BYTE] & TUN_PRESENT != 0;
    let vni = match tp.key {
        TunnelKey::Fixed(v) => v,
        TunnelKey::Flow => tun
            .id
            .unwrap_or_else(|| u32::from_be_bytes([b[64], b[65], b[66], b[67]])),
    };
    let remote = match tp.remote {
        TunnelRemote::Fixed(r) => r,
        TunnelRemote::Flow => match tun.dst {
            Some(r) => r,
            None if received => tun_addr(&b[88..104], b[TUN_FLAGS_BYTE] & TUN_IPV6 != 0),
            None => {
                st.drop(DatapathDrop::TunnelNoRoute);
                return;
            }
        },
    };
    // The generation is read before the hop: a change in between is caught next time.
    let gen = t.underlay.generation();
    let flow_hash = inner_flow_hash(key);
    {
        let c = encap.hop.borrow();
        if let Some(h) = &*c {
            if h.gen == gen && h.port == tp.number && h.remote == remote {
                send_encapsulated(&h.headers, h.out, vni, flow_hash, pkt, sink, st);
                return;
            }
        }
    }
    encap_miss(t, tp, encap, gen, remote, vni, flow_hash, pkt, sink, st);
}

/// [`encap_output`] without a usable cached hop: ask the underlay, build the headers,
/// send, and keep them for the packets that follow.
#[inline(never)]
#[cold]
#[allow(clippy::too_many_arguments)]
fn encap_miss<S: OutputSink>(
    t: &Tunnels,
    tp: &TunnelPort,
    encap: &EncapState,
    gen: u64,
    remote: IpAddr,
    vni: u32,
    flow_hash: u32,
    pkt: &mut Packet<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let Some(hop) = t.underlay.hop(remote) else {
        t.underlay.resolve(remote);
        match t.underlay.miss(remote) {
            HopMiss::NoRoute => st.drop(DatapathDrop::TunnelNoRoute),
            HopMiss::NeighUnresolved => {
                // The ARP-queue rule: the first few wait for the neighbour.
                let mut q = encap.held.borrow_mut();
                if q.hold(tp.number, remote, vni, flow_hash, pkt.data(), rdtsc()) {
                    st.tunnel_held += 1;
                } else {
                    st.drop(DatapathDrop::TunnelNeighUnresolved);
                }
            }
        }
        return;
    };
    let Some(headers) = outer_headers(tp, &hop, remote, vni, flow_hash) else {
        // The local address and the remote are not of one family.
        st.drop(DatapathDrop::TunnelNoRoute);
        return;
    };
    send_encapsulated(&headers, hop.port, vni, flow_hash, pkt, sink, st);
    *encap.hop.borrow_mut() = Some(HopEntry {
        gen,
        port: tp.number,
        remote,
        out: hop.port,
        headers,
    });
}

/// The outer headers for `remote` through `hop` (None: the local address and the remote
/// are not of one family).
fn outer_headers(
    tp: &TunnelPort,
    hop: &UnderlayHop,
    remote: IpAddr,
    vni: u32,
    flow_hash: u32,
) -> Option<VxlanTemplate> {
    VxlanTemplate::new(&VxlanEncap {
        src_mac: hop.src_mac,
        dst_mac: hop.dst_mac,
        src: tp.local.unwrap_or(hop.src_ip),
        dst: remote,
        vni,
        dst_port: tp.dst_port,
        flow_hash,
    })
    .ok()
}

/// Push `headers` in front of the packet, send it out of `out`, and give back the inner
/// frame for later actions.
#[inline(always)]
fn send_encapsulated<S: OutputSink>(
    headers: &VxlanTemplate,
    out: u32,
    vni: u32,
    flow_hash: u32,
    pkt: &mut Packet<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    match headers.encap(pkt, vni, flow_hash) {
        Ok(n) => {
            sink.output(out, pkt.data());
            pkt.pull_front(n);
            st.encapsulated += 1;
        }
        Err(EncapError::NoRoom) => st.drop(DatapathDrop::NoRoom),
        Err(EncapError::FamilyMismatch) => st.drop(DatapathDrop::TunnelNoRoute),
    }
}

/// Head- and tailroom around a packet-out's frame (VLAN pushes).
const PACKET_OUT_ROOM: usize = 128;

/// While EMC lookups are skipped, one batch in this many still looks up.
const EMC_SAMPLE_EVERY: u64 = 16;

/// One batch in this many (at random) is timed stage by stage ([`crate::StageCycles`]).
pub const STAGE_SAMPLE: u32 = 8;

/// How many packets ahead the parse stage prefetches headers.
const PARSE_PREFETCH: usize = 4;

/// Start loading a frame's first cache line (its headers).
#[inline(always)]
fn prefetch(data: &[u8]) {
    crate::prefetch_line(data.as_ptr());
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(rdtsc());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_the_bounds_are_refused_by_name() {
        assert!(DatapathConfig::default().check().is_ok());
        let with = |f: fn(&mut DatapathConfig)| {
            let mut c = DatapathConfig::default();
            f(&mut c);
            c.check().unwrap_err()
        };
        assert!(with(|c| c.megaflow_max = 0).starts_with("megaflow_max: 0 "));
        assert!(with(|c| c.megaflow_max = MEGAFLOW_MAX_LIMIT + 1).starts_with("megaflow_max: "));
        assert!(with(|c| c.smc_entries = SMC_ENTRIES_LIMIT + 1).starts_with("smc_entries: "));
        assert!(with(|c| c.emc_entries = EMC_ENTRIES_LIMIT + 1).starts_with("emc_entries: "));
        assert!(with(|c| c.max_masks = 0).starts_with("max_masks: 0 "));
        let mut at_bounds = DatapathConfig {
            megaflow_max: MEGAFLOW_MAX_LIMIT,
            smc_entries: SMC_ENTRIES_LIMIT,
            emc_entries: EMC_ENTRIES_LIMIT,
            max_masks: u16::MAX as usize,
            ..DatapathConfig::default()
        };
        assert!(at_bounds.check().is_ok());
        // 1 GB of megaflows, 512 MB of SMC, 192 MB of EMC.
        assert_eq!(at_bounds.memory_at_start(), (1024 + 512 + 192) << 20);
        at_bounds.smc_entries = 0;
        assert_eq!(at_bounds.memory_at_start(), (1024 + 192) << 20);
    }

    #[test]
    #[should_panic(expected = "Datapath::new: megaflow_max: 0 is not in")]
    fn making_a_datapath_past_the_bounds_panics_naming_the_field() {
        let store = Arc::new(RuleStore::new(flowpath_pipeline::Backend::TupleSpace));
        let _ = Datapath::new(
            store,
            DatapathConfig {
                megaflow_max: 0,
                ..DatapathConfig::default()
            },
        );
    }
}
