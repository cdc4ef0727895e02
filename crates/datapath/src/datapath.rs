//! `Datapath`: one worker's fast path. Batches of up to [`BATCH`] packets go through
//! parse → exact-match cache → megaflow cache → slow path, stage by stage, then actions.
//!
//! Nothing on the hit path allocates, locks or makes a system call: the only shared state
//! read per batch is the rule store's version (one atomic load). When it has moved, the
//! worker revalidates (or flushes) its caches before the batch, so every packet of that
//! batch is handled as the new rules say.

use crate::emc::ExactMatchCache;
use crate::megaflow::{MegaflowCache, MegaflowEntry};
use crate::tsc::rdtsc;
use crossbeam_queue::ArrayQueue;
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{parse_into, Action, DropReason, FlowKey, Packet, PacketMeta, ParseOptions};
use flowpath_pipeline::{Ending, Pipeline, RuleStore};
use std::sync::Arc;

/// Largest batch `process` takes.
pub const BATCH: usize = 32;

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
    pub emc_entries: usize,
    /// Insert one flow in N into the exact-match cache (1 = every flow; OVS defaults to 100).
    pub emc_insert_inv_prob: u32,
    /// Most megaflows held before CLOCK eviction.
    pub megaflow_max: usize,
    /// Re-rank megaflow subtables by hits every this many batches.
    pub rerank_every: u32,
    /// Credit megaflow counters to rule counters every this many batches.
    pub stats_push_every: u32,
    pub on_rule_change: OnRuleChange,
    pub parse: ParseOptions,
    /// Packets held for the controller before further ones are dropped (and counted).
    pub controller_queue: usize,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig {
            emc: true,
            emc_entries: 8192,
            emc_insert_inv_prob: 100,
            megaflow_max: 65536,
            rerank_every: 1024,
            stats_push_every: 4096,
            on_rule_change: OnRuleChange::Revalidate,
            parse: ParseOptions::default(),
            controller_queue: 1024,
        }
    }
}

/// A packet handed to the controller application (`Controller` action).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerPacket {
    pub in_port: u32,
    pub data: Vec<u8>,
}

/// TSC cycles spent per stage, summed over batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageCycles {
    pub parse: u64,
    pub emc: u64,
    pub megaflow: u64,
    pub upcall: u64,
    pub actions: u64,
}

impl StageCycles {
    pub fn total(&self) -> u64 {
        self.parse + self.emc + self.megaflow + self.upcall + self.actions
    }
}

/// Per-worker counters (plain integers: only this worker writes them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatapathStats {
    pub batches: u64,
    pub packets: u64,
    pub bytes: u64,
    pub emc_hits: u64,
    pub megaflow_hits: u64,
    /// Packets classified by the slow path (each installs a megaflow).
    pub upcalls: u64,
    /// Misses answered by a megaflow that an earlier packet of the same batch installed.
    pub upcalls_avoided: u64,
    pub parse_drops: [u64; DropReason::ALL.len()],
    /// No rule matched in some table.
    pub table_miss_drops: u64,
    /// The rules chose no output (explicit drop).
    pub rule_drops: u64,
    pub ttl_expired: u64,
    pub no_room: u64,
    pub too_many_vlans: u64,
    pub controller_sent: u64,
    pub controller_queue_full: u64,
    pub rule_syncs: u64,
    pub cycles: StageCycles,
}

impl DatapathStats {
    pub fn parse_drops_total(&self) -> u64 {
        self.parse_drops.iter().sum()
    }

    /// Every way a packet can be dropped, by name, with its count (zeros included).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.parse_drops[*r as usize]))
            .collect();
        v.extend([
            ("table_miss", self.table_miss_drops),
            ("rule_drop", self.rule_drops),
            ("ttl_expired", self.ttl_expired),
            ("no_room", self.no_room),
            ("too_many_vlans_pushed", self.too_many_vlans),
            ("controller_queue_full", self.controller_queue_full),
        ]);
        v
    }
}

/// Per-batch scratch, allocated once.
struct Scratch {
    keys: [FlowKey; BATCH],
    metas: [PacketMeta; BATCH],
    hashes: [u32; BATCH],
    slots: [u32; BATCH],
}

/// One worker's datapath.
pub struct Datapath {
    cfg: DatapathConfig,
    store: Arc<RuleStore>,
    pipeline: Arc<Pipeline>,
    emc: ExactMatchCache,
    megaflows: MegaflowCache,
    stats: DatapathStats,
    controller: Arc<ArrayQueue<ControllerPacket>>,
    scratch: Box<Scratch>,
    emc_seed: u64,
    batches_since_rerank: u32,
    batches_since_push: u32,
    /// Megaflows the slow path installed since the last [`Datapath::clear_installs`], as
    /// (slot, generation), when [`Datapath::log_installs`] is on (a further cache tier
    /// below this one, such as the XDP tier, is offered them).
    install_log: Option<Vec<(u32, u32)>>,
}

impl Datapath {
    pub fn new(store: Arc<RuleStore>, cfg: DatapathConfig) -> Datapath {
        let seed = random_seed();
        let pipeline = store.snapshot();
        Datapath {
            emc: ExactMatchCache::new(cfg.emc_entries, cfg.emc_insert_inv_prob),
            megaflows: MegaflowCache::new(cfg.megaflow_max, seed.rotate_left(17)),
            controller: Arc::new(ArrayQueue::new(cfg.controller_queue.max(1))),
            scratch: Box::new(Scratch {
                keys: [FlowKey::ZERO; BATCH],
                metas: [PacketMeta::default(); BATCH],
                hashes: [0; BATCH],
                slots: [0; BATCH],
            }),
            emc_seed: seed,
            batches_since_rerank: 0,
            batches_since_push: 0,
            install_log: None,
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
    }

    pub fn store(&self) -> &Arc<RuleStore> {
        &self.store
    }

    /// The queue `Controller` actions fill; the application drains it from any thread.
    pub fn controller_queue(&self) -> Arc<ArrayQueue<ControllerPacket>> {
        self.controller.clone()
    }

    pub fn megaflows(&self) -> &MegaflowCache {
        &self.megaflows
    }

    pub fn emc(&self) -> &ExactMatchCache {
        &self.emc
    }

    /// Live megaflows as (mask, entry).
    pub fn megaflow_entries(&self) -> impl Iterator<Item = (&FlowKey, &MegaflowEntry)> {
        self.megaflows
            .iter()
            .map(|(s, e)| (self.megaflows.mask_of(s), e))
    }

    /// Record the megaflows the slow path installs (see [`Datapath::installs`]).
    pub fn log_installs(&mut self, on: bool) {
        self.install_log = on.then(|| Vec::with_capacity(4 * BATCH));
    }

    /// Megaflows installed since the last [`Datapath::clear_installs`], as (slot,
    /// generation): the slot may have been reused since, so check the generation.
    pub fn installs(&self) -> &[(u32, u32)] {
        self.install_log.as_deref().unwrap_or(&[])
    }

    pub fn clear_installs(&mut self) {
        if let Some(l) = &mut self.install_log {
            l.clear();
        }
    }

    /// The version of the rules this worker classifies with (its snapshot's).
    pub fn rule_version(&self) -> u64 {
        self.pipeline.version()
    }

    /// The megaflow cache, mutable: a tier below it credits its own hits to entries.
    pub fn megaflows_mut(&mut self) -> &mut MegaflowCache {
        &mut self.megaflows
    }

    /// Catch up with the rule store now (also happens at the start of every batch).
    pub fn sync_rules(&mut self) {
        if self.store.version() == self.pipeline.version() {
            return;
        }
        let new = self.store.snapshot();
        match self.cfg.on_rule_change {
            OnRuleChange::Flush => self.megaflows.flush(&self.pipeline),
            OnRuleChange::Revalidate => {
                self.megaflows.revalidate(&self.pipeline, &new);
            }
        }
        // Exact-match entries of removed megaflows die by generation check.
        self.pipeline = new;
        self.stats.rule_syncs += 1;
    }

    /// Credit megaflow counters to rule counters now (also done periodically).
    pub fn push_rule_stats(&mut self) {
        self.megaflows.push_stats(&self.pipeline);
    }

    /// Drop every cached flow (counters are credited to rules first).
    pub fn flush_caches(&mut self) {
        self.megaflows.flush(&self.pipeline);
        self.emc.clear();
    }

    /// Process one batch received on `in_port`: classify, count, run actions, and send
    /// outputs to `sink`. At most [`BATCH`] packets are taken; extra ones are ignored.
    pub fn process<S: OutputSink>(&mut self, in_port: u32, pkts: &mut [Packet<'_>], sink: &mut S) {
        if self.store.version() != self.pipeline.version() {
            self.sync_rules();
        }
        let n = pkts.len().min(BATCH);
        if n == 0 {
            return;
        }
        self.megaflows.begin_batch();
        let sc = &mut *self.scratch;
        let st = &mut self.stats;
        st.batches += 1;
        st.packets += n as u64;

        // Stage 1: parse once.
        let t0 = rdtsc();
        let mut valid = 0u32;
        for (i, pkt) in pkts.iter().enumerate().take(n) {
            st.bytes += pkt.len() as u64;
            match parse_into(
                pkt.data(),
                in_port,
                &self.cfg.parse,
                &mut sc.keys[i],
                &mut sc.metas[i],
            ) {
                Ok(()) => valid |= 1 << i,
                Err(r) => st.parse_drops[r as usize] += 1,
            }
        }

        // Stage 2: exact-match cache.
        let t1 = rdtsc();
        let mut pending = valid;
        if self.cfg.emc {
            let mut m = valid;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let h = sc.keys[i].hash(self.emc_seed);
                sc.hashes[i] = h;
                self.emc.prefetch(h);
            }
            let mut m = valid;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let h = sc.hashes[i];
                if let Some((slot, gen)) = self.emc.lookup(&sc.keys[i], h) {
                    if self.megaflows.claim(slot, gen) {
                        sc.slots[i] = slot;
                        pending &= !(1 << i);
                    }
                }
            }
            st.emc_hits += (valid & !pending).count_ones() as u64;
        }

        // Stage 3: megaflow cache, the whole batch per subtable.
        let t2 = rdtsc();
        let before = pending;
        if pending != 0 {
            pending = self
                .megaflows
                .lookup_batch(&sc.keys[..n], pending, &mut sc.slots);
            let found = before & !pending;
            st.megaflow_hits += found.count_ones() as u64;
            if self.cfg.emc {
                self.emc_insert(found);
            }
        }

        // Stage 4: the slow path for what is left.
        let t3 = rdtsc();
        if pending != 0 {
            let sc = &mut *self.scratch;
            let mut m = pending;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                // An earlier miss in this batch may have installed a covering megaflow.
                let slot = match self.megaflows.lookup(&sc.keys[i]) {
                    Some(s) => {
                        self.stats.upcalls_avoided += 1;
                        s
                    }
                    None => {
                        let tr = self.pipeline.translate(&sc.keys[i]);
                        self.stats.upcalls += 1;
                        let s = self.megaflows.install(&sc.keys[i], tr, &self.pipeline);
                        if let Some(l) = &mut self.install_log {
                            l.push((s, self.megaflows.entry(s).gen));
                        }
                        s
                    }
                };
                sc.slots[i] = slot;
            }
            if self.cfg.emc {
                self.emc_insert(pending);
            }
        }

        // Stage 5: actions, in packet order.
        let t4 = rdtsc();
        let sc = &mut *self.scratch;
        let st = &mut self.stats;
        let mut m = valid;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let pkt = &mut pkts[i];
            let meta = &mut sc.metas[i];
            // VXLAN: from here on the packet is its inner frame.
            meta.strip_outer(pkt);
            let e = self.megaflows.entry_mut(sc.slots[i]);
            e.packets += 1;
            e.bytes += pkt.len() as u64;
            e.referenced = true;
            let e = self.megaflows.entry(sc.slots[i]);
            execute(
                &e.actions,
                e.ending,
                pkt,
                meta,
                in_port,
                sink,
                st,
                &self.controller,
            );
        }
        let t5 = rdtsc();
        let c = &mut st.cycles;
        c.parse += t1 - t0;
        c.emc += t2 - t1;
        c.megaflow += t3 - t2;
        c.upcall += t4 - t3;
        c.actions += t5 - t4;

        if self.megaflows.len() > self.cfg.megaflow_max {
            self.megaflows.trim(&self.pipeline);
        }
        self.batches_since_rerank += 1;
        if self.batches_since_rerank >= self.cfg.rerank_every {
            self.batches_since_rerank = 0;
            self.megaflows.rerank();
        }
        self.batches_since_push += 1;
        if self.batches_since_push >= self.cfg.stats_push_every {
            self.batches_since_push = 0;
            self.megaflows.push_stats(&self.pipeline);
        }
    }

    fn emc_insert(&mut self, bits: u32) {
        let sc = &*self.scratch;
        let mut m = bits;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let slot = sc.slots[i];
            let gen = self.megaflows.entry(slot).gen;
            self.emc.maybe_insert(&sc.keys[i], sc.hashes[i], slot, gen);
        }
    }
}

/// Run one packet's actions.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn execute<S: OutputSink>(
    actions: &[Action],
    ending: Ending,
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
    in_port: u32,
    sink: &mut S,
    st: &mut DatapathStats,
    controller: &ArrayQueue<ControllerPacket>,
) {
    let mut sent = false;
    for a in actions {
        match *a {
            Action::Output(p) => {
                if p != in_port {
                    sink.output(p, pkt.data());
                    sent = true;
                }
            }
            Action::InPort => {
                sink.output(in_port, pkt.data());
                sent = true;
            }
            Action::Controller { max_len } => {
                let n = pkt.len().min(max_len as usize);
                let cp = ControllerPacket {
                    in_port,
                    data: pkt.data()[..n].to_vec(),
                };
                if controller.push(cp).is_ok() {
                    st.controller_sent += 1;
                } else {
                    st.controller_queue_full += 1;
                }
                sent = true;
            }
            _ => {
                if let Err(e) = rewrite::apply(a, pkt, meta) {
                    match e {
                        RewriteDrop::TtlExpired => st.ttl_expired += 1,
                        RewriteDrop::NoRoom => st.no_room += 1,
                        RewriteDrop::TooManyVlans => st.too_many_vlans += 1,
                    }
                    return;
                }
            }
        }
    }
    if !sent {
        match ending {
            Ending::TableMiss(_) => st.table_miss_drops += 1,
            _ => st.rule_drops += 1,
        }
    }
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(rdtsc());
    h.finish()
}
