//! `flowpath bench --first-flood`: a freshly made datapath meets a new-flow flood from its
//! first packet, timed batch by batch.

use super::case::{setup, BenchConfig, Case};
use crate::harness::Harness;
use flowpath_base::clock::rdtsc;
use flowpath_base::{median, BATCH};
use flowpath_pipeline::RuleStore;
use serde::Serialize;
use std::sync::Arc;

/// What a freshly made datapath's first new-flow flood cost, batch by batch.
#[derive(Clone, Debug, Serialize)]
pub struct FirstFloodResult {
    /// New flows in the flood.
    pub packets: u64,
    /// TSC cycles per packet over the whole flood (median of the runs).
    pub cycles_per_packet: f64,
    /// Batch cycles at the 50th, 99th and 99.9th percentile, and the worst batch (each the
    /// median of the runs).
    pub batch_p50: f64,
    pub batch_p99: f64,
    pub batch_p999: f64,
    pub batch_max: f64,
    /// The worst batch after the first `megaflow_max` new flows, once the cache is full and
    /// evicts (median of the runs): the periodic work of a full cache, not its growth.
    /// None when the flood is too short to fill the cache.
    pub batch_max_full: Option<f64>,
    /// The worst batch of all runs, and where it fell (new flows before it).
    pub worst_batch: u64,
    pub worst_batch_at: u64,
    /// The five longest batches of all runs, longest first: (cycles, new flows before it,
    /// run from 0). A table growing stands out at the same place in every run; a stall
    /// of the machine's at a different place each time.
    pub longest_batches: Vec<(u64, u64, usize)>,
    /// TSC cycles to make the datapath (median): what its tables cost before the first
    /// packet.
    pub make_cycles: f64,
    /// Minor page faults while the datapath was made, and during the flood (medians).
    pub faults_at_start: u64,
    pub faults_in_flood: u64,
    pub runs: usize,
}

/// Make a datapath with the miss case's rules and configuration, then send it `flows` new
/// flows from its first packet, timing every batch (`flowpath bench --first-flood`
/// sends four times the default megaflow cache: it fills, then evicts for three times its
/// size, so the flood takes in the periodic work of a full cache too). The cost cases
/// warm up first and so never see what a switch does when a flood meets it fresh: the
/// first time its tables grow and its memory is first touched. Runs `cfg.runs` times,
/// each on a new datapath.
pub fn measure_first_flood(cfg: &BenchConfig, flows: u64) -> FirstFloodResult {
    use flowpath_base::table_memory::minor_page_faults;
    /// What one run saw.
    struct Run {
        cycles_per_packet: f64,
        p50: f64,
        p99: f64,
        p999: f64,
        max: f64,
        max_full: Option<f64>,
        make_cycles: f64,
        faults_at_start: f64,
        faults_in_flood: f64,
    }
    let packets = flows.max(1);
    let mut runs: Vec<Run> = Vec::new();
    let mut longest: Vec<(u64, u64, usize)> = Vec::new();
    for run in 0..cfg.runs.max(1) {
        let (rules, source, dp_cfg, _, _) = setup(Case::Miss, cfg);
        let store = Arc::new(RuleStore::new(cfg.backend));
        store.add(rules).expect("bench rules are valid");
        let f0 = minor_page_faults();
        let t0 = rdtsc();
        let mut h = Harness::new(store, dp_cfg, source);
        let make = rdtsc() - t0;
        h.set_new_flow_share(1.0);
        let f1 = minor_page_faults();
        let mut batches = h.pump_timed_batches(packets);
        let f2 = minor_page_faults();
        let total: u64 = batches.iter().sum();
        let full_from = cfg.megaflow_max.div_ceil(BATCH);
        let max_full = batches.iter().skip(full_from).max().copied();
        longest.extend(
            batches
                .iter()
                .enumerate()
                .map(|(i, &c)| (c, (i * BATCH) as u64, run)),
        );
        longest.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        longest.truncate(5);
        batches.sort_unstable();
        let pct = |p: f64| batches[((batches.len() - 1) as f64 * p).round() as usize] as f64;
        runs.push(Run {
            cycles_per_packet: total as f64 / packets as f64,
            p50: pct(0.5),
            p99: pct(0.99),
            p999: pct(0.999),
            max: pct(1.0),
            max_full: max_full.map(|c| c as f64),
            make_cycles: make as f64,
            faults_at_start: (f1 - f0) as f64,
            faults_in_flood: (f2 - f1) as f64,
        });
    }
    let mid = |f: fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        median(&v).expect("at least one run")
    };
    let (worst_batch, worst_batch_at, _) = longest[0];
    FirstFloodResult {
        packets,
        cycles_per_packet: mid(|r| r.cycles_per_packet),
        batch_p50: mid(|r| r.p50),
        batch_p99: mid(|r| r.p99),
        batch_p999: mid(|r| r.p999),
        batch_max: mid(|r| r.max),
        // (Every run fills the cache or none does: the flood is the same length.)
        batch_max_full: runs[0].max_full.map(|_| mid(|r| r.max_full.unwrap_or(0.0))),
        worst_batch,
        worst_batch_at,
        longest_batches: longest,
        make_cycles: mid(|r| r.make_cycles),
        faults_at_start: mid(|r| r.faults_at_start) as u64,
        faults_in_flood: mid(|r| r.faults_in_flood) as u64,
        runs: runs.len(),
    }
}
