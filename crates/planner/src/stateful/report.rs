//! A stateful plan as a terminal table, JSON, and a self-contained HTML page with the
//! model curve of throughput against the share of new connections.

use super::Plan;
use crate::profile::Profile;
use crate::units::fmt_pps;
use flowpath_bench::suite::ct_model::{self, CtModel};
use flowpath_report::{columns, escape, pct, thousands};

fn usd(x: f64) -> String {
    if x < 0.0 {
        format!("-${}", thousands(-x))
    } else {
        format!("${}", thousands(x))
    }
}

fn rate(x: f64) -> String {
    format!("{}/s", thousands(x))
}

fn workload_line(p: &Plan) -> String {
    let w = &p.workload;
    format!(
        "{} new connections, {} established packets",
        rate(w.new_conns_per_sec),
        fmt_pps(w.established_pps)
    )
}

fn cost_line(p: &Plan) -> String {
    let c = &p.costs;
    format!(
        "a new connection costs {} cycles, an established packet {}{}; load = R·c_new + P·c_est = {} cycles/s, {} of them new connections'",
        thousands(c.new_connection_cycles),
        thousands(c.established_packet_cycles),
        c.syn_cycles
            .map_or(String::new(), |s| format!(", a flood's SYN {}", thousands(s))),
        thousands(p.baseline.cycles_per_second),
        pct(p.baseline.new_conn_share_of_cycles)
    )
}

fn rows(p: &Plan) -> Vec<[String; 7]> {
    std::iter::once(&p.baseline)
        .chain(&p.scenarios)
        .enumerate()
        .map(|(i, o)| {
            let dash = |s: String| if i == 0 { "-".to_string() } else { s };
            [
                o.name.clone(),
                o.cores.to_string(),
                pct(o.utilisation),
                pct(o.new_conn_share_of_cycles),
                dash(if o.speedup.is_finite() {
                    format!("{:.2}x", o.speedup)
                } else {
                    "no work".into()
                }),
                dash(o.cores_freed.to_string()),
                dash(usd(o.usd_per_year_saved)),
            ]
        })
        .collect()
}

const HEAD: [&str; 7] = [
    "scenario",
    "cores",
    "util/core",
    "new-conn share",
    "speedup",
    "cores freed",
    "USD/year saved",
];

fn notes(p: &Plan) -> Vec<String> {
    let mut n = p.notes.clone();
    n.push(format!(
        "cores = the fewest n with n·eff(n)·tsc_hz·(1 − headroom) ≥ load; speedup = baseline cycles/s over the scenario's (the new-connection path: Amdahl, S = 1/((1-p)+p/s) with p = {}); USD/year = cores freed × ${} per core-year (negative: what the scenario costs)",
        pct(p.baseline.new_conn_share_of_cycles),
        thousands(p.core_year_usd)
    ));
    n
}

/// The plan as text for the terminal.
pub fn table(p: &Plan, profile: &Profile) -> String {
    let mut out = format!("flowpath plan (stateful): {}\n", workload_line(p));
    out.push_str(&format!(
        "profile: {} — {}\n",
        profile.name,
        profile.source_line()
    ));
    out.push_str(&format!("cost: {}\n", cost_line(p)));
    out.push_str(&format!(
        "one core: {:.3} GHz{}\n\n",
        p.tsc_hz / 1e9,
        if p.headroom > 0.0 {
            format!("; headroom {}", pct(p.headroom))
        } else {
            String::new()
        }
    ));
    out.push_str(&columns(&HEAD.map(String::from), &rows(p)));
    out.push('\n');
    for n in notes(p) {
        out.push_str(&format!(" - {n}\n"));
    }
    out
}

/// The plan as pretty JSON.
pub fn json(p: &Plan) -> String {
    serde_json::to_string_pretty(p).expect("a plan serialises")
}

/// The plan as a self-contained HTML page: the table and the model curve.
pub fn html(p: &Plan, profile: &Profile) -> String {
    let mut h = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>flowpath plan (stateful)</title>\n<style>body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}table{border-collapse:collapse}td,th{padding:.25em .7em;border-bottom:1px solid #ddd}td{text-align:right}td:first-child{text-align:left}.muted{color:#666;font-size:.9em}</style></head><body>\n<h1>How many cores for connection tracking?</h1>\n");
    h.push_str(&format!(
        "<p><b>{}</b></p>\n<p>{}</p>\n<p>Profile <b>{}</b>: {}</p>\n<table><tr>",
        escape(&workload_line(p)),
        escape(&cost_line(p)),
        escape(&profile.name),
        escape(profile.source_line())
    ));
    for c in HEAD {
        h.push_str(&format!("<th>{}</th>", escape(c)));
    }
    h.push_str("</tr>\n");
    for r in rows(p) {
        h.push_str("<tr>");
        for c in r {
            h.push_str(&format!("<td>{}</td>", escape(&c)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n<ul>\n");
    for n in notes(p) {
        h.push_str(&format!("<li>{}</li>\n", escape(&n)));
    }
    h.push_str("</ul>\n");
    let m = CtModel {
        tsc_hz: p.tsc_hz,
        new_connection_cycles: p.costs.new_connection_cycles,
        established_packet_cycles: p.costs.established_packet_cycles,
        syn_cycles: p.costs.syn_cycles,
        notes: Vec::new(),
    };
    let svg = ct_model::chart(&m);
    h.push_str(svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]));
    h.push_str("\n<p class=\"muted\">A model curve from the profile's two costs, not a measurement: one core's Mpps when a share s of the packets opens a new connection, tsc_hz / ((1 − s)·c_est + s·c_new).</p>\n</body></html>\n");
    h
}
