//! Connection tracking's two costs and the curve they make: cycles per new connection and
//! per established packet (and a flood's per-SYN cost), measured by running the bench's
//! connection-tracking cases by name, and the model of throughput against the share of
//! packets that open a new connection, `tsc_hz / ((1 − s)·c_est + s·c_new)`, drawn with
//! the chart engine as a model curve (the stateful twin of the miss-rate curve).
//!
//! The cases are looked up by name ([`Case::parse`]) and their figures read from the
//! serialised [`CaseResult`] (its optional `ct` figures), so this builds whether or not
//! the connection-tracking cases are part of the bench yet; one that is not gives a note
//! instead of a cost.

use crate::runner::{run_case, BenchConfig, Case, CaseResult};
use flowpath_report::chart::{keyed, legend, max_of, render, FONT, PALETTE};
use flowpath_report::pct;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The case every packet of which belongs to a new connection (a whole short TCP
/// connection each: handshake, data, both FINs).
pub const CT_NEW: &str = "ct_new";
/// Cases of established connections, first found first: `ct_established` (cycles per
/// packet), else `ct_established_2w`'s one worker alone.
pub const CT_ESTABLISHED: [&str; 2] = ["ct_established", "ct_established_2w"];
/// Established TCP connections under a SYN flood.
pub const CT_SYNFLOOD: &str = "ct_synflood";

/// The calibrated costs, in TSC cycles, and how each was obtained.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CtModel {
    pub tsc_hz: f64,
    /// Cycles per new connection (`ct_new`'s cycles per whole connection).
    pub new_connection_cycles: f64,
    /// Cycles per packet of an established connection.
    pub established_packet_cycles: f64,
    /// Cycles per SYN of a flood (`ct_synflood`), when measured.
    pub syn_cycles: Option<f64>,
    /// One sentence per cost: which case, which figure.
    pub notes: Vec<String>,
}

/// A case by name, run once with `cfg`; `Err` (and why) when the bench has no such case.
pub fn run_named(name: &str, cfg: &BenchConfig) -> Result<Value, String> {
    let case = Case::parse(name).map_err(|_| format!("{name}: not a bench case in this build"))?;
    let r: CaseResult = match case {
        Case::Ct(c) => crate::ct::run(c, cfg, |_, _| {}),
        _ => run_case(case, cfg, |_, _| {}),
    };
    serde_json::to_value(&r).map_err(|e| format!("{name}: {e}"))
}

fn figure(v: &Value, key: &str) -> Option<f64> {
    v.get("ct")?
        .get(key)?
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
}

fn per_packet(v: &Value) -> Option<f64> {
    v.get("cycles_per_packet")?
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
}

/// Cycles per new connection from `ct_new`'s result: its cycles per whole connection,
/// else (a case that opens a connection with every packet) its cycles per packet.
pub fn new_cost(v: &Value) -> Option<(f64, String)> {
    if let Some(c) = figure(v, "cycles_per_connection") {
        return Some((c, format!("{CT_NEW}: cycles per whole connection")));
    }
    per_packet(v).map(|c| {
        (
            c,
            format!("{CT_NEW}: cycles per packet, each a new connection"),
        )
    })
}

/// Cycles per established packet from the result of `name` (one of [`CT_ESTABLISHED`]).
pub fn established_cost(name: &str, v: &Value) -> Option<(f64, String)> {
    if name == "ct_established_2w" {
        return figure(v, "peer_cycles_per_packet")
            .map(|c| (c, format!("{name}: cycles per packet of one worker alone")));
    }
    per_packet(v).map(|c| (c, format!("{name}: cycles per packet")))
}

/// Cycles per SYN from `ct_synflood`'s result: while the flood runs the worker is busy,
/// so `tsc_hz = A·c_est + flood·c_syn` with A's rate `retained · load · alone` and
/// `c_est = tsc_hz / alone`, which gives `c_syn = tsc_hz · (1 − retained · load) / flood`
/// (`load`: A's offered share of its rate alone).
pub fn syn_cost(v: &Value, tsc_hz: f64, load: f64) -> Option<(f64, String)> {
    let retained = v.get("ct")?.get("retained")?.as_f64()?;
    let flood = figure(v, "flood_pps")?;
    let busy = (1.0 - retained * load).max(0.0);
    (busy > 0.0).then(|| {
        (
            tsc_hz * busy / flood,
            format!(
                "{CT_SYNFLOOD}: tsc_hz × (1 − retained {} × load {}) / {:.0} SYNs per second taken (the worker busy during the flood)",
                pct(retained),
                pct(load),
                flood
            ),
        )
    })
}

/// Measure the costs by running the cases; Err with every reason when `ct_new` or an
/// established case is missing. The SYN cost is optional (a note says why it is absent).
pub fn measure(cfg: &BenchConfig, tsc_hz: f64) -> Result<CtModel, Vec<String>> {
    let mut why = Vec::new();
    let new = run_named(CT_NEW, cfg)
        .map_err(|e| why.push(e))
        .ok()
        .and_then(|v| new_cost(&v));
    let mut est = None;
    for name in CT_ESTABLISHED {
        match run_named(name, cfg) {
            Ok(v) => {
                est = established_cost(name, &v);
                if est.is_some() {
                    break;
                }
            }
            Err(e) => why.push(e),
        }
    }
    let (Some(new), Some(est)) = (new, est) else {
        return Err(why);
    };
    let load = crate::attack::AttackConfig::default().established_load;
    let syn = match run_named(CT_SYNFLOOD, cfg) {
        Ok(v) => syn_cost(&v, tsc_hz, load),
        Err(e) => {
            why.push(e);
            None
        }
    };
    let mut notes = vec![new.1, est.1];
    match &syn {
        Some(s) => notes.push(s.1.clone()),
        None => notes.push(format!("no SYN cost: {}", why.join("; "))),
    }
    Ok(CtModel {
        tsc_hz,
        new_connection_cycles: new.0,
        established_packet_cycles: est.0,
        syn_cycles: syn.map(|s| s.0),
        notes,
    })
}

/// The model's Mpps on one core when a share `s` of the packets opens a new connection.
pub fn mpps_at(m: &CtModel, s: f64) -> f64 {
    m.tsc_hz / ((1.0 - s) * m.established_packet_cycles + s * m.new_connection_cycles) / 1e6
}

/// The model curve at 0, 0.5, 1, … 100 % new connections.
pub fn curve(m: &CtModel) -> Vec<(f64, f64)> {
    (0..=200)
        .map(|i| {
            let s = i as f64 / 200.0;
            (s, mpps_at(m, s))
        })
        .collect()
}

/// Throughput against the share of new connections, from the model (a dashed line,
/// labelled as the model, with the two costs in the legend), as a standalone SVG.
pub fn chart(m: &CtModel) -> String {
    let pts = curve(m);
    render((760, 440), |root| {
        root.fill(&WHITE)?;
        let ymax = max_of(pts.iter().map(|p| p.1)).max(1e-3) * 1.12;
        let keys: Vec<f64> = (0..=10).map(|i| i as f64 / 10.0).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Throughput vs share of new connections (one core, model)",
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(keyed(0.0..1.0, keys), 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("share of packets that open a new connection")
            .y_desc("Mpps per core")
            .x_label_formatter(&|x| pct(*x))
            .label_style((FONT, 13))
            .draw()?;
        let label = format!(
            "model: c_new {:.0}, c_est {:.0} cycles",
            m.new_connection_cycles, m.established_packet_cycles
        );
        chart
            .draw_series(DashedLineSeries::new(
                pts.clone(),
                8,
                4,
                PALETTE[1].stroke_width(2),
            ))?
            .label(label)
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], PALETTE[1].stroke_width(2))
            });
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present()?;
        Ok(())
    })
}

/// The report's section: the model chart (from `charts`, by file name) and the costs it
/// was drawn from, or a line saying the bench had no connection-tracking cases.
pub fn html_section(s: &mut String, m: Option<&CtModel>, charts: &[(String, String, String)]) {
    s.push_str("<h2>6. Throughput vs share of new connections (model)</h2>\n");
    let Some(m) = m else {
        s.push_str("<p>Not measured: this build's bench has no connection-tracking cases (ct_new and ct_established).</p>\n");
        return;
    };
    if let Some((_, _, svg)) = charts.iter().find(|c| c.0 == "ct_new_share.svg") {
        let svg = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        s.push_str(&format!("<figure>{svg}</figure>\n"));
    }
    s.push_str(&format!(
        "<p>A model curve, not a measurement: one core's Mpps when a share s of the packets opens a new connection, \
         tsc_hz / ((1 − s)·c_est + s·c_new), with c_new = {:.0} cycles per new connection and c_est = {:.0} per \
         established packet{}. {}</p>\n",
        m.new_connection_cycles,
        m.established_packet_cycles,
        m.syn_cycles
            .map_or(String::new(), |c| format!(" (a flood's SYN: {c:.0})")),
        flowpath_report::escape(&m.notes.join("; "))
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> CtModel {
        CtModel {
            tsc_hz: 2e9,
            new_connection_cycles: 4000.0,
            established_packet_cycles: 200.0,
            syn_cycles: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_model_runs_from_established_to_new_connection_cost() {
        let m = model();
        assert_eq!(mpps_at(&m, 0.0), 10.0);
        assert_eq!(mpps_at(&m, 1.0), 0.5);
        // 10 % new: 0.9·200 + 0.1·4000 = 580 cycles.
        assert!((mpps_at(&m, 0.1) - 2e9 / 580.0 / 1e6).abs() < 1e-12);
        let c = curve(&m);
        assert_eq!(c.len(), 201);
        assert!(c.windows(2).all(|w| w[1].1 <= w[0].1));
    }

    #[test]
    fn costs_are_read_from_the_figures_the_cases_give() {
        let v = serde_json::json!({"cycles_per_packet": 300.0, "ct": {"cycles_per_connection": 2400.0}});
        assert_eq!(new_cost(&v).unwrap().0, 2400.0);
        let v = serde_json::json!({"cycles_per_packet": 300.0});
        assert_eq!(new_cost(&v).unwrap().0, 300.0);
        let v = serde_json::json!({"cycles_per_packet": 500.0, "ct": {"peer_cycles_per_packet": 250.0}});
        assert_eq!(established_cost("ct_established_2w", &v).unwrap().0, 250.0);
        assert_eq!(established_cost("ct_established", &v).unwrap().0, 500.0);
        // Half the worker left to A at half load: 75 % of 2e9 cycles for 1e6 SYNs.
        let v = serde_json::json!({"ct": {"retained": 0.5, "flood_pps": 1e6}});
        assert!((syn_cost(&v, 2e9, 0.5).unwrap().0 - 1500.0).abs() < 1e-9);
        assert!(syn_cost(&serde_json::json!({"ct": {}}), 2e9, 0.5).is_none());
    }

    #[test]
    fn a_case_the_bench_does_not_have_is_a_note() {
        let e = run_named("ct_no_such_case", &BenchConfig::default()).unwrap_err();
        assert!(e.contains("not a bench case"), "{e}");
    }

    #[test]
    fn the_chart_is_svg_and_says_model() {
        let svg = chart(&model());
        assert!(svg.starts_with("<svg") || svg.contains("<svg"));
        assert!(svg.contains("model"));
    }
}
