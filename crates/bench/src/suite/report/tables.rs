//! The suite's terminal tables (each also rendered as HTML by the report page), with the
//! run's header lines and the findings under them.

use crate::suite::findings::{disagreement_note, findings};
use crate::suite::{charts, model, AttackSeries, ClassResult, Point, SuiteResults};
use flowpath_report::{escape, pct, thousands};
use std::fmt::Write;

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
pub(super) struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(super) fn text(&self) -> String {
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

    pub(super) fn html(&self) -> String {
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

pub(super) fn scaling_table(r: &SuiteResults) -> Table {
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

pub(super) fn sizes_table(r: &SuiteResults) -> Table {
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

pub(super) fn hit_miss_table(r: &SuiteResults) -> Table {
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

pub(super) fn attack_table(a: &AttackSeries) -> Table {
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

pub(super) fn curve_table(c: &ClassResult) -> Table {
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

pub(super) fn header_lines(r: &SuiteResults) -> Vec<String> {
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
