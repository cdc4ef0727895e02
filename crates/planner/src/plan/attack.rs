//! Scenario (e): the service under a new-flow flood, sized undefended and with the
//! datapath's miss budget.

use super::cost::{first_cores, solve};
use super::scenario::{load, Options, Outcome, WhatIf};
use super::Workload;
use crate::profile::Profile;

/// Scenario (e): cores that keep the service's rate while a new-flow flood of `attack`
/// packets per second arrives too (every attack packet a miss, at the profile's miss cost
/// for this class and frame size).
///
/// - *undefended*: every attack packet is classified, so the attack adds `attack · c_miss`
///   cycles per second;
/// - *with the miss budget*: an attack packet costs about a hit to receive, parse and look
///   up (`c_hit`); the slow path work beyond that (`c_miss − c_hit` each) is capped at the
///   budget's share of the cores; what is over it is dropped. The smallest `n` whose
///   capacity covers the service plus that capped attack load is the answer.
pub fn attack_outcomes(
    profile: &Profile,
    w: &Workload,
    opts: &Options,
    attack: f64,
    baseline: &Outcome,
) -> Result<Vec<Outcome>, String> {
    let costs = profile.classes.get(w.class);
    let usable = 1.0 - opts.headroom;
    let (hits, misses, _) = load(costs, w, &WhatIf::NONE);
    let service = hits + misses;
    let c_hit = costs.hit.at(w.frame_bytes);
    let c_miss = costs.miss.at(w.frame_bytes).max(c_hit);
    let rate = crate::units::fmt_pps(attack);
    let undefended = service + attack * c_miss;
    let u = solve(profile, undefended, usable)?;
    let flood = Flood {
        attack,
        c_hit,
        c_miss,
    };
    let d = flood.defended(profile, opts, service, baseline.cores.max(1))?;
    let dropped = ((attack * (c_miss - c_hit) - (d.attack_load - attack * c_hit))
        / (c_miss - c_hit).max(1.0))
    .max(0.0);
    let answer = Answer {
        pps: if w.pps > 0.0 { w.pps } else { 1.0 },
        hits,
        baseline,
        core_year_usd: opts.core_year_usd,
    };
    Ok(vec![
        answer.outcome(
            format!("{rate} new-flow flood, undefended"),
            (u.cores, u.utilisation, u.extrapolated),
            undefended,
            vec![format!(
                "every attack packet classified: {:.0} cycles each",
                c_miss
            )],
        ),
        answer.outcome(
            format!(
                "{rate} new-flow flood, miss budget {}",
                crate::units::pct(opts.attack_budget)
            ),
            (d.cores, d.utilisation, d.extrapolated),
            service + d.attack_load,
            vec![format!(
                "the slow path takes at most {} of each core; about {} of attack packets dropped over it",
                crate::units::pct(opts.attack_budget),
                crate::units::fmt_pps(dropped)
            )],
        ),
    ])
}

/// The flood: packets per second, and what one costs as a hit and as a miss.
struct Flood {
    attack: f64,
    c_hit: f64,
    c_miss: f64,
}

/// The cores the service needs beside a flood held to the miss budget.
struct Defended {
    cores: u64,
    utilisation: f64,
    extrapolated: bool,
    /// The flood's cycles per second on those cores (its slow path capped).
    attack_load: f64,
}

impl Flood {
    /// The fewest cores from `from` up that carry `service` plus the flood with its slow
    /// path capped at the budget (which grows with the cores, so the search goes upwards).
    fn defended(
        &self,
        profile: &Profile,
        opts: &Options,
        service: f64,
        from: u64,
    ) -> Result<Defended, String> {
        let usable = 1.0 - opts.headroom;
        first_cores(profile, from, |n, e, extrapolated| {
            let budget = opts.attack_budget * n as f64 * e * profile.tsc_hz;
            let attack_load =
                self.attack * self.c_hit + (self.attack * (self.c_miss - self.c_hit)).min(budget);
            let demand = service + attack_load;
            (n as f64 * e * profile.tsc_hz * usable >= demand).then(|| Defended {
                cores: n,
                utilisation: demand / (n as f64 * e * profile.tsc_hz),
                extrapolated,
                attack_load,
            })
        })
    }
}

/// What every flood outcome is compared with: the service's packets per second (1 for
/// none) and hit cycles per second, and the baseline.
struct Answer<'a> {
    pps: f64,
    hits: f64,
    baseline: &'a Outcome,
    core_year_usd: f64,
}

impl Answer<'_> {
    /// The outcome of `cores` (with their utilisation and whether scaling was
    /// extrapolated) carrying `total` cycles per second.
    fn outcome(
        &self,
        name: String,
        (cores, utilisation, extrapolated): (u64, f64, bool),
        total: f64,
        notes: Vec<String>,
    ) -> Outcome {
        let cpp = total / self.pps;
        let freed = self.baseline.cores as i64 - cores as i64;
        Outcome {
            name,
            cores,
            utilisation,
            miss_share_of_cycles: if total > 0.0 {
                (total - self.hits) / total
            } else {
                0.0
            },
            cycles_per_packet: cpp,
            speedup: if cpp > 0.0 {
                self.baseline.cycles_per_packet / cpp
            } else {
                f64::INFINITY
            },
            cores_freed: freed,
            usd_per_year_saved: freed as f64 * self.core_year_usd,
            extrapolated,
            miss_cores_needed: None,
            hit_cores: None,
            offloaded_pps: None,
            notes,
        }
    }
}
