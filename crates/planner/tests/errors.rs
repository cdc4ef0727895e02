//! Bad input gives one clear line naming the field; profiles survive a round trip.

use flowpath_planner::input::PlanInput;
use flowpath_planner::profile::{self, builtin, load, parse_json, parse_toml, save, to_toml};
use std::path::PathBuf;

fn input(rate: &str, size: &str, miss: &str) -> PlanInput {
    PlanInput {
        rate: rate.into(),
        size: size.into(),
        miss_rate: miss.into(),
        ..PlanInput::default()
    }
}

/// The error of `r`, checked to be one line starting with `prefix`.
fn one_line<T: std::fmt::Debug>(r: Result<T, String>, prefix: &str) -> String {
    let e = r.expect_err("should be refused");
    assert!(!e.contains('\n'), "more than one line: {e:?}");
    assert!(
        e.starts_with(prefix),
        "{e:?} does not start with {prefix:?}"
    );
    e
}

#[test]
fn good_input_parses() {
    let (w, o, g) = input("25Gbps", "imix", "5%").parse().unwrap();
    assert!((w.pps / 1e6 - 8.359).abs() < 0.001);
    assert_eq!(w.miss_rate, 0.05);
    assert_eq!(g.size_label, "imix");
    assert_eq!(o.core_year_usd, 1000.0);
    assert_eq!(o.miss_speedup, 10.0);
    assert_eq!(o.headroom, 0.0);
    // 90 Mpps of offload whatever the size.
    assert_eq!(o.offload_pps, 90e6);
}

#[test]
fn bad_options_name_the_option() {
    let e = one_line(input("-5Mpps", "64", "5%").parse(), "--rate: ");
    assert!(e.contains("negative"), "{e}");
    one_line(input("-10G", "64", "5%").parse(), "--rate: ");
    let e = one_line(input("5", "64", "5%").parse(), "--rate: ");
    assert!(e.contains("no unit"), "{e}");
    one_line(input("fast", "64", "5%").parse(), "--rate: ");
    let e = one_line(input("5Mpps", "64", "150%").parse(), "--miss-rate: ");
    assert!(e.contains("over 100 %"), "{e}");
    one_line(input("5Mpps", "64", "1.5").parse(), "--miss-rate: ");
    one_line(input("5Mpps", "64", "-1%").parse(), "--miss-rate: ");
    one_line(input("5Mpps", "32", "5%").parse(), "--size: ");
    one_line(input("5Mpps", "huge", "5%").parse(), "--size: ");
    // Each option set wrong on good input.
    let refused = |set: fn(&mut PlanInput), prefix: &str| {
        let mut i = input("5Mpps", "64", "5%");
        set(&mut i);
        one_line(i.parse(), prefix);
    };
    refused(|i| i.traffic = "ipx".into(), "--traffic: ");
    refused(|i| i.headroom = "100%".into(), "--headroom: ");
    refused(|i| i.miss_speedup = "0".into(), "--miss-speedup: ");
    refused(|i| i.miss_cores = Some("-2".into()), "--miss-cores: ");
    refused(
        |i| i.offload_share = Some("120%".into()),
        "--offload-share: ",
    );
    refused(|i| i.core_year_usd = "-1000".into(), "--core-year-usd: ");
    refused(|i| i.attack_rate = Some("lots".into()), "--attack-rate: ");
    refused(|i| i.attack_budget = "0%".into(), "--attack-budget: ");
}

/// A directory for one test's files, removed when the test ends (tests run in parallel,
/// so each has its own).
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(test: &str) -> TmpDir {
        let d = std::env::temp_dir().join(format!(
            "flowpath-planner-test-{}-{test}",
            std::process::id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        TmpDir(d)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn missing_profile_file() {
    let e = one_line(
        load("/nonexistent/dir/p.toml"),
        "profile /nonexistent/dir/p.toml: ",
    );
    assert!(e.contains("no such file"), "{e}");
    let e = one_line(load("ovs-kernal"), "profile ovs-kernal: ");
    assert!(e.contains("ovs-kernel-2019"), "names the built-ins: {e}");
}

#[test]
fn malformed_toml_says_where() {
    let dir = TmpDir::new("malformed");
    let path = dir.file("bad.toml");
    std::fs::write(&path, "name = \"x\"\nsource = \"y\"\ntsc_hz = 2.6e9 GHz\n").unwrap();
    let spec = path.to_str().unwrap();
    let e = one_line(
        load(spec),
        &format!("profile {spec}: malformed TOML at line 3"),
    );
    assert!(e.contains("column"), "{e}");
    let e = one_line(
        parse_json("{\"name\": ", "p.json"),
        "profile p.json: malformed JSON",
    );
    assert!(e.contains("line 1"), "{e}");
}

/// The kernel profile's text with one line changed.
fn kernel_with(from: &str, to: &str) -> String {
    let text = profile::BUILTIN[0].2;
    assert!(text.contains(from), "{from}");
    text.replacen(from, to, 1)
}

#[test]
fn a_missing_or_wrong_field_is_named_with_its_path() {
    let t = kernel_with(
        "[classes.ipv6]\nhit = { fixed_cycles = 4600, per_byte_cycles = 0 }",
        "[classes.ipv6]\nhit = { per_byte_cycles = 0 }",
    );
    let e = one_line(
        parse_toml(&t, "ovs-kernel.toml"),
        "profile ovs-kernel.toml: ",
    );
    assert_eq!(
        e,
        "profile ovs-kernel.toml: classes.ipv6.hit.fixed_cycles: missing"
    );

    let t = kernel_with("tsc_hz = 2.6e9", "");
    assert_eq!(
        one_line(parse_toml(&t, "p"), "profile p: "),
        "profile p: tsc_hz: missing"
    );
    let t = kernel_with("tsc_hz = 2.6e9", "tsc_hz = 2.6");
    let e = one_line(parse_toml(&t, "p"), "profile p: tsc_hz: ");
    assert!(e.contains("2.6e9"), "{e}");
    let t = kernel_with("tsc_hz = 2.6e9", "tsc_hz = \"fast\"");
    assert_eq!(
        one_line(parse_toml(&t, "p"), "profile p: "),
        "profile p: tsc_hz: expected a number, got a string"
    );
    let t = kernel_with(
        "miss = { fixed_cycles = 50000, per_byte_cycles = 0 }",
        "miss = { fixed_cycles = -5, per_byte_cycles = 0 }",
    );
    one_line(
        parse_toml(&t, "p"),
        "profile p: classes.ipv4.miss.fixed_cycles: ",
    );
    let t = kernel_with("scaling = [1.0, 1.0, 1.0, 1.0]", "scaling = [0.9]");
    one_line(parse_toml(&t, "p"), "profile p: scaling[0]: ");
    let t = kernel_with("scaling = [1.0, 1.0, 1.0, 1.0]", "scaling = [1.0, 0]");
    one_line(parse_toml(&t, "p"), "profile p: scaling[1]: ");
    let t = kernel_with("[classes.vxlan]", "[classes.vxlam]");
    let e = one_line(
        parse_toml(&t, "p"),
        "profile p: classes.vxlam: unknown field",
    );
    assert!(e.contains("vxlan"), "{e}");
    let t = kernel_with("tsc_hz = 2.6e9", "tsc_hz = 2.6e9\ntsc_ghz = 2.6");
    one_line(parse_toml(&t, "p"), "profile p: tsc_ghz: unknown field");
    let t = kernel_with(
        "[classes.ipv4]",
        "[classes.ipv4]\ncurves = [{ frame_bytes = 64, points = [{ miss_rate = 1.5, cycles = 9 }] }]",
    );
    one_line(
        parse_toml(&t, "p"),
        "profile p: classes.ipv4.curves[0].points[0].miss_rate: ",
    );
    // per_byte_cycles may be left out (0).
    let t = kernel_with(
        "hit = { fixed_cycles = 4600, per_byte_cycles = 0 }",
        "hit = { fixed_cycles = 4600 }",
    );
    assert_eq!(
        parse_toml(&t, "p")
            .unwrap()
            .classes
            .ipv4
            .hit
            .per_byte_cycles,
        0.0
    );
}

#[test]
fn profiles_round_trip_through_toml_and_json() {
    for (name, file, _) in profile::BUILTIN {
        let p = builtin(name).unwrap();
        assert_eq!(parse_toml(&to_toml(&p), file).unwrap(), p);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(parse_json(&json, file).unwrap(), p);
    }
    // A calibrated-looking profile: curves, machine, notes with quotes and newlines.
    let mut p = builtin("ovs-kernel").unwrap();
    p.name = "calibrated-2026-01-01".into();
    p.notes.push("a \"quoted\"\nnote".into());
    p.scaling = vec![1.0, 0.93];
    p.classes.ipv6.hit.per_byte_cycles = 0.125;
    p.classes.ipv6.curves = vec![
        profile::Curve {
            frame_bytes: 66.0,
            points: vec![profile::CurvePoint {
                miss_rate: 0.1,
                cycles: 345.678,
            }],
        },
        profile::Curve {
            frame_bytes: 1518.0,
            points: vec![profile::CurvePoint {
                miss_rate: 0.1,
                cycles: 400.5,
            }],
        },
    ];
    p.machine = Some(profile::MachineInfo {
        cpu: "AMD EPYC".into(),
        cores: 2,
        kernel: "6.18".into(),
        date: "2026-01-01 00:00:00 UTC".into(),
        git_rev: "abc1234".into(),
        command: "flowpath calibrate".into(),
        load_before: 0.5,
        load_after: 0.7,
    });
    let dir = TmpDir::new("round-trip");
    for file in ["rt.toml", "rt.json"] {
        let path = dir.file(file);
        save(&p, &path).unwrap();
        assert_eq!(load(path.to_str().unwrap()).unwrap(), p, "{file}");
    }
    assert!(std::fs::read_to_string(dir.file("rt.toml"))
        .unwrap()
        .starts_with("# flowpath calibration profile"));
}

/// A profile written before the VXLAN encap class (no `classes.vxlan_encap`) still loads:
/// the encap costs are a copy of the decap (`vxlan`) costs and a note says so; what it
/// saves has the class and reads back the same; a profile with the class keeps its own.
#[test]
fn a_profile_without_vxlan_encap_loads_with_the_decap_costs() {
    let text = profile::BUILTIN[0].2;
    let at = text.find("\n[classes.vxlan_encap]").unwrap();
    // Without the encap class, and with decap costs of its own (not IPv4's).
    let old = text[..at].replace(
        "[classes.vxlan]\nhit = { fixed_cycles = 4600,",
        "[classes.vxlan]\nhit = { fixed_cycles = 5100,",
    );
    assert!(!old.contains("[classes.vxlan_encap]") && old.contains("fixed_cycles = 5100"));
    let p = parse_toml(&old, "old.toml").unwrap();
    assert_eq!(p.classes.vxlan_encap, p.classes.vxlan);
    assert_eq!(p.classes.vxlan_encap.hit.fixed_cycles, 5100.0);
    assert_eq!(
        p.notes
            .iter()
            .filter(|n| *n == profile::ENCAP_DEFAULT_NOTE)
            .count(),
        1
    );
    let again = parse_toml(&to_toml(&p), "again.toml").unwrap();
    assert_eq!(
        again, p,
        "saved with the class and the note, read back unchanged"
    );
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"vxlan_encap\""));
    assert_eq!(parse_json(&json, "again.json").unwrap(), p);
    // The shipped profiles have the class, so no such note.
    for (name, _, text) in profile::BUILTIN {
        assert!(text.contains("[classes.vxlan_encap]"), "{name}");
        let b = builtin(name).unwrap();
        assert!(!b.notes.iter().any(|n| n == profile::ENCAP_DEFAULT_NOTE));
        assert_eq!(
            b.classes.vxlan_encap, b.classes.vxlan,
            "{name}: the talk's figures"
        );
    }
    // A wrong field inside the new class is named with its path.
    let bad = text.replacen(
        "[classes.vxlan_encap]\nhit = { fixed_cycles = 4600,",
        "[classes.vxlan_encap]\nhit = { fixed_cycles = -1,",
        1,
    );
    let e = parse_toml(&bad, "p").unwrap_err();
    assert!(
        e.starts_with("profile p: classes.vxlan_encap.hit.fixed_cycles: "),
        "{e}"
    );
}

#[test]
fn the_traffic_option_takes_vxlan_encap() {
    let mut i = input("10Mpps", "imix", "2%");
    i.traffic = "vxlan_encap".into();
    let p = builtin("ovs-kernel").unwrap();
    let (w, opts, _) = i.parse().unwrap();
    assert_eq!(w.class, flowpath_gen::TrafficClass::VxlanEncap);
    let plan = flowpath_planner::plan(&p, &w, &opts).unwrap();
    assert!(plan.cores > 0);
    i.traffic = "vxlan-encap".into();
    let e = i.parse().unwrap_err();
    assert!(e.contains("vxlan_encap"), "{e}");
}
