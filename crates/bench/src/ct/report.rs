//! The ct cases in the bench's outputs: their own Markdown table (each row with its peer
//! from the same run) and their lines under the terminal table.

use super::CtFigures;
use crate::machine::Machine;
use crate::runner::CaseResult;
use flowpath_report::thousands;
use std::fmt::Write;

fn cyc(x: f64) -> String {
    if x >= 1000.0 {
        thousands(x)
    } else {
        format!("{x:.1}")
    }
}

/// The row's peer: a case measured in the same run, or the case's own peer.
fn peer(r: &CaseResult, ct: &CtFigures, all: &[CaseResult]) -> String {
    // The first of `names` measured in the same run.
    let other = |names: &[&str]| {
        names
            .iter()
            .find_map(|&name| {
                let o = all.iter().find(|o| o.case == name)?;
                Some(format!(
                    "{:.1}x `{name}`",
                    r.cycles_per_packet / o.cycles_per_packet
                ))
            })
            .unwrap_or_default()
    };
    match r.case.as_str() {
        "ct_new" => other(&["ct_established", "emc_hit"]),
        "ct_1m" => other(&["ct_established", "many_flows"]),
        "ct_synflood" => match (ct.retained, ct.retained_min, ct.retained_max) {
            (Some(k), Some(lo), Some(hi)) => format!(
                "A kept {:.1} % [{:.1}–{:.1}] under the flood",
                100.0 * k,
                100.0 * lo,
                100.0 * hi
            ),
            _ => String::new(),
        },
        "ct_established_2w" => match (ct.mpps_two_workers, ct.mpps_one_worker) {
            (Some(two), Some(one)) => format!("{:.2}x one worker ({one:.2} Mpps)", two / one),
            _ => String::new(),
        },
        _ => match (&ct.peer, ct.peer_cycles_per_packet) {
            (Some(name), Some(c)) => format!("{:.1}x {name}", r.cycles_per_packet / c),
            _ => String::new(),
        },
    }
}

/// What the row has per connection (or of the flood).
fn per_connection(ct: &CtFigures) -> String {
    let mut parts = Vec::new();
    if let (Some(c), Some(s)) = (ct.cycles_per_connection, ct.connections_per_sec) {
        parts.push(format!("{} cycles, {} conn/s", cyc(c), thousands(s)));
    }
    if let Some(b) = ct.bytes_per_connection {
        parts.push(format!("{b:.0} B"));
    }
    if let Some(k) = ct.nat_replies {
        parts.push(format!("{k} replies to NATed tuples"));
    }
    if let Some(f) = ct.flood_pps {
        parts.push(format!("flood {} SYN/s taken", thousands(f)));
    }
    parts.join("; ")
}

/// `--markdown` for the ct rows of `results` (empty if there are none).
pub fn markdown(results: &[CaseResult], machine: &Machine) -> String {
    let rows: Vec<Vec<String>> = results
        .iter()
        .filter_map(|r| r.ct.as_ref().map(|ct| (r, ct)))
        .map(|(r, ct)| {
            vec![
                format!("`{}`", r.case),
                format!("{:.2}", r.mpps),
                format!(
                    "{} [{}–{}]",
                    cyc(r.cycles_per_packet),
                    cyc(r.cycles_min),
                    cyc(r.cycles_max)
                ),
                peer(r, ct, results),
                per_connection(ct),
                thousands(ct.tracked as f64),
                format!("{:.0}", 100.0 * ct.delivered_share),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let runs = results.iter().map(|r| r.runs).max().unwrap_or(0);
    let what = format!(
        "Connection tracking through the two-pass security-group pipeline (`ct(table=1,zone=1)`, then \
         commit new connections from port A, forward established ones): TSC cycles per packet on one core \
         (`ct_established_2w`: the pair's cycles per packet of both), median of {runs} runs [min–max], the \
         traffic written by the ports included (`generator_cycles` in the JSON); the peer is a case of the same \
         run or the case's own; per connection: `ct_new`'s whole connections (8 packets), `ct_1m`'s memory; \
         tracked: connections in the tracker at the end; out %: packets sent out of a port."
    );
    flowpath_report::markdown::captioned(
        &what,
        machine.tsc_ghz,
        &[
            "case",
            "Mpps",
            "cycles/packet [min–max]",
            "peer (same run)",
            "per connection",
            "tracked",
            "out %",
        ],
        &rows,
    )
}

/// The lines under the terminal table for the ct rows (empty if there are none).
pub fn text(results: &[CaseResult]) -> String {
    let mut s = String::new();
    for r in results {
        let Some(ct) = &r.ct else { continue };
        let _ = write!(
            s,
            "{}: {} tracked, {:.0} % sent out",
            r.case,
            ct.tracked,
            100.0 * ct.delivered_share,
        );
        if ct.generator_cycles > 0.0 {
            let _ = write!(
                s,
                ", writing the traffic {:.0} cycles/packet of it",
                ct.generator_cycles
            );
        }
        for part in [peer(r, ct, results), per_connection(ct)] {
            if !part.is_empty() {
                let _ = write!(s, "; {part}");
            }
        }
        if let Some(m) = &ct.memory_source {
            let _ = write!(s, " (memory: {m})");
        }
        let _ = writeln!(s);
    }
    s
}
