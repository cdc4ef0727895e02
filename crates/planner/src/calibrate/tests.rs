//! Calibration from suite results: per-byte fits, curves, scaling, the profile's notes.

use super::*;

#[test]
fn line_fit_recovers_slope_and_flags_noise() {
    let pts: Vec<(f64, f64)> = [64.0, 512.0, 1518.0]
        .iter()
        .flat_map(|&x| [(x, 100.0 + 0.1 * x - 1.0), (x, 100.0 + 0.1 * x + 1.0)])
        .collect();
    let f = fit_line(&pts).unwrap();
    assert!((f.slope - 0.1).abs() < 1e-9 && (f.intercept - 100.0).abs() < 1e-6);
    assert!(f.significant());
    // Flat with noise: the slope is within two standard errors of 0.
    let flat = [
        (64.0, 100.0),
        (64.0, 120.0),
        (1518.0, 101.0),
        (1518.0, 121.0),
    ];
    assert!(!fit_line(&flat).unwrap().significant());
    assert!(fit_line(&[(1.0, 1.0), (2.0, 2.0)]).is_none());
    assert!(fit_line(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]).is_none());
}
