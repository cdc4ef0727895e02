//! The suite's outputs: terminal tables, findings in sentences, a self-contained HTML
//! report (inline SVG charts, no scripts, nothing fetched), `results.json` and one SVG
//! file per chart.

use super::findings::{disagreement_note, findings};
use super::{charts, model, ClassResult, Point, SuiteResults};
pub use flowpath_report::{escape, pct, thousands};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Days since 1970-01-01 → (year, month, day) (H. Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn utc_parts(unix: u64) -> (i64, u32, u32, u64, u64, u64) {
    let (y, mo, d) = civil((unix / 86_400) as i64);
    let s = unix % 86_400;
    (y, mo, d, s / 3600, s / 60 % 60, s % 60)
}

/// `2026-05-01 12:34:56 UTC`.
pub fn utc(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(unix);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// `./flowpath-suite-20260501-123456` (UTC) for the given time.
pub fn default_out_dir(unix: u64) -> PathBuf {
    let (y, mo, d, h, mi, s) = utc_parts(unix);
    PathBuf::from(format!(
        "flowpath-suite-{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}"
    ))
}

fn stages(p: &Point) -> String {
    let s = &p.stage_cycles;
    format!(
        "{:.0}/{:.0}/{:.0}/{:.0}/{:.0}",
        s.parse, s.emc, s.megaflow, s.upcall, s.actions
    )
}

fn range(min: f64, max: f64, prec: usize) -> String {
    format!("{min:.prec$}–{max:.prec$}")
}

/// A table: header and rows of cells, rendered for the terminal or as HTML.
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn text(&self) -> String {
        let cols = self.head.len();
        let width = |i: usize| {
            std::iter::once(&self.head[i])
                .chain(self.rows.iter().filter_map(|r| r.get(i)))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = String::from(" ");
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(c.chars().count());
                if i == 0 {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(pad + 2));
                    s.push_str(c);
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(&self.head);
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }

    fn html(&self) -> String {
        let mut s = String::from("<table>\n<thead><tr>");
        for h in &self.head {
            let _ = write!(s, "<th>{}</th>", escape(h));
        }
        s.push_str("</tr></thead>\n<tbody>\n");
        for r in &self.rows {
            s.push_str("<tr>");
            for c in r {
                let _ = write!(s, "<td>{}</td>", escape(c));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</tbody>\n</table>\n");
        s
    }
}

fn scaling_table(r: &SuiteResults) -> Table {
    let mut t = Table::new(&[
        "new flows",
        "cores",
        "aggregate Mpps",
        "min–max",
        "Mpps/core",
        "cycles/pkt",
        "efficiency",
        "per worker Mpps",
        "pinned",
    ]);
    for s in &r.scaling {
        for p in &s.points {
            t.row(vec![
                pct(s.miss_rate),
                p.cores.to_string(),
                format!("{:.2}", p.aggregate_mpps.median),
                range(p.aggregate_mpps.min, p.aggregate_mpps.max, 2),
                format!("{:.2}", p.mpps_per_core),
                format!("{:.0}", p.cycles_per_packet.median),
                pct(p.efficiency),
                p.worker_mpps
                    .iter()
                    .map(|m| format!("{m:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                if p.pinned { "yes" } else { "no" }.into(),
            ]);
        }
    }
    t
}

fn sizes_table(r: &SuiteResults) -> Table {
    let mut t = Table::new(&[
        "frames",
        "mean bytes",
        "hit cycles/pkt",
        "min–max",
        "hit Mpps",
        "line Gbps",
        "miss cycles/pkt",
        "min–max",
        "miss Mpps",
    ]);
    for s in &r.sizes {
        t.row(vec![
            s.mix.clone(),
            format!("{:.1}", s.mean_frame_bytes),
            format!("{:.0}", s.hit.cycles.median),
            range(s.hit.cycles.min, s.hit.cycles.max, 0),
            format!("{:.2}", s.hit.mpps),
            format!("{:.1}", s.hit_line_gbps),
            format!("{:.0}", s.miss.cycles.median),
            range(s.miss.cycles.min, s.miss.cycles.max, 0),
            format!("{:.2}", s.miss.mpps),
        ]);
    }
    t
}

fn hit_miss_table(r: &SuiteResults) -> Table {
    let mut t = Table::new(&[
        "class",
        "frame bytes",
        "hit cycles/pkt",
        "min–max",
        "miss cycles/pkt",
        "min–max",
        "miss/hit",
        "hit Mpps",
        "miss Mpps",
        "hit: parse/emc/mf/upcall/actions",
        "miss: parse/emc/mf/upcall/actions",
    ]);
    for c in &r.classes {
        t.row(vec![
            c.class.name().into(),
            format!("{:.0}", c.frame_bytes),
            format!("{:.0}", c.hit.cycles.median),
            range(c.hit.cycles.min, c.hit.cycles.max, 0),
            thousands(c.miss.cycles.median),
            format!(
                "{}–{}",
                thousands(c.miss.cycles.min),
                thousands(c.miss.cycles.max)
            ),
            format!("{:.1}x", c.miss_hit_ratio),
            format!("{:.2}", c.hit.mpps),
            format!("{:.2}", c.miss.mpps),
            stages(&c.hit),
            stages(&c.miss),
        ]);
    }
    t
}

fn attack_table(a: &super::AttackSeries) -> Table {
    let mut t = Table::new(&[
        "attack offered",
        "defence",
        "attack pps taken",
        "established Mpps",
        "kept",
        "min–max",
        "attack upcalls/s",
        "over budget/s",
        "slow path",
        "masks",
        "megaflows",
    ]);
    for p in &a.points {
        for d in &p.defences {
            t.row(vec![
                charts::rate_label(p.offered_pps),
                d.defence.name().into(),
                format!("{:.0}", d.attack_pps),
                format!("{:.2}", d.established_mpps),
                pct(d.established_retained),
                range(100.0 * d.retained_min, 100.0 * d.retained_max, 1),
                format!("{:.0}", d.attack_upcalls_per_sec),
                format!("{:.0}", d.attack_budget_drops_per_sec),
                pct(d.slow_path_share),
                d.subtables.to_string(),
                d.megaflows.to_string(),
            ]);
        }
    }
    t
}

fn curve_table(c: &ClassResult) -> Table {
    let mut t = Table::new(&[
        "new flows",
        "observed misses",
        "cycles/pkt",
        "min–max",
        "Mpps",
        "model cycles",
        "model lo–hi",
        "model Mpps",
        "gap",
        "emc/mf/slow path",
        "",
    ]);
    for p in &c.curve {
        let m = &p.measured;
        t.row(vec![
            pct(p.miss_rate),
            pct(m.upcall_share),
            format!("{:.0}", m.cycles.median),
            range(m.cycles.min, m.cycles.max, 0),
            format!("{:.2}", m.mpps),
            format!("{:.0}", p.model_cycles),
            range(p.model_cycles_lo, p.model_cycles_hi, 0),
            format!("{:.2}", p.model_mpps),
            format!("{:+.1} %", p.disagreement * 100.0),
            format!(
                "{:.0}/{:.0}/{:.0} %",
                m.emc_hit_share * 100.0,
                m.megaflow_hit_share * 100.0,
                m.upcall_share * 100.0
            ),
            if p.disagrees {
                format!("DISAGREES (> {})", pct(model::TOLERANCE))
            } else {
                String::new()
            },
        ]);
    }
    t
}

fn header_lines(r: &SuiteResults) -> Vec<String> {
    let m = &r.meta.machine;
    vec![
        format!(
            "machine: {} | {} CPUs | TSC {:.3} GHz | Linux {} | rev {}",
            m.cpu, m.cores, r.meta.tsc_hz / 1e9, m.kernel, m.git_rev
        ),
        format!("command: {}", m.command),
        format!(
            "started {} | {:.0} s | load {:.2} → {:.2} | seed {} | {} runs per point{} | real datapath, generated frames from memory, TSC cycles",
            r.meta.started_utc,
            r.meta.wall_seconds,
            r.meta.load_before,
            r.meta.load_after,
            r.meta.seed,
            r.meta.config.runs,
            if r.meta.quick { " | --quick" } else { "" }
        ),
    ]
}

/// Every table and the findings, for the terminal.
pub fn tables(r: &SuiteResults) -> String {
    let mut s = String::from("flowpath bench suite — the \"Core Cost\" experiments\n");
    for l in header_lines(r) {
        s.push_str(&l);
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "\n1. Throughput vs worker cores (IPv4, 64 B; each worker its own datapath and traffic; one rule store)"
    );
    s.push_str(&scaling_table(r).text());
    let _ = writeln!(
        s,
        "\n2. Cycles per packet vs frame size (IPv4; all established flows = hits, all new flows = misses)"
    );
    s.push_str(&sizes_table(r).text());
    let _ = writeln!(
        s,
        "\n3. Hit vs miss by traffic class (one core; stages from the datapath's TSC stamps, cycles/packet)"
    );
    s.push_str(&hit_miss_table(r).text());
    for c in &r.classes {
        let _ = writeln!(
            s,
            "\n4. Throughput vs miss rate, {} — measured vs model (1−m)·{:.0} + m·{:.0} cycles",
            c.class.name(),
            c.hit_cycles,
            c.miss_cycles
        );
        s.push_str(&curve_table(c).text());
        for p in c.curve.iter().filter(|p| p.disagrees) {
            let _ = writeln!(s, " * {}", disagreement_note(c, p));
        }
    }
    for a in &r.attacks {
        let _ = writeln!(
            s,
            "\n5. Established flows under a {} attack ({} flows on port A offered at {:.2} Mpps, {})",
            a.case, a.established_flows, a.established_offered_mpps, a.classifier
        );
        s.push_str(&attack_table(a).text());
    }
    let _ = writeln!(s, "\nFindings:");
    for f in findings(r) {
        let _ = writeln!(s, " - {f}");
    }
    s
}

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

/// Write `results.json`, `report.html` and every chart as its own `.svg` into `dir`
/// (created if missing). Returns the paths written.
pub fn write_outputs(r: &SuiteResults, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, body: &str| -> std::io::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, body)?;
        written.push(p);
        Ok(())
    };
    put(
        "results.json",
        &(serde_json::to_string_pretty(r).map_err(std::io::Error::other)? + "\n"),
    )?;
    put("report.html", &html(r))?;
    for (name, _, svg) in chart_files(r) {
        put(&name, &svg)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_percentages() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_777_640_096), "2026-05-01 12:54:56 UTC");
        assert_eq!(
            default_out_dir(1_777_640_096),
            PathBuf::from("flowpath-suite-20260501-125456")
        );
        assert_eq!(pct(0.1), "10 %");
        assert_eq!(pct(0.005), "0.50 %");
        assert_eq!(pct(1.0), "100 %");
        assert_eq!(thousands(50_000.4), "50,000");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
