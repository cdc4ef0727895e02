//! The miss-storm cases of `flowpath bench`: `flood` (a port sending nothing but new
//! flows) and `tse` (a trickle of tuple-space-explosion packets), each measured as what
//! established flows on another port keep of their throughput.
//!
//! One worker polls two generated ports through the same worker loop the switch runs:
//! port A offers established flows at a fixed rate ([`PacedPort`]: arrivals follow the
//! TSC, a full ring loses the rest), port B is the attacker. A's rate is a share
//! (`established_load`) of what A alone reaches unpaced on this core, measured first in
//! the same run, so "no attack" delivers all of it and the attack can only take it away.
//! Each defence setting gets a fresh datapath: warm-up, a window without the attack, then
//! the attack switched on, a warm-up, and a window with it. `established_retained` is A's
//! delivered packets per second with the attack ÷ without it (median over runs).

mod config;
pub(crate) mod rig;
mod table;
pub mod traffic;
mod tse;

pub use config::{Attack, AttackConfig, Defence, PORT_ATTACK, PORT_ESTABLISHED};
pub use table::table;
pub use traffic::default_acl;
pub use tse::{tse_report, TseReport};

use flowpath_base::clock::tsc_hz;
use flowpath_base::{median, Summary};
use flowpath_datapath::DatapathConfig;
use rig::{scenario, set_rates, spin, window, worker, Scenario, Window};
use serde::Serialize;

/// One defence setting under the attack.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct DefenceRow {
    pub defence: Defence,
    /// A's delivered Mpps without and with the attack (median runs).
    pub established_mpps_no_attack: f64,
    pub established_mpps: f64,
    /// Median, min and max over runs of with ÷ without.
    pub established_retained: f64,
    pub retained_min: f64,
    pub retained_max: f64,
    /// Attack packets the worker received per second, and what became of them.
    pub attack_pps: f64,
    pub attack_upcalls_per_sec: f64,
    pub attack_budget_drops_per_sec: f64,
    pub attack_uncached_per_sec: f64,
    /// Megaflow subtables and entries at the end of the attack window.
    pub subtables: usize,
    pub megaflows: usize,
    pub max_masks: usize,
    pub flow_limit: usize,
    /// A's packets lost to its full receive ring during the attack window.
    pub established_ring_losses: u64,
    /// A's own misses per second in the attack window (its megaflows evicted or not yet
    /// cached).
    pub established_upcalls_per_sec: f64,
    /// Busy share of the slow path in the attack window (upcall cycles ÷ window cycles).
    pub slow_path_share: f64,
}

/// What an attack case measured.
#[derive(Clone, Debug, Serialize)]
pub struct AttackResult {
    pub case: String,
    pub established_flows: usize,
    /// A alone, unpaced (Mpps).
    pub established_saturated_mpps: f64,
    /// A's offered rate in every window (Mpps).
    pub established_offered_mpps: f64,
    /// The `default` defence's figures, at the top for scripts.
    pub established_retained: f64,
    pub established_mpps: f64,
    pub attack_pps: f64,
    pub subtables: usize,
    /// Retained with no defence, for comparison.
    pub established_retained_undefended: f64,
    pub defences: Vec<DefenceRow>,
    pub rules: usize,
    pub classifier: String,
    pub runs: usize,
    pub window_ms: u64,
    pub frame_size: usize,
}

/// Run one attack case; `progress` gets (step, steps) as it goes.
pub fn run_attack(
    kind: Attack,
    cfg: &AttackConfig,
    mut progress: impl FnMut(usize, usize),
) -> AttackResult {
    let sc = scenario(kind, cfg);
    let defences: &[Defence] = match kind {
        Attack::Flood => &[Defence::None, Defence::Default],
        Attack::Tse => &[Defence::None, Defence::Ranking, Defence::Default],
    };
    let steps = 1 + defences.len() * cfg.runs;
    let mut step = 0;
    let mut tick = || {
        step += 1;
        progress(step, steps);
    };
    let saturated = saturated_pps(&sc, cfg);
    let offered = saturated * cfg.established_load;
    tick();
    let rows = defences
        .iter()
        .map(|&d| defence_row(d, &sc, cfg, offered, &mut tick))
        .collect();
    result(kind, &sc, cfg, (saturated, offered), rows)
}

/// A alone, unpaced, with the default datapath: the rate (packets per second) the offered
/// load is a share of.
fn saturated_pps(sc: &Scenario, cfg: &AttackConfig) -> f64 {
    let mut w = worker(sc, cfg, cfg.datapath.clone());
    set_rates(&mut w, f64::INFINITY, 0.0);
    spin(&mut w, cfg.window_ms.max(100));
    let sat = window(&mut w, cfg.window_ms);
    sat.a_delivered as f64 / sat.secs
}

/// One run of a defence setting on a fresh datapath.
struct Run {
    /// A's delivered packets per second without and with the attack.
    quiet_pps: f64,
    loud_pps: f64,
    /// The attack packets the worker received per second.
    attack_pps: f64,
    /// The attack window, and the cache's subtables, megaflows, mask limit and flow limit
    /// at its end.
    loud: Window,
    cache: (usize, usize, usize, usize),
}

/// Warm-up, a window without the attack, the attack switched on, a warm-up, and a window
/// with it.
fn one_run(dp_cfg: &DatapathConfig, sc: &Scenario, cfg: &AttackConfig, offered: f64) -> Run {
    let mut w = worker(sc, cfg, dp_cfg.clone());
    set_rates(&mut w, offered, 0.0);
    spin(&mut w, cfg.window_ms.max(150));
    let quiet = window(&mut w, cfg.window_ms);
    set_rates(&mut w, offered, cfg.attack_pps.unwrap_or(f64::INFINITY));
    spin(&mut w, cfg.window_ms.max(100));
    let loud = window(&mut w, cfg.window_ms);
    let mf = w.datapath().megaflows();
    Run {
        quiet_pps: quiet.a_delivered as f64 / quiet.secs,
        loud_pps: loud.a_delivered as f64 / loud.secs,
        attack_pps: loud.b_packets as f64 / loud.secs,
        loud,
        cache: (mf.subtables(), mf.len(), mf.max_masks(), mf.flow_limit()),
    }
}

/// `cfg.runs` runs of defence `d` as one row: medians over the runs, the last run's attack
/// window for the per-second figures and cache sizes. `tick` after each run.
fn defence_row(
    d: Defence,
    sc: &Scenario,
    cfg: &AttackConfig,
    offered: f64,
    tick: &mut impl FnMut(),
) -> DefenceRow {
    let dp_cfg = d.config(&cfg.datapath);
    let runs: Vec<Run> = (0..cfg.runs)
        .map(|_| {
            let r = one_run(&dp_cfg, sc, cfg, offered);
            tick();
            r
        })
        .collect();
    let mid = |f: fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().map(f).collect();
        median(&v).expect("at least one run")
    };
    let kept: Vec<f64> = runs
        .iter()
        .map(|r| r.loud_pps / r.quiet_pps.max(1.0))
        .collect();
    let retained = Summary::of(&kept).expect("at least one run");
    let last = runs.last().expect("at least one run");
    let (loud, (subtables, megaflows, max_masks, flow_limit)) = (last.loud, last.cache);
    let s = loud.secs.max(1e-9);
    DefenceRow {
        defence: d,
        established_mpps_no_attack: mid(|r| r.quiet_pps) / 1e6,
        established_mpps: mid(|r| r.loud_pps) / 1e6,
        established_retained: retained.median,
        retained_min: retained.min,
        retained_max: retained.max,
        attack_pps: mid(|r| r.attack_pps),
        attack_upcalls_per_sec: loud.b_upcalls as f64 / s,
        attack_budget_drops_per_sec: loud.b_budget_drops as f64 / s,
        attack_uncached_per_sec: loud.b_uncached as f64 / s,
        subtables,
        megaflows,
        max_masks,
        flow_limit,
        established_ring_losses: loud.a_ring_losses,
        established_upcalls_per_sec: loud.a_upcalls as f64 / s,
        slow_path_share: loud.upcall_cycles as f64 / (s * tsc_hz()),
    }
}

/// The case's result: the rows, with the `default` defence's figures on top. `rates`: A's
/// saturated and offered packets per second.
fn result(
    kind: Attack,
    sc: &Scenario,
    cfg: &AttackConfig,
    (saturated, offered): (f64, f64),
    rows: Vec<DefenceRow>,
) -> AttackResult {
    let def = rows
        .iter()
        .find(|r| r.defence == Defence::Default)
        .expect("every case runs the default defence")
        .clone();
    let none = rows
        .iter()
        .find(|r| r.defence == Defence::None)
        .map_or(f64::NAN, |r| r.established_retained);
    AttackResult {
        case: kind.name().into(),
        established_flows: sc.established.len(),
        established_saturated_mpps: saturated / 1e6,
        established_offered_mpps: offered / 1e6,
        established_retained: def.established_retained,
        established_mpps: def.established_mpps,
        attack_pps: def.attack_pps,
        subtables: def.subtables,
        established_retained_undefended: none,
        defences: rows,
        rules: sc.rules.len(),
        classifier: cfg.backend.name().into(),
        runs: cfg.runs,
        window_ms: cfg.window_ms,
        frame_size: cfg.frame_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowpath_datapath::MissLimits;

    #[test]
    fn the_rows_differ_in_their_defences_only() {
        let base = DatapathConfig::default();
        let none = Defence::None.config(&base);
        let ranking = Defence::Ranking.config(&base);
        let default = Defence::Default.config(&base);
        // The tiers' reviews run at the same interval in every row.
        for c in [&none, &ranking, &default] {
            assert_eq!(c.rerank_every, base.rerank_every);
            assert_eq!(c.smc_entries, base.smc_entries);
            assert_eq!(c.megaflow_max, base.megaflow_max);
        }
        assert_eq!(
            (
                none.rank_subtables,
                ranking.rank_subtables,
                default.rank_subtables
            ),
            (false, true, true)
        );
        for c in [&none, &ranking] {
            assert_eq!(c.miss, MissLimits::off());
            assert_eq!(c.max_masks, u16::MAX as usize);
        }
        assert_eq!(default.miss, base.miss);
        assert_eq!(default.max_masks, base.max_masks);
    }
}
