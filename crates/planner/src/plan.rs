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

use crate::profile::{ClassCosts, Profile};
use flowpath_gen::TrafficClass;
use serde::Serialize;

/// What has to be carried.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Workload {
    pub class: TrafficClass,
    /// Packets per second offered.
    pub pps: f64,
    /// Mean frame size in bytes, FCS included.
    pub frame_bytes: f64,
    /// Share of packets that start a new flow (miss the caches), 0..=1.
    pub miss_rate: f64,
}

/// Cycles per packet, split into what hits and misses account for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cycles {
    /// `(1 − m)·hit(b)`.
    pub hits: f64,
    /// Everything above that: `m·miss(b)`, or the measured curves' excess.
    pub misses: f64,
}

impl Cycles {
    pub fn total(&self) -> f64 {
        self.hits + self.misses
    }

    /// Share of the cycles that goes to misses (Amdahl's `p`).
    pub fn miss_share(&self) -> f64 {
        let t = self.total();
        if t > 0.0 {
            self.misses / t
        } else {
            0.0
        }
    }
}

/// Linear interpolation in `pts` (sorted by x) at `x`, clamped to the ends.
fn interpolate(pts: &[(f64, f64)], x: f64) -> f64 {
    let i = pts.partition_point(|p| p.0 <= x);
    if i == 0 {
        return pts[0].1;
    }
    if i == pts.len() {
        return pts[pts.len() - 1].1;
    }
    let (a, b) = (pts[i - 1], pts[i]);
    a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)
}

impl ClassCosts {
    /// Cycles per packet at miss rate `m` (0..=1) and `frame_bytes`. With `use_curves`
    /// false, the two-cost line even where measured curves exist.
    ///
    /// With curves: each curve is interpolated at `m` (its ends are the hit and miss
    /// costs at its frame size), then the results are interpolated linearly between the
    /// curves' frame sizes; beyond the smallest or largest curve, that curve plus the
    /// per-byte terms `((1 − m)·hit.per_byte + m·miss.per_byte) · Δbytes`.
    pub fn cycles_with(&self, m: f64, frame_bytes: f64, use_curves: bool) -> Cycles {
        let m = m.clamp(0.0, 1.0);
        let hits = (1.0 - m) * self.hit.at(frame_bytes);
        let total = if use_curves && !self.curves.is_empty() {
            let at_m: Vec<(f64, f64)> = self
                .curves
                .iter()
                .map(|c| {
                    let mut pts = vec![(0.0, self.hit.at(c.frame_bytes))];
                    pts.extend(c.points.iter().map(|p| (p.miss_rate, p.cycles)));
                    pts.push((1.0, self.miss.at(c.frame_bytes)));
                    (c.frame_bytes, interpolate(&pts, m))
                })
                .collect();
            let per_byte = (1.0 - m) * self.hit.per_byte_cycles + m * self.miss.per_byte_cycles;
            let (first, last) = (at_m[0], at_m[at_m.len() - 1]);
            if frame_bytes <= first.0 {
                first.1 + per_byte * (frame_bytes - first.0)
            } else if frame_bytes >= last.0 {
                last.1 + per_byte * (frame_bytes - last.0)
            } else {
                interpolate(&at_m, frame_bytes)
            }
        } else {
            hits + m * self.miss.at(frame_bytes)
        };
        Cycles {
            hits,
            misses: (total - hits).max(0.0),
        }
    }

    /// [`Self::cycles_with`] using the measured curves where there are some.
    pub fn cycles(&self, m: f64, frame_bytes: f64) -> Cycles {
        self.cycles_with(m, frame_bytes, true)
    }
}

/// The fewest cores for a load, and how busy they are.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Solved {
    pub cores: u64,
    /// `demand / (cores · eff(cores) · tsc_hz)`; 0 for no cores.
    pub utilisation: f64,
    pub efficiency: f64,
    /// `eff(cores)` was extrapolated beyond the profile's measured core counts.
    pub extrapolated: bool,
}

/// No planner answer goes beyond this many cores.
pub const MAX_CORES: u64 = 10_000_000;

/// The smallest `n` with `n · eff(n) · tsc_hz · usable ≥ demand` (cycles per second);
/// 0 cores for no demand. `usable` is the share of a core the plan may fill
/// (1 − headroom), in (0, 1].
pub fn solve(profile: &Profile, demand: f64, usable: f64) -> Result<Solved, String> {
    if !(demand.is_finite() && demand >= 0.0) {
        return Err(format!("demand of {demand} cycles/s is not a load"));
    }
    if demand == 0.0 {
        return Ok(Solved {
            cores: 0,
            utilisation: 0.0,
            efficiency: 1.0,
            extrapolated: false,
        });
    }
    let per_core = profile.tsc_hz * usable;
    let max_eff = profile.scaling.iter().copied().fold(0.0, f64::max);
    // eff(n) ≤ max_eff for every n, so no n below demand / (per_core · max_eff) can do.
    let lower = (demand / (per_core * max_eff)).floor().max(1.0);
    if lower > MAX_CORES as f64 {
        return Err(format!("needs more than {MAX_CORES} cores"));
    }
    let mut n = lower as u64;
    loop {
        let (e, extrapolated) = profile.efficiency(n);
        if n as f64 * e * per_core >= demand {
            return Ok(Solved {
                cores: n,
                utilisation: demand / (n as f64 * e * profile.tsc_hz),
                efficiency: e,
                extrapolated,
            });
        }
        n += 1;
        if n > MAX_CORES {
            return Err(format!("needs more than {MAX_CORES} cores"));
        }
    }
}

/// Amdahl's law: the speed-up of the whole when a share `p` of the time goes to a part
/// that becomes `s` times faster, `1 / ((1 − p) + p / s)`.
pub fn amdahl(p: f64, s: f64) -> f64 {
    1.0 / ((1.0 - p) + p / s)
}

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
fn load(costs: &ClassCosts, w: &Workload, what: &WhatIf) -> (f64, f64, f64) {
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
    // With the budget: the attack's slow path grows with the cores, so search upwards.
    let mut n = baseline.cores.max(1);
    let defended = loop {
        let (e, ex) = profile.efficiency(n);
        let budget = opts.attack_budget * n as f64 * e * profile.tsc_hz;
        let attack_load = attack * c_hit + (attack * (c_miss - c_hit)).min(budget);
        let demand = service + attack_load;
        if n as f64 * e * profile.tsc_hz * usable >= demand {
            break (n, demand / (n as f64 * e * profile.tsc_hz), ex, attack_load);
        }
        n += 1;
        if n > MAX_CORES {
            return Err(format!("needs more than {MAX_CORES} cores"));
        }
    };
    let pps = if w.pps > 0.0 { w.pps } else { 1.0 };
    let mk = |name: String, cores: u64, util: f64, ex: bool, total: f64, notes: Vec<String>| {
        let cpp = total / pps;
        Outcome {
            name,
            cores,
            utilisation: util,
            miss_share_of_cycles: if total > 0.0 {
                (total - hits) / total
            } else {
                0.0
            },
            cycles_per_packet: cpp,
            speedup: if cpp > 0.0 {
                baseline.cycles_per_packet / cpp
            } else {
                f64::INFINITY
            },
            cores_freed: baseline.cores as i64 - cores as i64,
            usd_per_year_saved: (baseline.cores as i64 - cores as i64) as f64 * opts.core_year_usd,
            extrapolated: ex,
            miss_cores_needed: None,
            hit_cores: None,
            offloaded_pps: None,
            notes,
        }
    };
    let (dn, dutil, dex, dload) = defended;
    let dropped = ((attack * (c_miss - c_hit) - (dload - attack * c_hit))
        / (c_miss - c_hit).max(1.0))
    .max(0.0);
    Ok(vec![
        mk(
            format!("{rate} new-flow flood, undefended"),
            u.cores,
            u.utilisation,
            u.extrapolated,
            undefended,
            vec![format!(
                "every attack packet classified: {:.0} cycles each",
                c_miss
            )],
        ),
        mk(
            format!(
                "{rate} new-flow flood, miss budget {}",
                crate::units::pct(opts.attack_budget)
            ),
            dn,
            dutil,
            dex,
            service + dload,
            vec![format!(
                "the slow path takes at most {} of each core; about {} of attack packets dropped over it",
                crate::units::pct(opts.attack_budget),
                crate::units::fmt_pps(dropped)
            )],
        ),
    ])
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
