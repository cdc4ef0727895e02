//! The five stages a batch goes through, each one function over the whole batch: parse
//! (taking the hashes and prefetching the first cache's entries), the exact-match cache,
//! the megaflow cache (behind the signature-match cache while it pays), the slow path
//! (upcall) for what is left, and execute.

use super::l2_sync::L2Flow;
use super::{Datapath, UNCACHED};
use crate::l2::resolve_normal;
use crate::megaflow::normalize_pass_mask;
use crate::sink::OutputSink;
use crate::stats::DatapathDrop;
use crate::tunnel::{map_tunnel, TUN_FLAGS_BYTE};
use flowpath_base::clock::rdtsc;
use flowpath_base::BATCH;
use flowpath_packet::key::TUN_PRESENT;
use flowpath_packet::{parse_into, parse_into_hashed, Action, Packet};
use smallvec::SmallVec;

impl Datapath {
    /// One batch of at most [`BATCH`] packets through the five stages.
    #[inline(always)]
    pub(super) fn process_batch<S: OutputSink>(
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
        if self.recirc.moved != 0 || !self.recirc.next.is_empty() {
            self.recirculate(in_port, pkts, sink);
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
        if self.recirc.used {
            self.ct_housekeeping(t0);
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
    pub(super) fn stage_emc(&mut self, valid: u32) -> u32 {
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
    pub(super) fn stage_megaflow(&mut self, n: usize, pending: u32) -> u32 {
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
                if let Some(gen) = self.megaflows.verify_pass(slot, &sc.keys[i], sc.recirc) {
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
                .lookup_batch_pass(&sc.keys[..n], pending, &mut sc.slots, sc.recirc)
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
    pub(super) fn stage_upcall(&mut self, in_port: u32, pending: u32, now: u64) -> (u32, u32, u32) {
        if pending == 0 {
            return (0, 0, 0);
        }
        self.scratch.uncached.clear();
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
                if let Some(s) = self.megaflows.lookup_in(&self.scratch.keys[i], &fresh) {
                    self.stats.upcalls_avoided += 1;
                    self.scratch.slots[i] = s;
                    cached |= 1 << i;
                    continue;
                }
            }
            if !self.guard.may_upcall(in_port, binds) {
                self.stats.drop(DatapathDrop::MissBudget);
                dropped |= 1 << i;
                continue;
            }
            if self.upcall(in_port, i, t, &mut fresh) {
                installed |= 1 << i;
                cached |= 1 << i;
            } else {
                uncached |= 1 << i;
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
            let sc = &*self.scratch;
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

    /// Stage 4 for packet `i`, within the budget: classify it through the pipeline (NORMAL
    /// resolved, its source learned) and install its megaflow, adding the subtable to
    /// `fresh`; a megaflow with a new mask past the port's mask rate (at TSC `t`) or the
    /// mask limit is kept as the packet's uncached decision instead. True when installed.
    #[inline(always)]
    fn upcall(&mut self, in_port: u32, i: usize, t: u64, fresh: &mut SmallVec<[u16; 8]>) -> bool {
        let sc = &mut *self.scratch;
        let mut tr = self.pipeline.translate(&sc.keys[i]);
        // The pass decides `recirc_id` in the mask (see `megaflow::normalize_pass_mask`).
        normalize_pass_mask(&sc.keys[i], &mut tr.mask);
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
            sc.uncached.push((i as u8, tr));
            return false;
        }
        sc.slots[i] = self
            .megaflows
            .install_in(&sc.keys[i], tr, &self.pipeline, subtable);
        let si = self.megaflows.subtable_of(sc.slots[i]);
        if !fresh.contains(&si) {
            fresh.push(si);
        }
        if !deps.is_empty() {
            self.l2_flows.push(L2Flow {
                id: self.megaflows.id(sc.slots[i]),
                deps,
                packets: 0,
            });
        }
        true
    }

    /// After stage 5 of a batch that installed megaflows (`installed`: the packets that
    /// did): the batch's own packets on them do not count as a use for CLOCK, so a
    /// megaflow is marked only by a hit in a later batch. Were it marked by its first
    /// packet, under a stream of new flows the hand would find the whole full cache marked
    /// once a lap and clear it all in one eviction: 65,536 entries, 20 MB, walked in one
    /// batch (3–4 M cycles here, a stall of ~1.5 ms every 65,536 misses, ~4 % of the
    /// misses' cycles), and a flow that came back would go as soon as one that never did.
    /// Unmarked, a new megaflow still has a full lap of the hand to be hit before it can
    /// go.
    #[cold]
    #[inline(never)]
    pub(super) fn unmark_installed(&mut self, installed: u32) {
        let mut m = installed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.megaflows.unmark(self.scratch.slots[i]);
        }
    }
}

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
