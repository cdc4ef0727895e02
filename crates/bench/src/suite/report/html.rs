//! The suite's self-contained HTML page (tables, inline SVG charts, what each shows; no
//! scripts, nothing fetched) and the charts it and the SVG files show.

use super::tables::{
    attack_table, curve_table, header_lines, hit_miss_table, scaling_table, sizes_table,
};
use crate::suite::findings::{disagreement_note, findings};
use crate::suite::{charts, ct_model, SuiteResults};
use flowpath_report::escape;
use std::fmt::Write;

/// The charts: (file name, title, SVG).
pub fn chart_files(r: &SuiteResults) -> Vec<(String, String, String)> {
    let mut v = vec![
        (
            "scaling.svg".to_string(),
            "Throughput vs worker cores".to_string(),
            charts::scaling(&r.scaling),
        ),
        (
            "frame_sizes.svg".into(),
            "Cycles per packet vs frame size".into(),
            charts::sizes(&r.sizes),
        ),
        (
            "hit_miss.svg".into(),
            "Cycles per hit vs per miss".into(),
            charts::hit_miss(&r.classes),
        ),
    ];
    for c in &r.classes {
        v.push((
            format!("miss_rate_{}.svg", c.class.name()),
            format!("Throughput vs miss rate, {}", c.class.name()),
            charts::miss_curve(c, r.meta.tsc_hz),
        ));
    }
    for a in &r.attacks {
        v.push((
            format!("attack_{}.svg", a.case),
            format!("Established flows under a {} attack", a.case),
            charts::attack(a),
        ));
    }
    if let Some(m) = &r.conntrack {
        v.push((
            "ct_new_share.svg".into(),
            "Throughput vs share of new connections (model)".into(),
            ct_model::chart(m),
        ));
    }
    v
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}th,td{border:1px solid #ccc;padding:.25em .55em;\
text-align:right}th{background:#f3f3f3}td{white-space:nowrap}td:first-child,th:first-child{text-align:left}\
.meta{font-family:ui-monospace,monospace;font-size:.85em;background:#f7f7f7;padding:.6em;white-space:pre-wrap}\
.finding-bad{color:#a00}figure{margin:1em 0}svg{max-width:100%;height:auto}";

/// Strip an XML declaration so the SVG can sit inline in HTML.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// The self-contained report: tables, inline SVG charts, a short explanation of each,
/// the machine and the command. No scripts, no external resources.
pub fn html(r: &SuiteResults) -> String {
    let charts = &chart_files(r);
    let mut s = html_head(r);
    html_scaling(&mut s, r, charts);
    html_sizes(&mut s, r, charts);
    html_hit_miss(&mut s, r, charts);
    html_miss_rate(&mut s, r, charts);
    html_attacks(&mut s, r, charts);
    ct_model::html_section(&mut s, r.conntrack.as_ref(), charts);
    s.push_str(
        "<h2>Method</h2>\n<p>Each point builds a fresh datapath, fills its megaflow cache with new flows (so that \
         every later install evicts, the steady state of a sustained miss rate and the state the 100 % point is \
         measured in), warms up at the point's own miss rate, then times the runs. Runs above 10 % misses use \
         proportionally fewer packets. <code>results.json</code> beside this page has every number, every run's \
         sample, the model curve and the configuration.</p>\n",
    );
    s.push_str("</body>\n</html>\n");
    s
}

/// A chart of `charts` by file name, as an inline figure (nothing when absent).
fn figure(charts: &[(String, String, String)], name: &str) -> String {
    charts
        .iter()
        .find(|c| c.0 == name)
        .map_or(String::new(), |c| {
            format!(
                "<figure aria-label=\"{}\">\n{}\n</figure>\n",
                escape(&c.1),
                inline_svg(&c.2)
            )
        })
}

/// The page head, what was measured, the run's header and its findings.
fn html_head(r: &SuiteResults) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    s.push_str("<title>flowpath bench suite — the Core Cost experiments</title>\n");
    let _ = writeln!(s, "<style>{CSS}</style>\n</head>\n<body>");
    s.push_str("<h1>flowpath bench suite — the “Core Cost of Doing Business” experiments</h1>\n");
    s.push_str(
        "<p>Every number comes from the real datapath (parse, exact-match cache, megaflow cache, slow path, \
         actions) on generated frames replayed from memory, timed with the TSC: cycles per packet for the whole \
         loop, the median of repeated runs with min–max. No NIC, no copy into the switch: this is the cost of \
         the switching itself.</p>\n",
    );
    let _ = writeln!(
        s,
        "<div class=\"meta\">{}</div>",
        header_lines(r)
            .iter()
            .map(|l| escape(l))
            .collect::<Vec<_>>()
            .join("\n")
    );
    s.push_str("<h2>What this run found</h2>\n<ul>\n");
    for f in findings(r) {
        let cls = if f.contains("disagrees by more than") {
            " class=\"finding-bad\""
        } else {
            ""
        };
        let _ = writeln!(s, "<li{cls}>{}</li>", escape(&f));
    }
    s.push_str("</ul>\n");

    s
}

/// 1. Throughput vs worker cores.
fn html_scaling(s: &mut String, r: &SuiteResults, charts: &[(String, String, String)]) {
    s.push_str("<h2>1. Throughput vs worker cores</h2>\n");
    s.push_str(
        "<p>N worker threads, each with its own datapath (its own exact-match and megaflow caches) and its own \
         traffic, share one rule store — as RSS spreads flows over cores. Each timed run starts all workers \
         together; the aggregate is all packets over the slowest worker's time, and the efficiency is the \
         aggregate over N times the one-core rate. Dashed: linear scaling. The talk found OVS's kernel datapath \
         near-linear to 4 cores.</p>\n",
    );
    s.push_str(&figure(charts, "scaling.svg"));
    s.push_str(&scaling_table(r).html());
}

/// 2. Cycles per packet vs frame size.
fn html_sizes(s: &mut String, r: &SuiteResults, charts: &[(String, String, String)]) {
    s.push_str("<h2>2. Cycles per packet vs frame size</h2>\n");
    s.push_str(
        "<p>IPv4 traffic through the 1,000-rule pipeline at one frame size (or IMIX: 64, 570 and 1518 B in \
         the proportion 7:4:1), all established flows (hits) and all new flows (misses). The datapath reads \
         headers only, so the cost should not grow with the frame; the talk measured 4,600 cycles per cached \
         packet for OVS, flat from 64 B to the MTU. Line Gbps counts 20 B of preamble and gap per frame.</p>\n",
    );
    s.push_str(&figure(charts, "frame_sizes.svg"));
    s.push_str(&sizes_table(r).html());
}

/// 3. Cycles per hit vs per miss, per traffic class.
fn html_hit_miss(s: &mut String, r: &SuiteResults, charts: &[(String, String, String)]) {
    s.push_str("<h2>3. Cycles per hit vs per miss</h2>\n");
    s.push_str(
        "<p>Per traffic class, the same 3-table, 1,000-rule pipeline with 0 % new flows (every packet an \
         established flow, answered by the caches) and 100 % new flows (every packet classified by the slow \
         path, which installs a megaflow into a full cache and so evicts one). The talk: 4,600 cycles per hit and \
         50,000 per miss for OVS's kernel datapath, 10.8x. Stage columns are cycles per packet from the \
         datapath's own TSC stamps.</p>\n",
    );
    s.push_str(&figure(charts, "hit_miss.svg"));
    s.push_str(&hit_miss_table(r).html());
    s.push_str("<ul>\n");
    for c in &r.classes {
        let _ = writeln!(
            s,
            "<li><b>{}</b>: {}</li>",
            escape(c.class.name()),
            escape(&c.description)
        );
    }
    s.push_str("</ul>\n");
}

/// 4. Throughput vs miss rate, measured and modelled, per class.
fn html_miss_rate(s: &mut String, r: &SuiteResults, charts: &[(String, String, String)]) {
    s.push_str("<h2>4. Throughput vs miss rate: measured and the model</h2>\n");
    s.push_str(
        "<p>The talk's projection: if a hit costs c<sub>hit</sub> and a miss c<sub>miss</sub> cycles, at miss \
         rate m a packet costs (1−m)·c<sub>hit</sub> + m·c<sub>miss</sub> and a core forwards TSC&nbsp;Hz / \
         cycles packets per second — a curve that falls steeply: the hit rate dominates throughput. Here the \
         curve is measured at each miss rate (the source stamps that share of packets as new flows) and the \
         model is drawn beside it from the same run's 0 % and 100 % points, with a ±10 % band. Points where \
         the two differ by more than 10 % are ringed in red and explained under the chart; the x axis spaces \
         the measured rates evenly. The model has no term for the cost of mixing: a batch holding both hits \
         and misses runs every stage for a few packets, branches on hit or miss stop being predictable, new \
         flows displace established ones from the exact-match cache, and the slow path runs cold. The notes \
         compare each stage's cycles with the same interpolation of that stage, so it shows where a gap \
         comes from; \u{201c}outside the stages\u{201d} includes taking the batch from the in-memory source, \
         which stamps the new flows.</p>\n",
    );
    for c in &r.classes {
        let _ = writeln!(s, "<h3>{}</h3>", escape(c.class.name()));
        s.push_str(&figure(
            charts,
            &format!("miss_rate_{}.svg", c.class.name()),
        ));
        s.push_str(&curve_table(c).html());
        for p in c.curve.iter().filter(|p| p.disagrees) {
            let _ = writeln!(
                s,
                "<p class=\"finding-bad\">{}</p>",
                escape(&disagreement_note(c, p))
            );
        }
    }
}

fn html_attacks(s: &mut String, r: &SuiteResults, charts: &[(String, String, String)]) {
    if r.attacks.is_empty() {
        return;
    }
    s.push_str("<h2>5. Established flows under attack</h2>\n");
    s.push_str(
        "<p>\u{201c}Miss traffic is a denial-of-service vector.\u{201d} One worker polls two ports: port A \
         offers established flows at half the rate it reaches alone, port B attacks at the rate on the x axis \
         (max: as fast as the worker takes its packets). <b>flood</b>: every attack packet a new flow through \
         the 3-table miss pipeline (tuple space search). <b>tse</b>: tuple-space-explosion packets against a \
         1,000-rule ClassBench ACL (decision tree), each crafted to need a megaflow with a new mask. The y axis \
         is A's delivered throughput under attack as a share of the same without it (median of runs, min–max \
         bars; the dashed line is 90 %). <b>none</b> is the datapath with every defence off; <b>ranking</b> \
         only re-ranks subtables by hits; <b>default</b> adds cycle-fair polling between ports, the per-port \
         miss budget, the per-port new-mask rate and the mask limit (docs/architecture.md). OVS's figures come \
         from <code>flowpath lab</code>, not from here.</p>\n",
    );
    for a in &r.attacks {
        let _ = writeln!(s, "<h3>{}</h3>", escape(&a.case));
        s.push_str(&figure(charts, &format!("attack_{}.svg", a.case)));
        s.push_str(&attack_table(a).html());
    }
}
