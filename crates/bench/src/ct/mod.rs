//! The connection-tracking cases of `flowpath bench`: whole TCP connections, each new
//! (`ct_new`); a million established UDP connections (`ct_1m`); source NAT (`ct_nat`); a
//! SYN flood next to established traffic (`ct_synflood`); two workers sharing one tracker
//! (`ct_established_2w`). Every case runs the two-pass security-group pipeline of
//! [`rules::ct_rules`] through the worker loop, with connection traffic written into the
//! batch as the ports receive it ([`conns`]), and reports its figures in a
//! [`crate::CaseResult`] with the ct ones in [`CtFigures`].

mod cases;
pub mod conns;
pub mod frames;
pub mod kinds;
mod report;
mod rig;
pub mod rules;
mod synflood;
mod workers;

pub use kinds::{CtCase, CtFigures};
pub use report::{markdown, text};
pub use rules::{ct_rules, CtPipeline, PORT_A, PORT_B, ZONE};

use crate::runner::{BenchConfig, CaseResult, StageShare};
use flowpath_base::clock::tsc_hz;
use flowpath_base::{median_by_key, Summary};
use rig::Timed;

/// How big each case is: `CtSizes::of` gives the cases' sizes; tests use small ones.
#[derive(Clone, Copy, Debug)]
pub struct CtSizes {
    /// `ct_new`: connections in flight.
    pub in_flight: usize,
    /// `ct_1m`: connections.
    pub million: usize,
    /// `ct_nat`, `ct_synflood`, `ct_established_2w` (per worker): connections.
    pub conns: usize,
    /// `ct_synflood`: length of each measured window (ms).
    pub window_ms: u64,
}

impl CtSizes {
    /// The sizes the cases are named for (`--flows` sets the 1,024).
    pub fn of(cfg: &BenchConfig) -> CtSizes {
        CtSizes {
            in_flight: cfg.flows,
            million: 1_000_000,
            conns: cfg.flows,
            window_ms: 200,
        }
    }
}

/// Run one ct case at its named sizes; `progress` gets (run, runs).
pub fn run(case: CtCase, cfg: &BenchConfig, progress: impl FnMut(usize, usize)) -> CaseResult {
    run_sized(case, cfg, &CtSizes::of(cfg), progress)
}

/// Run one ct case at `sizes`.
pub fn run_sized(
    case: CtCase,
    cfg: &BenchConfig,
    sizes: &CtSizes,
    progress: impl FnMut(usize, usize),
) -> CaseResult {
    match case {
        CtCase::New => cases::ct_new(cfg, sizes, progress),
        CtCase::Million => cases::ct_1m(cfg, sizes, progress),
        CtCase::Nat => cases::ct_nat(cfg, sizes, progress),
        CtCase::SynFlood => synflood::ct_synflood(cfg, sizes, progress),
        CtCase::Established2w => workers::ct_established_2w(cfg, sizes, progress),
    }
}

/// A datapath's megaflow subtables and entries.
fn cache(dp: &flowpath_datapath::Datapath) -> (usize, usize) {
    (dp.megaflows().subtables(), dp.megaflows().len())
}

/// A case's result from its timed runs: the median run's counters, the cache sizes at the
/// end, and the ct figures.
fn result(
    case: CtCase,
    cfg: &BenchConfig,
    runs: &[Timed],
    (subtables, megaflows): (usize, usize),
    mut ct: CtFigures,
) -> CaseResult {
    let cycles: Vec<f64> = runs.iter().map(Timed::per_packet).collect();
    let s = Summary::of(&cycles).unwrap_or(Summary {
        median: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
    });
    let mid = median_by_key(runs, Timed::per_packet);
    let st = mid.map(|t| t.stats.clone()).unwrap_or_default();
    let pk = st.packets.max(1) as f64;
    let received: u64 = runs.iter().map(|t| t.packets).sum();
    let delivered: u64 = runs.iter().map(|t| t.delivered).sum();
    ct.delivered_share = delivered as f64 / received.max(1) as f64;
    CaseResult {
        case: case.name().into(),
        mpps: tsc_hz() / s.median / 1e6,
        cycles_per_packet: s.median,
        cycles_min: s.min,
        cycles_max: s.max,
        runs: runs.len(),
        processes: 1,
        packets_per_run: mid.map_or(0, |t| t.packets),
        frame_size: cfg.frame_size,
        emc_hit_share: st.emc_hits as f64 / pk,
        megaflow_hit_share: st.megaflow_hits as f64 / pk,
        smc_hit_share: st.smc_hits as f64 / pk,
        upcall_share: st.upcalls as f64 / pk,
        stage_cycles: StageShare::per_packet(&st),
        megaflow_subtables: subtables,
        megaflows,
        rules: 0,
        classifier: format!("{:?}", cfg.backend),
        ct: Some(ct),
    }
}
