//! The stateful planner: cores for connection tracking from two calibrated costs, cycles
//! per new connection and cycles per established packet (and a SYN's, for a flood):
//!
//! - load (cycles per second): `R·c_new + P·c_est (+ S·c_syn under a flood)`;
//! - cores: the smallest `n` with `n · eff(n) · tsc_hz · (1 − headroom) ≥ load`, which
//!   with a flat efficiency is `ceil(load / (tsc_hz · eff · (1 − headroom)))`;
//! - what-ifs in the stateless planner's style: the new-connection path `s` times faster
//!   (Amdahl, `p` = the new connections' share of the cycles), a SYN flood on top, and
//!   the money each frees or costs (cores × USD per core-year).
//!
//! The costs come from the profile's `[conntrack]` table; a profile without it cannot
//! size a stateful workload, and [`plan`] refuses with [`NOT_CALIBRATED`].

mod report;

pub use report::{html, json, table};

use crate::plan::{amdahl, solve};
use crate::profile::{CtCosts, Profile};
use serde::Serialize;

/// The refusal when the profile has no connection-tracking costs.
pub const NOT_CALIBRATED: &str =
    "not calibrated for connection tracking: run flowpath calibrate (the profile has no [conntrack] costs)";

/// The refusal of a SYN-flood what-if when the profile has no SYN cost.
pub const NO_SYN_COST: &str = "--synflood-pps: the profile has no SYN cost (conntrack.syn_cycles: the ct_synflood case was not calibrated): run flowpath calibrate";

/// What a stateful service has to carry.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// New connections per second (each costs its first packet's commit).
    pub new_conns_per_sec: f64,
    /// Packets per second of established connections.
    pub established_pps: f64,
    /// The what-if: a SYN flood of this many packets per second on top.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synflood_pps: Option<f64>,
}

/// The stateful planner's options.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Share of each core kept free, 0..1.
    pub headroom: f64,
    /// The what-if: the new-connection path this many times faster.
    pub new_conn_speedup: f64,
    /// Yearly revenue of a server core, USD.
    pub core_year_usd: f64,
}

/// One answer: the baseline or a what-if.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    pub name: String,
    pub cores: u64,
    /// `load / (cores · eff(cores) · tsc_hz)`.
    pub utilisation: f64,
    /// Cycles per second of the whole load.
    pub cycles_per_second: f64,
    /// Share of those cycles new connections take (Amdahl's `p`).
    pub new_conn_share_of_cycles: f64,
    /// Baseline cycles per second over this one's (below 1: more work).
    pub speedup: f64,
    /// Baseline cores minus these (negative: more cores).
    pub cores_freed: i64,
    /// `cores_freed · core_year_usd` (negative: what the what-if costs).
    pub usd_per_year_saved: f64,
    /// The profile's efficiency beyond its measured core counts was used.
    pub extrapolated: bool,
}

/// A stateful plan: the workload, the costs it used, the baseline and the what-ifs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub profile: String,
    pub workload: Workload,
    pub costs: CtCosts,
    pub headroom: f64,
    pub tsc_hz: f64,
    pub core_year_usd: f64,
    /// The baseline's cores (also in `baseline`).
    pub cores: u64,
    pub baseline: Outcome,
    pub scenarios: Vec<Outcome>,
    pub notes: Vec<String>,
}

/// Cycles per second: (new connections', established packets', SYNs').
pub fn load(c: &CtCosts, w: &Workload, new_conn_speedup: f64) -> (f64, f64, f64) {
    (
        w.new_conns_per_sec * c.new_connection_cycles / new_conn_speedup,
        w.established_pps * c.established_packet_cycles,
        w.synflood_pps.unwrap_or(0.0) * c.syn_cycles.unwrap_or(0.0),
    )
}

/// Check a workload and options; errors name the option.
pub fn validate(w: &Workload, o: &Options) -> Result<(), String> {
    let rate = |name: &str, v: f64| {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(format!("{name}: must be a rate of 0 or more (got {v})"))
        }
    };
    rate("--new-conns-per-sec", w.new_conns_per_sec)?;
    rate("--established-pps", w.established_pps)?;
    if let Some(s) = w.synflood_pps {
        rate("--synflood-pps", s)?;
    }
    if !(0.0..1.0).contains(&o.headroom) {
        return Err(format!(
            "--headroom: must be below 100 % (got {})",
            crate::units::pct(o.headroom)
        ));
    }
    if !(o.new_conn_speedup.is_finite() && o.new_conn_speedup > 0.0) {
        return Err(format!(
            "--miss-speedup: must be a positive factor (got {})",
            o.new_conn_speedup
        ));
    }
    if !(o.core_year_usd.is_finite() && o.core_year_usd >= 0.0) {
        return Err(format!(
            "--core-year-usd: must not be negative (got {})",
            o.core_year_usd
        ));
    }
    Ok(())
}

/// The outcome of `(new connections', established', SYNs')` cycles per second;
/// `baseline` fills the comparisons.
fn outcome(
    profile: &Profile,
    name: &str,
    (new, est, syn): (f64, f64, f64),
    o: &Options,
    baseline: Option<&Outcome>,
) -> Result<Outcome, String> {
    let total = new + est + syn;
    let s = solve(profile, total, 1.0 - o.headroom)?;
    let (speedup, cores_freed) = match baseline {
        Some(b) if total > 0.0 => (b.cycles_per_second / total, b.cores as i64 - s.cores as i64),
        Some(b) => (f64::INFINITY, b.cores as i64 - s.cores as i64),
        None => (1.0, 0),
    };
    Ok(Outcome {
        name: name.to_string(),
        cores: s.cores,
        utilisation: s.utilisation,
        cycles_per_second: total,
        new_conn_share_of_cycles: if total > 0.0 { new / total } else { 0.0 },
        speedup,
        cores_freed,
        usd_per_year_saved: cores_freed as f64 * o.core_year_usd,
        extrapolated: s.extrapolated,
    })
}

/// Plan `w` with `profile`'s connection-tracking costs: the baseline (new connections and
/// established packets), the new-connection path `new_conn_speedup` times faster, and,
/// with `synflood_pps`, the flood on top of the baseline.
pub fn plan(profile: &Profile, w: &Workload, o: &Options) -> Result<Plan, String> {
    let costs = profile
        .conntrack
        .ok_or_else(|| NOT_CALIBRATED.to_string())?;
    validate(w, o)?;
    if w.synflood_pps.is_some() && costs.syn_cycles.is_none() {
        return Err(NO_SYN_COST.into());
    }
    let calm = Workload {
        synflood_pps: None,
        ..*w
    };
    let base = outcome(profile, "baseline", load(&costs, &calm, 1.0), o, None)?;
    let s = o.new_conn_speedup;
    let mut faster = outcome(
        profile,
        &format!("new-connection path {}x faster", trim(s)),
        load(&costs, &calm, s),
        o,
        Some(&base),
    )?;
    // Amdahl's law with p = the new connections' share: exactly the cycle ratio.
    faster.speedup = amdahl(base.new_conn_share_of_cycles, s);
    let mut scenarios = vec![faster];
    if let Some(f) = w.synflood_pps {
        scenarios.push(outcome(
            profile,
            &format!("SYN flood of {}", crate::units::fmt_pps(f)),
            load(&costs, w, 1.0),
            o,
            Some(&base),
        )?);
    }
    let mut notes = Vec::new();
    if base.extrapolated || scenarios.iter().any(|s| s.extrapolated) {
        notes.push(format!(
            "scaling beyond {} core(s) is extrapolated with the last measured efficiency ({})",
            profile.scaling.len(),
            crate::units::pct(*profile.scaling.last().unwrap_or(&1.0))
        ));
    }
    Ok(Plan {
        profile: profile.name.clone(),
        workload: *w,
        costs,
        headroom: o.headroom,
        tsc_hz: profile.tsc_hz,
        core_year_usd: o.core_year_usd,
        cores: base.cores,
        baseline: base,
        scenarios,
        notes,
    })
}

/// Packets per second one core forwards when a share `s` of the packets opens a new
/// connection and the rest are established: `tsc_hz / ((1 − s)·c_est + s·c_new)`.
pub fn pps_per_core(c: &CtCosts, tsc_hz: f64, s: f64) -> f64 {
    tsc_hz / ((1.0 - s) * c.established_packet_cycles + s * c.new_connection_cycles)
}

fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
