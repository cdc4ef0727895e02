//! The talk's cost model: a packet either hits the cache (`c_hit` cycles) or misses
//! (`c_miss`), so at miss rate `m` a packet costs `(1 − m)·c_hit + m·c_miss` cycles and a
//! core forwards `tsc_hz / cycles` packets per second. The suite measures the curve and
//! puts this model beside it, with both end points taken from the same run.

use super::{CurvePoint, Point};

/// Measured and modelled throughput further apart than this (relative to the model)
/// count as a disagreement, reported as such.
pub const TOLERANCE: f64 = 0.10;

/// Modelled cycles per packet at miss rate `m` (0.0..=1.0).
pub fn cycles(m: f64, c_hit: f64, c_miss: f64) -> f64 {
    (1.0 - m) * c_hit + m * c_miss
}

/// Million packets per second on one core at `cycles` per packet.
pub fn mpps(tsc_hz: f64, cycles: f64) -> f64 {
    if cycles > 0.0 {
        tsc_hz / cycles / 1e6
    } else {
        0.0
    }
}

/// `measured / model − 1`: negative when the datapath is slower than the model says.
pub fn disagreement(measured_mpps: f64, model_mpps: f64) -> f64 {
    if model_mpps > 0.0 {
        measured_mpps / model_mpps - 1.0
    } else {
        0.0
    }
}

/// True when `disagreement` is beyond [`TOLERANCE`].
pub fn disagrees(disagreement: f64) -> bool {
    disagreement.abs() > TOLERANCE
}

/// The model beside every measured point, with `hit` and `miss` as the end points.
pub fn curve(points: &[Point], hit: &Point, miss: &Point, tsc_hz: f64) -> Vec<CurvePoint> {
    points
        .iter()
        .map(|p| {
            let m = p.miss_rate;
            let model_cycles = cycles(m, hit.cycles.median, miss.cycles.median);
            let lo = cycles(m, hit.cycles.min, miss.cycles.min);
            let hi = cycles(m, hit.cycles.max, miss.cycles.max);
            let model_mpps = mpps(tsc_hz, model_cycles);
            let d = disagreement(p.mpps, model_mpps);
            CurvePoint {
                miss_rate: m,
                measured: p.clone(),
                model_cycles,
                model_cycles_lo: lo,
                model_cycles_hi: hi,
                model_mpps,
                disagreement: d,
                disagrees: disagrees(d),
                ranges_overlap: p.cycles.min <= hi && lo <= p.cycles.max,
            }
        })
        .collect()
}

/// Amdahl's law as the talk uses it: the speed-up of the whole when a share `p` of the
/// time is spent in a part that becomes `s` times faster.
pub fn amdahl(p: f64, s: f64) -> f64 {
    1.0 / ((1.0 - p) + p / s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::StageShare;
    use crate::suite::Spread;

    fn pt(m: f64, c: &[f64], hz: f64) -> Point {
        let cycles = Spread::of(c);
        Point {
            miss_rate: m,
            mpps: mpps(hz, cycles.median),
            cycles,
            packets_per_run: 1000,
            frame_bytes: 64.0,
            emc_hit_share: 1.0 - m,
            megaflow_hit_share: 0.0,
            upcall_share: m,
            stage_cycles: StageShare::default(),
            megaflows: 0,
        }
    }

    #[test]
    fn model_interpolates_cycles_not_throughput() {
        assert_eq!(cycles(0.0, 100.0, 1100.0), 100.0);
        assert_eq!(cycles(1.0, 100.0, 1100.0), 1100.0);
        assert!((cycles(0.1, 100.0, 1100.0) - 200.0).abs() < 1e-9);
        assert!((cycles(0.5, 100.0, 1100.0) - 600.0).abs() < 1e-9);
        // 2 GHz at 200 cycles is 10 Mpps; half the hit-rate Mpps, not their mean.
        assert!((mpps(2e9, 200.0) - 10.0).abs() < 1e-9);
        assert_eq!(mpps(2e9, 0.0), 0.0);
    }

    #[test]
    fn disagreement_is_relative_to_the_model() {
        assert!((disagreement(9.0, 10.0) + 0.1).abs() < 1e-12);
        assert!((disagreement(12.0, 10.0) - 0.2).abs() < 1e-12);
        assert!(!disagrees(-0.10));
        assert!(disagrees(-0.1001));
        assert!(disagrees(0.15));
        assert!(!disagrees(0.05));
    }

    #[test]
    fn curve_uses_the_end_points_and_flags_the_gap() {
        let hz = 2e9;
        let hit = pt(0.0, &[100.0, 90.0, 110.0], hz);
        let miss = pt(1.0, &[1100.0, 1000.0, 1200.0], hz);
        // At 10 %: the model says 200 cycles (10 Mpps); measured 300 (6.67 Mpps).
        let mid = pt(0.1, &[300.0, 290.0, 310.0], hz);
        // At 50 %: the model says 600 cycles; measured 620, within 10 %.
        let near = pt(0.5, &[620.0, 600.0, 640.0], hz);
        let c = curve(&[hit.clone(), mid, near, miss.clone()], &hit, &miss, hz);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].disagreement, 0.0);
        assert!(!c[0].disagrees && !c[3].disagrees);
        assert!((c[1].model_cycles - 200.0).abs() < 1e-9);
        assert!((c[1].model_mpps - 10.0).abs() < 1e-9);
        assert!((c[1].disagreement - (2.0 / 3.0 - 1.0)).abs() < 1e-9);
        assert!(c[1].disagrees);
        assert!(!c[1].ranges_overlap);
        assert!((c[1].model_cycles_lo - 181.0).abs() < 1e-9);
        assert!((c[1].model_cycles_hi - 219.0).abs() < 1e-9);
        assert!(!c[2].disagrees);
        assert!(c[2].ranges_overlap);
    }

    #[test]
    fn amdahl_matches_the_talk() {
        // 85 % hits, 75 % of the time on misses, a 10x faster miss path: S = 3.1.
        assert!((amdahl(0.75, 10.0) - 3.077).abs() < 1e-3);
    }
}
