//! The arithmetic: cycles per packet from a profile, the fewest cores that carry a rate,
//! and the talk's what-if scenarios.
//!
//! - cycles per packet at miss rate `m` and frame size `b`:
//!   `(1 − m)·hit(b) + m·miss(b)` (the talk's two-cost model), or, where the profile has
//!   measured curves for the class, those interpolated in `m` and between their frame
//!   sizes; the part above `(1 − m)·hit(b)` is the misses'.
//! - cores: the smallest `n` with `n · eff(n) · tsc_hz · (1 − headroom) ≥ pps · cycles`,
//!   where `eff(n)` is the profile's scaling efficiency (the last one beyond the measured).
//! - utilisation per core: `pps · cycles / (n · eff(n) · tsc_hz)`.

mod attack;
mod cost;
mod scenario;

pub use attack::attack_outcomes;
pub(crate) use cost::interpolate;
pub use cost::{amdahl, solve, Cycles, Solved, Workload, MAX_CORES};
pub use scenario::{outcome, scenarios, Options, Outcome, WhatIf};

use crate::profile::Profile;
use flowpath_gen::TrafficClass;
use serde::Serialize;

/// A whole plan: the workload, the baseline and every scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub profile: String,
    pub workload: Workload,
    pub headroom: f64,
    pub tsc_hz: f64,
    /// The baseline's answer (also in `baseline`, flattened here for scripts).
    pub cores: u64,
    pub utilisation: f64,
    pub miss_share_of_cycles: f64,
    pub cycles_per_packet: f64,
    pub pps: f64,
    /// Hit and miss cost per packet at this frame size.
    pub hit_cycles: f64,
    pub miss_cycles: f64,
    /// The profile's measured curves were used (not the two-cost line).
    pub measured_curves: bool,
    /// Packets per second one core forwards (efficiency 1, no headroom).
    pub pps_per_core: f64,
    pub core_year_usd: f64,
    pub baseline: Outcome,
    pub scenarios: Vec<Outcome>,
    /// Remarks on the whole plan (extrapolated scaling, …).
    pub notes: Vec<String>,
}

/// Check a workload and options; errors name the option.
pub fn validate(w: &Workload, opts: &Options) -> Result<(), String> {
    if !(w.pps.is_finite() && w.pps >= 0.0) {
        return Err(format!(
            "--rate: must be a positive rate (got {} pps)",
            w.pps
        ));
    }
    if !(0.0..=1.0).contains(&w.miss_rate) {
        return Err(format!(
            "--miss-rate: must be within 0..100 % (got {})",
            crate::units::pct(w.miss_rate)
        ));
    }
    if !(0.0..1.0).contains(&opts.headroom) {
        return Err(format!(
            "--headroom: must be below 100 % (got {})",
            crate::units::pct(opts.headroom)
        ));
    }
    if !(opts.miss_speedup.is_finite() && opts.miss_speedup > 0.0) {
        return Err(format!(
            "--miss-speedup: must be a positive factor (got {})",
            opts.miss_speedup
        ));
    }
    if !(opts.offload_pps.is_finite() && opts.offload_pps >= 0.0) {
        return Err("--offload-rate: must be a positive rate".into());
    }
    if let Some(a) = opts.attack_pps {
        if !(a.is_finite() && a > 0.0) {
            return Err(format!(
                "--attack-rate: must be a positive rate (got {a} pps)"
            ));
        }
    }
    if !(opts.attack_budget > 0.0 && opts.attack_budget <= 1.0) {
        return Err(format!(
            "--attack-budget: must be within (0, 100 %] (got {})",
            crate::units::pct(opts.attack_budget)
        ));
    }
    if !(opts.core_year_usd.is_finite() && opts.core_year_usd >= 0.0) {
        return Err(format!(
            "--core-year-usd: must not be negative (got {})",
            opts.core_year_usd
        ));
    }
    Ok(())
}

/// Plan `w` with `profile`: the baseline and the scenarios of `opts`.
pub fn plan(profile: &Profile, w: &Workload, opts: &Options) -> Result<Plan, String> {
    validate(w, opts)?;
    let costs = profile.classes.get(w.class);
    let baseline = outcome(profile, w, opts, &WhatIf::NONE, "baseline", None)?;
    let mut scen = Vec::new();
    for (name, what) in scenarios(opts) {
        let mut o = outcome(profile, w, opts, &what, &name, Some(&baseline))?;
        if what.miss_cores.is_none() && what.offload_share == 0.0 {
            // The pure miss-path scenario: its speed-up is Amdahl's law with p = the
            // baseline's miss share, which is exactly the cycle ratio.
            o.speedup = amdahl(baseline.miss_share_of_cycles, what.miss_speedup);
        }
        scen.push(o);
    }
    if let Some(a) = opts.attack_pps {
        scen.extend(attack_outcomes(profile, w, opts, a, &baseline)?);
    }
    let mut notes = Vec::new();
    let last = profile.scaling.len();
    if baseline.extrapolated || scen.iter().any(|s| s.extrapolated) {
        notes.push(format!(
            "scaling beyond {last} core{} is extrapolated with the last measured efficiency ({})",
            if last == 1 { "" } else { "s" },
            crate::units::pct(*profile.scaling.last().unwrap_or(&1.0))
        ));
    }
    if w.class == TrafficClass::VxlanEncap
        && profile
            .notes
            .iter()
            .any(|n| n == crate::profile::ENCAP_DEFAULT_NOTE)
    {
        notes.push(
            "this profile predates the vxlan_encap class: its vxlan (decap) costs stand in for encap (calibrate again to measure encap)".into(),
        );
    }
    let c = costs.cycles(w.miss_rate, w.frame_bytes);
    let has_curve = !costs.curves.is_empty();
    Ok(Plan {
        profile: profile.name.clone(),
        workload: *w,
        headroom: opts.headroom,
        tsc_hz: profile.tsc_hz,
        cores: baseline.cores,
        utilisation: baseline.utilisation,
        miss_share_of_cycles: baseline.miss_share_of_cycles,
        cycles_per_packet: c.total(),
        pps: w.pps,
        hit_cycles: costs.hit.at(w.frame_bytes),
        miss_cycles: costs.miss.at(w.frame_bytes),
        measured_curves: has_curve,
        pps_per_core: profile.tsc_hz / c.total(),
        core_year_usd: opts.core_year_usd,
        baseline,
        scenarios: scen,
        notes,
    })
}

/// Cores needed at each miss rate in `rates`, for the baseline and each scenario:
/// `(name, [(miss rate, cores)])`. Entries that cannot be planned are left out.
pub fn cores_vs_miss_rate(
    profile: &Profile,
    w: &Workload,
    opts: &Options,
    rates: &[f64],
) -> Vec<(String, Vec<(f64, u64)>)> {
    let mut all = vec![("baseline".to_string(), WhatIf::NONE)];
    all.extend(scenarios(opts));
    all.into_iter()
        .map(|(name, what)| {
            let pts = rates
                .iter()
                .filter_map(|&m| {
                    let wm = Workload { miss_rate: m, ..*w };
                    outcome(profile, &wm, opts, &what, &name, None)
                        .ok()
                        .map(|o| (m, o.cores))
                })
                .collect();
            (name, pts)
        })
        .collect()
}
