//! The plan's outputs: the terminal table, the JSON fields scripts rely on, and the HTML
//! report (self-contained, well-formed charts, escaped text).

use flowpath_gen::TrafficClass;
use flowpath_planner::input::PlanInput;
use flowpath_planner::plan::plan;
use flowpath_planner::profile::builtin;
use flowpath_planner::report::{html, json, table};

fn inputs() -> PlanInput {
    PlanInput {
        rate: "25Gbps".into(),
        size: "imix".into(),
        miss_rate: "5%".into(),
        miss_cores: Some("8".into()),
        offload_share: Some("50%".into()),
        headroom: "20%".into(),
        ..PlanInput::default()
    }
}

#[test]
fn json_has_the_fields_scripts_use() {
    let (w, o, _) = inputs().parse().unwrap();
    let p = plan(&builtin("ovs-kernel").unwrap(), &w, &o).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json(&p)).unwrap();
    for k in [
        "cores",
        "utilisation",
        "miss_share_of_cycles",
        "cycles_per_packet",
        "pps",
    ] {
        assert!(v[k].is_number(), "{k}");
    }
    assert_eq!(v["cores"], 28);
    let sc = v["scenarios"].as_array().unwrap();
    assert_eq!(sc.len(), 4);
    for s in sc {
        for k in [
            "cores",
            "utilisation",
            "miss_share_of_cycles",
            "speedup",
            "usd_per_year_saved",
        ] {
            assert!(s[k].is_number(), "{k} in {s}");
        }
        assert!(s["name"].is_string());
    }
    assert_eq!(v["workload"]["class"], "ipv4");
}

#[test]
fn table_lists_every_scenario_and_the_money() {
    let (w, o, g) = inputs().parse().unwrap();
    let prof = builtin("ovs-kernel").unwrap();
    let p = plan(&prof, &w, &o).unwrap();
    let t = table(&p, &prof, &g);
    for s in [
        "baseline",
        "miss path 10x faster",
        "8 cores for misses",
        "50 % of hits offloaded (hw 90 Mpps)",
        "all of the above",
        "$9,000",
        "25 Gbps = 8.359 Mpps",
        "misses take 36.4 % of the cycles",
        "8 cores cannot carry the misses, they need 11",
        "extrapolated",
    ] {
        assert!(t.contains(s), "missing {s:?} in\n{t}");
    }
}

#[test]
fn html_is_self_contained_with_two_well_formed_charts() {
    let (w, o, g) = inputs().parse().unwrap();
    let mut prof = builtin("ovs-dpdk").unwrap();
    prof.name = "<script>alert(1)</script> & \"co\"".into();
    let w = flowpath_planner::Workload {
        class: TrafficClass::Vxlan,
        ..w
    };
    let p = plan(&prof, &w, &o).unwrap();
    let h = html(&p, &prof, &o, &g);
    assert!(h.starts_with("<!DOCTYPE html>") && h.trim_end().ends_with("</html>"));
    let lower = h.to_lowercase();
    for bad in ["<script", "<link", " src=", "href=", "@import"] {
        assert!(!lower.contains(bad), "{bad}");
    }
    assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"));
    let mut svgs = 0;
    let mut rest = h.as_str();
    while let Some(i) = rest.find("<svg") {
        let end = rest[i..].find("</svg>").unwrap() + i + 6;
        let doc = roxmltree::Document::parse(&rest[i..end]).expect("well-formed SVG");
        // Baseline plus four scenarios, one drawn line (more than one segment) each.
        assert_eq!(
            doc.descendants()
                .filter(|n| n.has_tag_name("polyline"))
                .filter(|n| n
                    .attribute("points")
                    .unwrap_or("")
                    .split_whitespace()
                    .count()
                    > 2)
                .count(),
            5
        );
        svgs += 1;
        rest = &rest[end..];
    }
    assert_eq!(svgs, 2, "full range and zoomed, side by side");
    assert!(h.contains("Cores needed vs miss rate"));
    // The profile's provenance comes along.
    assert!(h.contains("almost 26 million packets per second"));
}
