//! `flowpath bench --rule-change`: what one rule change costs a worker whose megaflow cache
//! is full, revalidating against flushing.

use super::case::{setup, BenchConfig, Case};
use super::run_case;
use crate::harness::Harness;
use flowpath_base::clock::rdtsc;
use flowpath_base::median;
use flowpath_datapath::OnRuleChange;
use flowpath_packet::Field;
use flowpath_pipeline::{Change, Match, RuleSpec, RuleStore};
use serde::Serialize;
use std::sync::Arc;

/// What one rule change cost a datapath whose megaflow cache is full.
#[derive(Clone, Debug, Serialize)]
pub struct RuleChangeResult {
    pub megaflows: usize,
    /// TSC cycles for the worker to catch up with the change (median over runs).
    pub revalidate_cycles: f64,
    pub revalidate_kept: u64,
    pub flush_cycles: f64,
    /// One miss through the same pipeline (cycles), for comparison: after a flush, every
    /// flow still active pays this once.
    pub miss_cycles: f64,
    pub runs: usize,
}

/// Fill the megaflow cache through the miss pipeline, add one rule that changes no
/// decision (a /16 destination in table 0, an existing mask), and time how long the worker
/// takes to catch up, once revalidating and once flushing.
pub fn measure_rule_change(cfg: &BenchConfig) -> RuleChangeResult {
    let mut reval = Vec::new();
    let mut flush = Vec::new();
    let mut kept = 0;
    let mut megaflows = 0;
    for _ in 0..cfg.runs {
        for policy in [OnRuleChange::Revalidate, OnRuleChange::Flush] {
            let (rules, source, mut dp_cfg, _, _) = setup(Case::Miss, cfg);
            dp_cfg.on_rule_change = policy;
            let store = Arc::new(RuleStore::new(cfg.backend));
            store.add(rules).expect("bench rules are valid");
            let mut h = Harness::new(store.clone(), dp_cfg, source);
            h.set_new_flow_share(1.0);
            h.pump(cfg.megaflow_max as u64);
            let dp = h.datapath_mut();
            megaflows = dp.megaflows().len();
            store
                .apply(vec![Change::Add(
                    RuleSpec::new(
                        0,
                        100,
                        Match::any().exact(Field::EthType, 0x0800).prefix(
                            Field::Ipv4Dst,
                            0x0ac8_0000,
                            16,
                        ),
                    )
                    .goto(1),
                )])
                .expect("valid rule");
            let before = dp.megaflows().counters;
            let t0 = rdtsc();
            dp.sync_rules();
            let dt = (rdtsc() - t0) as f64;
            match policy {
                OnRuleChange::Revalidate => {
                    reval.push(dt);
                    kept = dp.megaflows().counters.revalidated_kept - before.revalidated_kept;
                }
                OnRuleChange::Flush => flush.push(dt),
            }
        }
    }
    let miss = run_case(
        Case::Miss,
        &BenchConfig {
            runs: 3,
            ..cfg.clone()
        },
        |_, _| {},
    );
    RuleChangeResult {
        megaflows,
        revalidate_cycles: median(&reval).expect("at least one run"),
        revalidate_kept: kept,
        flush_cycles: median(&flush).expect("at least one run"),
        miss_cycles: miss.cycles_per_packet,
        runs: cfg.runs,
    }
}
