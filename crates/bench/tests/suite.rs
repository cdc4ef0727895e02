//! The characterisation suite: workloads per traffic class, the report writer on synthetic
//! results, and a tiny end-to-end run. Nothing here asserts on time or speed.

use flowpath_bench::runner::StageShare;
use flowpath_bench::suite::{
    self, class_result, model, ClassResult, Meta, Point, ScalingPoint, ScalingSeries, SizePoint,
    Spread, SuiteConfig, SuiteResults,
};
use flowpath_bench::workload::{
    class_pipeline, class_tunnels, FrameMix, TrafficClass, IN_PORT, UPLINK_PORT,
};
use flowpath_bench::Machine;
use flowpath_datapath::{CountingSink, Datapath, DatapathConfig, DatapathDrop};
use flowpath_pipeline::{Backend, RuleStore};
use std::sync::Arc;

const HZ: f64 = 2.5e9;

fn point(m: f64, cycles: &[f64]) -> Point {
    let cycles = Spread::of(cycles);
    Point {
        miss_rate: m,
        mpps: model::mpps(HZ, cycles.median),
        cycles,
        packets_per_run: 100_000,
        frame_bytes: 64.0,
        emc_hit_share: 1.0 - m,
        megaflow_hit_share: 0.0,
        upcall_share: m,
        stage_cycles: StageShare {
            parse: 25.0,
            emc: 40.0,
            megaflow: 1.0,
            upcall: m * 1000.0,
            actions: 20.0,
        },
        megaflows: 65536,
    }
}

/// Synthetic results: the IPv4 curve follows the model except at 10 %, where it is
/// `slow` times slower; the other classes follow the model exactly.
fn synthetic(slow: f64) -> SuiteResults {
    let (hit, miss) = (100.0, 1100.0);
    let classes: Vec<ClassResult> = TrafficClass::ALL
        .iter()
        .map(|&class| {
            let pts = [0.0, 0.01, 0.1, 0.5, 1.0]
                .iter()
                .map(|&m| {
                    let mut c = model::cycles(m, hit, miss);
                    if class == TrafficClass::Ipv4 && m == 0.1 {
                        c *= slow;
                    }
                    point(m, &[c, c * 0.99, c * 1.01])
                })
                .collect();
            class_result(class, pts, HZ)
        })
        .collect();
    let sp = |cores: usize, mpps: f64| ScalingPoint {
        cores,
        aggregate_mpps: Spread::of(&[mpps, mpps * 0.98, mpps * 1.02]),
        mpps_per_core: mpps / cores as f64,
        cycles_per_packet: Spread::of(&[100.0]),
        efficiency: mpps / (cores as f64 * 25.0),
        worker_mpps: vec![mpps / cores as f64; cores],
        pinned: true,
        packets_per_run_per_core: 100_000,
    };
    let size = |mix: &str, bytes: f64| SizePoint {
        mix: mix.into(),
        mean_frame_bytes: bytes,
        hit: point(0.0, &[100.0, 101.0, 99.0]),
        miss: point(1.0, &[1100.0, 1090.0, 1120.0]),
        hit_line_gbps: 20.0,
    };
    let mut r = SuiteResults {
        conntrack: None,
        schema: SuiteResults::SCHEMA,
        meta: Meta {
            machine: Machine {
                cpu: "Test CPU <with> \"markup\" & more".into(),
                cores: 2,
                tsc_ghz: HZ / 1e9,
                kernel: "6.0".into(),
                git_rev: "abc1234".into(),
                command: "flowpath bench suite --quick --out <dir>".into(),
            },
            tsc_hz: HZ,
            seed: 7,
            quick: true,
            started_unix: 0,
            started_utc: "1970-01-01 00:00:00 UTC".into(),
            wall_seconds: 1.0,
            load_before: 0.1,
            load_after: 1.1,
            config: SuiteConfig::quick(),
        },
        scaling: vec![ScalingSeries {
            class: TrafficClass::Ipv4,
            miss_rate: 0.0,
            points: vec![sp(1, 25.0), sp(2, 48.0)],
        }],
        sizes: vec![
            size("64", 64.0),
            size("imix", 353.8),
            size("512", 512.0),
            size("1024", 1024.0),
            size("1518", 1518.0),
        ],
        classes,
        attacks: Vec::new(),
        findings: Vec::new(),
    };
    r.findings = suite::findings(&r);
    r
}

/// The `<svg>…</svg>` elements of `html`, in order.
fn inline_svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<svg") {
        let end = rest[i..].find("</svg>").expect("every <svg> is closed") + i + "</svg>".len();
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn report_flags_a_disagreeing_point_and_is_self_contained() {
    let r = synthetic(1.5);
    let ipv4 = r.class(TrafficClass::Ipv4).unwrap();
    let at10 = ipv4.curve.iter().find(|p| p.miss_rate == 0.1).unwrap();
    assert!(at10.disagrees, "{at10:?}");
    assert!((at10.disagreement - (1.0 / 1.5 - 1.0)).abs() < 1e-9);
    assert_eq!(ipv4.curve.iter().filter(|p| p.disagrees).count(), 1);

    let html = suite::html(&r);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // One chart per experiment: scaling, sizes, hit/miss and a miss-rate curve per class.
    let svgs = inline_svgs(&html);
    assert_eq!(svgs.len(), 3 + TrafficClass::ALL.len());
    for svg in &svgs {
        roxmltree::Document::parse(svg).expect("inline SVG is well-formed XML");
    }
    assert!(html.contains("disagrees by more than 10 %"));
    assert!(html.contains("ipv4 at 10 % new flows"));
    // Self-contained: no scripts, no external resources; dynamic text is escaped.
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"));
    assert!(!lower.contains("<link"));
    assert!(!lower.contains(" src="));
    assert!(!lower.contains("href="));
    assert!(!lower.contains("@import"));
    assert!(html.contains("Test CPU &lt;with&gt; &quot;markup&quot; &amp; more"));
    assert!(!html.contains("<with>"));
    for title in [
        "Throughput vs worker cores",
        "Cycles per packet vs frame size",
        "Cycles per hit vs per miss",
        "Throughput vs miss rate, ipv6",
    ] {
        assert!(html.contains(title), "missing chart {title}");
    }
    // The terminal tables say it too.
    let t = suite::tables(&r);
    assert!(t.contains("disagrees by more than 10 %"));
    assert!(t.contains("DISAGREES"));
}

#[test]
fn report_says_nothing_disagrees_when_the_curve_follows_the_model() {
    let r = synthetic(1.05);
    assert!(r
        .classes
        .iter()
        .all(|c| c.curve.iter().all(|p| !p.disagrees)));
    let html = suite::html(&r);
    assert!(!html.contains("disagrees by more than"));
    assert!(html.contains("within 10 % of the model at every miss rate"));
}

#[test]
fn outputs_are_written_and_results_json_round_trips() {
    let r = synthetic(1.5);
    let dir = std::env::temp_dir().join(format!("flowpath-suite-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = suite::write_outputs(&r, &dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for n in [
        "results.json",
        "report.html",
        "scaling.svg",
        "frame_sizes.svg",
        "hit_miss.svg",
        "miss_rate_ipv4.svg",
        "miss_rate_ipv6.svg",
        "miss_rate_vxlan.svg",
        "miss_rate_vxlan_encap.svg",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not written: {names:?}");
    }
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"))
    {
        let s = std::fs::read_to_string(f).unwrap();
        let doc = roxmltree::Document::parse(&s).expect("chart is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert!(
            doc.descendants().any(|n| n.has_tag_name("text")),
            "{f:?} has no text"
        );
    }
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let back: SuiteResults = serde_json::from_str(&json).unwrap();
    assert_eq!(back.meta.seed, 7);
    assert_eq!(back.classes.len(), 4);
    assert_eq!(
        back.class(TrafficClass::Ipv4).unwrap().curve[2].disagrees,
        r.class(TrafficClass::Ipv4).unwrap().curve[2].disagrees
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ipv4", "ipv6", "vxlan", "vxlan_encap"]);
    assert_eq!(v["meta"]["config"]["mixes"][1], "imix");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every class's established flows are forwarded (none dropped by the parser or a table
/// miss), and stamped new flows each take the slow path once; the VXLAN classes go through
/// their tunnel port: decap maps every packet to it, encap sends every packet out of the
/// underlay port 50 bytes larger.
#[test]
fn class_workloads_forward_and_miss_as_designed() {
    for class in TrafficClass::ALL {
        for mix in [FrameMix::Fixed(64), FrameMix::Imix] {
            let (rules, src) = class_pipeline(class, 48, mix);
            assert_eq!(rules.len(), 1000);
            let n = src.template_count();
            assert_eq!(n % 12, 0, "IMIX rounds flows to whole patterns");
            let store = Arc::new(RuleStore::new(Backend::TupleSpace));
            store.add(rules).unwrap();
            let mut dp = Datapath::new(
                store,
                DatapathConfig {
                    miss: flowpath_datapath::MissLimits::unbudgeted(),
                    tunnels: class_tunnels(class),
                    ..DatapathConfig::default()
                },
            );
            let mut sink = CountingSink::default();
            let mut src = src.with_seed(3);
            let feed = |dp: &mut Datapath,
                        src: &mut flowpath_gen::InMemorySource,
                        sink: &mut CountingSink,
                        k: usize| {
                for _ in 0..k {
                    let mut b = src.lend(32);
                    dp.process(IN_PORT, &mut b, sink);
                }
            };
            feed(&mut dp, &mut src, &mut sink, 64);
            let st = dp.stats();
            assert_eq!(st.parse_drops_total(), 0, "{class:?} {mix:?}");
            assert_eq!(
                st.dropped(DatapathDrop::TableMiss) + st.dropped(DatapathDrop::RuleDrop),
                0,
                "{class:?} {mix:?}"
            );
            assert_eq!(st.upcalls as usize, n, "{class:?}: one megaflow per flow");
            assert_eq!(sink.packets, 64 * 32);
            assert_eq!(st.dropped(DatapathDrop::VxlanNoTunnel), 0, "{class:?}");
            match class {
                TrafficClass::Vxlan => {
                    assert_eq!(
                        st.decapsulated,
                        64 * 32,
                        "{mix:?}: every packet decapsulated"
                    );
                    assert_eq!(
                        sink.bytes,
                        st.bytes - 50 * 64 * 32,
                        "the inner frames leave"
                    );
                }
                TrafficClass::VxlanEncap => {
                    assert_eq!(
                        st.encapsulated,
                        64 * 32,
                        "{mix:?}: every packet encapsulated"
                    );
                    assert_eq!(sink.per_port[UPLINK_PORT as usize], 64 * 32, "{mix:?}");
                    assert_eq!(sink.bytes, st.bytes + 50 * 64 * 32, "VXLAN frames leave");
                }
                _ => assert_eq!(st.decapsulated + st.encapsulated, 0, "{class:?}"),
            }
            dp.reset_stats();
            src.set_new_flow_share(1.0);
            feed(&mut dp, &mut src, &mut sink, 10);
            let st = dp.stats();
            assert_eq!(st.upcalls, 320, "{class:?}: every new flow is a miss");
            assert_eq!(st.parse_drops_total(), 0);
        }
    }
    let (_, src) = class_pipeline(TrafficClass::Vxlan, 12, FrameMix::Fixed(64));
    assert_eq!(
        src.template(0).len(),
        92,
        "VXLAN frames carry 50 bytes of outer headers"
    );
    // Encap sends what decap receives: at "64" the smallest VXLAN frame, from the
    // smallest inner frame; at 570 (IMIX) a 570-byte VXLAN frame from a 520-byte one.
    let (_, src) = class_pipeline(TrafficClass::VxlanEncap, 12, FrameMix::Imix);
    assert_eq!(src.template(0).len(), 42);
    assert_eq!(src.template(1).len(), 570 - 4 - 50);
    assert_eq!(TrafficClass::VxlanEncap.wire_extra_bytes(), 50.0);
    assert_eq!(
        TrafficClass::parse("vxlan_encap"),
        Ok(TrafficClass::VxlanEncap)
    );
}

#[test]
fn tiny_suite_runs_every_experiment() {
    let cfg = SuiteConfig::tiny();
    let (mut calls, mut last, mut total) = (0u64, 0u64, 0u64);
    let r = suite::run(&cfg, |p| {
        calls += 1;
        assert!(p.done <= p.total);
        assert!(p.done >= last, "progress never goes back");
        last = p.done;
        total = p.total;
    });
    assert!(calls > 10);
    assert_eq!(last, total, "progress ends at 100 %");
    let cases: Vec<&str> = r.attacks.iter().map(|a| a.case.as_str()).collect();
    assert_eq!(cases, ["flood", "tse"]);
    for a in &r.attacks {
        assert_eq!(a.points.len(), cfg.attack_rates.len());
        for p in &a.points {
            assert!(p
                .defences
                .iter()
                .any(|d| d.defence == flowpath_bench::Defence::Default));
            for d in &p.defences {
                assert!(
                    d.established_retained > 0.0 && d.subtables <= d.max_masks,
                    "{d:?}"
                );
            }
        }
    }
    let html = suite::html(&r);
    assert!(html.contains("under a flood attack") && html.contains("under a tse attack"));

    // Scaling: every core count, efficiency 1 at one core by definition.
    assert_eq!(r.scaling.len(), cfg.scaling_miss_rates.len());
    for s in &r.scaling {
        let cores: Vec<usize> = s.points.iter().map(|p| p.cores).collect();
        assert_eq!(cores, vec![1, 2]);
        assert!((s.points[0].efficiency - 1.0).abs() < 1e-12);
        for p in &s.points {
            assert_eq!(p.aggregate_mpps.runs, cfg.runs);
            assert_eq!(p.worker_mpps.len(), p.cores);
            assert!(p.aggregate_mpps.min <= p.aggregate_mpps.median);
            assert!(p.aggregate_mpps.median <= p.aggregate_mpps.max);
        }
    }
    // Sizes: every mix, hits answered by the caches, misses by the slow path.
    let mixes: Vec<&str> = r.sizes.iter().map(|s| s.mix.as_str()).collect();
    assert_eq!(mixes, vec!["64", "imix"]);
    assert!(
        (r.sizes[1].mean_frame_bytes - (7.0 * 64.0 + 4.0 * 570.0 + 1518.0) / 12.0).abs() < 1e-9
    );
    for s in &r.sizes {
        assert_eq!(s.hit.upcall_share, 0.0);
        assert_eq!(s.miss.upcall_share, 1.0);
    }
    // Hit/miss and the curve, per class, with the model beside every point.
    let classes: Vec<TrafficClass> = r.classes.iter().map(|c| c.class).collect();
    assert_eq!(
        classes,
        TrafficClass::ALL,
        "ipv4, ipv6, vxlan (decap), vxlan_encap"
    );
    for c in &r.classes {
        let rates: Vec<f64> = c.curve.iter().map(|p| p.miss_rate).collect();
        assert_eq!(rates, vec![0.0, 0.5, 1.0]);
        assert_eq!(c.hit.upcall_share, 0.0, "{:?}", c.class);
        assert_eq!(c.miss.upcall_share, 1.0, "{:?}", c.class);
        let mid = &c.curve[1];
        assert!((0.3..0.7).contains(&mid.measured.upcall_share), "{mid:?}");
        for p in &c.curve {
            let m = &p.measured;
            let answered = m.emc_hit_share + m.megaflow_hit_share + m.upcall_share;
            assert!((answered - 1.0).abs() < 1e-9, "{:?}: {answered}", c.class);
            assert_eq!(m.cycles.runs, cfg.runs);
            assert_eq!(m.cycles.samples.len(), cfg.runs);
            let want = model::cycles(p.miss_rate, c.hit_cycles, c.miss_cycles);
            assert!((p.model_cycles - want).abs() < 1e-6);
        }
        assert_eq!(c.curve[0].disagreement, 0.0);
        assert!((c.miss_hit_ratio - c.miss_cycles / c.hit_cycles).abs() < 1e-12);
    }
    assert!(
        r.classes[2].frame_bytes > r.classes[0].frame_bytes,
        "VXLAN frames are bigger"
    );
    // Both VXLAN classes are sized by the VXLAN frame on the wire (encap: what it sends).
    assert_eq!(r.classes[3].frame_bytes, 96.0);
    assert_eq!(r.classes[2].frame_bytes, r.classes[3].frame_bytes);
    assert!(r
        .findings
        .iter()
        .any(|f| f.starts_with("vxlan_encap: VXLAN encapsulated")));
    assert!(r
        .findings
        .iter()
        .any(|f| f.starts_with("vxlan: VXLAN decapsulated")));
    assert_eq!(r.meta.seed, cfg.seed);
    assert!(r.meta.tsc_hz > 0.0);
    assert!(!r.findings.is_empty());

    // And it all goes to disk.
    let dir = std::env::temp_dir().join(format!("flowpath-suite-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    suite::write_outputs(&r, &dir).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    for key in ["scaling", "sizes", "classes", "findings"] {
        assert!(
            !v[key].as_array().unwrap().is_empty(),
            "results.json lacks {key}"
        );
    }
    for key in ["command", "git_rev", "cpu"] {
        assert!(
            v["meta"]["machine"][key].is_string(),
            "results.json lacks {key}"
        );
    }
    assert!(v["classes"][1]["curve"][1]["model_mpps"].is_number());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_is_completed_and_cleaned() {
    let c = SuiteConfig {
        runs: 0,
        miss_rates: vec![0.5, 0.1, 0.1, 7.0, f64::NAN],
        cores: vec![4, 0, 2, 2],
        classes: vec![TrafficClass::Ipv6, TrafficClass::Ipv6, TrafficClass::Ipv4],
        mixes: vec![FrameMix::Imix, FrameMix::Imix],
        scaling_miss_rates: vec![0.1, 0.0, 0.1],
        ..SuiteConfig::full()
    }
    .normalised();
    assert_eq!(c.runs, 1);
    assert_eq!(c.miss_rates, vec![0.0, 0.1, 0.5, 1.0]);
    assert_eq!(c.cores, vec![1, 2, 4]);
    assert_eq!(c.classes, vec![TrafficClass::Ipv6, TrafficClass::Ipv4]);
    assert_eq!(c.mixes, vec![FrameMix::Imix]);
    assert_eq!(c.scaling_miss_rates, vec![0.0, 0.1]);
    assert_eq!(suite::default_cores(2), vec![1, 2]);
    assert_eq!(suite::default_cores(6), vec![1, 2, 4, 6]);
    assert_eq!(suite::default_cores(8), vec![1, 2, 4, 8]);
    assert_eq!(suite::default_cores(1), vec![1]);
    let s = Spread::of(&[3.0, 1.0, 2.0, 5.0]);
    assert_eq!((s.median, s.min, s.max, s.runs), (3.0, 1.0, 5.0, 4));
    assert_eq!(s.samples, vec![3.0, 1.0, 2.0, 5.0]);
}
