//! The stateful planner: its arithmetic against hand-worked numbers, the refusal of a
//! profile without connection-tracking costs, and the command line's errors.

use flowpath_planner::input::PlanInput;
use flowpath_planner::profile::{builtin, CtCosts, Profile};
use flowpath_planner::stateful::{self, plan, Options, Workload, NOT_CALIBRATED, NO_SYN_COST};

const HZ: f64 = 2.0e9;

fn profile(scaling: Vec<f64>, syn: Option<f64>) -> Profile {
    let mut p = builtin("ovs-kernel").unwrap();
    p.tsc_hz = HZ;
    p.scaling = scaling;
    p.conntrack = Some(CtCosts {
        new_connection_cycles: 20_000.0,
        established_packet_cycles: 400.0,
        syn_cycles: syn,
    });
    p
}

fn opts() -> Options {
    Options {
        headroom: 0.0,
        new_conn_speedup: 10.0,
        core_year_usd: 1000.0,
    }
}

fn w(r: f64, p: f64, s: Option<f64>) -> Workload {
    Workload {
        new_conns_per_sec: r,
        established_pps: p,
        synflood_pps: s,
    }
}

#[test]
fn cores_are_the_load_over_a_core_rounded_up() {
    // 100k conns/s × 20,000 + 10 Mpps × 400 = 2e9 + 4e9 = 6e9 cycles/s: 3 cores at 2 GHz.
    let p = plan(&profile(vec![1.0], None), &w(1e5, 1e7, None), &opts()).unwrap();
    assert_eq!(p.baseline.cycles_per_second, 6e9);
    assert_eq!(p.cores, 3);
    assert!((p.baseline.utilisation - 1.0).abs() < 1e-12);
    assert!((p.baseline.new_conn_share_of_cycles - 1.0 / 3.0).abs() < 1e-12);
    // One cycle more needs a fourth core.
    let p = plan(&profile(vec![1.0], None), &w(1e5, 1e7 + 1.0, None), &opts()).unwrap();
    assert_eq!(p.cores, 4);
}

#[test]
fn efficiency_and_headroom_shrink_a_core() {
    // 6e9 cycles/s at 80 % efficiency: 6e9 / (2e9 · 0.8) = 3.75 → 4 cores.
    let p = plan(&profile(vec![1.0, 0.8], None), &w(1e5, 1e7, None), &opts()).unwrap();
    assert_eq!(p.cores, 4);
    assert!((p.baseline.utilisation - 6e9 / (4.0 * 0.8 * HZ)).abs() < 1e-12);
    assert!(p.notes.iter().any(|n| n.contains("extrapolated")));
    // 25 % headroom at full efficiency: 6e9 / 1.5e9 = 4 cores exactly.
    let o = Options {
        headroom: 0.25,
        ..opts()
    };
    let p = plan(&profile(vec![1.0], None), &w(1e5, 1e7, None), &o).unwrap();
    assert_eq!(p.cores, 4);
}

#[test]
fn what_ifs_amdahl_the_flood_and_the_money() {
    let p = plan(
        &profile(vec![1.0], Some(1000.0)),
        &w(1e5, 1e7, Some(4e6)),
        &opts(),
    )
    .unwrap();
    // The new-connection path 10x faster: 2e8 + 4e9 = 4.2e9 → 3 cores, Amdahl with p = 1/3.
    let faster = &p.scenarios[0];
    assert_eq!(faster.name, "new-connection path 10x faster");
    assert_eq!(faster.cycles_per_second, 4.2e9);
    assert_eq!(faster.cores, 3);
    assert!((faster.speedup - 1.0 / (2.0 / 3.0 + 1.0 / 30.0)).abs() < 1e-12);
    assert!((faster.speedup - 6.0 / 4.2).abs() < 1e-12);
    assert_eq!(faster.cores_freed, 0);
    // A 4 Mpps SYN flood at 1,000 cycles a SYN: 4e9 more → 1e10 cycles/s, 5 cores: two
    // more than the baseline, $2,000 a year.
    let flood = &p.scenarios[1];
    assert_eq!(flood.cycles_per_second, 1e10);
    assert_eq!(flood.cores, 5);
    assert_eq!(flood.cores_freed, -2);
    assert_eq!(flood.usd_per_year_saved, -2000.0);
    // The baseline does not include the flood.
    assert_eq!(p.cores, 3);
    let text = stateful::table(&p, &profile(vec![1.0], Some(1000.0)));
    assert!(
        text.contains("SYN flood of 4 Mpps") && text.contains("-$2,000"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&stateful::json(&p)).unwrap();
    assert_eq!(json["cores"], 3);
    let html = stateful::html(&p, &profile(vec![1.0], None));
    let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap() + 6];
    roxmltree::Document::parse(svg).expect("the model chart is well-formed SVG");
    assert!(svg.contains("model"));
}

#[test]
fn a_profile_without_conntrack_costs_is_refused() {
    let old = builtin("ovs-kernel").unwrap();
    assert!(old.conntrack.is_none());
    let e = plan(&old, &w(1e5, 1e6, None), &opts()).unwrap_err();
    assert_eq!(e, NOT_CALIBRATED);
    assert!(e.starts_with("not calibrated for connection tracking: run flowpath calibrate"));
    // A flood what-if needs the SYN cost.
    let e = plan(&profile(vec![1.0], None), &w(1e5, 1e6, Some(1e6)), &opts()).unwrap_err();
    assert_eq!(e, NO_SYN_COST);
    // Without a flood, no SYN cost is needed.
    assert!(plan(&profile(vec![1.0], None), &w(1e5, 1e6, None), &opts()).is_ok());
}

fn stateful_input(r: Option<&str>, p: Option<&str>) -> PlanInput {
    PlanInput {
        new_conns_per_sec: r.map(str::to_string),
        established_pps: p.map(str::to_string),
        ..PlanInput::default()
    }
}

fn refused<T: std::fmt::Debug>(r: Result<T, String>, prefix: &str) {
    let e = r.expect_err("should be refused");
    assert!(
        !e.contains('\n') && e.starts_with(prefix),
        "{e:?} vs {prefix:?}"
    );
}

#[test]
fn the_command_line_parses_rates_and_names_bad_options() {
    let i = stateful_input(Some("50k"), Some("2Mpps"));
    assert!(i.is_stateful());
    let (w, o) = i.parse_stateful().unwrap();
    assert_eq!(w.new_conns_per_sec, 5e4);
    assert_eq!(w.established_pps, 2e6);
    assert_eq!(w.synflood_pps, None);
    assert_eq!(o.new_conn_speedup, 10.0);
    // Either alone; the other is 0. `/s` and a bare 0 are fine.
    let (w, _) = stateful_input(Some("1200/s"), None)
        .parse_stateful()
        .unwrap();
    assert_eq!((w.new_conns_per_sec, w.established_pps), (1200.0, 0.0));
    let (w, _) = stateful_input(Some("0"), Some("1M"))
        .parse_stateful()
        .unwrap();
    assert_eq!(w.new_conns_per_sec, 0.0);
    refused(
        stateful_input(Some("-5k"), Some("1M")).parse_stateful(),
        "--new-conns-per-sec: ",
    );
    refused(
        stateful_input(Some("lots"), None).parse_stateful(),
        "--new-conns-per-sec: ",
    );
    refused(
        stateful_input(None, Some("10Gbps")).parse_stateful(),
        "--established-pps: ",
    );
    let mut i = stateful_input(Some("1k"), Some("1M"));
    i.synflood_pps = Some("fast".into());
    refused(i.parse_stateful(), "--synflood-pps: ");
    // The stateless options are another model: refused by name.
    let mut i = stateful_input(Some("1k"), Some("1M"));
    i.rate = "10Mpps".into();
    refused(i.parse_stateful(), "--rate: not used by a stateful plan");
    let mut i = stateful_input(Some("1k"), Some("1M"));
    i.attack_rate = Some("1M".into());
    refused(i.parse_stateful(), "--attack-rate: ");
    let mut i = stateful_input(Some("1k"), Some("1M"));
    i.headroom = "100%".into();
    refused(i.parse_stateful(), "--headroom: ");
    let mut i = stateful_input(Some("1k"), Some("1M"));
    i.miss_speedup = "0".into();
    refused(i.parse_stateful(), "--miss-speedup: ");
    // A flood alone is not a plan; nor is nothing at all.
    let i = PlanInput {
        synflood_pps: Some("1M".into()),
        ..PlanInput::default()
    };
    assert!(!i.is_stateful());
    refused(i.parse(), "--synflood-pps: a what-if on a stateful plan");
    refused(PlanInput::default().parse(), "--rate: required");
    refused(
        PlanInput::default().parse_stateful(),
        "--new-conns-per-sec: ",
    );
}
