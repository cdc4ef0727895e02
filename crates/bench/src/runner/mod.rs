//! Running a case: warm up, then time repeated runs of the datapath loop with the TSC; and
//! one case's runs from several processes pooled into one result.

mod case;
mod ct_established;
mod flood;
mod rule_change;

pub use case::{BenchConfig, Case, MANY_FLOWS};
pub use ct_established::{ct_established, security_group_rules};
pub use flood::{measure_first_flood, FirstFloodResult};
pub use rule_change::{measure_rule_change, RuleChangeResult};

use crate::harness::{FloorHarness, Harness};
use crate::workload;
use case::setup;
use flowpath_base::clock::tsc_hz;
use flowpath_base::{median_by_key, Summary};
use flowpath_datapath::DatapathStats;
use flowpath_pipeline::RuleStore;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

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
    /// The connection-tracking cases' own figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ct: Option<crate::ct::kinds::CtFigures>,
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

/// Run one case; `progress` is called after each run with (run index, runs). The ct cases
/// (`Case::Ct`) run through `crate::ct::run`, which builds on this module.
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
    let cycles: Vec<f64> = samples.iter().map(|s| s.0).collect();
    let (_, st) = median_by_key(&samples, |s| s.0).expect("at least one run");
    let pk = st.packets.max(1) as f64;
    CaseResult {
        emc_hit_share: st.emc_hits as f64 / pk,
        megaflow_hit_share: st.megaflow_hits as f64 / pk,
        smc_hit_share: st.smc_hits as f64 / pk,
        upcall_share: st.upcalls as f64 / pk,
        stage_cycles: StageShare::per_packet(st),
        megaflow_subtables: h.datapath().megaflows().subtables(),
        megaflows: h.datapath().megaflows().len(),
        rules: n_rules,
        classifier: format!("{:?}", cfg.backend),
        ..CaseResult::timed(case, &cycles, cfg, packets)
    }
}

impl CaseResult {
    /// A case's timed runs (cycles per packet, one per run) in one process, with no tier
    /// shares, stage cycles or rules yet (the floor's whole result).
    fn timed(case: Case, cycles: &[f64], cfg: &BenchConfig, packets: u64) -> CaseResult {
        let s = Summary::of(cycles).expect("at least one run");
        CaseResult {
            case: case.name(),
            mpps: tsc_hz() / s.median / 1e6,
            cycles_per_packet: s.median,
            cycles_min: s.min,
            cycles_max: s.max,
            runs: cfg.runs,
            processes: 1,
            packets_per_run: packets,
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
            ct: None,
        }
    }
}

/// One case's results from several processes (each its own start, warm-up and runs) as
/// one: the median, min and max over every run, and the rest (tier shares, stage cycles,
/// cache sizes) from the process whose median is that median. A process on this VM runs
/// at one of two speeds throughout (docs/performance.md, the bench's method), so runs in one
/// process are not independent samples; runs spread over processes are. None if `parts`
/// is empty or mixes cases.
pub fn pool(parts: &[CaseResult]) -> Option<CaseResult> {
    let first = parts.first()?;
    if parts.iter().any(|p| p.case != first.case) {
        return None;
    }
    let mid = median_by_key(parts, |p| p.cycles_per_packet)?;
    Some(CaseResult {
        cycles_min: parts
            .iter()
            .map(|p| p.cycles_min)
            .fold(f64::INFINITY, f64::min),
        cycles_max: parts.iter().map(|p| p.cycles_max).fold(0.0, f64::max),
        runs: parts.iter().map(|p| p.runs).sum(),
        processes: parts.iter().map(|p| p.processes).sum(),
        ct: mid.ct.as_ref().map(|m| {
            crate::ct::kinds::CtFigures::pooled(m, parts.iter().filter_map(|p| p.ct.as_ref()))
        }),
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
    let mut h = FloorHarness::new(source.with_seed(cfg.seed));
    // A warm-up as long as a run: the first case of a bench also warms the core up.
    h.pump(cfg.packets.max(200_000));
    let cycles: Vec<f64> = (0..cfg.runs)
        .map(|r| {
            let dt = h.timed(cfg.packets);
            progress(r + 1, cfg.runs);
            dt as f64 / cfg.packets as f64
        })
        .collect();
    debug_assert!(h.delivered() >= cfg.packets * cfg.runs as u64);
    CaseResult::timed(Case::Floor { many }, &cycles, cfg, cfg.packets)
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
            ct: None,
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
