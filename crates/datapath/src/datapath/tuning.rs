//! How the datapath tunes itself between batches: the periodic housekeeping (trimming,
//! ranking subtables, pushing counters to the rules) and the reviews of whether the
//! signature-match cache pays, whether EMC lookups pause, and how far a shrunken flow
//! limit may grow back.

use super::Datapath;
use crate::config::{STATS_PUSH_INTERVAL_MS, STATS_PUSH_SLICE};
use flowpath_base::clock::{rdtsc, tsc_hz};

impl Datapath {
    /// After a batch: trim an overfull cache, re-rank subtables and push rule counters
    /// every so many batches.
    #[inline(always)]
    pub(super) fn housekeeping(&mut self) {
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

    /// The revalidation target in TSC cycles, if the flow limit is dynamic.
    pub(super) fn revalidate_target(&self) -> Option<u64> {
        (self.cfg.revalidate_target_ms > 0.0)
            .then(|| (self.cfg.revalidate_target_ms * 1e-3 * tsc_hz()) as u64)
    }
}
