//! The what-if scenarios and their answers: a faster miss path, cores kept for misses,
//! hits offloaded to hardware, all together; each sized like the baseline.

use super::cost::{solve, Workload};
use crate::profile::{ClassCosts, Profile};
use serde::Serialize;

/// A what-if: any of a faster miss path, cores kept for misses, hits offloaded.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WhatIf {
    /// The miss path is this many times faster (1 = as measured).
    pub miss_speedup: f64,
    /// Misses are handled only on this many dedicated cores.
    pub miss_cores: Option<u64>,
    /// This share of the hits is forwarded by hardware, up to `offload_pps`.
    pub offload_share: f64,
    pub offload_pps: f64,
}

impl WhatIf {
    pub const NONE: WhatIf = WhatIf {
        miss_speedup: 1.0,
        miss_cores: None,
        offload_share: 0.0,
        offload_pps: 0.0,
    };
}

/// The planner's inputs besides the workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Share of each core kept free, 0..1.
    pub headroom: f64,
    /// Scenario (a): the miss path this many times faster.
    pub miss_speedup: f64,
    /// Scenario (b): cores dedicated to misses.
    pub miss_cores: Option<u64>,
    /// Scenario (c): share of hits offloaded to hardware, and the hardware's rate.
    pub offload_share: Option<f64>,
    pub offload_pps: f64,
    /// Scenario (d): yearly revenue of a server core, USD.
    pub core_year_usd: f64,
    /// Scenario (e): a new-flow flood of this many packets per second on top of the
    /// service, sized undefended and with the datapath's miss budget.
    pub attack_pps: Option<f64>,
    /// The miss budget of scenario (e): the most of each core the slow path takes while
    /// hits are served (flowpath's default `slow_path_share`).
    pub attack_budget: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            headroom: 0.0,
            miss_speedup: 10.0,
            miss_cores: None,
            offload_share: None,
            offload_pps: 90e6,
            core_year_usd: 1000.0,
            attack_pps: None,
            attack_budget: 0.5,
        }
    }
}

/// One answer: the baseline or a scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    pub name: String,
    /// Server cores needed (for (b): the hit cores plus the miss cores).
    pub cores: u64,
    /// Mean utilisation of those cores.
    pub utilisation: f64,
    /// Share of the server's cycles that goes to misses.
    pub miss_share_of_cycles: f64,
    /// Server cycles per offered packet.
    pub cycles_per_packet: f64,
    /// Baseline server cycles per packet over this one's (for the miss-path scenario:
    /// Amdahl's S with p = the baseline's miss share). Infinite (`null` in JSON) when
    /// the scenario leaves the server no work (every packet offloaded).
    pub speedup: f64,
    /// Baseline cores minus these (negative: more cores).
    pub cores_freed: i64,
    /// `cores_freed · core_year_usd`.
    pub usd_per_year_saved: f64,
    /// Scaling efficiency beyond the profile's measured core counts was used.
    pub extrapolated: bool,
    /// Scenario (b): cores the misses need, and the hit cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_cores_needed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_cores: Option<u64>,
    /// Scenario (c): packets per second the hardware forwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offloaded_pps: Option<f64>,
    /// Remarks, one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Server load of a workload under a what-if: (cycles per second on hit cores or all
/// cores, cycles per second of misses, hardware-forwarded pps).
pub(super) fn load(costs: &ClassCosts, w: &Workload, what: &WhatIf) -> (f64, f64, f64) {
    let c = costs.cycles(w.miss_rate, w.frame_bytes);
    let hit_pps = (1.0 - w.miss_rate) * w.pps;
    let offloaded = (what.offload_share * hit_pps)
        .min(what.offload_pps)
        .max(0.0);
    let per_hit = costs.hit.at(w.frame_bytes);
    let hits = (w.pps * c.hits - offloaded * per_hit).max(0.0);
    let misses = w.pps * c.misses / what.miss_speedup;
    (hits, misses, offloaded)
}

/// The outcome of one what-if; `baseline` fills the comparisons (None: this is it).
pub fn outcome(
    profile: &Profile,
    w: &Workload,
    opts: &Options,
    what: &WhatIf,
    name: &str,
    baseline: Option<&Outcome>,
) -> Result<Outcome, String> {
    let costs = profile.classes.get(w.class);
    let usable = 1.0 - opts.headroom;
    let (hits, misses, offloaded) = load(costs, w, what);
    let mut notes = Vec::new();
    let (cores, utilisation, extrapolated, miss_needed, hit_cores) =
        sized(profile, (hits, misses), usable, what.miss_cores, &mut notes)?;
    // Per packet; at no load, the limit as the rate goes to 0 (no hardware rate cap).
    let (cycles_per_packet, miss_share) = {
        let wp = Workload {
            pps: if w.pps > 0.0 { w.pps } else { 1.0 },
            ..*w
        };
        let (h, m, _) = load(costs, &wp, what);
        (
            (h + m) / wp.pps,
            if h + m > 0.0 { m / (h + m) } else { 0.0 },
        )
    };
    if what.offload_share > 0.0 {
        let want = what.offload_share * (1.0 - w.miss_rate) * w.pps;
        if want > what.offload_pps {
            notes.push(format!(
                "the hardware forwards {} of the {} hits asked of it (its rate limit)",
                crate::units::fmt_pps(what.offload_pps),
                crate::units::fmt_pps(want)
            ));
        }
    }
    let (speedup, cores_freed) = match baseline {
        Some(b) => (
            if cycles_per_packet > 0.0 {
                b.cycles_per_packet / cycles_per_packet
            } else {
                f64::INFINITY
            },
            b.cores as i64 - cores as i64,
        ),
        None => (1.0, 0),
    };
    Ok(Outcome {
        name: name.to_string(),
        cores,
        utilisation,
        miss_share_of_cycles: miss_share,
        cycles_per_packet,
        speedup,
        cores_freed,
        usd_per_year_saved: cores_freed as f64 * opts.core_year_usd,
        extrapolated,
        miss_cores_needed: miss_needed,
        hit_cores,
        offloaded_pps: (what.offload_share > 0.0).then_some(offloaded),
        notes,
    })
}

/// (cores, utilisation, extrapolated, miss cores needed, hit cores) for `hits` and
/// `misses` cycles per second: one pool, or with `miss_cores` set aside for the misses.
type Sized = (u64, f64, bool, Option<u64>, Option<u64>);

fn sized(
    profile: &Profile,
    (hits, misses): (f64, f64),
    usable: f64,
    miss_cores: Option<u64>,
    notes: &mut Vec<String>,
) -> Result<Sized, String> {
    let demand = hits + misses;
    Ok(match miss_cores {
        None => {
            let s = solve(profile, demand, usable)?;
            (s.cores, s.utilisation, s.extrapolated, None, None)
        }
        Some(n) => {
            let h = solve(profile, hits, usable)?;
            let m = solve(profile, misses, usable)?;
            let miss_cores = n.max(m.cores);
            if m.cores > n {
                notes.push(format!(
                    "{n} cores cannot carry the misses, they need {}: counted {}",
                    m.cores, m.cores
                ));
            } else if n > 0 {
                notes.push(format!("the misses need {} of the {n} miss cores", m.cores));
            }
            let (e, ex) = profile.efficiency(miss_cores);
            let capacity = h.cores as f64 * h.efficiency * profile.tsc_hz
                + miss_cores as f64 * e * profile.tsc_hz;
            let util = if capacity > 0.0 {
                demand / capacity
            } else {
                0.0
            };
            (
                h.cores + miss_cores,
                util,
                h.extrapolated || (ex && miss_cores > 0),
                Some(m.cores),
                Some(h.cores),
            )
        }
    })
}

/// The scenarios `opts` asks for, by name: (a) always, (b) and (c) when given, and all of
/// them together when (b) or (c) is given (the talk's hardware chart combined a 10x
/// faster miss path, 8 miss cores and 90 Mpps of offload).
pub fn scenarios(opts: &Options) -> Vec<(String, WhatIf)> {
    let mut v = Vec::new();
    let s = opts.miss_speedup;
    v.push((
        format!("miss path {}x faster", trim_num(s)),
        WhatIf {
            miss_speedup: s,
            ..WhatIf::NONE
        },
    ));
    if let Some(n) = opts.miss_cores {
        v.push((
            format!("{n} cores for misses"),
            WhatIf {
                miss_cores: Some(n),
                ..WhatIf::NONE
            },
        ));
    }
    if let Some(f) = opts.offload_share {
        v.push((
            format!(
                "{} of hits offloaded (hw {})",
                crate::units::pct(f),
                crate::units::fmt_pps(opts.offload_pps)
            ),
            WhatIf {
                offload_share: f,
                offload_pps: opts.offload_pps,
                ..WhatIf::NONE
            },
        ));
    }
    if opts.miss_cores.is_some() || opts.offload_share.is_some() {
        v.push((
            "all of the above".to_string(),
            WhatIf {
                miss_speedup: s,
                miss_cores: opts.miss_cores,
                offload_share: opts.offload_share.unwrap_or(0.0),
                offload_pps: opts.offload_pps,
            },
        ));
    }
    v
}

fn trim_num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
