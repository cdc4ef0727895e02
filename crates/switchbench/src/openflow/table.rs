//! `flowpath bench openflow`'s terminal report: what ran where, then one section per
//! experiment with its table and what the figures mean.

use super::packets::Storm;
use super::results::OpenFlowResults;
use flowpath_report::grouped;
use flowpath_switch::openflow::OpenFlowConfig;
use std::fmt::Write as _;

fn rate(x: f64) -> String {
    grouped(x.round() as u64)
}

/// The terminal report.
pub fn table(r: &OpenFlowResults) -> String {
    let mut s = String::new();
    header(&mut s, r);
    flow_mod_rates(&mut s, r);
    round_trips(&mut s, r);
    if let Some(x) = &r.storm {
        storm(&mut s, x);
    }
    let _ = writeln!(s);
    traffic(&mut s, r);
    for f in &r.failures {
        let _ = writeln!(s, "FAILED: {f}");
    }
    let _ = writeln!(
        s,
        "\nAll figures are wall-clock times on a shared machine (other processes' load shows as\n\
         spread): compare systems within one run."
    );
    s
}

/// The machine, the command and whether OVS ran.
fn header(s: &mut String, r: &OpenFlowResults) {
    let m = &r.machine;
    let _ = writeln!(
        s,
        "flowpath bench openflow — OpenFlow 1.3 over TCP loopback, the bench as the client"
    );
    s.push_str(&m.lines(&format!("{} cores", m.cores)));
    match (&r.ovs_skipped, &r.ovs_version) {
        (Some(why), _) => {
            let _ = writeln!(s, "ovs-vswitchd: skipped — {why}");
        }
        (None, Some(v)) => {
            let _ = writeln!(
                s,
                "ovs-vswitchd: {v}, private ovsdb/run dirs, netdev bridge, no ports, ptcp listener"
            );
        }
        _ => {}
    }
    let _ = writeln!(s);
}

/// 1. Each system's flow_mod rate by each method, and the first error of each.
fn flow_mod_rates(s: &mut String, r: &OpenFlowResults) {
    let _ = writeln!(
        s,
        "1. flow_mod rate (distinct ADDs: table 0, priority 100, ip, nw_dst exact, output:1..4)"
    );
    let head = [
        "system",
        "method",
        "flow_mods",
        "runs",
        "flow_mods/s",
        "(min–max)",
        "seconds",
        "vs OVS",
        "errors",
        "rules after",
    ]
    .map(String::from);
    let rows: Vec<[String; 10]> = r
        .flow_mod
        .iter()
        .map(|x| {
            let ok = x.rules_after.iter().all(|&n| n == u64::from(x.flow_mods));
            [
                x.system.clone(),
                x.method.clone(),
                grouped(u64::from(x.flow_mods)),
                x.runs.to_string(),
                rate(x.flow_mods_per_s.median),
                format!(
                    "({}–{})",
                    rate(x.flow_mods_per_s.min),
                    rate(x.flow_mods_per_s.max)
                ),
                format!("{:.3}", x.seconds.median),
                x.ratio_to_ovs.map_or("-".into(), |q| format!("{q:.2}×")),
                x.errors.to_string(),
                if ok {
                    format!("{} each", grouped(u64::from(x.flow_mods)))
                } else {
                    format!("{:?} (WRONG)", x.rules_after)
                },
            ]
        })
        .collect();
    s.push_str(&flowpath_report::columns(&head, &rows));
    let _ = writeln!(
        s,
        "   Wall time from the first byte written to BARRIER_REPLY read (pre-encoded flow_mods, a\n   \
         writer and a reader thread), or of the whole ovs-ofctl process (file parsing included;\n   \
         it waits for a barrier after every flow_mod). flowpath runs in this process (channel\n   \
         threads beside the bench's); \"state file\" is what a real switch does: the barrier\n   \
         saves the rule set. vs OVS: median rate over ovs-vswitchd's by the same method."
    );
    for f in r
        .flow_mod
        .iter()
        .filter_map(|x| x.first_error.as_ref().map(|e| (x, e)))
    {
        let _ = writeln!(
            s,
            "   first error from {} ({}): {}",
            f.0.system, f.0.method, f.1
        );
    }
    let _ = writeln!(s);
}

/// 2. The packet_in → packet_out round trips, one row per worker idle mode.
fn round_trips(s: &mut String, r: &OpenFlowResults) {
    let _ = writeln!(
        s,
        "2. packet_in → packet_out round trip (in-process worker, ports 1 and 2 in memory)"
    );
    let head = [
        "worker",
        "frames",
        "median µs",
        "p99 µs",
        "(min–max) µs",
        "packet-ins/s",
        "data mismatches",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = r
        .round_trip
        .iter()
        .map(|x| {
            [
                x.worker.clone(),
                grouped(u64::from(x.frames)),
                format!("{:.0}", x.median_us),
                format!("{:.0}", x.p99_us),
                format!("({:.0}–{:.0})", x.min_us, x.max_us),
                rate(x.packet_ins_per_s),
                x.data_mismatches.to_string(),
            ]
        })
        .collect();
    s.push_str(&flowpath_report::columns(&head, &rows));
    if let Some(x) = r.round_trip.first() {
        let _ = writeln!(
            s,
            "   One frame at a time: inject on port 1 → table-miss flow CONTROLLER:65535 → PACKET_IN\n   \
             read by the bench → PACKET_OUT(in_port=1, output:2) → the frame sent on port 2.\n   \
             packet-ins/s = 1 / mean round trip. The packet-in rate limit was raised to {}/s for\n   \
             this (default: {}/s per port, burst {}).",
            grouped(u64::from(x.packet_in_rate)),
            OpenFlowConfig::default().packet_in_rate,
            OpenFlowConfig::default().packet_in_burst
        );
    }
}

/// The miss storm against the default packet-in limit, in a paragraph.
fn storm(s: &mut String, x: &Storm) {
    let _ =
        writeln!(
        s,
        "   Miss storm with the default limit ({}/s per port, burst {}): {} distinct misses\n   \
         offered over {:.2} s → {} packet-ins delivered (bound rate×s+burst = {:.0}: {}),\n   \
         {} dropped by the rate limit (packet_ins_rate_dropped), {} before the channel\n   \
         (controller queue full or miss budget; of them miss budget: {}).",
        x.packet_in_rate,
        x.packet_in_burst,
        grouped(x.offered),
        x.seconds,
        grouped(x.delivered),
        x.bound,
        if x.delivered as f64 <= x.bound { "within" } else { "EXCEEDED" },
        grouped(x.packet_ins_rate_dropped),
        grouped(x.dropped_before_channel),
        grouped(x.miss_budget_drops),
    );
}

/// 3. Established flows while flow_mods arrive, in a paragraph (nothing when skipped).
fn traffic(s: &mut String, r: &OpenFlowResults) {
    let Some(t) = &r.traffic else {
        return;
    };
    let _ = writeln!(s, "3. established flows while flow_mods arrive");
    let _ = writeln!(
        s,
        "   {} flows port 1 → 2 at {} pps offered; {} unrelated flow_mods + barrier in {:.3} s\n   \
         ({} errors). Injected {} ({} during the storm), transmitted {}: {}.\n   \
         Misses during the storm: {}, upcalls: {}; worker drops over the run: {}.",
        t.flows,
        rate(t.offered_pps),
        grouped(u64::from(t.flow_mods)),
        t.storm_seconds,
        t.flow_mod_errors,
        grouped(t.injected),
        grouped(t.injected_during_storm),
        grouped(t.transmitted),
        if t.lost == 0 {
            "nothing lost".to_string()
        } else {
            format!("{} LOST", t.lost)
        },
        grouped(t.misses_during_storm),
        grouped(t.upcalls_during_storm),
        grouped(t.worker_drops),
    );
}
