//! The check's interval: bands from synthetic spreads, the verdict inside or outside, the
//! width; and the profile's optional parts (bands, conntrack) old files do without.

use flowpath_bench::suite::Spread;
use flowpath_gen::FrameMix;
use flowpath_gen::TrafficClass;
use flowpath_planner::check::{compare, verdict, CheckWorkload, Measured};
use flowpath_planner::interval::{band_at, band_of, judge};
use flowpath_planner::profile::{builtin, parse_toml, to_toml, Band, CtCosts};

fn band(class: TrafficClass, fb: f64, m: f64, cores: u64, low: f64, high: f64) -> Band {
    Band {
        class,
        frame_bytes: fb,
        miss_rate: m,
        cores,
        low,
        high,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_spread_becomes_shares_of_its_median() {
    assert_eq!(band_of(20.0, 15.0, 30.0), Some((0.75, 1.5)));
    // The median outside min..max cannot make low above 1 or high below 1.
    assert_eq!(band_of(10.0, 11.0, 9.0), Some((1.0, 1.0)));
    assert_eq!(band_of(0.0, 1.0, 2.0), None);
}

#[test]
fn inside_outside_and_width() {
    // The brief's miss: predicted 28.22, measured median 21.56; runs of the calibration
    // point spread 0.63..1.12 of their median.
    let j = judge(28.22, (0.63, 1.12), 21.56);
    assert!(j.inside);
    assert!(close(j.low, 28.22 * 0.63) && close(j.high, 28.22 * 1.12));
    assert!(close(j.width, 0.49));
    // A tight band misses the same measurement.
    let j = judge(28.22, (0.95, 1.05), 21.56);
    assert!(!j.inside);
    assert!(close(j.width, 0.10));
    // The ends are inside; just beyond them is not.
    assert!(judge(10.0, (0.9, 1.1), 9.0).inside);
    assert!(judge(10.0, (0.9, 1.1), 11.0).inside);
    assert!(!judge(10.0, (0.9, 1.1), 11.0001).inside);
    assert!(!judge(10.0, (0.9, 1.1), 8.9999).inside);
}

#[test]
fn bands_interpolate_in_miss_rate_at_the_nearest_frame_and_multiply_for_cores() {
    let v4 = TrafficClass::Ipv4;
    let bands = vec![
        band(v4, 64.0, 0.0, 1, 0.8, 1.2),
        band(v4, 64.0, 0.1, 1, 0.6, 1.4),
        band(v4, 1518.0, 0.0, 1, 0.99, 1.01),
        band(v4, 1518.0, 0.1, 1, 0.97, 1.03),
        band(v4, 64.0, 0.0, 2, 0.9, 1.05),
        band(TrafficClass::Ipv6, 66.0, 0.0, 1, 0.5, 2.0),
    ];
    let (l, h) = band_at(&bands, v4, 64.0, 0.05, 1).unwrap();
    assert!(close(l, 0.7) && close(h, 1.3));
    // Beyond the measured rates: the last band.
    let (l, h) = band_at(&bands, v4, 64.0, 0.5, 1).unwrap();
    assert!(close(l, 0.6) && close(h, 1.4));
    // 1000 B is nearer 1518 than 64.
    let (l, h) = band_at(&bands, v4, 1000.0, 0.0, 1).unwrap();
    assert!(close(l, 0.99) && close(h, 1.01));
    // Two cores: the one-core band times the scaling point's.
    let (l, h) = band_at(&bands, v4, 64.0, 0.0, 2).unwrap();
    assert!(close(l, 0.72) && close(h, 1.26));
    // Four cores unmeasured: the one-core band alone.
    let (l, h) = band_at(&bands, v4, 64.0, 0.0, 4).unwrap();
    assert!(close(l, 0.8) && close(h, 1.2));
    assert!(band_at(&bands, TrafficClass::Vxlan, 96.0, 0.0, 1).is_none());
}

fn measured(w: CheckWorkload, median: f64) -> Measured {
    Measured {
        workload: w,
        frame_bytes: 64.0,
        mpps: Spread::of(&[median * 0.9, median, median * 1.1]),
        observed_miss_rate: w.miss_rate,
        packets_per_run: 1000,
    }
}

#[test]
fn the_check_judges_each_workload_by_its_interval() {
    let mut p = builtin("ovs-kernel").unwrap();
    p.scaling = vec![1.0, 0.9];
    let w = |cores| CheckWorkload {
        class: TrafficClass::Ipv4,
        mix: FrameMix::Fixed(64),
        miss_rate: 0.0,
        cores,
    };
    // 2.6 GHz / 4,600 cycles a hit: 0.5652 Mpps a core.
    let pred = 2.6e9 / 4600.0 / 1e6;
    let m = [measured(w(1), pred * 0.85), measured(w(1), pred * 0.7)];
    // Without bands (an old profile): no interval, and the verdict says so.
    let rows = compare(&p, &m).unwrap();
    assert!(rows.iter().all(|r| r.interval.is_none()));
    assert!(verdict(&rows, &p).contains("no interval"));
    p.bands = Some(vec![band(TrafficClass::Ipv4, 64.0, 0.0, 1, 0.8, 1.1)]);
    let rows = compare(&p, &m).unwrap();
    let (a, b) = (rows[0].interval.unwrap(), rows[1].interval.unwrap());
    assert!(a.inside && !b.inside);
    assert!(close(a.width, 0.3));
    let v = verdict(&rows, &p);
    assert!(v.contains("1 of 2 measured medians inside"), "{v}");
    assert!(v.contains("median 30 %"), "{v}");
    assert!(flowpath_planner::check::table(&rows).contains("OUTSIDE"));
}

#[test]
fn old_profiles_load_without_the_optional_parts_and_new_ones_round_trip() {
    // The built-in profiles predate bands and conntrack.
    let old = builtin("ovs-kernel").unwrap();
    assert!(old.bands.is_none() && old.conntrack.is_none());
    let text = to_toml(&old);
    assert!(!text.contains("bands") && !text.contains("[conntrack]"));
    let mut p = old.clone();
    p.bands = Some(vec![band(TrafficClass::Vxlan, 96.0, 0.5, 1, 0.9, 1.2)]);
    p.conntrack = Some(CtCosts {
        new_connection_cycles: 2500.0,
        established_packet_cycles: 180.5,
        syn_cycles: None,
    });
    assert_eq!(parse_toml(&to_toml(&p), "p").unwrap(), p);
    p.conntrack = Some(CtCosts {
        syn_cycles: Some(900.0),
        ..p.conntrack.unwrap()
    });
    assert_eq!(parse_toml(&to_toml(&p), "p").unwrap(), p);
}

#[test]
fn bad_optional_parts_are_named() {
    let base = to_toml(&builtin("ovs-kernel").unwrap());
    let with = |extra: &str| format!("{base}\n{extra}");
    let e = parse_toml(&with("[conntrack]\nnew_connection_cycles = 1\n"), "p").unwrap_err();
    assert_eq!(e, "profile p: conntrack.established_packet_cycles: missing");
    let e = parse_toml(
        &with("[conntrack]\nnew_connection_cycles = 0\nestablished_packet_cycles = 1\n"),
        "p",
    )
    .unwrap_err();
    assert!(
        e.starts_with("profile p: conntrack.new_connection_cycles: must be positive"),
        "{e}"
    );
    let e = parse_toml(
        &with("[conntrack]\nnew_connection_cycles = 1\nestablished_packet_cycles = 1\nsyn = 3\n"),
        "p",
    )
    .unwrap_err();
    assert!(
        e.starts_with("profile p: conntrack.syn: unknown field"),
        "{e}"
    );
    let bands = "bands = [ { class = \"ipv4\", frame_bytes = 64, miss_rate = 0, cores = 1, low = 1.2, high = 1.3 } ]\n";
    let e = parse_toml(&format!("{bands}{base}"), "p").unwrap_err();
    assert!(e.starts_with("profile p: bands[0]: low and high"), "{e}");
}
