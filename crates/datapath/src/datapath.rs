//! `Datapath`: one worker's fast path. Batches of up to [`BATCH`] packets go through
//! parse → exact-match cache → megaflow cache → slow path (upcall), stage by stage, then
//! execute; each stage is one named function over the whole batch.
//!
//! Nothing on the hit path allocates, locks or makes a system call: the only shared state
//! read per batch is the rule store's version (one atomic load). When it has moved, the
//! worker revalidates (or flushes) its caches before the batch, so every packet of that
//! batch is handled as the new rules say.

use crate::controller::ControllerQueue;
use crate::emc::ExactMatchCache;
use crate::megaflow::MegaflowCache;
use crate::stats::{DatapathDrop, DatapathStats};
use crate::tier::{MegaflowEvent, MegaflowId, MegaflowView};
use flowpath_base::clock::rdtsc;
use flowpath_base::BATCH;
use flowpath_packet::rewrite::{self, RewriteDrop};
use flowpath_packet::{parse_into, Action, FlowKey, Packet, PacketMeta, ParseOptions};
use flowpath_pipeline::{Ending, Pipeline, RuleStore};
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
    controller: Arc<ControllerQueue>,
    scratch: Box<Scratch>,
    emc_seed: u64,
    batches_since_rerank: u32,
    batches_since_push: u32,
}

impl Datapath {
    pub fn new(store: Arc<RuleStore>, cfg: DatapathConfig) -> Datapath {
        let seed = random_seed();
        let pipeline = store.snapshot();
        Datapath {
            emc: ExactMatchCache::new(cfg.emc_entries, cfg.emc_insert_inv_prob),
            megaflows: MegaflowCache::new(cfg.megaflow_max, seed.rotate_left(17)),
            controller: Arc::new(ControllerQueue::new(cfg.controller_queue)),
            scratch: Box::new(Scratch {
                keys: [FlowKey::ZERO; BATCH],
                metas: [PacketMeta::default(); BATCH],
                hashes: [0; BATCH],
                slots: [0; BATCH],
            }),
            emc_seed: seed,
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
    }

    pub fn store(&self) -> &Arc<RuleStore> {
        &self.store
    }

    /// The queue `Controller` actions fill; the application drains it from any thread
    /// (and recycles the buffers).
    pub fn controller_queue(&self) -> Arc<ControllerQueue> {
        self.controller.clone()
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
        if pkts.is_empty() {
            return;
        }
        self.megaflows.begin_batch();
        self.stats.batches += 1;
        self.stats.packets += pkts.len() as u64;

        // A stage with nothing to do is not timed: a TSC read costs tens of cycles here,
        // as much as a whole empty stage.
        let t0 = rdtsc();
        let valid = self.stage_parse(in_port, pkts);
        let t1 = rdtsc();
        let (pending, t2) = if self.cfg.emc && valid != 0 {
            (self.stage_emc(valid), rdtsc())
        } else {
            (valid, t1)
        };
        let (pending, t3) = if pending != 0 {
            (self.stage_megaflow(pkts.len(), pending), rdtsc())
        } else {
            (0, t2)
        };
        let t4 = if pending != 0 {
            self.stage_upcall(pending);
            rdtsc()
        } else {
            t3
        };
        self.stage_execute(in_port, pkts, valid, sink);
        let t5 = rdtsc();
        let c = &mut self.stats.cycles;
        c.parse += t1 - t0;
        c.emc += t2 - t1;
        c.megaflow += t3 - t2;
        c.upcall += t4 - t3;
        c.actions += t5 - t4;
        self.housekeeping();
    }

    /// Stage 1: parse every packet once into its key; returns the bits of those that parsed.
    #[inline(always)]
    fn stage_parse(&mut self, in_port: u32, pkts: &[Packet<'_>]) -> u32 {
        let sc = &mut *self.scratch;
        let st = &mut self.stats;
        let mut valid = 0u32;
        for (i, pkt) in pkts.iter().enumerate() {
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
        valid
    }

    /// Stage 2: the exact-match cache; returns the bits still unresolved.
    #[inline(always)]
    fn stage_emc(&mut self, valid: u32) -> u32 {
        if !self.cfg.emc {
            return valid;
        }
        let sc = &mut *self.scratch;
        let pending = self.emc.lookup_batch(
            &sc.keys,
            valid,
            self.emc_seed,
            &mut sc.hashes,
            &mut sc.slots,
            &mut self.megaflows,
        );
        self.stats.emc_hits += (valid & !pending).count_ones() as u64;
        pending
    }

    /// Stage 3: the megaflow cache, the whole batch per subtable; returns what is left.
    #[inline(always)]
    fn stage_megaflow(&mut self, n: usize, pending: u32) -> u32 {
        if pending == 0 {
            return 0;
        }
        let sc = &mut *self.scratch;
        let left = self
            .megaflows
            .lookup_batch(&sc.keys[..n], pending, &mut sc.slots);
        let found = pending & !left;
        self.stats.megaflow_hits += found.count_ones() as u64;
        if self.cfg.emc {
            self.emc
                .insert_batch(&sc.keys, &sc.hashes, &sc.slots, found, &self.megaflows);
        }
        left
    }

    /// Stage 4: the slow path for what is left: classify through the pipeline and install
    /// a megaflow (unless an earlier miss of this batch already installed a covering one).
    #[inline(always)]
    fn stage_upcall(&mut self, pending: u32) {
        if pending == 0 {
            return;
        }
        let sc = &mut *self.scratch;
        let mut m = pending;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            sc.slots[i] = match self.megaflows.lookup(&sc.keys[i]) {
                Some(s) => {
                    self.stats.upcalls_avoided += 1;
                    s
                }
                None => {
                    let tr = self.pipeline.translate(&sc.keys[i]);
                    self.stats.upcalls += 1;
                    self.megaflows.install(&sc.keys[i], tr, &self.pipeline)
                }
            };
        }
        if self.cfg.emc {
            self.emc
                .insert_batch(&sc.keys, &sc.hashes, &sc.slots, pending, &self.megaflows);
        }
    }

    /// Stage 5: count every parsed packet against its megaflow and run its actions, in
    /// packet order.
    #[inline(always)]
    fn stage_execute<S: OutputSink>(
        &mut self,
        in_port: u32,
        pkts: &mut [Packet<'_>],
        valid: u32,
        sink: &mut S,
    ) {
        let sc = &mut *self.scratch;
        let mut m = valid;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let pkt = &mut pkts[i];
            let meta = &mut sc.metas[i];
            // VXLAN: from here on the packet is its inner frame.
            meta.strip_outer(pkt);
            let e = self.megaflows.hit(sc.slots[i], pkt.len() as u64);
            let ctx = Ctx {
                in_port,
                controller: &self.controller,
            };
            execute(
                e.actions(),
                e.ending(),
                pkt,
                meta,
                &ctx,
                sink,
                &mut self.stats,
            );
        }
    }

    /// After a batch: trim an overfull cache, re-rank subtables and push rule counters
    /// every so many batches.
    #[inline(always)]
    fn housekeeping(&mut self) {
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
}

/// What one packet's actions need besides the packet.
struct Ctx<'a> {
    in_port: u32,
    controller: &'a ControllerQueue,
}

/// Run one packet's actions.
#[inline(always)]
fn execute<S: OutputSink>(
    actions: &[Action],
    ending: Ending,
    pkt: &mut Packet<'_>,
    meta: &mut PacketMeta,
    ctx: &Ctx<'_>,
    sink: &mut S,
    st: &mut DatapathStats,
) {
    let mut sent = false;
    for a in actions {
        match *a {
            Action::Output(p) => {
                if p != ctx.in_port {
                    sink.output(p, pkt.data());
                    sent = true;
                }
            }
            Action::InPort => {
                sink.output(ctx.in_port, pkt.data());
                sent = true;
            }
            Action::Controller { max_len } => {
                let n = pkt.len().min(max_len as usize);
                if ctx.controller.push(ctx.in_port, &pkt.data()[..n]) {
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

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(rdtsc());
    h.finish()
}
