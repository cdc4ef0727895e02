//! Rows of the lab's results and how they are shown: a text table, JSON lines, an SVG
//! bar chart.

use flowpath_base::Summary;
use flowpath_report::chart::{bar_chart, Bar};
pub use flowpath_report::thousands;
use serde::Serialize;

/// One measurement window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Sample {
    pub secs: f64,
    /// Packets counted at the sink during the window.
    pub delivered: u64,
    /// Packets the generator's interface sent during the window.
    pub offered: u64,
    /// Of the frames at the sink, those that were VXLAN over IPv4 (UDP port 4789), as the
    /// sink's XDP program counted them (None: no program, or its map unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vxlan_at_sink: Option<u64>,
    pub mpps: f64,
    pub offered_mpps: f64,
    /// Busy share of the measured CPU (%).
    pub cpu_busy_pct: f64,
    /// Busy TSC cycles of the measured CPU / delivered packets.
    pub cycles_per_packet: Option<f64>,
    /// The switch's own account of the window, when it keeps one (OVS `pmd-perf-show`,
    /// `flowpath stats`): its cycles per packet, packets, upcalls (misses sent to the slow
    /// path) and lost upcalls (misses handled without installing a flow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_cycles_per_packet: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upcalls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_upcalls: Option<u64>,
    /// Each worker's packets in the window (the multi-worker rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_packets: Option<Vec<u64>>,
    /// Packets each of `swin`'s rx queues took in the window (the multi-worker rows): what
    /// each worker was given, beside what it counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<Vec<u64>>,
    /// With `--prog-time`: the XDP program on the switch's ingress (`swin`) and the
    /// nanoseconds a run it took in the window, by the kernel's run-time statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_prog: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prog_ns_per_run: Option<f64>,
}

/// One system and case: medians over the windows (the upper middle window of an even
/// count, [`Summary`]), with min and max.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub system: String,
    /// The traffic class: ipv4, ipv6, vxlan_decap, vxlan_encap.
    pub class: String,
    pub case: String,
    pub mpps: Option<f64>,
    pub mpps_min: Option<f64>,
    pub mpps_max: Option<f64>,
    pub cycles_per_packet: Option<f64>,
    pub cycles_min: Option<f64>,
    pub cycles_max: Option<f64>,
    /// The switch's own cycles per packet (median): `flowpath stats`, OVS `pmd-perf-show`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_cycles_per_packet: Option<f64>,
    /// The same for OVS under the name of its source, `pmd-perf-show`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ovs_pmd_cycles_per_packet: Option<f64>,
    pub offered_mpps: Option<f64>,
    /// Packets at the sink over all windows, and how many of them were VXLAN over IPv4
    /// (UDP port 4789): all of them for encap, none for decap.
    pub delivered: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vxlan_at_sink: Option<u64>,
    pub cpu_busy_pct: Option<f64>,
    /// The CPU whose busy time the cycles are.
    pub cpu: usize,
    /// When the cycles are several CPUs' busy time (the multi-worker rows): those CPUs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
    /// Each worker's packets over all windows (the multi-worker rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worker_packets: Vec<u64>,
    /// With `--prog-time`: the XDP program on the switch's ingress and its nanoseconds a
    /// run, median and min–max of the windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_prog: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prog_ns_per_run: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prog_ns_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prog_ns_max: Option<f64>,
    /// The TSC rate the cycles are counted at.
    pub tsc_hz: f64,
    pub runs: usize,
    pub generator: String,
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub samples: Vec<Sample>,
}

impl Row {
    /// A row that could not be measured.
    pub fn failed(system: &str, case: &str, generator: &str, error: String) -> Row {
        Row {
            system: system.into(),
            case: case.into(),
            generator: generator.into(),
            error: Some(error),
            ..Row::default()
        }
    }

    /// Fill the summary fields from `samples`.
    pub fn summarise(&mut self) {
        self.runs = self.samples.len();
        let col = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<f64> {
            self.samples.iter().filter_map(f).collect()
        };
        let summary = |f: &dyn Fn(&Sample) -> Option<f64>| Summary::of(&col(f));
        let median = |f: &dyn Fn(&Sample) -> Option<f64>| summary(f).map(|s| s.median);
        if let Some(s) = summary(&|s| Some(s.mpps)) {
            (self.mpps, self.mpps_min, self.mpps_max) = (Some(s.median), Some(s.min), Some(s.max));
        }
        if let Some(s) = summary(&|s| s.cycles_per_packet) {
            (self.cycles_per_packet, self.cycles_min, self.cycles_max) =
                (Some(s.median), Some(s.min), Some(s.max));
        }
        self.own_cycles_per_packet = median(&|s| s.own_cycles_per_packet);
        if self.system.starts_with("ovs") {
            self.ovs_pmd_cycles_per_packet = self.own_cycles_per_packet;
        }
        let prog = summary(&|s| s.prog_ns_per_run);
        self.prog_ns_per_run = prog.map(|s| s.median);
        self.prog_ns_min = prog.map(|s| s.min);
        self.prog_ns_max = prog.map(|s| s.max);
        self.xdp_prog = self.samples.iter().rev().find_map(|s| s.xdp_prog.clone());
        self.offered_mpps = median(&|s| Some(s.offered_mpps));
        self.cpu_busy_pct = median(&|s| Some(s.cpu_busy_pct));
        self.delivered = self.samples.iter().map(|s| s.delivered).sum();
        self.worker_packets = Vec::new();
        for w in self
            .samples
            .iter()
            .filter_map(|s| s.worker_packets.as_ref())
        {
            self.worker_packets
                .resize(self.worker_packets.len().max(w.len()), 0);
            for (sum, n) in self.worker_packets.iter_mut().zip(w) {
                *sum += n;
            }
        }
        self.vxlan_at_sink = self
            .samples
            .iter()
            .map(|s| s.vxlan_at_sink)
            .sum::<Option<u64>>()
            .filter(|_| !self.samples.is_empty());
    }

    /// Does this row say the system cannot do its class ("n/a: why")?
    pub fn not_applicable(&self) -> bool {
        self.error.as_deref().is_some_and(|e| e.starts_with("n/a"))
    }
}

fn mpps_cell(r: &Row) -> String {
    match (r.mpps, r.mpps_min, r.mpps_max) {
        (Some(m), Some(lo), Some(hi)) if r.runs > 1 => format!("{m:.3} [{lo:.3}-{hi:.3}]"),
        (Some(m), _, _) => format!("{m:.3}"),
        _ => "-".into(),
    }
}

fn cycles_cell(r: &Row) -> String {
    match (r.cycles_per_packet, r.cycles_min, r.cycles_max) {
        (Some(m), Some(lo), Some(hi)) if r.runs > 1 => {
            format!("{} [{}-{}]", thousands(m), thousands(lo), thousands(hi))
        }
        (Some(m), _, _) => thousands(m),
        _ => "-".into(),
    }
}

/// The results as an aligned text table; errors become "skipped: reason" in the notes.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "system",
        "class",
        "case",
        "Mpps at sink [min-max]",
        "cycles/pkt [min-max]",
        "own cyc/pkt",
        "offered Mpps",
        "CPU busy",
        "runs",
        "notes",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let notes = match &r.error {
            Some(e) if r.not_applicable() => e.clone(),
            Some(e) => format!("skipped: {e}"),
            None => r.notes.join("; "),
        };
        cells.push(vec![
            r.system.clone(),
            r.class.clone(),
            r.case.clone(),
            mpps_cell(r),
            cycles_cell(r),
            r.own_cycles_per_packet.map_or("-".into(), thousands),
            r.offered_mpps.map_or("-".into(), |m| format!("{m:.3}")),
            r.cpu_busy_pct.map_or("-".into(), |b| {
                if r.cpus.is_empty() {
                    format!("{b:.0}% cpu{}", r.cpu)
                } else {
                    let cpus: Vec<String> = r.cpus.iter().map(|c| c.to_string()).collect();
                    format!("{b:.0}% cpu{}", cpus.join("+"))
                }
            }),
            r.runs.to_string(),
            notes,
        ]);
    }
    let ncol = header.len();
    let width: Vec<usize> = (0..ncol)
        .map(|i| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (k, row) in cells.iter().enumerate() {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            let pad = width[i] - c.chars().count();
            let numeric = (3..=8).contains(&i);
            if i == ncol - 1 {
                line.push_str(c);
            } else if numeric && k > 0 {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
                line.push_str("  ");
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if k == 0 {
            let total: usize = width.iter().sum::<usize>() + 2 * (ncol - 1);
            out.push_str(&"-".repeat(total.min(160)));
            out.push('\n');
        }
    }
    out
}

/// The results as a Markdown table for `--markdown`: a caption with the command, machine and
/// date, one row per system, class and case, each switch's Mpps over Open vSwitch's in the
/// same run (the peer every row is read against; not for the generators alone), the notes
/// every row shares said once below the table, then the run's `summary`.
pub fn markdown(rows: &[Row], summary: &str) -> String {
    let classes: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.class.as_str()).collect();
    let shared = shared_notes(rows);
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let notes = match &r.error {
                Some(e) => e.clone(),
                None => {
                    let own: Vec<&str> = r
                        .notes
                        .iter()
                        .map(String::as_str)
                        .filter(|n| !shared.contains(n))
                        .collect();
                    own.join("; ")
                }
            };
            let mut row = vec![format!("`{}`", r.system)];
            if classes.len() > 1 {
                row.push(r.class.clone());
            }
            row.extend([
                r.case.clone(),
                mpps_cell(r),
                cycles_cell(r),
                r.own_cycles_per_packet.map_or(String::new(), thousands),
                r.offered_mpps.map_or(String::new(), |m| format!("{m:.3}")),
                vs_ovs(rows, r),
                notes,
            ]);
            row
        })
        .collect();
    let mut head = vec!["system"];
    if classes.len() > 1 {
        head.push("class");
    }
    head.extend([
        "case",
        "Mpps at sink [min-max]",
        "cycles/packet [min-max]",
        "own counter",
        "offered Mpps",
        "Mpps vs OVS",
        "notes",
    ]);
    let tsc_ghz = rows.first().map_or(0.0, |r| r.tsc_hz / 1e9);
    let every_row = if shared.is_empty() {
        String::new()
    } else {
        format!("Every row: {}.\n\n", shared.join("; "))
    };
    format!(
        "{}\n{every_row}{}\n",
        flowpath_report::markdown::captioned(
            "Medians of the windows [min-max]; cycles per packet are the switch CPU's busy TSC \
             cycles over the packets delivered, the same for every system; \"own counter\" is the \
             switch's own figure (OVS `pmd-perf-show`, `flowpath stats`).",
            tsc_ghz,
            &head,
            &body
        ),
        summary.trim_end()
    )
}

/// A switch's Mpps over `ovs-afxdp`'s of the same class and case (empty for OVS itself, the
/// generators alone, and where OVS has no such row).
fn vs_ovs(rows: &[Row], r: &Row) -> String {
    if matches!(r.system.as_str(), "ovs-afxdp" | "generator" | "trafgen") {
        return String::new();
    }
    let ovs = rows
        .iter()
        .find(|o| o.system == "ovs-afxdp" && o.class == r.class && o.case == r.case)
        .and_then(|o| o.mpps);
    match (r.mpps, ovs) {
        (Some(m), Some(o)) if o > 0.0 => format!("{:.2}x", m / o),
        _ => String::new(),
    }
}

/// The notes every measured row carries (said once, not in every row).
fn shared_notes(rows: &[Row]) -> Vec<&str> {
    let mut measured = rows.iter().filter(|r| r.error.is_none());
    let Some(first) = measured.next() else {
        return Vec::new();
    };
    let rest: Vec<&Row> = measured.collect();
    if rest.is_empty() {
        return Vec::new();
    }
    first
        .notes
        .iter()
        .map(String::as_str)
        .filter(|n| rest.iter().all(|r| r.notes.iter().any(|m| m == n)))
        .collect()
}

/// One JSON object per row, one per line (JSON Lines).
pub fn json_lines(rows: &[Row]) -> String {
    rows.iter()
        .map(|r| serde_json::to_string(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")))
        .map(|l| l + "\n")
        .collect()
}

/// A horizontal bar chart of Mpps at the sink per system and case (errors left out), with
/// the min–max spread and the cycles per packet.
pub fn svg(rows: &[Row], title: &str) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .filter_map(|r| {
            let m = r.mpps?;
            let cyc = r
                .cycles_per_packet
                .map_or(String::new(), |c| format!(", {} cyc/pkt", thousands(c)));
            Some(Bar {
                label: if r.class.is_empty() || r.class == "ipv4" {
                    format!("{} {}", r.system, r.case)
                } else {
                    format!("{} {} {}", r.system, r.class, r.case)
                },
                value: m,
                range: r.mpps_min.zip(r.mpps_max),
                note: format!("{m:.3} Mpps{cyc}"),
                color: usize::from(r.case == "miss"),
            })
        })
        .collect();
    bar_chart(
        title,
        "Mpps delivered at the sink (median, line: min-max); blue: hit, orange: miss",
        &bars,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &str, case: &str, mpps: &[f64], cycles: &[f64]) -> Row {
        let mut r = Row {
            system: system.into(),
            class: "ipv4".into(),
            case: case.into(),
            generator: "trafgen".into(),
            cpu: 1,
            samples: mpps
                .iter()
                .zip(cycles)
                .map(|(&m, &c)| Sample {
                    secs: 5.0,
                    mpps: m,
                    offered_mpps: m,
                    cpu_busy_pct: 100.0,
                    cycles_per_packet: Some(c),
                    ..Sample::default()
                })
                .collect(),
            ..Row::default()
        };
        r.summarise();
        r
    }

    #[test]
    fn markdown_reads_every_row_against_ovs_of_the_same_case() {
        let mut rows = vec![
            row(
                "ovs-afxdp",
                "hit",
                &[0.30, 0.32, 0.31],
                &[6400.0, 6450.0, 6500.0],
            ),
            row(
                "flowpath-xdp",
                "hit",
                &[3.1, 3.2, 3.0],
                &[700.0, 720.0, 710.0],
            ),
            row("flowpath-xdp", "miss", &[0.5], &[5000.0]),
        ];
        for r in &mut rows {
            r.notes = vec!["interleaved".into(), format!("{} notes", r.case)];
        }
        let md = markdown(&rows, "Summary line.");
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines[0].starts_with("`flowpath"), "{md}");
        assert!(lines.contains(&"| system | case | Mpps at sink [min-max] | cycles/packet [min-max] | own counter | offered Mpps | Mpps vs OVS | notes |"), "{md}");
        let xdp_hit = lines
            .iter()
            .find(|l| l.starts_with("| `flowpath-xdp` | hit"))
            .unwrap();
        assert!(xdp_hit.contains("| 10.00x |"), "{md}");
        let xdp_miss = lines
            .iter()
            .find(|l| l.starts_with("| `flowpath-xdp` | miss"))
            .unwrap();
        // No OVS row of that case in the run: no ratio.
        let vs_ovs = xdp_miss.split('|').map(str::trim).nth(7);
        assert_eq!(vs_ovs, Some(""), "{md}");
        assert_eq!(lines.last(), Some(&"Summary line."));
        // A note every row has is said once, under the table; the others stay in their rows.
        assert!(lines.contains(&"Every row: interleaved."), "{md}");
        assert!(
            xdp_hit.ends_with("| hit notes |") && !xdp_hit.contains("interleaved"),
            "{md}"
        );
    }

    #[test]
    fn table_has_a_header_a_rule_and_one_line_per_row() {
        let rows = vec![
            row(
                "ovs-afxdp",
                "hit",
                &[0.30, 0.32, 0.31],
                &[6400.0, 6450.0, 6500.0],
            ),
            Row::failed(
                "testpmd-afxdp",
                "hit",
                "trafgen",
                "dpdk-testpmd not found".into(),
            ),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].starts_with("system"));
        assert!(lines[1].starts_with("-----"));
        assert!(lines[2].contains("0.310 [0.300-0.320]"), "{t}");
        assert!(lines[2].contains("6,450 [6,400-6,500]"), "{t}");
        assert!(lines[2].contains("100% cpu1"), "{t}");
        assert!(lines[3].contains("skipped: dpdk-testpmd not found"), "{t}");
        // Columns line up: "case" starts at the same place on every line.
        let at = lines[0].find("case").unwrap();
        assert_eq!(&lines[2][at..at + 3], "hit");
        assert_eq!(&lines[3][at..at + 3], "hit");
        let at = lines[0].find("class").unwrap();
        assert_eq!(&lines[2][at..at + 4], "ipv4");
    }

    #[test]
    fn not_applicable_rows_say_so_and_vxlan_frames_add_up() {
        let mut r = row("flowpath-afxdp", "hit", &[0.3, 0.3], &[1.0, 1.0]);
        for s in &mut r.samples {
            (s.delivered, s.vxlan_at_sink) = (100, Some(99));
        }
        r.summarise();
        assert_eq!((r.delivered, r.vxlan_at_sink), (200, Some(198)));
        r.samples[1].vxlan_at_sink = None;
        r.summarise();
        assert_eq!(r.vxlan_at_sink, None, "one window unread: no count");
        let mut na = Row::failed("testpmd-afxdp", "hit", "g", "n/a: io-fwd".into());
        na.class = "vxlan_encap".into();
        assert!(na.not_applicable() && !r.not_applicable());
        let t = table(&[r, na]);
        assert!(t.contains("n/a: io-fwd") && !t.contains("skipped"), "{t}");
        assert!(t.contains("vxlan_encap"), "{t}");
    }

    #[test]
    fn json_lines_carry_the_required_fields() {
        let rows = vec![
            row("linux", "miss", &[0.3], &[10_000.0]),
            Row::failed("ovs-afxdp", "hit", "trafgen", "x".into()),
        ];
        let out = json_lines(&rows);
        let objs: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(objs.len(), 2);
        for k in [
            "system",
            "class",
            "case",
            "mpps",
            "cycles_per_packet",
            "runs",
        ] {
            assert!(objs[0].get(k).is_some(), "{k}");
            assert!(objs[1].get(k).is_some(), "{k}");
        }
        assert_eq!(objs[0]["mpps"], 0.3);
        assert_eq!(objs[0]["runs"], 1);
        assert_eq!(objs[1]["error"], "x");
        assert!(objs[1]["mpps"].is_null());
    }

    #[test]
    fn svg_has_one_bar_per_measured_row() {
        let rows = vec![
            row("linux", "hit", &[0.3, 0.4], &[1.0, 1.0]),
            row("linux", "miss", &[0.2], &[1.0]),
            Row::failed("x", "hit", "g", "e".into()),
        ];
        let s = svg(&rows, "a <title>");
        // One rectangle per measured row, besides the chart's background.
        assert_eq!(s.matches("<rect").count(), 1 + 2);
        assert!(s.contains("a &lt;title&gt;"));
        assert!(s.ends_with("</svg>\n"));
    }
}
