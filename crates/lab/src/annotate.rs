//! Notes that compare the rows of one run, added once every row is measured: rows the
//! generator may have bounded or paced below the rate asked, the multi-worker rows' scaling,
//! and the XDP tier's targets (against redirect-only XDP, per core equivalent), where its
//! cycles go over redirect-only and, with `--prog-time`, its program's own time.

use crate::report::{self, Row, Sample};
use crate::systems;
use flowpath_base::Summary;

/// The multi-worker rows: each worker's packets, the rate over the one-worker row of the
/// same system, case and class in this run (the target: >= 1.8x), and whether that
/// ratio can be judged here: not when the workers and the generators (one per worker)
/// need more CPUs than `cpus`, or when the generators offer no more than is delivered.
pub fn annotate_scaling(rows: &mut [Row], cpus: usize) {
    let one: Vec<((String, String, String), f64)> = rows
        .iter()
        .filter_map(|r| Some(((r.system.clone(), r.case.clone(), r.class.clone()), r.mpps?)))
        .collect();
    for r in rows.iter_mut() {
        let workers = r.worker_packets.len();
        if workers < 2 {
            continue;
        }
        let per: Vec<String> = r
            .worker_packets
            .iter()
            .map(|&n| report::thousands(n as f64))
            .collect();
        r.notes
            .push(format!("packets per worker: {}", per.join(" / ")));
        let (Some(m2), Some(base)) = (r.mpps, r.system.strip_suffix(&format!("-{workers}w")))
        else {
            continue;
        };
        let Some((_, m1)) = one
            .iter()
            .find(|((s, case, class), _)| s == base && *case == r.case && *class == r.class)
        else {
            continue;
        };
        let mut bound = Vec::new();
        if 2 * workers > cpus {
            bound.push(format!(
                "{workers} workers and {workers} generators (and swin's receive) share {cpus} CPUs"
            ));
        }
        if let Some(o) = r.offered_mpps.filter(|&o| o <= 1.1 * m2) {
            bound.push(format!("offered {o:.3} Mpps ~ delivered"));
        }
        let ratio = m2 / m1;
        let verdict = if bound.is_empty() {
            if ratio >= 1.8 {
                "target >= 1.8x met".to_string()
            } else {
                "target >= 1.8x NOT met".to_string()
            }
        } else {
            format!(
                "GENERATOR-BOUND: {}: the 1->{workers} ratio is not judged here",
                bound.join("; ")
            )
        };
        r.notes.push(format!(
            "1->{workers} workers: {ratio:.2}x ({base} {m1:.3} -> {m2:.3} Mpps, this run); {verdict}"
        ));
    }
}

/// A CPU this busy or more is saturated: the row's Mpps is what the switch can do.
const SATURATED_BUSY_PCT: f64 = 95.0;

/// The XDP tier against redirect-only XDP (the target: cached flows at >= 0.8x):
/// each `flowpath-xdp` hit row next to the `xdp-forward` row of the same class in this
/// run, by Mpps at the sink and by the switch CPU's busy cycles per packet (redirect-only's
/// cycles over the tier's). The verdict uses Mpps when both rows saturated the switch CPU,
/// else the cycles (the generator then set the rate, not the switch), and says which.
pub fn annotate_xdp_tier_ratio(rows: &mut [Row]) {
    let fwd: Vec<(String, f64, f64, Option<f64>)> = rows
        .iter()
        .filter(|r| r.system == "xdp-forward" && r.case == "hit")
        .filter_map(|r| {
            Some((
                r.class.clone(),
                r.mpps?,
                r.cycles_per_packet?,
                r.cpu_busy_pct,
            ))
        })
        .collect();
    for r in rows.iter_mut() {
        if r.system != "flowpath-xdp" || r.case != "hit" {
            continue;
        }
        let (Some(m), Some(c)) = (r.mpps, r.cycles_per_packet) else {
            continue;
        };
        let Some((_, fm, fc, fbusy)) = fwd.iter().find(|(class, ..)| *class == r.class) else {
            continue;
        };
        let by_mpps = m / fm;
        let by_cycles = fc / c;
        let saturated = |b: Option<f64>| b.is_some_and(|b| b >= SATURATED_BUSY_PCT);
        let (ratio, figure) = if saturated(r.cpu_busy_pct) && saturated(*fbusy) {
            (
                by_mpps,
                "Mpps: both rows saturated the switch CPU".to_string(),
            )
        } else {
            let busy = |b: Option<f64>| b.map_or("?".into(), |b| format!("{b:.0}%"));
            (
                by_cycles,
                format!(
                    "cycles/pkt: the switch CPU was under {SATURATED_BUSY_PCT}% busy in a row \
                     (tier {}, redirect-only {})",
                    busy(r.cpu_busy_pct),
                    busy(*fbusy)
                ),
            )
        };
        let verdict = if ratio >= 0.8 { "met" } else { "NOT met" };
        r.notes.push(format!(
            "vs redirect-only (xdp-forward, this run): {by_mpps:.2}x by Mpps, {by_cycles:.2}x by \
             cycles/pkt; judged by {figure}; target >= 0.8x {verdict}"
        ));
    }
}

/// Where the XDP tier's cycles over redirect-only go, from the three XDP hit rows of a
/// class in this run: `xdp-parse-forward` over `xdp-forward` is reading and parsing the
/// headers (every switch pays it; its ratio to redirect-only bounds any parsing program's),
/// `flowpath-xdp` over `xdp-parse-forward` is the tier's own lookup, actions and counters.
/// Busy cycles per packet of the switch CPU, whichever row set the rate. When the rows have
/// the same number of windows (as `--interleave` takes them: window i of each row in round
/// i) each part is the median of its per-round differences, with their range, so a slow
/// spell of a shared machine falls on both sides of a difference; else the rows' medians.
pub fn annotate_xdp_parse_split(rows: &mut [Row]) {
    let find = |rows: &[Row], system: &str, class: &str| {
        rows.iter()
            .position(|r| r.system == system && r.case == "hit" && r.class == class)
    };
    let mut notes = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.case != "hit" || r.system != "flowpath-xdp" {
            continue;
        }
        let (Some(f), Some(p)) = (
            find(rows, "xdp-forward", &r.class),
            find(rows, systems::PARSE_FORWARD, &r.class),
        ) else {
            continue;
        };
        let Some(split) = ParseSplit::of(&rows[f], &rows[p], r) else {
            continue;
        };
        let th = report::thousands;
        let part = |s: Summary| {
            if split.rounds > 1 {
                format!("{} [{}..{}]", th(s.median), th(s.min), th(s.max))
            } else {
                th(s.median)
            }
        };
        let how = if split.rounds > 1 {
            format!("medians of {} per-round differences [range]", split.rounds)
        } else {
            "the rows' medians".into()
        };
        notes.push((
            p,
            format!(
                "vs redirect-only: reading and parsing the headers costs {} cycles a packet \
                 ({how}); a program that parses cannot beat redirect-only by more than that",
                part(split.read)
            ),
        ));
        notes.push((
            i,
            format!(
                "its cycles over redirect-only: {} reading and parsing the headers \
                 (xdp-parse-forward), {} the tier's lookup, actions and counters ({how}, \
                 cycles a packet)",
                part(split.read),
                part(split.own)
            ),
        ));
    }
    for (i, n) in notes {
        rows[i].notes.push(n);
    }
}

/// [`annotate_xdp_parse_split`]'s two parts, each cycles a packet (median, min, max).
struct ParseSplit {
    rounds: usize,
    read: Summary,
    own: Summary,
}

impl ParseSplit {
    fn of(fwd: &Row, parse: &Row, tier: &Row) -> Option<ParseSplit> {
        let cycles = |s: &Sample| s.cycles_per_packet;
        if let (Some(read), Some(own)) = (
            per_round_difference(fwd, parse, cycles),
            per_round_difference(parse, tier, cycles),
        ) {
            if read.len() == own.len() {
                return Some(ParseSplit {
                    rounds: read.len(),
                    read: Summary::of(&read)?,
                    own: Summary::of(&own)?,
                });
            }
        }
        let (f, p, t) = (
            fwd.cycles_per_packet?,
            parse.cycles_per_packet?,
            tier.cycles_per_packet?,
        );
        Some(ParseSplit {
            rounds: 1,
            read: one(p - f),
            own: one(t - p),
        })
    }
}

/// `b` minus `a` window by window in a figure of their windows, when both rows have it in
/// the same number of windows (as `--interleave` takes them: window i of each row in round
/// i), so that a slow spell falls on both sides of each difference.
fn per_round_difference(
    a: &Row,
    b: &Row,
    window: impl Fn(&Sample) -> Option<f64>,
) -> Option<Vec<f64>> {
    let wa: Vec<f64> = a.samples.iter().filter_map(&window).collect();
    let wb: Vec<f64> = b.samples.iter().filter_map(&window).collect();
    (!wa.is_empty() && wa.len() == wb.len())
        .then(|| wb.iter().zip(&wa).map(|(b, a)| b - a).collect())
}

/// The XDP tier's other target: cached flows at >= this many Mpps per core
/// equivalent (the published OVS XDP flow-provider result).
pub const XDP_TIER_PER_CORE_MPPS: f64 = 3.5;

/// The XDP tier's hit rows against [`XDP_TIER_PER_CORE_MPPS`]. Per core equivalent is the
/// TSC rate over the switch CPU's busy cycles per packet: what one fully busy core forwards
/// at this row's cost. That is the figure to judge by when the generator cannot offer the
/// rate itself (on a small machine it cannot), so the note also says what was offered.
pub fn annotate_xdp_tier_per_core(rows: &mut [Row]) {
    for r in rows.iter_mut() {
        if r.system != "flowpath-xdp" || r.case != "hit" || r.tsc_hz <= 0.0 {
            continue;
        }
        let Some(c) = r.cycles_per_packet.filter(|&c| c > 0.0) else {
            continue;
        };
        let per_core = r.tsc_hz / c / 1e6;
        let verdict = if per_core >= XDP_TIER_PER_CORE_MPPS {
            "met"
        } else {
            "NOT met"
        };
        let offered = match r.offered_mpps {
            Some(o) if o < XDP_TIER_PER_CORE_MPPS => format!(
                "; the generator offered {o:.2} Mpps, less than the target, so the cycles judge it"
            ),
            Some(o) => format!("; offered {o:.2} Mpps"),
            None => String::new(),
        };
        r.notes.push(format!(
            "per core equivalent: {per_core:.2} Mpps (TSC {:.3} GHz / {} busy cycles a \
             packet); target >= {XDP_TIER_PER_CORE_MPPS} Mpps {verdict}{offered}",
            r.tsc_hz / 1e9,
            report::thousands(c)
        ));
    }
}

/// `b` minus `a` in a figure, summarised, and the rounds it is over: the
/// [`per_round_difference`]s when there are, else the difference of the rows' medians (one
/// "round").
fn difference(
    a: &Row,
    b: &Row,
    window: impl Fn(&Sample) -> Option<f64>,
    row: impl Fn(&Row) -> Option<f64>,
) -> Option<(Summary, usize)> {
    if let Some(d) = per_round_difference(a, b, window) {
        return Some((Summary::of(&d)?, d.len()));
    }
    Some((one(row(b)? - row(a)?), 1))
}

/// One figure as its own median, min and max.
fn one(v: f64) -> Summary {
    Summary {
        median: v,
        min: v,
        max: v,
    }
}

/// With `--prog-time`: each row's XDP program time (the program on the switch's ingress,
/// nanoseconds a run by the kernel's run-time statistics), and for the XDP tier's hit rows
/// what that time is over redirect-only's and parse-then-redirect's programs in this run.
/// That is the programs' own difference, without the driver's and the stack's work around
/// them, which the rows' cycles also hold.
pub fn annotate_prog_time(rows: &mut [Row]) {
    let mut notes = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(ns) = r.prog_ns_per_run else {
            continue;
        };
        let name = r.xdp_prog.as_deref().unwrap_or("?");
        let range = match (r.prog_ns_min, r.prog_ns_max) {
            (Some(lo), Some(hi)) if r.runs > 1 => format!(" [{lo:.0}..{hi:.0}]"),
            _ => String::new(),
        };
        notes.push((
            i,
            format!(
                "XDP program {name} on swin: {ns:.0} ns a run{range} (the kernel's run-time \
                 statistics, --prog-time)"
            ),
        ));
        if r.system != "flowpath-xdp" || r.case != "hit" {
            continue;
        }
        let other = |system: &str| {
            rows.iter()
                .find(|o| o.system == system && o.case == "hit" && o.class == r.class)
        };
        let ns_of = |s: &Sample| s.prog_ns_per_run;
        let ns_row = |r: &Row| r.prog_ns_per_run;
        let over = |system: &str| {
            let (d, rounds) = difference(other(system)?, r, ns_of, ns_row)?;
            let (m, lo, hi) = (d.median, d.min, d.max);
            let cycles = m * r.tsc_hz / 1e9;
            Some(if rounds > 1 {
                format!(
                    "{m:.0} ns a run [{lo:.0}..{hi:.0}] over {system}'s program (median of \
                     {rounds} per-round differences; {} cycles at the TSC rate)",
                    report::thousands(cycles)
                )
            } else {
                format!(
                    "{m:.0} ns a run over {system}'s program ({} cycles at the TSC rate)",
                    report::thousands(cycles)
                )
            })
        };
        let parts: Vec<String> = ["xdp-forward", systems::PARSE_FORWARD]
            .into_iter()
            .filter_map(over)
            .collect();
        if !parts.is_empty() {
            notes.push((i, format!("by program time: {}", parts.join("; "))));
        }
    }
    for (i, n) in notes {
        rows[i].notes.push(n);
    }
}

/// With `--gen-rate` (packets per second in all): mark rows whose generator offered less
/// than 95 % of that rate (median of the windows), so a paced comparison says when a row
/// was not offered the rate asked (a generator that cannot keep up, or one sharing its
/// CPU with the switch's receive).
pub fn annotate_pacing(rows: &mut [Row], gen_rate: Option<f64>) {
    let Some(asked) = gen_rate.map(|r| r / 1e6) else {
        return;
    };
    for r in rows.iter_mut() {
        if r.system == "trafgen" {
            continue; // --gen-rate paces flowpath gen only
        }
        let Some(offered) = r.offered_mpps else {
            continue;
        };
        if offered < 0.95 * asked {
            r.notes.push(format!(
                "PACED BELOW THE RATE ASKED: the generator offered {offered:.3} of the {asked:.3} Mpps asked (--gen-rate)"
            ));
        }
    }
}

/// Mark rows whose rate is within 10 % of what the generator alone reaches for that case:
/// there the generator, not the switch, may be the limit.
pub fn annotate_generator_bound(rows: &mut [Row]) {
    let gen: Vec<((String, String), f64)> = rows
        .iter()
        .filter(|r| r.system == "generator")
        .filter_map(|r| Some(((r.case.clone(), r.class.clone()), r.mpps?)))
        .collect();
    for r in rows.iter_mut() {
        if r.system == "generator" || r.system == "trafgen" {
            continue;
        }
        let Some(m) = r.mpps else { continue };
        if let Some((_, g)) = gen
            .iter()
            .find(|((case, class), _)| *case == r.case && *class == r.class)
        {
            if m >= 0.9 * g {
                r.notes.push(format!(
                    "GENERATOR-BOUND: the generator alone reaches {g:.3} Mpps"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_offered_less_than_the_paced_rate_says_so() {
        let mk = |system: &str, offered: Option<f64>| Row {
            system: system.into(),
            offered_mpps: offered,
            ..Row::default()
        };
        let mut rows = vec![
            mk("xdp-forward", Some(1.96)),
            mk("flowpath-xdp", Some(1.66)),
            mk("trafgen", Some(0.4)),
            mk("linux", None),
        ];
        annotate_pacing(&mut rows, None);
        assert!(rows.iter().all(|r| r.notes.is_empty()), "unpaced: no notes");
        annotate_pacing(&mut rows, Some(2e6));
        assert!(rows[0].notes.is_empty(), "1.96 of 2: within 5 %");
        assert!(rows[1].notes[0].contains("offered 1.660 of the 2.000 Mpps asked"));
        assert!(rows[2].notes.is_empty(), "trafgen is not paced");
        assert!(rows[3].notes.is_empty(), "nothing offered to judge");
    }

    #[test]
    fn generator_bound_rows_are_marked() {
        let mk = |s: &str, m: f64| Row {
            system: s.into(),
            case: "hit".into(),
            class: "ipv4".into(),
            mpps: Some(m),
            ..Row::default()
        };
        let mut rows = vec![
            mk("generator", 1.0),
            mk("linux", 0.95),
            mk("ovs-afxdp", 0.3),
        ];
        rows.push(Row {
            class: "vxlan_decap".into(),
            ..mk("flowpath-afxdp", 0.95)
        });
        annotate_generator_bound(&mut rows);
        assert!(rows[1].notes.iter().any(|n| n.contains("GENERATOR-BOUND")));
        assert!(rows[2].notes.is_empty());
        assert!(rows[0].notes.is_empty());
        assert!(rows[3].notes.is_empty(), "another class's generator row");
    }

    #[test]
    fn the_xdp_tier_row_is_judged_against_redirect_only_by_the_figure_that_applies() {
        let mk = |s: &str, class: &str, m: f64, cycles: f64, busy: f64| Row {
            system: s.into(),
            case: "hit".into(),
            class: class.into(),
            mpps: Some(m),
            cycles_per_packet: Some(cycles),
            cpu_busy_pct: Some(busy),
            ..Row::default()
        };
        // The tier's note when redirect-only's CPU was `fwd_busy` % busy.
        let note = |fwd_busy: f64| {
            let mut rows = vec![
                mk("flowpath-xdp", "ipv4", 2.0, 500.0, 99.0),
                mk("xdp-forward", "ipv4", 4.0, 450.0, fwd_busy),
            ];
            annotate_xdp_tier_ratio(&mut rows);
            assert!(rows[1].notes.is_empty());
            rows[0].notes.join("; ")
        };
        // Both saturated: Mpps decides (2.0 / 4.0 = 0.50x, although cycles say 0.90x).
        let n = note(98.0);
        assert!(n.contains("0.50x by Mpps, 0.90x by cycles/pkt"), "{n}");
        assert!(n.contains("judged by Mpps"), "{n}");
        assert!(n.contains("NOT met"), "{n}");
        // The generator set the rate (86 % busy): the cycles decide.
        let n = note(86.0);
        assert!(n.contains("judged by cycles/pkt"), "{n}");
        assert!(n.contains("(tier 99%, redirect-only 86%)"), "{n}");
        assert!(n.contains("target >= 0.8x met"), "{n}");
        // No redirect-only row of that class, or a miss row: no note.
        let mut rows = vec![
            mk("flowpath-xdp", "ipv6", 2.0, 500.0, 99.0),
            mk("xdp-forward", "ipv4", 4.0, 450.0, 98.0),
            Row {
                case: "miss".into(),
                ..mk("flowpath-xdp", "ipv4", 1.0, 900.0, 99.0)
            },
        ];
        annotate_xdp_tier_ratio(&mut rows);
        assert!(rows.iter().all(|r| r.notes.is_empty()));
    }

    #[test]
    fn the_parse_baseline_splits_the_tiers_cycles_over_redirect_only() {
        let sample = |c: f64| report::Sample {
            cycles_per_packet: Some(c),
            ..report::Sample::default()
        };
        let mk = |s: &str, class: &str, windows: &[f64]| {
            let mut w = windows.to_vec();
            w.sort_by(f64::total_cmp);
            Row {
                system: s.into(),
                case: "hit".into(),
                class: class.into(),
                cycles_per_packet: Some(w[w.len() / 2]),
                samples: windows.iter().map(|&c| sample(c)).collect(),
                ..Row::default()
            }
        };
        // Three rounds; the second a slow spell for all rows. Per round: reading 100, 150,
        // 80; the tier's own work 120, 200, 140.
        let mut rows = vec![
            mk("flowpath-xdp", "ipv4", &[1120.0, 1650.0, 1120.0]),
            mk("xdp-forward", "ipv4", &[900.0, 1300.0, 900.0]),
            mk(systems::PARSE_FORWARD, "ipv4", &[1000.0, 1450.0, 980.0]),
            mk("flowpath-xdp", "ipv6", &[1300.0]),
            mk("xdp-forward", "ipv6", &[900.0]),
        ];
        annotate_xdp_parse_split(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(n.contains("100 [80..150] reading and parsing"), "{n}");
        assert!(n.contains("140 [120..200] the tier's lookup"), "{n}");
        assert!(n.contains("medians of 3 per-round differences"), "{n}");
        let n = rows[2].notes.join("; ");
        assert!(n.contains("costs 100 [80..150] cycles a packet"), "{n}");
        // Redirect-only gets no note; a class without the parse row gets none.
        assert!(rows[1].notes.is_empty());
        assert!(rows[3].notes.is_empty() && rows[4].notes.is_empty());
        // Windows that do not pair up: the rows' medians (1,120 - 980 = 140 tier's own).
        let mut rows = vec![
            mk("flowpath-xdp", "ipv4", &[1120.0]),
            mk("xdp-forward", "ipv4", &[900.0, 1300.0, 900.0]),
            mk(systems::PARSE_FORWARD, "ipv4", &[1000.0, 1450.0, 980.0]),
        ];
        annotate_xdp_parse_split(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(n.contains("100 reading and parsing"), "{n}");
        assert!(n.contains("120 the tier's lookup"), "{n}");
        assert!(n.contains("the rows' medians"), "{n}");
    }

    #[test]
    fn the_xdp_tier_hit_row_is_judged_per_core_equivalent() {
        let mk = |s: &str, case: &str, cycles: f64, offered: f64| Row {
            system: s.into(),
            case: case.into(),
            class: "ipv4".into(),
            mpps: Some(1.0),
            cycles_per_packet: Some(cycles),
            offered_mpps: Some(offered),
            tsc_hz: 2.6e9,
            ..Row::default()
        };
        let mut rows = vec![
            mk("flowpath-xdp", "hit", 700.0, 2.0),
            mk("flowpath-xdp", "hit", 1300.0, 4.0),
            mk("flowpath-xdp", "miss", 700.0, 2.0),
            mk("xdp-forward", "hit", 400.0, 2.0),
        ];
        annotate_xdp_tier_per_core(&mut rows);
        // 2.6 GHz / 700 cycles = 3.71 Mpps: met, judged by the cycles (2.0 offered).
        let n = rows[0].notes.join("; ");
        assert!(n.contains("per core equivalent: 3.71 Mpps"), "{n}");
        assert!(n.contains("700 busy cycles"), "{n}");
        assert!(n.contains("target >= 3.5 Mpps met"), "{n}");
        assert!(n.contains("offered 2.00 Mpps, less than the target"), "{n}");
        // 2.6 GHz / 1,300 = 2.00: not met, although 4.0 was offered.
        let n = rows[1].notes.join("; ");
        assert!(
            n.contains("2.00 Mpps (TSC 2.600 GHz / 1,300 busy cycles"),
            "{n}"
        );
        assert!(n.contains("NOT met; offered 4.00 Mpps"), "{n}");
        assert!(rows[2].notes.is_empty() && rows[3].notes.is_empty());
    }

    #[test]
    fn two_worker_rows_get_their_ratio_and_say_when_it_cannot_be_judged() {
        let mk = |s: &str, m: f64, offered: f64, workers: Vec<u64>| Row {
            system: s.into(),
            case: "hit".into(),
            class: "ipv4".into(),
            mpps: Some(m),
            offered_mpps: Some(offered),
            worker_packets: workers,
            ..Row::default()
        };
        let rows = || {
            vec![
                mk("flowpath-afxdp", 0.5, 3.0, vec![]),
                mk(systems::TWO_WORKERS, 0.95, 3.0, vec![100, 90]),
            ]
        };
        let mut r = rows();
        annotate_scaling(&mut r, 4);
        assert!(r[0].notes.is_empty());
        let n = r[1].notes.join("; ");
        assert!(n.contains("packets per worker: 100 / 90"), "{n}");
        assert!(n.contains("1->2 workers: 1.90x"), "{n}");
        assert!(n.contains("target >= 1.8x met"), "{n}");
        let mut r = rows();
        annotate_scaling(&mut r, 2);
        let n = r[1].notes.join("; ");
        assert!(
            n.contains("GENERATOR-BOUND: 2 workers and 2 generators"),
            "{n}"
        );
        assert!(n.contains("not judged"), "{n}");
        let mut r = rows();
        r[1].offered_mpps = Some(1.0);
        annotate_scaling(&mut r, 8);
        assert!(r[1]
            .notes
            .join(";")
            .contains("offered 1.000 Mpps ~ delivered"));
    }

    #[test]
    fn program_time_notes_give_each_row_its_ns_and_the_tier_its_difference_by_round() {
        // Three interleaved rounds; a row's windows carry the program time (--prog-time).
        let mk = |s: &str, prog: &str, ns: [f64; 3]| {
            let mut r = Row {
                system: s.into(),
                case: "hit".into(),
                class: "ipv4".into(),
                tsc_hz: 2.5e9,
                samples: ns
                    .iter()
                    .map(|&ns| report::Sample {
                        xdp_prog: Some(prog.into()),
                        prog_ns_per_run: Some(ns),
                        ..report::Sample::default()
                    })
                    .collect(),
                ..Row::default()
            };
            r.summarise();
            r
        };
        let mut rows = vec![
            mk("flowpath-xdp", "flow_tier", [180.0, 220.0, 200.0]),
            mk("xdp-forward", "xdp_fwd_all", [80.0, 100.0, 60.0]),
            mk(
                systems::PARSE_FORWARD,
                "parse_forward",
                [100.0, 130.0, 110.0],
            ),
            mk("linux", "", [0.0; 3]),
        ];
        rows[3].samples.iter_mut().for_each(|s| {
            s.xdp_prog = None;
            s.prog_ns_per_run = None;
        });
        rows[3].summarise();
        annotate_prog_time(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(
            n.contains("XDP program flow_tier on swin: 200 ns a run [180..220]"),
            "{n}"
        );
        // Per round 100, 120, 140 over redirect-only: median 120 = 300 cycles at 2.5 GHz.
        assert!(
            n.contains("120 ns a run [100..140] over xdp-forward's program (median of 3 per-round differences; 300 cycles"),
            "{n}"
        );
        // Per round 80, 90, 90 over parse-then-redirect.
        assert!(
            n.contains("90 ns a run [80..90] over xdp-parse-forward's program"),
            "{n}"
        );
        let n = rows[1].notes.join("; ");
        assert!(
            n.contains("XDP program xdp_fwd_all on swin: 80 ns a run [60..100]"),
            "{n}"
        );
        assert!(
            !n.contains("by program time"),
            "only the tier compares: {n}"
        );
        assert!(rows[3].notes.is_empty(), "no program time, no note");

        // Without a window-by-window match (one row lost a round) the medians' difference:
        // 200 - 100 (the upper middle of redirect-only's two windows, 80 and 100).
        rows[1].samples.pop();
        rows[1].summarise();
        rows[0].notes.clear();
        annotate_prog_time(&mut rows);
        let n = rows[0].notes.join("; ");
        assert!(
            n.contains("100 ns a run over xdp-forward's program (250 cycles"),
            "{n}"
        );
    }
}
