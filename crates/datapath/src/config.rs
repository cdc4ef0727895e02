//! `DatapathConfig`: what a datapath is made with (the caches' sizes, the miss guard's
//! limits, the tier reviews, what a rule change does, tunnel ports), the bounds the sizes
//! are checked against, and the pacing of the periodic counter push.

use crate::guard::MissLimits;
use crate::l2::MacLearningConfig;
use crate::tunnel::Tunnels;
use flowpath_packet::ParseOptions;
use std::sync::Arc;

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
    /// Their arena, 320 bytes each, is allocated and faulted in when the datapath is made.
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
    /// shares one among its workers: [`Datapath::set_mac_table`](crate::Datapath::set_mac_table)).
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

/// Most exact-match cache entries in each of its two tables (256 MB in all).
pub const EMC_ENTRIES_LIMIT: usize = 1 << 20;
/// Most signature-match cache entries (512 MB).
pub const SMC_ENTRIES_LIMIT: usize = 1 << 26;
/// Most megaflows: their arena, allocated whole when the datapath is made, then takes 1.25 GB.
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
                "megaflow_max: {} is not in 1..={MEGAFLOW_MAX_LIMIT} (320 bytes a megaflow, \
                 allocated at start: 1.25 GB per worker at most)",
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
                "emc_entries: {} is more than {EMC_ENTRIES_LIMIT} (256 MB per worker)",
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
/// pushes, at most 8,192 entries per 10 ms). A push of the whole full cache, as under a
/// new-flow flood, takes 5–15 % of the core and stalls a batch for ~0.5 ms; a slice of
/// 8,192 still stalls its batch for 0.6–2.2 M cycles (~0.3–0.9 ms). Slices an eighth the
/// size, eight times as often, cost the same in all and stall a batch an eighth as long.
pub const STATS_PUSH_SLICE: usize = 1024;

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
        // 1.25 GB of megaflows, 512 MB of SMC, 256 MB of EMC.
        assert_eq!(at_bounds.memory_at_start(), (1280 + 512 + 256) << 20);
        at_bounds.smc_entries = 0;
        assert_eq!(at_bounds.memory_at_start(), (1280 + 256) << 20);
    }
}
