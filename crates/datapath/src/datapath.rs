//! `Datapath`: one worker's fast path. Batches of up to [`BATCH`] packets go through
//! parse → exact-match cache → megaflow cache → slow path (upcall), stage by stage, then
//! execute; each stage is one named function over the whole batch (`datapath/stages.rs`).
//!
//! Nothing on the hit path allocates, locks or makes a system call: the only shared state
//! read per batch is the rule store's version (one atomic load). When it has moved, the
//! worker revalidates (or flushes) its caches before the batch, so every packet of that
//! batch is handled as the new rules say.
//!
//! This file holds the datapath's state, how it is made, and what other code asks of it
//! (accessors, the tier interface, catching up with the rules). Beside it, over the same
//! state: the stages (`stages.rs`, execute in `execute.rs`), recirculated passes and the
//! tracker's expiry (`recirculate.rs`), the tuning between batches (`tuning.rs`), keeping
//! NORMAL's megaflows exact (`l2_sync.rs`), and packet-outs and held packets
//! (`packet_out.rs`).

mod ct_first;
mod execute;
mod l2_sync;
mod packet_out;
mod recirculate;
mod stages;
mod tuning;

use crate::controller::ControllerQueue;
use crate::ct_memo::{CtMemo, MemoSeed};
use crate::emc::ExactMatchCache;
use crate::encap::EncapState;
use crate::guard::{MissGuard, MissLimits, PortMissStats};
use crate::l2::{resolve_normal, MacLearningTable, NormalDep};
use crate::megaflow::{MegaflowCache, MegaflowEvent, MegaflowId, MegaflowView};
use crate::recirc::Recirc;
use crate::smc::SignatureMatchCache;
use crate::stats::DatapathStats;
use flowpath_base::clock::rdtsc;
use flowpath_base::BATCH;
use flowpath_conntrack::{CtConfig, Tracker};
use flowpath_packet::{FlowKey, Packet, PacketMeta};
use flowpath_pipeline::{Pipeline, RuleStore, Translation};
use l2_sync::L2Flow;
use smallvec::SmallVec;
use std::sync::Arc;

// Also reachable here, where code outside the crate names them.
pub use crate::config::{
    DatapathConfig, OnRuleChange, EMC_ENTRIES_LIMIT, MEGAFLOW_MAX_LIMIT, SMC_ENTRIES_LIMIT,
    STATS_PUSH_INTERVAL_MS, STATS_PUSH_SLICE,
};
pub use crate::sink::OutputSink;
pub use stages::STAGE_SAMPLE;

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
    /// Whether the batch in the arrays is a recirculated pass (its keys have `recirc_id`):
    /// the megaflow stage searches that pass's subtables.
    recirc: bool,
    /// Packets `Datapath::ct_first` moved to the next pass (bit i), and where their
    /// second pass is to be remembered.
    memo_seeded: u32,
    memo_seeds: [MemoSeed; BATCH],
}

/// `slots[i]` of a packet whose decision was not cached (see `Scratch::uncached`).
const UNCACHED: u32 = u32::MAX;

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            keys: [FlowKey::ZERO; BATCH],
            metas: [PacketMeta::default(); BATCH],
            hashes: [0; BATCH],
            narrow: 0,
            slots: [0; BATCH],
            smc_prefetched: false,
            uncached: Vec::with_capacity(BATCH),
            recirc: false,
            memo_seeded: 0,
            memo_seeds: [MemoSeed::NONE; BATCH],
        }
    }
}

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
    /// The connection tracker `ct` actions use: the switch's, shared by its workers
    /// ([`Datapath::set_tracker`]), or one of this datapath's own made at the first need.
    tracker: Option<Arc<Tracker>>,
    /// What `ct(table=)` recirculates, pass by pass (see `recirc.rs`).
    recirc: Recirc,
    /// Second passes of `ct(table=)` flows, remembered (see `ct_memo.rs`).
    ct_memo: CtMemo,
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
            scratch: Box::new(Scratch::new()),
            emc_seed: seed,
            stamp_rng: (seed as u32) | 1,
            batches_since_rerank: 0,
            batches_since_push: 0,
            stats: DatapathStats::default(),
            tracker: None,
            recirc: Recirc::new(),
            ct_memo: CtMemo::new(cfg.emc_entries),
            cfg,
            store,
            pipeline,
        }
    }

    /// Use `t` for `ct` actions (a switch gives every worker the same tracker, so a
    /// connection's two directions may arrive on different workers).
    pub fn set_tracker(&mut self, t: Arc<Tracker>) {
        self.tracker = Some(t);
        self.ct_memo.clear();
    }

    /// The tracker `ct` actions use, made (with the default configuration) if none was set.
    pub fn tracker(&mut self) -> &Arc<Tracker> {
        self.tracker
            .get_or_insert_with(|| Arc::new(Tracker::new(CtConfig::default())))
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

    /// Credit megaflow counters to rule counters now (also done periodically).
    pub fn push_rule_stats(&mut self) {
        self.megaflows.push_stats(&self.pipeline);
    }

    /// Credit the next slice of megaflow counters to rule counters (the periodic push).
    pub fn push_rule_stats_slice(&mut self) {
        self.megaflows
            .push_stats_slice(&self.pipeline, &mut self.push_cursor, STATS_PUSH_SLICE);
    }

    /// Drop every cached flow (counters are credited to rules first).
    pub fn flush_caches(&mut self) {
        self.megaflows.flush(&self.pipeline);
        self.l2_flows.clear();
        self.emc.clear();
        self.ct_memo.clear();
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
