//! `flowpath bench openflow --markdown`: the run as one Markdown table under a caption
//! naming the command, machine and date, each flowpath rate beside ovs-vswitchd's by the
//! same method in the same run.

use super::results::OpenFlowResults;
use flowpath_report::grouped;

fn rate(x: f64) -> String {
    grouped(x.round() as u64)
}

/// The table: one row per system and flow_mod method, then the packet side's figures.
pub fn markdown(r: &OpenFlowResults) -> String {
    let mut rows: Vec<Vec<String>> = r
        .flow_mod
        .iter()
        .map(|x| {
            vec![
                format!(
                    "{} flow_mods, {}",
                    grouped(u64::from(x.flow_mods)),
                    x.method
                ),
                x.system.clone(),
                format!(
                    "{}/s [{}–{}]",
                    rate(x.flow_mods_per_s.median),
                    rate(x.flow_mods_per_s.min),
                    rate(x.flow_mods_per_s.max)
                ),
                x.ratio_to_ovs.map_or(String::new(), |q| format!("{q:.2}x")),
            ]
        })
        .collect();
    rows.extend(packet_rows(r));
    for f in &r.failures {
        rows.push(vec![
            "FAILED".into(),
            String::new(),
            f.clone(),
            String::new(),
        ]);
    }
    let peer = match (&r.ovs_version, &r.ovs_skipped) {
        (Some(v), _) => format!("{v} (netdev datapath, private run and db directories)"),
        (None, Some(why)) => format!("not run: {why}"),
        _ => "not run".into(),
    };
    let what = format!(
        "OpenFlow 1.3 over TCP loopback with the bench as the client; ovs-vswitchd: {peer}. \
         Wall-clock rates, median of the runs [min–max]; \"vs OVS\" is a rate over \
         ovs-vswitchd's by the same method in this run."
    );
    flowpath_report::markdown::captioned(
        &what,
        flowpath_base::clock::tsc_hz() / 1e9,
        &["measurement", "system", "result", "vs OVS"],
        &rows,
    )
}

/// The packet side's figures: round trips, the packet-in storm, traffic during flow_mods.
fn packet_rows(r: &OpenFlowResults) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = |what: String, result: String| {
        rows.push(vec![what, "flowpath".into(), result, String::new()]);
    };
    for x in &r.round_trip {
        row(
            format!("packet_in → packet_out round trip, worker {}", x.worker),
            format!(
                "median {:.0} µs, p99 {:.0} µs ({} frames, {} mismatches)",
                x.median_us,
                x.p99_us,
                grouped(u64::from(x.frames)),
                x.data_mismatches
            ),
        );
    }
    if let Some(x) = &r.storm {
        row(
            format!(
                "{} misses in {:.1} s at the default packet-in limit",
                grouped(x.offered),
                x.seconds
            ),
            format!(
                "{} packet-ins (bound {:.0}), {} dropped by the limit",
                grouped(x.delivered),
                x.bound,
                grouped(x.packet_ins_rate_dropped)
            ),
        );
    }
    if let Some(t) = &r.traffic {
        row(
            format!(
                "established flows while {} flow_mods arrive",
                grouped(u64::from(t.flow_mods))
            ),
            format!(
                "{} sent, {} delivered, {} lost",
                grouped(t.injected),
                grouped(t.transmitted),
                t.lost
            ),
        );
    }
    rows
}
