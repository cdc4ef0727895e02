//! The check's prediction as an interval: the planner's point prediction widened by the
//! calibration's own run-to-run spread ([`Band`]s in the profile), and the verdict on a
//! measurement: its median inside or outside, with the interval's relative width beside
//! it (a wide interval is a weak check, and says so).
//!
//! The spread is the runs' min–max, not a quantile band: on the machines this runs on a
//! datapath instance runs at one of two speeds throughout, so a median can land anywhere
//! a single run was seen to land, and a 10–90 % band of 5–15 runs is mostly the min and
//! max anyway.

use crate::plan::interpolate;
use crate::profile::Band;
use flowpath_gen::TrafficClass;
use serde::{Deserialize, Serialize};

/// A predicted interval and what a measurement made of it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// Mpps per core: the interval's ends around the point prediction.
    pub low: f64,
    pub high: f64,
    /// `(high − low) / point prediction`.
    pub width: f64,
    /// The measured median lies within `low..=high`.
    pub inside: bool,
}

/// The relative spread (low, high; shares of the median) the calibration saw around the
/// point that a prediction for `class` at `frame_bytes`, `miss_rate` on `cores` rests on:
/// the one-core bands of that class at the measured frame size nearest `frame_bytes`,
/// interpolated in the miss rate (clamped to the measured ends); on several cores also
/// times the band of that many cores' scaling points (their aggregate's spread), when
/// the profile has one. None when the profile has no band for the class.
pub fn band_at(
    bands: &[Band],
    class: TrafficClass,
    frame_bytes: f64,
    miss_rate: f64,
    cores: u64,
) -> Option<(f64, f64)> {
    let one: Vec<&Band> = bands
        .iter()
        .filter(|b| b.class == class && b.cores == 1)
        .collect();
    let nearest = one
        .iter()
        .map(|b| b.frame_bytes)
        .min_by(|a, b| (a - frame_bytes).abs().total_cmp(&(b - frame_bytes).abs()))?;
    let mut at: Vec<&Band> = one
        .into_iter()
        .filter(|b| b.frame_bytes == nearest)
        .collect();
    at.sort_by(|a, b| a.miss_rate.total_cmp(&b.miss_rate));
    let lows: Vec<(f64, f64)> = at.iter().map(|b| (b.miss_rate, b.low)).collect();
    let highs: Vec<(f64, f64)> = at.iter().map(|b| (b.miss_rate, b.high)).collect();
    let (mut low, mut high) = (
        interpolate(&lows, miss_rate),
        interpolate(&highs, miss_rate),
    );
    if cores > 1 {
        if let Some(s) = bands.iter().find(|b| b.cores == cores) {
            low *= s.low;
            high *= s.high;
        }
    }
    Some((low, high))
}

/// The interval `predicted · (low, high)` and whether `measured` lies in it.
pub fn judge(predicted: f64, (low, high): (f64, f64), measured: f64) -> Judged {
    let (lo, hi) = (predicted * low, predicted * high);
    Judged {
        low: lo,
        high: hi,
        width: if predicted > 0.0 {
            (hi - lo) / predicted
        } else {
            f64::INFINITY
        },
        inside: (lo..=hi).contains(&measured),
    }
}

/// A calibration point's band from its runs' rates: (min / median, max / median). None
/// for an empty or zero median.
pub fn band_of(median: f64, min: f64, max: f64) -> Option<(f64, f64)> {
    (median > 0.0 && min > 0.0).then(|| ((min / median).min(1.0), (max / median).max(1.0)))
}
