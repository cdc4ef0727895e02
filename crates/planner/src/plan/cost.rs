//! The arithmetic of one load: cycles per packet from a class's costs at a miss rate and
//! frame size, and the fewest cores that carry a number of cycles per second.

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
pub(crate) fn interpolate(pts: &[(f64, f64)], x: f64) -> f64 {
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
    first_cores(profile, lower as u64, |n, e, extrapolated| {
        (n as f64 * e * per_core >= demand).then(|| Solved {
            cores: n,
            utilisation: demand / (n as f64 * e * profile.tsc_hz),
            efficiency: e,
            extrapolated,
        })
    })
}

/// The answer for the first core count from `from` up that `fits` (given the count, its
/// efficiency and whether that was extrapolated) accepts; an error past [`MAX_CORES`].
pub(super) fn first_cores<T>(
    profile: &Profile,
    from: u64,
    mut fits: impl FnMut(u64, f64, bool) -> Option<T>,
) -> Result<T, String> {
    let mut n = from;
    loop {
        let (e, extrapolated) = profile.efficiency(n);
        if let Some(t) = fits(n, e, extrapolated) {
            return Ok(t);
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
