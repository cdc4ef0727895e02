//! Running a case: warm up, then time repeated runs of the datapath loop with the TSC.

use crate::harness::Harness;
use crate::workload;
use flowpath_base::clock::{rdtsc, tsc_hz};
use flowpath_base::BATCH;
use flowpath_datapath::{DatapathConfig, DatapathStats};
use flowpath_gen::InMemorySource;
use flowpath_pipeline::{Backend, RuleStore};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One bench case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// The floor: the same generated port and counting sink with no datapath between them,
    /// with emc_hit's traffic (1,024 flows), or with many_flows' (1,000,000 flows in a
    /// 1M-slot arena, which does not fit in the cache).
    Floor { many: bool },
    /// (a) every packet hits the exact-match cache.
    EmcHit,
    /// (b) every packet hits the megaflow cache (EMC off), with this many subtables.
    MegaflowHit(usize),
    /// (c) every packet is a new flow: slow path plus megaflow install.
    Miss,
    /// (d) established flows plus the configured share of new flows.
    Mixed,
    /// 1,000,000 established flows over four megaflow subtables (far more than the EMC
    /// holds), popularity uniform or Zipf (skew 1.1).
    ManyFlows { zipf: bool },
    /// VXLAN arriving on the underlay port for a configured tunnel port (IPv4 or IPv6
    /// underlay), decapsulated and forwarded by `in_port=<tunnel>,actions=output:2`:
    /// emc_hit's 1,024 inner flows.
    VxlanDecap { v6: bool },
    /// emc_hit's traffic out to a tunnel port (`output:<tunnel>`), encapsulated with a
    /// static underlay hop (IPv4 or IPv6 underlay).
    VxlanEncap { v6: bool },
}

impl Case {
    pub fn name(&self) -> String {
        match self {
            Case::EmcHit => "emc_hit".into(),
            Case::MegaflowHit(n) => format!("megaflow_hit_{n}"),
            Case::Miss => "miss".into(),
            Case::Mixed => "mixed".into(),
            Case::Floor { many: false } => "floor".into(),
            Case::Floor { many: true } => "floor_many_flows".into(),
            Case::ManyFlows { zipf: false } => "many_flows".into(),
            Case::ManyFlows { zipf: true } => "many_flows_zipf".into(),
            Case::VxlanDecap { v6: false } => "vxlan_decap".into(),
            Case::VxlanDecap { v6: true } => "vxlan_decap_ipv6".into(),
            Case::VxlanEncap { v6: false } => "vxlan_encap".into(),
            Case::VxlanEncap { v6: true } => "vxlan_encap_ipv6".into(),
        }
    }

    pub fn parse(s: &str) -> Result<Case, String> {
        match s {
            "emc_hit" => Ok(Case::EmcHit),
            "miss" => Ok(Case::Miss),
            "mixed" => Ok(Case::Mixed),
            "floor" => Ok(Case::Floor { many: false }),
            "floor_many_flows" => Ok(Case::Floor { many: true }),
            "many_flows" => Ok(Case::ManyFlows { zipf: false }),
            "many_flows_zipf" => Ok(Case::ManyFlows { zipf: true }),
            "vxlan_decap" => Ok(Case::VxlanDecap { v6: false }),
            "vxlan_decap_ipv6" => Ok(Case::VxlanDecap { v6: true }),
            "vxlan_encap" => Ok(Case::VxlanEncap { v6: false }),
            "vxlan_encap_ipv6" => Ok(Case::VxlanEncap { v6: true }),
            _ => s
                .strip_prefix("megaflow_hit_")
                .and_then(|n| n.parse().ok())
                .filter(|n| (1..=16).contains(n))
                .map(Case::MegaflowHit)
                .ok_or_else(|| {
                    format!("unknown case '{s}' (expected floor, floor_many_flows, emc_hit, megaflow_hit_N with N in 1..=16, miss, mixed, many_flows, vxlan_decap, vxlan_encap, vxlan_decap_ipv6, vxlan_encap_ipv6, many_flows_zipf)")
                }),
        }
    }

    /// The default case list: the floor, (a), (b) with 1, 4 and 16 subtables, (c), (d),
    /// and many flows (their floor, uniform and Zipf).
    /// The same case over an IPv6 underlay (`--underlay ipv6`): the VXLAN cases change,
    /// the others do not.
    pub fn with_ipv6_underlay(self) -> Case {
        match self {
            Case::VxlanDecap { .. } => Case::VxlanDecap { v6: true },
            Case::VxlanEncap { .. } => Case::VxlanEncap { v6: true },
            c => c,
        }
    }

    pub fn defaults() -> Vec<Case> {
        vec![
            Case::Floor { many: false },
            Case::EmcHit,
            Case::MegaflowHit(1),
            Case::MegaflowHit(4),
            Case::MegaflowHit(16),
            Case::Miss,
            Case::Mixed,
            Case::Floor { many: true },
            Case::ManyFlows { zipf: false },
            Case::ManyFlows { zipf: true },
        ]
    }
}

/// How to run the cases.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub runs: usize,
    /// Packets per timed run for hit cases; miss-heavy cases use a tenth (at least 50,000).
    pub packets: u64,
    /// Established flows (EMC and mixed cases).
    pub flows: usize,
    /// Share of new flows in the mixed case (0.0..=1.0).
    pub miss_rate: f64,
    pub frame_size: usize,
    pub backend: Backend,
    /// Exact-match insertion: one flow in N.
    pub emc_insert_inv_prob: u32,
    /// Signature-match cache entries (0 = off).
    pub smc_entries: usize,
    pub megaflow_max: usize,
    pub seed: u64,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            runs: 5,
            packets: 2_000_000,
            flows: 1024,
            miss_rate: 0.10,
            frame_size: 64,
            backend: Backend::TupleSpace,
            emc_insert_inv_prob: 100,
            smc_entries: DatapathConfig::default().smc_entries,
            megaflow_max: 65536,
            seed: 1,
        }
    }
}

/// What one case measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    pub case: String,
    /// Million packets per second on one core (median run).
    pub mpps: f64,
    /// TSC cycles per packet, median over runs (whole loop: rx from memory, parse,
    /// lookups, slow path, actions, tx to a counting sink).
    pub cycles_per_packet: f64,
    pub cycles_min: f64,
    pub cycles_max: f64,
    pub runs: usize,
    /// The processes the runs were spread over (1: all in one; see [`pool`]).
    pub processes: usize,
    pub packets_per_run: u64,
    pub frame_size: usize,
    /// Share of packets answered by each tier over the timed runs.
    pub emc_hit_share: f64,
    pub megaflow_hit_share: f64,
    /// Of the megaflow hits, the share of all packets the signature-match cache found.
    pub smc_hit_share: f64,
    pub upcall_share: f64,
    /// Mean cycles per packet by stage (from the datapath's own TSC stamps, median run).
    pub stage_cycles: StageShare,
    pub megaflow_subtables: usize,
    pub megaflows: usize,
    pub rules: usize,
    pub classifier: String,
}

#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct StageShare {
    pub parse: f64,
    pub emc: f64,
    pub megaflow: f64,
    pub upcall: f64,
    pub actions: f64,
}

impl StageShare {
    /// The datapath's per-stage TSC cycles divided by the packets of the batches it timed.
    pub fn per_packet(st: &DatapathStats) -> StageShare {
        let pk = st.cycles.packets.max(1) as f64;
        StageShare {
            parse: st.cycles.parse as f64 / pk,
            emc: st.cycles.emc as f64 / pk,
            megaflow: st.cycles.megaflow as f64 / pk,
            upcall: st.cycles.upcall as f64 / pk,
            actions: st.cycles.actions as f64 / pk,
        }
    }
}

/// Run one case; `progress` is called after each run with (run index, runs).
pub fn run_case(
    case: Case,
    cfg: &BenchConfig,
    mut progress: impl FnMut(usize, usize),
) -> CaseResult {
    if let Case::Floor { many } = case {
        return run_floor(many, cfg, progress);
    }
    let (rules, source, dp_cfg, share, packets) = setup(case, cfg);
    let n_rules = rules.len();
    let store = Arc::new(RuleStore::new(cfg.backend));
    store.add(rules).expect("bench rules are valid");
    let mut h = Harness::new(store, dp_cfg, source);

    // Warm-up: fill the caches (and, for misses, reach the steady state of a full
    // megaflow cache that evicts on every install).
    let warm = match case {
        Case::Miss | Case::Mixed => {
            (cfg.megaflow_max as u64 + cfg.flows as u64 * 4).max(packets / 4)
        }
        // Every flow seen a few times: the caches reach their steady state.
        Case::ManyFlows { .. } => (MANY_FLOWS as u64 * 3).min(cfg.packets.max(1) * 8),
        _ => (cfg.flows as u64 * 4 * cfg.emc_insert_inv_prob as u64).clamp(200_000, 4_000_000),
    };
    h.set_new_flow_share(share);
    h.pump(warm);

    let mut samples: Vec<(f64, DatapathStats)> = Vec::with_capacity(cfg.runs);
    for r in 0..cfg.runs {
        let (dt, st) = h.timed(packets);
        samples.push((dt as f64 / packets as f64, st));
        progress(r + 1, cfg.runs);
    }
    let mut sorted: Vec<f64> = samples.iter().map(|s| s.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let (_, st) = samples
        .iter()
        .find(|s| s.0 == median)
        .expect("median is one of the samples");
    let pk = st.packets.max(1) as f64;
    let hz = tsc_hz();
    CaseResult {
        case: case.name(),
        mpps: hz / median / 1e6,
        cycles_per_packet: median,
        cycles_min: sorted[0],
        cycles_max: *sorted.last().unwrap(),
        runs: cfg.runs,
        processes: 1,
        packets_per_run: packets,
        frame_size: cfg.frame_size,
        emc_hit_share: st.emc_hits as f64 / pk,
        megaflow_hit_share: st.megaflow_hits as f64 / pk,
        smc_hit_share: st.smc_hits as f64 / pk,
        upcall_share: st.upcalls as f64 / pk,
        stage_cycles: StageShare::per_packet(st),
        megaflow_subtables: h.datapath().megaflows().subtables(),
        megaflows: h.datapath().megaflows().len(),
        rules: n_rules,
        classifier: format!("{:?}", cfg.backend),
    }
}

/// One case's results from several processes (each its own start, warm-up and runs) as
/// one: the median, min and max over every run, and the rest (tier shares, stage cycles,
/// cache sizes) from the process whose median is that median. A process on this VM runs
/// at one of two speeds throughout (README, "What the bench measures"), so runs in one
/// process are not independent samples; runs spread over processes are. None if `parts`
/// is empty or mixes cases.
pub fn pool(parts: &[CaseResult]) -> Option<CaseResult> {
    let first = parts.first()?;
    if parts.iter().any(|p| p.case != first.case) {
        return None;
    }
    let mut by_cycles: Vec<&CaseResult> = parts.iter().collect();
    by_cycles.sort_by(|a, b| a.cycles_per_packet.total_cmp(&b.cycles_per_packet));
    let mid = by_cycles[by_cycles.len() / 2];
    Some(CaseResult {
        cycles_min: parts
            .iter()
            .map(|p| p.cycles_min)
            .fold(f64::INFINITY, f64::min),
        cycles_max: parts.iter().map(|p| p.cycles_max).fold(0.0, f64::max),
        runs: parts.iter().map(|p| p.runs).sum(),
        processes: parts.iter().map(|p| p.processes).sum(),
        ..mid.clone()
    })
}

/// The floor cases: emc_hit's or many_flows' traffic from the generated port straight to
/// the sink.
fn run_floor(many: bool, cfg: &BenchConfig, mut progress: impl FnMut(usize, usize)) -> CaseResult {
    let (_, source) = if many {
        workload::many_flows(MANY_FLOWS, false, cfg.frame_size, cfg.seed)
    } else {
        workload::emc_hit(cfg.flows, cfg.frame_size)
    };
    let mut h = crate::harness::FloorHarness::new(source.with_seed(cfg.seed));
    // A warm-up as long as a run: the first case of a bench also warms the core up.
    h.pump(cfg.packets.max(200_000));
    let mut sorted: Vec<f64> = (0..cfg.runs)
        .map(|r| {
            let dt = h.timed(cfg.packets);
            progress(r + 1, cfg.runs);
            dt as f64 / cfg.packets as f64
        })
        .collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    debug_assert!(h.delivered() >= cfg.packets * cfg.runs as u64);
    CaseResult {
        case: Case::Floor { many }.name(),
        mpps: tsc_hz() / median / 1e6,
        cycles_per_packet: median,
        cycles_min: sorted[0],
        cycles_max: *sorted.last().unwrap(),
        runs: cfg.runs,
        processes: 1,
        packets_per_run: cfg.packets,
        frame_size: cfg.frame_size,
        emc_hit_share: 0.0,
        megaflow_hit_share: 0.0,
        smc_hit_share: 0.0,
        upcall_share: 0.0,
        stage_cycles: StageShare::default(),
        megaflow_subtables: 0,
        megaflows: 0,
        rules: 0,
        classifier: "none".into(),
    }
}

/// Flows of the many-flows cases.
pub const MANY_FLOWS: usize = 1_000_000;

type Setup = (
    Vec<flowpath_pipeline::RuleSpec>,
    InMemorySource,
    DatapathConfig,
    f64,
    u64,
);

fn setup(case: Case, cfg: &BenchConfig) -> Setup {
    // The cost cases measure what each tier costs: the miss budget (which would drop
    // the mixed case's misses when they take over half the core) is off.
    let base = DatapathConfig {
        emc_insert_inv_prob: cfg.emc_insert_inv_prob,
        smc_entries: cfg.smc_entries,
        megaflow_max: cfg.megaflow_max,
        miss: flowpath_datapath::MissLimits::unbudgeted(),
        ..DatapathConfig::default()
    };
    let miss_packets = (cfg.packets / 10).max(50_000);
    let (rules, source, dp, share, packets) = match case {
        Case::EmcHit => {
            let (r, s) = workload::emc_hit(cfg.flows, cfg.frame_size);
            (r, s, base, 0.0, cfg.packets)
        }
        Case::MegaflowHit(n) => {
            let (r, s) = workload::megaflow_hit(n, cfg.frame_size);
            (
                r,
                s,
                // The subtable search itself: no exact tier in front of it.
                DatapathConfig {
                    emc: false,
                    smc_entries: 0,
                    ..base
                },
                0.0,
                cfg.packets,
            )
        }
        Case::Miss => {
            let (r, s) = workload::miss_pipeline(cfg.flows, cfg.frame_size);
            (r, s, base, 1.0, miss_packets)
        }
        Case::ManyFlows { zipf } => {
            let (r, s) = workload::many_flows(MANY_FLOWS, zipf, cfg.frame_size, cfg.seed);
            (r, s, base, 0.0, cfg.packets)
        }
        Case::VxlanDecap { v6 } => {
            let (r, s) = workload::vxlan_decap(cfg.flows, cfg.frame_size, v6);
            let dp = DatapathConfig {
                tunnels: Some(Arc::new(workload::vxlan_tunnels(v6))),
                ..base
            };
            (r, s, dp, 0.0, cfg.packets)
        }
        Case::VxlanEncap { v6 } => {
            let (r, s) = workload::vxlan_encap(cfg.flows, cfg.frame_size);
            let dp = DatapathConfig {
                tunnels: Some(Arc::new(workload::vxlan_tunnels(v6))),
                ..base
            };
            (r, s, dp, 0.0, cfg.packets)
        }
        Case::Floor { .. } => unreachable!("the floor runs without a datapath"),
        Case::Mixed => {
            let (r, s) = workload::miss_pipeline(cfg.flows, cfg.frame_size);
            let p = if cfg.miss_rate > 0.0 {
                (cfg.packets as f64 * (0.1 / cfg.miss_rate).min(1.0)) as u64
            } else {
                cfg.packets
            };
            (r, s, base, cfg.miss_rate, p.max(50_000))
        }
    };
    (rules, source.with_seed(cfg.seed), dp, share, packets)
}

/// Packets for a run (or warm-up) at miss rate `m`: `base` up to 10 %, then
/// `base · 0.1 / m` (at least `floor`), so that runs cost about the same at any rate.
pub fn packets_at(base: u64, m: f64, floor: u64) -> u64 {
    if m > 0.1 {
        ((base as f64 * 0.1 / m) as u64).max(floor.min(base))
    } else {
        base
    }
}

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
    let median = |f: fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (worst_batch, worst_batch_at, _) = longest[0];
    FirstFloodResult {
        packets,
        cycles_per_packet: median(|r| r.cycles_per_packet),
        batch_p50: median(|r| r.p50),
        batch_p99: median(|r| r.p99),
        batch_p999: median(|r| r.p999),
        batch_max: median(|r| r.max),
        // (Every run fills the cache or none does: the flood is the same length.)
        batch_max_full: runs[0]
            .max_full
            .map(|_| median(|r| r.max_full.unwrap_or(0.0))),
        worst_batch,
        worst_batch_at,
        longest_batches: longest,
        make_cycles: median(|r| r.make_cycles),
        faults_at_start: median(|r| r.faults_at_start) as u64,
        faults_in_flood: median(|r| r.faults_in_flood) as u64,
        runs: runs.len(),
    }
}

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
    use flowpath_datapath::OnRuleChange;
    use flowpath_packet::Field;
    use flowpath_pipeline::{Change, Match, RuleSpec};
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
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
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
        revalidate_cycles: median(&mut reval),
        revalidate_kept: kept,
        flush_cycles: median(&mut flush),
        miss_cycles: miss.cycles_per_packet,
        runs: cfg.runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_run(case: &str, cycles: f64, emc_share: f64) -> CaseResult {
        CaseResult {
            case: case.into(),
            mpps: 2.0e3 / cycles,
            cycles_per_packet: cycles,
            cycles_min: cycles,
            cycles_max: cycles,
            runs: 1,
            processes: 1,
            packets_per_run: 1000,
            frame_size: 64,
            emc_hit_share: emc_share,
            megaflow_hit_share: 0.0,
            smc_hit_share: 0.0,
            upcall_share: 0.0,
            stage_cycles: StageShare {
                parse: cycles / 2.0,
                ..StageShare::default()
            },
            megaflow_subtables: 1,
            megaflows: cycles as usize,
            rules: 1,
            classifier: "TupleSpace".into(),
        }
    }

    /// Pooled runs report the median process's figures whole (its Mpps, shares and stage
    /// columns belong together), the extremes over all runs, and what was pooled.
    #[test]
    fn pooling_takes_the_median_process_whole_and_the_extremes_of_all() {
        let parts = [
            one_run("emc_hit", 56.0, 0.3),
            one_run("emc_hit", 51.0, 0.1),
            one_run("emc_hit", 52.0, 0.2),
        ];
        let p = pool(&parts).expect("one case");
        assert_eq!(p.cycles_per_packet, 52.0);
        assert_eq!(p.mpps, parts[2].mpps);
        assert_eq!(p.emc_hit_share, 0.2);
        assert_eq!(p.stage_cycles.parse, 26.0);
        assert_eq!(p.megaflows, 52);
        assert_eq!((p.cycles_min, p.cycles_max), (51.0, 56.0));
        assert_eq!((p.runs, p.processes), (3, 3));
        let mut wide = one_run("emc_hit", 53.0, 0.0);
        (wide.cycles_min, wide.cycles_max, wide.runs) = (40.0, 90.0, 5);
        let p = pool(&[parts[0].clone(), wide]).expect("one case");
        assert_eq!((p.cycles_min, p.cycles_max, p.runs), (40.0, 90.0, 6));
    }

    #[test]
    fn pooling_refuses_nothing_and_mixed_cases() {
        assert!(pool(&[]).is_none());
        assert!(pool(&[one_run("emc_hit", 50.0, 0.0), one_run("miss", 700.0, 0.0)]).is_none());
    }

    /// A result survives the JSON a child process prints (the table's row plus the machine).
    #[test]
    fn a_result_reads_back_from_its_json_row() {
        let r = one_run("mixed", 150.0, 0.9);
        let machine = crate::Machine::probe();
        let text = crate::report::json(std::slice::from_ref(&r), &[], &machine);
        let rows: Vec<CaseResult> = serde_json::from_str(&text).expect("rows read back");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].case, "mixed");
        assert_eq!(rows[0].cycles_per_packet, 150.0);
        assert_eq!(rows[0].stage_cycles.parse, 75.0);
    }
}
