//! A plan as a terminal table, JSON, and a self-contained HTML report with a chart of the
//! cores needed against the miss rate.

use crate::plan::{cores_vs_miss_rate, Options, Plan};
use crate::profile::Profile;
use crate::units::{fmt_pps, Rate, WIRE_OVERHEAD_BYTES};
pub use flowpath_report::{escape, pct, thousands};

fn usd(x: f64) -> String {
    if x < 0.0 {
        format!("-${}", thousands(-x))
    } else {
        format!("${}", thousands(x))
    }
}

fn speedup(s: f64) -> String {
    if s.is_finite() {
        format!("{s:.2}x")
    } else {
        "no server work".into()
    }
}

/// How the workload was given, for the header line.
#[derive(Clone, Debug)]
pub struct Given {
    pub rate: Rate,
    /// `64`, `imix`, …
    pub size_label: String,
}

fn workload_line(plan: &Plan, given: &Given) -> String {
    let w = &plan.workload;
    let size = if given.size_label == "imix" {
        format!("IMIX frames ({:.1} B mean)", w.frame_bytes)
    } else {
        format!("{} B frames", given.size_label)
    };
    let rate = match given.rate {
        Rate::Pps(_) => fmt_pps(w.pps),
        Rate::Bps(_) => format!(
            "{} = {} ({:.1} B a frame on the wire with preamble and gap)",
            given.rate.describe(),
            fmt_pps(w.pps),
            w.frame_bytes + WIRE_OVERHEAD_BYTES
        ),
    };
    format!(
        "{} traffic, {size}, {rate}, {} new flows (misses)",
        w.class.name(),
        pct(w.miss_rate)
    )
}

fn cost_line(plan: &Plan) -> String {
    let model = if plan.measured_curves {
        "the profile's measured curves at this miss rate and size"
    } else {
        "(1 − m)·hit + m·miss"
    };
    format!(
        "a hit costs {} cycles, a miss {}; at this miss rate a packet costs {} cycles ({model}); misses take {} of the cycles",
        thousands(plan.hit_cycles),
        thousands(plan.miss_cycles),
        thousands(plan.cycles_per_packet),
        pct(plan.miss_share_of_cycles)
    )
}

/// The plan as text for the terminal.
pub fn table(plan: &Plan, profile: &Profile, given: &Given) -> String {
    let mut out = String::new();
    out.push_str(&format!("flowpath plan: {}\n", workload_line(plan, given)));
    out.push_str(&format!(
        "profile: {} — {}\n",
        profile.name,
        profile.source_line()
    ));
    out.push_str(&format!("cost: {}\n", cost_line(plan)));
    out.push_str(&format!(
        "one core: {:.3} GHz / {} cycles = {}{}\n\n",
        plan.tsc_hz / 1e9,
        thousands(plan.cycles_per_packet),
        fmt_pps(plan.pps_per_core),
        if plan.headroom > 0.0 {
            format!(
                "; headroom {} (each core filled to at most {})",
                pct(plan.headroom),
                pct(1.0 - plan.headroom)
            )
        } else {
            String::new()
        }
    ));
    out.push_str(&scenario_table(plan));
    let notes = plan_notes(plan);
    out.push('\n');
    for n in notes {
        out.push_str(&format!(" - {n}\n"));
    }
    out
}

/// The scenarios as an aligned text table.
fn scenario_table(plan: &Plan) -> String {
    let head = [
        "scenario",
        "cores",
        "util/core",
        "miss share",
        "cycles/pkt",
        "speedup",
        "cores freed",
        "USD/year saved",
    ];
    let mut rows: Vec<[String; 8]> = Vec::new();
    for (i, o) in std::iter::once(&plan.baseline)
        .chain(&plan.scenarios)
        .enumerate()
    {
        rows.push([
            o.name.clone(),
            o.cores.to_string(),
            pct(o.utilisation),
            pct(o.miss_share_of_cycles),
            thousands(o.cycles_per_packet),
            if i == 0 {
                "-".into()
            } else {
                speedup(o.speedup)
            },
            if i == 0 {
                "-".into()
            } else {
                o.cores_freed.to_string()
            },
            if i == 0 {
                "-".into()
            } else {
                usd(o.usd_per_year_saved)
            },
        ]);
    }
    flowpath_report::columns(&head.map(String::from), &rows)
}

/// The plan's notes, the scenarios' and how speedup and savings are computed.
fn plan_notes(plan: &Plan) -> Vec<String> {
    let mut notes: Vec<String> = plan.notes.clone();
    for o in &plan.scenarios {
        if let Some(h) = o.hit_cores {
            notes.push(format!(
                "{}: {h} cores for hits + {} for misses",
                o.name,
                o.cores - h
            ));
        }
        for n in &o.notes {
            notes.push(format!("{}: {n}", o.name));
        }
    }
    notes.push(format!(
        "speedup = baseline server cycles per packet / the scenario's (for the miss path: Amdahl, S = 1/((1-p)+p/s) with p = {}); USD/year = cores freed x ${} per core-year",
        pct(plan.miss_share_of_cycles),
        thousands(plan.core_year_usd)
    ));
    notes
}

/// The plan as pretty JSON.
pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("a plan serialises")
}

/// Cores needed against the miss rate, one step line per scenario, as a standalone `<svg>`
/// (the project's chart engine, `flowpath_report::chart`).
pub fn step_chart(
    title: &str,
    series: &[(String, Vec<(f64, u64)>)],
    x_max: f64,
    marker: Option<f64>,
) -> String {
    flowpath_report::chart::step_chart(
        title,
        (
            "miss rate (share of packets that are new flows)",
            "server cores needed",
        ),
        series,
        x_max,
        marker.map(|m| (m, "this plan")),
    )
}

/// The plan as a self-contained HTML page: inputs, the table, the cores-vs-miss-rate
/// chart over 0…100 % and over 0…20 % side by side, and the profile's provenance.
pub fn html(plan: &Plan, profile: &Profile, opts: &Options, given: &Given) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str("<title>flowpath plan</title>\n<style>\n\
        body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}\n\
        table{border-collapse:collapse;margin:.8em 0}td,th{padding:.25em .7em;border-bottom:1px solid #ddd}\n\
        td{text-align:right}td:first-child,th:first-child{text-align:left}\n\
        .charts{display:flex;flex-wrap:wrap;gap:1em}.muted{color:#666;font-size:.9em}\n\
        pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em}\n</style></head><body>\n");
    h.push_str("<h1>How many cores?</h1>\n");
    h.push_str(&format!(
        "<p><b>{}</b></p>\n<p>{}</p>\n",
        escape(&workload_line(plan, given)),
        escape(&cost_line(plan))
    ));
    h.push_str(&format!(
        "<p>Profile <b>{}</b>: TSC {:.3} GHz, one core forwards {} at this cost; headroom {}.</p>\n",
        escape(&profile.name),
        plan.tsc_hz / 1e9,
        escape(&fmt_pps(plan.pps_per_core)),
        escape(&pct(plan.headroom))
    ));
    html_scenarios(&mut h, plan);
    html_charts(&mut h, plan, profile, opts);
    html_profile(&mut h, profile);
    h.push_str("</body></html>\n");
    h
}

/// The scenarios' table and their notes.
fn html_scenarios(h: &mut String, plan: &Plan) {
    h.push_str("<table><tr><th>scenario</th><th>cores</th><th>utilisation per core</th><th>miss share of cycles</th><th>cycles per packet</th><th>speedup</th><th>cores freed</th><th>USD per year saved</th></tr>\n");
    for (i, o) in std::iter::once(&plan.baseline)
        .chain(&plan.scenarios)
        .enumerate()
    {
        let dash = |s: String| if i == 0 { "–".to_string() } else { s };
        h.push_str(&format!(
            "<tr><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&o.name),
            o.cores,
            escape(&pct(o.utilisation)),
            escape(&pct(o.miss_share_of_cycles)),
            thousands(o.cycles_per_packet),
            dash(speedup(o.speedup)),
            dash(o.cores_freed.to_string()),
            dash(escape(&usd(o.usd_per_year_saved)))
        ));
    }
    h.push_str("</table>\n");
    let mut notes = plan.notes.clone();
    for o in &plan.scenarios {
        for n in &o.notes {
            notes.push(format!("{}: {n}", o.name));
        }
    }
    if !notes.is_empty() {
        h.push_str("<ul>\n");
        for n in notes {
            h.push_str(&format!("<li>{}</li>\n", escape(&n)));
        }
        h.push_str("</ul>\n");
    }
}

/// Cores against the miss rate, full range and zoomed, with this plan's rate marked.
fn html_charts(h: &mut String, plan: &Plan, profile: &Profile, opts: &Options) {
    let rates: Vec<f64> = (0..=200).map(|i| i as f64 / 200.0).collect();
    let mut fine: Vec<f64> = (0..=200).map(|i| i as f64 * 0.001).collect();
    fine.push(plan.workload.miss_rate);
    fine.sort_by(f64::total_cmp);
    fine.dedup();
    let full = cores_vs_miss_rate(profile, &plan.workload, opts, &rates);
    let low = cores_vs_miss_rate(profile, &plan.workload, opts, &fine);
    let m = Some(plan.workload.miss_rate);
    h.push_str(&format!(
        "<h2>Cores needed vs miss rate at {}</h2>\n<div class=\"charts\">\n",
        escape(&fmt_pps(plan.pps))
    ));
    h.push_str(&step_chart("miss rate 0–100 %", &full, 1.0, m));
    h.push_str(&step_chart("miss rate 0–20 % (zoomed)", &low, 0.2, m));
    h.push_str("</div>\n<p class=\"muted\">Same rate, frame size and traffic class at every miss rate; \
        each line is the baseline or one scenario, in whole cores (lines that coincide are drawn 2 px apart). \
        The speed-up of a faster miss path is Amdahl's law, S = 1 / ((1 − p) + p / s), with p the share of the \
        cycles that goes to misses at this miss rate (from the profile, not assumed).</p>\n");
}

/// Where the profile's costs come from.
fn html_profile(h: &mut String, profile: &Profile) {
    h.push_str(&format!(
        "<h2>Profile {}</h2>\n<pre>{}</pre>\n",
        escape(&profile.name),
        escape(profile.source.trim())
    ));
    if !profile.notes.is_empty() {
        h.push_str("<ul>\n");
        for n in &profile.notes {
            h.push_str(&format!("<li>{}</li>\n", escape(n)));
        }
        h.push_str("</ul>\n");
    }
    if let Some(mc) = &profile.machine {
        h.push_str(&format!(
            "<p class=\"muted\">Calibrated on {} ({} CPUs, kernel {}) at {}, revision {}: <code>{}</code>.</p>\n",
            escape(&mc.cpu),
            mc.cores,
            escape(&mc.kernel),
            escape(&mc.date),
            escape(&mc.git_rev),
            escape(&mc.command)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_are_grouped_with_the_sign_first() {
        assert_eq!(usd(-4000.0), "-$4,000");
    }
}
